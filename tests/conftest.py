"""Shared fixtures and the test layers.

The suite is grouped as the code is: ``runtime/`` (kernelrt/), ``sfap/`` and
``laplacian/`` (the kernel families on the CPU backend), ``simulator/`` (CUDA under Numba's
simulator, run in its own process with NUMBA_ENABLE_CUDASIM=1) and ``gpu/`` (real GPUs,
marker ``gpu``, skipped without one); PTX compilation for sm_80/sm_90 with no device runs
wherever NVRTC is installed (marker ``ptx``). Helpers live in ``tests.support``.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from tests.support.layers import SIMULATOR


def pytest_ignore_collect(collection_path, config):
    # The simulator replaces numba.cuda process-wide, so its tests need their own process.
    if "simulator" in Path(collection_path).parts and not SIMULATOR:
        return True
    return None


@pytest.fixture
def cache_dir(tmp_path, monkeypatch):
    """A fresh, private kernel cache directory for one test (also for subprocesses)."""
    path = tmp_path / "kcache"
    monkeypatch.setenv("KERNELRT_CACHE_DIR", str(path))
    return path


@pytest.fixture
def cpu(cache_dir):
    from kernelrt import CPUBackend

    return CPUBackend()
