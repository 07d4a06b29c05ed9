"""The eigenpairs routes: the Cholesky default against SciPy, its checks, reports, fallback and cohorts."""

import importlib.util
import logging

import numpy as np
import pytest

import kernelrt.kernels.laplacian as lap
from kernelrt.kernels.laplacian import eigen as eigen_module
from kernelrt.kernels.laplacian import factor as factor_module
from kernelrt.kernels.laplacian.lanczos import block_lanczos


def _dense(L, m, k):
    """Every eigenvalue, from LAPACK's dense eigh of the standardised matrix (N = 2562 here)."""
    s = 1.0 / np.sqrt(m)
    return np.linalg.eigh(s[:, None] * L.toarray() * s[None, :])[0][:k]


def _rel(a, b):
    nz = b > 1e-10
    return np.max(np.abs(a[nz] - b[nz]) / b[nz])


@pytest.fixture(scope="module")
def noisy4():
    V, F = lap.noisy_icosphere(4, 0.1)
    return lap.cotan_laplacian(V, F, "cpu")


# k = 20 and 30 cut multiplets of the icosphere (l = 4: 16..25, l = 5: 25..36)
@pytest.mark.parametrize("k", [20, 30])
@pytest.mark.parametrize("noisy", [False, True])
def test_cholesky_matches_scipy(k, noisy):
    V, F = lap.noisy_icosphere(4, 0.1) if noisy else lap.icosphere(4)
    L, m = lap.cotan_laplacian(V, F, "cpu")
    result = lap.eigenpairs(L, m, k, backend="cpu")
    assert result.method == "cholesky"
    # the bar is 1e-10 relative; measured <= 3e-14 (Ritz value error ~ residual² / gap).
    # Against dense LAPACK, not ARPACK: at k = 20 on the clean ico4, ARPACK (SpectralBrain's
    # route) returns only three of the four copies of λ = 19.866 and 19.876 in their place
    assert _rel(result.evals, _dense(L, m, k)) <= 1e-10
    assert result.m_orthonormality < 1e-12 and result.residuals.max() < 1e-10
    assert result.products > 0 and result.seconds > 0


def test_fallbacks_when_pymetis_or_cholespy_is_absent(noisy4, monkeypatch, caplog):
    L, m = noisy4
    real_find_spec = importlib.util.find_spec
    hidden = set()
    monkeypatch.setattr(factor_module.importlib.util, "find_spec",
                        lambda name, *a: None if name in hidden else real_find_spec(name, *a))
    default = lap.eigenpairs(L, m, 20, backend="cpu")
    if real_find_spec("pymetis") is not None:
        assert default.factor == "supernodal"
    hidden.add("pymetis")  # no METIS ordering: cholespy, where it is installed
    if real_find_spec("cholespy") is not None:
        assert lap.eigenpairs(L, m, 20, backend="cpu").factor == "cholespy"
    hidden.add("cholespy")
    with caplog.at_level(logging.INFO, logger="kernelrt.laplacian"):
        result = lap.eigenpairs(L, m, 20, backend="cpu")
    assert result.factor == "superlu" and result.route == "cholesky (superlu)"
    assert "neither pymetis nor cholespy is installed" in caplog.text and "SuperLU" in caplog.text
    with pytest.raises(ImportError, match="pip install cholespy"):
        lap.eigenpairs(L, m, 20, backend="cpu", factor="cholespy")
    with pytest.raises(ImportError, match="pip install pymetis"):
        lap.eigenpairs(L, m, 20, backend="cpu", factor="supernodal")
    monkeypatch.undo()
    assert _rel(result.evals, default.evals) <= 1e-10


def test_result_unpacks_and_reports(noisy4):
    L, m = noisy4
    result = lap.eigenpairs(L, m, 12, backend="cpu", method="shift-invert")
    evals, evecs = result
    assert evals is result.evals and evecs is result.evecs and evecs.shape == (L.shape[0], 12)
    assert result.factor is None and result.route == "shift-invert" and result.products is None
    assert "shift-invert: 12 pairs" in result.summary()
    assert result.residuals.shape == (12,) and result.residuals.max() < 1e-12


