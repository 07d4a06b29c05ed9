"""kernelrt's supernodal Cholesky: multifrontal numeric factorisation and block solves with BLAS 3.

Owns the numeric phase over a ``SymbolicFactor`` (supernodal_symbolic.py): the factor of
a symmetric positive definite A with the analysed pattern, for any values, and
``solve(B)`` for a whole block of right-hand sides.

* **Factor** (multifrontal, Duff & Reid 1983; Liu 1992): each supernode in postorder
  gathers A's entries and its children's update matrices into a dense front, factors its
  columns (LAPACK ``dpotrf``, ``dtrsm``) and leaves its own update (``dsyrk``) on a stack
  for its parent. Fronts too small for BLAS to pay (``SMALL_FRONT``) run as plain loops.
* **Solve**: forward and backward substitution one supernode at a time, the block of
  right-hand sides row-major (one row is the w values of a vertex, so the gathers read
  whole cache lines): ``dtrsm`` on the diagonal block and ``dgemm`` for the rows below,
  and for the small supernodes (most of them, about half the factor) explicit SIMD over 8
  columns at a time (row_vectors.py). This reads the factor once per block instead of once
  per column, which is what the Krylov iteration's blocks need (cholespy's solve costs
  the same per column from 4 columns on; docs/laplacian.md, "Solver routes measured").
  The elimination tree's independent subtrees (nested dissection's two halves) are solved
  on two numba threads at once, each with single-threaded BLAS, and the top separator
  alone (subtrees.py).

The BLAS is SciPy's (dense_blas.py). Rounding differs from CHOLMOD's (another order of
operations); residuals, not bits, are what the tests compare.
"""

from __future__ import annotations

import numpy as np
from numba import prange

import kernelrt

from . import dense_blas as blas
from .row_vectors import LANES, copy_row, prefetch, sub_products
from .supernodal_symbolic import SymbolicFactor

__all__ = ["SupernodalFactor", "NotPositiveDefiniteError", "to_original_order"]

# A front whose factor has fewer multiply-adds than this runs as loops: a BLAS call's fixed
# cost (argument checks, dispatch) is more than such a front's arithmetic.
SMALL_FRONT = 4096
# A supernode's solve step with fewer multiply-adds per right-hand side than this runs as loops
# (row_vectors.py) instead of BLAS; for blocks narrower than one vector of LANES columns,
# whose loops run with masked lanes, SMALL_SOLVE_NARROW. Measured at 163,842 vertices (Intel
# Xeon, one thread): 8 columns 32-33 ms at 4096 against 39-40 ms at 256; one column 26-28 ms
# at 256 against 32-34 ms at 1024.
SMALL_SOLVE = 4096
SMALL_SOLVE_NARROW = 256


class NotPositiveDefiniteError(np.linalg.LinAlgError):
    """A pivot of the Cholesky factorisation was not positive."""


@kernelrt.njit
def _dense_partial(F, r, c, s) -> bool:
    # factor the first c columns of the r x r column-major front F, update the trailing block
    if c * c * r < SMALL_FRONT:
        for j in range(c):
            d = F[j * r + j]
            if not d > 0.0:
                return False
            d = np.sqrt(d)
            F[j * r + j] = d
            for i in range(j + 1, r):
                F[j * r + i] /= d
            for k in range(j + 1, r):
                lk = F[j * r + k]
                if lk != 0.0:
                    for i in range(k, r):
                        F[k * r + i] -= F[j * r + i] * lk
        return True
    base = F.ctypes.data
    if blas.potrf(s, blas.LOWER, c, base, r) != 0:
        return False
    if r > c:
        u = r - c
        blas.trsm(s, blas.RIGHT, blas.LOWER, blas.TRANS, u, c, 1.0, base, r, base + 8 * c, r)
        blas.syrk(s, blas.LOWER, blas.NOTRANS, u, c, -1.0, base + 8 * c, r, 1.0, base + 8 * (c * r + c), r)
    return True


