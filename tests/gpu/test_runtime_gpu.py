"""The runtime on a real GPU (skipped without one; run by tools/gpu_check.sh)."""

import importlib.util
import json
import os
import subprocess
import sys
import threading

import numpy as np
import pytest
from tests.support.kernels import axpy, block_sums, expected_2d, expected_3d, index_grid_2d, index_grid_3d
from numba import cuda
from tests.support.layers import ROOT, forbid_nvvm

import kernelrt
from kernelrt import CUDABackend, LaunchConfigError


def test_contract_members(gpu):
    assert gpu.name == "cuda" and gpu.is_available
    assert isinstance(gpu.compute_capability, tuple) and gpu.compute_capability >= (7, 0)
    free, total = gpu.get_memory_info()
    assert 0 < free <= total
    assert gpu.limits.max_threads_per_block >= 1024


def test_vram_status_reads_the_device_without_a_context():
    """NVML's numbers, read in a fresh process, leave device 0's primary context inactive."""
    code = (
        "import kernelrt; info = kernelrt.vram_status(0);"
        "import cuda.bindings.driver as cu; cu.cuInit(0); _, dev = cu.cuDeviceGet(0);"
        "err, _, active = cu.cuDevicePrimaryCtxGetState(dev);"
        "assert err == cu.CUresult.CUDA_SUCCESS, err;"
        "print(int(active), info.free_bytes, info.total_bytes)"
    )
    res = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT, check=False)
    assert res.returncode == 0, res.stderr
    active, free, total = map(int, res.stdout.split()[-3:])
    assert active == 0 and 0 < free <= total


def test_vram_status_guard_and_monitor_on_the_device(gpu, caplog):
    """SpectralBrain's memory API on device 0: NVML agrees with the device's context, an
    allocation shows in it and comes back after release_pool, the guard measures the GPU."""
    info = kernelrt.vram_status(0)
    assert (info.device_name, info.device_id) == (gpu.device_name, 0)
    assert 0 < info.free_gb <= info.total_gb and info.used_gb > 0
    free, total = gpu.get_memory_info()
    # NVML counts the memory the driver reserves for itself, cuMemGetInfo does not: they differ
    # by well under 5 % of the total (about 0.6 % on an H100); free also moves between the reads
    assert abs(info.total_bytes - total) <= 0.05 * total
    assert abs(info.free_bytes - free) <= 0.05 * total

    kernelrt.release_pool(gpu)
    before = kernelrt.vram_status(0).free_bytes
    block = gpu.allocate(2**30, np.uint8)
    taken = before - kernelrt.vram_status(0).free_bytes
    del block
    kernelrt.release_pool(gpu)
    back = kernelrt.vram_status(0).free_bytes - (before - taken)
    # 1 GiB, as the driver allocates it (2 MiB pages) and NVML sees it: nothing else runs on the
    # test device, so 0.9 GiB to 1.1 GiB leaves room only for page rounding and the allocator
    assert 0.9 * 2**30 <= taken <= 1.1 * 2**30
    assert back >= 0.9 * 2**30

    with kernelrt.vram_guard(min_free_gb=0.5) as backend:
        assert backend.name == "cuda" and backend.device_id == 0
    with (
        pytest.raises(kernelrt.DeviceMemoryError, match=r"vram_guard needs .* free on device 0 \(.*\) but only"),
        kernelrt.vram_guard(min_free_gb=2 * info.total_gb, error_on_low=True),
    ):
        pytest.fail("entered without the memory")

    with caplog.at_level("INFO", logger="kernelrt"):
        assert kernelrt.vram_monitor(0, label="gpu test").device_id == 0
    line = caplog.records[-1].getMessage()
    assert line.startswith(f"GPU 0 ({gpu.device_name}): ") and line.endswith(" GiB free) [gpu test]")


