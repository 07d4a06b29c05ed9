"""Persistent cooperative kernels: every heat step, or every Chebyshev degree, in ONE launch.

Why: ``LaplacianOperator.heat_steps`` launches one ``heat_step`` per step and the Chebyshev
filter (``chebyshev._Block.filter``) one ``cheb_step`` per degree. Each launch costs ~45-90 µs
of host work for a few µs of GPU work (GPU_PLAN rows L7, L8(d)), so the GPU starves. Here one
launch runs all the steps: each thread loops over its rows (and columns) with grid-stride
loops, and the grid waits at a barrier (``cuda.cg.this_grid().sync()``) between steps, so that
a step reads only what the previous one finished writing. Buffers rotate inside the kernel.

* The grid limit: a grid barrier needs every block of the grid resident at once, so the grid is
  capped at the co-resident block count (``cooperative_blocks``); the grid-stride loops cover
  the rest. numba-cuda compiles a kernel that uses grid sync to be launched cooperatively
  (and links cudadevrt); the launch refuses a grid that is too large instead of hanging.
* Bitwise equal to the launch-per-step paths: each element is the same expression, summed in
  the stored order, over the same inputs (``csr_row_dot`` on the GPU, ``csr_row_into`` in the
  CPU twins, as the per-step kernels), whatever the geometry. The Chebyshev scalars come from
  a host table (``chebyshev_coefficients``) computed as ``filter`` computes them.
* The simulator runs a grid barrier as a block barrier, so it gets a one-block grid.
* Awaiting GPU timing: proven equal on the CPU and the simulator and compiled to PTX only;
  the variant family "loops" (kernels/variants.py) is where a GPU run chooses it.
"""

from __future__ import annotations

from typing import Any

import numba
import numpy as np
from numba import cuda

import kernelrt

from .csr_rows import _geometry, csr_row_dot, csr_row_into
from .placement import BLOCK, blocks

__all__ = [
    "heat_steps_coop",
    "heat_steps_block_coop",
    "cheb_filter_coop",
    "chebyshev_coefficients",
    "cooperative_blocks",
    "heat_steps_cooperative",
    "chebyshev_filter_cooperative",
    "loop_variant_kernels",
]

# Blocks per SM in a cooperative grid. 2 blocks of 128 threads are resident on every SM kernelrt
# supports whatever the kernel's registers (<= 255 per thread: 2 x 128 x 256 = 65,536, the
# register file) and threads (256 <= 1,024, the smallest SM's limit); these kernels use no
# shared memory. More fit today (ptxas, sm_90: 54-84 registers, room for 5-9 such blocks), but
# kernelrt has no public occupancy query to check it on the device at hand: a GPU run should time more.
BLOCKS_PER_SM = 2

# -- device code ----------------------------------------------------------------------------------


@kernelrt.device
def _heat_value(data, indices, indptr, mass, tau, u, r):
    # heat_step's expression and order, term for term: the same bits
    acc = 0.0
    for s in range(indptr[r], indptr[r + 1]):
        acc += data[s] * u[indices[s]]
    return u[r] - tau * (acc / mass[r])


@kernelrt.device
def _heat_pass(data, indices, indptr, mass, tau, u, out, r0, rs):
    for r in range(r0, out.shape[0], rs):
        out[r] = _heat_value(data, indices, indptr, mass, tau, u, r)


@kernelrt.device
def _heat_block_pass(data, indices, indptr, mass, tau, U, out, q0, qs, r0, rs):
    # heat_step_block's expression; columns in a grid-stride loop too (a capped grid may not cover k)
    for q in range(q0, out.shape[1], qs):
        for r in range(r0, out.shape[0], rs):
            out[r, q] = U[r, q] - tau * (csr_row_dot(data, indices, indptr, U, r, q) / mass[r])


@kernelrt.device
def _cheb_pass(data, indices, indptr, alpha, c, beta, Y, X, Z, q0, qs, r0, rs):
    for q in range(q0, Z.shape[1], qs):
        for r in range(r0, Z.shape[0], rs):  # cheb_step's expression
            Z[r, q] = alpha * (csr_row_dot(data, indices, indptr, Y, r, q) - c * Y[r, q]) + beta * X[r, q]


