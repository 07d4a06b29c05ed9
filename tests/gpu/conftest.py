"""Real-GPU layer: every test here is marked ``gpu`` and skipped without a usable device."""

import os

import pytest


def _gpu_reason():
    if os.environ.get("NUMBA_ENABLE_CUDASIM", "") not in ("", "0"):
        return "the CUDA simulator is not a GPU"
    from kernelrt import CUDABackend

    avail = CUDABackend.availability()
    return None if avail.code == "ok" else f"no usable GPU: {avail.reason}"


def pytest_collection_modifyitems(config, items):
    reason = None
    checked = False
    for item in items:
        if "tests/gpu/" not in str(item.fspath).replace(os.sep, "/"):
            continue
        item.add_marker(pytest.mark.gpu)
        if not checked:
            reason, checked = _gpu_reason(), True
        if reason:
            item.add_marker(pytest.mark.skip(reason=reason))


@pytest.fixture
def gpu(cache_dir):
    from kernelrt import CUDABackend

    return CUDABackend(0)
