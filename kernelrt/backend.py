"""The Backend contract, shared by CUDABackend and CPUBackend.

Every backend has the same members (docs/architecture.md, "The Backend contract"), so code written against a backend runs unchanged on a GPU or on
the CPU cores. Choosing one is ``selection.get_backend``'s job.
"""

from __future__ import annotations

import abc
import contextlib
from dataclasses import dataclass

import numpy as np

from .arguments import check_dtype, check_shape
from .errors import BackendMismatchError, DeviceMismatchError
from .kernel_def import Kernel

__all__ = ["Backend", "CompiledKernel"]


@dataclass(frozen=True)
class CompiledKernel:
    """A kernel prepared by one backend (``compile_kernel``'s result).

    ``status`` says where its code came from: ``"compiled"``, ``"disk"`` (the disk
    cache), ``"memory"`` (already in this process), ``"lazy"`` (no signature yet: it is
    compiled, through the cache, at the first launch) or ``"simulator"``.
    """

    kernel: Kernel
    backend: str
    device_id: int
    argtypes: tuple | None
    status: str

    @property
    def name(self) -> str:
        return self.kernel.name


class Backend(abc.ABC):
    """Abstract contract; see CUDABackend and CPUBackend."""

    name: str = "?"

    # -- identity ------------------------------------------------------------------------

    @classmethod
    @abc.abstractmethod
    def availability(cls, device_id: int = 0):
        """Whether this backend can run here, and why not (an ``Availability``)."""

    @classmethod
    def check_available(cls, device_id: int = 0) -> bool:
        return bool(cls.availability(device_id))

    @property
    def is_available(self) -> bool:
        return bool(self.availability(self.device_id))

    @property
    def is_simulator(self) -> bool:
        """True for a CUDA backend running in Numba's CUDA simulator (host memory, no CuPy)."""
        return False

    def activated(self):
        """Context manager making this backend's device current on the calling thread.

        Code that calls a foreign GPU library (CuPy) inside it runs on this backend's
        device; on the CPU it does nothing.
        """
        return contextlib.nullcontext(self)

    device_id: int
    device_name: str
    compute_capability: tuple[int, int] | None

    # -- memory --------------------------------------------------------------------------

    @abc.abstractmethod
    def allocate(self, shape, dtype=np.float32):
        """An uninitialised array of ``shape`` and ``dtype`` on this backend's device."""

    @abc.abstractmethod
    def zeros(self, shape, dtype=np.float32):
        """A zero-filled array on this backend's device."""

    @abc.abstractmethod
    def to_device(self, a, stream=None):
        """Copy host array ``a`` to this device (a C-contiguous copy)."""

    @abc.abstractmethod
    def to_host(self, a, stream=None):
        """Copy array ``a`` back to a host numpy array."""

    @abc.abstractmethod
    def synchronize(self) -> None:
        """Wait until all work queued on this device has finished."""

    @abc.abstractmethod
    def get_memory_info(self) -> tuple[int, int]:
        """(free_bytes, total_bytes) of this backend's device."""

    @abc.abstractmethod
    def stream(self):
        """A new stream (work queue) on this device."""

    @abc.abstractmethod
    def event(self, timing: bool = True):
        """A new event on this device, for ordering and timing."""

    # -- kernels ---------------------------------------------------------------------------

    def compile_kernel(self, func, signature=None) -> CompiledKernel:
        """Compile ``func`` for this device through the disk cache.

        With a ``signature`` (or one the kernel declares) the code is compiled or loaded
        now; without one, at the first launch, for the argument types it gets.
        """
        kernel = self._kernel_of(func)
        self._prepare(kernel)
        argtypes = kernel.parse_signature(signature) if signature is not None else kernel.signature
        if argtypes is None:
            return CompiledKernel(kernel, self.name, self.device_id, None, "lazy")
        return CompiledKernel(kernel, self.name, self.device_id, argtypes, self._ensure(kernel, argtypes))

    @abc.abstractmethod
    def _prepare(self, kernel: Kernel):
        """Check ``kernel`` runs here; return its dispatcher, with the miss hook installed."""

    @abc.abstractmethod
    def _ensure(self, kernel: Kernel, argtypes: tuple) -> str:
        """Load or compile ``kernel`` for ``argtypes`` through the cache; returns the status."""

    @abc.abstractmethod
    def launch_kernel(self, kernel, grid, block, *args, stream=None, shared_mem=0) -> None:
        """Run ``kernel`` over ``grid`` x ``block`` threads with ``args``."""

    def is_device_array(self, a) -> bool:
        """True when ``a`` is an array this backend's kernels take."""
        return isinstance(a, np.ndarray)

    # -- shared helpers ---------------------------------------------------------------------

    @staticmethod
    def _shape_dtype(shape, dtype):
        return check_shape(shape), check_dtype(dtype)

    def _kernel_of(self, kernel) -> Kernel:
        """The Kernel behind ``kernel`` (a Kernel, or a CompiledKernel of this backend)."""
        if type(kernel) is Kernel:
            return kernel
        if isinstance(kernel, CompiledKernel):
            if kernel.backend != self.name:
                raise BackendMismatchError(
                    f"kernel {kernel.name!r} was compiled by the {kernel.backend} backend; "
                    f"compile it with this {self.name} backend (backend.compile_kernel)"
                )
            if kernel.device_id != self.device_id:
                raise DeviceMismatchError(
                    f"kernel {kernel.name!r} was compiled for device {kernel.device_id}, not this "
                    f"backend's device {self.device_id}; compile it with this backend"
                )
            return kernel.kernel
        return self._adopt(kernel)

    def _adopt(self, func) -> Kernel:
        raise BackendMismatchError(
            f"{self.name} backend launches kernelrt kernels (@kernelrt.kernel or "
            f"@kernelrt.cuda_kernel) (got {type(func).__name__} {getattr(func, '__name__', '')!r})"
        )

    def __repr__(self):
        return f"<{type(self).__name__} device {self.device_id}: {self.device_name}>"
