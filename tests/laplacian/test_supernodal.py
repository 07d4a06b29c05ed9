"""kernelrt's supernodal Cholesky: the analysis, the numeric factor, block solves and their use by eigenpairs."""

import importlib.util

import numpy as np
import pytest
import scipy.sparse as sp

import kernelrt.kernels.laplacian as lap
from kernelrt.kernels.laplacian import dense_blas as blas
from kernelrt.kernels.laplacian import factor as factor_module
from kernelrt.kernels.laplacian.factor import ShiftedFactor, ShiftPattern, with_full_diagonal
from kernelrt.kernels.laplacian.supernodal import NotPositiveDefiniteError, SupernodalFactor, to_original_order
from kernelrt.kernels.laplacian.supernodal_symbolic import SymbolicFactor

needs_pymetis = pytest.mark.skipif(importlib.util.find_spec("pymetis") is None, reason="pymetis is not installed")


def _shifted(level, noisy=True):
    V, F = lap.noisy_icosphere(level, 0.1) if noisy else lap.icosphere(level)
    L, m = lap.cotan_laplacian(V, F, "cpu")
    L = with_full_diagonal(L)
    pattern = ShiftPattern(L)
    values = pattern.shifted_values(L, m, -0.01 * 4 * np.pi / m.sum())
    return pattern, values, sp.csr_matrix((values, pattern.indices, pattern.indptr), shape=L.shape)


def _dense_factor(sym, fac):
    """The factor as a dense lower-triangular matrix in the factor's order, from its supernodes."""
    Ld = np.zeros((sym.n, sym.n))
    for s in range(len(sym.start) - 1):
        f, l = sym.start[s], sym.start[s + 1]
        rows = sym.rows[sym.rowptr[s]:sym.rowptr[s + 1]]
        block = fac.values[sym.valptr[s]:sym.valptr[s + 1]].reshape(l - f, len(rows)).T  # column-major
        Ld[np.ix_(rows, np.arange(f, l))] = block
    return np.tril(Ld)


def _check_analysis(sym, n):
    assert np.array_equal(np.sort(sym.perm), np.arange(n)) and np.array_equal(sym.inverse[sym.perm], np.arange(n))
    assert sym.start[0] == 0 and sym.start[-1] == n and np.all(np.diff(sym.start) > 0)
    for s in range(len(sym.start) - 1):
        rows = sym.rows[sym.rowptr[s]:sym.rowptr[s + 1]]
        own = np.arange(sym.start[s], sym.start[s + 1])
        assert np.array_equal(rows[:len(own)], own) and np.all(np.diff(rows) > 0)  # its columns first, sorted
        if sym.parent[s] != -1:  # a child's rows below it lie in its parent's rows
            p = sym.parent[s]
            assert set(rows[len(own):]) <= set(sym.rows[sym.rowptr[p]:sym.rowptr[p + 1]])


@pytest.mark.parametrize("order", ["metis", "natural"])
def test_factor_reproduces_the_matrix(order):
    if order == "metis" and importlib.util.find_spec("pymetis") is None:
        pytest.skip("pymetis is not installed")
    pattern, values, A = _shifted(3)
    n = A.shape[0]
    sym = SymbolicFactor(pattern.indptr, pattern.indices, perm=None if order == "metis" else np.arange(n))
    _check_analysis(sym, n)
    fac = SupernodalFactor(sym, values)
    Ld = _dense_factor(sym, fac)
    Ap = A.toarray()[np.ix_(sym.perm, sym.perm)]
    # a backward-stable Cholesky: L Lᵀ = A + E, |E| <= c n u |L||Lᵀ|; measured 3e-16 relative here
    assert np.abs(Ld @ Ld.T - Ap).max() <= 1e-13 * np.abs(Ap).max()
    # the pattern holds every entry of the true factor (LAPACK's, on the same order)
    true = np.linalg.cholesky(Ap)
    assert np.all((np.abs(true) > 1e-14 * np.abs(true).max()) <= (np.abs(Ld) > 0) | (np.abs(true) <= 1e-12))