@kernelrt.cuda_kernel
def heat_steps_coop(data, indices, indptr, mass, tau, n_steps, u, a, b):
    # Step 0 reads u and writes a; then b <- a (odd steps), a <- b (even): the result is in a
    # for odd n_steps, in b for even ones. Branches, not rebound names: u may be another array type.
    g = cuda.cg.this_grid()
    r0, rs = cuda.grid(1), cuda.gridsize(1)
    for step in range(n_steps):
        if step:
            g.sync()  # the previous step's writes are complete and visible to the whole grid
        if step == 0:
            _heat_pass(data, indices, indptr, mass, tau, u, a, r0, rs)
        elif step % 2:
            _heat_pass(data, indices, indptr, mass, tau, a, b, r0, rs)
        else:
            _heat_pass(data, indices, indptr, mass, tau, b, a, r0, rs)


@heat_steps_coop.cpu
def _heat_steps_coop_cpu(grid, block, data, indices, indptr, mass, tau, n_steps, u, a, b):
    for step in range(n_steps):  # the end of each parallel loop is the barrier
        for r in numba.prange(a.shape[0]):
            if step == 0:
                a[r] = _heat_value(data, indices, indptr, mass, tau, u, r)
            elif step % 2:
                b[r] = _heat_value(data, indices, indptr, mass, tau, a, r)
            else:
                a[r] = _heat_value(data, indices, indptr, mass, tau, b, r)


@kernelrt.cuda_kernel
def heat_steps_block_coop(data, indices, indptr, mass, tau, n_steps, U, A, B):
    # heat_steps_coop on (N, k) blocks: (column, row) index as heat_step_block
    g = cuda.cg.this_grid()
    q0, r0 = cuda.grid(2)
    qs, rs = cuda.gridDim.x * cuda.blockDim.x, cuda.gridDim.y * cuda.blockDim.y
    for step in range(n_steps):
        if step:
            g.sync()
        if step == 0:
            _heat_block_pass(data, indices, indptr, mass, tau, U, A, q0, qs, r0, rs)
        elif step % 2:
            _heat_block_pass(data, indices, indptr, mass, tau, A, B, q0, qs, r0, rs)
        else:
            _heat_block_pass(data, indices, indptr, mass, tau, B, A, q0, qs, r0, rs)


@numba.njit(inline="always")
def _heat_row_into(out, r, data, indices, indptr, mass, tau, U):
    """Row r of one block heat step: heat_step_block's CPU twin, row for row."""
    csr_row_into(out, r, data, indices, indptr, U)
    for q in range(out.shape[1]):
        out[r, q] = U[r, q] - tau * (out[r, q] / mass[r])


@heat_steps_block_coop.cpu
def _heat_steps_block_coop_cpu(grid, block, data, indices, indptr, mass, tau, n_steps, U, A, B):
    for step in range(n_steps):
        for r in numba.prange(A.shape[0]):
            if step == 0:
                _heat_row_into(A, r, data, indices, indptr, mass, tau, U)
            elif step % 2:
                _heat_row_into(B, r, data, indices, indptr, mass, tau, A)
            else:
                _heat_row_into(A, r, data, indices, indptr, mass, tau, B)


@kernelrt.cuda_kernel
def cheb_filter_coop(data, indices, indptr, coef, x, b0, b1, b2):
    # Degree j (row j of coef: alpha, c, beta) writes Z = b[j % 3] from Y, X as _Block.filter
    # passes them: j = 0: Y = X = x; j = 1: Y = b0, X = x; then Y, X = the two previous outputs.
    # x is only read (it may be the caller's array); the result is b[(degree - 1) % 3].
    g = cuda.cg.this_grid()
    q0, r0 = cuda.grid(2)
    qs, rs = cuda.gridDim.x * cuda.blockDim.x, cuda.gridDim.y * cuda.blockDim.y
    for j in range(coef.shape[0]):
        if j:
            g.sync()
        alpha, c, beta = coef[j, 0], coef[j, 1], coef[j, 2]
        if j == 0:
            _cheb_pass(data, indices, indptr, alpha, c, beta, x, x, b0, q0, qs, r0, rs)
        elif j == 1:
            _cheb_pass(data, indices, indptr, alpha, c, beta, b0, x, b1, q0, qs, r0, rs)
        elif j % 3 == 2:
            _cheb_pass(data, indices, indptr, alpha, c, beta, b1, b0, b2, q0, qs, r0, rs)
        elif j % 3 == 0:
            _cheb_pass(data, indices, indptr, alpha, c, beta, b2, b1, b0, q0, qs, r0, rs)
        else:
            _cheb_pass(data, indices, indptr, alpha, c, beta, b0, b2, b1, q0, qs, r0, rs)


