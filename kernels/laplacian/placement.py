"""Where the Laplacian's work runs: the host backend, CuPy on a CUDA device, launch geometry.

Owns the CPU backend that builds topology tables (host-side work even when L is
assembled on a GPU), optional CuPy access (used only on a real CUDA backend, never
imported otherwise) and the block count of a launch. Import touches no GPU.
"""

from __future__ import annotations

import importlib

import kernelrt

__all__ = ["host_backend", "cupy_or_none", "blocks", "BLOCK"]

BLOCK = 128  # threads per block along the row axis: 4 warps, good occupancy for fp64


def host_backend(backend=None):
    """The CPU backend for host-side work: ``backend`` itself when it is a CPU one."""
    if backend is not None and getattr(backend, "name", None) == "cpu":
        return backend
    return kernelrt.get_backend("cpu")


def cupy_or_none(backend):
    """The ``cupy`` module when ``backend`` is CUDA (not simulated) and CuPy imports, else None."""
    if backend.name != "cuda" or backend.is_simulator:
        return None
    try:
        return importlib.import_module("cupy")
    except Exception:  # not installed, or no matching CUDA runtime
        return None


def blocks(n: int, block: int = BLOCK) -> int:
    """Number of blocks of ``block`` threads covering ``n`` items (at least 1)."""
    return max(1, -(-int(n) // block))
