"""Backend plumbing shared by the Laplacian drivers.

Owns: turning the ``backend=`` argument into a kernelrt backend, the host CPU backend
that builds topology tables, optional CuPy access (used only on a CUDA backend, never
imported otherwise), and launch geometry. Import touches no GPU.
"""

from __future__ import annotations

import importlib
import threading

import kernelrt

__all__ = ["resolve_backend", "host_backend", "cupy_or_none", "blocks", "BLOCK"]

BLOCK = 128  # threads per block along the row axis: 4 warps, good occupancy for fp64

_lock = threading.Lock()
_defaults: dict[str, object] = {}


def resolve_backend(backend=None):
    """A kernelrt backend from ``None`` ("auto"), a kind string, or a backend object."""
    if backend is None:
        backend = "auto"
    if isinstance(backend, str):
        if backend not in ("auto", "cpu", "cuda"):
            raise ValueError(f"backend must be a kernelrt backend or 'auto', 'cpu', 'cuda' (got {backend!r})")
        with _lock:
            if backend not in _defaults:
                _defaults[backend] = kernelrt.get_backend(backend)
            return _defaults[backend]
    if not isinstance(backend, kernelrt.Backend):
        raise TypeError(f"backend must be a kernelrt backend or a kind string (got {type(backend).__name__})")
    return backend


def host_backend(backend=None):
    """The CPU backend for host-side work: ``backend`` itself when it is a CPU one."""
    if backend is not None and getattr(backend, "name", None) == "cpu":
        return backend
    return resolve_backend("cpu")


def cupy_or_none(backend):
    """The ``cupy`` module when ``backend`` is CUDA (not simulated) and CuPy imports, else None."""
    if backend.name != "cuda" or getattr(backend, "_simulated", False):
        return None
    try:
        return importlib.import_module("cupy")
    except Exception:  # not installed, or no matching CUDA runtime
        return None


def blocks(n: int, block: int = BLOCK) -> int:
    """Number of blocks of ``block`` threads covering ``n`` items (at least 1)."""
    return max(1, -(-int(n) // block))