@numba.njit(inline="always")
def _cheb_row_into(Z, r, data, indices, indptr, alpha, c, beta, Y, X):
    """Row r of one degree: cheb_step's CPU twin, row for row."""
    csr_row_into(Z, r, data, indices, indptr, Y)
    for q in range(Z.shape[1]):
        Z[r, q] = alpha * (Z[r, q] - c * Y[r, q]) + beta * X[r, q]


@cheb_filter_coop.cpu
def _cheb_filter_coop_cpu(grid, block, data, indices, indptr, coef, x, b0, b1, b2):
    for j in range(coef.shape[0]):
        alpha, c, beta = coef[j, 0], coef[j, 1], coef[j, 2]
        for r in numba.prange(x.shape[0]):
            if j == 0:
                _cheb_row_into(b0, r, data, indices, indptr, alpha, c, beta, x, x)
            elif j == 1:
                _cheb_row_into(b1, r, data, indices, indptr, alpha, c, beta, b0, x)
            elif j % 3 == 2:
                _cheb_row_into(b2, r, data, indices, indptr, alpha, c, beta, b1, b0)
            elif j % 3 == 0:
                _cheb_row_into(b0, r, data, indices, indptr, alpha, c, beta, b2, b1)
            else:
                _cheb_row_into(b1, r, data, indices, indptr, alpha, c, beta, b0, b2)


# -- host ----------------------------------------------------------------------------------------

_SM_COUNTS: dict[int, int] = {}


def cooperative_blocks(backend: kernelrt.Backend) -> int:
    """How many blocks of 128 threads a cooperative grid of these kernels may have on ``backend``.

    The SM count x BLOCKS_PER_SM on a GPU. kernelrt's public API has neither the SM count nor
    an occupancy query (DeviceInfo / DeviceLimits / CompiledKernel carry none), so the count
    comes from numba's public device attributes. 1 on the simulator (its grid barrier is a
    block barrier) and on the CPU (the twins ignore the geometry).
    """
    if backend.name != "cuda" or backend.is_simulator:
        return 1
    sms = _SM_COUNTS.get(backend.device_id)
    if sms is None:
        with backend.activated():
            sms = _SM_COUNTS[backend.device_id] = int(cuda.get_current_device().MULTIPROCESSOR_COUNT)
    return sms * BLOCKS_PER_SM


