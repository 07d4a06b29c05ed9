"""Launch overhead: ``launch_kernel`` against numba's own launch of the same loop.

CPU: a 1024-element axpy through ``CPUBackend.launch_kernel`` against a direct call of
an ``njit(parallel=True)`` function with the same loop. GPU: ``CUDABackend.launch_kernel``
against ``kernel[grid, block](...)`` of the same ``cuda.jit`` kernel (asynchronous
launches, one synchronize per round). Targets: at most 1.5x numba's own overhead, and
under 50 us per small CPU launch.
"""

import numba
import numpy as np
import pytest
from benchlib import tag

import kernelrt

N = 1024
LAUNCHES = 200  # per benchmark round; the reported time is per launch


@kernelrt.kernel
def axpy(i, out, x, y, a):
    if i < out.shape[0]:
        out[i] = a * x[i] + y[i]


@numba.njit(parallel=True)
def axpy_numba(out, x, y, a):
    for i in numba.prange(out.shape[0]):
        out[i] = a * x[i] + y[i]


def _arrays():
    rng = np.random.default_rng(0)
    return np.zeros(N), rng.random(N), rng.random(N)


def test_cpu_launch_kernelrt(benchmark):
    backend = kernelrt.CPUBackend()
    out, x, y = _arrays()
    backend.launch_kernel(axpy, N // 128, 128, out, x, y, 2.0)  # compile or load first

    def launches():
        for _ in range(LAUNCHES):
            backend.launch_kernel(axpy, N // 128, 128, out, x, y, 2.0)

    tag(benchmark, "launch-cpu", "kernelrt", launches_per_round=LAUNCHES, elements=N)
    benchmark(launches)
    np.testing.assert_allclose(out, 2.0 * x + y)


def test_cpu_launch_numba(benchmark):
    out, x, y = _arrays()
    axpy_numba(out, x, y, 2.0)

    def launches():
        for _ in range(LAUNCHES):
            axpy_numba(out, x, y, 2.0)

    tag(benchmark, "launch-cpu", "peer", peer="numba njit(parallel=True)", launches_per_round=LAUNCHES, elements=N)
    benchmark(launches)


def _gpu_or_skip():
    if not kernelrt.CUDABackend.check_available() or kernelrt.CUDABackend.availability().code != "ok":
        pytest.skip("no CUDA GPU")
    return kernelrt.CUDABackend(0)


def test_gpu_launch_kernelrt(benchmark):
    gpu = _gpu_or_skip()
    out, x, y = (gpu.to_device(a) for a in _arrays())
    gpu.launch_kernel(axpy, N // 128, 128, out, x, y, 2.0)
    gpu.synchronize()

    def launches():
        for _ in range(LAUNCHES):
            gpu.launch_kernel(axpy, N // 128, 128, out, x, y, 2.0)
        gpu.synchronize()

    tag(benchmark, "launch-gpu", "kernelrt", launches_per_round=LAUNCHES, elements=N, device=gpu.device_name)
    benchmark(launches)


def test_gpu_launch_numba(benchmark):
    gpu = _gpu_or_skip()
    from numba import cuda

    @cuda.jit
    def axpy_cuda(out, x, y, a):
        i = cuda.grid(1)
        if i < out.shape[0]:
            out[i] = a * x[i] + y[i]

    with gpu.activated():
        out, x, y = (cuda.to_device(a) for a in _arrays())
        axpy_cuda[N // 128, 128](out, x, y, 2.0)
        cuda.synchronize()

        def launches():
            for _ in range(LAUNCHES):
                axpy_cuda[N // 128, 128](out, x, y, 2.0)
            cuda.synchronize()

        tag(benchmark, "launch-gpu", "peer", peer="numba cuda.jit launch", launches_per_round=LAUNCHES, elements=N)
        benchmark(launches)
