"""Kernel definitions: write a kernel once, launch it on any backend.

Two kinds:

* ``@kernel(ndim=1|2|3)``: a per-thread function whose first ``ndim`` parameters are
  the global thread index (x, then y, then z, as ``cuda.grid(ndim)`` returns them).
  kernelrt generates the ``numba.cuda`` kernel and a parallel CPU loop over the same
  index space (codegen.py), so both backends give the same result. Guard the index
  yourself, as in CUDA: the index space is grid * block per axis.
* ``@cuda_kernel``: a plain ``numba.cuda`` kernel (``@cuda.jit`` functions and plain
  functions are adopted as one, ``adopt``). On the CPU it runs through an explicit twin
  registered with ``@k.cpu`` (a function ``twin(grid, block, *args)``, grid and block
  3-tuples, compiled with ``njit(parallel=True)``), or else through the translation of
  its own source (cuda_on_cpu.py), which refuses shared memory, barriers and warp
  intrinsics by name.

A kernel may declare ``min_cc`` (fp64 atomics need (6, 0)); launching on an older
device raises ComputeCapabilityError naming both. ``signature`` (the user arguments
only, numba syntax) makes compilation eager and arguments checked.
"""

from __future__ import annotations

import functools
import inspect
from collections.abc import Callable
from typing import Any, NoReturn, TypeVar, overload

from .errors import BackendMismatchError

__all__ = ["Kernel", "kernel", "cuda_kernel", "device", "adopt"]

_F = TypeVar("_F", bound=Callable[..., Any])
# min_cc: (major, minor), or a number such as 6.0
ComputeCapability = tuple[int, int] | float | int | None

_OPTIONS = ("fastmath",)
_PYTHON_SCALARS = {int: "int64", float: "float64", complex: "complex128", bool: "boolean"}
_SIGNATURE_FORMS = (
    "a signature is a string such as 'float32[::1], int64' (or 'void(float32[::1], int64)'), or a "
    "tuple whose entries are numba types (numba.float32[::1]), numpy scalar types or dtypes "
    "(np.float32, np.dtype('f4'): scalars), int/float/complex/bool, or strings ('float32[::1]')"
)