@needs_pymetis
@pytest.mark.parametrize("width", [1, 3, 8, 11, 40])  # 3 and 11: rows with masked lanes (row_vectors.py)
@pytest.mark.parametrize("small", [0, None, 10**9])  # BLAS for every supernode, the default, loops only
def test_block_solve_against_scipy(width, small):
    pattern, values, A = _shifted(5)
    fac = SupernodalFactor(pattern.symbolic(), values)
    B = np.random.default_rng(width).standard_normal((A.shape[0], width))
    X = fac.solve(B, small=small)
    ref = sp.linalg.spsolve(A.tocsc(), B).reshape(B.shape)
    # both backward stable on A (κ ~ 1e4 at ico5 with this shift): forward errors ~ κ u; measured ~1e-13
    assert np.abs(X - ref).max() <= 1e-10 * np.abs(ref).max()
    assert np.abs(A @ X - B).max() <= 1e-10 * np.abs(B).max()
    if width > 1:
        assert np.abs(fac.solve(B, split=False, small=small) - X).max() <= 1e-12 * np.abs(X).max()


@needs_pymetis
def test_column_major_block_stays_column_major():
    # the Krylov basis is column-major: a block of it goes in without a copy and comes out
    # in the same layout, with the same values as the row-major call (the same operations
    # on the same numbers: the layout changes only where the gathers read and write)
    pattern, values, A = _shifted(4)
    fac = SupernodalFactor(pattern.symbolic(), values)
    rng = np.random.default_rng(5)
    basis = np.asfortranarray(rng.standard_normal((A.shape[0], 12)))
    scale = rng.uniform(0.5, 2.0, A.shape[0])
    X = fac.solve(basis[:, 4:8], scale)
    assert X.flags.f_contiguous and not X.flags.c_contiguous
    np.testing.assert_array_equal(X, fac.solve(np.ascontiguousarray(basis[:, 4:8]), scale))
    D = sp.diags(scale)
    np.testing.assert_allclose(D @ sp.linalg.spsolve(A.tocsc(), D @ basis[:, 4:8]), X, rtol=0,
                               atol=1e-10 * np.abs(X).max())  # as the bound above


@needs_pymetis
def test_solve_in_the_factors_order():
    # rows already in the factor's order are only copied: the same numbers as the gathers
    # give (the same products on the same values), and to_original_order brings them back
    pattern, values, A = _shifted(4)
    sym = pattern.symbolic()
    fac = SupernodalFactor(sym, values)
    rng = np.random.default_rng(6)
    B = np.asfortranarray(rng.standard_normal((A.shape[0], 8)))
    scale = rng.uniform(0.5, 2.0, A.shape[0])
    X = fac.solve(np.asfortranarray(B[sym.perm]), scale[sym.perm], in_order=True)
    assert X.flags.f_contiguous
    np.testing.assert_array_equal(X, fac.solve(B, scale)[sym.perm])
    to_original_order(X, sym.inverse, np.full(A.shape[0], 2.0))
    np.testing.assert_array_equal(X, 2.0 * fac.solve(B, scale))  # a product by 2 is exact
    with pytest.raises(ValueError, match="inverse"):
        to_original_order(X, sym.inverse[:-1], scale)


@needs_pymetis
def test_shifted_factor_order():
    pattern, values, _ = _shifted(3)
    fac = ShiftedFactor(pattern, values, "supernodal")
    assert np.array_equal(fac.order, pattern.symbolic().perm)
    lu = ShiftedFactor(pattern, values, "superlu")
    assert lu.order is None
    with pytest.raises(ValueError, match="in_order"):
        lu.solve(np.ones(pattern.n), in_order=True)
    with pytest.raises(ValueError, match="no order"):
        lu.to_mesh_order(np.ones((pattern.n, 2)), np.ones(pattern.n))


