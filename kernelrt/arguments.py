"""Checks of kernel arguments and array inputs, with messages that say what to do.

Backends call ``check_kernel_arguments`` on the slow path of a launch (the first launch
with new argument types, or one numba refused), so the common launch pays nothing and
a bad one is explained before anything runs. ``check_shape`` and ``check_dtype`` are
the shared helpers for allocation and the kernel library's drivers.
"""

from __future__ import annotations

import numbers

import numpy as np

from .errors import BackendMismatchError, KernelArgumentError

__all__ = [
    "is_device_array",
    "dlpack_cuda_device",
    "check_kernel_arguments",
    "check_shape",
    "check_dtype",
    "describe",
]


DLPACK_CUDA_DEVICES = (2, 13)  # DLPack's kDLCUDA and kDLCUDAManaged (3, kDLCUDAHost, is host memory)


def is_device_array(a) -> bool:
    """True for CUDA arrays: numba's (also the simulator's), any CUDA array interface (CuPy,
    PyTorch, JAX), and DLPack arrays on a CUDA device."""
    if isinstance(a, np.ndarray):
        return False
    if getattr(a, "__cuda_ndarray__", False) is True or hasattr(a, "__cuda_array_interface__"):
        return True
    return hasattr(a, "__dlpack__") and dlpack_cuda_device(a) is not None


def dlpack_cuda_device(a) -> int | None:
    """The CUDA device ``a.__dlpack_device__()`` names; None without one, for host memory,
    or when it cannot say."""
    dlpack_device = getattr(a, "__dlpack_device__", None)
    if dlpack_device is None:
        return None
    try:
        kind, dev = dlpack_device()
    except (BufferError, RuntimeError, TypeError, ValueError):  # cannot say where it lives
        return None
    return int(dev) if kind in DLPACK_CUDA_DEVICES else None


def describe(a) -> str:
    """A short description of a value for error messages."""
    if isinstance(a, np.ndarray) or is_device_array(a):
        kind = "device array" if is_device_array(a) else "array"
        dtype, shape = getattr(a, "dtype", None), getattr(a, "shape", None)
        if dtype is None or shape is None:  # a bare DLPack object
            return f"{kind} ({type(a).__name__})"
        try:
            dtype = np.dtype(dtype).name
        except TypeError:  # PyTorch's dtypes are not numpy's
            dtype = str(dtype)
        return f"{kind} of {dtype} with shape {tuple(shape)}"
    return f"{type(a).__name__} {a!r}"[:80]


def check_shape(shape, what: str = "shape") -> tuple[int, ...]:
    """An int or a tuple of ints >= 0, as a tuple."""
    if isinstance(shape, numbers.Integral) and not isinstance(shape, bool):
        shape = (shape,)
    if not isinstance(shape, (tuple, list)) or not all(
        isinstance(s, numbers.Integral) and not isinstance(s, bool) for s in shape
    ):
        raise TypeError(f"{what} must be an int or a tuple of ints (got {shape!r})")
    if any(s < 0 for s in shape):
        raise ValueError(f"{what} must not have negative extents (got {tuple(shape)})")
    return tuple(int(s) for s in shape)


def check_dtype(dtype, what: str = "dtype") -> np.dtype:
    """A numeric numpy dtype (kernels cannot take object or string arrays)."""
    try:
        dt = np.dtype(dtype)
    except TypeError:
        raise TypeError(f"{what} must be a numpy dtype (got {dtype!r})") from None
    if dt.kind not in "biufc":
        raise TypeError(f"{what} must be a numeric dtype (got {dt})")
    return dt


