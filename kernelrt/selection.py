"""Choosing a backend: ``get_backend``, the one place that decides between CUDA and the CPU.

``get_backend`` takes a kind (``"auto"``, ``"cuda"``, ``"cpu"``), ``None`` (``"auto"``) or a
backend (returned as is), so library functions accept any of them through one call.
Without constructor options it returns one default backend per (kind, device, cache
directory), made on first use: the kernel library calls it on every operation, and a
backend carries its compiled-kernel tables and launch memos. ``"auto"`` tries CUDA and
falls back to the CPU only on ``CudaUnavailableError``, logging the reason once per process.
"""

from __future__ import annotations

import threading

from . import config
from .backend import Backend
from .cpu_backend import CPUBackend
from .cuda_backend import CUDABackend
from .disk_cache import resolve_cache_dir
from .errors import CudaUnavailableError

__all__ = ["get_backend", "KINDS"]

KINDS = ("auto", "cuda", "cpu")

_lock = threading.Lock()
_defaults: dict[tuple, Backend] = {}
_log_lock = threading.Lock()
_logged_reasons: set[str] = set()


def get_backend(kind: str | Backend | None = "auto", device_id: int = 0, **options) -> Backend:
    """The backend to use: ``"cuda"``, ``"cpu"``, or ``"auto"`` (CUDA if available).

    Args:
        kind: ``"auto"``, ``"cuda"``, ``"cpu"``, ``None`` (same as ``"auto"``), or a
            Backend, which is returned as is.
        device_id: the CUDA device for ``"cuda"`` and ``"auto"``.
        **options: constructor options (``enable_caching``, ``cache_dir``, ``debug``); with
            any, a new backend is made instead of the memoised default.

    Returns:
        A CUDABackend or a CPUBackend.

    Raises:
        CudaUnavailableError: ``kind="cuda"`` and CUDA cannot be used (the reason says why).
        TypeError, ValueError: ``kind`` is neither a backend nor one of ``KINDS``.
    """
    if isinstance(kind, Backend):
        if options:
            raise TypeError(f"options {sorted(options)} cannot be applied to an existing backend ({kind!r})")
        return kind
    if kind is None:
        kind = "auto"
    if not isinstance(kind, str):
        raise TypeError(
            f"backend must be 'auto', 'cuda' or 'cpu', a kernelrt backend, or None (got {type(kind).__name__})"
        )
    if kind not in KINDS:
        raise ValueError(f"backend must be 'auto', 'cuda' or 'cpu', a kernelrt backend, or None (got {kind!r})")
    if options:
        return _make(kind, device_id, options)
    # Keyed by the cache directory and debug mode too: a test or a script that points
    # KERNELRT_CACHE_DIR elsewhere, or sets KERNELRT_DEBUG_KERNELS, gets a backend that does so.
    key = (kind, device_id, resolve_cache_dir(), config.disk_cache_enabled(), config.debug_kernels())
    with _lock:
        backend = _defaults.get(key)
        if backend is None:
            backend = _defaults[key] = _make(kind, device_id, {})
        return backend


# Options of one backend only: "auto" passes each backend the ones it takes, so
# get_backend("auto", arrays="numba") or gpu_limits=False works whichever it picks.
_CUDA_ONLY, _CPU_ONLY = {"arrays"}, {"gpu_limits"}


def _without(options: dict, names: set) -> dict:
    return {k: v for k, v in options.items() if k not in names}


def _make(kind: str, device_id: int, options: dict) -> Backend:
    if kind == "cpu":
        return CPUBackend(**options)
    if kind == "cuda":
        return CUDABackend(device_id=device_id, **options)
    try:
        return CUDABackend(device_id=device_id, **_without(options, _CPU_ONLY))
    except CudaUnavailableError as e:
        with _log_lock:
            first = str(e) not in _logged_reasons
            _logged_reasons.add(str(e))
        if first:
            config.logger.warning("kernelrt: using the CPU backend: %s", e)
        return CPUBackend(**_without(options, _CUDA_ONLY))