@needs_pymetis
def test_cholesky_route_iterates_in_the_factors_order(monkeypatch):
    # every Krylov solve skips the gathers, and the eigenvectors come back in the mesh's order
    calls = []
    solve = SupernodalFactor.solve

    def recording(self, B, scale=None, split=True, small=None, in_order=False):
        calls.append(in_order)
        return solve(self, B, scale, split, small, in_order)

    monkeypatch.setattr(SupernodalFactor, "solve", recording)
    V, F = lap.noisy_icosphere(4, 0.1)
    L, m = lap.cotan_laplacian(V, F, "cpu")
    r = lap.eigenpairs(L, m, 12, backend="cpu", method="cholesky", factor="supernodal")
    assert calls and all(calls)
    assert r.residuals.max() < 1e-10 and r.m_orthonormality < 1e-12  # the bar


@needs_pymetis
def test_vector_and_shapes():
    pattern, values, A = _shifted(3)
    fac = SupernodalFactor(pattern.symbolic(), values)
    b = np.arange(A.shape[0], dtype=float)
    x = fac.solve(b)
    assert x.shape == b.shape and x.flags.c_contiguous
    assert np.abs(A @ x - b).max() <= 1e-10 * np.abs(b).max()  # same bound as the block solve above


def test_not_positive_definite_is_refused():
    pattern, values, A = _shifted(2)
    bad = values.copy()
    bad[pattern.diag[5]] = -1.0
    sym = SymbolicFactor(pattern.indptr, pattern.indices, perm=np.arange(A.shape[0]))
    with pytest.raises(NotPositiveDefiniteError, match="not positive definite"):
        SupernodalFactor(sym, bad)
    assert issubclass(NotPositiveDefiniteError, np.linalg.LinAlgError)


def test_forest_pattern():
    # two disconnected blocks: the elimination tree is a forest, every root ordered
    pattern, values, A = _shifted(2)
    B = sp.block_diag([A, A], format="csr")
    B.sort_indices()
    sym = SymbolicFactor(B.indptr, B.indices, perm=np.arange(B.shape[0]))
    _check_analysis(sym, B.shape[0])
    fac = SupernodalFactor(sym, B.data)
    b = np.ones(B.shape[0])
    assert np.abs(B @ fac.solve(b) - b).max() <= 1e-10 * np.abs(b).max()


def test_dense_blas_wrappers():
    rng = np.random.default_rng(0)
    s = blas.scratch()
    a, b = np.asfortranarray(rng.random((5, 3))), np.asfortranarray(rng.random((3, 4)))
    c = np.asfortranarray(np.ones((5, 4)))
    blas.gemm(s, blas.NOTRANS, blas.NOTRANS, 5, 4, 3, 2.0, a.ctypes.data, 5, b.ctypes.data, 3, 1.0, c.ctypes.data, 5)
    assert np.allclose(c, 2.0 * a @ b + 1.0, rtol=1e-15, atol=1e-15)  # 3-term sums: a few ulps
    g = a.T @ a + 3 * np.eye(3)
    f = np.asfortranarray(g.copy())
    assert blas.potrf(s, blas.LOWER, 3, f.ctypes.data, 3) == 0
    assert np.allclose(np.tril(f), np.linalg.cholesky(g), rtol=1e-14, atol=1e-14)
    assert blas.potrf(s, blas.LOWER, 3, np.asfortranarray(-g).ctypes.data, 3) > 0  # LAPACK's info: not SPD


@needs_pymetis
def test_eigenpairs_with_the_supernodal_factor(monkeypatch):
    V, F = lap.noisy_icosphere(4, 0.1)
    L, m = lap.cotan_laplacian(V, F, "cpu")
    ours = lap.eigenpairs(L, m, 20, backend="cpu", method="cholesky", factor="supernodal")
    ref = lap.eigenpairs(L, m, 20, backend="cpu", method="cholesky", factor="cholespy" if
                         importlib.util.find_spec("cholespy") else "superlu")
    assert ours.factor == "supernodal" and ours.route == "cholesky (supernodal)"
    # the bar: residuals and eigenvalue agreement to 1e-10 (measured ~1e-14 apart)
    assert ours.residuals.max() < 1e-10 and ours.m_orthonormality < 1e-12
    nz = ref.evals > 1e-10
    assert np.max(np.abs(ours.evals[nz] - ref.evals[nz]) / ref.evals[nz]) <= 1e-10


