"""The row sums every 2-D product kernel shares, and the launch geometry of the (column, row) index space.

A leaf module: spmv.py (products, heat steps), chebyshev.py (the filter step) and
loops.py (the cooperative loops) all sum a row through ``csr_row_dot`` on the GPU and
``csr_row_into`` on the CPU, in the row's stored order, so they give the same bits.
"""

from __future__ import annotations

import numba

import kernelrt

from .placement import blocks

__all__ = ["MAX_GRID_Y", "csr_row_dot", "csr_row_into"]


@kernelrt.device
def csr_row_dot(data, indices, indptr, X, r, q):
    """``(L X)[r, q]``: the sum over row r's stored entries, in their order.

    The one sum of every 2-D product kernel on the GPU (products, heat steps, the
    Chebyshev filter), and the order ``csr_row_into`` keeps on the CPU: all give the
    same bits.
    """
    acc = 0.0
    for s in range(indptr[r], indptr[r + 1]):
        acc += data[s] * X[indices[s], q]
    return acc


@numba.njit(inline="always")
def csr_row_into(out, r, data, indices, indptr, X):
    """``out[r, :] = (L X)[r, :]`` as row-wise axpys over the k columns, which vectorise.

    Each ``out[r, q]`` is still summed over s in ``csr_row_dot``'s order, so the CPU
    twins give the GPU kernels' bits.
    """
    k = out.shape[1]
    for q in range(k):
        out[r, q] = 0.0
    for s in range(indptr[r], indptr[r + 1]):
        v = data[s]
        c = indices[s]
        for q in range(k):
            out[r, q] += v * X[c, q]


MAX_GRID_Y = 65535  # CUDA's limit on grid.y; the kernels loop over the rows beyond it


def _geometry(n_rows: int, k: int):
    """(grid, block) for the 2-D (column, row) index space, 128 threads per block."""
    bx = 1
    while bx < k and bx < 32:
        bx *= 2
    by = 128 // bx
    return (blocks(k, bx), min(blocks(n_rows, by), MAX_GRID_Y)), (bx, by)
