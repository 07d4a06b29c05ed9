"""Sparse products with the Laplacian and fused explicit heat steps.

Owns ``Y = L X`` for a vector or a row-major block of k vectors, and the explicit heat
step ``U <- U - tau * M^-1 (L U)`` fused into one pass (docs/laplacian.md, "Products and heat steps"), on either backend.
Vectors use 1-D kernels (one thread per row). Blocks use a 2-D (column, row) index on
the GPU, so a warp reads consecutive columns of X when k >= 32; their CPU twins run
each row as axpys over the k columns, which vectorise.

Each output element is one thread's sum over its row in column order, so results are
deterministic and equal on every launch geometry. ``layout="sell"`` (or the ``sparse``
variant) stores L as SELL-32 on a GPU for coalesced loads, with the same bits (sell.py).
"""

from __future__ import annotations

from typing import Any

import numba
import numpy as np
import scipy.sparse as sp
from numba import cuda

import kernelrt

from ..variants import variant
from .csr_rows import _geometry, csr_row_dot, csr_row_into
from .inputs import mass_vector
from .loops import heat_steps_cooperative
from .placement import BLOCK, blocks
from .sell import SELL_OF, SellMatrix, resolve_layout

__all__ = [
    "csr_row_dot",
    "csr_row_into",
    "csr_matvec",
    "csr_matmat",
    "heat_step",
    "heat_step_block",
    "LaplacianOperator",
    "laplacian_matvec",
    "heat_steps",
    "spmv_kernels",
]


@kernelrt.kernel
def csr_matvec(r, data, indices, indptr, x, y):
    if r < y.shape[0]:
        acc = 0.0
        for s in range(indptr[r], indptr[r + 1]):
            acc += data[s] * x[indices[s]]
        y[r] = acc


@kernelrt.kernel
def heat_step(r, data, indices, indptr, mass, tau, u, out):
    if r < out.shape[0]:
        acc = 0.0
        for s in range(indptr[r], indptr[r + 1]):
            acc += data[s] * u[indices[s]]
        out[r] = u[r] - tau * (acc / mass[r])


@kernelrt.cuda_kernel
def csr_matmat(data, indices, indptr, X, Y):
    # Columns on x (a warp reads one row of X), rows on y with a grid-stride loop: the
    # grid's y dimension stops at 65,535 blocks (_geometry caps it).
    q, r0 = cuda.grid(2)
    if q < Y.shape[1]:
        for r in range(r0, Y.shape[0], cuda.gridDim.y * cuda.blockDim.y):
            Y[r, q] = csr_row_dot(data, indices, indptr, X, r, q)


@csr_matmat.cpu
def _csr_matmat_cpu(grid, block, data, indices, indptr, X, Y):
    for r in numba.prange(Y.shape[0]):
        csr_row_into(Y, r, data, indices, indptr, X)


@kernelrt.cuda_kernel
def heat_step_block(data, indices, indptr, mass, tau, U, out):
    q, r0 = cuda.grid(2)  # as csr_matmat: rows in a grid-stride loop
    if q < out.shape[1]:
        for r in range(r0, out.shape[0], cuda.gridDim.y * cuda.blockDim.y):
            out[r, q] = U[r, q] - tau * (csr_row_dot(data, indices, indptr, U, r, q) / mass[r])


@heat_step_block.cpu
def _heat_step_block_cpu(grid, block, data, indices, indptr, mass, tau, U, out):
    k = out.shape[1]
    for r in numba.prange(out.shape[0]):
        csr_row_into(out, r, data, indices, indptr, U)
        for q in range(k):
            out[r, q] = U[r, q] - tau * (out[r, q] / mass[r])


def _csr_parts(L):
    """(data, indices, indptr, shape) of a scipy / cupyx / DeviceCSR matrix, not copied if possible."""
    if sp.issparse(L):
        L = L.tocsr() if L.format != "csr" else L
        if not L.has_canonical_format:
            L = L.copy()
            L.sum_duplicates()
        return L.data, L.indices, L.indptr, L.shape
    if all(hasattr(L, a) for a in ("data", "indices", "indptr", "shape")):
        return L.data, L.indices, L.indptr, tuple(L.shape)
    raise TypeError(f"L must be a sparse matrix (scipy, cupyx or DeviceCSR) (got {type(L).__name__})")


def _to_host(a) -> np.ndarray:
    """A numpy view or copy of a numpy, CuPy or numba device array."""
    if isinstance(a, np.ndarray):
        return a
    if hasattr(a, "get"):  # CuPy
        return a.get()
    if hasattr(a, "copy_to_host"):
        return a.copy_to_host()
    return np.asarray(a)