class Kernel:
    """A kernel definition, what ``@kernel`` and ``@cuda_kernel`` make; backends compile and launch it.

    Made by the decorators rather than directly. It is not callable: launch it with
    ``backend.launch_kernel(k, grid, block, *args)``.

    Attributes:
        py_func: the Python function as written.
        kind: "thread" (``@kernel``) or "cuda" (``@cuda_kernel``).
        ndim: the number of index parameters (``@kernel``; 1 for CUDA kernels).
        name: the function's name; ``qualname`` is ``module.qualname``.
        min_cc: the oldest compute capability it runs on, ``(major, minor)``, or None.
        params: the names of the kernel's arguments (the index parameters excluded).
        cpu_twin: a CUDA kernel's registered CPU implementation, or None.
    """

    def __init__(self, py_func: Callable[..., object], *, kind: str, ndim: int = 1, min_cc: ComputeCapability = None,
                 signature: Any = None, fastmath: bool = False, debug: bool = False) -> None:
        if not callable(py_func) or not hasattr(py_func, "__code__"):
            raise TypeError(f"a kernel must be a Python function (got {type(py_func).__name__})")
        if kind not in ("thread", "cuda"):
            raise ValueError(f"kind must be 'thread' or 'cuda' (got {kind!r})")
        if ndim not in (1, 2, 3):
            raise ValueError(f"ndim must be 1, 2 or 3 (got {ndim!r})")
        self.py_func = py_func
        self.kind = kind
        self.ndim = ndim
        self.name = py_func.__name__
        self.qualname = f"{py_func.__module__}.{py_func.__qualname__}"
        self.min_cc = _normalize_cc(min_cc)
        self.raw_signature = signature
        self.options = {"fastmath": bool(fastmath)}
        if debug:  # a cuda.jit(debug=True) kernel: CPUBackend runs it checked (raises as the GPU does)
            self.options["debug"] = True
        self.cpu_twin = None
        self.params = self._parameters()
        functools.update_wrapper(self, py_func)

    def _parameters(self) -> tuple[str, ...]:
        sig = inspect.signature(self.py_func)
        for p in sig.parameters.values():
            if p.kind not in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD):
                raise TypeError(
                    f"kernel {self.name!r}: parameter {p.name!r} must be positional "
                    f"(kernels take no *args, **kwargs or keyword-only parameters)"
                )
            if p.default is not p.empty:
                raise TypeError(f"kernel {self.name!r}: parameter {p.name!r} may not have a default")
        names = tuple(sig.parameters)
        if self.kind == "thread":
            if len(names) < self.ndim:
                raise TypeError(
                    f"kernel {self.name!r} is {self.ndim}-D, so its first {self.ndim} parameters "
                    f"must be the thread index (got parameters {names})"
                )
            return names[self.ndim :]
        return names

    @functools.cached_property
    def signature(self):
        """The declared argument types as a tuple of numba types, or None."""
        if self.raw_signature is None:
            return None
        return self.parse_signature(self.raw_signature)

    def parse_signature(self, raw) -> tuple:
        """Numba types of the user arguments, from any of the accepted signature forms.

        ``raw`` is a string (``"float64[::1], int64"`` or ``"void(float64[::1], int64)"``),
        a numba signature, or a tuple/list whose entries are numba types
        (``numba.float32[::1]``), numpy scalar types or dtypes (``np.float32``,
        ``np.dtype("f4")``: scalars), Python ``int``/``float``/``complex``/``bool`` or
        strings naming one type (``"float32[::1]"``).
        """
        from numba.core import sigutils  # lazy: importing kernelrt loads no numba

        if isinstance(raw, (tuple, list)):
            args = tuple(self._entry_type(entry, i) for i, entry in enumerate(raw))
        else:
            if isinstance(raw, str) and "(" not in raw:
                raw = f"void({raw})"
            try:
                args, _ = sigutils.normalize_signature(raw)
            except Exception as e:
                raise TypeError(
                    f"kernel {self.name!r}: cannot parse signature {raw!r}: {e}; {_SIGNATURE_FORMS}"
                ) from None
        if len(args) != len(self.params):
            raise TypeError(
                f"kernel {self.name!r}: signature has {len(args)} argument types but the "
                f"kernel takes {len(self.params)} arguments {self.params}"
            )
        return tuple(args)

    def _entry_type(self, entry, i: int):
        """The numba type of one entry of a tuple signature."""
        import numba  # lazy: importing kernelrt loads no numba
        import numpy as np
        from numba.core import sigutils  # lazy: importing kernelrt loads no numba

        if isinstance(entry, numba.types.Type):
            return entry
        if isinstance(entry, type) and entry in _PYTHON_SCALARS:
            return getattr(numba.types, _PYTHON_SCALARS[entry])
        if isinstance(entry, np.dtype) or (isinstance(entry, type) and issubclass(entry, np.generic)):
            dtype = np.dtype(entry)
            if dtype.kind in "biufc":
                return numba.from_dtype(dtype)
        elif isinstance(entry, str):
            try:
                (parsed,), _ = sigutils.normalize_signature(f"void({entry})")
                return parsed
            except Exception:
                pass
        raise TypeError(
            f"kernel {self.name!r}: signature entry {i} ({self.params[i] if i < len(self.params) else '?'}) "
            f"is not a type (got {type(entry).__name__}: {entry!r}); {_SIGNATURE_FORMS}"
        )

    def copy(self) -> "Kernel":
        """A new definition with the same source and options but no compiled code yet.

        Its first compilation goes to the disk cache, as in a fresh process: the cache
        benchmarks and tests use it to measure loads without starting processes.
        """
        twin = self.cpu_twin
        out = Kernel(self.py_func, kind=self.kind, ndim=self.ndim, min_cc=self.min_cc,
                     signature=self.raw_signature, fastmath=self.options["fastmath"])
        out.cpu_twin = twin
        return out

    def cpu(self, twin: Callable[..., object]) -> Kernel:
        """Register ``twin(grid, block, *args)`` as this CUDA kernel's CPU implementation.

        Used as a decorator, ``@k.cpu``. The twin is compiled with ``njit(parallel=True)``
        and gets the launch's grid and block as 3-tuples; it must give the CUDA kernel's
        results (it replaces the automatic translation of the kernel's source).

        Args:
            twin: a function of ``(grid, block, *args)``, ``args`` named as the kernel's.

        Returns:
            This kernel (so the decorated name stays the kernel).

        Raises:
            TypeError: this is not a ``@cuda_kernel``, or the twin's parameters differ.
        """
        if self.kind != "cuda":
            raise TypeError(f"kernel {self.name!r} already runs on the CPU; only @cuda_kernel takes a twin")
        params = tuple(inspect.signature(twin).parameters)
        if params[2:] != self.params or len(params) != len(self.params) + 2:
            raise TypeError(
                f"the CPU twin of {self.name!r} must take (grid, block, {', '.join(self.params)}) "
                f"(got {params})"
            )
        self.cpu_twin = twin
        return self

    def __call__(self, *args: object, **kwargs: object) -> NoReturn:
        raise BackendMismatchError(
            f"kernel {self.name!r} is not called directly; launch it with "
            f"backend.launch_kernel({self.name}, grid, block, *args) or "
            f"backend.compile_kernel({self.name})[grid, block](*args)"
        )

    def __repr__(self):
        extra = f", min_cc={self.min_cc}" if self.min_cc else ""
        return f"<kernelrt {self.kind} kernel {self.qualname} ndim={self.ndim}{extra}>"