@kernelrt.njit
def _factor(start, rowptr, rows, valptr, parent, a_indptr, a_indices, a_source, values, stack_peak, front_max, out):
    # Returns -1, or the supernode whose pivot failed (A not positive definite).
    ns = len(start) - 1
    n = start[ns]
    head = np.full(ns, -1, np.int64)  # children, last first: the order they come off the stack
    nxt = np.full(ns, -1, np.int64)
    for s in range(ns):
        p = parent[s]
        if p != -1:
            nxt[s] = head[p]
            head[p] = s
    pos = np.empty(n, np.int64)
    F = np.empty(max(front_max * front_max, 1))
    stack = np.empty(max(stack_peak, 1))
    top = 0
    sc = blas.scratch()
    for s in range(ns):
        f, l = start[s], start[s + 1]
        c = l - f
        r0 = rowptr[s]
        r = rowptr[s + 1] - r0
        for t in range(r):
            pos[rows[r0 + t]] = t
        F[:r * r] = 0.0
        for j in range(f, l):
            col = (j - f) * r
            for p in range(a_indptr[j], a_indptr[j + 1]):
                F[col + pos[a_indices[p]]] += values[a_source[p]]
        ch = head[s]
        while ch != -1:  # extend-add: the child's update sits on top of the stack
            cc = start[ch + 1] - start[ch]
            crow = rowptr[ch] + cc
            u = rowptr[ch + 1] - crow
            top -= u * u
            for b in range(u):
                col = pos[rows[crow + b]] * r
                src = top + b * u
                for a in range(b, u):
                    F[col + pos[rows[crow + a]]] += stack[src + a]
            ch = nxt[ch]
        if not _dense_partial(F, r, c, sc):
            return s
        out[valptr[s]:valptr[s] + r * c] = F[:r * c]
        u = r - c
        for b in range(u):
            src = (c + b) * r + c
            stack[top + b * u:top + (b + 1) * u] = F[src:src + u]
        top += u * u
    return -1


@kernelrt.njit
def _extent(start, rowptr, valptr, s):
    # supernode s: first column, columns, first row entry, rows, first value
    return start[s], start[s + 1] - start[s], rowptr[s], rowptr[s + 1] - rowptr[s], valptr[s]


@kernelrt.njit
def _prefetch_values(L, valptr, s):
    # supernode s's factor values, one cache line each, asked for while the current small
    # supernode computes: their stream overlaps its arithmetic (~3 ms of ~36 at 163,842 vertices)
    for t in range(valptr[s], valptr[s + 1], 8):
        prefetch(L, t)


@kernelrt.njit
def _forward(s, start, rowptr, rows, valptr, L, X, small, T, sc, Z, slot, redirect):
    # supernode s of L y = b on row-major X; with redirect, the updates of rows whose slot is
    # >= 0 (the split's top, which another part updates too) go to Z[slot] instead
    ns, w = len(start) - 1, X.shape[1]
    f, c, r0, r, v = _extent(start, rowptr, valptr, s)
    if c * r < small:  # row by row, 8 columns at a time (row_vectors.py)
        if s + 1 < ns:
            _prefetch_values(L, valptr, s + 1)
        for k in range(0, w, LANES):
            lanes = min(LANES, w - k)
            for j in range(c):  # X[f+j] := (X[f+j] - Σ_{t<j} L[j, t] X[f+t]) / L[j, j]
                sub_products(X, (f + j) * w + k, 0, L, v + j, 0, r, X, f * w + k, w, 1, j, lanes,
                             1.0 / L[v + j * r + j])
            for i in range(c, r):  # X[row i] -= Σ_t L[i, t] X[f+t]
                row = rows[r0 + i]
                if redirect and slot[row] >= 0:
                    sub_products(Z, slot[row] * w + k, 0, L, v + i, 0, r, X, f * w + k, w, 1, c, lanes, 1.0)
                else:
                    sub_products(X, row * w + k, 0, L, v + i, 0, r, X, f * w + k, w, 1, c, lanes, 1.0)
        return
    # row-major X[f:l] is the column-major w x c block Xᵀ: Xᵀ := Xᵀ L11⁻ᵀ
    xb, lb, tb = X.ctypes.data, L.ctypes.data, T.ctypes.data
    blas.trsm(sc, blas.RIGHT, blas.LOWER, blas.TRANS, w, c, 1.0, lb + 8 * v, r, xb + 8 * f * w, w)
    u = r - c
    if u:
        # Tᵀ (w x u) = Xᵀ L21ᵀ, then X[rows below] -= T
        blas.gemm(sc, blas.NOTRANS, blas.TRANS, w, u, c, 1.0, xb + 8 * f * w, w, lb + 8 * (v + c), r, 0.0, tb, w)
        for i in range(u):
            row = rows[r0 + c + i]
            if redirect and slot[row] >= 0:
                for k in range(w):
                    Z[slot[row], k] -= T[i * w + k]
            else:
                for k in range(w):
                    X[row, k] -= T[i * w + k]


