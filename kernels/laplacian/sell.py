"""SELL-32 storage of the Laplacian for the GPU's products, heat steps and Chebyshev step.

What: ``SellMatrix``, the CSR matrix stored once more, on the host with NumPy (vectorised),
as sliced ELLPACK with slices of 32 rows, slot-major; and the kernels that read it:
``sell_matvec``, ``sell_heat_step``, ``sell_matmat``, ``sell_heat_step_block`` and
``sell_cheb_step``, each with its CSR counterpart's arithmetic (spmv.py, chebyshev.py).
``LaplacianOperator(layout="sell")`` (or ``use_variants(sparse="sell")``) launches them.

Why: the CSR kernels give each thread a row, so a warp's 32 rows start ~56 B apart (7
entries of 8 B) and one load of values spans ~1.8 KB: ~56 sectors of 32 B per request. A
SELL-32 slice is one warp's 32 rows with their p-th entries side by side: a load of values
reads 256 contiguous bytes (8 sectors), a load of columns 128 (4). Still one thread per row
(1-D) or per output element (2-D, where this helps at k < 32: at k >= 32 a warp's lanes share
one row, whose entries are broadcast in either layout).

Layout (row r = 32 s + lane; width_s = the longest row of slice s)::

    slice s:  slot 0            slot 1                 ...  slot width_s - 1
              r0 r1 ... r31     r0 r1 ... r31               r0 ... r31      (entries p = 0, 1, ...)
    sdata[slice_ptr[s] + p * 32 + lane] = row r's p-th stored entry; scol[...] its column
    slice_ptr[s + 1] = slice_ptr[s] + 32 width_s;  row_len[r] = row r's stored entries

Bits: the kernels loop p < row_len[r], so padding (data 0.0, column = the row) is never
read, and each output element is one thread's sum from 0.0 over its row's entries in CSR's
stored order, then the same expression: the CSR kernels' operations in their order, so
their bits, whatever x holds (a padded 0.0 * inf, had it been read, would be NaN).

``order="rcm"``: reverse Cuthill-McKee renumbers rows and columns, so a slice's gathers from
X fall near each other. Each row keeps its entries in the original stored order (only their
column ids change), so each output element is the same terms summed in the same order: equal
bits once un-permuted. The price is two gathers per product (X in, Y out; per ``heat_steps``
call, u and the mass in and the result out, not per step), each a read and a write of N x k
doubles: worth it only when X exceeds L2 (50 MB on an H100: large meshes with many columns).

Memory: ``padding_ratio`` = stored slots / nnz (1.0: no padding). Icosphere rows hold 6 or 7
entries, so nearly every slice is 7 wide: 1.003 at level 5, 1.05 at level 3, more on small
meshes, whose last slice is mostly empty lanes. The operator also keeps its CSR arrays.

Awaiting GPU timing: proven bitwise equal to CSR on the CUDA simulator and compiled to PTX;
no GPU has timed it yet.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Any

import numba
import numpy as np
import scipy.sparse as sp
from numba import cuda
from scipy.sparse.csgraph import reverse_cuthill_mckee

import kernelrt

from ..variants import variant
from .placement import BLOCK, blocks

__all__ = ["SellMatrix", "SELL_OF", "check_order", "rcm_renumber", "resolve_layout", "sell_matvec", "sell_heat_step", "sell_matmat",
           "sell_heat_step_block", "sell_cheb_step", "sell_gather_rows", "sell_variant_kernels"]

SLICE = 32  # slice height: a warp
# Unsigned constants keep the entry index unsigned (numba types uint64 + int64 as float64, and
# an unsigned index spares the negative-index fix-up on every load, as spmv.py's views do).
_SLICE_U, _LANES_U = np.uint64(SLICE), np.uint64(SLICE - 1)


@kernelrt.device
def _first(slice_ptr, r):
    """Where row r's entry 0 is: its slice's start plus its lane (then + 32 per entry)."""
    u = np.uint64(r)
    return np.uint64(slice_ptr[u // _SLICE_U]) + (u & _LANES_U)


@kernelrt.kernel
def sell_matvec(r, sdata, scol, slice_ptr, row_len, x, y):
    if r < y.shape[0]:
        e = _first(slice_ptr, r)
        acc = 0.0
        for _ in range(row_len[r]):
            acc += sdata[e] * x[scol[e]]
            e += _SLICE_U
        y[r] = acc


@kernelrt.kernel
def sell_heat_step(r, sdata, scol, slice_ptr, row_len, mass, tau, u, out):
    if r < out.shape[0]:
        e = _first(slice_ptr, r)
        acc = 0.0
        for _ in range(row_len[r]):
            acc += sdata[e] * u[scol[e]]
            e += _SLICE_U
        out[r] = u[r] - tau * (acc / mass[r])


@kernelrt.device
def sell_row_dot(sdata, scol, slice_ptr, row_len, X, r, q):
    """``(L X)[r, q]`` over row r's entries in CSR's stored order: ``csr_row_dot``'s sum."""
    e = _first(slice_ptr, r)
    acc = 0.0
    for _ in range(row_len[r]):
        acc += sdata[e] * X[scol[e], q]
        e += _SLICE_U
    return acc


