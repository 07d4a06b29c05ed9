"""Plain ``@cuda.jit`` kernels on the CPU backend, against the ways a user would otherwise run them.

Three cases, each a ``numba.cuda`` kernel launched with ``CPUBackend.launch_kernel``:

* ``cuda-on-cpu-*``: against the same loop hand-written as an ``njit(parallel=True)``
  function (the target: within 1.5x of it; for saxpy also the hand-written loop keeping
  the kernel's ``if i < n`` guard, which costs the vectorised loop masked loads and
  stores): a memory-bound saxpy and a compute-bound
  element-wise ``exp``/``sin`` over 2^24 elements (2^18 with ``--quick``), and a 2-D
  stencil on a 4096 x 4096 grid (1024 x 1024);
* ``cuda-on-cpu-simulator``: against the same kernel in Numba's CUDA simulator (the only
  other way to run a ``cuda.jit`` kernel without a GPU), at 4096 elements: the simulator
  runs in a worker process (it must be switched on before numba.cuda is imported), and
  each of its timed calls includes a pipe round trip of well under a millisecond;
* ``cuda-on-cpu-atomic-histogram``: a grid-stride histogram through ``cuda.atomic.add``
  (256 bins, 2^24 values; the adds go to a copy per chunk of threads, cuda_private.py)
  against the hand-written loop with a histogram per chunk of values, and ``numpy.bincount``;
* ``cuda-on-cpu-tiled-matmul``, ``-block-reduction``, ``-black-scholes``: kernels that
  synchronise (numba-cuda's documented shared-memory matmul, a shared-memory tree
  reduction) or call a device function (numba-cuda's Black-Scholes test), run in blocks or
  with the device function inlined, against the hand-written ``njit(parallel=True)`` loop
  (the target: within 1.2x; bench/cuda_block_kernels.py);
* ``launch-cpu-numba-style``: the launch overhead of ``compiled[grid, block](...)`` against
  a direct call of the hand-written ``njit`` function, 1024 elements (GPU: bench_launch.py).
"""

import math
import subprocess
import sys
import textwrap

import numba
import cuda_block_kernels as cbk
import numpy as np
import pytest
from benchlib import QUICK, tag
from numba import cuda

import kernelrt

N = 2**18 if QUICK else 2**24
SIDE = 1024 if QUICK else 4096
BLOCK = 256


@cuda.jit
def saxpy(out, x, y, a):
    i = cuda.grid(1)
    if i < out.shape[0]:
        out[i] = a * x[i] + y[i]


@numba.njit(parallel=True)
def saxpy_loop(out, x, y, a):
    for i in numba.prange(out.shape[0]):
        out[i] = a * x[i] + y[i]


@numba.njit(parallel=True)
def saxpy_loop_guarded(out, x, y, a, n):
    for i in numba.prange(n):
        if i < out.shape[0]:  # the kernel's own bounds guard, kept
            out[i] = a * x[i] + y[i]


@cuda.jit
def damped(out, x):
    i = cuda.grid(1)
    if i < out.shape[0]:
        out[i] = math.exp(-x[i] * x[i]) * math.sin(3.0 * x[i])


@numba.njit(parallel=True)
def damped_loop(out, x):
    for i in numba.prange(out.shape[0]):
        out[i] = math.exp(-x[i] * x[i]) * math.sin(3.0 * x[i])


@cuda.jit
def laplace_2d(out, u):
    i, j = cuda.grid(2)
    if 0 < i < u.shape[1] - 1 and 0 < j < u.shape[0] - 1:
        out[j, i] = u[j, i - 1] + u[j, i + 1] + u[j - 1, i] + u[j + 1, i] - 4.0 * u[j, i]


@numba.njit(parallel=True)
def laplace_2d_loop(out, u):
    for j in numba.prange(1, u.shape[0] - 1):
        for i in range(1, u.shape[1] - 1):
            out[j, i] = u[j, i - 1] + u[j, i + 1] + u[j - 1, i] + u[j + 1, i] - 4.0 * u[j, i]


def _vectors(n=N):
    rng = np.random.default_rng(0)
    return np.zeros(n, np.float32), rng.standard_normal(n).astype(np.float32), rng.standard_normal(n).astype(np.float32)