def test_two_components_are_refused_before_any_work(monkeypatch):
    V, F = lap.icosphere(3)
    F2 = np.vstack([F, F + len(V)])
    L, m = lap.cotan_laplacian(np.vstack([V, V + 3.0]), F2, "cpu")
    from kernelrt.kernels.laplacian import cholesky_route

    monkeypatch.setattr(cholesky_route, "ShiftedFactor", lambda *a: pytest.fail("factored a disconnected mesh"))
    for method in ("auto", "cholesky", "shift-invert", "dense"):
        with pytest.raises(lap.DisconnectedMeshError, match=r"2 connected components \(vertex counts 642, 642\)"):
            lap.eigenpairs(L, m, 10, backend="cpu", method=method)


def test_isolated_vertex_is_named():
    V, F = lap.icosphere(3)
    with pytest.warns(lap.DegenerateMeshWarning):
        L, m = lap.cotan_laplacian(np.vstack([V, [[5.0, 5.0, 5.0]]]), F, "cpu")
    with pytest.raises(lap.DisconnectedMeshError, match="1 of them single vertices, likely referenced by no face"):
        lap.eigenpairs(L, m, 10, backend="cpu")


def test_convergence_failure_says_what_was_reached(noisy4):
    L, m = noisy4
    with pytest.raises(lap.EigenConvergenceError, match=r"of 40 eigenpairs converged after 0 restarts") as info:
        lap.eigenpairs(L, m, 40, backend="cpu", method="cholesky", maxiter=0, tol=1e-15)
    assert info.value.evals.shape == (40,) and 0 <= info.value.n_converged < 40
    assert isinstance(info.value, RuntimeError)


def test_bad_arguments(noisy4):
    L, m = noisy4
    n = L.shape[0]
    with pytest.raises(ValueError, match="sigma must be a finite number < 0"):
        lap.eigenpairs(L, m, 5, backend="cpu", sigma=0.5)
    with pytest.raises(ValueError, match="m must be positive everywhere"):
        lap.eigenpairs(L, np.zeros(n), 5, backend="cpu")
    with pytest.raises(ValueError, match=rf"start must have shape \({n}, j\)"):
        lap.eigenpairs(L, m, 5, backend="cpu", start=np.ones(n))
    with pytest.raises(ValueError, match="factor must be 'auto', 'cholespy', 'supernodal' or 'superlu'"):
        lap.eigenpairs(L, m, 5, backend="cpu", factor="mkl")
    V, F = lap.icosphere(1)
    L1, m1 = lap.cotan_laplacian(V, F, "cpu")
    with pytest.raises(ValueError, match="use method='dense' for a mesh this small"):
        lap.eigenpairs(L1, m1, 10, backend="cpu", method="cholesky")
    assert lap.eigenpairs(L1, m1, 10, backend="cpu").method == "dense"  # auto picks dense when small


def test_progress_callable_and_quiet_bar_off_a_terminal(noisy4, capsys):
    L, m = noisy4
    seen = []
    lap.eigenpairs(L, m, 20, backend="cpu", progress=lambda done, k: seen.append((done, k)))
    assert seen and seen[-1] == (20, 20) and all(k == 20 for _, k in seen)
    lap.eigenpairs(L, m, 20, backend="cpu", progress=True)
    assert capsys.readouterr().err == ""  # pytest's stderr is no terminal: no bar frames


def test_sigma_scales_with_the_area():
    V, F = lap.noisy_icosphere(4, 0.1)
    L, m = lap.cotan_laplacian(V, F, "cpu")
    Ls, ms = lap.cotan_laplacian(100.0 * V, F, "cpu")  # area x 1e4: eigenvalues / 1e4
    assert eigen_module.default_sigma(ms) == pytest.approx(eigen_module.default_sigma(m) / 1e4, rel=1e-12)
    a, b = lap.eigenpairs(L, m, 20, backend="cpu"), lap.eigenpairs(Ls, ms, 20, backend="cpu")
    assert _rel(b.evals * 1e4, a.evals) <= 1e-10
    assert b.products == a.products  # the same iteration, scaled


