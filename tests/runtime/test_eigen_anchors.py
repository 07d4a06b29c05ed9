"""The eigensolver anchors of the GPU probe (bench/eigen_anchors.py), on the host.

Issue 29 compares kernelrt's eigenpairs with ``torch.lobpcg`` and cupyx's ``eigsh`` run to
kernelrt's accuracy. Without a GPU: the tolerances handed to them are checked at their worst
case (they must imply kernelrt's measure, and no more than that), the tracker that stops
torch.lobpcg is driven by a stand-in worker, the judging of a result is checked to refuse
pairs that are true but not the smallest, and the cupyx path runs with SciPy's ``eigsh``,
which takes the same arguments. torch.lobpcg itself runs where torch is installed.
"""

from __future__ import annotations

from pathlib import Path
from types import SimpleNamespace

import numpy as np
import pytest
from scipy.sparse.linalg import eigsh

from kernelrt.kernels.laplacian import MeshTopology, eigenpairs, noisy_icosphere

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture
def anchors(monkeypatch):
    monkeypatch.syspath_prepend(str(ROOT / "bench"))
    import eigen_anchors

    return eigen_anchors


@pytest.fixture(scope="module")
def mesh():
    """A noisy icosphere (642 vertices): no exactly multiple eigenvalues, so any Lanczos finds them all."""
    V, F = noisy_icosphere(3, 0.1, seed=3)
    L, m = MeshTopology(F, len(V)).assemble(V, "cpu")
    return L, m, eigenpairs(L, m, 10, backend="cpu")


def test_the_eigsh_tolerance_is_exactly_kernelrts_target_at_its_worst_case(anchors):
    m = np.array([0.5, 2.0, 1.0, 8.0])
    lam1 = 3.0
    tol = anchors.eigsh_tolerance(lam1, m)
    # y (unit) on the lightest vertex, its residual r (norm tol) on the heaviest, θ = λ₁
    y, r = np.array([1.0, 0, 0, 0]), np.array([0, 0, 0, tol])
    measure = np.linalg.norm(np.sqrt(m) * r) / (lam1 * np.linalg.norm(np.sqrt(m) * y))
    assert measure == pytest.approx(anchors.TARGET, rel=1e-12)
    rng = np.random.default_rng(0)
    for _ in range(100):  # any other y, r and θ >= λ₁ stays below it
        y = rng.standard_normal(4)
        y /= np.linalg.norm(y)
        r = rng.standard_normal(4)
        r *= tol / np.linalg.norm(r)
        theta = lam1 * (1 + rng.random())
        assert np.linalg.norm(np.sqrt(m) * r) / (theta * np.linalg.norm(np.sqrt(m) * y)) <= anchors.TARGET * (1 + 1e-12)


def test_the_lobpcg_tolerance_is_exactly_kernelrts_target_at_its_worst_case(anchors):
    m = np.array([0.5, 2.0, 1.0, 8.0])
    lam1, a_norm = 3.0, 250.0
    tol = anchors.lobpcg_tolerance(lam1, m, a_norm)
    # torch locks a pair at ‖r‖ = tol ‖x‖ (A_norm + |θ| B_norm); worst: x on the lightest vertex,
    # θ = λ₁, B_norm = max(m)
    x = np.array([1.0, 0, 0, 0])
    r_norm = tol * (a_norm + lam1 * m.max())
    assert r_norm / (lam1 * np.linalg.norm(m * x)) == pytest.approx(anchors.TARGET, rel=1e-12)
    # the null pair (θ = 0) is measured against λ₁ and stays below the target
    assert tol * a_norm / (lam1 * m.min()) < anchors.TARGET


def _worker(X, R, E, step=1):
    return SimpleNamespace(X=X, R=R, E=E, ivars={"istep": step}, bvars={})


def test_the_tracker_stops_at_the_target_at_the_cap_and_not_before(anchors):
    rng = np.random.default_rng(1)
    n, k = 50, 4
    m = 1.0 + rng.random(n)
    X, E = rng.standard_normal((n, k)), np.array([0.0, 1.0, 2.0, 3.0])
    now = [0.0]
    stop = anchors.StopAtTarget(m[:, None], k, cap_s=10.0, host=np.asarray,
                                norms=lambda a: np.linalg.norm(a, axis=0), clock=lambda: now[0])
    far = _worker(X, 1e-3 * rng.standard_normal((n, k)), E, step=3)
    stop(far)
    assert not far.bvars and stop.stopped_by is None and stop.steps == 3 and stop.worst > anchors.TARGET
    near = _worker(X, 1e-14 * rng.standard_normal((n, k)), E, step=4)
    stop(near)
    assert near.bvars == {"force_stop": True} and stop.stopped_by == "target" and stop.worst <= anchors.TARGET
    late = anchors.StopAtTarget(m[:, None], k, cap_s=10.0, host=np.asarray,
                                norms=lambda a: np.linalg.norm(a, axis=0), clock=lambda: now[0])
    now[0] = 10.5
    stuck = _worker(X, 1e-3 * rng.standard_normal((n, k)), E, step=9)
    late(stuck)
    assert stuck.bvars == {"force_stop": True} and late.stopped_by == "cap"


