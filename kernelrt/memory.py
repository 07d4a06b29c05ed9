"""GPU memory: what is free, a guard around a block, releasing pools, sizing batches.

The interface is SpectralBrain's (``spectralbrain.backends.gpu``, the field's usual one):
``vram_status(device_id)`` returns a ``VRAMInfo`` in GiB, ``vram_guard(min_free_gb,
device_id, error_on_low, auto_clear)`` checks free memory before a block (releasing pools
when short) and reports the change after it, and ``vram_monitor`` logs one line. Where
kernelrt differs, it says so: ``vram_status`` reads NVML, so it creates no CUDA context
(unless NVML cannot answer), and raises ``CudaUnavailableError`` with the reason where
SpectralBrain returns zeros; ``vram_guard`` measures the backend its block will run on (host RAM on the CPU
backend) and, with ``auto_clear``, also releases the pools (numba's deferred frees,
CuPy's pools) on exit. ``fit_batch`` turns a memory budget into a batch size, so drivers
split work instead of running out of memory. Messages go to the ``kernelrt`` logger
(``kernelrt.config.logger``).
"""

from __future__ import annotations

import contextlib
import gc
import math
import numbers
import sys
from collections.abc import Iterator
from dataclasses import dataclass

from . import config
from .backend import Backend
from .discovery import classify, device_range_problem, nvml_memory, probe
from .errors import CudaUnavailableError, DeviceMemoryError
from .selection import get_backend

__all__ = [
    "VRAMInfo",
    "fit_batch",
    "format_bytes",
    "release_pool",
    "vram_guard",
    "vram_monitor",
    "vram_status",
]

GIB = 2**30  # SpectralBrain's "GB" is 1024**3 bytes too

# A change in free memory across a guarded block smaller than this is not reported:
# SpectralBrain's threshold (0.1 GB); other processes move free memory by that much.
_REPORT_GIB = 0.1


def format_bytes(n: float) -> str:
    for unit in ("B", "KiB", "MiB", "GiB", "TiB"):
        if abs(n) < 1024 or unit == "TiB":
            return f"{n:.1f} {unit}" if unit != "B" else f"{int(n)} B"
        n /= 1024
    return f"{n:.1f} TiB"


@dataclass(frozen=True)
class VRAMInfo:
    """One CUDA device's memory at one moment: SpectralBrain's ``VRAMInfo``, field for field.

    Sizes are in GiB (2**30 bytes), as SpectralBrain's, which divides by 1024**3 and calls
    them GB. ``used_gb`` is ``total_gb - free_gb``: all memory not free, whoever holds it.
    Frozen (a snapshot); ``free_bytes`` and ``total_bytes`` give the exact byte counts
    back, for ``fit_batch``.

    Attributes:
        device_name: the device's model name.
        device_id: the CUDA device index (CUDA's numbering, as in ``CUDABackend``).
        total_gb: total device memory.
        used_gb: memory in use.
        free_gb: free memory.
        percent_used: ``100 * used_gb / total_gb`` (0 when the total is 0).
    """

    device_name: str
    device_id: int
    total_gb: float
    used_gb: float
    free_gb: float
    percent_used: float

    @classmethod
    def from_bytes(cls, device_name: str, device_id: int, free: int, total: int) -> VRAMInfo:
        """The snapshot of a device with ``free`` of ``total`` bytes (as ``vram_status`` reports).

        Args:
            device_name: the device's model name.
            device_id: the CUDA device index.
            free: free bytes.
            total: total bytes.
        """
        total_gb, free_gb = total / GIB, free / GIB
        used_gb = total_gb - free_gb
        pct = 100 * used_gb / total_gb if total_gb > 0 else 0.0
        return cls(device_name, device_id, total_gb, used_gb, free_gb, pct)

    @property
    def free_bytes(self) -> int:
        """Free memory in bytes, exactly as measured (``fit_batch`` takes it)."""
        # exact: dividing a byte count below 2**53 by a power of two loses no bits
        return round(self.free_gb * GIB)

    @property
    def total_bytes(self) -> int:
        """Total memory in bytes, exactly as measured."""
        return round(self.total_gb * GIB)

    def __repr__(self) -> str:
        return (
            f"GPU {self.device_id} ({self.device_name}): {self.used_gb:.2f} / {self.total_gb:.2f} GiB "
            f"({self.percent_used:.0f}% used, {self.free_gb:.2f} GiB free)"
        )