class LaplacianOperator:
    """L (and optionally m) prepared once on a backend for repeated products and heat steps.

    Index arrays are kept as *unsigned* views of the CSR's int32/int64 arrays: indexing
    with unsigned integers spares numba the negative-index fix-up on every gather,
    which makes the CPU product ~2x faster (measured at 655k rows).

    Args:
        L: (N, N) sparse matrix: scipy (any format), cupyx CSR, or ``DeviceCSR``.
        m: optional lumped mass, needed by ``heat_steps``: an (N,) vector, an (N, 1) column
            or a diagonal sparse matrix (SpectralBrain's ``M``).
        backend: kernelrt backend, kind string, or None (auto).
        layout: "csr", "sell" (SELL-32, sell.py: built here once, the same bits), or None: the
            ``sparse`` variant in force (``kernelrt.kernels.variants``).
        order: None, or "rcm" with "sell": rows and columns renumbered by reverse Cuthill-McKee
            inside the operator (the same bits; two gathers per product: for X beyond L2).
    """

    def __init__(self, L: Any, m: Any = None, backend: str | kernelrt.Backend | None = None, *,
                 layout: str | None = None, order: str | None = None) -> None:
        self.backend = be = kernelrt.get_backend(backend)
        self.layout = resolve_layout(layout, order)
        data, indices, indptr, shape = _csr_parts(L)
        if len(shape) != 2 or shape[0] != shape[1]:
            raise ValueError(f"L must be a square matrix (got shape {tuple(shape)})")
        self.shape = (int(shape[0]), int(shape[1]))
        # The CPU keeps CSR for "sell": no coalescing to gain, and its CSR twins are fast already
        # (the same bits). On a GPU the SELL copy is built on the host from CSR, once.
        self.sell = None
        if self.layout == "sell" and be.name != "cpu":
            self.sell = SellMatrix.from_csr(*(_to_host(a) for a in (data, indices, indptr)), order=order).to_backend(be)
        if be.name == "cuda" and be.is_device_array(data):
            itype = np.dtype(indptr.dtype)
            parts = (data, indices, indptr)
        else:
            data, indices, indptr = (_to_host(a) for a in (data, indices, indptr))
            wide = max(int(indptr[-1]), self.shape[0]) >= 2**31 - 1
            itype = np.dtype(np.int64 if wide else np.int32)
            parts = (
                np.require(data, np.float64, ["C", "W"]),
                np.require(indices, itype, ["C", "W"]),
                np.require(indptr, itype, ["C", "W"]),
            )
            if be.name != "cpu":
                parts = tuple(be.to_device(a) for a in parts)
        utype = np.uint64 if itype.itemsize == 8 else np.uint32
        self.data = parts[0]
        self.indices = parts[1].view(utype)
        self.indptr = parts[2].view(utype)
        self.mass = None
        if m is not None:  # a vector, a column or a peer's diagonal sparse M
            self.mass = self._on_backend(mass_vector(m, self.shape[0]))

    @property
    def nnz(self) -> int:
        """Stored entries of L."""
        return int(self.data.shape[0])

    @property
    def sparse(self) -> tuple:
        """The matrix arrays the product kernels take: CSR's (data, indices, indptr) or ``SellMatrix.args``."""
        return (self.data, self.indices, self.indptr) if self.sell is None else self.sell.args

    def kernel_for(self, csr_kernel: kernelrt.Kernel) -> kernelrt.Kernel:
        """``csr_kernel`` (spmv.py's or ``cheb_step``), or its SELL counterpart when the operator holds SELL."""
        return csr_kernel if self.sell is None else SELL_OF[csr_kernel.name]

    def to_storage(self, x: Any) -> Any:
        """x on the backend in the rows' stored order (RCM's; x itself in the natural order)."""
        return x if self.sell is None else self.sell.to_storage(self.backend, x)

    def from_storage(self, y: Any) -> Any:
        """``to_storage`` undone."""
        return y if self.sell is None else self.sell.from_storage(self.backend, y)

    def _on_backend(self, a):
        """float64 C-contiguous array on the backend (CUDA device arrays are used as given)."""
        be = self.backend
        if be.name == "cuda" and be.is_device_array(a):
            return a
        host = np.require(_to_host(a), np.float64, ["C", "W"])
        return host if be.name == "cpu" else be.to_device(host)

    def _operand(self, x, name):
        """(x on the backend, whether x came from the host)."""
        be = self.backend
        on_host = not (be.name == "cuda" and be.is_device_array(x))
        if on_host:
            x = np.require(_to_host(x), np.float64, ["C", "W"])
        if x.ndim not in (1, 2) or x.shape[0] != self.shape[1]:
            raise ValueError(
                f"{name} must have shape ({self.shape[1]},) or ({self.shape[1]}, k) (got {tuple(x.shape)})"
            )
        if on_host and be.name != "cpu":
            x = be.to_device(x)
        return x, on_host

    def _result(self, y, on_host):
        return self.backend.to_host(y) if on_host and self.backend.name != "cpu" else y

    def matvec(self, x: Any) -> Any:
        """``L @ x`` for x of shape (N,) or (N, k); a host x gives a host result."""
        x, on_host = self._operand(x, "x")
        be = self.backend
        y = be.allocate((self.shape[0],) + tuple(x.shape[1:]), np.float64)
        if x.ndim == 1:
            kernel, (grid, block) = csr_matvec, (blocks(self.shape[0]), BLOCK)
        else:
            kernel, (grid, block) = csr_matmat, _geometry(self.shape[0], x.shape[1])
        be.launch_kernel(self.kernel_for(kernel), grid, block, *self.sparse, self.to_storage(x), y)
        return self._result(self.from_storage(y), on_host)

    matmat = matvec

    def heat_steps(self, u0: Any, tau: float, n_steps: int) -> Any:
        """``n_steps`` explicit steps ``u <- u - tau m^-1 (L u)`` (stable for tau < 2 / lambda_max).

        Each step is one fused pass (product, scale and update); two buffers alternate. The
        steps are prepared launches run as a ``backend.sequence`` (on a GPU with CuPy, a CUDA
        graph of two steps replayed ``n_steps // 2`` times): the same kernels in the same order
        as one ``launch_kernel`` per step, so the same bits.
        """
        if self.mass is None:
            raise ValueError("heat_steps needs the mass: build the operator with m=...")
        if variant("loops") == "cooperative":  # one persistent launch for every step (loops.py)
            return heat_steps_cooperative(self, u0, tau, n_steps)
        if isinstance(n_steps, bool) or not isinstance(n_steps, (int, np.integer)) or n_steps < 0:
            raise ValueError(f"n_steps must be an int >= 0 (got {n_steps!r})")
        tau = float(tau)
        if not np.isfinite(tau) or tau < 0:
            raise ValueError(f"tau must be a finite number >= 0 (got {tau!r})")
        u, on_host = self._operand(u0, "u0")
        be = self.backend
        bufs = (be.allocate(u.shape, np.float64), be.allocate(u.shape, np.float64))
        if u.ndim == 1:
            kernel, grid, block = heat_step, blocks(self.shape[0]), BLOCK
        else:
            (grid, block), kernel = _geometry(self.shape[0], u.shape[1]), heat_step_block
        if n_steps == 0:  # still a new array, never the caller's
            return self._result(u.copy() if be.name == "cpu" else be.to_device(be.to_host(u)), on_host)
        ops, kernel, u = (*self.sparse, self.to_storage(self.mass), tau), self.kernel_for(kernel), self.to_storage(u)
        # Step s writes bufs[s % 2]: step 0 reads u, then the pair (bufs[0] -> bufs[1], bufs[1] ->
        # bufs[0]) repeats, prepared once and run as a sequence (a CUDA graph replayed where the
        # backend can, else a loop of prepared launches): the same launches as one per step.
        be.prepare(kernel, grid, block, *ops, u, bufs[0])()
        rest = int(n_steps) - 1
        if rest:
            pair = [be.prepare(kernel, grid, block, *ops, bufs[i], bufs[1 - i]) for i in (0, 1)]
            be.sequence(pair).run(rest // 2)
            if rest % 2:
                pair[0]()
        return self._result(self.from_storage(bufs[(int(n_steps) - 1) % 2]), on_host)


def laplacian_matvec(L: Any, x: Any, backend: str | kernelrt.Backend | None = None) -> Any:
    """``L @ x`` with kernelrt's CSR kernels (x: (N,) or (N, k)).

    Prepares L on every call; keep a ``LaplacianOperator`` for repeated products.
    """
    return LaplacianOperator(L, backend=backend).matvec(x)


def heat_steps(L: Any, m: Any, u0: Any, tau: float, n_steps: int, backend: str | kernelrt.Backend | None = None) -> Any:
    """``n_steps`` fused explicit heat steps ``u <- u - tau m^-1 (L u)`` from ``u0``."""
    return LaplacianOperator(L, m, backend=backend).heat_steps(u0, tau, n_steps)


def spmv_kernels(itype: str = "int32") -> list:
    """(kernel, signature) of every product / heat-step launch, for ``warm_specs``."""
    utype = "uint64" if itype == "int64" else "uint32"
    i1, f1, f2 = f"{utype}[::1]", "float64[::1]", "float64[:, ::1]"
    return [
        (csr_matvec, f"{f1}, {i1}, {i1}, {f1}, {f1}"),
        (csr_matmat, f"{f1}, {i1}, {i1}, {f2}, {f2}"),
        (heat_step, f"{f1}, {i1}, {i1}, {f1}, float64, {f1}, {f1}"),
        (heat_step_block, f"{f1}, {i1}, {i1}, {f1}, float64, {f2}, {f2}"),
    ]