def _grid(n=N):
    return ((n + BLOCK - 1) // BLOCK,), (BLOCK,)


@pytest.fixture(scope="module")
def cpu():
    return kernelrt.CPUBackend()


def test_saxpy_kernelrt(benchmark, cpu):
    out, x, y = _vectors()
    grid, block = _grid()
    cpu.launch_kernel(saxpy, grid, block, out, x, y, np.float32(2.0))  # compile or load first
    tag(benchmark, "cuda-on-cpu-saxpy", "kernelrt", elements=N)
    benchmark(cpu.launch_kernel, saxpy, grid, block, out, x, y, np.float32(2.0))
    np.testing.assert_allclose(out, 2.0 * x + y, rtol=1e-6)  # float32, one rounding apart at most


def test_saxpy_hand_written(benchmark):
    out, x, y = _vectors()
    saxpy_loop(out, x, y, np.float32(2.0))
    tag(benchmark, "cuda-on-cpu-saxpy", "peer", peer="hand-written njit(parallel=True)", elements=N)
    benchmark(saxpy_loop, out, x, y, np.float32(2.0))


def test_saxpy_hand_written_guarded(benchmark):
    out, x, y = _vectors()
    n = _grid()[0][0] * BLOCK
    saxpy_loop_guarded(out, x, y, np.float32(2.0), n)
    tag(benchmark, "cuda-on-cpu-saxpy", "peer", peer="hand-written njit(parallel=True), with the kernel's guard",
        elements=N)
    benchmark(saxpy_loop_guarded, out, x, y, np.float32(2.0), n)


def test_damped_kernelrt(benchmark, cpu):
    out, x, _ = (a.astype(np.float64) for a in _vectors())
    grid, block = _grid()
    cpu.launch_kernel(damped, grid, block, out, x)
    tag(benchmark, "cuda-on-cpu-exp-sin", "kernelrt", elements=N)
    benchmark(cpu.launch_kernel, damped, grid, block, out, x)


def test_damped_hand_written(benchmark):
    out, x, _ = (a.astype(np.float64) for a in _vectors())
    damped_loop(out, x)
    tag(benchmark, "cuda-on-cpu-exp-sin", "peer", peer="hand-written njit(parallel=True)", elements=N)
    benchmark(damped_loop, out, x)


def _field():
    return np.zeros((SIDE, SIDE)), np.random.default_rng(0).standard_normal((SIDE, SIDE))


def test_stencil_kernelrt(benchmark, cpu):
    out, u = _field()
    grid, block = (SIDE // 32, SIDE // 8), (32, 8)
    cpu.launch_kernel(laplace_2d, grid, block, out, u)
    tag(benchmark, "cuda-on-cpu-stencil-2d", "kernelrt", elements=SIDE * SIDE)
    benchmark(cpu.launch_kernel, laplace_2d, grid, block, out, u)


def test_stencil_hand_written(benchmark):
    out, u = _field()
    laplace_2d_loop(out, u)
    tag(benchmark, "cuda-on-cpu-stencil-2d", "peer", peer="hand-written njit(parallel=True)", elements=SIDE * SIDE)
    benchmark(laplace_2d_loop, out, u)


# -- atomics ---------------------------------------------------------------------------------------


@cuda.jit
def histogram(values, hist):
    start, stride = cuda.grid(1), cuda.gridsize(1)
    for i in range(start, values.shape[0], stride):
        cuda.atomic.add(hist, values[i], 1)


def _values():
    return np.random.default_rng(0).integers(0, 256, N).astype(np.int64), np.zeros(256, np.int64)


def test_histogram_kernelrt(benchmark, cpu):
    values, hist = _values()
    cpu.launch_kernel(histogram, 64, 256, values, hist)
    np.testing.assert_array_equal(hist, np.bincount(values, minlength=256))  # integer counts: exact
    tag(benchmark, "cuda-on-cpu-atomic-histogram", "kernelrt", elements=N)
    benchmark(cpu.launch_kernel, histogram, 64, 256, values, hist)


def test_histogram_hand_written(benchmark):
    values, hist = _values()
    cbk.histogram_loop(values, hist)
    np.testing.assert_array_equal(hist, np.bincount(values, minlength=256))
    tag(benchmark, "cuda-on-cpu-atomic-histogram", "peer", peer="hand-written njit(parallel=True)", elements=N)
    benchmark(cbk.histogram_loop, values, hist)


def test_histogram_numpy(benchmark):
    values, _ = _values()
    tag(benchmark, "cuda-on-cpu-atomic-histogram", "peer", peer="numpy.bincount", elements=N)
    benchmark(np.bincount, values, minlength=256)


# -- against the CUDA simulator ------------------------------------------------------------------

SIM_N = 4096
_SIMULATOR_WORKER = textwrap.dedent(
    f"""
    import sys
    import numpy as np
    sys.path.insert(0, {str(__import__("pathlib").Path(__file__).resolve().parent)!r})
    from bench_cuda_on_cpu import saxpy, _vectors, _grid
    out, x, y = _vectors({SIM_N})
    grid, block = _grid({SIM_N})
    for line in sys.stdin:
        saxpy[grid, block](out, x, y, np.float32(2.0))
        print("done", flush=True)
    """
)


def test_small_saxpy_kernelrt(benchmark, cpu):
    out, x, y = _vectors(SIM_N)
    grid, block = _grid(SIM_N)
    cpu.launch_kernel(saxpy, grid, block, out, x, y, np.float32(2.0))
    tag(benchmark, "cuda-on-cpu-simulator", "kernelrt", elements=SIM_N)
    benchmark(cpu.launch_kernel, saxpy, grid, block, out, x, y, np.float32(2.0))


def test_small_saxpy_simulator(benchmark):
    env = {"NUMBA_ENABLE_CUDASIM": "1", "PATH": "/usr/bin:/bin"}
    worker = subprocess.Popen([sys.executable, "-c", _SIMULATOR_WORKER], stdin=subprocess.PIPE,
                              stdout=subprocess.PIPE, text=True, env=env)
    try:
        def one_launch():
            worker.stdin.write("run\n")
            worker.stdin.flush()
            assert worker.stdout.readline().strip() == "done"

        one_launch()  # import and warm up
        tag(benchmark, "cuda-on-cpu-simulator", "peer", peer="numba CUDA simulator", elements=SIM_N)
        benchmark.pedantic(one_launch, rounds=3, iterations=1)
    finally:
        worker.stdin.close()
        worker.wait(timeout=60)


# -- launch overhead of the numba-style form -----------------------------------------------------------


def test_launch_numba_style_kernelrt(benchmark, cpu):
    out, x, y = _vectors(1024)
    compiled = cpu.compile_kernel(saxpy)
    compiled[8, 128](out, x, y, np.float32(2.0))
    launches = 200

    def run():
        for _ in range(launches):
            compiled[8, 128](out, x, y, np.float32(2.0))

    tag(benchmark, "launch-cpu-numba-style", "kernelrt", launches_per_round=launches, elements=1024)
    benchmark(run)


def test_launch_numba_style_hand_written(benchmark):
    out, x, y = _vectors(1024)
    saxpy_loop(out, x, y, np.float32(2.0))
    launches = 200

    def run():
        for _ in range(launches):
            saxpy_loop(out, x, y, np.float32(2.0))

    tag(benchmark, "launch-cpu-numba-style", "peer", peer="numba njit(parallel=True) call",
        launches_per_round=launches, elements=1024)
    benchmark(run)


# -- kernels that synchronise or call device functions (bench/cuda_block_kernels.py) ------------

MATMUL = 256 if QUICK else 1024


def _matrices():
    rng = np.random.default_rng(1)
    a, b = (rng.integers(-4, 5, (MATMUL, MATMUL)).astype(np.float32) for _ in range(2))
    return a, b, np.zeros_like(a)


def test_tiled_matmul_kernelrt(benchmark, cpu):
    a, b, c = _matrices()
    grid = (MATMUL // cbk.TPB, MATMUL // cbk.TPB)
    cpu.launch_kernel(cbk.fast_matmul, grid, (cbk.TPB, cbk.TPB), a, b, c)
    want = np.zeros_like(c)
    cbk.matmul_loop(a, b, want)
    np.testing.assert_array_equal(c, want)  # exact: integer-valued float32 sums in the same k order
    tag(benchmark, "cuda-on-cpu-tiled-matmul", "kernelrt", elements=MATMUL * MATMUL)
    benchmark(cpu.launch_kernel, cbk.fast_matmul, grid, (cbk.TPB, cbk.TPB), a, b, c)


def test_tiled_matmul_hand_written(benchmark):
    a, b, c = _matrices()
    cbk.matmul_loop(a, b, c)
    tag(benchmark, "cuda-on-cpu-tiled-matmul", "peer", peer="hand-written njit(parallel=True)",
        elements=MATMUL * MATMUL)
    benchmark(cbk.matmul_loop, a, b, c)


def _blocks():
    a = np.random.default_rng(2).standard_normal(N)
    return a, np.zeros(N // cbk.REDUCE_BLOCK)


def test_block_reduction_kernelrt(benchmark, cpu):
    a, out = _blocks()
    cpu.launch_kernel(cbk.block_sums, out.size, cbk.REDUCE_BLOCK, a, out)
    # a tree against a straight sum of 256 normal values: a few ulp of the block's magnitude
    np.testing.assert_allclose(out, a.reshape(-1, cbk.REDUCE_BLOCK).sum(1), rtol=0, atol=1e-12)
    tag(benchmark, "cuda-on-cpu-block-reduction", "kernelrt", elements=N)
    benchmark(cpu.launch_kernel, cbk.block_sums, out.size, cbk.REDUCE_BLOCK, a, out)


def test_block_reduction_hand_written(benchmark):
    a, out = _blocks()
    cbk.block_sums_loop(a, out)
    tag(benchmark, "cuda-on-cpu-block-reduction", "peer", peer="hand-written njit(parallel=True)", elements=N)
    benchmark(cbk.block_sums_loop, a, out)


def test_black_scholes_kernelrt(benchmark, cpu):
    call, put, s, x, t = cbk.options(N)
    grid = (N + BLOCK - 1) // BLOCK
    cpu.launch_kernel(cbk.black_scholes, grid, BLOCK, call, put, s, x, t, 0.02, 0.30)
    tag(benchmark, "cuda-on-cpu-black-scholes", "kernelrt", elements=N)
    benchmark(cpu.launch_kernel, cbk.black_scholes, grid, BLOCK, call, put, s, x, t, 0.02, 0.30)


def test_black_scholes_hand_written(benchmark):
    call, put, s, x, t = cbk.options(N)
    cbk.black_scholes_loop(call, put, s, x, t, 0.02, 0.30)
    tag(benchmark, "cuda-on-cpu-black-scholes", "peer", peer="hand-written njit(parallel=True)", elements=N)
    benchmark(cbk.black_scholes_loop, call, put, s, x, t, 0.02, 0.30)