@kernelrt.njit
def _backward(s, start, rowptr, rows, valptr, L, X, small, T, sc):
    # supernode s of Lᵀ x = y: reads the rows of its ancestors, writes only its own
    w = X.shape[1]
    f, c, r0, r, v = _extent(start, rowptr, valptr, s)
    u = r - c
    if c * r < small:
        if s > 0:  # the next supernode in this order
            _prefetch_values(L, valptr, s - 1)
        for k in range(0, w, LANES):
            lanes = min(LANES, w - k)
            for i in range(u):  # the rows below, gathered: T is u x w row-major
                copy_row(T, i * w + k, X, rows[r0 + c + i] * w + k, lanes)
            # X[f+j] -= Σ_i L[c+i, j] T[i] for every j, then the diagonal block bottom-up
            sub_products(X, f * w + k, w, L, v + c, r, 1, T, k, w, c, u, lanes, 1.0)
            for j in range(c - 1, -1, -1):
                col = v + j * r
                sub_products(X, (f + j) * w + k, 0, L, col + j + 1, 0, 1, X, (f + j + 1) * w + k, w, 1,
                             c - j - 1, lanes, 1.0 / L[col + j])
        return
    xb, lb, tb = X.ctypes.data, L.ctypes.data, T.ctypes.data
    if u:
        for i in range(u):
            row = rows[r0 + c + i]
            for k in range(w):
                T[i * w + k] = X[row, k]
        # Xᵀ -= Tᵀ L21 (Tᵀ: w x u column-major, L21: u x c)
        blas.gemm(sc, blas.NOTRANS, blas.NOTRANS, w, c, u, -1.0, tb, w, lb + 8 * (v + c), r, 1.0, xb + 8 * f * w, w)
    blas.trsm(sc, blas.RIGHT, blas.LOWER, blas.NOTRANS, w, c, 1.0, lb + 8 * v, r, xb + 8 * f * w, w)


@kernelrt.njit
def _solve_whole(start, rowptr, rows, valptr, L, X, front_max, small):
    # X := A⁻¹ X on one thread, every supernode in order
    ns = len(start) - 1
    sc = blas.scratch()
    T = np.empty(front_max * X.shape[1])
    none = np.empty((0, X.shape[1]))
    no_slot = np.empty(0, np.int64)
    for s in range(ns):
        _forward(s, start, rowptr, rows, valptr, L, X, small, T, sc, none, no_slot, False)
    for s in range(ns - 1, -1, -1):
        _backward(s, start, rowptr, rows, valptr, L, X, small, T, sc)