def test_cohort_on_one_topology_equals_per_subject_solves():
    V, F = lap.icosphere(4)
    topo = lap.MeshTopology(F, len(V))
    for seed in range(3):
        L, m = topo.assemble(lap.noisy_icosphere(4, 0.1, seed=seed)[0], "cpu")
        unseeded = topo.eigenpairs(L, m, 20, backend="cpu", seed=False)
        single = lap.eigenpairs(L, m, 20, backend="cpu")
        np.testing.assert_array_equal(unseeded.evals, single.evals)  # same arithmetic, same bits
        seeded = topo.eigenpairs(L, m, 20, backend="cpu")  # from the previous subject's vectors
        assert _rel(seeded.evals, single.evals) <= 1e-10 and seeded.residuals.max() < 1e-10
        chebyshev = topo.eigenpairs(L, m, 20, backend="cpu", method="chebyshev")
        assert _rel(chebyshev.evals, single.evals) <= 1e-9
    Lo, mo = lap.cotan_laplacian(*lap.icosphere(3), "cpu")
    with pytest.raises(ValueError, match="does not have this topology's sparsity pattern"):
        topo.eigenpairs(Lo, mo, 5, backend="cpu")


def test_krylov_sizes_fit_the_mesh():
    from kernelrt.kernels.laplacian.cholesky_route import krylov_sizes

    # a large mesh: at least 70 new columns a restart cycle, 2.4k from k = 100 on
    assert krylov_sizes(50, 40962) == {"block": 8, "keep": 80, "basis": 150}
    assert krylov_sizes(200, 163842) == {"block": 8, "keep": 240, "basis": 480}
    for k, n in [(60, 162), (20, 77), (5, 61)]:  # a small mesh: the basis that fits, still restarting
        s = krylov_sizes(k, n)
        assert s["basis"] + 2 * s["block"] <= n and s["keep"] >= k + 16 and s["basis"] >= s["keep"] + 3 * s["block"]
    with pytest.raises(ValueError, match=r"needs N >= 76 vertices for k = 20 \(got N = 75\)"):
        krylov_sizes(20, 75)
    # where the basis is cut to the mesh, the route still finds the dense route's pairs
    L, m = lap.cotan_laplacian(*lap.icosphere(2), "cpu")
    cut = lap.eigenpairs(L, m, 60, backend="cpu", method="cholesky")
    np.testing.assert_allclose(cut.evals, lap.eigenpairs(L, m, 60, backend="cpu", method="dense").evals,
                               rtol=1e-10, atol=1e-12)


def test_block_lanczos_on_a_known_spectrum():
    # a diagonal operator with multiplets (3, 5, 7 equal values) around the cut at k = 10
    theta = np.concatenate([[10.0], np.full(3, 5.0), np.full(5, 3.0), np.full(7, 2.0), np.linspace(1.5, 0.01, 400)])
    top = np.sort(theta)[::-1][:10]
    found, Y, residuals, info = block_lanczos(lambda X: theta[:, None] * X, theta.size, 10, block=4,
                                              keep=24, basis=40, tol=1e-12)
    np.testing.assert_allclose(found, top, rtol=1e-12)
    assert np.abs(Y.T @ Y - np.eye(10)).max() < 1e-13 and residuals.max() <= 1e-12
    assert info["products"] % 4 == 0
    # the vectors are the basis buffer's start, the buffer shrunk to them: no whole basis kept
    assert Y.flags.f_contiguous and Y.base is not None and Y.base.nbytes == Y.nbytes


