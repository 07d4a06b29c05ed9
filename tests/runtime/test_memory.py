"""Memory utilities: VRAMInfo, vram_status, vram_guard, vram_monitor, release_pool, fit_batch.

This machine has no GPU, so the device side is simulated, and each test says how: the
``two_gpus`` fixture replaces ``probe()`` with two made-up devices and NVML with a table of
(free, total) by UUID, and forbids ``get_backend`` (proving no CUDA context is asked for);
guard tests script a real CPUBackend's ``get_memory_info`` and record ``release_pool``
calls. The no-GPU behaviour and the host-RAM guard run for real.
"""

import dataclasses
import logging
import os
import subprocess
import sys

import numpy as np
import pytest

import kernelrt
from kernelrt import (
    CudaUnavailableError,
    DeviceMemoryError,
    VRAMInfo,
    fit_batch,
    memory,
    vram_guard,
    vram_monitor,
    vram_status,
)
from kernelrt.discovery import CudaFacts, DeviceInfo, classify, host_memory_info, probe
from kernelrt.memory import GIB, format_bytes
from tests.support.layers import ROOT

GPU_A = DeviceInfo(0, "Fake GPU A", (9, 0), 80 * GIB, "GPU-a")
GPU_B = DeviceInfo(1, "Fake GPU B", (8, 0), 40 * GIB, "GPU-b")


def _forbidden(*args, **kwargs):
    raise AssertionError(f"called with {args} {kwargs}, but should not have been")


@pytest.fixture
def two_gpus(monkeypatch):
    """Simulated: probe() sees two devices, NVML answers by UUID, and no backend may be made."""
    nvml = {"GPU-a": (60 * GIB + 12345, 80 * GIB), "GPU-b": (1 * GIB, 40 * GIB)}
    monkeypatch.setattr(memory, "probe", lambda: CudaFacts(driver_version=(12, 4), devices=(GPU_A, GPU_B)))
    monkeypatch.setattr(memory, "nvml_memory", lambda uuid: nvml.get(uuid, (None, None)))
    monkeypatch.setattr(memory, "get_backend", _forbidden)
    return nvml


def _script_memory(monkeypatch, backend, *frees):
    """Simulated: ``backend.get_memory_info()`` answers ``frees`` in turn (then the last again)."""
    reads = []

    def info():
        reads.append(frees[min(len(reads), len(frees) - 1)])
        return reads[-1], 64 * GIB

    monkeypatch.setattr(backend, "get_memory_info", info)
    return reads


def _record_releases(monkeypatch):
    released = []
    monkeypatch.setattr(memory, "release_pool", lambda backend=None: released.append(backend))
    return released


def test_host_memory_info():
    free, total = host_memory_info()
    assert 0 < free <= total


def test_vram_info_is_spectralbrains_record():
    names = [f.name for f in dataclasses.fields(VRAMInfo)]
    assert names == ["device_name", "device_id", "total_gb", "used_gb", "free_gb", "percent_used"]
    info = VRAMInfo.from_bytes("Fake GPU A", 0, 20 * GIB + 12345, 80 * GIB)
    # exact: byte counts below 2**53 divided by 2**30 are exact floats, and so is their difference
    assert (info.free_bytes, info.total_bytes) == (20 * GIB + 12345, 80 * GIB)
    assert info.used_gb == (60 * GIB - 12345) / GIB and info.total_gb == 80.0
    # 12345 bytes of 80 GiB move the percentage by 1.4e-5 points: 1e-4 separates it from 75
    assert info.percent_used == pytest.approx(75.0, abs=1e-4) and info.percent_used < 75.0
    assert repr(info) == "GPU 0 (Fake GPU A): 60.00 / 80.00 GiB (75% used, 20.00 GiB free)"
    with pytest.raises(dataclasses.FrozenInstanceError):
        info.free_gb = 0.0
    assert VRAMInfo.from_bytes("x", 0, 0, 0).percent_used == 0.0


def test_vram_status_reads_nvml_and_makes_no_context(two_gpus):
    b = vram_status(1)
    assert (b.device_name, b.device_id) == ("Fake GPU B", 1)
    # exact: whole GiB, and 100 * 39 / 40 = 97.5 is a float
    assert (b.total_gb, b.used_gb, b.free_gb, b.percent_used) == (40.0, 39.0, 1.0, 97.5)
    a = vram_status()
    assert (a.device_id, a.free_bytes, a.total_bytes) == (0, 60 * GIB + 12345, 80 * GIB)
    assert vram_status(np.int64(1)) == b  # numpy integers are device ids too


