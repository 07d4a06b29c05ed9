"""Every exception kernelrt raises on purpose, and the one warning it issues itself.

The types are few and subclass built-ins, so callers can catch ``ValueError`` or
``TypeError`` for bad arguments without importing kernelrt. Messages are lowercase,
name the argument, say what was expected and show what was given ``(got ...)``.
All of them pickle (they cross process boundaries in the cache tests and in
multiprocessing user code), which is why each keeps its constructor arguments.
"""

from __future__ import annotations

__all__ = [
    "KernelrtError",
    "CudaUnavailableError",
    "LaunchConfigError",
    "ComputeCapabilityError",
    "DeviceMismatchError",
    "BackendMismatchError",
    "KernelArgumentError",
    "DeviceMemoryError",
    "CpuTranslationError",
    "CPUFallbackWarning",
]


class KernelrtError(Exception):
    """Base class; never raised directly."""

    def __reduce__(self):
        return (type(self), self.args)


class CudaUnavailableError(KernelrtError, RuntimeError, ImportError):
    """CUDA cannot be used here: the one error ``get_backend("auto")`` falls back on.

    A ``RuntimeError``, as the documented ``CUDABackend`` contract says ("Raises:
    RuntimeError: If CUDA is not available"), and an ``ImportError`` like numba-cuda's
    ``CudaSupportError``, so either kind of guard catches it. ``reason`` is the
    machine-readable code of ``kernelrt.Availability``.
    """

    def __init__(self, message: str, reason: str = "unknown"):
        super().__init__(message, reason)
        self.reason = reason

    def __str__(self):
        return self.args[0]


class LaunchConfigError(KernelrtError, ValueError):
    """A grid, block or shared-memory request that is malformed or over a device limit."""


class ComputeCapabilityError(KernelrtError, RuntimeError):
    """A device is older than the toolchain or a kernel requires."""


class DeviceMismatchError(KernelrtError, ValueError):
    """An argument array lives on a different device than the backend launching it."""


class BackendMismatchError(KernelrtError, TypeError):
    """A kernel or array made for one backend was given to another."""


class CpuTranslationError(BackendMismatchError):
    """A CUDA kernel uses something the CPU backend cannot run (shared memory, barriers,
    warp intrinsics...) and has no CPU twin; raised before anything compiles."""


class KernelArgumentError(KernelrtError, TypeError):
    """A kernel argument does not match the kernel's declared signature."""


class DeviceMemoryError(KernelrtError, MemoryError):
    """Work that cannot fit in the free device memory, refused before launch."""

    def __init__(self, message: str, needed_bytes: int = 0, free_bytes: int = 0):
        super().__init__(message, needed_bytes, free_bytes)
        self.needed_bytes = needed_bytes
        self.free_bytes = free_bytes

    def __str__(self):
        return self.args[0]


class CPUFallbackWarning(UserWarning):
    """``get_backend("auto")`` found no usable CUDA GPU and chose the CPU backend.

    Issued once per process, with the reason and what would enable CUDA on this platform
    (on macOS, where CUDA does not exist, the CPU backend is the intended path). Silence it
    with ``KERNELRT_FALLBACK_NOTICE=0`` in the environment, or in code::

        import warnings
        import kernelrt

        warnings.filterwarnings("ignore", category=kernelrt.CPUFallbackWarning)

    ``KernelrtPlugin`` silences it on Dask workers (``kernelrt.distributed.worker_info``
    reports each worker's backend).
    """
