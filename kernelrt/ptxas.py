"""ptxas, NVIDIA's PTX assembler, run with no GPU: offline cubins for the disk cache.

Owns finding ``ptxas`` (the ``nvidia-cuda-nvcc-cu12`` wheel that numba-cuda's cu12 extra
installs, else PATH) and assembling one kernel's PTX for its target. Why: an entry that
``kernelrt cache warm --cc 90`` makes on a machine with no GPU holds PTX only, so the driver
JIT-compiles it at the first launch (about 9 ms per kernel on an H100). With a cubin made here
the device loads machine code instead. A cubin is only an optimisation: the PTX stays in the
entry, and a cubin the driver refuses is dropped and the PTX linked (compiler.py).
"""

from __future__ import annotations

import functools
import importlib.util
import os
import re
import shutil
import subprocess
import tempfile
from pathlib import Path

__all__ = ["find_ptxas", "ptxas_version", "assemble"]


@functools.cache
def find_ptxas() -> str | None:
    """The path of ptxas, or None: the nvidia-cuda-nvcc wheel's copy first, then PATH."""
    try:
        spec = importlib.util.find_spec("nvidia.cuda_nvcc")
    except (ImportError, ValueError):
        spec = None
    for root in (spec.submodule_search_locations or []) if spec else []:
        candidate = Path(root) / "bin" / "ptxas"
        if candidate.is_file() and os.access(candidate, os.X_OK):
            return str(candidate)
    return shutil.which("ptxas")


@functools.cache
def ptxas_version() -> str | None:
    """ptxas' release line (``Cuda compilation tools, release 12.9, V12.9.86``), or None."""
    path = find_ptxas()
    if path is None:
        return None
    out = subprocess.run([path, "--version"], capture_output=True, text=True, check=False).stdout
    lines = [line for line in out.splitlines() if "release" in line]
    return lines[-1].strip() if lines else None


def assemble(ptx: str, relocatable: bool = False) -> tuple[bytes, str]:
    """Assemble ``ptx`` for the target it names (``.target sm_90a``); returns (cubin, ptxas' log).

    ``relocatable``: ``ptxas -c``, an object that still needs linking, for PTX that calls
    externals such as the cooperative-groups runtime (``cudaCGSynchronize``, in cudadevrt).

    Raises:
        RuntimeError: ptxas is missing, the PTX names no target, or ptxas refused it.
    """
    path = find_ptxas()
    if path is None:
        raise RuntimeError("ptxas not found (pip install nvidia-cuda-nvcc-cu12)")
    target = re.search(r"^\.target\s+(sm_\w+)", ptx, re.M)
    if target is None:
        raise RuntimeError("the PTX names no .target")
    with tempfile.TemporaryDirectory(prefix="kernelrt-ptxas-") as tmp:
        src, out = Path(tmp) / "kernel.ptx", Path(tmp) / "kernel.cubin"
        src.write_text(ptx)
        run = subprocess.run([path, f"-arch={target.group(1)}", "-v", *(["-c"] if relocatable else []), "-o", str(out),
                              str(src)],
                             capture_output=True, text=True, check=False)
        if run.returncode:
            raise RuntimeError(f"ptxas refused the PTX for {target.group(1)}: {run.stderr.strip()[-1000:]}")
        return out.read_bytes(), run.stderr
