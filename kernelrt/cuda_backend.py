"""CUDABackend: one CUDA device, its memory, streams and kernel launches.

Each backend owns one device. Every operation enters that device with ``activated()``
(``current_device.CurrentDevice``), which makes the device current on the calling thread
and restores another device that was current before, so several backends, one per
device and thread, never fight over the "current device". The device's compute
capability and launch limits are read once, when the backend is made.

A launch is checked before it runs: the kernel's ``min_cc`` against the device, the
launch configuration against the device's and the compiled kernel's limits (memoised
per configuration), host arrays and arrays of other devices among the arguments. New
argument types reach ``_on_type_miss``, which numba's dispatcher calls when no overload
matches (``numba_internals.on_missing_overload``): it checks them against the signature
and loads or compiles through the cache.
"""

from __future__ import annotations

import contextlib
import functools
from typing import Any

import numpy as np
from numpy.typing import DTypeLike

from . import device_arrays
from .arguments import check_kernel_arguments, is_device_array
from .backend import Backend
from .compiler import cuda_dispatcher, ensure_cuda
from .config import debug_kernels
from .cuda_prepared import CudaBinder, GraphSequence
from .current_device import CurrentDevice
from .device_arrays import FOREIGN, HOST, NUMBA, argument_kind, device_of
from .discovery import Availability, classify, host_memory_info, probe
from .disk_cache import disk_cache_for
from .errors import (
    ComputeCapabilityError,
    CudaUnavailableError,
    DeviceMismatchError,
)
from .kernel_def import Kernel
from .launch import DeviceLimits, LaunchConfig, check_limits
from .numba_internals import (
    allow_dynamic_shared_mem,
    cuda_typeof,
    free_deferred,
    kernel_attributes,
    memset_zero,
    on_missing_overload,
)
from .prepared import PreparedLaunch
from .stream_order import as_numba_stream, plan_launch, wait_for
from .transfers import Transfers

__all__ = ["CUDABackend"]


_DEFAULT_SMEM = 48 * 1024  # dynamic shared memory above this needs a per-kernel opt-in

def _cuda():
    """``numba.cuda``, imported at first use: importing kernelrt loads no numba."""
    from numba import cuda

    return cuda


