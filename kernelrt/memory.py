"""Memory utilities: free/total memory, guards, pool release and batch sizing.

``vram_status`` reads NVML, so it never creates a CUDA context; the backends' own
``get_memory_info`` asks their device's context. ``vram_guard`` refuses work before it
starts when a device has too little free memory, after first releasing what the memory
pools (numba's deferred frees, CuPy's pools) hold. ``fit_batch`` turns a memory budget
into a batch size, so drivers split work instead of running out of memory.
"""

from __future__ import annotations

import contextlib
import gc
import sys

from .discovery import nvml_memory, probe
from .errors import DeviceMemoryError
from .selection import get_backend

__all__ = [
    "vram_status",
    "vram_guard",
    "release_pool",
    "fit_batch",
    "format_bytes",
]


def format_bytes(n: float) -> str:
    for unit in ("B", "KiB", "MiB", "GiB", "TiB"):
        if abs(n) < 1024 or unit == "TiB":
            return f"{n:.1f} {unit}" if unit != "B" else f"{int(n)} B"
        n /= 1024
    return f"{n:.1f} TiB"


def vram_status() -> list[dict]:
    """Free, used and total memory of every CUDA device (NVML; empty without a driver)."""
    out = []
    for dev in probe().devices:
        free, total = nvml_memory(dev.uuid)
        out.append(
            {
                "device_id": dev.id,
                "name": dev.name,
                "free_bytes": free,
                "total_bytes": total,
                "used_bytes": None if free is None else total - free,
            }
        )
    return out


def release_pool(backend=None) -> None:
    """Return cached device memory to the driver (numba's deferred frees, CuPy's pools)."""
    gc.collect()
    if backend is not None and backend.name == "cuda":
        backend.release_memory()
    if "cupy" in sys.modules:
        with contextlib.suppress(Exception):
            import cupy  # already imported by the user (checked above): this only looks it up

            cupy.get_default_memory_pool().free_all_blocks()
            cupy.get_default_pinned_memory_pool().free_all_blocks()


@contextlib.contextmanager
def vram_guard(min_free_gb: float, backend=None):
    """Refuse to enter unless ``backend``'s device has ``min_free_gb`` free; release pools on exit.

    With no backend, the default ``get_backend("auto")`` is used; on the CPU backend the
    guard checks available host RAM instead.
    """
    if not isinstance(min_free_gb, (int, float)) or min_free_gb < 0:
        raise ValueError(f"min_free_gb must be a number >= 0 (got {min_free_gb!r})")
    if backend is None:
        backend = get_backend("auto")
    need = int(min_free_gb * 2**30)
    free, _ = backend.get_memory_info()
    if free < need:
        release_pool(backend)
        free, _ = backend.get_memory_info()
    if free < need:
        raise DeviceMemoryError(
            f"vram_guard needs {format_bytes(need)} free on {backend.device_name} "
            f"but only {format_bytes(free)} is free; free memory or lower min_free_gb",
            need,
            free,
        )
    try:
        yield backend
    finally:
        release_pool(backend)


def fit_batch(
    n_items: int,
    bytes_per_item: int,
    *,
    fixed_bytes: int = 0,
    free_bytes: int,
    fraction: float = 0.7,
    what: str = "work",
) -> int:
    """Largest batch (1..n_items) whose memory fits ``fraction`` of ``free_bytes``.

    Raises DeviceMemoryError, before anything runs, when not even one item fits.
    """
    budget = int(free_bytes * fraction) - fixed_bytes
    if n_items <= 0:
        return 0
    if budget < bytes_per_item:
        raise DeviceMemoryError(
            f"{what} needs {format_bytes(fixed_bytes + bytes_per_item)} for one batch item but "
            f"only {format_bytes(free_bytes)} is free ({fraction:.0%} usable)",
            fixed_bytes + bytes_per_item,
            free_bytes,
        )
    return max(1, min(n_items, budget // max(1, bytes_per_item)))