@needs_pymetis
def test_cohort_analyses_once(monkeypatch):
    V, F = lap.noisy_icosphere(3, 0.1)
    topo = lap.MeshTopology(F, len(V))
    made = []
    real = factor_module.ShiftPattern.symbolic

    def counting(self):
        fresh = self._symbolic is None
        out = real(self)
        made.append(fresh)
        return out

    monkeypatch.setattr(factor_module.ShiftPattern, "symbolic", counting)
    evals = []
    for seed in (1, 2):
        L, m = topo.assemble(lap.noisy_icosphere(3, 0.1, seed=seed)[0], "cpu")
        evals.append(topo.eigenpairs(L, m, 10, backend="cpu", method="cholesky", factor="supernodal").evals)
    assert made == [True, False]  # the second subject reuses the first one's analysis
    assert not np.allclose(evals[0], evals[1], rtol=1e-6)  # two geometries, two spectra


def test_supernodal_needs_pymetis(monkeypatch):
    real_find_spec = importlib.util.find_spec
    monkeypatch.setattr(factor_module.importlib.util, "find_spec",
                        lambda name, *a: None if name == "pymetis" else real_find_spec(name, *a))
    with pytest.raises(ImportError, match="pip install pymetis"):
        factor_module.factor_library("supernodal")
    with pytest.raises(ValueError, match="factor must be 'auto', 'cholespy', 'supernodal' or 'superlu'"):
        factor_module.factor_library("cholmod")


def test_shifted_factor_supernodal_matches_superlu():
    if importlib.util.find_spec("pymetis") is None:
        pytest.skip("pymetis is not installed")
    pattern, values, A = _shifted(4)
    B = np.random.default_rng(1).standard_normal((A.shape[0], 5))
    X = ShiftedFactor(pattern, values, "supernodal").solve(B)
    Y = ShiftedFactor(pattern, values, "superlu").solve(B)
    assert np.abs(X - Y).max() <= 1e-10 * np.abs(Y).max()  # two backward-stable solves, κ ~ 1e4


def test_values_and_right_hand_sides_must_match_the_pattern():
    pattern, values, A = _shifted(2)
    n = A.shape[0]
    sym = SymbolicFactor(pattern.indptr, pattern.indices, perm=np.arange(n))
    with pytest.raises(ValueError, match=r"values must have shape \(\d+,\)"):
        SupernodalFactor(sym, values[:-1])
    fac = SupernodalFactor(sym, values)
    for bad in (np.ones(n - 1), np.ones((n, 2, 2)), np.ones((2, n))):
        with pytest.raises(ValueError, match=rf"B must have shape \({n},\) or \({n}, w\)"):
            fac.solve(bad)
    with pytest.raises(ValueError, match=rf"scale must have shape \({n},\)"):
        fac.solve(np.ones(n), np.ones(n + 1))


@pytest.mark.parametrize("density", [0.002, 0.02, 0.2])
def test_random_spd_patterns(density):
    # not a mesh: random graphs, from sparse to nearly dense (one large front, BLAS's path)
    rng = np.random.default_rng(int(density * 1000))
    n = 300
    G = sp.random(n, n, density=density, random_state=rng, format="csr")
    A = (G + G.T + sp.diags(np.abs(G).sum(axis=0).A1 + np.abs(G).sum(axis=1).A1 + 1.0)).tocsr()
    A.sort_indices()
    orders = [np.arange(n), rng.permutation(n)]
    if importlib.util.find_spec("pymetis") is not None:
        orders.append(None)
    B = rng.standard_normal((n, 4))
    for perm in orders:
        sym = SymbolicFactor(A.indptr, A.indices, perm=perm)
        _check_analysis(sym, n)
        X = SupernodalFactor(sym, A.data).solve(B)
        # diagonally dominant, κ < 10: backward-stable solves agree to a few ulps of |X|
        assert np.abs(A @ X - B).max() <= 1e-12 * np.abs(B).max()
