"""The per-step launch loops that heat steps and the Chebyshev filter ran before prepared
launches and launch sequences (issue 24): the references their results must equal bitwise."""

from __future__ import annotations

import numpy as np
from kernelrt.kernels import laplacian as lap
from kernelrt.kernels.laplacian.chebyshev import cheb_step
from kernelrt.kernels.laplacian.placement import BLOCK, blocks
from kernelrt.kernels.laplacian.reference import reference_laplacian
from kernelrt.kernels.laplacian.spmv import _geometry, heat_step, heat_step_block


def small_mesh():
    """``(L, m)`` of an icosphere (level 1: 42 vertices), assembled with NumPy (no kernel compile)."""
    return reference_laplacian(*lap.icosphere(1))


def heat_per_step(op, u0, tau, n_steps):
    """``op.heat_steps`` as one ``launch_kernel`` per step (the code before prepared launches)."""
    be = op.backend
    u = np.require(u0, np.float64, ["C", "W"])
    u = u if be.name == "cpu" else be.to_device(u)
    bufs = (be.allocate(u.shape, np.float64), be.allocate(u.shape, np.float64))
    if u.ndim == 1:
        kernel, grid, block = heat_step, blocks(op.shape[0]), BLOCK
    else:
        (grid, block), kernel = _geometry(op.shape[0], u.shape[1]), heat_step_block
    src = u
    for step in range(n_steps):
        dst = bufs[step % 2]
        be.launch_kernel(kernel, grid, block, op.data, op.indices, op.indptr, op.mass, float(tau), src, dst)
        src = dst
    return src if be.name == "cpu" else be.to_host(src)


def filter_per_step(blk, y, degree, a, b):
    """``_Block.filter`` as one ``launch_kernel`` per degree (the code before prepared launches)."""
    e, c = (b - a) / 2.0, (b + a) / 2.0
    sigma = sigma1 = e / (0.0 - c)
    x = blk.to_kernel(y)
    yk, zk, (grid, geo) = blk.empty(x.shape), blk.empty(x.shape), blk.geometry(x.shape)
    args = (blk.op.data, blk.op.indices, blk.op.indptr)
    blk.be.launch_kernel(cheb_step, grid, geo, *args, sigma1 / e, c, 0.0, x, x, yk)
    for i in range(degree - 1):
        s_new = 1.0 / (2.0 / sigma1 - sigma)
        blk.be.launch_kernel(cheb_step, grid, geo, *args, 2.0 * s_new / e, c, -sigma * s_new, yk, x, zk)
        x, yk, zk, sigma = yk, zk, (x if i else blk.empty(x.shape)), s_new
    return np.asarray(blk.to_dense(yk))


def scaled_operator(L, m, backend):
    """The Chebyshev solver's operator on A = S L S, S = diag(1/sqrt(m)), and its block helper."""
    from kernelrt.kernels.laplacian.chebyshev import _Block
    from kernelrt.kernels.laplacian.spmv import LaplacianOperator

    s = 1.0 / np.sqrt(m)
    A = (L.multiply(s[:, None]).multiply(s[None, :])).tocsr()
    return _Block(LaplacianOperator(A, backend=backend), None)
