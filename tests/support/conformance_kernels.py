"""numba-cuda's own kernels, verbatim, as a conformance suite for ``CPUBackend`` (``CASES``).

Every kernel here and in the ``conformance_kernels_*`` modules is copied from numba-cuda's
test suite (``cudapy/test_*.py``) or documentation examples (``doc_examples/test_*.py``)
as the installed wheel ships them under ``numba_cuda/numba/cuda/tests/``; each case names
its file and test. Conventions of the copies:

* A function the original compiles by a call (``cuda.jit("void(int32[:])")(fn)``) is the
  plain function here, compiled lazily by ``cuda.jit(fn)`` (an explicit signature compiles
  at once, which needs a CUDA driver); a nested function whose decorator carries a
  signature is undecorated and compiled the same way; the case's source says so.
* Kernels the original defines inside a test are defined inside a function named after
  that test, with the test's own local names around them (closures stay closures);
  ``cuda`` itself stays a module global, as the simulator requires.
* Launch sizes shrink to a few blocks of at most a few hundred threads; a constant the
  original uses for its size (``TPB``, ``nelem``, ``size``) is set smaller, the kernel text is
  unchanged.

Imported by the CPU layer (tests/runtime/test_conformance.py) and by the simulator layer
(tests/simulator/test_conformance_sim.py, where ``numba.cuda`` is Numba's simulator).
"""

from __future__ import annotations

from math import pi  # doc_examples/test_cpu_gpu_compat.py's import, for business_logic
from typing import Any

import numba
import numpy as np
from numba import cuda

from tests.support import (
    conformance_kernels_atomics,
    conformance_kernels_calls,
    conformance_kernels_doc,
    conformance_kernels_intrinsics,
    conformance_kernels_math,
    conformance_kernels_memory,
    conformance_kernels_sync,
    conformance_kernels_warp,
)
from tests.support.conformance_case import Case

# -- cudapy/test_intrinsics.py: thread and grid indices ---------------------------------------


def simple_threadidx(ary):
    i = cuda.threadIdx.x
    ary[0] = i


def fill3d_threadidx(ary):
    i = cuda.threadIdx.x
    j = cuda.threadIdx.y
    k = cuda.threadIdx.z

    ary[i, j, k] = (i + 1) * (j + 1) * (k + 1)


def simple_grid1d(ary):
    i = cuda.grid(1)
    ary[i] = i


def simple_grid2d(ary):
    i, j = cuda.grid(2)
    ary[i, j] = i + j


def simple_gridsize2d(ary):
    i, j = cuda.grid(2)
    x, y = cuda.gridsize(2)
    if i == 0 and j == 0:
        ary[0] = x
        ary[1] = y


def intrinsic_forloop_step(c):
    startX, startY = cuda.grid(2)
    gridX = cuda.gridDim.x * cuda.blockDim.x
    gridY = cuda.gridDim.y * cuda.blockDim.y
    height, width = c.shape

    for x in range(startX, width, gridX):
        for y in range(startY, height, gridY):
            c[y, x] = x + y


def test_3dgrid() -> Any:
    @cuda.jit
    def foo(out):
        x, y, z = cuda.grid(3)
        a, b, c = cuda.gridsize(3)
        out[x, y, z] = a * b * c

    return foo


def test_3dgrid_2() -> Any:
    @cuda.jit
    def foo(out):
        x, y, z = cuda.grid(3)
        a, b, c = cuda.gridsize(3)
        grid_is_right = (
            x == cuda.threadIdx.x + cuda.blockIdx.x * cuda.blockDim.x
            and y == cuda.threadIdx.y + cuda.blockIdx.y * cuda.blockDim.y
            and z == cuda.threadIdx.z + cuda.blockIdx.z * cuda.blockDim.z
        )
        gridsize_is_right = (
            a == cuda.blockDim.x * cuda.gridDim.x
            and b == cuda.blockDim.y * cuda.gridDim.y
            and c == cuda.blockDim.z * cuda.gridDim.z
        )
        out[x, y, z] = grid_is_right and gridsize_is_right

    return foo


# -- cudapy/test_lang.py, cudapy/test_iterators.py: tuples, enumerate and zip ---------------


def test_enumerate() -> Any:
    tup = (1.0, 2.5, 3.0)

    def foo(a):
        for i, v in enumerate(tup):
            a[i] = v

    return cuda.jit(foo)  # the original: @cuda.jit("void(float64[:])")