@numba.njit(inline="always")
def sell_row_into(out, r, sdata, scol, slice_ptr, row_len, X):
    """``out[r, :] = (L X)[r, :]`` as axpys over the k columns, ``csr_row_into``'s order and bits."""
    k = out.shape[1]
    for q in range(k):
        out[r, q] = 0.0
    e = _first(slice_ptr, r)
    for _ in range(row_len[r]):
        v = sdata[e]
        c = scol[e]
        for q in range(k):
            out[r, q] += v * X[c, q]
        e += _SLICE_U


# The 2-D kernels keep the CSR kernels' index space (columns on x, grid-stride rows on y) and
# launch geometry. Their CPU twins run the SELL arrays as the CSR twins run theirs: the same
# order, so the same bits (the operator itself keeps CSR on the CPU: LaplacianOperator).
@kernelrt.cuda_kernel
def sell_matmat(sdata, scol, slice_ptr, row_len, X, Y):
    q, r0 = cuda.grid(2)
    if q < Y.shape[1]:
        for r in range(r0, Y.shape[0], cuda.gridDim.y * cuda.blockDim.y):
            Y[r, q] = sell_row_dot(sdata, scol, slice_ptr, row_len, X, r, q)


@sell_matmat.cpu
def _sell_matmat_cpu(grid, block, sdata, scol, slice_ptr, row_len, X, Y):
    for r in numba.prange(Y.shape[0]):
        sell_row_into(Y, r, sdata, scol, slice_ptr, row_len, X)


@kernelrt.cuda_kernel
def sell_heat_step_block(sdata, scol, slice_ptr, row_len, mass, tau, U, out):
    q, r0 = cuda.grid(2)
    if q < out.shape[1]:
        for r in range(r0, out.shape[0], cuda.gridDim.y * cuda.blockDim.y):
            out[r, q] = U[r, q] - tau * (sell_row_dot(sdata, scol, slice_ptr, row_len, U, r, q) / mass[r])


@sell_heat_step_block.cpu
def _sell_heat_step_block_cpu(grid, block, sdata, scol, slice_ptr, row_len, mass, tau, U, out):
    k = out.shape[1]
    for r in numba.prange(out.shape[0]):
        sell_row_into(out, r, sdata, scol, slice_ptr, row_len, U)
        for q in range(k):
            out[r, q] = U[r, q] - tau * (out[r, q] / mass[r])


@kernelrt.cuda_kernel
def sell_cheb_step(sdata, scol, slice_ptr, row_len, alpha, c, beta, Y, X, Z):
    # chebyshev.py's cheb_step over SELL: Z = alpha (A Y - c Y) + beta X, one degree
    q, r0 = cuda.grid(2)
    if q < Z.shape[1]:
        for r in range(r0, Z.shape[0], cuda.gridDim.y * cuda.blockDim.y):
            Z[r, q] = alpha * (sell_row_dot(sdata, scol, slice_ptr, row_len, Y, r, q) - c * Y[r, q]) + beta * X[r, q]


