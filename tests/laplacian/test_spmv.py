"""Sparse products and explicit heat steps against SciPy (CPU backend)."""

import numpy as np
import pytest
import scipy.sparse as sp

from kernelrt.kernels import laplacian as lap


@pytest.fixture(scope="module")
def mesh():
    V, F = lap.noisy_icosphere(3)
    L, m = lap.cotan_laplacian(V, F, "cpu")
    return L, m


@pytest.mark.parametrize("k", [None, 1, 3, 50])
def test_products_equal_scipy(mesh, k):
    L, _ = mesh
    rng = np.random.default_rng(1)
    x = rng.standard_normal(L.shape[0] if k is None else (L.shape[0], k))
    op = lap.LaplacianOperator(L, backend="cpu")
    y = op.matvec(x)
    assert y.shape == x.shape
    # exact: one sum per output element over the row in column order, from 0: SciPy's order
    # too. Neither side fuses a*x + y into an FMA (numba without fastmath; SciPy's sparsetools
    # are built for baseline x86-64) or reorders, whatever the SIMD width: same bits everywhere
    np.testing.assert_array_equal(y, L @ x)
    np.testing.assert_array_equal(lap.laplacian_matvec(L, x, backend="cpu"), y)


def test_other_sparse_formats_and_index_dtypes(mesh):
    L, _ = mesh
    x = np.random.default_rng(2).standard_normal(L.shape[0])
    expected = L @ x
    for other in (L.tocsc(), L.tocoo(), sp.csr_array(L), sp.csr_matrix((L.data, L.indices.astype(np.int64), L.indptr.astype(np.int64)), shape=L.shape)):
        # converted to canonical CSR first; were a row's ~7 entries ordered differently, its sum
        # would round differently by a few ulp of Σ|L_ij x_j| (~1e-14; |y| <= 12 here). Measured:
        # equal. 1e-12 absolute is loose on purpose: this checks the formats, not the rounding
        np.testing.assert_allclose(lap.laplacian_matvec(other, x, backend="cpu"), expected, rtol=0, atol=1e-12)


def test_heat_steps_match_a_numpy_loop(mesh):
    L, m = mesh
    u = np.random.default_rng(3).standard_normal(L.shape[0])
    tau = 1e-4
    ref = u.copy()
    for _ in range(7):
        ref = ref - tau * ((L @ ref) / m)
    got = lap.heat_steps(L, m, u, tau, 7, backend="cpu")
    # exact: the same row sums as L @ ref (above), then u - tau * (acc / m), each op rounded once
    np.testing.assert_array_equal(got, ref)
    zero = lap.heat_steps(L, m, u, tau, 0, backend="cpu")
    np.testing.assert_array_equal(zero, u)
    assert zero is not u


def test_heat_preserves_the_mass_weighted_mean(mesh):
    L, m = mesh
    u = np.random.default_rng(4).standard_normal(L.shape[0])
    out = lap.heat_steps(L, m, u, 1e-4, 50, backend="cpu")
    # 1ᵀ M (M⁻¹ L u) = 1ᵀ L u = 0: heat is conserved, up to rounding: each of the 50 steps rounds
    # every u_i once, and m @ u is a BLAS dot (summation order per host) with a cancellation of
    # ~130 (Σ|m u| / |m @ u|), so a few 1e-14 at worst. Measured 2.2e-16; 1e-12 leaves room
    assert (m @ out) == pytest.approx(m @ u, rel=1e-12)
    assert out.std() < u.std()


def test_operator_errors(mesh):
    L, m = mesh
    op = lap.LaplacianOperator(L, backend="cpu")
    with pytest.raises(ValueError, match="heat_steps needs the mass"):
        op.heat_steps(np.zeros(L.shape[0]), 0.1, 1)
    with pytest.raises(ValueError, match=r"x must have shape \(642,\) or \(642, k\) \(got \(641,\)\)"):
        op.matvec(np.zeros(641))
    op = lap.LaplacianOperator(L, m, backend="cpu")
    with pytest.raises(ValueError, match="tau must be a finite number >= 0"):
        op.heat_steps(np.zeros(L.shape[0]), -1.0, 1)
    with pytest.raises(ValueError, match="n_steps must be an int >= 0"):
        op.heat_steps(np.zeros(L.shape[0]), 0.1, 1.5)
    with pytest.raises(ValueError, match=r"m must have shape \(642,\)"):
        lap.LaplacianOperator(L, m[:3], backend="cpu")
    with pytest.raises(ValueError, match="L must be a square matrix"):
        lap.LaplacianOperator(L[:5], backend="cpu")
    with pytest.raises(TypeError, match="L must be a sparse matrix"):
        lap.LaplacianOperator(L.toarray(), backend="cpu")
