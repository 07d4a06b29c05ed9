"""The Laplacian library against SpectralBrain 0.1.0's golden outputs (CPU backend)."""

import numpy as np
import pytest

from kernelrt.kernels import laplacian as lap
from tests.support.laplacian_cases import (
    EDGE_CASES,
    assemble_expecting_warnings,
    assert_matches_reference,
    edge_case,
    golden_L,
    load_golden,
)


@pytest.fixture(scope="module", params=["ico4", "noisy_ico4"])
def golden(request):
    return load_golden(request.param)


@pytest.mark.parametrize("variant", ["deterministic", "atomic"])
def test_L_and_m_match_spectralbrain(golden, variant):
    L, m = lap.cotan_laplacian(golden["V"], golden["F"], "cpu", variant=variant)
    L_ref = golden_L(golden)
    assert_matches_reference(L, m, L_ref, golden["m"])
    # closed meshes: the topology pattern is exactly SpectralBrain's
    np.testing.assert_array_equal(L.indptr, golden["L_indptr"])
    np.testing.assert_array_equal(L.indices, golden["L_indices"])


def test_deterministic_variant_is_bitwise_spectralbrain(golden):
    # exact on every x86: same expressions, same summation order, only + - * / and sqrt
    # (correctly rounded); numba compiles without fastmath (no FMA contraction, no
    # reassociation) and no libm, BLAS or SIMD-width dependent reduction takes part. On these
    # manifold meshes an off-diagonal has two cotangents, whose sum is order-free; the diagonal
    # (column order) and the mass (corner-major) follow SpectralBrain's order. Non-manifold
    # edges differ by an ulp: tests/laplacian/test_bunny.py.
    L, m = lap.cotan_laplacian(golden["V"], golden["F"], "cpu")
    np.testing.assert_array_equal(L.data, golden["L_data"])
    np.testing.assert_array_equal(m, golden["m"])


@pytest.mark.parametrize("variant", ["deterministic", "atomic"])
@pytest.mark.parametrize("name", EDGE_CASES)
def test_edge_cases(name, variant):
    V, F, L_ref, m_ref = edge_case(name)
    L, m = assemble_expecting_warnings(name, lambda: lap.cotan_laplacian(V, F, "cpu", variant=variant))
    assert_matches_reference(L, m, L_ref, m_ref)
    assert np.isfinite(L.data).all()


def test_nonmanifold_fin_sums_three_cotangents():
    V, F, L_ref, _ = edge_case("nonmanifold_fin")
    L, _ = lap.cotan_laplacian(V, F, "cpu")
    a, b = 0, 46
    # three cotangents summed in another order than SciPy's duplicate sum: up to an ulp
    # (L[0, 46] is equal, L[46, 0] 1 ulp off; see tests/laplacian/test_bunny.py). 1e-14 relative
    # is what docs/laplacian.md ("Summation order, non-manifold edges and bit-exactness")
    # accepts there; the three terms share a sign, so the order costs <= 1 ulp (2.2e-16)
    assert L[a, b] == pytest.approx(L_ref[a, b], rel=1e-14)
    closed_V, closed_F, closed_L, _ = edge_case("closed")
    assert abs(L[a, b] - closed_L[a, b]) > 0.1  # the fin's corner really contributes


# The grids pass through numpy's log, log10 and power (logspace), whose SIMD loops differ
# between AVX-512 and AVX2 machines by up to an ulp (seen: Intel golden vs AMD Zen 3);
# 4 ulp relative is that, with room for the subtraction in sigma.
_LIBM_RTOL = 4 * np.finfo(np.float64).eps


def test_descriptor_parameters_from_all_64_eigenvalues(golden):
    np.testing.assert_allclose(lap.hks_times(golden["evals"], 16), golden["hks_t"], rtol=_LIBM_RTOL, atol=0)
    e, sigma = lap.wks_params(golden["evals"], 16)  # E <= 28: SpectralBrain's fallback branch
    # linspace's points carry the endpoints' absolute error, so scale it by the largest |e|
    np.testing.assert_allclose(e, golden["wks_e"], rtol=0, atol=_LIBM_RTOL * np.abs(golden["wks_e"]).max())
    assert sigma == pytest.approx(float(golden["wks_sigma"]), rel=_LIBM_RTOL, abs=0)


