"""CUDA-simulator layer: collected only with NUMBA_ENABLE_CUDASIM=1 (tests/conftest.py)."""

import pytest

from kernelrt import CUDABackend, discovery


@pytest.fixture
def gpu(cache_dir):
    """The simulated CUDABackend (device 0, cc 5.2 unless KERNELRT_SIMULATOR_CC is set)."""
    return CUDABackend(0)


@pytest.fixture
def gpu60(cache_dir, monkeypatch):
    """A simulated device with cc 6.0, enough for the fp64-atomic kernel."""
    monkeypatch.setenv("KERNELRT_SIMULATOR_CC", "6.0")
    discovery.probe.cache_clear()
    try:
        yield CUDABackend(0)
    finally:
        monkeypatch.delenv("KERNELRT_SIMULATOR_CC")
        discovery.probe.cache_clear()