def _geometry_2d(backend, n_rows: int, k: int):
    """spmv's (column, row) block of 128 threads, on a grid cut to the co-resident blocks."""
    (gx, gy), block = _geometry(n_rows, k)
    budget = cooperative_blocks(backend)
    gx = min(gx, budget)
    return (gx, max(1, min(gy, budget // gx))), block


def _count(name: str, value: Any, lo: int) -> int:
    if isinstance(value, bool) or not isinstance(value, (int, np.integer)) or value < lo:
        raise ValueError(f"{name} must be an int >= {lo} (got {value!r})")
    return int(value)


def heat_steps_cooperative(op: Any, u0: Any, tau: float, n_steps: int) -> Any:
    """``op.heat_steps(u0, tau, n_steps)`` in one cooperative launch: same checks, same result, same bits.

    Args:
        op: a ``LaplacianOperator`` built with the mass.
        u0: (N,) or (N, k); a host array gives a host result, a device array a device one.
        tau: step, finite and >= 0.
        n_steps: steps, an int >= 0 (0: a copy of u0).
    """
    if op.mass is None:
        raise ValueError("heat_steps needs the mass: build the operator with m=...")
    n_steps = _count("n_steps", n_steps, 0)
    tau = float(tau)
    if not np.isfinite(tau) or tau < 0:
        raise ValueError(f"tau must be a finite number >= 0 (got {tau!r})")
    u, on_host = op._operand(u0, "u0")
    be = op.backend
    if n_steps == 0:  # as heat_steps: a new array, never the caller's
        return op._result(u.copy() if be.name == "cpu" else be.to_device(be.to_host(u)), on_host)
    a, b = be.allocate(u.shape, np.float64), be.allocate(u.shape, np.float64)
    if u.ndim == 1:
        kernel, grid, block = heat_steps_coop, min(blocks(op.shape[0]), cooperative_blocks(be)), BLOCK
    else:
        (grid, block), kernel = _geometry_2d(be, op.shape[0], u.shape[1]), heat_steps_block_coop
    be.launch_kernel(kernel, grid, block, op.data, op.indices, op.indptr, op.mass, tau, n_steps, u, a, b)
    return op._result(a if n_steps % 2 else b, on_host)


def chebyshev_coefficients(degree: int, a: float, b: float) -> np.ndarray:
    """(degree, 3) float64 rows (alpha, c, beta) of each degree of ``_Block.filter``.

    The same Python float operations in the same order as ``filter``'s loop, so the same
    values as the scalars it passes to ``cheb_step``.
    """
    degree = _count("degree", degree, 1)
    e, c = (b - a) / 2.0, (b + a) / 2.0
    sigma = sigma1 = e / (0.0 - c)
    rows = [(sigma1 / e, c, 0.0)]
    for _ in range(degree - 1):
        s_new = 1.0 / (2.0 / sigma1 - sigma)
        rows.append((2.0 * s_new / e, c, -sigma * s_new))
        sigma = s_new
    return np.array(rows, dtype=np.float64)


def chebyshev_filter_cooperative(target: Any, x: Any, degree: int, a: float, b: float) -> Any:
    """p(A) x as ``_Block.filter(x, degree, a, b)`` computes it, every degree in one cooperative launch.

    Args:
        target: chebyshev's ``_Block`` (x and the result where the block lives, as ``filter``;
            the caller counts ``products``) or a ``LaplacianOperator`` of A (x on the host or
            the backend, (N,) or (N, k); a host x gives a host result).
        x: the block to filter; read, never written.
        degree: the polynomial degree, an int >= 1.
        a, b: the damped interval [a, b].
    """
    coef = chebyshev_coefficients(degree, a, b)
    blk = target if hasattr(target, "to_kernel") else None
    op = target if blk is None else target.op
    be = op.backend
    if blk is not None:  # filter's own conversions: numpy, simulator device arrays or CuPy
        xk = blk.to_kernel(x)
        bufs = [blk.empty(xk.shape) for _ in range(3)]
    else:
        xk, on_host = op._operand(x, "x")
        if xk.ndim == 1:  # a vector is a block of one column
            xk = xk.reshape(xk.shape[0], 1)
        bufs = [be.allocate(xk.shape, np.float64) for _ in range(3)]
    grid, block = _geometry_2d(be, xk.shape[0], xk.shape[1])
    table = coef if be.name == "cpu" else be.to_device(coef)  # degree x 24 bytes: one small upload
    be.launch_kernel(cheb_filter_coop, grid, block, op.data, op.indices, op.indptr, table, xk, *bufs)
    out = bufs[(coef.shape[0] - 1) % 3]
    if blk is not None:
        return blk.to_dense(out)
    if np.ndim(x) == 1:
        out = out.reshape(out.shape[0])
    return op._result(out, on_host)


def loop_variant_kernels(itype: str = "int32") -> list:
    """(kernel, signature) of every cooperative launch here, for ``warm_specs``."""
    i1 = "uint64[::1]" if itype == "int64" else "uint32[::1]"
    f1, f2 = "float64[::1]", "float64[:, ::1]"
    return [
        (heat_steps_coop, f"{f1}, {i1}, {i1}, {f1}, float64, int64, {f1}, {f1}, {f1}"),
        (heat_steps_block_coop, f"{f1}, {i1}, {i1}, {f1}, float64, int64, {f2}, {f2}, {f2}"),
        (cheb_filter_coop, f"{f1}, {i1}, {i1}, {f2}, {f2}, {f2}, {f2}, {f2}"),
    ]
