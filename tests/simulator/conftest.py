"""CUDA-simulator layer: collected only with NUMBA_ENABLE_CUDASIM=1 (tests/conftest.py)."""

import pytest

from kernelrt import CUDABackend


@pytest.fixture
def gpu(cache_dir):
    """The simulated CUDABackend (device 0, cc 5.2 unless KERNELRT_SIMULATOR_CC is set)."""
    return CUDABackend(0)
