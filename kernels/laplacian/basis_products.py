"""Products with the Krylov basis, split by rows between threads: ``Aᵀ B``, ``W -= A C``, rotations, ``L X``.

Owns the dense products of block Lanczos (lanczos.py) with its tall column-major basis
(n rows, up to max(2.4k, k + 100) columns) and a block of 8 vectors: the inner products ``Aᵀ B``, the
update ``W -= A C`` and the thick restart's rotation ``V[:, :p] := V[:, :q] Y``; and the
sparse ``L X`` of the last Rayleigh–Ritz (cholesky_route.py), its columns split between threads;
and the sums an eigensolve is judged by (``report_sums``: residual norms and VᵀMV of a
row-major eigenvector block, eigen_report.py), its rows split between threads.

Why not one BLAS call with two BLAS threads: OpenBLAS splits a GEMM over its output, and
these outputs are tiny (a 120 x 8 inner product, 66 result columns of a rotation) while
the shared dimension is the basis' n rows; a product of a 40,962 x 96 basis with 8 columns
took 2.0 ms on two threads against 3.1 ms on one, and a restart's rotation 11-16 ms on
two against 15 ms on one (6.9 ms here). Here each numba thread takes a contiguous range
of rows and runs single-threaded BLAS (SciPy's, called by address: dense_blas.py) on it,
so both cores stream their own half of the basis; the inner products' partial sums are
added at the end (a p x q sum per thread).

Every array but ``report_sums``' is float64 and column-major with unit row stride (a column
block of the basis, whose leading dimension is the basis' row count, qualifies). BLAS is held
to one thread while these run (``one_blas_thread``; inside an open one, a counter): a
multithreaded OpenBLAS called from two threads at once oversubscribes the cores (a last
Rayleigh–Ritz at 40,962 x 50 took 0.13 s against 0.04 s).
"""

from __future__ import annotations

import contextlib
import threading
from collections.abc import Iterator

import numpy as np
from numba import prange
from threadpoolctl import ThreadpoolController

import kernelrt

from . import dense_blas as blas
from .csr_rows import csr_row_dot

__all__ = ["inner", "report_sums", "subtract_product", "subtract_then_inner", "product_into", "rotate_columns",
           "sparse_product", "one_blas_thread"]

# Row ranges of a product: two, the cores kernelrt is measured on (2-vCPU Intel Xeon / AMD
# EPYC). Fixed, not numba's thread count, so that the partial sums, and so the bits of a
# result, do not depend on how many threads run them (one thread runs the ranges in turn).
PARTS = 2
# Rows per range below which one range does the whole product: a parallel region's start
# (~20 us) is more than half of such a product.
MIN_ROWS_PER_THREAD = 2048

_controller = None
# How many one_blas_thread contexts are open, in any thread, and the limiter of the first. BLAS's
# pool size is one setting for the whole process: only the first context sets it and only the
# last restores it, so that a context closing in one thread does not give another thread's BLAS
# calls their pool back, and a nested context (every product inside the Cholesky route's) costs
# a counter instead of threadpoolctl's ~13 us (~290 of them in a solve at 50,000 vertices, k = 50)
_open = 0
_limiter = None
_lock = threading.Lock()


@contextlib.contextmanager
def one_blas_thread() -> Iterator[None]:
    """A context in which BLAS runs one thread (threadpoolctl; its controller made once)."""
    global _controller, _open, _limiter
    with _lock:
        if _open == 0:
            if _controller is None:
                _controller = ThreadpoolController()
            _take_control()
            _limiter = _controller.limit(limits=1, user_api="blas")
        _open += 1
    try:
        yield
    finally:
        with _lock:
            _open -= 1
            if _open == 0:
                _take_control()
                _limiter.restore_original_limits()
                _limiter = None
                _take_control()  # and leave it to whichever thread sets the pool next


def _take_control() -> None:
    # threadpoolctl >= 3.6 lets one thread at a time set a process-wide (pthreads) OpenBLAS pool and
    # silently ignores the others: the first context may open in one thread and the last close in
    # another (a Dask worker's task threads), so each of those steps clears the claim first
    for lib in _controller.lib_controllers:
        clear = getattr(type(lib), "clear_controlling_thread", None)
        if clear is not None:
            clear(force=True)


def _parts(n: int) -> int:
    return PARTS if n >= PARTS * MIN_ROWS_PER_THREAD else 1


def _column_major(name: str, a) -> None:
    if a.dtype != np.float64 or a.ndim != 2 or (a.shape[0] > 1 and a.strides[0] != 8) or a.strides[1] < 8 * a.shape[0]:
        raise ValueError(f"{name} must be a float64 column-major 2-D array with unit row stride "
                         f"(got dtype {a.dtype}, shape {a.shape}, strides {a.strides})")


