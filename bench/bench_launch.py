"""Launch overhead: ``launch_kernel`` and prepared launches against numba's own launch of the same loop.

CPU: a 1024-element axpy through ``CPUBackend.launch_kernel``, through a prepared launch
(``backend.prepare``, called with no arguments and re-bound with the same ones each call),
against a direct call of an ``njit(parallel=True)`` function with the same loop. GPU: the same
through ``CUDABackend`` (numba arrays; CuPy arrays where installed), a launch sequence of
the prepared launch (a CUDA graph replay where CuPy is installed), against
``kernel[grid, block](...)`` of the same ``cuda.jit`` kernel (asynchronous launches, one
synchronize per round). Targets: at most 1.5x numba's own overhead, and under 50 us per small
CPU launch; a prepared or graph launch at most 5 us on a GPU (GPU_PLAN.md R1).
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


@pytest.mark.parametrize("rebind", [False, True], ids=["bound", "rebind"])
def test_cpu_launch_prepared(benchmark, rebind):
    backend = kernelrt.CPUBackend()
    out, x, y = _arrays()
    p = backend.prepare(axpy, N // 128, 128, out, x, y, 2.0)
    p()  # compile or load first
    args = (out, x, y, 2.0) if rebind else ()

    def launches():
        for _ in range(LAUNCHES):
            p(*args)

    # its own group: launch-cpu pairs launch_kernel with numba's call (one kernelrt row per group for ratios)
    tag(benchmark, "launch-cpu-prepared" + ("-rebind" if rebind else ""), "kernelrt", launches_per_round=LAUNCHES,
        elements=N, series="prepared" + (" + rebind" if rebind else ""))
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


@pytest.mark.parametrize("arrays", ["numba", "cupy"])
@pytest.mark.parametrize("how", ["prepared", "sequence"])
def test_gpu_launch_prepared(benchmark, arrays, how):
    _gpu_or_skip()
    if arrays == "cupy":
        pytest.importorskip("cupy")
    gpu = kernelrt.CUDABackend(0, arrays=arrays)
    out, x, y = (gpu.to_device(a) for a in _arrays())
    p = gpu.prepare(axpy, N // 128, 128, out, x, y, 2.0)
    seq = gpu.sequence([p])
    seq.run(2)  # compile, load and capture first
    gpu.synchronize()

    def launches():
        if how == "sequence":
            seq.run(LAUNCHES)
        else:
            for _ in range(LAUNCHES):
                p()
        gpu.synchronize()

    tag(benchmark, f"launch-gpu-{how}-{arrays}", "kernelrt", launches_per_round=LAUNCHES, elements=N,
        device=gpu.device_name, mode=seq.mode if how == "sequence" else "prepared", series=f"{how} ({arrays} arrays)")
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
