"""The Krylov basis' products split by rows between threads (kernels/laplacian/basis_products.py).

Each is checked against NumPy's product on a basis laid out as block Lanczos lays it out
(column blocks of the transpose of a row-major buffer, so the leading dimension is larger
than a block's columns suggest), with one part and with several, and with row counts that
do not divide evenly. Sums may be grouped differently from NumPy's (another BLAS order,
partial sums per thread added at the end), so values are compared to 1e-12, not bitwise;
what must not move at all (columns past a rotation's result, rows a product does not
write) is compared exactly.
"""

import numpy as np
import pytest
from numba import get_num_threads, set_num_threads
from threadpoolctl import threadpool_info

import kernelrt.kernels.laplacian.basis_products as bp


@pytest.fixture(params=[1, 3], ids=["one part", "three parts"])
def parts(request, monkeypatch):
    # three parts where numba has fewer threads: prange runs the parts in turn, so the row
    # ranges and partial sums are exercised on any machine
    monkeypatch.setattr(bp, "_parts", lambda n: request.param)
    return request.param


def _basis(rows: int, cols: int, seed: int = 0):
    rng = np.random.default_rng(seed)
    buffer = rng.standard_normal((cols + 5, rows))
    return buffer.T  # column-major, leading dimension = rows, as lanczos.py's basis


@pytest.mark.parametrize("rows", [1001, 7])
def test_inner_is_the_transposed_product(parts, rows):
    V = _basis(rows, 30)
    W = np.asfortranarray(np.random.default_rng(1).standard_normal((rows, 8)))
    np.testing.assert_allclose(bp.inner(V[:, 3:20], W), V[:, 3:20].T @ W, rtol=0, atol=1e-12)
    np.testing.assert_allclose(bp.inner(W, W), W.T @ W, rtol=0, atol=1e-12)
    assert bp.inner(V[:, :0], W).shape == (0, 8)


@pytest.mark.parametrize("rows", [1001, 7])
def test_subtract_and_product_into_write_only_their_block(parts, rows):
    V = _basis(rows, 30)
    C = np.random.default_rng(2).standard_normal((12, 8))
    before = V.copy()
    W = V[:, 20:28]  # a block of the same buffer, as the Cholesky QR's output is
    expected = before[:, 20:28] - before[:, :12] @ C
    bp.subtract_product(W, V[:, :12], C)  # returns nothing: the update lands in W
    np.testing.assert_allclose(W, expected, rtol=0, atol=1e-12)
    bp.product_into(W, V[:, :12], C)
    np.testing.assert_allclose(W, before[:, :12] @ C, rtol=0, atol=1e-12)
    assert np.array_equal(V[:, :20], before[:, :20]) and np.array_equal(V[:, 28:], before[:, 28:])


@pytest.mark.parametrize("rows, block", [(1001, 512), (1001, 7), (5, 512)])
def test_rotate_columns_in_place(parts, rows, block):
    V = _basis(rows, 12)
    Y = np.random.default_rng(3).standard_normal((10, 6))
    expected = V.copy()
    expected[:, :6] = V[:, :10] @ Y
    bp.rotate_columns(V, Y, rows=block)
    np.testing.assert_allclose(V, expected, rtol=0, atol=1e-12)
    assert np.array_equal(V[:, 6:], expected[:, 6:])


def test_rows_are_split_the_same_way_on_any_number_of_threads():
    # the real split (not the fixture's): PARTS ranges for a tall basis, one for a short one,
    # and the same bits on one thread as on all of them (the ranges run in turn)
    assert bp._parts(10 * bp.MIN_ROWS_PER_THREAD) == bp.PARTS
    assert bp._parts(bp.MIN_ROWS_PER_THREAD - 1) == 1
    rows = bp.PARTS * bp.MIN_ROWS_PER_THREAD + 3
    V = _basis(rows, 20)
    W = np.asfortranarray(np.random.default_rng(5).standard_normal((rows, 8)))
    threads = get_num_threads()
    set_num_threads(1)
    try:
        one = bp.inner(V[:, :16], W)
    finally:
        set_num_threads(threads)
    np.testing.assert_array_equal(bp.inner(V[:, :16], W), one)


def test_blas_is_held_to_one_thread_only_inside():
    def blas_threads():
        return [lib["num_threads"] for lib in threadpool_info() if lib["user_api"] == "blas"]

    before = blas_threads()
    with bp.one_blas_thread():
        assert set(blas_threads()) == {1}
    assert blas_threads() == before


