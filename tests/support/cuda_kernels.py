"""Plain ``numba.cuda`` kernels, written as numba-cuda users write them, with launch cases.

Imported by the CPU layer (where ``numba.cuda`` is numba-cuda, compiled lazily, never on a
device) and by the simulator layer (where it is Numba's CUDA simulator), so the same
kernels run on ``CPUBackend`` and in the simulator, and the two results are compared.
Each ``Case`` builds fresh arguments from a seed and knows which arguments are outputs.
"""

from __future__ import annotations

import cmath
import math
from collections.abc import Callable
from dataclasses import dataclass

import numba
import numpy as np
from numba import cuda

# -- kernels ------------------------------------------------------------------------------------


@cuda.jit
def vector_add(a, b, c):
    i = cuda.grid(1)
    if i < len(c):
        c[i] = a[i] + b[i]


@cuda.jit(device=True)
def poly(x, y):
    return 3.0 * x * x + 2.0 * y + 1.0


@cuda.jit(device=True)
def poly_twice(x, y):
    return poly(x, y) + poly(y, x) * cuda.blockDim.x  # a device function calling a device function


@cuda.jit
def poly_2d(out, x, y):
    i, j = cuda.grid(2)
    if i < out.shape[1] and j < out.shape[0]:
        out[j, i] = poly_twice(x[i], y[j])


@cuda.jit
def coords_3d(out, blocks):
    # Every built-in index, written the long way, on a 3-D grid.
    x = cuda.blockIdx.x * cuda.blockDim.x + cuda.threadIdx.x
    y = cuda.blockIdx.y * cuda.blockDim.y + cuda.threadIdx.y
    z = cuda.blockIdx.z * cuda.blockDim.z + cuda.threadIdx.z
    if x < out.shape[2] and y < out.shape[1] and z < out.shape[0]:
        out[z, y, x] = x + 100 * y + 10000 * z
        blocks[z, y, x] = cuda.blockIdx.x + cuda.gridDim.x * (cuda.blockIdx.y + cuda.gridDim.y * cuda.blockIdx.z)


@cuda.jit
def grid_stride_2d(out):
    # A small grid covering a larger array: grid-stride loops over both axes.
    x0, y0 = cuda.grid(2)
    sx, sy = cuda.gridsize(2)
    for y in range(y0, out.shape[0], sy):
        for x in range(x0, out.shape[1], sx):
            out[y, x] += x * y + 1


@cuda.jit
def unit_phasors(out, theta):
    i = cuda.grid(1)
    if i < theta.shape[0]:
        z = cmath.exp(1j * theta[i])
        out[i] = z.real * math.cos(theta[i]) + z.imag * math.sin(theta[i])


@cuda.jit
def histogram_add(values, hist):
    start = cuda.grid(1)
    stride = cuda.gridsize(1)
    for i in range(start, values.shape[0], stride):
        cuda.atomic.add(hist, values[i], 1)


@cuda.jit
def histogram_cas(values, hist):
    # A histogram made of compare-and-swap loops, as code without atomic add does it.
    i = cuda.grid(1)
    if i < values.shape[0]:
        b = values[i]
        while True:
            old = hist[b]
            if cuda.atomic.cas(hist, b, old, old + 1) == old:
                break


@cuda.jit
def bin_extremes(values, bins, hi, lo, total):
    i = cuda.grid(1)
    if i < values.shape[0]:
        b = bins[i]
        cuda.atomic.max(hi, b, values[i])
        cuda.atomic.min(lo, b, values[i])
        cuda.atomic.add(total, (b, 0), values[i])  # a tuple index into a 2-D array
        cuda.atomic.add(total, (b, 1), 1.0)


@cuda.jit
def int_extremes(values, bins, hi, lo):
    i = cuda.grid(1)
    if i < values.shape[0]:
        cuda.atomic.max(hi, bins[i], values[i])
        cuda.atomic.min(lo, bins[i], values[i])


@cuda.jit
def moving_sum(x, out):
    # A per-thread scratch array (cuda.local.array).
    i = cuda.grid(1)
    window = cuda.local.array(4, numba.float64)
    if i + 4 <= x.shape[0]:
        for k in range(4):
            window[k] = x[i + k]
        s = 0.0
        for k in range(4):
            s += window[k]
        out[i] = s


# -- launch cases -------------------------------------------------------------------------------


