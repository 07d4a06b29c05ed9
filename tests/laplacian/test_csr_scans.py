"""The compiled CSR scans that ``eigenpairs`` makes before a solve (kernels/laplacian/csr_scans.py).

``scaled_rows`` must give the NumPy forms' bits (the Chebyshev route's start and λ_max bound
depend on them), and ``joined_count`` must count components exactly as SciPy's
``connected_components`` does on L's non-zero off-diagonal graph, handing back to SciPy
(-1) whatever it cannot judge alone.
"""

import numpy as np
import pytest
import scipy.sparse as sp
from scipy.sparse.csgraph import connected_components

from kernelrt.kernels.laplacian import MeshTopology, icosphere
from kernelrt.kernels.laplacian.csr_scans import joined_count, scaled_rows
from kernelrt.kernels.laplacian.eigen import DisconnectedMeshError, check_connected


def _mesh(level=3, seed=0):
    V, F = icosphere(level)
    V = V + np.random.default_rng(seed).normal(scale=0.01, size=V.shape)  # unequal rows and masses
    return MeshTopology(F, len(V)).assemble(V, "cpu")


def _numpy_forms(L, m):
    n = L.shape[0]
    rows, sr = np.repeat(np.arange(n), np.diff(L.indptr)), 1.0 / np.sqrt(m)
    data_s = L.data * sr[rows] * sr[L.indices]
    lam = min(np.bincount(rows, np.abs(data_s), n).max(), (np.bincount(rows, np.abs(L.data), n) / m).max())
    return data_s, float(lam)


@pytest.mark.parametrize("index_dtype", [np.int32, np.int64])
def test_scaled_rows_gives_the_numpy_forms_bits(index_dtype):
    L, m = _mesh()
    indices, indptr = L.indices.astype(index_dtype), L.indptr.astype(index_dtype)
    data_s, lam, finite = scaled_rows(L.data, indices, indptr, m)
    want, want_lam = _numpy_forms(L, m)
    assert finite
    np.testing.assert_array_equal(data_s, want)  # same products, same order: equal, not close
    assert lam == want_lam


@pytest.mark.parametrize("bad", [np.nan, np.inf])
def test_scaled_rows_reports_a_non_finite_entry(bad):
    L, m = _mesh(2)
    data = L.data.copy()
    data[7] = bad
    assert scaled_rows(data, L.indices, L.indptr, m)[2] is False


def _two_meshes():
    (L1, _), (L2, _) = _mesh(2, 1), _mesh(2, 2)
    return sp.block_diag([L1, L2], format="csr")


def _scipy_count(L):
    G = sp.csr_matrix(L, copy=True)
    G.sum_duplicates()
    G.eliminate_zeros()
    return connected_components(G, directed=False)[0]


def test_joined_count_matches_scipy_on_connected_and_split_meshes():
    L, _ = _mesh()
    assert joined_count(L) == _scipy_count(L) == 1
    two = _two_meshes()
    assert joined_count(two) == _scipy_count(two) == 2
    # an isolated vertex (a zero row and column) is a component of its own
    padded = sp.block_diag([L, sp.csr_matrix((1, 1))], format="csr")
    assert joined_count(padded) == _scipy_count(padded) == 2


def test_explicit_zeros_join_nothing():
    # cut the second mesh's every off-diagonal entry to an explicit zero: 162 single vertices
    two = _two_meshes()
    n1 = two.shape[0] // 2
    rows = np.repeat(np.arange(two.shape[0]), np.diff(two.indptr))
    two.data[(rows >= n1) & (two.indices != rows)] = 0.0
    assert two.nnz > np.count_nonzero(two.data)  # the zeros are stored
    assert joined_count(two) == _scipy_count(two) == 1 + n1


def test_a_non_canonical_matrix_is_left_to_scipy():
    # duplicates that sum to zero connect nothing: only a canonical form can be judged in one pass
    L = sp.csr_matrix((np.array([1.0, -1.0, 2.0, 2.0]), np.array([1, 1, 0, 1]), np.array([0, 3, 4])), shape=(2, 2))
    assert not L.has_canonical_format
    assert joined_count(L) == -1
    assert _scipy_count(L) == 2
    with pytest.raises(DisconnectedMeshError, match="2 connected components"):
        check_connected(L)  # the SciPy path still sees it


def test_check_connected_takes_the_fast_path_and_still_names_the_components():
    L, _ = _mesh()
    check_connected(L)  # one component: no error
    with pytest.raises(DisconnectedMeshError, match=r"2 connected components \(vertex counts 642, 642\)"):
        check_connected(sp.block_diag([L, L], format="csr"))