def test_zip() -> Any:
    t1 = (1, 2, 3)
    t2 = (4.5, 5.6, 6.7)

    def foo(a):
        c = 0
        for i, j in zip(t1, t2):
            c += i + j
        a[0] = c

    return cuda.jit(foo)  # the original: @cuda.jit("void(float64[:])")


@cuda.jit
def enumerator_zipper(x, y, error):
    count = 0

    for i, (xv, yv) in enumerate(zip(x, y)):
        if i != count:
            error[0] = 1
        if xv != x[i]:
            error[0] = 2
        if yv != y[i]:
            error[0] = 3

        count += 1

    if count != len(x):
        error[0] = 4


@cuda.jit
def zipper_enumerator(x, y, error):
    count = 0

    for (i, xv), yv in zip(enumerate(x), y):
        if i != count:
            error[0] = 1
        if xv != x[i]:
            error[0] = 2
        if yv != y[i]:
            error[0] = 3

        count += 1

    if count != len(x):
        error[0] = 4


def test_inplace_div() -> Any:
    def div(grid, l_x, l_y):
        for x in range(l_x):
            for y in range(l_y):
                grid[x, y] /= 2.0

    return cuda.jit(div)  # the original: @cuda.jit(void(float32[:, :], int32, int32))


# -- doc_examples: vector add, captured globals, a numba.jit function in a kernel --------------


def test_ex_vecadd() -> Any:
    @cuda.jit
    def f(a, b, c):
        # like threadIdx.x + (blockIdx.x * blockDim.x)
        tid = cuda.grid(1)
        size = len(c)

        if tid < size:
            c[tid] = a[tid] + b[tid]

    return f


def test_ex_globals_constant_capture() -> Any:
    TAX_RATE = 0.08
    PRICES = np.array([10.0, 25.0, 5.0, 15.0, 30.0], dtype=np.float64)

    @cuda.jit
    def compute_totals(quantities, totals):
        i = cuda.grid(1)
        if i < totals.size:
            totals[i] = quantities[i] * PRICES[i] * (1 + TAX_RATE)

    return compute_totals


@numba.jit
def business_logic(x, y, z):
    return 4 * z * (2 * x - (4 * y) / 2 * pi)


def test_ex_cpu_gpu_compat() -> Any:
    @cuda.jit
    def f(res, xarr, yarr, zarr):
        tid = cuda.grid(1)
        if tid < len(xarr):
            # The function decorated with numba.jit may be directly reused
            res[tid] = business_logic(xarr[tid], yarr[tid], zarr[tid])

    return f


# -- launch cases --------------------------------------------------------------------------------


def _idx2(shape: tuple[int, ...]) -> np.ndarray:
    i, j = np.indices(shape)
    return (i + j).astype(np.int32)


def _pair(rng: np.random.Generator) -> tuple[Any, ...]:
    return np.asarray((10, 9, 8, 7, 6)), np.asarray((1, 2, 3, 4, 5)), np.zeros(1, dtype=np.int32)


def _vecadd(rng: np.random.Generator) -> tuple[Any, ...]:
    return rng.random(1000), rng.random(1000), np.zeros(1000)


_I = "cudapy/test_intrinsics.py::TestCudaIntrinsic."

