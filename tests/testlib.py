"""Helpers shared by test modules (import from here, not from conftest: the subfolders'
conftest modules share that name, so ``from conftest import ...`` is ambiguous)."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

DATA = Path(__file__).parent / "data"
SIMULATOR = os.environ.get("NUMBA_ENABLE_CUDASIM", "") not in ("", "0")


def nvrtc_available() -> bool:
    """True when CUDA kernels can be compiled to PTX here (NVRTC present, no simulator)."""
    if SIMULATOR:
        return False
    try:
        from numba.cuda.cudadrv import nvrtc

        nvrtc.get_supported_ccs()
        return True
    except Exception:
        return False


requires_nvrtc = pytest.mark.skipif(
    not nvrtc_available(), reason="PTX compilation needs NVRTC (pip install kernelrt[test])"
)


def forbid_nvvm(monkeypatch) -> None:
    """Make any NVVM compilation fail the test: what follows may only load and link."""
    from numba.cuda.cudadrv import nvvm

    def no_nvvm(*args, **kwargs):
        raise AssertionError("NVVM was called: a cached kernel was compiled again")

    monkeypatch.setattr(nvvm, "compile_ir", no_nvvm)
