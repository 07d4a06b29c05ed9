"""Kernels shared by the CPU, simulator, PTX and GPU test layers (one source for all)."""

import math

import numpy as np
from numba import cuda

import kernelrt

OFFSET = 10.0  # a global constant read by a kernel: part of its cache key


@kernelrt.kernel
def axpy(i, out, x, y, a):
    if i < out.shape[0]:
        out[i] = a * x[i] + y[i]


@kernelrt.kernel(signature="float64[::1], float64[::1]")
def shifted_sqrt(i, out, x):
    if i < out.shape[0]:
        out[i] = math.sqrt(x[i]) + OFFSET


@kernelrt.kernel(ndim=2)
def index_grid_2d(i, j, out, x):
    """out[j, i] = x[j, i] + i + 100 j (x is the fast, column axis)."""
    if j < out.shape[0] and i < out.shape[1]:
        out[j, i] = x[j, i] + i + 100.0 * j


@kernelrt.kernel(ndim=3)
def index_grid_3d(i, j, k, out):
    if k < out.shape[0] and j < out.shape[1] and i < out.shape[2]:
        out[k, j, i] = i + 100.0 * j + 10000.0 * k


@kernelrt.cuda_kernel(min_cc=(6, 0))
def block_sums(x, out):
    """Per-block sum through shared memory, then one fp64 atomic per block."""
    tile = cuda.shared.array(64, dtype=np.float64)
    t = cuda.threadIdx.x
    i = cuda.grid(1)
    tile[t] = x[i] if i < x.shape[0] else 0.0
    cuda.syncthreads()
    if t == 0:
        s = 0.0
        for k in range(cuda.blockDim.x):
            s += tile[k]
        cuda.atomic.add(out, 0, s)


@block_sums.cpu
def _block_sums_cpu(grid, block, x, out):
    n_threads = grid[0] * block[0]
    s = 0.0
    for i in range(min(n_threads, x.shape[0])):
        s += x[i]
    out[0] += s


@kernelrt.cuda_kernel
def gpu_only_scale(x, a):
    i = cuda.grid(1)
    if i < x.shape[0]:
        x[i] *= a


def expected_2d(x):
    rows, cols = x.shape
    j, i = np.meshgrid(np.arange(rows), np.arange(cols), indexing="ij")
    return x + i + 100.0 * j


def expected_3d(shape):
    k, j, i = np.meshgrid(*(np.arange(s) for s in shape), indexing="ij")
    return i + 100.0 * j + 10000.0 * k


def plain_double(x):
    """A plain numba.cuda-style function (no kernelrt decorator): CUDABackend runs it as is."""
    i = cuda.grid(1)
    if i < x.shape[0]:
        x[i] *= 2.0
