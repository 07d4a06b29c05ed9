"""Choosing a backend: ``get_backend``, the one place that decides between CUDA and the CPU.

``get_backend`` takes a kind (``"auto"``, ``"cuda"``, ``"cpu"``), ``None`` (``"auto"``) or a
backend (returned as is), so library functions accept any of them through one call.
Without constructor options it returns one default backend per (kind, device, cache
directory), made on first use: the kernel library calls it on every operation, and a
backend carries its compiled-kernel tables and launch memos. ``"auto"`` tries CUDA and
falls back to the CPU only on ``CudaUnavailableError``, with one ``CPUFallbackWarning`` per
process that says why, what would enable CUDA on this platform, and how to silence it
(``KERNELRT_FALLBACK_NOTICE=0``, or a warnings filter).
"""

from __future__ import annotations

import sys
import threading
import warnings
from typing import Any

from . import config
from .backend import Backend
from .cpu_backend import CPUBackend
from .cuda_backend import CUDABackend
from .discovery import NUMBA_CUDA_ABSENT, Availability, pip_install_command
from .disk_cache import resolve_cache_dir
from .errors import CPUFallbackWarning, CudaUnavailableError

__all__ = ["get_backend", "KINDS", "fallback_reason", "fallback_notice", "notify_fallback",
           "suppress_fallback_notice"]

KINDS = ("auto", "cuda", "cpu")

_lock = threading.Lock()
_defaults: dict[tuple, Backend] = {}
_notice_lock = threading.Lock()
_notice_given = False  # once per process: a script, a notebook or a worker says it once


def get_backend(kind: str | Backend | None = "auto", device_id: int = 0, **options: Any) -> Backend:
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
        availability = CUDABackend.availability(device_id)
        reason = str(e) if availability.ok else fallback_reason(availability)  # ok: lost a race
        notify_fallback(fallback_notice(reason))
        return CPUBackend(**_without(options, _CUDA_ONLY))


_SILENCE = ('This notice is given once per process; ask for backend="cpu" to choose the CPU, or silence it '
            'with KERNELRT_FALLBACK_NOTICE=0 or warnings.filterwarnings("ignore", '
            "category=kernelrt.CPUFallbackWarning)")


def fallback_reason(availability: Availability, platform: str | None = None) -> str:
    """Why CUDA cannot be used, said once, and what would enable it on ``platform``.

    Args:
        availability: ``CUDABackend.availability()``'s answer, not ok.
        platform: a ``sys.platform`` value; None for this one. On macOS (``"darwin"``) there
            is no CUDA: the CPU backend is the intended path, and nothing is to be installed.

    Returns:
        Two sentences, without a final full stop: the reason, then the advice.
    """
    platform = sys.platform if platform is None else platform
    fix = availability.fix
    what = availability.reason.removesuffix(f"; {fix}") if fix else availability.reason
    if platform == "darwin":
        advice = "CUDA does not exist on macOS: the CPU backend is the intended path here, nothing is missing"
    elif availability.code == "no_compiler" and what.startswith(NUMBA_CUDA_ABSENT):
        advice = f"To use an NVIDIA GPU: {pip_install_command(availability.facts)}"
    elif fix:  # without a driver there may be no GPU at all; otherwise the driver saw one
        advice = f"To use {'an NVIDIA' if availability.code == 'no_driver' else 'the'} GPU, {fix}"
    else:
        return what
    return f"{what}. {advice}"


def fallback_notice(reason: str, who: str = "kernelrt is") -> str:
    """The ``CPUFallbackWarning``'s text: who runs on the CPU, why, and how to silence it.

    Args:
        reason: ``fallback_reason``'s answer (the reason and the advice).
        who: the subject, e.g. ``"2 of 2 Dask workers are"``.
    """
    return f"{who} running on the CPU backend: {reason}. {_SILENCE}"


def notify_fallback(text: str) -> bool:
    """Issue ``text`` as a ``CPUFallbackWarning``, the first time in this process only.

    Nothing is issued with ``KERNELRT_FALLBACK_NOTICE=0``, or after
    ``suppress_fallback_notice()``; a ``warnings`` filter applies as to any warning.

    Returns:
        Whether the warning was issued (it may still have been filtered out).
    """
    global _notice_given
    if not config.fallback_notice_enabled():
        return False
    with _notice_lock:
        if _notice_given:
            return False
        _notice_given = True
    warnings.warn(text, CPUFallbackWarning, stacklevel=_first_caller_outside())
    return True


def suppress_fallback_notice() -> None:
    """Issue no ``CPUFallbackWarning`` in this process (``KernelrtPlugin`` on each Dask worker:
    the client says once which backend the workers use)."""
    global _notice_given
    with _notice_lock:
        _notice_given = True


def _first_caller_outside() -> int:
    """The ``stacklevel`` of the first frame outside kernelrt (the user's line, which the
    warning then shows) as seen from ``notify_fallback``; the outermost frame if none is."""
    frame, level = sys._getframe(2), 2  # 1 is notify_fallback itself
    while frame.f_back is not None and f"{frame.f_globals.get('__name__', '')}.".startswith("kernelrt."):
        frame, level = frame.f_back, level + 1
    return level
