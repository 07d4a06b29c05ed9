"""What the test layers need: paths, the simulator switch, the NVRTC marker, an NVVM guard.

Import from here (``tests.support.layers``), not from a conftest: fixtures live in
conftest modules, helpers in ``tests.support``.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]  # the repository; subprocesses run there
DATA = ROOT / "tests" / "data"
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
    not nvrtc_available(), reason="PTX compilation needs NVRTC (pip install 'kernelrt[ptx]')"
)


def forbid_nvvm(monkeypatch) -> None:
    """Make any NVVM compilation fail the test: what follows may only load and link."""
    from numba.cuda.cudadrv import nvvm

    def no_nvvm(*args, **kwargs):
        raise AssertionError("NVVM was called: a cached kernel was compiled again")

    monkeypatch.setattr(nvvm, "compile_ir", no_nvvm)