@kernelrt.njit(parallel=True)
def _solve_split(start, rowptr, rows, valptr, L, X, front_max, small, ranges, rptr, top, slot, top_rows):
    # X := A⁻¹ X with the split's parts on threads (subtrees.py): the parts' forward passes,
    # their top updates summed, the top alone both ways, then the parts' backward passes
    parts, w = len(rptr) - 1, X.shape[1]
    Z = np.zeros((parts, len(top_rows), w))
    for p in prange(parts):
        sc = blas.scratch()
        T = np.empty(front_max * w)
        for g in range(rptr[p], rptr[p + 1]):
            for s in range(ranges[g, 0], ranges[g, 1]):
                _forward(s, start, rowptr, rows, valptr, L, X, small, T, sc, Z[p], slot, True)
    for i in range(len(top_rows)):  # in part order: the same sums on any number of threads
        for p in range(parts):
            for k in range(w):
                X[top_rows[i], k] += Z[p, i, k]
    sc = blas.scratch()
    T = np.empty(front_max * w)
    for s in top:
        _forward(s, start, rowptr, rows, valptr, L, X, small, T, sc, Z[0], slot, False)
    for t in range(len(top) - 1, -1, -1):
        _backward(top[t], start, rowptr, rows, valptr, L, X, small, T, sc)
    for p in prange(parts):
        sc = blas.scratch()
        T = np.empty(front_max * w)
        for g in range(rptr[p + 1] - 1, rptr[p] - 1, -1):
            for s in range(ranges[g, 1] - 1, ranges[g, 0] - 1, -1):
                _backward(s, start, rowptr, rows, valptr, L, X, small, T, sc)


@kernelrt.njit(parallel=True)
def _gather_rows(src, index, scale, dst, scale_at_source):
    # dst[i] = src[index[i]] * scale[index[i] or i]: a pull, so dst is written in order in
    # either memory layout and only the reads jump (pushing into a column-major dst with
    # the inverse index wrote 8 scattered streams: 5.7 ms against 1.9 ms at 163,842 x 8).
    # The operator's scaling rides on the permutation's pass. Rows in ranges per thread
    # (each value is a copy times one scale: the same bits on any number of threads).
    for i in prange(len(index)):
        j = index[i]
        d = scale[j] if scale_at_source else scale[i]
        for k in range(src.shape[1]):
            dst[i, k] = src[j, k] * d


@kernelrt.njit(parallel=True)
def _scale_rows(src, scale, dst):
    # dst[i] = src[i] * scale[i]: a solve's copy in and out of the row-major layout where the
    # rows are already in the factor's order (no gather: 0.25 ms against 1.1 ms for both
    # copies at 50,000 x 8)
    for i in prange(src.shape[0]):
        d = scale[i]
        for k in range(src.shape[1]):
            dst[i, k] = src[i, k] * d


@kernelrt.njit(parallel=True)
def _unpermute_columns(Y, inverse, scale):
    # Y[i, c] := Y[inverse[i], c] * scale[i] in place, a column per iteration through a buffer
    for c in prange(Y.shape[1]):
        column = Y[:, c].copy()
        for i in range(Y.shape[0]):
            Y[i, c] = column[inverse[i]] * scale[i]


def to_original_order(Y: np.ndarray, inverse: np.ndarray, scale: np.ndarray) -> None:
    """``Y[i] := Y[inverse[i]] * scale[i]`` in place: rows in a factor's order back to the mesh's.

    ``inverse`` is the factor's ``symbolic.inverse`` (``inverse[old] = new``); Y is (N, k),
    each column permuted through its own buffer (no second N x k array).
    """
    if Y.ndim != 2 or inverse.shape != (Y.shape[0],) or scale.shape != (Y.shape[0],):
        raise ValueError(f"needs Y (N, k), inverse (N,) and scale (N,) (got {Y.shape}, {inverse.shape}, {scale.shape})")
    _unpermute_columns(Y, inverse, np.asarray(scale, dtype=np.float64))