class CUDABackend(Backend):
    """The Backend contract on one CUDA device: memory, streams, compiled kernels, launches.

    One backend per device (and thread); ``get_backend("auto")`` falls back to a
    ``CPUBackend`` when CUDA is unavailable, and ``availability()`` says why without raising.
    ``compile_kernel`` takes a signature string (``"float32[::1], int64"`` or
    ``"void(float32[::1], int64)"``) or a tuple/list of numba types (``numba.float32[::1]``),
    NumPy scalar types or dtypes (``np.float32``: scalars only), Python int/float/complex/
    bool, or type strings (``"float32[::1]"``); see ``Backend.compile_kernel``.

    Args:
        device_id: the device ordinal, 0 to the number of devices visible minus one.
        enable_caching: keep compiled kernels in the disk cache (False: in memory only).
        cache_dir: the cache directory; None: ``KERNELRT_CACHE_DIR``, else the user cache.
        debug: compile ``debug=True, opt=False`` (kernel exceptions reach the host), apart from the
            fast kernels; numba-cuda has no GPU bounds checks. None: ``KERNELRT_DEBUG_KERNELS``.
        arrays: what ``allocate``/``to_device`` return: ``"cupy"`` (``pip install
            "kernelrt[cuda12]"`` or ``[cuda13]``), ``"numba"``, or ``"auto"`` (CuPy if installed).

    Raises:
        CudaUnavailableError: a ``RuntimeError`` (and ``ImportError``) when CUDA is
            unavailable (no driver, no device, ``device_id`` out of range, NVVM/NVRTC
            missing, ...); the message says why and how to fix it.
        TypeError: ``device_id`` is not an int, or ``debug`` not True, False or None.
        ValueError: ``arrays`` is not ``"auto"``, ``"cupy"`` or ``"numba"``, or is ``"cupy"``
            under the CUDA simulator.
        ImportError: ``arrays="cupy"`` and CuPy does not import.
    """

    name = "cuda"

    def __init__(self, device_id: int = 0, enable_caching: bool = True, cache_dir=None, debug: bool | None = None,
                 arrays: str = "auto"):
        """Claim device ``device_id``; the class docstring lists the arguments and errors."""
        if isinstance(device_id, bool) or not isinstance(device_id, int):
            raise TypeError(f"device_id must be an int (got {type(device_id).__name__}: {device_id!r})")
        self.debug = debug_kernels(debug)
        device_arrays.check_arrays(arrays)
        avail = self.availability(device_id)
        if not avail:
            raise CudaUnavailableError(avail.reason, avail.code)
        info = avail.devices[device_id]
        self.device_id = device_id
        self.device_name = info.name
        self.compute_capability = tuple(info.compute_capability)
        self.cache = disk_cache_for(cache_dir, enable_caching)
        self._simulated = avail.code == "simulator"
        self.arrays = device_arrays.resolve_arrays(arrays, self._simulated)  # "cupy" or "numba"
        self._dispatchers: dict[Kernel, object] = {}
        self._launchers: dict[tuple, tuple] = {}
        self._big_smem: set = set()  # kernels launched with > 48 KiB of dynamic shared memory
        self._opted_in: set[int] = set()  # overloads already allowed the device's shared memory
        self._transfers = Transfers(self)  # pooled pinned results, chunked staging of uploads
        self.limits = self._read_limits()

    @classmethod
    def availability(cls, device_id: int = 0) -> Availability:
        """Whether CUDA device ``device_id`` can run kernels here, and if not, why and the fix.

        Probes the driver, the devices and the toolchain once per process (never raising,
        creating no CUDA context); ``kernelrt info`` prints the same answer.

        Args:
            device_id: the CUDA device to ask about.

        Returns:
            An ``Availability``: truthy when usable; ``code`` is one of
            ``kernelrt.discovery.REASONS`` and ``reason`` a sentence ending with the fix
            (the driver to install, or the extra: ``pip install "kernelrt[cuda12]"``).
        """
        return classify(probe(), device_id)

    def activated(self) -> CurrentDevice:
        """Context manager making this backend's device current (for its own work and CuPy)."""
        return CurrentDevice(self.device_id)

    @property
    def is_simulator(self) -> bool:
        """True when running in Numba's CUDA simulator (``NUMBA_ENABLE_CUDASIM=1``)."""
        return self._simulated

    def _read_limits(self) -> DeviceLimits:
        label = f"device {self.device_id} ({self.device_name})"
        if self._simulated:
            return DeviceLimits(device=label)
        cuda = _cuda()

        with self.activated():
            d = cuda.get_current_device()
            return DeviceLimits(
                max_threads_per_block=d.MAX_THREADS_PER_BLOCK,
                max_block_dim=(d.MAX_BLOCK_DIM_X, d.MAX_BLOCK_DIM_Y, d.MAX_BLOCK_DIM_Z),
                max_grid_dim=(d.MAX_GRID_DIM_X, d.MAX_GRID_DIM_Y, d.MAX_GRID_DIM_Z),
                max_shared_mem_per_block=d.MAX_SHARED_MEMORY_PER_BLOCK,
                max_shared_mem_per_block_optin=d.MAX_SHARED_MEMORY_PER_BLOCK_OPTIN,
                device=label,
            )

    # -- memory --------------------------------------------------------------------------------

    def is_device_array(self, a: object) -> bool:
        return is_device_array(a)

    def allocate(self, shape: int | tuple[int, ...], dtype: DTypeLike = np.float32) -> Any:
        shape, dtype = self._shape_dtype(shape, dtype)
        with self.activated():
            if self.arrays == "cupy":
                return device_arrays.cupy_array("empty", shape, dtype, self.device_id)
            return _cuda().device_array(shape, dtype)

    def zeros(self, shape: int | tuple[int, ...], dtype: DTypeLike = np.float32) -> Any:
        shape, dtype = self._shape_dtype(shape, dtype)
        with self.activated():
            if self.arrays == "cupy":
                return device_arrays.cupy_array("zeros", shape, dtype, self.device_id)
            if self._simulated:
                return _cuda().to_device(np.zeros(shape, dtype))
            out = _cuda().device_array(shape, dtype)
            if out.size:
                memset_zero(out)
            return out

    def to_device(self, a: Any, stream: Any = None) -> Any:
        """Copy host array ``a`` to this device; arrays already here are returned as is.

        Large arrays go through two pinned chunk buffers, the host copying chunk i+1 while
        chunk i's DMA runs (``transfers``). Without ``stream=`` the copy is complete on return;
        with one it is queued on that stream.
        """
        return self._transfers.to_device(a, stream)

    def to_host(self, a: Any, stream: Any = None, out: np.ndarray | None = None) -> np.ndarray:
        """Copy ``a`` to a host numpy array: one DMA into a pooled pinned buffer, or into ``out``.

        Args:
            a: a device array of this device (numba, CuPy, CUDA array interface, DLPack); a
                numpy array is copied.
            stream: None: the copy is complete on return. A stream: the copy is queued on it
                and the result is valid once it is synchronised.
            out: a C-contiguous, writeable numpy array of ``a``'s shape and dtype that the
                caller owns (pinned for full speed: ``numba.cuda.pinned_array``); None: a pooled
                pinned buffer, reused only once every reference to this result is gone.

        Returns:
            ``out``, or a new array (pinned from the pool where it is large enough).

        Raises:
            TypeError: ``a`` is not an array, or ``out`` not a numpy array of ``a``'s dtype.
            ValueError: ``out`` has another shape, is not C-contiguous or is read-only.
            DeviceMismatchError: ``a`` lives on another device.
        """
        return self._transfers.to_host(a, stream, out)

    def _stream_arg(self, stream):
        """numba's stream for a ``stream=`` argument (CuPy and PyTorch streams too); 0 for None."""
        return (stream or 0) if self._simulated else as_numba_stream(stream)

    def _check_on_this_device(self, a, name: str) -> None:
        dev = device_of(a)
        if dev is not None and dev != self.device_id:
            raise DeviceMismatchError(
                f"{name} lives on device {dev}, but this backend is device {self.device_id} "
                f"({self.device_name}); copy it with this backend's to_device(other.to_host(...))"
            )

    def synchronize(self) -> None:
        cuda = _cuda()

        with self.activated():
            cuda.synchronize()

    def get_memory_info(self) -> tuple[int, int]:
        cuda = _cuda()

        if self._simulated:  # the simulator's "device memory" is host memory
            return host_memory_info()
        with self.activated():
            info = cuda.current_context().get_memory_info()
            free = int(info.free)
            if self.arrays == "cupy":  # blocks CuPy's pool keeps for reuse are free to this backend's work
                cp = device_arrays.cupy_module()
                with cp.cuda.Device(self.device_id):
                    free += int(cp.get_default_memory_pool().free_bytes())
            return min(free, int(info.total)), int(info.total)

    def release_memory(self) -> None:
        """Free what numba holds for deferred deallocation on this device, and the pinned host
        buffers of copies that no result uses any more."""
        self._transfers.release()
        if self._simulated:
            return
        cuda = _cuda()

        with self.activated():
            free_deferred(cuda.current_context())

    def stream(self) -> Any:
        cuda = _cuda()

        with self.activated():
            return cuda.stream()

    def event(self, timing: bool = True) -> Any:
        cuda = _cuda()

        if self._simulated:  # the simulator's events take no arguments and time nothing
            return cuda.event()
        with self.activated():
            return cuda.event(timing=timing)

    # -- kernels ----------------------------------------------------------------------------

    def _prepare(self, kernel: Kernel):
        need = kernel.min_cc
        if need is not None and self.compute_capability < need:
            raise ComputeCapabilityError(
                f"kernel {kernel.name!r} requires compute capability >= {need[0]}.{need[1]} "
                f"(got {self.compute_capability[0]}.{self.compute_capability[1]} on device "
                f"{self.device_id}: {self.device_name})"
            )
        disp = cuda_dispatcher(kernel, self.compute_capability, self.debug)
        if not self._simulated:
            # numba calls the dispatcher's _compile_for_args when no overload matches the arguments:
            # answer with a checked load-or-compile through the cache, on this device.
            on_missing_overload(disp, functools.partial(self._on_type_miss, kernel))
        self._dispatchers[kernel] = disp
        return disp

    def _on_type_miss(self, kernel, *args, **kws) -> tuple:
        """Check the arguments, load or compile on this device; returns their numba types."""
        argtypes = check_kernel_arguments(kernel, args, backend=self.name, typeof=cuda_typeof)
        self._ensure(kernel, argtypes)
        return tuple(argtypes)

    def _ensure(self, kernel: Kernel, argtypes: tuple) -> str:
        with self.activated():
            status = ensure_cuda(kernel, argtypes, self.compute_capability, self.cache, self.debug)
            if kernel in self._big_smem:  # launched with > 48 KiB before: new overloads too
                self._opt_in_shared_mem(self._dispatchers[kernel])
        return status

    def launch_kernel(self, kernel, grid, block, *args, stream=None, shared_mem=0) -> None:
        try:  # fast path: checks of the configuration memoised per (kernel, grid, block, smem)
            k, disp, cfg, check_all = self._launchers[kernel, grid, block, shared_mem]
        except (KeyError, TypeError):  # new configuration or unhashable input
            k, disp, cfg, check_all = self._launcher(kernel, grid, block, shared_mem)
        foreign = self._first_foreign(k, args)
        with self.activated():
            waits = ()
            if foreign is None or self._simulated:
                launch_stream = 0 if stream is None else self._stream_arg(stream)
            else:  # numba syncs or exports foreign arrays per launch (device_arrays): views, ordered on the device
                args, producers = device_arrays.launch_views(k, args, foreign, self.device_id)
                launch_stream, waits = plan_launch(None if stream is None else self._stream_arg(stream), producers)
                wait_for(waits, launch_stream)
            if check_all:  # the simulator checks no types; a CompiledKernel takes only its own
                check_kernel_arguments(k, args, backend=self.name, typeof=cuda_typeof, declared=getattr(kernel, "argtypes", None))
            try:
                disp[cfg.grid, cfg.block, launch_stream, cfg.shared_mem](*args)
            except TypeError:
                # numba refused the call (e.g. the argument count): name the argument, or re-raise
                check_kernel_arguments(k, args, backend=self.name, typeof=cuda_typeof)
                raise
            for producer in waits:  # join back: CuPy may hand these arrays' memory out again on
                wait_for([launch_stream], producer)  # their own stream once they are freed

    def _first_foreign(self, k, args):
        """Check that every argument array is on this device (a host array raises, naming it);
        the index of the first CuPy / PyTorch / DLPack argument, or None."""
        foreign = None
        for i, a in enumerate(args):
            kind = argument_kind(a)  # memoised per type: numba arrays and scalars pay a dict lookup
            if kind is NUMBA or kind is FOREIGN:
                self._check_on_this_device(a, "an argument array")
                if foreign is None and kind is FOREIGN:
                    foreign = i
            elif kind is HOST:
                check_kernel_arguments(k, args, backend=self.name, typeof=cuda_typeof)  # raises: host array
        return foreign

    def prepare(self, kernel, grid, block, *args, stream=None, shared_mem=0) -> PreparedLaunch:
        """``launch_kernel``'s checks, views, stream plan and overload, once (``Backend.prepare``)."""
        k, disp, cfg, _ = self._launcher(kernel, grid, block, shared_mem)
        s = None if stream is None else self._stream_arg(stream)
        binder = CudaBinder(self, k, disp, cfg, getattr(kernel, "argtypes", None), s)
        return PreparedLaunch(kernel, k.name, args, stream, binder)

    def sequence(self, launches, graph: bool = True) -> GraphSequence:
        """Prepared launches run in order, replayed as a CUDA graph where possible (``Backend.sequence``)."""
        return GraphSequence(self, launches, graph)

    def _launcher(self, kernel, grid, block, shared_mem):
        """Check a kernel and launch configuration once; memoise what launches need."""
        k = self._kernel_of(kernel)
        cfg = LaunchConfig.of(grid, block, shared_mem)
        disp = self._dispatchers.get(k) or self._prepare(k)
        check_limits(cfg, self.limits, **self._kernel_limits(disp))
        if cfg.shared_mem > _DEFAULT_SMEM and not self._simulated:
            self._big_smem.add(k)
            with self.activated():
                self._opt_in_shared_mem(disp)
        entry = (k, disp, cfg, self._simulated or getattr(kernel, "argtypes", None) is not None)
        with contextlib.suppress(TypeError):  # a Kernel, CompiledKernel or numba.cuda function
            self._launchers[kernel, grid, block, shared_mem] = entry
        return entry

    def _kernel_limits(self, disp) -> dict:
        """Static shared memory and register-bound block size of the compiled overloads."""
        if self._simulated or not disp.overloads:
            return {}  # not compiled yet: the device limits are checked, the rest at launch
        with self.activated():
            attrs = [kernel_attributes(k) for k in list(disp.overloads.values())]
        return {"static_shared_mem": max(shared for shared, _ in attrs),
                "max_threads_for_kernel": min(threads for _, threads in attrs)}

    def _opt_in_shared_mem(self, disp) -> None:
        """Let every compiled overload use all the shared memory the device allows (sm_70+).

        Dynamic shared memory above 48 KiB needs a per-kernel attribute; it is set once per
        overload, to the device's opt-in limit minus the kernel's static shared memory,
        so a later, smaller request never lowers it. Call inside ``activated()``.
        """
        for kern in list(disp.overloads.values()):
            if id(kern) in self._opted_in:
                continue
            static, _ = kernel_attributes(kern)
            allow_dynamic_shared_mem(kern, self.limits.max_shared_mem_per_block_optin - static, self.device_id)
            self._opted_in.add(id(kern))