def test_same_kernels_as_cpu(gpu, cpu):
    rng = np.random.default_rng(0)
    x, y = rng.random(100_000), rng.random(100_000)
    out = gpu.zeros(x.size, np.float64)
    gpu.launch_kernel(axpy, (x.size + 255) // 256, 256, out, gpu.to_device(x), gpu.to_device(y), 2.5)
    cpu_out = np.zeros_like(x)
    cpu.launch_kernel(axpy, (x.size + 255) // 256, 256, cpu_out, x, y, 2.5)
    # NVVM contracts a*x + y into one FMA (one rounding instead of two): within an ulp. One ulp
    # is at most eps = 2.2e-16 relative in any binade, so rtol 2.5e-16 is one ulp
    np.testing.assert_allclose(gpu.to_host(out), cpu_out, rtol=2.5e-16, atol=0)

    x2 = rng.random((300, 70))
    o2 = gpu.zeros(x2.shape, np.float64)
    gpu.launch_kernel(index_grid_2d, (3, 38), (32, 8), o2, gpu.to_device(x2))
    # exact even with FMA: 100 j is an exact integer, so fma(100, j, x + i) rounds like x + i + 100 j
    np.testing.assert_array_equal(gpu.to_host(o2), expected_2d(x2))
    o3 = gpu.zeros((9, 10, 11), np.float64)
    gpu.launch_kernel(index_grid_3d, (2, 2, 2), (8, 8, 8), o3)
    np.testing.assert_array_equal(gpu.to_host(o3), expected_3d((9, 10, 11)))

    total = gpu.zeros(1, np.float64)
    gpu.launch_kernel(block_sums, (x.size + 63) // 64, 64, gpu.to_device(x), total)
    # 100,000 terms in [0, 1): 64-term block sums, then 1563 fp64 atomics in a run-dependent order,
    # against NumPy's pairwise sum. With positive terms the relative error is at most
    # (64 + 1563) eps = 3.6e-13 however the adds are ordered (NumPy's side ~17 eps): 1e-12 is
    # above that worst-case bound
    assert gpu.to_host(total)[0] == pytest.approx(x.sum(), rel=1e-12)


def test_limits_are_the_hardware_values():
    """What kernelrt read equals what the driver reports, attribute by attribute."""
    from numba.cuda.cudadrv.driver import driver

    lim = CUDABackend(0).limits
    dev = driver.get_device(0)
    assert lim.max_threads_per_block == dev.MAX_THREADS_PER_BLOCK
    assert lim.max_block_dim == (dev.MAX_BLOCK_DIM_X, dev.MAX_BLOCK_DIM_Y, dev.MAX_BLOCK_DIM_Z)
    assert lim.max_grid_dim == (dev.MAX_GRID_DIM_X, dev.MAX_GRID_DIM_Y, dev.MAX_GRID_DIM_Z)
    assert lim.max_shared_mem_per_block_optin == dev.MAX_SHARED_MEMORY_PER_BLOCK_OPTIN
    assert lim.max_shared_mem_per_block_optin > 48 * 1024  # every cc >= 7.0 device


def test_real_limits_refused(gpu):
    """An oversize block, block axis, grid axis and shared memory: each refused, naming the hardware value."""
    out = gpu.zeros(8, np.float64)
    x = gpu.to_device(np.ones(8))
    lim = gpu.limits
    on = r"on device 0 \(NVIDIA[^)]*\)"
    with pytest.raises(LaunchConfigError, match=f"limit max_threads_per_block {on} is {lim.max_threads_per_block}$"):
        gpu.launch_kernel(axpy, 1, lim.max_threads_per_block * 2, out, x, x, 1.0)
    z = lim.max_block_dim[2] * 2  # 128 threads: under the per-block total, over block.z
    with pytest.raises(LaunchConfigError, match=f"block.z = {z} exceeds the limit max_block_dim_z {on}, which is {lim.max_block_dim[2]}$"):
        gpu.launch_kernel(axpy, 1, (1, 1, z), out, x, x, 1.0)
    y = lim.max_grid_dim[1] + 1
    with pytest.raises(LaunchConfigError, match=f"grid.y = {y} exceeds the limit max_grid_dim_y {on}, which is {lim.max_grid_dim[1]}$"):
        gpu.launch_kernel(axpy, (1, y), 32, out, x, x, 1.0)
    smem = lim.max_shared_mem_per_block_optin + 1
    with pytest.raises(LaunchConfigError, match=f"shared memory {smem} bytes exceeds .* which is {smem - 1} bytes$"):
        gpu.launch_kernel(axpy, 1, 32, out, x, x, 1.0, shared_mem=smem)
    gpu.launch_kernel(axpy, 1, 8, out, x, x, 1.0)  # nothing was left half-launched
    np.testing.assert_array_equal(gpu.to_host(out), np.full(8, 2.0))  # exact: small integers


def test_a_device_that_is_not_there_is_refused_clearly():
    n = len(CUDABackend.availability().devices)
    with pytest.raises(kernelrt.CudaUnavailableError, match=rf"device_id must be in \[0, {n - 1}\] \(got {n}\); devices: device 0: NVIDIA"):
        CUDABackend(n)
    with pytest.raises(kernelrt.CudaUnavailableError, match=rf"\(got {n}\)"):
        kernelrt.get_backend("cuda", device_id=n)


@kernelrt.cuda_kernel
def dynamic_smem_copy(x, out):
    buf = cuda.shared.array(0, dtype=np.float64)
    i = cuda.threadIdx.x
    n = x.shape[0]
    j = i
    while j < n:
        buf[j] = x[j]
        j += cuda.blockDim.x
    cuda.syncthreads()
    j = i
    while j < n:
        out[j] = buf[n - 1 - j]
        j += cuda.blockDim.x


@pytest.mark.parametrize("size", ["96KB", "device-limit"])
def test_more_than_48k_of_dynamic_shared_memory(gpu, size):
    """Past the 48 KiB default, up to the device's opt-in limit exactly (227 KiB on an H100)."""
    n = 12_000 if size == "96KB" else gpu.limits.max_shared_mem_per_block_optin // 8
    x = np.random.default_rng(n).random(n)
    out = gpu.zeros(n, np.float64)
    gpu.launch_kernel(dynamic_smem_copy, 1, 256, gpu.to_device(x), out, shared_mem=n * 8)
    np.testing.assert_array_equal(gpu.to_host(out), x[::-1])  # exact: a copy


@pytest.mark.skipif(importlib.util.find_spec("cupy") is None, reason="needs CuPy")
def test_cupy_arrays_are_arguments_and_results(gpu):
    """CuPy arrays launch as they are (no copy), and to_host/to_device accept them."""
    import cupy

    rng = np.random.default_rng(3)
    x, y = rng.random(10_000), rng.random(10_000)
    with gpu.activated():
        xd, yd, out = cupy.asarray(x), cupy.asarray(y), cupy.full(x.size, np.nan)
    gpu.launch_kernel(axpy, (x.size + 127) // 128, 128, out, xd, yd, 0.5)
    assert gpu.to_device(out) is out  # already on this device
    np.testing.assert_allclose(gpu.to_host(out), 0.5 * x + y, rtol=2.5e-16, atol=0)  # FMA: within an ulp, as above
    np.testing.assert_array_equal(cupy.asnumpy(out), gpu.to_host(out))


def test_pinned_staging_large_copies(gpu):
    x = np.random.default_rng(1).random(4_000_000)  # 32 MB: staged through pinned memory
    d = gpu.to_device(x)
    np.testing.assert_array_equal(gpu.to_host(d), x)  # exact here and below: copies
    s = gpu.stream()
    d2 = gpu.to_device(x * 2, stream=s)
    back = gpu.to_host(d2, stream=s)
    s.synchronize()
    np.testing.assert_array_equal(back, x * 2)


def test_backend_per_device_in_threads(cache_dir):
    devices = CUDABackend.availability().devices
    ids = [d.id for d in devices] * (2 if len(devices) == 1 else 1)
    results, errors = {}, []

    def worker(slot, device_id):
        try:
            b = CUDABackend(device_id)
            x = np.full(1000, float(slot))
            out = b.zeros(1000, np.float64)
            for _ in range(20):
                b.launch_kernel(axpy, 4, 256, out, b.to_device(x), b.to_device(x), 1.0)
            b.synchronize()
            results[slot] = b.to_host(out)
        except Exception as e:
            errors.append(e)

    threads = [threading.Thread(target=worker, args=(i, d)) for i, d in enumerate(ids)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors, errors
    for slot, out in results.items():
        np.testing.assert_array_equal(out, np.full(1000, 2.0 * slot))  # exact: small integers


@pytest.mark.skipif(len(CUDABackend.availability().devices) < 2, reason="needs two GPUs")
def test_array_from_another_device_refused():
    a, b = CUDABackend(0), CUDABackend(1)
    x1 = b.to_device(np.ones(8))
    with pytest.raises(kernelrt.DeviceMismatchError, match="lives on device 1"):
        a.launch_kernel(axpy, 1, 8, a.zeros(8, np.float64), x1, x1, 1.0)


def test_second_process_loads_without_compiling(cache_dir):
    code = (
        "import json; import numpy as np, kernelrt;"
        "from tests.support.kernels import shifted_sqrt;"
        "b = kernelrt.CUDABackend(0); ck = b.compile_kernel(shifted_sqrt);"
        "out = b.zeros(8, np.float64); b.launch_kernel(ck, 1, 8, out, b.to_device(np.arange(8.0)));"
        "print(json.dumps({'status': ck.status, 'out': b.to_host(out).tolist(), 'stats': b.cache.stats.as_dict()}))"
    )
    root = ROOT
    runs = []
    for _ in range(2):
        res = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=root)
        assert res.returncode == 0, res.stderr
        runs.append(json.loads(res.stdout.strip().splitlines()[-1]))
    assert runs[0]["status"] == "compiled" and runs[1]["status"] == "disk"
    assert runs[1]["stats"]["misses"] == 0
    # NumPy's default rtol (1e-7): this checks which process compiled what, not rounding; the values
    # are in fact equal (CUDA's fp64 sqrt is correctly rounded, then one addition; JSON keeps repr)
    np.testing.assert_allclose(runs[1]["out"], np.sqrt(np.arange(8.0)) + 10.0)


def test_entry_made_without_a_gpu_is_only_linked(cache_dir, gpu, monkeypatch):
    """PTX compiled in a process that sees no GPU (as `kernelrt cache warm --cc 90` on a
    build machine) loads here without NVVM: the driver only links it."""
    cc = gpu.compute_capability
    code = (
        "import kernelrt; from tests.support.kernels import shifted_sqrt;"
        "assert not kernelrt.CUDABackend.check_available();"
        f"kernelrt.compile_ptx(shifted_sqrt, 'float64[::1], float64[::1]', cc={tuple(cc)})"
    )
    root = ROOT
    res = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=root,
                         env=dict(os.environ, CUDA_VISIBLE_DEVICES=""))
    assert res.returncode == 0, res.stderr

    forbid_nvvm(monkeypatch)
    from tests.support.kernels import shifted_sqrt

    fresh = kernelrt.kernel(shifted_sqrt.py_func)  # same source, no overload in this process yet
    ck = gpu.compile_kernel(fresh, "float64[::1], float64[::1]")
    assert ck.status == "disk"
    out = gpu.zeros(8, np.float64)
    gpu.launch_kernel(ck, 1, 8, out, gpu.to_device(np.arange(8.0)))
    # CUDA's fp64 sqrt is correctly rounded (sqrt.rn.f64), then one addition: in fact equal to
    # NumPy's; 1e-15 ≈ 4.5 eps tolerates an ulp should the linked code round otherwise
    np.testing.assert_allclose(gpu.to_host(out), np.sqrt(np.arange(8.0)) + 10.0, rtol=1e-15)
