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