def check_kernel_arguments(kernel, args, *, backend: str, typeof, declared=None) -> tuple:
    """Validate ``args`` for ``kernel`` on ``backend``; return the types to compile for.

    ``declared`` (numba types) overrides the kernel's own signature, if any.
    """
    if len(args) != len(kernel.params):
        raise KernelArgumentError(
            f"kernel {kernel.name!r} takes {len(kernel.params)} arguments "
            f"({', '.join(kernel.params)}) (got {len(args)})"
        )
    for name, a in zip(kernel.params, args):
        if backend == "cpu" and is_device_array(a):
            raise BackendMismatchError(
                f"argument {name!r} of {kernel.name!r} is a CUDA {describe(a)}; CPUBackend "
                f"kernels take numpy arrays (copy it with the CUDA backend's to_host)"
            )
        if backend == "cpu" and getattr(getattr(a, "dtype", None), "char", None) == "e":
            raise KernelArgumentError(
                f"argument {name!r} of {kernel.name!r} is a float16 {describe(a)}; numba's CPU target has no "
                f"float16, so CPUBackend cannot take it: pass a float32 array (it holds every half exactly; "
                f"cuda.fp16 functions round their results to half on the CPU too) or launch on a CUDABackend"
            )
        if backend == "cpu" and isinstance(a, np.void):
            raise KernelArgumentError(
                f"argument {name!r} of {kernel.name!r} is a NumPy record scalar; numba's parallel CPU loop "
                f"cannot take one, so CPUBackend cannot: pass the record array and an index, or launch on a "
                f"CUDABackend"
            )
        if backend == "cuda" and isinstance(a, np.ndarray):
            raise BackendMismatchError(
                f"argument {name!r} of {kernel.name!r} is a host numpy {describe(a)}; "
                f"CUDABackend kernels take device arrays (use backend.to_device({name}))"
            )
    types = []
    for name, a in zip(kernel.params, args):
        try:
            types.append(typeof(a))
        except (TypeError, ValueError):
            raise KernelArgumentError(
                f"argument {name!r} of {kernel.name!r} has a type kernels cannot take "
                f"(got {type(a).__name__}); pass arrays, numbers or tuples of numbers"
            ) from None
    declared = declared if declared is not None else kernel.signature
    if declared is not None:
        for name, a, got, want in zip(kernel.params, args, types, declared):
            _check_against(kernel, name, a, got, want)
        return tuple(declared)
    return tuple(types)


def _check_against(kernel, name, a, got, want) -> None:
    from numba.core import types as nbt  # lazy: importing kernelrt loads no numba

    where = f"argument {name!r} of {kernel.name!r}"
    if isinstance(want, nbt.Array):
        if not isinstance(got, nbt.Array):
            raise KernelArgumentError(f"{where} must be a {want.ndim}-D {want.dtype} array (got {describe(a)})")
        if got.dtype != want.dtype:
            raise KernelArgumentError(f"{where} must be an array of {want.dtype} (got {got.dtype}); convert with .astype")
        if got.ndim != want.ndim:
            raise KernelArgumentError(
                f"{where} must be a {want.ndim}-D array (got {got.ndim}-D, shape {tuple(a.shape)})"
            )
        if want.layout in "CF" and got.layout != want.layout:
            order = "C" if want.layout == "C" else "Fortran"
            raise KernelArgumentError(
                f"{where} must be {order}-contiguous (got a non-contiguous array with strides "
                f"{tuple(a.strides)}); pass a contiguous copy"
            )
        if want.mutable and not got.mutable:
            raise KernelArgumentError(f"{where} must be writeable (got a read-only array)")
    elif isinstance(want, (nbt.Number, nbt.Boolean)):
        if not isinstance(got, (nbt.Number, nbt.Boolean)):
            raise KernelArgumentError(f"{where} must be a {want} scalar (got {describe(a)})")
        if isinstance(want, nbt.Integer) and isinstance(got, nbt.Float):
            raise KernelArgumentError(f"{where} must be an integer ({want}) (got float {a!r})")
        if isinstance(want, nbt.Integer) and not want.minval <= int(a) <= want.maxval:
            raise KernelArgumentError(f"{where} must fit in {want} [{want.minval}, {want.maxval}] (got {a!r})")
    elif got != want:
        raise KernelArgumentError(f"{where} must be {want} (got {got})")