BASIC_CASES = [
    Case("threadidx", _I + "test_simple_threadidx", cuda.jit(simple_threadidx), (1,), (1,),
         lambda r: (np.ones(1, np.int32),), (0,), reference=lambda a: (np.zeros(1, np.int32),)),
    Case("fill3d_threadidx", _I + "test_fill3d_threadidx", cuda.jit(fill3d_threadidx), (1,), (4, 5, 6),
         lambda r: (np.zeros((4, 5, 6), np.int32),), (0,),
         reference=lambda a: (np.prod(np.indices(a.shape) + 1, axis=0).astype(np.int32),)),
    Case("grid1d", _I + "test_simple_grid1d", cuda.jit(simple_grid1d), (7,), (3,),
         lambda r: (np.zeros(21, np.int32),), (0,), reference=lambda a: (np.arange(21, dtype=np.int32),)),
    Case("grid2d", _I + "test_simple_grid2d", cuda.jit(simple_grid2d), (5, 6), (4, 3),
         lambda r: (np.zeros((20, 18), np.int32),), (0,), reference=lambda a: (_idx2(a.shape),)),
    Case("gridsize2d", _I + "test_simple_gridsize2d", cuda.jit(simple_gridsize2d), (5, 6), (4, 3),
         lambda r: (np.zeros(2, np.int32),), (0,), reference=lambda a: (np.array([20, 18], np.int32),)),
    # grid-stride loops over both axes: an 8 x 9 thread grid over a 37 x 40 array
    Case("grid_stride_2d", _I + "test_intrinsic_forloop_step", cuda.jit(intrinsic_forloop_step), (2, 3), (4, 3),
         lambda r: (np.zeros((37, 40), np.int32),), (0,), reference=lambda c: (_idx2(c.shape),)),
    Case("grid3d_gridsize", _I + "test_3dgrid", test_3dgrid(), (3, 3, 3), (3, 3, 3),
         lambda r: (np.zeros((9, 9, 9), np.int32),), (0,), reference=lambda a: (np.full(a.shape, 729, np.int32),)),
    Case("grid3d_indices", _I + "test_3dgrid_2", test_3dgrid_2(), (4, 3, 2), (3, 2, 4),
         lambda r: (np.zeros((12, 6, 8), np.bool_),), (0,), reference=lambda a: (np.ones(a.shape, np.bool_),)),
    Case("tuple_enumerate", "cudapy/test_lang.py::TestLang.test_enumerate", test_enumerate(), (1,), (1,),
         lambda r: (np.zeros(3),), (0,), reference=lambda a: (np.array([1.0, 2.5, 3.0]),)),
    Case("tuple_zip", "cudapy/test_lang.py::TestLang.test_zip", test_zip(), (1,), (1,),
         lambda r: (np.zeros(1),), (0,), reference=lambda a: (np.array([((1 + 4.5) + (2 + 5.6)) + (3 + 6.7)]),)),
    Case("enumerate_zip", "cudapy/test_iterators.py::TestIterators.test_enumerate_zip", enumerator_zipper,
         (1,), (1,), _pair, (2,), reference=lambda x, y, e: (np.zeros(1, np.int32),)),
    Case("zip_enumerate", "cudapy/test_iterators.py::TestIterators.test_zip_enumerate", zipper_enumerator,
         (1,), (1,), _pair, (2,), reference=lambda x, y, e: (np.zeros(1, np.int32),)),
    Case("inplace_div", "cudapy/test_idiv.py::TestCudaIDiv.test_inplace_div", test_inplace_div(), (1,), (1,),
         lambda r: (np.ones((2, 2), dtype=np.float32), 2, 2), (0,),
         reference=lambda g, x, y: (np.full((2, 2), 0.5, np.float32),)),
    Case("doc_vecadd", "doc_examples/test_vecadd.py::TestVecAdd.test_ex_vecadd", test_ex_vecadd(), (8,), (128,),
         _vecadd, (2,), reference=lambda a, b, c: (a + b,)),
    Case("doc_globals_capture", "doc_examples/test_globals.py::TestGlobals.test_ex_globals_constant_capture",
         test_ex_globals_constant_capture(), (1,), (32,),
         lambda r: (np.array([1, 2, 3, 4, 5], dtype=np.float64), np.zeros(5)), (1,),
         reference=lambda q, t: (q * np.array([10.0, 25.0, 5.0, 15.0, 30.0]) * (1 + 0.08),)),
    Case("doc_numba_jit_in_kernel", "doc_examples/test_cpu_gpu_compat.py::TestCpuGpuCompat.test_ex_cpu_gpu_compat",
         test_ex_cpu_gpu_compat(), (1,), (32,),
         lambda r: (np.zeros(3), np.array([1, 10, 234]), np.array([2, 2, 4014]), np.array([3, 14, 2211])), (0,),
         reference=lambda res, x, y, z: (np.array([business_logic(*v) for v in zip(x, y, z)]),)),
]

CASES: list[Case] = [
    *BASIC_CASES,
    *conformance_kernels_calls.CASES,
    *conformance_kernels_memory.CASES,
    *conformance_kernels_intrinsics.CASES,
    *conformance_kernels_math.CASES,
    *conformance_kernels_atomics.CASES,
    *conformance_kernels_sync.CASES,
    *conformance_kernels_doc.CASES,
    *conformance_kernels_warp.CASES,
]