def test_true_pairs_that_skip_an_eigenvalue_are_not_a_result(anchors, mesh):
    L, m, ref = mesh
    evals, evecs = np.asarray(ref.evals), np.asarray(ref.evecs)
    right = anchors._judged(L, m, evals, evecs, 1.0, ref.evals)
    assert right["met"] and right["same_eigenvalues"] and right["max_residual"] <= anchors.TARGET
    # the 2nd-10th and then the 11th pair: all true, residuals fine, but the null pair is missing
    more = eigenpairs(L, m, 11, backend="cpu")
    shifted = anchors._judged(L, m, np.asarray(more.evals)[1:], np.asarray(more.evecs)[:, 1:], 1.0, ref.evals)
    assert shifted["max_residual"] <= anchors.TARGET and shifted["pairs_met"] == 10
    assert not shifted["same_eigenvalues"] and not shifted["met"]


def test_eigsh_run_judges_scipys_eigsh_by_kernelrts_measure(anchors, mesh):
    L, m, ref = mesh
    lam1 = anchors.smallest_positive(ref.evals)
    out = anchors.eigsh_run(eigsh, lambda a: a, np.asarray, L, m, 10, cap_s=30.0, lam1=lam1, reference=ref.evals)
    # SciPy's tol is relative to each Ritz value, not cupyx's absolute one: on this mesh its
    # largest residual lands at 1.3e-11-1.1e-10 by start vector, so only the judging is exact
    assert out["max_residual"] < 1e-9 and out["max_abs_eval_diff"] <= 1e-9 and out["m_orthogonality"] < 1e-8, out
    assert out["met"] == (out["max_residual"] <= anchors.TARGET) and out["same_eigenvalues"]
    assert out["stopped_by"] == ("target" if out["met"] else "unmet")
    assert out["ncv"] == 42 and out["max_products"] >= out["ncv"] and out["tol"] == anchors.eigsh_tolerance(lam1, m)


def test_an_eigsh_without_v0_is_reseeded_before_each_call(anchors, mesh):
    # CuPy releases before eigsh took v0 draw the start from cupy.random: reseeded, every call starts alike
    L, m, ref = mesh
    seeds, starts, rng = [], [], {}

    def reseed(seed):
        seeds.append(seed)
        rng["g"] = np.random.default_rng(seed)

    def eigsh_without_v0(a, k=6, *, which="LM", ncv=None, maxiter=None, tol=0):
        starts.append(rng["g"].random(a.shape[0]))
        return eigsh(a, k=k, which=which, ncv=ncv, maxiter=maxiter, tol=tol, v0=starts[-1])

    out = anchors.eigsh_run(eigsh_without_v0, lambda a: a, np.asarray, L, m, 10, cap_s=30.0,
                            lam1=anchors.smallest_positive(ref.evals), reseed=reseed, reference=ref.evals, seed=7)
    assert seeds == [7, 7, 7] and all(np.array_equal(s, starts[0]) for s in starts)  # two timing passes, the run
    assert out["same_eigenvalues"] and out["one_pass_s"] > 0


def test_lobpcg_run_reaches_kernelrts_measure_or_stops_at_the_cap(anchors, mesh):
    torch = pytest.importorskip("torch")
    L, m, ref = mesh
    lam1 = anchors.smallest_positive(ref.evals)
    out = anchors.lobpcg_run(torch, L, m, 10, cap_s=60.0, lam1=lam1, device="cpu", reference=ref.evals)
    assert out["met"] and out["stopped_by"] == "target" and out["steps"] > 1, out
    assert out["max_abs_eval_diff"] <= 1e-9
    capped = anchors.lobpcg_run(torch, L, m, 10, cap_s=0.0, lam1=lam1, device="cpu", reference=ref.evals)
    assert capped["stopped_by"] == "cap" and not capped["met"] and capped["steps"] <= 2


def test_the_probes_eigen_anchors_time_kernelrt_and_say_why_an_anchor_skipped(monkeypatch, cpu):
    monkeypatch.syspath_prepend(str(ROOT / "bench"))
    import gpu_cases_extra
    from gpu_timing import Probe, SectionBudget

    probe = Probe(cpu, quick=True, anchor_cap=5.0)
    budget = SectionBudget("anchors", 120.0)
    rows = gpu_cases_extra._eigen_anchors(probe, budget)
    (row,) = [r for r in rows if "kernelrt eigenpairs" in r["case"]]
    assert row["vertices"] == 10242 and row["k"] == 50 and row["max_residual"] <= 1e-10 and row["seconds"] > 0
    skipped = {s["case"]: s["reason"] for s in budget.skipped}
    assert "cupy is not installed" in skipped["cupyx eigsh"] or any("cupyx" in r["case"] for r in rows)
    assert "torch.lobpcg" in skipped  # torch absent, or present and without a CUDA device