@sell_cheb_step.cpu
def _sell_cheb_step_cpu(grid, block, sdata, scol, slice_ptr, row_len, alpha, c, beta, Y, X, Z):
    k = Z.shape[1]
    for r in numba.prange(Z.shape[0]):
        sell_row_into(Z, r, sdata, scol, slice_ptr, row_len, Y)
        for q in range(k):
            Z[r, q] = alpha * (Z[r, q] - c * Y[r, q]) + beta * X[r, q]


@kernelrt.kernel
def sell_gather_rows(t, perm, X, out):
    # out[i, :] = X[perm[i], :], thread t on element t of the row-major out: a warp's stores are consecutive
    k = out.shape[1]
    if t < out.shape[0] * k:
        i = t // k
        out[i, t - i * k] = X[perm[i], t - i * k]


# Each CSR kernel's SELL counterpart, keyed by name: spmv.py and chebyshev.py import this module,
# so it cannot import their kernels (tests/laplacian/test_sell.py keeps the names in step).
SELL_OF = {"csr_matvec": sell_matvec, "heat_step": sell_heat_step, "csr_matmat": sell_matmat,
           "heat_step_block": sell_heat_step_block, "cheb_step": sell_cheb_step}


def check_order(order):
    """Refuse a row order other than None (the matrix's own) or "rcm" (sell.rcm_renumber)."""
    if order not in (None, "rcm"):
        raise ValueError(f"order must be None or 'rcm' (got {order!r})")


def resolve_layout(layout: str | None, order: str | None) -> str:
    """``layout`` checked and resolved ("csr", "sell", or None: the ``sparse`` variant in force), ``order`` checked."""
    if layout not in (None, "csr", "sell"):
        raise ValueError(f"layout must be 'csr', 'sell' or None (the sparse variant in force) (got {layout!r})")
    check_order(order)
    layout = variant("sparse", layout)
    if order is not None and layout != "sell":
        raise ValueError(f"order={order!r} reorders the SELL storage: it needs layout='sell' (got layout {layout!r})")
    return layout


def rcm_renumber(data, indices, indptr):
    """(perm, inverse, data, indices, indptr): rows and columns renumbered by RCM, each row's entries
    in their stored order (columns relabelled, not sorted: the same sums in the same order)."""
    n, lengths = indptr.shape[0] - 1, np.diff(indptr)
    pattern = sp.csr_matrix((np.ones(indices.shape[0]), indices.astype(np.int32), indptr.astype(np.int32)), (n, n))
    perm = reverse_cuthill_mckee(pattern, symmetric_mode=True).astype(np.int64)  # new row i = old row perm[i]
    inverse = np.empty(n, np.int64)
    inverse[perm] = np.arange(n)
    new_ptr = np.zeros(n + 1, np.int64)
    np.cumsum(lengths[perm], out=new_ptr[1:])
    src = np.repeat(indptr[perm] - new_ptr[:-1], lengths[perm]) + np.arange(indices.shape[0])
    return perm, inverse, data[src], inverse[indices[src]], new_ptr