def _ld(a) -> int:
    return max(a.strides[1] // 8, a.shape[0], 1)


@kernelrt.njit(parallel=True)
def _inner(a, lda, b, ldb, n, p, q, out):
    # out[t] := (Bᵀ A)ᵀ over thread t's rows: Bᵀ A (q x p, column-major) is the same numbers
    # as Aᵀ B (p x q) row-major, and OpenBLAS runs it 8-20% faster for a narrow B (8 columns
    # against a 24-136 column A at 40,962 rows: 1.78 ms against 2.14 at 120; Intel Xeon)
    parts = out.shape[0]
    for t in prange(parts):
        r0, r1 = t * n // parts, (t + 1) * n // parts
        s = blas.scratch()
        blas.gemm(s, blas.TRANS, blas.NOTRANS, q, p, r1 - r0, 1.0, b + 8 * r0, ldb, a + 8 * r0, lda,
                  0.0, out[t].ctypes.data, q)


def inner(A, B) -> np.ndarray:
    """``Aᵀ B`` (p x q, row-major) for column-major A (n x p) and B (n x q)."""
    _column_major("A", A)
    _column_major("B", B)
    if A.shape[0] != B.shape[0]:
        raise ValueError(f"A and B must have the same rows (got {A.shape} and {B.shape})")
    n, p, q = A.shape[0], A.shape[1], B.shape[1]
    out = np.empty((_parts(n), p, q))  # out[t] is thread t's p x q partial sum, row-major
    if p and q:
        with one_blas_thread():
            _inner(A.ctypes.data, _ld(A), B.ctypes.data, _ld(B), n, p, q, out)
    else:
        out[:] = 0.0
    return out.sum(axis=0) if out.shape[0] > 1 else out[0]


@kernelrt.njit(parallel=True)
def _report_sums(indptr, indices, data, V, m, evals, out):
    # out[t, 0, q] = Σ (L V - M V Λ)[r, q]², out[t, 1, q] = Σ (M V)[r, q]² over part t's rows r,
    # and out[t, 2:] = Vᵀ M V over them (column-major), a block of rows at a time
    n, k = V.shape
    parts = out.shape[0]
    rows = 256
    blocks = (n + rows - 1) // rows
    for t in prange(parts):
        s = blas.scratch()
        lv = np.empty(k)
        T = np.empty(rows * k)  # M V's rows of this block, row-major
        for b in range(t * blocks // parts, (t + 1) * blocks // parts):
            a0 = b * rows
            nr = min(rows, n - a0)
            for i in range(nr):
                r = a0 + i
                for q in range(k):
                    lv[q] = 0.0
                for p in range(indptr[r], indptr[r + 1]):  # (L V)[r, :], each entry summed in stored order
                    v = data[p]
                    c = indices[p]
                    for q in range(k):
                        lv[q] += v * V[c, q]
                for q in range(k):
                    mv = m[r] * V[r, q]
                    T[i * k + q] = mv
                    res = lv[q] - mv * evals[q]
                    out[t, 0, q] += res * res
                    out[t, 1, q] += mv * mv
            # Vᵀ (M V) += this block's: row-major n x k is column-major k x n, so A Bᵀ
            blas.gemm(s, blas.NOTRANS, blas.TRANS, k, k, nr, 1.0, V.ctypes.data + 8 * a0 * k, k, T.ctypes.data, k,
                      1.0, out[t, 2:].ctypes.data, k)


def report_sums(L, V, m, evals) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """``(‖L v - λ M v‖, ‖M v‖, VᵀMV)`` for eigenpairs (evals (k,), V (N, k) row-major), no N x k temporary.

    The measure of an eigensolve (eigen_report.report). Each entry of ``L V - M V Λ`` is
    rounded as SciPy's product and NumPy's broadcasts round it (each row of L V summed in
    stored order from 0.0, then ``(m v) λ`` subtracted); the rows are split between threads
    and the squares summed per thread, then added. Against the product, M V and the residual
    as three N x k arrays: 15 ms against 41 ms at 50,000 x 50 (Intel Xeon, 2 vCPU).
    """
    if not (V.dtype == np.float64 and V.ndim == 2 and V.flags.c_contiguous):
        raise ValueError(f"V must be a row-major float64 (N, k) array (got {V.dtype}, shape {V.shape})")
    L = L.tocsr() if L.format != "csr" else L
    n, k = V.shape
    m = np.ascontiguousarray(m, dtype=np.float64)
    evals = np.ascontiguousarray(evals, dtype=np.float64)
    if L.shape != (n, n) or m.shape != (n,) or evals.shape != (k,):
        raise ValueError(f"needs L ({n}, {n}), m ({n},) and evals ({k},) for V {V.shape} "
                         f"(got {L.shape}, {m.shape}, {evals.shape})")
    out = np.zeros((_parts(n), 2 + k, k))
    if n and k:
        with one_blas_thread():
            _report_sums(L.indptr, L.indices, np.asarray(L.data, dtype=np.float64), V, m, evals, out)
    total = out.sum(axis=0) if out.shape[0] > 1 else out[0]
    return np.sqrt(total[0]), np.sqrt(total[1]), total[2:].T


@kernelrt.njit(parallel=True)
def _product(w, ldw, a, lda, c, n, p, q, alpha, beta, parts):
    for t in prange(parts):
        r0, r1 = t * n // parts, (t + 1) * n // parts
        s = blas.scratch()
        blas.gemm(s, blas.NOTRANS, blas.NOTRANS, r1 - r0, q, p, alpha, a + 8 * r0, lda, c, p,
                  beta, w + 8 * r0, ldw)


def _into(W, A, C, alpha: float, beta: float) -> None:
    # W := alpha A C + beta W, row ranges to threads
    _column_major("W", W)
    _column_major("A", A)
    if A.shape[0] != W.shape[0] or C.shape != (A.shape[1], W.shape[1]):
        raise ValueError(f"needs W n x q, A n x p, C p x q (got W {W.shape}, A {A.shape}, C {C.shape})")
    if np.may_share_memory(W, A):
        raise ValueError("W must not overlap A")
    C = np.asfortranarray(C, dtype=np.float64)
    n, p, q = A.shape[0], A.shape[1], W.shape[1]
    if q and n:
        with one_blas_thread():
            _product(W.ctypes.data, _ld(W), A.ctypes.data, _ld(A), C.ctypes.data, n, p, q, alpha, beta, _parts(n))


def subtract_product(W, A, C) -> None:
    """``W -= A @ C`` in place: W (n x q) and A (n x p) column-major, C (p x q)."""
    if A.shape[1]:
        _into(W, A, C, -1.0, 1.0)


@kernelrt.njit(parallel=True)
def _subtract_inner(w, ldw, a, lda, c, pa, b, ldb, pb, n, q, rows, out, gram):
    # W -= A C, then out[t] := (Bᵀ W)ᵀ over thread t's rows, a block of `rows` rows at a time:
    # the block of W is still in cache when the inner product reads it (and gram[t] := Wᵀ W
    # over them, where gram is not empty)
    parts = out.shape[0]
    grams = gram.shape[0] > 0
    for t in prange(parts):
        r0, r1 = t * n // parts, (t + 1) * n // parts
        s = blas.scratch()
        beta = 0.0
        for c0 in range(r0, r1, rows):
            nr = min(rows, r1 - c0)
            wc = w + 8 * c0
            if pa:
                blas.gemm(s, blas.NOTRANS, blas.NOTRANS, nr, q, pa, -1.0, a + 8 * c0, lda, c, pa, 1.0, wc, ldw)
            if pb:
                blas.gemm(s, blas.TRANS, blas.NOTRANS, q, pb, nr, 1.0, wc, ldw, b + 8 * c0, ldb,
                          beta, out[t].ctypes.data, q)
            if grams:
                blas.gemm(s, blas.TRANS, blas.NOTRANS, q, q, nr, 1.0, wc, ldw, wc, ldw, beta, gram[t].ctypes.data, q)
            beta = 1.0


def subtract_then_inner(W, A, C, B, rows: int = 512,
                        gram: bool = False) -> np.ndarray | tuple[np.ndarray, np.ndarray]:
    """``W -= A @ C``, then ``Bᵀ W`` (p x q, row-major), in one pass over W's rows.

    W (n x q), A (n x p_A) and B (n x p) column-major, C (p_A x q); W overlaps neither. Block
    Lanczos subtracts a block's projection on its neighbours and takes its inner products
    with the whole basis straight after (lanczos.py): a block of 512 rows of W is updated
    and read again while it is in cache, 1.24-1.27 ms against 1.92 ms for the two products
    apart at 40,962 rows (16 columns subtracted, 93 read; Intel Xeon, 2 vCPU). With ``gram``,
    ``(Bᵀ W, Wᵀ W)``: the updated block's Gram matrix from the same pass (~0.05 ms against
    0.26 ms for a pass of its own at 50,000 x 8).
    """
    _column_major("W", W)
    _column_major("A", A)
    _column_major("B", B)
    n, q = W.shape
    if A.shape[0] != n or B.shape[0] != n or C.shape != (A.shape[1], q):
        raise ValueError(f"needs W n x q, A n x p, C p x q and B n x r (got W {W.shape}, A {A.shape}, "
                         f"C {C.shape}, B {B.shape})")
    if np.may_share_memory(W, A) or np.may_share_memory(W, B):
        raise ValueError("W must not overlap A or B")
    if rows < 1:
        raise ValueError(f"rows must be >= 1 (got {rows})")
    C = np.asfortranarray(C, dtype=np.float64)
    p = B.shape[1]
    out = np.zeros((_parts(n), p, q))  # out[t] is thread t's p x q partial sum, row-major
    grams = np.zeros((_parts(n) if gram else 0, q, q))  # the same for Wᵀ W
    if n and q and (p or gram):
        with one_blas_thread():
            _subtract_inner(W.ctypes.data, _ld(W), A.ctypes.data, _ld(A), C.ctypes.data, A.shape[1],
                            B.ctypes.data, _ld(B), p, n, q, rows, out, grams)
    elif n and q and A.shape[1]:
        subtract_product(W, A, C)
    products = out.sum(axis=0) if out.shape[0] > 1 else out[0]
    if not gram:
        return products
    return products, grams.sum(axis=0) if grams.shape[0] > 1 else grams[0]


def product_into(W, A, C) -> None:
    """``W := A @ C``: W (n x q) and A (n x p) column-major, C (p x q); W must not overlap A."""
    _into(W, A, C, 1.0, 0.0)


@kernelrt.njit(parallel=True)
def _rotate(V, Y, rows, parts):
    n, ldv = V.shape[0], max(V.strides[1] // 8, V.shape[0])
    q, p = Y.shape
    blocks = (n + rows - 1) // rows
    for t in prange(parts):
        s = blas.scratch()
        T = np.empty(rows * p)  # this thread's rows of the result, column-major
        for b in range(t * blocks // parts, (t + 1) * blocks // parts):
            a0 = b * rows
            r = min(rows, n - a0)
            # the rows' product first, then written over the same rows: rows of V depend
            # only on themselves, so no other block is touched
            blas.gemm(s, blas.NOTRANS, blas.NOTRANS, r, p, q, 1.0, V.ctypes.data + 8 * a0, ldv,
                      Y.ctypes.data, q, 0.0, T.ctypes.data, r)
            for j in range(p):
                for i in range(r):
                    V[a0 + i, j] = T[j * r + i]


def rotate_columns(V, Y, rows: int = 512) -> None:
    """``V[:, :p] := V[:, :q] @ Y`` in place (Y is q x p, p <= q), V column-major.

    The thick restart's rotation and the last ones of the Ritz vectors. Row by row the
    product needs only that row of V, so blocks of rows go through a small buffer per
    thread: no n x p temporary (its allocation and copy made a restart at 163,842 x 120
    take 121 ms against ~64 ms for the GEMM alone).
    """
    _column_major("V", V)
    q, p = Y.shape
    if p > q or q > V.shape[1]:
        raise ValueError(f"Y must be q x p with p <= q <= V's {V.shape[1]} columns (got {Y.shape})")
    if rows < 1:
        raise ValueError(f"rows must be >= 1 (got {rows})")
    if p and V.shape[0]:
        with one_blas_thread():
            _rotate(V, np.asfortranarray(Y, dtype=np.float64), rows, _parts(V.shape[0]))


@kernelrt.njit(parallel=True)
def _sparse_columns(indptr, indices, data, X, out):
    # out[:, c] = L X[:, c], a column per iteration: each row's sum is csr_row_dot's (stored
    # order from 0.0, as SciPy's product and kernelrt's other products sum it), on any thread count
    for c in prange(X.shape[1]):
        for r in range(X.shape[0]):
            out[r, c] = csr_row_dot(data, indices, indptr, X, r, c)


def sparse_product(L, X) -> np.ndarray:
    """``L @ X`` as a new column-major array, for a square sparse L and a column-major X (n x k).

    SciPy's product of a CSR matrix and a column-major block copies the block row-major
    first and returns a row-major result, on one thread. Here the columns go to numba
    threads and the result is column-major, the operand ``inner`` takes: the Cholesky
    route's last Rayleigh–Ritz at 40,962 vertices, k = 100, took 56-58 ms against 68-73 ms
    (Intel Xeon, 2 vCPU).
    """
    _column_major("X", X)
    L = L.tocsr() if L.format != "csr" else L
    if L.shape != (X.shape[0], X.shape[0]):
        raise ValueError(f"L must be {X.shape[0]} x {X.shape[0]} for X of shape {X.shape} (got {L.shape})")
    out = np.empty(X.shape, order="F")
    # Touched on this thread first: where the allocation is fresh from the OS, two threads
    # faulting its pages in at once took 25-80 ms at 40,962 x 100 against ~6 ms on one
    out.fill(0.0)
    _sparse_columns(L.indptr, L.indices, np.asarray(L.data, dtype=np.float64), X, out)
    return out
