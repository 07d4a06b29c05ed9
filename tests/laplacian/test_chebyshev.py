"""Chebyshev-filtered subspace iteration against SciPy's shift-invert ARPACK (CPU backend)."""

import numpy as np
import pytest
import scipy.sparse as sp
from kernelrt.kernels import laplacian as lap
from kernelrt.kernels.laplacian.chebyshev import chebyshev_eigenpairs
from kernelrt.kernels.laplacian.eigen_report import EigenConvergenceError, report
from scipy.sparse.linalg import eigsh

TOL = 1e-10
MESHES = {"icosphere3": lambda: lap.icosphere(3), "noisy3": lambda: lap.noisy_icosphere(3, 0.1)}


@pytest.fixture(scope="module", params=sorted(MESHES))
def mesh(request):
    L, m = lap.cotan_laplacian(*MESHES[request.param](), backend="cpu")
    # ARPACK itself can drop a copy of an exactly degenerate eigenvalue when k cuts a multiplet:
    # eigsh(L, 20) lost one of the four 19.470 of icosphere(3) in 9 of 40 runs (measured). With 25
    # (l <= 4 whole) its first 20 matched a dense eigh to 1e-12 in 100 of 100 seeded runs.
    v0 = np.random.default_rng(0).standard_normal(L.shape[0])
    ref = np.sort(eigsh(L, 25, M=sp.diags(m), sigma=-0.01, v0=v0)[0])[:20]  # tol = 0: machine precision
    return L, m, np.maximum(ref, 0.0)


@pytest.fixture(scope="module")
def noisy():
    return lap.cotan_laplacian(*lap.noisy_icosphere(3, 0.1), backend="cpu")


# k = 16 ends with the l = 3 multiplet (l <= 3: 16 pairs); k = 20 cuts through l = 4 (16..24)
@pytest.mark.parametrize("order", ["rcm", None])
@pytest.mark.parametrize("k", [16, 20])
def test_matches_arpack_and_is_m_orthonormal(mesh, k, order):
    L, m, ref = mesh
    evals, evecs, info = chebyshev_eigenpairs(L, m, k, backend="cpu", tol=TOL, order=order)
    assert evals.shape == (k,) and evecs.shape == (L.shape[0], k) and info["converged"]
    assert np.all(np.diff(evals) >= 0) and 0.0 <= evals[0] < 1e-12 * evals[-1]  # the null pair, clipped at 0
    # 1e-9 relative (to λ_1 for the null pair). The linear bound |θ - λ| <= ‖r‖ <= tol θ_k would
    # allow up to tol λ_20 / λ_1 ≈ 1e-9 at λ_1; a Ritz value's error is in fact ‖r‖² / gap (the
    # block holds each multiplet whole), ~1e-18 here; measured <= 5e-15, i.e. rounding of both routes
    scale = np.maximum(ref[:k], ref[1])
    np.testing.assert_array_less(np.abs(evals - ref[:k]) / scale, 1e-9)
    assert np.abs(evecs.T @ (m[:, None] * evecs) - np.eye(k)).max() < 1e-10
    assert np.ptp(evecs[:, 0]) < 1e-8 * np.abs(evecs[:, 0]).max()  # the constant vector
    # Internal criterion ‖A y - θ y‖ <= tol θ_k, A = S L S; back in L v = λ M v the relative residual
    # is at most sqrt(max m / min m) tol θ_k / max(λ, λ_1) (S's extreme scalings), 1% for rounding
    bound = 1.01 * np.sqrt(m.max() / m.min()) * TOL * evals[-1] / np.maximum(evals, ref[1])
    np.testing.assert_array_less(report(L, m, evals, evecs)[0], bound)
    assert info["products"] > 0 and info["block"] >= k + 8 and info["lambda_max"] >= ref[-1]


def test_lambda_max_bounds_the_spectrum(noisy):
    L, m = noisy
    _, _, info = chebyshev_eigenpairs(L, m, 4, backend="cpu")
    top = eigsh(L, 1, M=sp.diags(m), which="LA")[0][0]
    assert top <= info["lambda_max"] <= 3 * top  # Gershgorin: an upper bound, and not a wild one


def test_v0_from_a_nearby_mesh_saves_products(noisy):
    L, m = noisy
    # a cohort's previous subject: the same topology with other noise
    L_prev, m_prev = lap.cotan_laplacian(*lap.noisy_icosphere(3, 0.1, seed=7), backend="cpu")
    _, v_prev, _ = chebyshev_eigenpairs(L_prev, m_prev, 16, backend="cpu")
    ev_rand, _, cold = chebyshev_eigenpairs(L, m, 16, backend="cpu")
    ev_warm, _, warm = chebyshev_eigenpairs(L, m, 16, backend="cpu", v0=v_prev)
    assert warm["iterations"] < cold["iterations"] and warm["products"] < cold["products"]
    np.testing.assert_allclose(ev_warm, ev_rand, rtol=1e-9, atol=1e-9 * ev_rand[1])  # as in the test above


