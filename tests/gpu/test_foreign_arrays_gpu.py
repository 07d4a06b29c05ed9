"""CuPy, PyTorch and DLPack arrays on a real GPU (skipped without one; run by tools/gpu_check.sh).

With CuPy installed (the cuda12/cuda13 extras) ``allocate``/``zeros``/``to_device`` return
CuPy arrays on the backend's device; ``arrays="numba"`` keeps numba's device arrays. Any
CUDA array interface or DLPack array is a kernel argument as it is (no copy): kernelrt
hands numba a view and orders the launch after the stream the array names, on the
device, without the host waiting (kernelrt/device_arrays.py, kernelrt/stream_order.py).
The pure-Python parts are tested without a GPU in tests/runtime/test_device_arrays.py.
"""

import importlib.util

import numpy as np
import pytest
from numba import cuda

from kernelrt import CUDABackend, DeviceMismatchError, KernelArgumentError
from tests.support.kernels import axpy, shifted_sqrt

N = 1 << 16
BLOCK = 256


@cuda.jit
def scale_add(out, x, a):
    """A plain numba.cuda kernel: out += a * x."""
    i = cuda.grid(1)
    if i < out.shape[0]:
        out[i] = out[i] + a * x[i]


class DLPackOnly:
    """An array that offers DLPack only, as a library without the CUDA array interface does."""

    def __init__(self, a):
        self._a = a

    def __dlpack__(self, **kwargs):
        return self._a.__dlpack__(**kwargs)

    def __dlpack_device__(self):
        return self._a.__dlpack_device__()


# Spins for `cycles` SM clocks, then fills x: work that is still queued when the host checks.
SPIN_THEN_FILL = r"""
extern "C" __global__ void spin_then_fill(double* x, int n, long long cycles, double value) {
    long long start = clock64();
    while (clock64() - start < cycles) { }
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) x[i] = value;
}
"""


def test_allocate_and_to_device_return_cupy_arrays_on_the_device(gpu):
    cp = pytest.importorskip("cupy")
    assert gpu.arrays == "cupy"
    x, y = np.arange(12.0).reshape(3, 4), np.full((3, 4), 0.5)
    a, z, a_gpu, b_gpu = gpu.allocate((3, 4), np.float64), gpu.zeros(5, np.int32), gpu.to_device(x), gpu.to_device(y)
    for arr in (a, z, a_gpu, b_gpu):
        assert isinstance(arr, cp.ndarray) and arr.device.id == gpu.device_id
    assert (a.shape, a.dtype, z.dtype) == ((3, 4), np.float64, np.int32)
    np.testing.assert_array_equal(gpu.to_host(z), np.zeros(5, np.int32))  # exact: zeros
    c_gpu = a_gpu + b_gpu  # CuPy computes with them directly
    assert isinstance(c_gpu, cp.ndarray)
    np.testing.assert_array_equal(gpu.to_host(c_gpu), x + y)  # exact: integers plus 0.5 are exact in fp64
    assert gpu.to_device(c_gpu) is c_gpu  # already on this device


def test_cupy_arrays_copy_through_pinned_staging_on_streams(gpu):
    cp = pytest.importorskip("cupy")
    x = np.random.default_rng(1).random(4_000_000)  # 32 MB: through the pinned buffer
    d = gpu.to_device(x)
    assert isinstance(d, cp.ndarray)
    np.testing.assert_array_equal(gpu.to_host(d), x)  # exact here and below: copies
    np.testing.assert_array_equal(cp.asnumpy(d), x)
    s = gpu.stream()  # a numba stream
    d2 = gpu.to_device(x * 2, stream=s)
    back2 = gpu.to_host(d2, stream=s)
    s.synchronize()
    np.testing.assert_array_equal(back2, x * 2)
    cs = cp.cuda.Stream(non_blocking=True)  # a CuPy stream, which the legacy stream does not order
    d3 = gpu.to_device(x * 3, stream=cs)
    back3 = gpu.to_host(d3, stream=cs)
    cs.synchronize()
    np.testing.assert_array_equal(back3, x * 3)
    np.testing.assert_array_equal(gpu.to_host(d[::-2]), x[::-2])  # a negative stride: copied contiguous first