def _normalize_cc(cc):
    if cc is None:
        return None
    if isinstance(cc, (int, float)) and not isinstance(cc, bool):
        major, minor = str(float(cc)).split(".")
        return (int(major), int(minor))
    if isinstance(cc, tuple) and len(cc) == 2 and all(isinstance(x, int) for x in cc):
        return cc
    raise ValueError(f"min_cc must be a (major, minor) tuple such as (6, 0) (got {cc!r})")


def adopt(func) -> Kernel | None:
    """The ``@cuda_kernel`` behind a plain numba.cuda-style function or ``cuda.jit`` dispatcher.

    The same Kernel each time for the same Python function and ``fastmath`` (so its
    compiled code is reused); the dispatcher's ``fastmath`` carries over. It is kept on the
    function itself, so it goes when the function does. None if ``func`` is neither.

    Raises:
        BackendMismatchError: ``func`` is a ``cuda.jit(device=True)`` function.
    """
    options = getattr(func, "targetoptions", None) or {}
    if options.get("device") or getattr(func, "_device", False) is True:  # numba-cuda's, the simulator's
        raise BackendMismatchError(
            f"{getattr(func, '__name__', func)!r} is a device function (cuda.jit(device=True)): "
            f"kernels call it; launch a kernel instead"
        )
    py_func = getattr(func, "py_func", None) or getattr(func, "fn", None) or func  # fn: the CUDA simulator's
    if not callable(py_func) or not hasattr(py_func, "__code__"):
        return None
    fastmath = bool(options.get("fastmath", False) or getattr(func, "_fastmath", False))
    debug = bool(options.get("debug", False) or getattr(func, "_debug", False))
    adopted = py_func.__dict__.setdefault("__kernelrt_kernels__", {})
    if (fastmath, debug) not in adopted:
        adopted[fastmath, debug] = Kernel(py_func, kind="cuda", fastmath=fastmath, debug=debug)
    return adopted[fastmath, debug]


@overload
def kernel(func: Callable[..., object], *, ndim: int = 1, min_cc: ComputeCapability = None, signature: Any = None,
           fastmath: bool = False) -> Kernel: ...
@overload
def kernel(func: None = None, *, ndim: int = 1, min_cc: ComputeCapability = None, signature: Any = None,
           fastmath: bool = False) -> Callable[[Callable[..., object]], Kernel]: ...