@dataclass(frozen=True)
class SellMatrix:
    """A square CSR matrix in SELL-32, slot-major (module docstring), on the host or a backend.

    Index arrays are unsigned (uint32, or uint64 when the slots or rows reach 2³¹), as the
    kernels index with them. ``perm`` (new row i is the original row ``perm[i]``) and its
    ``inverse`` are None in the natural order.
    """

    sdata: Any
    scol: Any
    slice_ptr: Any
    row_len: Any
    n: int
    nnz: int
    perm: Any = None
    inverse: Any = None

    @classmethod
    def from_csr(cls, data, indices, indptr, order: str | None = None) -> SellMatrix:
        """Build from host CSR arrays (any integer index dtype; each row's stored order is kept)."""
        data, indices, indptr = np.asarray(data, np.float64), np.asarray(indices, np.int64), np.asarray(indptr, np.int64)
        n, nnz, perm, inverse = indptr.shape[0] - 1, indices.shape[0], None, None
        check_order(order)
        if order == "rcm":
            if nnz >= 2**31:
                raise ValueError(f"order='rcm' needs fewer than 2**31 stored entries (SciPy's RCM) (got {nnz})")
            perm, inverse, data, indices, indptr = rcm_renumber(data, indices, indptr)
        lengths, n_slices = np.diff(indptr), -(-n // SLICE)
        padded = np.zeros(n_slices * SLICE, np.int64)
        padded[:n] = lengths
        width = padded.reshape(n_slices, SLICE).max(axis=1)
        slice_ptr = np.zeros(n_slices + 1, np.int64)
        np.cumsum(SLICE * width, out=slice_ptr[1:])
        slots = int(slice_ptr[-1])
        rows = np.repeat(np.arange(n), lengths)
        where = slice_ptr[rows // SLICE] + (np.arange(nnz) - indptr[rows]) * SLICE + rows % SLICE
        # padding: data 0.0 and the slot's own row as column (clipped for lanes past the last row),
        # a valid index though never read
        scol = np.minimum(np.repeat(np.arange(n_slices) * SLICE, SLICE * width) + np.arange(slots) % SLICE, n - 1)
        scol[where] = indices
        sdata = np.zeros(slots)
        sdata[where] = data
        utype = np.uint64 if max(slots, n) >= 2**31 - 1 else np.uint32
        order_arrays = () if perm is None else (perm.astype(utype), inverse.astype(utype))
        return cls(sdata, scol.astype(utype), slice_ptr.astype(utype), lengths.astype(utype), n, nnz, *order_arrays)

    @property
    def slots(self) -> int:
        """Stored entries, padding included."""
        return int(self.sdata.shape[0])

    @property
    def padding_ratio(self) -> float:
        """Stored slots per stored entry of the CSR (>= 1.0): SELL's memory over CSR's, for the values."""
        return self.slots / max(self.nnz, 1)

    @property
    def args(self) -> tuple:
        """(sdata, scol, slice_ptr, row_len): what the SELL kernels take in place of CSR's three arrays."""
        return self.sdata, self.scol, self.slice_ptr, self.row_len

    def to_backend(self, be) -> SellMatrix:
        """The same matrix with its arrays on ``be`` (returned as is on the CPU)."""
        if be.name == "cpu":
            return self
        names = ("sdata", "scol", "slice_ptr", "row_len") + (() if self.perm is None else ("perm", "inverse"))
        return replace(self, **{f: be.to_device(getattr(self, f)) for f in names})

    def _gather(self, be, x, index):
        if index is None:
            return x
        out = be.allocate(x.shape, np.float64)
        column = (lambda a: a.reshape(a.shape[0], 1)) if x.ndim == 1 else (lambda a: a)  # one kernel for both
        be.launch_kernel(sell_gather_rows, blocks(x.size), BLOCK, index, column(x), column(out))
        return out

    def to_storage(self, be, x):
        """x (rows in the original order, on ``be``) in the stored order: a new array, or x itself when not permuted."""
        return self._gather(be, x, self.perm)

    def from_storage(self, be, y):
        """y (rows in the stored order) in the original order: a new array, or y itself when not permuted."""
        return self._gather(be, y, self.inverse)


def sell_variant_kernels(itype: str = "int32") -> list:
    """(kernel, signature) of every SELL launch, for ``warm_specs`` (itype: the SELL arrays' width)."""
    utype = "uint64" if itype == "int64" else "uint32"
    i1, f1, f2 = f"{utype}[::1]", "float64[::1]", "float64[:, ::1]"
    sell = f"{f1}, {i1}, {i1}, {i1}"
    return [
        (sell_matvec, f"{sell}, {f1}, {f1}"),
        (sell_matmat, f"{sell}, {f2}, {f2}"),
        (sell_heat_step, f"{sell}, {f1}, float64, {f1}, {f1}"),
        (sell_heat_step_block, f"{sell}, {f1}, float64, {f2}, {f2}"),
        (sell_cheb_step, f"{sell}, float64, float64, float64, {f2}, {f2}, {f2}"),
        (sell_gather_rows, f"{i1}, {f2}, {f2}"),
    ]