def test_block_lanczos_in_a_workspace_mapped_elsewhere():
    # the Cholesky route maps the basis' pages on another thread while it factors: the same
    # iteration in that memory, and a workspace of other sizes refused before any work
    from kernelrt.kernels.laplacian.lanczos import basis_workspace, map_pages

    theta = np.linspace(2.0, 0.01, 300)
    apply = lambda X: theta[:, None] * X  # noqa: E731
    sizes = {"block": 4, "keep": 20, "basis": 36}
    plain = block_lanczos(apply, theta.size, 8, **sizes, tol=1e-12)
    workspace = basis_workspace(theta.size, 8, **sizes)
    map_pages(workspace)
    given = block_lanczos(apply, theta.size, 8, **sizes, tol=1e-12, workspace=workspace)
    assert np.array_equal(given[0], plain[0]) and np.array_equal(given[1], plain[1])
    assert given[1].base is workspace and workspace.shape == (8, theta.size)  # shrunk to the result
    calls = []
    for wrong in (np.empty((10, theta.size)), basis_workspace(theta.size, 8, **sizes).astype(np.float32),
                  np.asfortranarray(basis_workspace(theta.size, 8, **sizes))):
        with pytest.raises(ValueError, match="workspace must be basis_workspace"):
            block_lanczos(lambda X: calls.append(1) or apply(X), theta.size, 8, **sizes, workspace=wrong)
    assert not calls


def test_cholesky_route_leaves_no_mapping_thread(noisy4):
    import threading

    L, m = noisy4
    lap.eigenpairs(L, m, 10, backend="cpu", method="cholesky")
    assert not [t for t in threading.enumerate() if t.name == "kernelrt-basis-pages"]


@pytest.mark.parametrize("kappa", [2.0, 1e3, 1e6])
def test_orthonormal_block_takes_a_second_pass_where_one_is_not_enough(kappa):
    # One Cholesky QR pass leaves QᵀQ - I ~ κ² ε (1e-4 at κ = 1e6); the block takes the
    # second pass above CHOLQR_ONE_PASS, so Q is orthonormal to rounding for any κ here
    from kernelrt.kernels.laplacian.lanczos import CHOLQR_ONE_PASS, _orthonormal_block

    rng = np.random.default_rng(7)
    U, _ = np.linalg.qr(rng.standard_normal((500, 8)))
    Vt, _ = np.linalg.qr(rng.standard_normal((8, 8)))
    W = np.asfortranarray(U @ np.diag(np.geomspace(1.0, 1.0 / kappa, 8)) @ Vt)
    out = np.empty((500, 8), order="F")
    R, D = _orthonormal_block(W, out[:, :0], rng, out)
    assert D.shape == (0, 8)
    assert (np.linalg.cond(W) > CHOLQR_ONE_PASS) == (kappa > 10)
    assert np.abs(out.T @ out - np.eye(8)).max() < 1e-13
    np.testing.assert_allclose(out @ R, W, rtol=0, atol=1e-13)


@pytest.mark.parametrize("dependent", [False, True])
def test_orthonormal_block_writes_q_into_the_basis(dependent):
    # W = V D + Q R with Q orthonormal, orthogonal to the basis, written into the basis' next
    # columns; a dependent column (here a copy of another) gets a direction of its own with a
    # row of R at rounding level, so the basis keeps growing and V D + Q R still reproduces W
    from kernelrt.kernels.laplacian.lanczos import _orthonormal_block

    rng = np.random.default_rng(6)
    V = np.empty((400, 12), order="F")
    V[:, :4], _ = np.linalg.qr(rng.standard_normal((400, 4)))
    W = rng.standard_normal((400, 4))
    W -= V[:, :4] @ (V[:, :4].T @ W)
    if dependent:
        W[:, 3] = W[:, 1]
    W = np.asfortranarray(W)
    original = W.copy()
    R, D = _orthonormal_block(W, V[:, :4], rng, V[:, 4:8])
    Q = V[:, 4:8]
    assert np.abs(Q.T @ Q - np.eye(4)).max() < 1e-13 and np.abs(V[:, :4].T @ Q).max() < 1e-13
    np.testing.assert_allclose(V[:, :4] @ D + Q @ R, original, rtol=0, atol=1e-12 * np.abs(original).max())
    if dependent:
        assert np.abs(R[3]).max() <= 1e-13 * np.abs(R).max()
    with pytest.raises(ValueError, match="column-major"):
        _orthonormal_block(np.ascontiguousarray(original), V[:, :4], rng, V[:, 4:8])



