"""SELL-32 storage (kernels/laplacian/sell.py) on the CPU backend: layout, RCM, the kernels' CPU twins, the operator."""

import numpy as np
import pytest
import scipy.sparse as sp

import kernelrt
from kernelrt.kernels import laplacian as lap
from kernelrt.kernels.laplacian import chebyshev, sell, spmv
from kernelrt.kernels.laplacian.placement import BLOCK, blocks
from kernelrt.kernels.laplacian.sell import SellMatrix
from kernelrt.kernels.variants import use_variants


def irregular_csr(n=45, seed=0):
    """(data, indices, indptr) of an n x n matrix with rows of very different lengths: row 0 empty,
    row 5 with 40 entries, the others 1-9; columns in a random stored order (not sorted) and
    values over 16 decades, so another summation order would change the bits (checked below).
    n = 45: a full slice and a partial one."""
    rng = np.random.default_rng(seed)
    lengths = rng.integers(1, 10, n)
    lengths[0], lengths[5] = 0, 40
    indptr = np.concatenate([[0], np.cumsum(lengths)]).astype(np.int32)
    indices = np.concatenate([rng.choice(n, k, replace=False) for k in lengths]).astype(np.int32)
    data = rng.standard_normal(indices.size) * 10.0 ** rng.integers(-8, 8, indices.size)
    return data, indices, indptr


def with_inf_nan(x):
    x = x.copy()
    x[3], x[7] = np.inf, np.nan
    return x


def assert_same_bits(a, b, what=""):
    np.testing.assert_array_equal(a, b, err_msg=what)  # NaN where NaN
    np.testing.assert_array_equal((a + 0.0).view(np.int64), (b + 0.0).view(np.int64), err_msg=what)


@pytest.fixture(scope="module")
def mesh():
    V, F = lap.icosphere(2)
    return lap.MeshTopology(F, len(V)).assemble(V, "cpu")


