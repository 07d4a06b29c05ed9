"""CPUBackend: the Backend contract on the host's cores, with numpy arrays.

A ``@kernel`` runs as an ``njit(parallel=True)`` loop over the same index space
(grid * block per axis) that the CUDA backend launches, so both give the same result; a
``@cuda_kernel`` runs through its registered CPU twin. Launches go straight to numba's
C dispatcher; only a launch with new argument types (or one numba refuses) takes the
slow path, which checks the arguments and compiles through the disk cache.
"""

from __future__ import annotations

import contextlib
import functools
import time
from typing import Any

import numpy as np
from numpy.typing import DTypeLike

from .arguments import check_kernel_arguments, is_device_array
from .backend import Backend
from .compiler import cpu_dispatcher, cpu_entry_types, ensure_cpu
from .config import debug_kernels
from .discovery import Availability, CudaFacts, cpu_name, host_memory_info
from .disk_cache import disk_cache_for
from .errors import BackendMismatchError
from .kernel_def import Kernel
from .launch import DeviceLimits, LaunchConfig, check_limits
from .numba_internals import on_missing_overload
from .prepared import PreparedLaunch
from .transfers import check_out

__all__ = ["CPUBackend", "CPUStream", "CPUEvent", "EVERY_GPU"]

# What every CUDA GPU kernelrt supports allows (DeviceLimits' defaults): CPU launches are
# checked against it so that a launch a GPU would refuse is refused on a laptop too.
EVERY_GPU = DeviceLimits(device="every supported CUDA GPU (checked by the CPU backend)")


class CPUStream:
    """Work on the CPU backend runs to completion when launched; streams only order it."""

    def synchronize(self) -> None:
        pass


class CPUEvent:
    """Records a host timestamp; ``elapsed_time`` is in milliseconds like CUDA's."""

    def __init__(self):
        self._t: float | None = None

    def record(self, stream=None) -> None:
        self._t = time.perf_counter()

    def synchronize(self) -> None:
        pass

    def elapsed_time(self, end: "CPUEvent") -> float:
        if self._t is None or end._t is None:
            raise RuntimeError("both events must be recorded before elapsed_time")
        return (end._t - self._t) * 1e3