class SupernodalFactor:
    """The Cholesky factor of a symmetric positive definite A with an analysed pattern.

    Args:
        symbolic: the pattern's ``SymbolicFactor`` (kept by a cohort, made once otherwise).
        values: A's values in the order of the CSR arrays the analysis was given.

    Raises:
        ValueError: ``values`` is not one value per entry of the analysed pattern.
        NotPositiveDefiniteError: a pivot was not positive.
    """

    def __init__(self, symbolic: SymbolicFactor, values: np.ndarray):
        sym = symbolic
        values = np.asarray(values, dtype=np.float64)
        if values.shape != (sym.input_nnz,):
            raise ValueError(f"values must have shape ({sym.input_nnz},), one per entry of the analysed pattern "
                             f"(got {values.shape})")
        self.symbolic = sym
        self.values = np.empty(sym.nnz)
        failed = _factor(sym.start, sym.rowptr, sym.rows, sym.valptr, sym.parent, sym.a_indptr, sym.a_indices,
                         sym.a_source, np.ascontiguousarray(values, dtype=np.float64), sym.stack_peak,
                         sym.front_max, self.values)
        if failed >= 0:
            raise NotPositiveDefiniteError(
                f"the matrix is not positive definite (a pivot in columns {sym.start[failed]}.."
                f"{sym.start[failed + 1] - 1} of the reordered matrix was not positive)")

    def solve(self, B: np.ndarray, scale: np.ndarray | None = None, split: bool = True,
              small: int | None = None, in_order: bool = False) -> np.ndarray:
        """``A⁻¹ B``, or ``D A⁻¹ D B`` with ``D = diag(scale)``, for B of shape (N,) or (N, w).

        Returns a new array, column-major where B is (a block of a column-major Krylov
        basis needs no copy either way), row-major otherwise. The scaling is applied while
        the rows are permuted into and out of the factor's order (shift-invert's
        ``M^½ A⁻¹ M^½`` costs no extra pass). ``split`` solves the elimination tree's
        independent subtrees on numba's threads (subtrees.py; False: one pass on this
        thread, which rounds the top's rows in another order); ``small`` is the size below
        which a supernode's step runs as loops instead of BLAS (default: ``SMALL_SOLVE``,
        or ``SMALL_SOLVE_NARROW`` for fewer than 8 columns). ``in_order``: B's rows, the
        scale's and the result's are in the factor's order (``symbolic.perm[new] = old``),
        so the rows are only copied, not gathered (a Krylov iteration run in that order;
        ``to_original_order`` brings its vectors back).
        """
        sym = self.symbolic
        B = np.asarray(B, dtype=np.float64)
        if B.ndim not in (1, 2) or B.shape[0] != sym.n:
            raise ValueError(f"B must have shape ({sym.n},) or ({sym.n}, w) (got {B.shape})")
        scale = np.ones(sym.n) if scale is None else np.asarray(scale, dtype=np.float64)
        if scale.shape != (sym.n,):
            raise ValueError(f"scale must have shape ({sym.n},) (got {scale.shape})")
        B2 = B.reshape(sym.n, -1)
        X = np.empty(B2.shape)  # row-major, the layout the block solves work in
        if in_order:
            _scale_rows(B2, scale, X)
        else:
            _gather_rows(B2, sym.perm, scale, X, True)
        if small is None:
            small = SMALL_SOLVE if X.shape[1] >= LANES else SMALL_SOLVE_NARROW
        tree = sym.solve_split() if split else None
        if tree is None:
            _solve_whole(sym.start, sym.rowptr, sym.rows, sym.valptr, self.values, X, sym.front_max, small)
        else:
            _solve_split(sym.start, sym.rowptr, sym.rows, sym.valptr, self.values, X, sym.front_max, small,
                         tree.ranges, tree.rptr, tree.top, tree.slot, tree.top_rows)
        column_major = B2.flags.f_contiguous and not B2.flags.c_contiguous
        out = np.empty(B2.shape, order="F" if column_major else "C")
        if in_order:
            _scale_rows(X, scale, out)
        else:
            _gather_rows(X, sym.inverse, scale, out, False)
        return out.reshape(B.shape)
