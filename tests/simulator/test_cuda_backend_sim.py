"""CUDABackend under Numba's CUDA simulator: the contract and the same kernels as on CPU."""

import numpy as np
import pytest
from tests.support.kernels import (
    axpy,
    block_sums,
    expected_2d,
    expected_3d,
    index_grid_2d,
    index_grid_3d,
    plain_double,
    shifted_sqrt,
)

import kernelrt
from kernelrt import (
    BackendMismatchError,
    ComputeCapabilityError,
    CUDABackend,
    CudaUnavailableError,
    KernelArgumentError,
    LaunchConfigError,
)


def test_identity_members(gpu):
    assert CUDABackend.check_available() is True
    avail = CUDABackend.availability()
    assert avail.ok and avail.code == "simulator"
    assert gpu.is_available and gpu.name == "cuda" and gpu.device_id == 0
    assert gpu.compute_capability == (5, 2)
    assert isinstance(gpu.compute_capability, tuple)
    assert "simulator" in gpu.device_name.lower()


def test_get_backend_auto_picks_cuda():
    assert kernelrt.get_backend("auto").name == "cuda"


def test_allocate_copy_roundtrip(gpu):
    a = gpu.allocate((3, 4), np.float64)
    assert a.shape == (3, 4) and gpu.is_device_array(a)
    z = gpu.zeros(5, np.int32)
    np.testing.assert_array_equal(gpu.to_host(z), np.zeros(5, np.int32))
    host = np.arange(12.0).reshape(3, 4)
    d = gpu.to_device(host)
    np.testing.assert_array_equal(gpu.to_host(d), host)  # exact here and below: copies, doublings
    assert gpu.to_device(d) is d  # already on this device


def test_pinned_staging_path(gpu, monkeypatch):
    from kernelrt import transfers

    for name, value in (("CHUNK_BYTES", 64), ("STAGED_MIN_BYTES", 64), ("PINNED_MIN_BYTES", 64)):
        monkeypatch.setattr(transfers, name, value)
    host = np.arange(100.0)
    d = gpu.to_device(host)
    np.testing.assert_array_equal(gpu.to_host(d), host)
    s = gpu.stream()
    d2 = gpu.to_device(host * 2, stream=s)
    out = gpu.to_host(d2, stream=s)
    s.synchronize()
    np.testing.assert_array_equal(out, host * 2)


def test_memory_info_stream_event_sync(gpu):
    free, total = gpu.get_memory_info()
    assert 0 < free <= total
    s = gpu.stream()
    e = gpu.event()
    e.record(s)
    e.synchronize()
    gpu.synchronize()


def test_same_kernels_as_cpu(gpu):
    n = 200
    rng = np.random.default_rng(0)
    x, y = rng.random(n), rng.random(n)
    out = gpu.zeros(n, np.float64)
    gpu.launch_kernel(axpy, 4, 64, out, gpu.to_device(x), gpu.to_device(y), 2.5)
    # exact: the simulator rounds 2.5 * x and the sum separately, as NumPy does (no FMA)
    np.testing.assert_array_equal(gpu.to_host(out), 2.5 * x + y)

    x2 = rng.random((5, 7))
    o2 = gpu.zeros((5, 7), np.float64)
    gpu.launch_kernel(index_grid_2d, (1, 2), (8, 4), o2, gpu.to_device(x2))
    np.testing.assert_array_equal(gpu.to_host(o2), expected_2d(x2))  # exact: the same ops, integer offsets

    o3 = gpu.zeros((3, 4, 5), np.float64)
    gpu.launch_kernel(index_grid_3d, (1, 1, 1), (5, 4, 3), o3)
    np.testing.assert_array_equal(gpu.to_host(o3), expected_3d((3, 4, 5)))


def test_compile_kernel_and_signature(gpu):
    ck = gpu.compile_kernel(shifted_sqrt)
    assert ck.backend == "cuda" and ck.status == "simulator"
    x = np.arange(16.0)
    out = gpu.zeros(16, np.float64)
    gpu.launch_kernel(ck, 2, 8, out, gpu.to_device(x))
    # NumPy's default rtol (1e-7): this checks the launch and the global OFFSET, not rounding; the
    # values are in fact equal (math.sqrt and np.sqrt are correctly rounded, then one addition)
    np.testing.assert_allclose(gpu.to_host(out), np.sqrt(x) + 10.0)
    with pytest.raises(KernelArgumentError, match=r"must be an array of float64 \(got float32\)"):
        gpu.launch_kernel(ck, 2, 8, out, gpu.to_device(x.astype(np.float32)))


def test_plain_numba_cuda_function_runs_as_is(gpu):
    d = gpu.to_device(np.arange(10.0))
    gpu.launch_kernel(plain_double, 1, 16, d)
    np.testing.assert_array_equal(gpu.to_host(d), np.arange(10.0) * 2)  # exact: doubling


def test_min_cc_gate(gpu):
    # block_sums uses fp64 atomics and declares min_cc (6, 0); the simulator is 5.2.
    with pytest.raises(ComputeCapabilityError, match=r"requires compute capability >= 6.0 \(got 5.2 on device 0"):
        gpu.launch_kernel(block_sums, 1, 64, gpu.to_device(np.ones(8)), gpu.zeros(1, np.float64))