def vram_status(device_id: int = 0) -> VRAMInfo:
    """Free, used and total memory of CUDA device ``device_id``, without a CUDA context.

    Reads NVML, matching the device by UUID (NVML and CUDA may number devices
    differently), so it creates no CUDA context. Only where NVML cannot answer
    (nvidia-ml-py missing or failing, Numba's CUDA simulator) does it ask the device's own
    context, through ``get_backend("cuda", device_id)``; in the simulator that is host
    memory. For every device: ``[vram_status(d.id) for d in kernelrt.CUDABackend.
    availability().devices]``.

    Args:
        device_id: the CUDA device index, as in ``CUDABackend(device_id)``.

    Returns:
        A ``VRAMInfo``, sizes in GiB (2**30 bytes).

    Raises:
        TypeError: ``device_id`` is not an int.
        ValueError: ``device_id`` is negative or past the last device (the message lists them).
        CudaUnavailableError: there is no CUDA device (no driver, the driver reports none,
            ...); the message says why and ``reason`` is ``kernelrt.Availability``'s code.
            SpectralBrain returns a record of zeros named "unknown" here instead: kernelrt
            does not return numbers it did not read.
    """
    device_id = _check_device_id(device_id)
    dev = _cuda_device(device_id, "vram_status")
    free, total = nvml_memory(dev.uuid)
    if free is None or total is None:
        try:
            free, total = get_backend("cuda", device_id).get_memory_info()
        except CudaUnavailableError as e:
            raise CudaUnavailableError(
                f"vram_status(device_id={device_id}) could not read NVML (nvidia-ml-py) and cannot "
                f"ask the device's context: {e}",
                e.reason,
            ) from e
    return VRAMInfo.from_bytes(dev.name, device_id, free, total)


def vram_monitor(device_id: int = 0, label: str = "") -> VRAMInfo | None:
    """Log one line of device memory at INFO on the ``kernelrt`` logger (for debugging).

    The line is SpectralBrain's: ``GPU 0 (NVIDIA H100): 3.42 / 79.19 GiB (4% used,
    75.77 GiB free) [after eigsolve]``. INFO lines are shown once logging is configured
    (``logging.basicConfig(level=logging.INFO)``, or ``KERNELRT_DEBUG=1``). Without a CUDA
    device it logs why instead of raising, so monitoring lines can stay in code that also
    runs on CPU-only machines.

    Args:
        device_id: the CUDA device index.
        label: text appended in brackets, to tell the lines apart.

    Returns:
        The ``VRAMInfo`` logged (SpectralBrain returns None), or None without a CUDA device.

    Raises:
        TypeError: ``device_id`` is not an int or ``label`` is not a str.
        ValueError: ``device_id`` is negative or past the last device.
    """
    device_id = _check_device_id(device_id)
    if not isinstance(label, str):
        raise TypeError(f"label must be a str (got {type(label).__name__}: {label!r})")
    suffix = f" [{label}]" if label else ""
    try:
        info = vram_status(device_id)
    except CudaUnavailableError as e:
        config.logger.info("vram_monitor: no device memory to report: %s%s", e, suffix)
        return None
    config.logger.info("%s%s", info, suffix)
    return info


def _check_device_id(device_id) -> int:
    if isinstance(device_id, bool) or not isinstance(device_id, numbers.Integral):
        raise TypeError(f"device_id must be an int (got {type(device_id).__name__}: {device_id!r})")
    if device_id < 0:
        raise ValueError(f"device_id must be >= 0 (got {device_id})")
    return int(device_id)


def _cuda_device(device_id: int, caller: str):
    """The DeviceInfo of ``device_id``, or the reason there is none, from ``probe()``."""
    facts = probe()
    if not facts.devices:
        avail = classify(facts, device_id)
        raise CudaUnavailableError(f"{caller}(device_id={device_id}) needs a CUDA device: {avail.reason}", avail.code)
    out_of_range = device_range_problem(facts.devices, device_id)
    if out_of_range is not None:
        raise ValueError(out_of_range)
    return facts.devices[device_id]


def release_pool(backend=None) -> None:
    """Return cached device memory to the driver (numba's deferred frees, CuPy's pools).

    SpectralBrain's ``vram_gc``/``vram_clear`` in kernelrt's terms: ``gc.collect()`` first,
    so arrays no longer referenced reach the pools, then numba's deferred frees on
    ``backend``'s device, then CuPy's default and pinned pools if CuPy is already imported.

    Args:
        backend: the backend whose device's deferred frees to run; None skips that step.
    """
    gc.collect()
    if backend is not None and backend.name == "cuda":
        backend.release_memory()
    if "cupy" in sys.modules:
        with contextlib.suppress(Exception):
            import cupy  # already imported by the user (checked above): this only looks it up

            # CuPy's pool frees the blocks of its current device: make it the backend's
            device = cupy.cuda.Device(backend.device_id) if backend is not None and backend.name == "cuda" \
                else contextlib.nullcontext()
            with device:
                cupy.get_default_memory_pool().free_all_blocks()
            cupy.get_default_pinned_memory_pool().free_all_blocks()