def test_hks_wks_from_golden_eigenpairs(golden):
    k = int(golden["hks_k"])
    ev, vec = golden["evals"][:k], golden["evecs"][:, :k]
    H = lap.hks(ev, vec, golden["hks_t"], backend="cpu")
    W = lap.wks(ev, vec, golden["wks_e"], sigma=float(golden["wks_sigma"]), backend="cpu")
    # 1e-12 of the largest value, docs/laplacian.md ("Descriptor parity"): the same NumPy
    # expressions as SpectralBrain, but the GEMM's BLAS kernel (summation order per machine) and
    # NumPy's SIMD exp (AVX-512 vs AVX2) change the last bits. Measured <= 6.8e-16
    assert np.abs(H - golden["hks"]).max() <= 1e-12 * np.abs(golden["hks"]).max()
    assert np.abs(W - golden["wks"]).max() <= 1e-12 * np.abs(golden["wks"]).max()


def test_eigenpairs_shift_invert(golden):
    L, m = lap.cotan_laplacian(golden["V"], golden["F"], "cpu")
    evals, evecs = lap.eigenpairs(L, m, 64, backend="cpu", method="shift-invert")
    # sorted, clipped at 0: the null pair comes out at about ±1e-14 (ARPACK/SuperLU rounding,
    # docs/laplacian.md ("Eigenpairs")), measured 9.7e-15; 1e-11 keeps it far below ZERO_TOL =
    # 1e-10, under which the descriptors treat a mode as the constant one
    assert np.all(np.diff(evals) >= 0) and 0.0 <= evals[0] < 1e-11
    # eigenvalues within 1e-12·max(1, λ_max), M-orthonormality to 1e-12: the golden data's
    # tolerances (docs/laplacian.md ("Accuracy and oracles")). ARPACK/BLAS: the convergence and
    # summation order differ per machine. Measured <= 3.6e-15 (λ), 3.8e-15 (gram)
    assert np.abs(evals - golden["evals"]).max() <= 1e-12 * max(1.0, golden["evals"].max())
    gram = evecs.T @ (m[:, None] * evecs)
    assert np.abs(gram - np.eye(64)).max() < 1e-12
    resid = L @ evecs - (m[:, None] * evecs) * evals
    # ARPACK with tol=0 converges to rounding: the residual is a few eps·|L||v| (SpectralBrain's
    # own solve: <= 7.4e-14, tests/data/laplacian/README.md; measured 1.7e-14), whatever BLAS
    # order the host uses; 1e-12 keeps a 50x margin
    assert np.abs(resid).max() < 1e-12
    if golden["noise_amplitude"] == 0.0:  # clean gap at k = 49: descriptors do not depend on the basis
        k = int(golden["hks_k"])
        H = lap.hks(evals[:k], evecs[:, :k], golden["hks_t"], backend="cpu")
        # our own eigenpairs, not the stored ones: complete multiplets up to k = 49 and a gap of
        # 13.2 after it make the sum basis-independent, so it moves only by residual / gap on
        # top of the GEMM and exp differences above. Measured 6.6e-15: the golden descriptors'
        # 1e-12 holds with a 150x margin
        assert np.abs(H - golden["hks"]).max() <= 1e-12 * np.abs(golden["hks"]).max()


def test_eigenpairs_cholesky_route(golden):
    """The default CPU route (block Lanczos over a Cholesky factor) against SpectralBrain's pairs."""
    L, m = lap.cotan_laplacian(golden["V"], golden["F"], "cpu")
    result = lap.eigenpairs(L, m, 64, backend="cpu", method="cholesky")
    evals, evecs = result
    assert result.method == "cholesky" and result.factor in ("supernodal", "cholespy", "superlu")
    assert np.all(np.diff(evals) >= 0) and 0.0 <= evals[0] < 1e-11  # the null pair, as ARPACK's
    # the bar: SciPy's eigenvalues to 1e-10 relative. The Krylov tolerance (1e-12 on the
    # shift-inverted operator) puts the Ritz values far closer (error ~ residual^2 / gap); measured
    # <= 2e-14 relative here
    nz = golden["evals"] > 1e-10
    assert np.max(np.abs(evals[nz] - golden["evals"][nz]) / golden["evals"][nz]) <= 1e-10
    # Löwdin's orthonormalisation at the end: M-orthonormal to rounding, as ARPACK's (measured 2e-15)
    gram = evecs.T @ (m[:, None] * evecs)
    assert np.abs(gram - np.eye(64)).max() < 1e-12
    assert result.m_orthonormality == pytest.approx(np.abs(gram - np.eye(64)).max())
    # residuals reported are the true ones: ||L v - λ M v|| / ||λ M v|| (null pair against λ_1).
    # A residual of 1e-12·θ on the shifted operator is ~1e-11 here; 1e-10 leaves a 10x margin
    resid = L @ evecs - (m[:, None] * evecs) * evals
    norms = np.linalg.norm(resid, axis=0) / (np.maximum(evals, evals[1]) * np.linalg.norm(m[:, None] * evecs, axis=0))
    np.testing.assert_allclose(result.residuals, norms, rtol=1e-6)
    assert result.residuals.max() < 1e-10