@pytest.mark.parametrize(
    "bad,error,match",
    [
        ("0", TypeError, r"device_id must be an int \(got str: '0'\)"),
        (1.0, TypeError, r"device_id must be an int \(got float: 1.0\)"),
        (True, TypeError, r"device_id must be an int \(got bool: True\)"),
        (-1, ValueError, r"device_id must be >= 0 \(got -1\)"),
    ],
)
def test_vram_status_checks_device_id_before_probing(monkeypatch, bad, error, match):
    monkeypatch.setattr(memory, "probe", _forbidden)
    with pytest.raises(error, match=match):
        vram_status(bad)


def test_vram_status_device_past_the_last_lists_them(two_gpus):
    with pytest.raises(ValueError, match=r"device_id must be in \[0, 1\] \(got 2\); devices: device 0: Fake GPU A"):
        vram_status(2)


def test_vram_status_asks_the_context_only_without_nvml(two_gpus, monkeypatch):
    """Simulated: NVML does not answer for either device; a fake backend stands in for CUDA."""
    two_gpus.clear()
    asked = []

    class FakeCuda:
        def get_memory_info(self):
            return 5 * GIB, 40 * GIB

    monkeypatch.setattr(memory, "get_backend", lambda kind, device_id: asked.append((kind, device_id)) or FakeCuda())
    info = vram_status(1)
    assert asked == [("cuda", 1)]
    assert (info.device_name, info.free_gb, info.total_gb) == ("Fake GPU B", 5.0, 40.0)  # exact: whole GiB

    def unusable(kind, device_id):
        raise CudaUnavailableError("libNVVM (the CUDA compiler) was not found", "no_nvvm")

    monkeypatch.setattr(memory, "get_backend", unusable)
    with pytest.raises(CudaUnavailableError, match=r"vram_status\(device_id=0\) could not read NVML .*: libNVVM") as e:
        vram_status(0)
    assert e.value.reason == "no_nvvm"


@pytest.mark.parametrize(
    "facts,code,text",
    [
        (CudaFacts(driver_error="CUDA driver library cannot be found."), "no_driver", "no NVIDIA driver"),
        (CudaFacts(driver_version=(12, 4), devices=()), "no_device", "the driver reports no CUDA device"),
    ],
)
def test_vram_status_without_a_gpu_says_why(monkeypatch, facts, code, text):
    """Simulated facts for each reason; the next test asks this machine's own probe."""
    monkeypatch.setattr(memory, "probe", lambda: facts)
    with pytest.raises(CudaUnavailableError, match=rf"vram_status\(device_id=0\) needs a CUDA device: {text}") as e:
        vram_status(0)
    assert e.value.reason == code and isinstance(e.value, RuntimeError)


def test_vram_status_on_this_machine():
    facts = probe()
    if facts.devices:
        info = vram_status(0)
        assert 0 <= info.free_gb <= info.total_gb
        return
    with pytest.raises(CudaUnavailableError) as e:
        vram_status(0)
    avail = classify(facts, 0)
    assert e.value.reason == avail.code and avail.reason in str(e.value)


def test_vram_status_in_the_simulator_asks_the_backend():
    """Numba's CUDA simulator (its own process) has no NVML: the simulated device's memory is host RAM."""
    code = (
        "import kernelrt; from kernelrt.discovery import host_memory_info;"
        "i = kernelrt.vram_status(0); print(i.device_name, i.total_bytes == host_memory_info()[1])"
    )
    env = dict(os.environ, NUMBA_ENABLE_CUDASIM="1")
    res = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT, env=env, check=False)
    assert res.returncode == 0, res.stderr
    assert res.stdout.split("\n")[-2] == "Numba CUDA simulator True"