def test_bad_layouts_and_shapes_are_refused_before_any_write():
    V = _basis(100, 10)
    W = np.asfortranarray(np.ones((100, 4)))
    with pytest.raises(ValueError, match="column-major"):
        bp.subtract_product(np.ascontiguousarray(W), V[:, :3], np.ones((3, 4)))  # BLAS would update a copy
    with pytest.raises(ValueError, match="column-major"):
        bp.inner(V.astype(np.float32), W)
    with pytest.raises(ValueError, match="same rows"):
        bp.inner(V[:50], W)
    with pytest.raises(ValueError, match="p x q"):
        bp.subtract_product(W, V[:, :3], np.ones((4, 4)))
    with pytest.raises(ValueError, match="overlap"):
        bp.subtract_product(V[:, 2:6], V[:, :3], np.ones((3, 4)))
    with pytest.raises(ValueError, match="p <= q"):
        bp.rotate_columns(V, np.ones((3, 4)))
    with pytest.raises(ValueError, match="rows"):
        bp.rotate_columns(V, np.ones((4, 3)), rows=0)
    assert np.array_equal(W, np.ones((100, 4)))


@pytest.mark.parametrize("fmt", ["csr", "csc"])
def test_sparse_product_is_scipys_product_column_major(fmt):
    import scipy.sparse as sp

    import kernelrt.kernels.laplacian as lap

    V, F = lap.noisy_icosphere(3, 0.1)
    L, _ = lap.cotan_laplacian(V, F, "cpu")
    X = _basis(L.shape[0], 12, seed=3)[:, :9]  # a column block of a wider basis
    ref = L @ np.ascontiguousarray(X)
    threads = get_num_threads()
    try:
        set_num_threads(1)
        one = bp.sparse_product(L.asformat(fmt), X)
    finally:
        set_num_threads(threads)
    out = bp.sparse_product(L, X)
    assert out.flags.f_contiguous and out.shape == X.shape
    # each row's sum in SciPy's order from 0.0: the same expression; the tolerance is for a
    # SciPy build whose compiler fused its multiply-adds (no kernelrt machine has shown it)
    np.testing.assert_allclose(out, ref, rtol=0, atol=1e-14 * np.abs(L).sum(axis=1).max() * np.abs(X).max())
    np.testing.assert_array_equal(one, out)  # one column per iteration: the same bits on any thread count
    with pytest.raises(ValueError, match="column-major"):
        bp.sparse_product(L, np.ascontiguousarray(X))
    with pytest.raises(ValueError, match="must be"):
        bp.sparse_product(sp.eye(5, format="csr"), X)


@pytest.mark.parametrize("rows", [1001, 7])
def test_report_sums_are_the_residual_norms_and_the_m_gram(parts, rows):
    import scipy.sparse as sp

    rng = np.random.default_rng(3)
    A = sp.random(rows, rows, density=min(1.0, 8 / rows), random_state=4, format="csr")
    L = (A + A.T).tocsr()
    V = rng.standard_normal((rows, 5))
    m = rng.uniform(0.5, 2.0, rows)
    evals = rng.uniform(0.0, 3.0, 5)
    residual, mv, gram = bp.report_sums(L, V, m, evals)
    R = L @ V - (m[:, None] * V) * evals
    np.testing.assert_allclose(residual, np.linalg.norm(R, axis=0), rtol=1e-12)
    np.testing.assert_allclose(mv, np.linalg.norm(m[:, None] * V, axis=0), rtol=1e-12)
    np.testing.assert_allclose(gram, V.T @ (m[:, None] * V), rtol=0, atol=1e-12 * rows)
    # the same inputs give the same bits (fixed row ranges, whatever the threads)
    again = bp.report_sums(L.tocoo(), V, m, evals)
    np.testing.assert_array_equal(again[0], residual)
    np.testing.assert_array_equal(again[2], gram)


def test_report_sums_refuse_what_they_would_misread():
    import scipy.sparse as sp

    L = sp.identity(6, format="csr")
    V = np.ones((6, 2))
    with pytest.raises(ValueError, match="row-major"):
        bp.report_sums(L, np.asfortranarray(V), np.ones(6), np.ones(2))
    with pytest.raises(ValueError, match="evals"):
        bp.report_sums(L, V, np.ones(6), np.ones(3))
    with pytest.raises(ValueError, match="m"):
        bp.report_sums(L, V, np.ones(5), np.ones(2))