def test_numba_arrays_on_request(cache_dir):
    # imported here: the CUDA simulator has no DeviceNDArray
    from numba.cuda.cudadrv.devicearray import DeviceNDArray

    b = CUDABackend(0, arrays="numba")
    assert b.arrays == "numba"
    x = np.arange(N, dtype=np.float64)
    out, xd, big = b.zeros(N, np.float64), b.to_device(x), b.to_device(np.ones(2_000_000))  # 16 MB: staged
    for arr in (b.allocate(4), out, xd, big):
        assert isinstance(arr, DeviceNDArray)
    b.launch_kernel(axpy, N // BLOCK, BLOCK, out, xd, xd, 2.0)
    np.testing.assert_array_equal(b.to_host(out), 3.0 * x)  # exact: small integers, even with FMA
    np.testing.assert_array_equal(b.to_host(big), np.ones(2_000_000))  # exact: a copy


def test_arrays_cupy_needs_cupy(cache_dir):
    if importlib.util.find_spec("cupy") is None:
        with pytest.raises(ImportError, match=r'pip install "kernelrt\[cuda12\]"'):
            CUDABackend(0, arrays="cupy")
    else:
        assert CUDABackend(0, arrays="cupy").arrays == "cupy"


def test_a_numba_cuda_jit_kernel_on_cupy_arrays(gpu):
    cp = pytest.importorskip("cupy")
    x = np.arange(N, dtype=np.float64)
    out, xd = gpu.zeros(N, np.float64), gpu.to_device(x)
    out += 1.0
    gpu.launch_kernel(scale_add, N // BLOCK, BLOCK, out, xd, 2.0)
    assert isinstance(out, cp.ndarray)
    np.testing.assert_array_equal(cp.asnumpy(out), 1.0 + 2.0 * x)  # exact: small integers, even with FMA


def test_cupy_arrays_checked_against_a_compiled_signature(gpu):
    cp = pytest.importorskip("cupy")
    ck = gpu.compile_kernel(shifted_sqrt)  # float64[::1], float64[::1]
    x = np.arange(16.0)
    out = gpu.zeros(16, np.float64)
    gpu.launch_kernel(ck, 2, 8, out, gpu.to_device(x))
    # CUDA's fp64 sqrt is correctly rounded (sqrt.rn.f64), then one addition: NumPy's value;
    # 1e-15 (about 4.5 eps) tolerates an ulp should the compiled code round otherwise
    np.testing.assert_allclose(cp.asnumpy(out), np.sqrt(x) + 10.0, rtol=1e-15)
    with pytest.raises(KernelArgumentError, match=r"must be an array of float64 \(got float32\)"):
        gpu.launch_kernel(ck, 2, 8, out, gpu.to_device(x.astype(np.float32)))


def test_launch_on_a_cupy_streams_arrays_is_ordered_on_it_and_never_waits(gpu, monkeypatch):
    """Arrays made under a non-blocking CuPy stream name it: the launch goes on that stream,
    after work already queued there, and returns while that work still runs."""
    from numba.cuda.cudadrv import driver  # here: the simulator has none

    cp = pytest.importorskip("cupy")
    spin = cp.RawKernel(SPIN_THEN_FILL, "spin_then_fill")
    views = []
    from_interface = cuda.from_cuda_array_interface

    def record_view(desc, owner=None, sync=True):
        views.append(sync)
        return from_interface(desc, owner=owner, sync=sync)

    s = cp.cuda.Stream(non_blocking=True)
    with s:
        x, out = gpu.to_device(np.zeros(N)), gpu.zeros(N, np.float64)
        gpu.launch_kernel(axpy, N // BLOCK, BLOCK, out, x, x, 1.0)  # compiles and loads: out = 0
        s.synchronize()
        host_waits = []
        synchronize = driver.Stream.synchronize
        monkeypatch.setattr(driver.Stream, "synchronize", lambda st: host_waits.append(st) or synchronize(st))
        monkeypatch.setattr(cuda, "from_cuda_array_interface", record_view)
        # 2e9 clocks: 1 s at the H100's 1.98 GHz boost, longer at lower clocks; a launch of an
        # overload already loaded takes microseconds, so the spin still runs when the host looks
        # unless the launch waited for it
        spin((N // BLOCK,), (BLOCK,), (x, np.int32(N), np.int64(2_000_000_000), np.float64(3.0)))
        gpu.launch_kernel(axpy, N // BLOCK, BLOCK, out, x, x, 1.0)  # out = x + x, after the fill
        still_running = not s.done
        s.synchronize()
    assert still_running, "the host waited for the stream during the launch"
    assert host_waits == []  # numba's synchronising paths were not taken
    assert all(sync is False for sync in views)  # views (cached from the first launch) never sync
    np.testing.assert_array_equal(gpu.to_host(out), np.full(N, 6.0))  # exact: 3 + 3


def test_cupy_stream_as_the_stream_argument(gpu):
    cp = pytest.importorskip("cupy")
    s = cp.cuda.Stream(non_blocking=True)  # not ordered with the legacy stream the arrays name
    x = np.arange(N, dtype=np.float64)
    xd, out = gpu.to_device(x), gpu.zeros(N, np.float64)
    gpu.launch_kernel(axpy, N // BLOCK, BLOCK, out, xd, xd, 1.0, stream=s)
    back = gpu.to_host(out, stream=s)
    s.synchronize()
    np.testing.assert_array_equal(back, 2.0 * x)  # exact: doubling


def test_pytorch_tensors_are_arguments_without_a_copy(gpu):
    torch = pytest.importorskip("torch")
    if not torch.cuda.is_available():
        pytest.skip("PyTorch without CUDA")
    x = torch.arange(N, dtype=torch.float64, device="cuda:0")
    out = torch.ones(N, dtype=torch.float64, device="cuda:0")
    assert gpu.is_device_array(out)
    gpu.launch_kernel(axpy, N // BLOCK, BLOCK, out, x, x, 2.0)  # written into the tensor itself
    torch.cuda.synchronize()
    expected = 3.0 * np.arange(N)
    np.testing.assert_array_equal(out.cpu().numpy(), expected)  # exact: small integers, even with FMA
    np.testing.assert_array_equal(gpu.to_host(out), expected)


def test_dlpack_only_arrays_are_arguments_without_a_copy(gpu):
    cp = pytest.importorskip("cupy")
    with cp.cuda.Device(gpu.device_id):
        x, out = cp.arange(N, dtype=cp.float64), cp.ones(N, dtype=cp.float64)
    wrapped = DLPackOnly(out)
    assert not hasattr(wrapped, "__cuda_array_interface__") and gpu.is_device_array(wrapped)
    gpu.launch_kernel(axpy, N // BLOCK, BLOCK, wrapped, DLPackOnly(x), x, 2.0)
    expected = 3.0 * np.arange(N)
    np.testing.assert_array_equal(cp.asnumpy(out), expected)  # exact; the kernel wrote into `out` itself
    np.testing.assert_array_equal(gpu.to_host(wrapped), expected)


@pytest.mark.skipif(len(CUDABackend.availability().devices) < 2, reason="needs two GPUs")
def test_foreign_arrays_from_another_device_are_refused(gpu):
    cp = pytest.importorskip("cupy")
    with cp.cuda.Device(1):
        x1 = cp.ones(8)
    out = gpu.zeros(8, np.float64)
    on_1 = "lives on device 1, but this backend is device 0"
    with pytest.raises(DeviceMismatchError, match=f"an argument array {on_1}"):
        gpu.launch_kernel(axpy, 1, 8, out, x1, x1, 1.0)
    with pytest.raises(DeviceMismatchError, match=on_1):
        gpu.launch_kernel(axpy, 1, 8, out, DLPackOnly(x1), out, 1.0)
    with pytest.raises(DeviceMismatchError, match=f"a {on_1}"):
        gpu.to_host(x1)
    with pytest.raises(DeviceMismatchError, match=f"a {on_1}"):
        gpu.to_device(x1)
    assert CUDABackend(1).allocate(4).device.id == 1
