"""The arrays CUDABackend hands out and takes: CuPy, the CUDA array interface, DLPack.

Owns the choice of array type (``arrays="auto" | "cupy" | "numba"``: CuPy arrays when CuPy
is installed and the backend is not the simulator), the device an array lives on, host
arrays laid out for numba's copies, and zero-copy numba views of foreign arrays for copies
and launches. Foreign arrays are objects with ``__cuda_array_interface__`` (CuPy, PyTorch,
JAX, ...) or DLPack objects on a CUDA device, which are read through ``cupy.from_dlpack``.

Why views: on every launch, numba-cuda 0.30 turns each argument that is not its own device
array into a memory view (``dispatcher.py``: the kernel's ``_prepare_args``, then
``cudadrv/devicearray.py``: ``_to_strided_memory_view``). An object with ``__dlpack__``
(CuPy, PyTorch, JAX) is exported through DLPack with numba's launch stream as consumer;
one with only ``__cuda_array_interface__`` is read and then the *host waits* for the stream
the interface names (``CUDA_ARRAY_INTERFACE_SYNC``), as ``numba.cuda.as_cuda_array(obj)``
(``sync=True``) does. kernelrt instead makes ``from_cuda_array_interface(desc, owner=obj,
sync=False)`` views (``api.py``) and orders the launch on the device (``stream_order``):
numba sees only its own device arrays, the host never waits, and every producer takes the
same path. Views copy nothing and keep their owner alive. Nothing here is imported at
``import kernelrt``.
"""

from __future__ import annotations

import numpy as np

from .arguments import DLPACK_CUDA_DEVICES, dlpack_cuda_device
from .config import logger
from .discovery import pip_install_command, probe
from .errors import BackendMismatchError
from .stream_order import numba_stream, plan_launch, wait_for

__all__ = [
    "ARRAY_CHOICES",
    "FOREIGN",
    "HOST",
    "NUMBA",
    "OTHER",
    "argument_kind",
    "array_interface",
    "c_strides",
    "check_arrays",
    "copy_view",
    "cupy_array",
    "cupy_module",
    "device_of",
    "finished",
    "launch_view",
    "launch_views",
    "numba_view",
    "resolve_arrays",
    "upload",
]

ARRAY_CHOICES = ("auto", "cupy", "numba")

# What a launch does with an argument, decided once per type where the type decides it.
NUMBA, FOREIGN, HOST, OTHER = "numba", "foreign", "host", "other"
_KINDS: dict[type, str] = {}
_SCALARS = (int, float, complex, bool, np.generic, tuple)


def argument_kind(a) -> str:
    """``NUMBA`` (numba's device arrays, the simulator's too), ``FOREIGN`` (CUDA array
    interface or DLPack), ``HOST`` (numpy) or ``OTHER`` (scalars and the rest)."""
    kind = _KINDS.get(type(a))
    return kind if kind is not None else _classify(a)


def _classify(a) -> str:
    t = type(a)
    if getattr(t, "__cuda_ndarray__", False) is True:  # before numpy: numba's mapped arrays are both
        kind = NUMBA
    elif issubclass(t, np.ndarray):
        kind = HOST
    elif issubclass(t, _SCALARS):
        kind = OTHER
    elif hasattr(t, "__cuda_array_interface__") or hasattr(t, "__dlpack__"):
        kind = FOREIGN
    elif hasattr(a, "__dict__"):  # the object's own attributes decide: not remembered for its type
        return FOREIGN if hasattr(a, "__cuda_array_interface__") or hasattr(a, "__dlpack__") else OTHER
    else:
        kind = OTHER
    _KINDS[t] = kind
    return kind


def device_of(a) -> int | None:
    """The device ordinal an array lives on, if it says: numba, CuPy, PyTorch, DLPack."""
    context = getattr(getattr(a, "gpu_data", None), "context", None)
    if context is not None:  # numba
        return context.device.id
    device = getattr(a, "device", None)
    for attr in ("id", "index"):  # CuPy's Device.id; PyTorch's torch.device.index (None on the CPU)
        dev = getattr(device, attr, None)
        if isinstance(dev, int) and not isinstance(dev, bool):
            return dev
    return dlpack_cuda_device(a)  # None where it cannot say: not checked


def cupy_module():
    """The ``cupy`` module, or None where it is not installed or does not load."""
    try:
        import cupy  # lazy: optional GPU library (the cuda12/cuda13 extras), loaded only when used
    except (ImportError, OSError, RuntimeError):  # not installed, or no CUDA runtime it can load
        return None
    return cupy