def test_one_blas_thread_contexts_nest_and_overlap_between_threads():
    import threading

    def blas_threads():
        return {lib["num_threads"] for lib in threadpool_info() if lib["user_api"] == "blas"}

    before = blas_threads()
    with bp.one_blas_thread():
        with bp.one_blas_thread():
            pass
        assert blas_threads() == {1}  # closing the inner one left the outer one's limit
        opened, release = threading.Event(), threading.Event()

        def other():
            with bp.one_blas_thread():
                opened.set()
                release.wait(10)

        t = threading.Thread(target=other)
        t.start()
        opened.wait(10)
    # this thread's context is closed, the other thread's is still open: BLAS stays at one
    assert blas_threads() == {1}
    release.set()
    t.join()
    assert blas_threads() == before
    # a context of another thread's own takes effect after this thread's (threadpoolctl >= 3.6
    # ignores a thread that did not set the pool first, unless the claim is cleared)
    seen = []

    def alone():
        with bp.one_blas_thread():
            seen.append(blas_threads())

    t = threading.Thread(target=alone)
    t.start()
    t.join()
    assert seen == [{1}] and blas_threads() == before


@pytest.mark.parametrize("rows", [1001, 7])
def test_subtract_then_inner_is_both_products(parts, rows):
    V = _basis(rows, 30)
    rng = np.random.default_rng(5)
    W0 = np.asfortranarray(rng.standard_normal((rows, 8)))
    C = rng.standard_normal((6, 8))
    W = W0.copy(order="F")
    out = bp.subtract_then_inner(W, V[:, 10:16], C, V[:, :20], rows=100)  # blocks that do not divide n
    ref = W0 - V[:, 10:16] @ C
    np.testing.assert_allclose(W, ref, rtol=0, atol=1e-12)
    np.testing.assert_allclose(out, V[:, :20].T @ ref, rtol=0, atol=1e-11)
    assert np.array_equal(V, _basis(rows, 30))  # the basis is only read
    # with the updated block's Gram matrix from the same pass (block Lanczos' instead of a pass of its own)
    W = W0.copy(order="F")
    out_too, gram = bp.subtract_then_inner(W, V[:, 10:16], C, V[:, :20], rows=100, gram=True)
    np.testing.assert_allclose(out_too, out, rtol=0, atol=1e-12)
    np.testing.assert_allclose(gram, ref.T @ ref, rtol=1e-13, atol=1e-11)
    # nothing to subtract, or nothing to take the inner products with
    W = W0.copy(order="F")
    np.testing.assert_allclose(bp.subtract_then_inner(W, V[:, :0], np.zeros((0, 8)), V[:, :4]), V[:, :4].T @ W0,
                               rtol=0, atol=1e-11)
    out, gram = bp.subtract_then_inner(W, V[:, :0], np.zeros((0, 8)), V[:, :0], gram=True)  # the Gram matrix alone
    assert out.shape == (0, 8)
    np.testing.assert_allclose(gram, W0.T @ W0, rtol=1e-13, atol=1e-11)
    assert bp.subtract_then_inner(W, V[:, :3], C[:3], V[:, :0]).shape == (0, 8)
    np.testing.assert_allclose(W, W0 - V[:, :3] @ C[:3], rtol=0, atol=1e-12)
    out, gram = bp.subtract_then_inner(W[:, :0], V[:, :3], np.zeros((3, 0)), V[:, :4], gram=True)  # an empty block
    assert out.shape == (4, 0) and gram.shape == (0, 0)


def test_subtract_then_inner_refuses_before_writing():
    V = _basis(100, 10)
    W = np.asfortranarray(np.ones((100, 4)))
    with pytest.raises(ValueError, match="overlap"):
        bp.subtract_then_inner(V[:, 4:8], V[:, :2], np.ones((2, 4)), V[:, :5])  # B reads W's first column
    with pytest.raises(ValueError, match="needs"):
        bp.subtract_then_inner(W, V[:, :3], np.ones((2, 4)), V)
    with pytest.raises(ValueError, match="column-major"):
        bp.subtract_then_inner(np.ascontiguousarray(W), V[:, :3], np.ones((3, 4)), V)
    with pytest.raises(ValueError, match="rows"):
        bp.subtract_then_inner(W, V[:, :3], np.ones((3, 4)), V, rows=0)
    assert np.array_equal(W, np.ones((100, 4)))