def test_layout_is_slot_major():
    data, indices, indptr = irregular_csr()
    S = SellMatrix.from_csr(data, indices, indptr)
    n, lengths = 45, np.diff(indptr)
    width = np.array([lengths[:32].max(), lengths[32:].max()])
    assert width[0] == 40
    np.testing.assert_array_equal(S.slice_ptr, np.concatenate([[0], np.cumsum(32 * width)]))
    np.testing.assert_array_equal(S.row_len, lengths)
    assert S.sdata.dtype == np.float64 and {S.scol.dtype, S.slice_ptr.dtype, S.row_len.dtype} == {np.dtype(np.uint32)}
    seen = np.zeros(S.slots, bool)
    for r in range(n):  # entry p of row r at slice_ptr[s] + 32 p + lane, in the row's stored order
        at = S.slice_ptr[r // 32] + 32 * np.arange(lengths[r]) + r % 32
        np.testing.assert_array_equal(S.sdata[at], data[indptr[r]:indptr[r + 1]])
        np.testing.assert_array_equal(S.scol[at], indices[indptr[r]:indptr[r + 1]])
        seen[at] = True
    # padding: every other slot, data 0.0 and its own row (clipped to n - 1 past the last row) as column
    assert S.slots - S.nnz == (~seen).sum() == 32 * width.sum() - indptr[-1]
    assert S.padding_ratio == S.slots / S.nnz
    slot_row = np.repeat(np.arange(2) * 32, 32 * width) + np.arange(S.slots) % 32
    assert not S.sdata[~seen].any()
    np.testing.assert_array_equal(S.scol[~seen], np.minimum(slot_row, n - 1)[~seen])


def test_icosphere_padding(mesh):
    L, _ = mesh
    S = SellMatrix.from_csr(L.data, L.indices, L.indptr)
    # 162 rows of 6 or 7 entries: six slices 7 wide, the last one holding 2 rows
    assert S.slots == 6 * 32 * 7 and S.nnz == L.nnz == 1122
    assert S.padding_ratio == pytest.approx(1344 / 1122)


def launch_pairs(be, csr_args, sell_args, n, k):
    """(CSR result, SELL result) for every kernel pair, launched as the operator launches them."""
    rng = np.random.default_rng(k)
    x, X = with_inf_nan(rng.standard_normal(n)), with_inf_nan(rng.standard_normal((n, k)))
    mass, Xb = rng.uniform(0.5, 2.0, n), rng.standard_normal((n, k))
    (g2, b2), g1 = spmv._geometry(n, k), blocks(n)
    cases = [(spmv.csr_matvec, g1, BLOCK, (x,), (n,)), (spmv.heat_step, g1, BLOCK, (mass, 1e-2, x), (n,)),
             (spmv.csr_matmat, g2, b2, (X,), (n, k)), (spmv.heat_step_block, g2, b2, (mass, 1e-2, X), (n, k)),
             (chebyshev.cheb_step, g2, b2, (0.7, 1.3, -0.2, X, Xb), (n, k))]
    for kernel, grid, block, rest, shape in cases:
        outs = []
        for k_, args in ((kernel, csr_args), (sell.SELL_OF[kernel.name], sell_args)):
            out = be.allocate(shape, np.float64)
            be.launch_kernel(k_, grid, block, *args, *(be.to_device(a) if isinstance(a, np.ndarray) else a
                                                       for a in rest), out)
            outs.append(be.to_host(out))
        yield kernel.name, outs


def csr_args(data, indices, indptr):
    return np.asarray(data, np.float64), indices.astype(np.int32).view(np.uint32), indptr.astype(np.int32).view(np.uint32)


@pytest.mark.parametrize("k", [1, 3, 33])
def test_cpu_twins_give_the_csr_bits(mesh, k):
    L, _ = mesh
    cpu = kernelrt.get_backend("cpu")
    for parts in ((L.data, L.indices, L.indptr), irregular_csr()):
        n = parts[2].size - 1
        for name, (a, b) in launch_pairs(cpu, csr_args(*parts), SellMatrix.from_csr(*parts).args, n, k):
            assert_same_bits(a, b, name)


def test_the_irregular_matrix_detects_another_order():
    # the bitwise tests above would catch a SELL kernel summing in another order: here sorting
    # each row's columns (SciPy's canonical order) changes some of the bits
    data, indices, indptr = irregular_csr()
    x = np.random.default_rng(1).standard_normal(45)
    stored = np.empty(45)
    kernelrt.get_backend("cpu").launch_kernel(spmv.csr_matvec, 1, 128, *csr_args(data, indices, indptr), x, stored)
    assert (sp.csr_matrix((data, indices, indptr), (45, 45)).sorted_indices() @ x != stored).any()


def test_rcm_round_trip_is_bitwise(mesh):
    L, _ = mesh
    shuffle = np.random.default_rng(2).permutation(L.shape[0])  # icosphere order is already local
    Ls = L[shuffle][:, shuffle].tocsr()
    cpu = kernelrt.get_backend("cpu")
    for parts in ((Ls.data, Ls.indices, Ls.indptr), irregular_csr()):
        n = parts[2].size - 1
        S = SellMatrix.from_csr(*parts, order="rcm")
        perm = S.perm.astype(np.int64)
        np.testing.assert_array_equal(np.sort(perm), np.arange(n))
        np.testing.assert_array_equal(S.inverse[perm], np.arange(n))
        x = with_inf_nan(np.random.default_rng(3).standard_normal((n, 3)))
        xs = S.to_storage(cpu, x)
        np.testing.assert_array_equal(xs, x[perm])
        expected, got = np.empty_like(x), np.empty_like(x)
        grid, block = spmv._geometry(n, 3)
        cpu.launch_kernel(spmv.csr_matmat, grid, block, *csr_args(*parts), x, expected)
        cpu.launch_kernel(sell.sell_matmat, grid, block, *S.args, xs, got)
        assert_same_bits(S.from_storage(cpu, got), expected)
        assert_same_bits(S.from_storage(cpu, S.to_storage(cpu, x[:, 0])), x[:, 0])  # vectors too
    # RCM's point: the shuffled mesh's bandwidth comes back down
    S = SellMatrix.from_csr(Ls.data, Ls.indices, Ls.indptr, order="rcm")
    rows = np.repeat(np.arange(Ls.shape[0]), np.diff(Ls.indptr))
    inv = S.inverse.astype(np.int64)
    assert np.abs(inv[rows] - inv[Ls.indices]).max() < np.abs(rows - Ls.indices).max() / 3


def test_operator_gives_the_same_bits_with_either_layout(mesh):
    L, m = mesh
    rng = np.random.default_rng(4)
    x, X = rng.standard_normal(L.shape[0]), rng.standard_normal((L.shape[0], 3))
    csr = lap.LaplacianOperator(L, m, backend="cpu", layout="csr")
    with use_variants(sparse="sell"):
        via_variant = lap.LaplacianOperator(L, m, backend="cpu")
    for op in (via_variant, lap.LaplacianOperator(L, m, backend="cpu", layout="sell", order="rcm")):
        # the CPU keeps the CSR twins for "sell" (no coalescing to gain): asked for, not stored
        assert op.layout == "sell" and op.sell is None
        for a in (x, X):
            assert_same_bits(op.matvec(a), csr.matvec(a))
            assert_same_bits(op.heat_steps(a, 1e-3, 3), csr.heat_steps(a, 1e-3, 3))
    assert csr.layout == "csr" and lap.LaplacianOperator(L, backend="cpu").layout == "csr"  # the default variant


def test_bad_layout_and_order(mesh):
    L, _ = mesh
    with pytest.raises(ValueError, match=r"layout must be 'csr', 'sell' or None .* \(got 'ell'\)"):
        lap.LaplacianOperator(L, backend="cpu", layout="ell")
    with pytest.raises(ValueError, match=r"order must be None or 'rcm' \(got 'amd'\)"):
        lap.LaplacianOperator(L, backend="cpu", layout="sell", order="amd")
    with pytest.raises(ValueError, match=r"order='rcm' .* needs layout='sell' \(got layout 'csr'\)"):
        lap.LaplacianOperator(L, backend="cpu", order="rcm")
    with pytest.raises(ValueError, match=r"order must be None or 'rcm' \(got 'amd'\)"):
        SellMatrix.from_csr(L.data, L.indices, L.indptr, order="amd")


def test_each_sell_kernel_takes_its_csr_kernels_arguments():
    # SELL_OF is keyed by name (sell.py imports neither spmv.py nor chebyshev.py): the names must
    # stay those of the CSR kernels, and each SELL kernel takes SELL's four arrays for CSR's three
    csr = {k.name: k for k, _ in spmv.spmv_kernels() + chebyshev.chebyshev_kernels()[:1]}
    assert set(sell.SELL_OF) == set(csr)
    for name, kernel in sell.SELL_OF.items():
        assert kernel.params[:4] == ("sdata", "scol", "slice_ptr", "row_len")
        assert kernel.params[4:] == csr[name].params[3:] and csr[name].params[:3] == ("data", "indices", "indptr")
    listed = [k for k, _ in sell.sell_variant_kernels()]
    assert set(sell.SELL_OF.values()) | {sell.sell_gather_rows} == set(listed)
