"""The Backend contract, shared by CUDABackend and CPUBackend.

Every backend has the same members (docs/architecture.md, "The Backend contract"), so code written against a backend runs unchanged on a GPU or on
the CPU cores. Choosing one is ``selection.get_backend``'s job.
"""

from __future__ import annotations

import abc
import contextlib
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

import numpy as np
from numpy.typing import DTypeLike

from .arguments import check_dtype, check_shape
from .discovery import Availability
from .errors import BackendMismatchError, DeviceMismatchError, LaunchConfigError
from .kernel_def import Kernel, adopt
from .prepared import LaunchSequence, PreparedLaunch

__all__ = ["Backend", "CompiledKernel", "BoundLaunch", "PreparedLaunch", "LaunchSequence"]


@dataclass(frozen=True, eq=False)
class CompiledKernel:
    """A kernel prepared by one backend (``compile_kernel``'s result).

    ``status`` says where its code came from: ``"compiled"``, ``"disk"`` (the disk
    cache), ``"memory"`` (already in this process), ``"lazy"`` (no signature yet: it is
    compiled, through the cache, at the first launch) or ``"simulator"``.

    It launches numba-style too: ``k[grid, block](*args)`` and
    ``k[grid, block, stream, shared_mem](*args)`` are ``launch_kernel`` on the backend
    that compiled it, with the same checks. (Compared and hashed by identity: backends
    memoise launches per compiled kernel.)
    """

    kernel: Kernel
    backend: str
    device_id: int
    argtypes: tuple | None
    status: str
    owner: "Backend | None" = field(default=None, repr=False)
    _bound: dict = field(default_factory=dict, repr=False)  # launch configuration -> BoundLaunch

    @property
    def name(self) -> str:
        """The kernel's name (its Python function's)."""
        return self.kernel.name

    def __getitem__(self, config) -> "BoundLaunch":
        try:
            return self._bound[config]
        except (KeyError, TypeError):  # a new configuration, or an unhashable one (lists)
            pass
        if self.owner is None:
            raise TypeError(f"kernel {self.name!r} has no backend to launch on; use backend.compile_kernel")
        if not isinstance(config, tuple) or not 2 <= len(config) <= 4:
            raise LaunchConfigError(
                f"launch {self.name!r} as kernel[grid, block] or kernel[grid, block, stream, shared_mem] "
                f"(got kernel[{config!r}])"
            )
        grid, block, stream, shared_mem = (*config, 0, 0)[:4]
        bound = BoundLaunch(self, grid, block, stream or None, shared_mem)
        with contextlib.suppress(TypeError):
            if len(self._bound) < 256:  # a kernel launched over many sizes keeps the first few
                self._bound[config] = bound
        return bound


class BoundLaunch:
    """``compiled[grid, block, stream, shared_mem]``: call it with the kernel's arguments."""

    __slots__ = ("kernel", "grid", "block", "stream", "shared_mem", "_launch")

    def __init__(self, kernel: CompiledKernel, grid, block, stream=None, shared_mem=0):
        self.kernel, self.grid, self.block = kernel, grid, block
        self.stream, self.shared_mem = stream, shared_mem
        self._launch = kernel.owner.launch_kernel

    def __call__(self, *args) -> None:
        self._launch(self.kernel, self.grid, self.block, *args, stream=self.stream, shared_mem=self.shared_mem)

    def __repr__(self):
        return f"<launch of {self.kernel.name!r} on grid {self.grid!r}, block {self.block!r}>"


