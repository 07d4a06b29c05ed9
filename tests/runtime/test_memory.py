"""Memory utilities: vram_status, vram_guard, release_pool, fit_batch, host memory."""

import pytest

import kernelrt
from kernelrt import DeviceMemoryError, fit_batch, vram_guard
from kernelrt.discovery import host_memory_info
from kernelrt.memory import format_bytes


def test_host_memory_info():
    free, total = host_memory_info()
    assert 0 < free <= total


def test_vram_status_lists_every_device():
    status = kernelrt.vram_status()
    assert len(status) == len(kernelrt.CUDABackend.availability().devices)
    for row in status:
        assert set(row) >= {"device_id", "name", "free_bytes", "total_bytes", "used_bytes"}


def test_vram_guard_enters_and_refuses(cpu):
    with vram_guard(min_free_gb=0.001, backend=cpu) as b:
        assert b is cpu
    free, _ = cpu.get_memory_info()
    too_much = free / 2**30 * 4
    with pytest.raises(DeviceMemoryError, match=r"vram_guard needs .* free on .* but only .* is free") as info:
        with vram_guard(min_free_gb=too_much, backend=cpu):
            pytest.fail("entered without the memory")
    assert info.value.needed_bytes > info.value.free_bytes
    with pytest.raises(ValueError, match=r"min_free_gb must be a number >= 0 \(got -1\)"):
        with vram_guard(min_free_gb=-1, backend=cpu):
            pass


def test_release_pool_runs_without_cupy_or_gpu(cpu):
    kernelrt.release_pool(cpu)
    kernelrt.release_pool()


def test_fit_batch():
    assert fit_batch(100, 10, free_bytes=1000, fraction=1.0) == 100
    assert fit_batch(100, 10, free_bytes=1000, fraction=0.5) == 50
    assert fit_batch(100, 10, fixed_bytes=200, free_bytes=1000, fraction=1.0) == 80
    assert fit_batch(0, 10, free_bytes=1000) == 0
    with pytest.raises(DeviceMemoryError, match=r"sfap needs 1.0 KiB for one batch item but only 100 B is free"):
        fit_batch(5, 1024, free_bytes=100, what="sfap")


def test_format_bytes():
    assert format_bytes(512) == "512 B"
    assert format_bytes(3 * 2**30) == "3.0 GiB"