class CPUBackend(Backend):
    """The Backend contract on the host's cores, with numpy arrays; always available.

    Kernels run as parallel loops over the index space a CUDA launch would cover, checked
    against the limits every supported GPU has. ``compile_kernel`` takes the signatures
    ``CUDABackend`` does (see ``Backend.compile_kernel``).

    Args:
        device_id: must be 0, the one CPU "device".
        enable_caching: keep compiled kernels in the disk cache (False: in memory only).
        cache_dir: the cache directory; None: ``KERNELRT_CACHE_DIR``, else the user cache.
        gpu_limits: check launches against the limits every supported CUDA GPU has (1024
            threads per block, block dims 1024/1024/64, grid y and z 65,535, 48 KiB of
            shared memory), with CUDA's error text, so code written here fails here as it
            would on a GPU; False turns the check off.
        debug: compile kernels that check every array index and raise IndexError, running
            serially (numba cannot raise from a parallel loop); kept apart from the fast
            kernels in memory and on disk. None: ``KERNELRT_DEBUG_KERNELS``.

    Raises:
        ValueError: ``device_id`` is not 0.
        TypeError: ``debug`` is not True, False or None, or ``gpu_limits`` not a bool.
    """

    name = "cpu"

    def __init__(self, device_id: int = 0, enable_caching: bool = True, cache_dir=None, debug: bool | None = None,
                 gpu_limits: bool = True):
        if not isinstance(gpu_limits, bool):
            raise TypeError(f"gpu_limits must be True or False (got {gpu_limits!r})")
        self.gpu_limits = gpu_limits
        if device_id != 0:
            raise ValueError(f"CPUBackend has one device, 0 (got device_id={device_id!r})")
        self.debug = debug_kernels(debug)
        self.device_id = 0
        self.device_name = cpu_name()
        self.compute_capability = None
        self.cache = disk_cache_for(cache_dir, enable_caching)
        self._dispatchers: dict[Kernel, object] = {}
        self._launchers: dict[tuple, tuple] = {}
        import numba  # lazy: importing kernelrt loads no numba

        self._min_rows = 4 * numba.config.NUMBA_NUM_THREADS

    @classmethod
    def availability(cls, device_id: int = 0) -> Availability:
        """Always usable, on device 0 (the host's cores); another id is out of range.

        Args:
            device_id: must be 0.

        Returns:
            An ``Availability`` with code "ok", or "device_out_of_range".
        """
        if device_id != 0:
            return Availability("device_out_of_range", f"CPUBackend has one device, 0 (got {device_id})", device_id)
        return Availability("ok", f"CPU backend on {cpu_name()}", 0, (), CudaFacts())

    # -- memory --------------------------------------------------------------------------

    def allocate(self, shape: int | tuple[int, ...], dtype: DTypeLike = np.float32) -> Any:
        shape, dtype = self._shape_dtype(shape, dtype)
        return np.empty(shape, dtype)

    def zeros(self, shape: int | tuple[int, ...], dtype: DTypeLike = np.float32) -> Any:
        shape, dtype = self._shape_dtype(shape, dtype)
        return np.zeros(shape, dtype)

    def to_device(self, a: Any, stream: Any = None) -> Any:
        if is_device_array(a):
            raise BackendMismatchError(
                "to_device takes a host array (got a CUDA device array); copy it to the host first"
            )
        return np.array(a, order="C", copy=True)

    def to_host(self, a: Any, stream: Any = None, out: np.ndarray | None = None) -> np.ndarray:
        if is_device_array(a):
            raise BackendMismatchError(
                "CPUBackend.to_host takes numpy arrays (got a CUDA device array); use the CUDA backend's to_host"
            )
        if out is None:
            return np.array(a, copy=True)
        a = np.asarray(a)
        np.copyto(check_out(out, a.shape, a.dtype), a)
        return out

    def synchronize(self) -> None:
        pass

    def get_memory_info(self) -> tuple[int, int]:
        return host_memory_info()

    def stream(self) -> CPUStream:
        return CPUStream()

    def event(self, timing: bool = True) -> CPUEvent:
        return CPUEvent()

    # -- kernels -------------------------------------------------------------------------------

    def _prepare(self, kernel: Kernel):
        disp = cpu_dispatcher(kernel, self._debug(kernel))  # a CUDA kernel without a twin is translated (or refused) here
        # numba calls the dispatcher's _compile_for_args when no overload matches the arguments:
        # answer with a checked load-or-compile through the cache. (The dispatcher is per
        # process; the backend prepared last provides the cache.)
        lead = len(cpu_entry_types(kernel, ()))
        on_missing_overload(disp, functools.partial(self._on_type_miss, kernel, lead))
        self._dispatchers[kernel] = disp
        return disp

    def _on_type_miss(self, kernel, lead, *args, **kws) -> tuple:
        """Check the user arguments, load or compile; returns the entry's numba types."""
        argtypes = check_kernel_arguments(kernel, args[lead:], backend=self.name, typeof=_typeof)
        self._ensure(kernel, argtypes)
        return cpu_entry_types(kernel, argtypes)

    def _ensure(self, kernel: Kernel, argtypes: tuple) -> str:
        return ensure_cpu(kernel, argtypes, self.cache, self._debug(kernel))

    def _debug(self, kernel: Kernel) -> bool:
        """The backend's debug mode, or the kernel's own (``cuda.jit(debug=True)``)."""
        return self.debug or kernel.options.get("debug", False)

    def launch_kernel(self, kernel, grid, block, *args, stream=None, shared_mem=0) -> None:
        try:  # fast path: a launcher memoised per (kernel, grid, block, shared_mem)
            launch, k = self._launchers[kernel, grid, block, shared_mem]
        except (KeyError, TypeError):  # new configuration, unhashable input, or a signature to check
            launch, k = self._launcher(kernel, grid, block, shared_mem, args)
        try:
            launch(*args)
        except (TypeError, ValueError):
            # numba refused the call (argument count, an array it cannot unbox such as a
            # device array): say which argument and why; otherwise it is the kernel's own.
            check_kernel_arguments(k, args, backend=self.name, typeof=_typeof)
            raise

    def prepare(self, kernel, grid, block, *args, stream=None, shared_mem=0) -> PreparedLaunch:
        """``launch_kernel``'s checks once (``Backend.prepare``); a call goes to numba's dispatcher."""
        launch, k = self._launcher(kernel, grid, block, shared_mem, args)
        check_kernel_arguments(k, args, backend=self.name, typeof=_typeof, declared=getattr(kernel, "argtypes", None))
        func, lead = launch.func, launch.args  # one flat partial per bind: the call is numba's dispatcher's
        return PreparedLaunch(kernel, k.name, args, stream, lambda bound: functools.partial(func, *lead, *bound))

    def _launcher(self, kernel, grid, block, shared_mem, args):
        """Validate a launch configuration; memoise the dispatcher with its leading arguments."""
        k = self._kernel_of(kernel)
        config = LaunchConfig.of(grid, block, shared_mem)
        if self.gpu_limits:
            check_limits(config, EVERY_GPU)
        disp = self._dispatchers.get(k) or self._prepare(k)
        if k.kind == "cuda":
            dynamic = () if k.cpu_twin else (config.shared_mem,)  # a translated kernel's cuda.shared.array(0, ...)
            launch = functools.partial(disp, config.grid, config.block, *dynamic)
        elif k.ndim == 1:
            launch = functools.partial(disp, config.shape[0])
        else:
            launch = functools.partial(disp, *config.shape, self._min_rows)
        declared = getattr(kernel, "argtypes", None)
        if declared is not None:  # a CompiledKernel with a signature takes only those types
            check_kernel_arguments(k, args, backend=self.name, typeof=_typeof, declared=declared)
        else:  # a Kernel, or a CompiledKernel without a signature
            with contextlib.suppress(TypeError):
                self._launchers[kernel, grid, block, shared_mem] = (launch, k)
        return launch, k


def _typeof(value):
    import numba  # lazy: importing kernelrt loads no numba

    return numba.typeof(value)