class Backend(abc.ABC):
    """Abstract contract; see CUDABackend and CPUBackend."""

    name: str = "?"

    # -- identity ------------------------------------------------------------------------

    @classmethod
    @abc.abstractmethod
    def availability(cls, device_id: int = 0) -> Availability:
        """Whether this backend can run on device ``device_id`` here, and if not, why.

        Never raises and creates no CUDA context, so it is safe to call anywhere.

        Args:
            device_id: the device to ask about (the CPU backend has one, 0).

        Returns:
            An ``Availability``: truthy when usable; ``code`` is machine-readable and
            ``reason`` a sentence that ends with what to install or change.
        """

    @classmethod
    def check_available(cls, device_id: int = 0) -> bool:
        """Whether this backend can run on device ``device_id`` here: ``bool(availability())``.

        ``availability(device_id)`` says why not. Example::

            backend = kernelrt.CUDABackend() if kernelrt.CUDABackend.check_available() else kernelrt.CPUBackend()

        Args:
            device_id: the device to ask about.

        Returns:
            True when a backend for that device can be made.
        """
        return bool(cls.availability(device_id))

    @property
    def is_available(self) -> bool:
        """Whether this backend's device is still usable (``check_available`` for its device)."""
        return bool(self.availability(self.device_id))

    @property
    def is_simulator(self) -> bool:
        """True for a CUDA backend running in Numba's CUDA simulator (host memory, no CuPy)."""
        return False

    def activated(self) -> contextlib.AbstractContextManager[Any]:
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
    def allocate(self, shape: int | tuple[int, ...], dtype: DTypeLike = np.float32) -> Any:
        """An uninitialised array of ``shape`` and ``dtype`` on this backend's device.

        Args:
            shape: an int or a tuple of ints >= 0.
            dtype: a NumPy dtype or scalar type (default float32).

        Returns:
            A NumPy array on the CPU; a CuPy (or numba) device array on CUDA.

        Raises:
            TypeError, ValueError: a malformed ``shape`` or ``dtype``.
        """

    @abc.abstractmethod
    def zeros(self, shape: int | tuple[int, ...], dtype: DTypeLike = np.float32) -> Any:
        """A zero-filled array of ``shape`` and ``dtype`` on this backend's device.

        Args:
            shape: an int or a tuple of ints >= 0.
            dtype: a NumPy dtype or scalar type (default float32).

        Returns:
            A NumPy array on the CPU; a CuPy (or numba) device array on CUDA.
        """

    @abc.abstractmethod
    def to_device(self, a: Any, stream: Any = None) -> Any:
        """Copy host array ``a`` to this device (a C-contiguous copy).

        Args:
            a: a NumPy array or anything ``numpy.asarray`` takes.
            stream: None: the copy is complete on return; a stream: queued on it.

        Returns:
            The copy: a NumPy array on the CPU, a device array on CUDA.
        """

    @abc.abstractmethod
    def to_host(self, a: Any, stream: Any = None, out: np.ndarray | None = None) -> np.ndarray:
        """Copy array ``a`` back to a host numpy array.

        Args:
            a: an array of this backend.
            stream: None: the copy is complete on return; a stream: queued on it, valid once
                it is synchronised.
            out: a C-contiguous, writeable numpy array of ``a``'s shape and dtype to copy into
                (checked before any work); None: a new array.

        Returns:
            ``out``, or a new array.
        """

    @abc.abstractmethod
    def synchronize(self) -> None:
        """Wait until all work queued on this device has finished."""

    @abc.abstractmethod
    def get_memory_info(self) -> tuple[int, int]:
        """(free_bytes, total_bytes) of this backend's device."""

    @abc.abstractmethod
    def stream(self) -> Any:
        """A new stream (work queue) on this device."""

    @abc.abstractmethod
    def event(self, timing: bool = True) -> Any:
        """A new event on this device, for ordering and timing."""

    # -- kernels ---------------------------------------------------------------------------

    def compile_kernel(self, func: Any, signature: Any = None) -> CompiledKernel:
        """Compile ``func`` for this device through the disk cache.

        With a ``signature`` (or one the kernel declares) the code is compiled or loaded
        now; without one, at the first launch, for the argument types it gets.

        Args:
            func: a ``@kernelrt.kernel`` or ``@kernelrt.cuda_kernel``, a ``numba.cuda.jit``
                function, or a plain numba.cuda-style Python function.
            signature: the argument types, in one of these forms:

                * a string: ``"float32[::1], float32[::1], int64"`` or
                  ``"void(float32[::1], float32[::1], int64)"``;
                * a tuple or list with one entry per argument, each a numba type
                  (``numba.float32[::1]``), a NumPy scalar type (``np.float32``) or dtype
                  (``np.dtype("float32")``), a Python ``int``, ``float``, ``complex`` or
                  ``bool``, or a type string (``"float32[::1]"``).

                NumPy scalar types and dtypes denote scalars: an array argument needs a
                numba array type or a string. None: compile at the first launch.

        Returns:
            A ``CompiledKernel`` for ``launch_kernel``; its ``status`` says where the code
            came from (compiled, the disk cache, memory, or "lazy": at the first launch).

        Raises:
            TypeError: the signature cannot be parsed, or its length differs from the
                kernel's parameters.
        """
        kernel = self._kernel_of(func)
        self._prepare(kernel)
        argtypes = kernel.parse_signature(signature) if signature is not None else kernel.signature
        if argtypes is None:
            return CompiledKernel(kernel, self.name, self.device_id, None, "lazy", self)
        return CompiledKernel(kernel, self.name, self.device_id, argtypes, self._ensure(kernel, argtypes), self)

    @abc.abstractmethod
    def _prepare(self, kernel: Kernel):
        """Check ``kernel`` runs here; return its dispatcher, with the miss hook installed."""

    @abc.abstractmethod
    def _ensure(self, kernel: Kernel, argtypes: tuple) -> str:
        """Load or compile ``kernel`` for ``argtypes`` through the cache; returns the status."""

    @abc.abstractmethod
    def launch_kernel(self, kernel: Any, grid: Any, block: Any, *args: Any, stream: Any = None,
                      shared_mem: int = 0) -> None:
        """Run ``kernel`` over ``grid`` x ``block`` threads with ``args``.

        Compiles (or loads from the disk cache) on the first launch of each argument-type
        combination. On the CPU the launch has finished on return; on a GPU it is queued on
        ``stream`` (None: the stream the arguments' arrays were made on), so read results
        with ``to_host`` or after ``synchronize()``.

        Args:
            kernel: a ``@kernelrt.kernel`` or ``@kernelrt.cuda_kernel``, a ``CompiledKernel``
                of this backend, a ``numba.cuda.jit`` function or a plain numba.cuda-style one.
            grid: blocks per axis: an int, or a tuple of 1 to 3 ints >= 1.
            block: threads per block per axis, as ``grid``; the index space is grid * block
                per axis, so kernels guard their index.
            *args: the kernel's arguments: this backend's arrays (``to_device``, ``zeros``,
                CuPy or DLPack arrays on CUDA) and scalars.
            stream: a stream of this backend (``stream()``; CuPy's too on CUDA), or None.
            shared_mem: dynamic shared memory per block in bytes (``cuda_kernel`` only).

        Raises:
            LaunchConfigError: ``grid``, ``block`` or ``shared_mem`` malformed or over the
                device's limits (the CPU checks the limits every supported GPU has).
            KernelArgumentError: the arguments do not match the kernel (count, or a type
                other than its ``signature``); the message names the argument.
            BackendMismatchError: a kernel or an array of another backend (a host array on
                CUDA, a device array on the CPU), or a CUDA kernel the CPU cannot run.
            DeviceMismatchError: an array on another GPU.
            ComputeCapabilityError: the device is older than the kernel's ``min_cc``.
        """

    @abc.abstractmethod
    def prepare(self, kernel: Any, grid: Any, block: Any, *args: Any, stream: Any = None,
                shared_mem: int = 0) -> PreparedLaunch:
        """A launch of ``kernel`` resolved once, for loops: ``p()`` launches, ``p(*args)`` re-binds.

        Does ``launch_kernel``'s checks (configuration, arguments, device), and resolves the
        compiled overload, the views of foreign arrays and the stream plan, once. ``p(*args)``
        takes arguments of the same kinds (array type, dtype, ndim, layout; scalar types),
        for buffer rotation and per-step scalars. Results equal ``launch_kernel``'s.

        Args:
            kernel: as for ``launch_kernel``.
            grid: as for ``launch_kernel``.
            block: as for ``launch_kernel``.
            *args: the kernel's arguments, as for ``launch_kernel``.
            stream: as for ``launch_kernel`` (None: the launch follows its arrays' streams).
            shared_mem: dynamic shared memory in bytes, as for ``launch_kernel``.

        Returns:
            A ``PreparedLaunch``.

        Raises:
            LaunchConfigError, KernelArgumentError, BackendMismatchError, DeviceMismatchError:
                as ``launch_kernel`` would (re-binds: ``KernelArgumentError`` for another kind).
        """

    def sequence(self, launches: Iterable[PreparedLaunch], graph: bool = True) -> LaunchSequence:
        """Prepared launches to run in order, ``run(repeats)`` times (a step loop).

        On the CPU a plain loop; CUDABackend replays the sequence as a CUDA graph where it can
        (``graph=False``: never), falling back to the loop. Results equal the launches run one
        by one.

        Args:
            launches: ``PreparedLaunch`` objects of this backend, in order.
            graph: allow a CUDA graph (ignored on the CPU).
        """
        return LaunchSequence(launches)

    def is_device_array(self, a: object) -> bool:
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
        adopted = adopt(kernel)  # a plain numba.cuda-style function or cuda.jit dispatcher
        if adopted is None:
            raise BackendMismatchError(
                f"{self.name} backend launches kernels: @kernelrt.kernel, @kernelrt.cuda_kernel, "
                f"@numba.cuda.jit or plain Python functions "
                f"(got {type(kernel).__name__} {getattr(kernel, '__name__', '')!r})"
            )
        return adopted

    def __repr__(self):
        return f"<{type(self).__name__} device {self.device_id}: {self.device_name}>"