@dataclass(frozen=True)
class Case:
    name: str
    kernel: object
    grid: tuple
    block: tuple
    make: Callable  # seed -> tuple of arguments
    outputs: tuple  # indices of the arguments the kernel writes
    reference: Callable | None = None  # arguments -> expected outputs (numpy), or None


def _vector_add(rng):
    a, b = rng.standard_normal(1000).astype(np.float32), rng.standard_normal(1000).astype(np.float32)
    return a, b, np.zeros(1000, np.float32)


def _poly(rng):
    return np.zeros((45, 70)), rng.standard_normal(70), rng.standard_normal(45)


def _poly_ref(out, x, y, block_x=32):
    X, Y = x[None, :], y[:, None]
    return (3.0 * X * X + 2.0 * Y + 1.0 + (3.0 * Y * Y + 2.0 * X + 1.0) * block_x,)


def _coords(rng):
    return np.zeros((5, 9, 21), np.int64), np.zeros((5, 9, 21), np.int64)


def _coords_ref(out, blocks):
    z, y, x = np.indices(out.shape)
    return x + 100 * y + 10000 * z, x // 8 + 3 * (y // 4 + 3 * (z // 2))


def _grid_stride(rng):
    return (np.zeros((300, 200), np.int64),)


def _grid_stride_ref(out):
    y, x = np.indices(out.shape)
    return (x * y + 1,)


def _phasors(rng):
    return np.zeros(500), rng.uniform(-3, 3, 500)


def _hist(rng):
    return rng.integers(0, 37, 20_000).astype(np.int64), np.zeros(37, np.int64)


def _hist_ref(values, hist):
    return (np.bincount(values, minlength=hist.size),)


def _extremes(rng):
    # Integer-valued floats: every sum is exact in any order, so parallel atomics are exact.
    values = rng.integers(-1000, 1000, 5000).astype(np.float64)
    bins = rng.integers(0, 13, 5000).astype(np.int64)
    return values, bins, np.full(13, -np.inf), np.full(13, np.inf), np.zeros((13, 2))


def _extremes_ref(values, bins, hi, lo, total):
    hi_ref, lo_ref = np.full(13, -np.inf), np.full(13, np.inf)
    np.maximum.at(hi_ref, bins, values)
    np.minimum.at(lo_ref, bins, values)
    total_ref = np.stack([np.bincount(bins, values, 13), np.bincount(bins, minlength=13)], axis=1)
    return hi_ref, lo_ref, total_ref


def _int_extremes(rng):
    values = rng.integers(-2**40, 2**40, 5000).astype(np.int64)
    bins = rng.integers(0, 11, 5000).astype(np.int64)
    return values, bins, np.full(11, np.iinfo(np.int64).min), np.full(11, np.iinfo(np.int64).max)


def _int_extremes_ref(values, bins, hi, lo):
    hi_ref, lo_ref = hi.copy(), lo.copy()
    np.maximum.at(hi_ref, bins, values)
    np.minimum.at(lo_ref, bins, values)
    return hi_ref, lo_ref


def _moving(rng):
    return rng.integers(0, 100, 300).astype(np.float64), np.zeros(297)


def _moving_ref(x, out):
    return (np.convolve(x, np.ones(4), "valid"),)


CASES = (
    Case("vector_add", vector_add, (4,), (256,), _vector_add, (2,), lambda a, b, c: (a + b,)),
    Case("device_functions_2d", poly_2d, (3, 3), (32, 16), _poly, (0,), _poly_ref),
    Case("indices_3d", coords_3d, (3, 3, 3), (8, 4, 2), _coords, (0, 1), _coords_ref),
    Case("grid_stride_2d", grid_stride_2d, (2, 3), (16, 8), _grid_stride, (0,), _grid_stride_ref),
    Case("math_cmath", unit_phasors, (2,), (256,), _phasors, (0,), None),
    Case("atomic_add_histogram", histogram_add, (8,), (128,), _hist, (1,), _hist_ref),
    Case("cas_histogram", histogram_cas, (157,), (128,), _hist, (1,), _hist_ref),
    Case("atomic_max_min_float", bin_extremes, (40,), (128,), _extremes, (2, 3, 4), _extremes_ref),
    Case("atomic_max_min_int", int_extremes, (40,), (128,), _int_extremes, (2, 3), _int_extremes_ref),
    Case("local_array", moving_sum, (3,), (128,), _moving, (1,), _moving_ref),
)


def arguments(case: Case, seed: int = 0) -> tuple:
    return case.make(np.random.default_rng(seed))