@pytest.mark.parametrize(
    "kwargs,error,match",
    [
        ({"min_free_gb": -1}, ValueError, r"min_free_gb must be a finite number >= 0 \(got -1\)"),
        ({"min_free_gb": float("nan")}, ValueError, r"min_free_gb must be a finite number >= 0 \(got nan\)"),
        ({"min_free_gb": "4"}, TypeError, r"min_free_gb must be a number of GiB \(got str: '4'\)"),
        ({"min_free_gb": True}, TypeError, r"min_free_gb must be a number of GiB \(got bool: True\)"),
        ({"error_on_low": "yes"}, TypeError, r"error_on_low must be True or False \(got str: 'yes'\)"),
        ({"auto_clear": 1}, TypeError, r"auto_clear must be True or False \(got int: 1\)"),
        ({"device_id": -1}, ValueError, r"device_id must be >= 0 \(got -1\)"),
        ({"device_id": 0.0}, TypeError, r"device_id must be an int \(got float: 0.0\)"),
        ({"backend": "gpu"}, ValueError, r"backend must be 'auto', 'cuda' or 'cpu'.* \(got 'gpu'\)"),
    ],
)
def test_vram_guard_checks_arguments_before_any_work(monkeypatch, kwargs, error, match):
    monkeypatch.setattr(memory, "probe", _forbidden)
    with pytest.raises(error, match=match), vram_guard(**kwargs):
        pytest.fail("entered with a bad argument")


def test_vram_guard_device_id_checked_against_the_devices(two_gpus, cpu):
    with (
        pytest.raises(ValueError, match=r"device_id must be in \[0, 1\] \(got 2\)"),
        vram_guard(device_id=2),
    ):
        pytest.fail("entered for a device that is not there")
    with (
        pytest.raises(ValueError, match=r"device_id must be backend's device, 0 \(.*\), or left at 0 \(got 1\)"),
        vram_guard(device_id=1, backend=cpu),
    ):
        pytest.fail("entered for another device than the backend's")


def test_vram_guard_on_the_cpu_checks_host_ram(cpu, caplog):
    """Real host memory: enough enters; too much raises with error_on_low, else warns and runs."""
    with vram_guard(min_free_gb=0.001, backend=cpu) as b:
        assert b is cpu
    too_much = cpu.get_memory_info()[0] / GIB * 4
    with (
        pytest.raises(DeviceMemoryError, match=r"vram_guard needs .* free on the CPU backend \(host RAM, .*\) but only .* is free") as info,
        vram_guard(min_free_gb=too_much, error_on_low=True, backend=cpu),
    ):
        pytest.fail("entered without the memory")
    assert info.value.needed_bytes > info.value.free_bytes
    assert isinstance(info.value, MemoryError)  # what SpectralBrain's guard raises
    ran = []
    with caplog.at_level(logging.WARNING, logger="kernelrt"), vram_guard(min_free_gb=too_much, backend=cpu):
        ran.append(True)
    assert ran == [True]
    assert any(r.levelno == logging.WARNING and "vram_guard needs" in r.getMessage() for r in caplog.records)