def check_arrays(arrays) -> str:
    """``arrays`` if it is one of ``ARRAY_CHOICES``.

    Raises:
        ValueError: it is not.
    """
    if not isinstance(arrays, str) or arrays not in ARRAY_CHOICES:
        raise ValueError(f"arrays must be 'auto', 'cupy' or 'numba' (got {arrays!r})")
    return arrays


def resolve_arrays(arrays: str, simulated: bool) -> str:
    """``"cupy"`` or ``"numba"``: the arrays a backend hands out for ``arrays=``.

    Raises:
        ValueError: ``arrays`` is not a choice, or is ``"cupy"`` under the CUDA simulator.
        ImportError: ``arrays`` is ``"cupy"`` and CuPy is not installed.
    """
    if check_arrays(arrays) == "numba":
        return "numba"
    if simulated:
        if arrays == "cupy":
            raise ValueError(
                "arrays='cupy' needs a real GPU: the CUDA simulator (NUMBA_ENABLE_CUDASIM=1) has "
                "numba arrays only (got arrays='cupy'); use arrays='auto' or 'numba'"
            )
        return "numba"
    cp = cupy_module()
    reason = "does not import here" if cp is None else _unusable(cp)
    if reason is None:
        return "cupy"
    if arrays == "cupy":
        raise ImportError(f"arrays='cupy' needs CuPy, which {reason}: {pip_install_command(probe())}; "
                          f"or use arrays='numba' (got arrays='cupy')")
    if cp is not None:  # installed but broken: say so once a backend falls back
        logger.warning("kernelrt: CuPy %s; CUDABackend hands out numba device arrays", reason)
    return "numba"


def _unusable(cp) -> str | None:
    """Why an imported CuPy cannot work here (a CUDA runtime the driver does not run), or None."""
    try:
        cp.cuda.runtime.getDeviceCount()
    except (RuntimeError, OSError, ImportError) as e:  # CUDARuntimeError is a RuntimeError
        return f"cannot reach the GPU ({type(e).__name__}: {e})"
    return None


def cupy_array(fill: str, shape: tuple, dtype, device_id: int):
    """A new CuPy array on ``device_id``: ``fill`` is ``"empty"`` or ``"zeros"``."""
    cp = cupy_module()
    with cp.cuda.Device(device_id):
        return getattr(cp, fill)(shape, dtype)


def array_interface(a, what: str) -> tuple:
    """``(owner, desc)``: the CUDA array interface of a foreign array, zero-copy.

    A DLPack object without one goes through ``cupy.from_dlpack`` (the producer orders
    its work before CuPy's current stream, which the new array's interface then names).

    Raises:
        BackendMismatchError: a DLPack array in host memory.
        TypeError: neither interface, or a DLPack-only array and no CuPy.
    """
    desc = getattr(a, "__cuda_array_interface__", None)
    if desc is not None:
        return a, desc
    dlpack_device = getattr(a, "__dlpack_device__", None)
    if dlpack_device is None or not hasattr(a, "__dlpack__"):
        raise TypeError(f"{what} must be a CUDA device array (got {type(a).__name__})")
    kind, _ = dlpack_device()
    if kind not in DLPACK_CUDA_DEVICES:
        raise BackendMismatchError(
            f"{what} is a host array (DLPack device type {kind}, got {type(a).__name__}); CUDABackend "
            f"takes device arrays: copy it with backend.to_device first"
        )
    cp = cupy_module()
    if cp is None:
        raise TypeError(
            f"{what} is a DLPack array without __cuda_array_interface__ (got {type(a).__name__}); "
            f"kernelrt reads those through CuPy: {pip_install_command(probe())}"
        )
    owner = cp.from_dlpack(a)
    return owner, owner.__cuda_array_interface__


def numba_view(owner, desc):
    """A numba device array over ``owner``'s memory, bound to no stream: no copy, no sync.

    Call inside the backend's ``activated()``: the view belongs to the current context.
    """
    from numba import cuda  # lazy: importing kernelrt loads no numba

    if desc.get("stream") is not None:  # the caller orders the work (stream_order)
        desc = {**desc, "stream": None}
    return cuda.from_cuda_array_interface(desc, owner=owner, sync=False)