def test_rcm_order_iterates_on_the_same_start_in_another_numbering(noisy):
    # The start block is drawn in L's order and renumbered with L, so one iteration in either
    # numbering spans the same subspace: the Ritz values agree to rounding (a block renumbered
    # apart from L, or results not renumbered back, would not). v0 goes through the same step.
    L, m = noisy
    v0 = np.random.default_rng(3).standard_normal((L.shape[0], 5))
    ritz = {}
    for order in ("rcm", None):
        with pytest.raises(EigenConvergenceError) as exc:
            chebyshev_eigenpairs(L, m, 16, backend="cpu", degree=8, maxiter=1, order=order, v0=v0)
        ritz[order] = exc.value.evals
    np.testing.assert_allclose(ritz["rcm"], ritz[None], rtol=1e-11, atol=1e-11 * ritz[None][-1])
    ev, V, _ = chebyshev_eigenpairs(L, m, 16, backend="cpu")  # rcm by default, vectors in L's order
    np.testing.assert_array_less(report(L, m, ev, V)[0], 1e-8)


def test_progress_and_degree(noisy):
    L, m = noisy
    calls = []
    _, _, info = chebyshev_eigenpairs(L, m, 6, backend="cpu", degree=12, progress=lambda c, k: calls.append((c, k)))
    assert len(calls) == info["iterations"] and calls[-1] == (6, 6)
    assert info["degrees"] == [12] * info["iterations"] and info["degree"] == 12
    assert info["products"] >= 12 * info["block"] * (info["iterations"] - 1)


def test_maxiter_raises_the_convergence_error(noisy):
    L, m = noisy
    with pytest.raises(EigenConvergenceError, match=r"converged after 1 iterations.*worst residual") as exc:
        chebyshev_eigenpairs(L, m, 16, backend="cpu", maxiter=1)
    err = exc.value
    assert f"{err.n_converged} of 16 eigenpairs" in str(err) and err.n_converged < 16
    assert err.evals.shape == (16,) and err.residuals.shape == (16,) and err.residuals.max() > TOL


@pytest.mark.parametrize(
    ("kwargs", "error", "match"),
    [
        ({"k": 0}, ValueError, r"k must be an int in \[1, 641\] \(got 0\)"),
        ({"k": 642}, ValueError, r"k must be an int in \[1, 641\]"),
        ({"k": 2.0}, TypeError, "k must be an int"),
        ({"k": True}, TypeError, "k must be an int"),
        ({"m": np.ones(641)}, ValueError, r"m must have shape \(642,\) to match L \(got \(641,\)\)"),
        ({"m": np.zeros(642)}, ValueError, "m must be finite and positive"),
        ({"tol": 0.0}, ValueError, "tol must be a finite float > 0"),
        ({"tol": float("nan")}, ValueError, "tol must be a finite float > 0"),
        ({"tol": "1e-10"}, TypeError, "tol must be a float"),
        ({"block": 4}, ValueError, r"block must be an int in \[5, 642\] \(got 4\)"),
        ({"block": 643}, ValueError, "block must be an int in"),
        ({"degree": 0}, ValueError, r"degree must be an int >= 1 \(got 0\)"),
        ({"maxiter": 0}, ValueError, "maxiter must be an int >= 1"),
        ({"v0": np.ones((641, 2))}, ValueError, r"v0 must have shape \(642, j\) with 1 <= j <= block = 12"),
        ({"v0": np.ones((642, 13))}, ValueError, r"v0 must have shape .* \(got \(642, 13\)\)"),
        ({"v0": np.ones(642)}, ValueError, "v0 must have shape"),
        ({"v0": np.full((642, 2), np.nan)}, ValueError, "v0 must be finite"),
        ({"progress": 3}, TypeError, "progress must be callable or None"),
        ({"order": "amd"}, ValueError, r"order must be None or 'rcm' \(got 'amd'\)"),
    ],
)
def test_bad_inputs(noisy, kwargs, error, match):
    L, m = noisy
    args = {"L": L, "m": m, "k": 4} | kwargs
    with pytest.raises(error, match=match):
        chebyshev_eigenpairs(args.pop("L"), args.pop("m"), args.pop("k"), backend="cpu", **args)


def test_bad_matrices(noisy):
    L, m = noisy
    with pytest.raises(ValueError, match=r"L must be a square matrix"):
        chebyshev_eigenpairs(L[:, :-1], m, 4, backend="cpu")
    with pytest.raises(TypeError, match="L must be a sparse matrix"):
        chebyshev_eigenpairs(L.toarray(), m, 4, backend="cpu")
    with pytest.raises(ValueError, match="L must have a nonzero entry"):
        chebyshev_eigenpairs(sp.csr_matrix(L.shape), m, 4, backend="cpu")