def test_vram_guard_releases_pools_when_short(cpu, monkeypatch, caplog):
    """Simulated memory: 0.5 GiB free, then 3 GiB once the pools are released."""
    released = _record_releases(monkeypatch)
    _script_memory(monkeypatch, cpu, GIB // 2, 3 * GIB, 3 * GIB)
    with caplog.at_level(logging.INFO, logger="kernelrt"), vram_guard(min_free_gb=2, backend=cpu):
        assert released == [cpu]  # released before the block, because it was short
    assert released == [cpu, cpu]  # and again after it
    messages = [r.getMessage() for r in caplog.records]
    assert any("512.0 MiB free on the CPU backend" in m and "releasing pools" in m for m in messages)
    assert not any(r.levelno >= logging.WARNING for r in caplog.records)


def test_vram_guard_without_auto_clear_releases_nothing(cpu, monkeypatch, caplog):
    released = _record_releases(monkeypatch)
    reads = _script_memory(monkeypatch, cpu, GIB // 2)
    with caplog.at_level(logging.WARNING, logger="kernelrt"), vram_guard(min_free_gb=2, auto_clear=False, backend=cpu):
        pass
    assert released == [] and len(reads) == 2  # measured before and after the block only
    assert [r.getMessage() for r in caplog.records] == [
        ("vram_guard needs 2.0 GiB free on the CPU backend (host RAM, "
        f"{cpu.device_name}) but only 512.0 MiB is free; free memory or lower min_free_gb")
    ]


def test_vram_guard_short_after_release_raises_before_the_block(cpu, monkeypatch):
    released = _record_releases(monkeypatch)
    _script_memory(monkeypatch, cpu, GIB // 2, 3 * GIB // 5)
    with pytest.raises(DeviceMemoryError) as info, vram_guard(min_free_gb=2, error_on_low=True, backend=cpu):
        pytest.fail("entered without the memory")
    assert released == [cpu]
    assert (info.value.needed_bytes, info.value.free_bytes) == (2 * GIB, 3 * GIB // 5)


def test_vram_guard_reports_the_change_in_free_memory(cpu, monkeypatch, caplog):
    """Simulated memory: 8 GiB free before, 5 GiB after; then a change under 0.1 GiB."""
    _record_releases(monkeypatch)
    _script_memory(monkeypatch, cpu, 8 * GIB, 5 * GIB)
    with caplog.at_level(logging.INFO, logger="kernelrt"), vram_guard(backend=cpu):
        pass
    assert [r.getMessage() for r in caplog.records] == [
        (f"vram_guard: free memory on the CPU backend (host RAM, {cpu.device_name}) "
        "changed by -3.00 GiB (8.00 -> 5.00 GiB free)")
    ]
    caplog.clear()
    _script_memory(monkeypatch, cpu, 8 * GIB, 8 * GIB - GIB // 20)
    with caplog.at_level(logging.INFO, logger="kernelrt"), vram_guard(backend=cpu):
        pass
    assert caplog.records == []


def test_vram_guard_releases_but_does_not_report_when_the_block_raises(cpu, monkeypatch, caplog):
    released = _record_releases(monkeypatch)
    reads = _script_memory(monkeypatch, cpu, 8 * GIB, 1 * GIB)
    with (
        caplog.at_level(logging.INFO, logger="kernelrt"),
        pytest.raises(RuntimeError, match="boom"),
        vram_guard(backend=cpu),
    ):
        raise RuntimeError("boom")
    assert released == [cpu] and len(reads) == 1 and caplog.records == []


def test_vram_monitor_logs_spectralbrains_line(two_gpus, caplog):
    with caplog.at_level(logging.INFO, logger="kernelrt"):
        info = vram_monitor(1, label="after eigsolve")
        vram_monitor()
    assert info == vram_status(1)
    assert [r.getMessage() for r in caplog.records] == [
        "GPU 1 (Fake GPU B): 39.00 / 40.00 GiB (98% used, 1.00 GiB free) [after eigsolve]",
        "GPU 0 (Fake GPU A): 20.00 / 80.00 GiB (25% used, 60.00 GiB free)",
    ]


def test_vram_monitor_without_a_gpu_logs_why(monkeypatch, caplog):
    """Simulated: a probe that found no driver."""
    facts = CudaFacts(driver_error="CUDA driver library cannot be found.")
    monkeypatch.setattr(memory, "probe", lambda: facts)
    with caplog.at_level(logging.INFO, logger="kernelrt"):
        assert vram_monitor(label="x") is None
    assert [r.getMessage() for r in caplog.records] == [
        ("vram_monitor: no device memory to report: vram_status(device_id=0) needs a CUDA device: "
        f"{classify(facts, 0).reason} [x]")
    ]
    assert classify(facts, 0).reason.startswith("no NVIDIA driver (libcuda) was found")


def test_vram_monitor_checks_its_arguments(monkeypatch):
    monkeypatch.setattr(memory, "probe", _forbidden)
    with pytest.raises(TypeError, match=r"label must be a str \(got int: 3\)"):
        vram_monitor(label=3)
    with pytest.raises(TypeError, match=r"device_id must be an int \(got str: 'a'\)"):
        vram_monitor("a")


def test_info_reports_each_devices_free_memory_from_nvml(monkeypatch, cache_dir):
    """Simulated: the CLI's probe sees the two fake devices and NVML answers for one."""
    from kernelrt import cli

    monkeypatch.setattr(cli, "probe", lambda: CudaFacts(driver_version=(12, 4), devices=(GPU_A, GPU_B)))
    monkeypatch.setattr(cli, "nvml_memory", lambda uuid: (7 * GIB, 80 * GIB) if uuid == "GPU-a" else (None, None))
    devices = cli.info_report()["devices"]
    assert [(d["id"], d["free_memory"]) for d in devices] == [(0, 7 * GIB), (1, None)]


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