# Launch views by (device, pointer, shape, strides, type, read-only): building one costs ~20 us
# in numba (the interface parsed, the context looked up, its numba type and memory-view shim
# computed afresh), against ~1 us for numba's own arrays, and a loop of small launches (the
# Laplacian's heat steps) passes the same arrays every time. A view owns nothing and only
# describes memory, so a cached one is right for any array with that description: the
# caller's array keeps the memory alive for the launch. Bounded; cleared when full.
_LAUNCH_VIEWS: dict[tuple, object] = {}
_MAX_LAUNCH_VIEWS = 4096


def launch_view(owner, desc, device_id: int):
    """A numba view of ``owner`` for a launch on ``device_id``, cached by its description.

    Call inside the backend's ``activated()``.
    """
    strides = desc.get("strides")
    key = (device_id, desc["data"][0], tuple(desc["shape"]), None if strides is None else tuple(strides),
           desc["typestr"], desc["data"][1])
    view = _LAUNCH_VIEWS.get(key)
    if view is None:
        if len(_LAUNCH_VIEWS) >= _MAX_LAUNCH_VIEWS:
            _LAUNCH_VIEWS.clear()
        view = _LAUNCH_VIEWS[key] = numba_view(None, desc)
    return view


def copy_view(a) -> tuple:
    """``(d, stream)`` for a copy: a numba device array over ``a`` and the stream ``a`` is
    ordered on (numba arrays: themselves and the stream they were made with)."""
    if argument_kind(a) is NUMBA:
        return a, getattr(a, "stream", 0)
    owner, desc = array_interface(a, "a")
    if not _c_contiguous(desc):
        cp = cupy_module()
        if cp is not None and isinstance(owner, cp.ndarray):  # numba copies no negative strides
            owner = cp.ascontiguousarray(owner)
            desc = owner.__cuda_array_interface__
    return numba_view(owner, desc), numba_stream(desc.get("stream"))


def upload(host: np.ndarray, stream, arrays: str, device_id: int) -> tuple:
    """A new device array holding ``host`` (CuPy's when ``arrays`` is ``"cupy"``), and the
    stream it was copied on: 0 for a synchronous copy. Call inside ``activated()``."""
    from numba import cuda  # lazy: importing kernelrt loads no numba

    if arrays != "cupy":
        return cuda.to_device(host, stream=stream), stream
    out = cupy_array("empty", host.shape, host.dtype, device_id)
    view, ordered_on = copy_view(out)  # CuPy's current stream: its memory pool handed ``out`` out there
    if stream:
        wait_for(plan_launch(stream, [ordered_on])[1], stream)
    else:
        stream = ordered_on
    view.copy_to_device(host, stream=stream)
    return out, stream


def finished(out: np.ndarray, stream) -> np.ndarray:
    """``out`` once the copy into it is done: a copy on a stream is asynchronous."""
    if stream:
        stream.synchronize()
    return out


def _c_contiguous(desc) -> bool:
    strides = desc.get("strides")  # None: C-contiguous, as the interface defines it
    if strides is None:
        return True
    expected, step = [], np.dtype(desc["typestr"]).itemsize
    for n in reversed(tuple(desc["shape"])):
        expected.insert(0, step)
        step *= n
    return tuple(strides) == tuple(expected)


def launch_views(kernel, args: tuple, first: int, device_id: int = 0) -> tuple:
    """``(args, producers)``: the foreign arrays among ``args`` (from index ``first`` on)
    replaced by numba views (``launch_view``), and the numba streams they name, in
    argument order.

    Call inside the backend's ``activated()`` for ``device_id``, after the device checks.
    """
    args = list(args)
    producers = []
    for i in range(first, len(args)):
        if argument_kind(args[i]) is FOREIGN:
            name = kernel.params[i] if i < len(kernel.params) else i
            owner, desc = array_interface(args[i], f"argument {name!r} of {kernel.name!r}")
            args[i] = launch_view(owner, desc, device_id)
            if desc.get("stream") is not None:
                producers.append(numba_stream(desc["stream"]))
    return tuple(args), producers


def c_strides(host: np.ndarray) -> np.ndarray:
    """``host`` C-contiguous with the strides numba expects of a contiguous array.

    NumPy gives an axis of length 1 any stride (``v[None]`` has stride 0 there) and still
    calls the array contiguous; numba's device array does not, and copies it to the device
    by walking its extents in Python, one element at a time: 1.1 s for a (1, 163842, 3)
    array on an H100, against 1 ms for the same bytes with standard strides.
    """
    host = np.ascontiguousarray(host)
    return host.reshape(-1).reshape(host.shape) if host.ndim > 1 else host