def kernel(func: Callable[..., object] | None = None, *, ndim: int = 1, min_cc: ComputeCapability = None,
           signature: Any = None, fastmath: bool = False) -> Kernel | Callable[[Callable[..., object]], Kernel]:
    """Make a per-thread function a kernel that runs on CUDA GPUs and on the CPU cores.

    The function's first ``ndim`` parameters are the thread's global index (x, then y, then
    z, as CUDA's ``cuda.grid(ndim)``); the others are the kernel's arguments, arrays and
    scalars, and it returns nothing: it writes into its arrays. Launched over ``grid`` x
    ``block`` threads per axis it runs once per index: a CUDA thread on a GPU, an iteration
    of a parallel loop on the CPU, with the same result. The index space is rounded up to
    whole blocks, so guard the index as in CUDA. The body is numba code (scalars, arrays,
    ``math``, loops; no Python objects). It is compiled at its first launch for the argument
    types given (or at ``compile_kernel`` with ``signature``), through the disk cache, so
    other processes load it instead of compiling.

    Use it bare (``@kernelrt.kernel``) or with options (``@kernelrt.kernel(ndim=2)``).

    Args:
        func: the per-thread function (the bare form passes it).
        ndim: 1, 2 or 3: the number of index parameters and of grid axes.
        min_cc: the oldest CUDA compute capability the kernel may run on, ``(major, minor)``
            or a number (``6.0`` for fp64 atomics); a launch on an older device raises
            ``ComputeCapabilityError``. None: any.
        signature: the argument types, the index excluded (``"float64[::1], float64"``;
            ``Backend.compile_kernel`` lists every accepted form). It makes compilation eager
            and each launch's arguments checked against it. None: compiled per argument
            types, at the first launch.
        fastmath: allow reassociation and approximate maths (faster; the last bits may
            differ between backends).

    Returns:
        A ``Kernel``, or with options alone the decorator that makes one. Launch it with
        ``backend.launch_kernel(k, grid, block, *args)`` or
        ``backend.compile_kernel(k)[grid, block](*args)``; calling it directly raises
        ``BackendMismatchError``.

    Raises:
        TypeError: ``func`` is not a Python function, has fewer than ``ndim`` parameters,
            or one with a default, ``*args`` or keyword-only.
        ValueError: ``ndim`` is not 1, 2 or 3, or ``min_cc`` is malformed.

    Examples:
        >>> import numpy as np
        >>> import kernelrt
        >>> @kernelrt.kernel
        ... def axpy(i, out, x, y, a):
        ...     if i < out.shape[0]:  # the grid is rounded up to whole blocks
        ...         out[i] = a * x[i] + y[i]
        >>> backend = kernelrt.get_backend("auto")  # CUDA if available, else the CPU
        >>> x = backend.to_device(np.arange(5.0))
        >>> out = backend.zeros(5, dtype=np.float64)
        >>> backend.launch_kernel(axpy, 1, 32, out, x, x, 2.0)  # 1 block of 32 threads
        >>> backend.to_host(out)
        array([ 0.,  3.,  6.,  9., 12.])
    """

    def wrap(f: Callable[..., object]) -> Kernel:
        return Kernel(f, kind="thread", ndim=ndim, min_cc=min_cc, signature=signature, fastmath=fastmath)

    return wrap(func) if func is not None else wrap


@overload
def cuda_kernel(func: Callable[..., object], *, min_cc: ComputeCapability = None, signature: Any = None,
                fastmath: bool = False) -> Kernel: ...
@overload
def cuda_kernel(func: None = None, *, min_cc: ComputeCapability = None, signature: Any = None,
                fastmath: bool = False) -> Callable[[Callable[..., object]], Kernel]: ...
def cuda_kernel(func: Callable[..., object] | None = None, *, min_cc: ComputeCapability = None, signature: Any = None,
                fastmath: bool = False) -> Kernel | Callable[[Callable[..., object]], Kernel]:
    """Adopt a ``numba.cuda``-style kernel (``cuda.grid``, shared memory, atomics).

    It launches on CUDA backends as written. On the CPU it runs through a twin registered
    with ``@k.cpu`` (a function ``twin(grid, block, *args)``, grid and block 3-tuples,
    compiled with ``njit(parallel=True)``), or else through a translation of its source,
    which refuses shared memory, barriers and warp intrinsics by name
    (``CpuTranslationError``, before anything compiles). Plain functions and
    ``@cuda.jit`` dispatchers passed to ``launch_kernel`` are adopted the same way.

    Args:
        func: the kernel function (the bare form passes it).
        min_cc: as for ``kernel``.
        signature: as for ``kernel``: the argument types, for eager compilation.
        fastmath: as for ``kernel``.

    Returns:
        A ``Kernel``, or with options alone the decorator that makes one.

    Raises:
        TypeError: ``func`` is not a Python function, or a parameter is not positional.
        ValueError: ``min_cc`` is malformed.
    """

    def wrap(f: Callable[..., object]) -> Kernel:
        return Kernel(f, kind="cuda", min_cc=min_cc, signature=signature, fastmath=fastmath)

    return wrap(func) if func is not None else wrap


@overload
def device(func: _F, *, inline: str = "never") -> _F: ...
@overload
def device(func: None = None, *, inline: str = "never") -> Callable[[_F], _F]: ...
def device(func: _F | None = None, *, inline: str = "never") -> _F | Callable[[_F], _F]:
    """Decorate a device function that kernels call on every backend.

    It is numba's ``register_jitable``: callable from ``@kernel`` bodies compiled for the
    CPU and for CUDA (and from plain Python). Its source, and what it reads, is part of
    the cache key of every kernel that calls it, in whatever module it lives.

    Args:
        func: the function (the bare form passes it).
        inline: numba's inlining: "never" (the default) or "always".

    Returns:
        The function, callable from kernels (or, with options alone, the decorator).
    """

    def wrap(f: _F) -> _F:
        from numba.extending import register_jitable  # lazy: importing kernelrt loads no numba

        return register_jitable(inline=inline)(f)  # type: ignore[no-any-return]  # numba is untyped

    return wrap(func) if func is not None else wrap