@pytest.mark.parametrize("gap", [1e-5, 1e-8])  # below 1e-10 a column is replaced (previous test)
def test_orthonormal_block_keeps_q_orthogonal_to_the_basis_when_its_columns_nearly_coincide(gap):
    # Q R equals W to ~ε‖W‖, so the direction that tells two nearly equal columns apart
    # (a fraction `gap` of the block) comes out ~ε / gap off, the basis' directions included:
    # without the extra pass against the basis, Q was 1e-8 off orthogonal to it at gap = 1e-8.
    # V D + Q R still reproduces W (D holds what that pass moved onto the basis).
    from kernelrt.kernels.laplacian.lanczos import _orthonormal_block

    rng = np.random.default_rng(8)
    V = np.empty((400, 12), order="F")
    V[:, :4], _ = np.linalg.qr(rng.standard_normal((400, 4)))
    W = rng.standard_normal((400, 4))
    W[:, 3] = W[:, 1] + gap * rng.standard_normal(400)
    for _ in range(2):
        W -= V[:, :4] @ (V[:, :4].T @ W)
    W = np.asfortranarray(W)
    original = W.copy()
    R, D = _orthonormal_block(W, V[:, :4], rng, V[:, 4:8])
    Q = V[:, 4:8]
    assert np.abs(V[:, :4].T @ Q).max() < 1e-13 and np.abs(Q.T @ Q - np.eye(4)).max() < 1e-13
    np.testing.assert_allclose(V[:, :4] @ D + Q @ R, original, rtol=0, atol=1e-12 * np.abs(original).max())


@pytest.mark.parametrize("mesh, k", [("noisy4", 20), ("ico5", 50)])
def test_a_subject_seen_twice_starts_from_its_own_vectors(mesh, k):
    # A cohort's topology seeds each solve with the previous subject's vectors; for the same
    # subject again they span the wanted invariant subspace to the last bits, so the Krylov
    # space runs out after ~k / 8 blocks and the next blocks' columns nearly coincide. That
    # stalled the iteration (1 of 20 pairs after 100 restarts); now it is the fastest case.
    V, F = lap.noisy_icosphere(4, 0.1) if mesh == "noisy4" else lap.icosphere(5)
    topo = lap.MeshTopology(F, len(V))
    L, m = topo.assemble(V, "cpu")
    first = topo.eigenpairs(L, m, k, backend="cpu")
    again = topo.eigenpairs(L, m, k, backend="cpu", maxiter=10)
    assert again.residuals.max() < 1e-10 and _rel(again.evals, first.evals) <= 1e-12
    assert again.products < first.products / 2


def test_cholesky_route_runs_on_one_blas_thread(noisy4, monkeypatch):
    """The factor, the iteration and the last Rayleigh–Ritz see a BLAS pool of one, whatever the caller's.

    The factor's BLAS calls are on small supernodes; a pool of two made the numeric factor
    2-3x slower in a cohort, where the previous subject's multithreaded calls left OpenBLAS's
    threads spinning (docs/laplacian.md, "Eigenpairs": "Two cores, used explicitly").
    """
    from threadpoolctl import threadpool_limits

    from kernelrt.kernels.laplacian import cholesky_route
    from tests.support.laplacian_cases import blas_pool as pool

    seen = {}

    class Recording(factor_module.ShiftedFactor):
        def __init__(self, *args):
            seen["factor"] = pool()
            super().__init__(*args)

    def recording_eigh(a, *args, **kwargs):
        seen["rayleigh_ritz"] = pool()
        return eigh(a, *args, **kwargs)

    eigh = cholesky_route.eigh
    monkeypatch.setattr(cholesky_route, "ShiftedFactor", Recording)
    monkeypatch.setattr(cholesky_route, "eigh", recording_eigh)
    L, m = noisy4
    with threadpool_limits(limits=2, user_api="blas"):  # a pool of two outside, whatever the machine
        if pool() < 2:
            pytest.skip("this BLAS does not run a pool of two")
        result = lap.eigenpairs(L, m, 12, backend="cpu", method="cholesky",
                                progress=lambda done, k: seen.setdefault("iteration", pool()))
    assert seen == {"factor": 1, "iteration": 1, "rayleigh_ritz": 1}
    assert result.residuals.max() < 1e-9