def test_min_cc_met_with_simulated_cc(monkeypatch, cache_dir):
    from kernelrt import discovery

    monkeypatch.setenv("KERNELRT_SIMULATOR_CC", "9.0")
    discovery.probe.cache_clear()
    try:
        gpu = CUDABackend(0)
        assert gpu.compute_capability == (9, 0)
        x = np.arange(100.0)
        out = gpu.zeros(1, np.float64)
        gpu.launch_kernel(block_sums, 2, 64, gpu.to_device(x), out)
        assert gpu.to_host(out)[0] == x.sum()  # exact: integers < 2**53 sum exactly in any order
    finally:
        monkeypatch.delenv("KERNELRT_SIMULATOR_CC")
        discovery.probe.cache_clear()


@pytest.mark.parametrize(
    "grid,block,smem,match",
    [
        (1, 2048, 0, r"block \(2048,\) has 2048 threads; the limit max_threads_per_block on device 0 .* is 1024"),
        (1, (1, 1, 128), 0, r"block.z = 128 exceeds the limit max_block_dim_z on device 0 .*, which is 64"),
        ((1, 70000), 32, 0, r"grid.y = 70000 exceeds the limit max_grid_dim_y on device 0 .*, which is 65535"),
        (1, 32, 100_000, r"shared memory 100000 bytes exceeds the limit max_shared_mem_per_block"),
    ],
)
def test_launch_limits_refused(gpu, grid, block, smem, match):
    out = gpu.zeros(8, np.float64)
    x = gpu.to_device(np.ones(8))
    with pytest.raises(LaunchConfigError, match=match):
        gpu.launch_kernel(axpy, grid, block, out, x, x, 1.0, shared_mem=smem)
    assert not gpu.to_host(out).any()


def test_host_arrays_and_cpu_kernels_refused(gpu, cpu):
    out = gpu.zeros(8, np.float64)
    with pytest.raises(BackendMismatchError, match=r"argument 'x' of 'axpy' is a host numpy array .* \(use backend.to_device\(x\)"):
        gpu.launch_kernel(axpy, 1, 8, out, np.ones(8), gpu.to_device(np.ones(8)), 1.0)
    compiled_on_cpu = cpu.compile_kernel(shifted_sqrt)
    with pytest.raises(BackendMismatchError, match="compiled by the cpu backend"):
        gpu.launch_kernel(compiled_on_cpu, 1, 8, out, gpu.to_device(np.ones(8)))
    with pytest.raises(BackendMismatchError, match="CPUBackend kernels take numpy arrays"):
        cpu.launch_kernel(axpy, 1, 8, np.zeros(8), gpu.to_device(np.ones(8)), np.ones(8), 1.0)
    assert not gpu.to_host(out).any()


def test_device_ids_out_of_range():
    with pytest.raises(CudaUnavailableError, match=r"the simulator has one device, 0 \(got 3\)") as info:
        CUDABackend(device_id=3)
    assert info.value.reason == "device_out_of_range"
    with pytest.raises(TypeError, match="device_id must be an int"):
        CUDABackend(device_id="0")


def test_operations_enter_and_leave_the_device(gpu):
    from kernelrt.current_device import active_devices

    assert active_devices() == ()
    with gpu.activated():
        assert active_devices() == (0,)
        gpu.synchronize()
        assert active_devices() == (0,)
    assert active_devices() == ()


class _ArrayOnDevice1:
    """A CuPy-like array that says it lives on device 1."""

    __cuda_array_interface__ = {"shape": (8,), "typestr": "<f8", "data": (0, False), "version": 3}
    shape, dtype = (8,), np.dtype(np.float64)

    class device:
        id = 1


def test_argument_on_another_device_refused(gpu):
    from kernelrt import DeviceMismatchError

    out = gpu.zeros(8, np.float64)
    with pytest.raises(DeviceMismatchError, match=r"lives on device 1, but this backend is device 0"):
        gpu.launch_kernel(axpy, 1, 8, out, _ArrayOnDevice1(), _ArrayOnDevice1(), 1.0)
    with pytest.raises(DeviceMismatchError):
        gpu.to_host(_ArrayOnDevice1())


def test_backends_in_threads_keep_their_own_device_stack(gpu):
    import threading

    from kernelrt.current_device import active_devices

    seen, errors = {}, []
    x = np.arange(64.0)
    sim_lock = threading.Lock()  # the simulator itself cannot run two launches at once

    def worker(slot):
        try:
            b = CUDABackend(0)
            with b.activated():
                seen[slot] = active_devices()
                out = b.zeros(64, np.float64)
                with sim_lock:
                    b.launch_kernel(axpy, 1, 64, out, b.to_device(x), b.to_device(x), float(slot))
                assert np.array_equal(b.to_host(out), slot * x + x)  # exact: small integers
            seen[f"{slot}-after"] = active_devices()
        except Exception as e:  # pragma: no cover - reported below
            errors.append(e)

    threads = [threading.Thread(target=worker, args=(i,)) for i in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors
    assert all(seen[i] == (0,) and seen[f"{i}-after"] == () for i in range(4))
    assert active_devices() == ()


def test_cache_warm_skips_kernels_the_gpu_cannot_run(cache_dir, capsys):
    # The simulator reports cc 5.2: the atomic Laplacian kernel needs fp64 atomics (cc 6.0),
    # which no driver launches there; warming says so instead of failing.
    from kernelrt.cli import main

    assert main(["cache", "warm"]) == 0
    out = capsys.readouterr().out
    assert "face_values_atomic [cuda (5, 2)]" in out and "unsupported" in out
    assert "not supported by this GPU" in out.splitlines()[-1]