@contextlib.contextmanager
def vram_guard(
    min_free_gb: float = 1.0,
    device_id: int = 0,
    error_on_low: bool = False,
    auto_clear: bool = True,
    *,
    backend: str | Backend | None = None,
) -> Iterator[Backend]:
    """Check free memory before a block and report how it changed after: SpectralBrain's guard.

    Before the block: if less than ``min_free_gb`` is free and ``auto_clear`` is set, the
    pools are released (``release_pool``) and the memory measured again. If still short,
    it raises ``DeviceMemoryError`` (a ``MemoryError``) when ``error_on_low`` is set, and
    otherwise logs a warning and runs the block anyway, as SpectralBrain does. After the
    block: with ``auto_clear``, the pools are released again (also when the block raised);
    then, if the block finished and free memory moved by more than 0.1 GiB, the change is
    logged at INFO.

    The memory measured is that of the backend the block will run on:
    ``get_backend("auto", device_id)`` unless ``backend`` is given. So without a usable
    CUDA device (the CPU fallback) the guard checks available host RAM, the memory the
    block's work will use; SpectralBrain's guard sees 0 GB there and always reports low.

    Args:
        min_free_gb: the free memory needed, in GiB (2**30 bytes).
        device_id: the CUDA device index.
        error_on_low: raise instead of warning when short.
        auto_clear: release pools when short, and after the block.
        backend: kernelrt's addition: the backend to measure (a backend, or ``"auto"``,
            ``"cuda"``, ``"cpu"``); a backend object sets the device, so a nonzero
            ``device_id`` must name the same one.

    Yields:
        The backend measured (SpectralBrain yields None; ``with vram_guard():`` works alike).

    Raises:
        TypeError: an argument of the wrong type.
        ValueError: ``min_free_gb`` negative or not finite; ``device_id`` negative, past
            the last device, or not ``backend``'s device.
        DeviceMemoryError: with ``error_on_low``, too little free memory; raised before the
            block runs, with ``needed_bytes`` and ``free_bytes``.
    """
    _check_guard_args(min_free_gb, error_on_low, auto_clear)
    device_id = _check_device_id(device_id)
    backend = _guard_backend(device_id, backend)
    where = _where(backend)
    need = int(min_free_gb * GIB)
    free = backend.get_memory_info()[0]
    if free < need and auto_clear:
        config.logger.info("vram_guard: %s free on %s; releasing pools", format_bytes(free), where)
        release_pool(backend)
        free = backend.get_memory_info()[0]
    if free < need:
        msg = (
            f"vram_guard needs {format_bytes(need)} free on {where} but only {format_bytes(free)} "
            "is free; free memory or lower min_free_gb"
        )
        if error_on_low:
            raise DeviceMemoryError(msg, need, free)
        config.logger.warning("%s", msg)
    try:
        yield backend
    finally:
        if auto_clear:
            release_pool(backend)
    after = backend.get_memory_info()[0]
    if abs(after - free) > _REPORT_GIB * GIB:
        config.logger.info(
            "vram_guard: free memory on %s changed by %+.2f GiB (%.2f -> %.2f GiB free)",
            where, (after - free) / GIB, free / GIB, after / GIB,
        )


def _check_guard_args(min_free_gb, error_on_low, auto_clear) -> None:
    if isinstance(min_free_gb, bool) or not isinstance(min_free_gb, numbers.Real):
        raise TypeError(f"min_free_gb must be a number of GiB (got {type(min_free_gb).__name__}: {min_free_gb!r})")
    if not (math.isfinite(min_free_gb) and min_free_gb >= 0):
        raise ValueError(f"min_free_gb must be a finite number >= 0 (got {min_free_gb!r})")
    for name, value in (("error_on_low", error_on_low), ("auto_clear", auto_clear)):
        if not isinstance(value, bool):
            raise TypeError(f"{name} must be True or False (got {type(value).__name__}: {value!r})")


def _guard_backend(device_id: int, backend) -> Backend:
    if isinstance(backend, Backend):
        if device_id not in (0, backend.device_id):
            raise ValueError(
                f"device_id must be backend's device, {backend.device_id} ({backend.device_name}), "
                f"or left at 0 (got {device_id})"
            )
        return backend
    if backend is None or (isinstance(backend, str) and backend in ("auto", "cuda")):
        devices = probe().devices
        out_of_range = device_range_problem(devices, device_id) if devices else None
        if out_of_range is not None:  # without any device, "auto" falls back to the CPU and "cuda" says why not
            raise ValueError(out_of_range)
    return get_backend(backend, device_id)


def _where(backend) -> str:
    if backend.name == "cpu":
        return f"the CPU backend (host RAM, {backend.device_name})"
    return f"device {backend.device_id} ({backend.device_name})"


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
