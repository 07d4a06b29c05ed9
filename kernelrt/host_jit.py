"""``kernelrt.njit``: a numba ``njit`` function whose machine code goes through kernelrt's checked disk cache.

For the plain numba functions that a kernel library calls from the host, beside its
kernels: kernelrt's own eigensolver helpers (the supernodal Cholesky, the Krylov basis
products, the pre-solve scans). Numba's ``cache=True`` keeps such functions beside the
source (or in ``NUMBA_CACHE_DIR``) and unpickles its index and machine code without the
owner, mode and SHA-256 checks that kernelrt's cache makes (docs/cache.md, "Integrity and
trust"), and its key misses edits to a callee in another file and to global constants.

Here a call with argument types the function has not been compiled for is answered as a
kernel's launch is (compiler.py): the key is the function's code and everything it reads,
callees in any module included (cache_key.py), the argument types, the options, the CPU
target, numba's code-generation settings and the toolchain versions; a checked entry is
loaded, else the function is compiled once under the key's lock (other processes wait,
then load) and stored. What is stored is what numba's own cache writes
(``CompileResult._reduce()``). A function called only from other compiled code is compiled
into its caller, as numba does, and cached as part of it.
"""

from __future__ import annotations

import functools
from typing import Any, Callable

from .cache_key import KeyBuilder, codegen_settings, cpu_target, function_fingerprint, toolchain_versions
from .compiler import through_cache
from .cpu_threads import prepare_threading_layer
from .disk_cache import disk_cache_for
from .numba_internals import add_cpu_overload, cpu_overload_state, on_missing_overload

__all__ = ["njit"]


def njit(func: Callable | None = None, **options: Any) -> Any:
    """``numba.njit(**options)``, its compiled code kept in kernelrt's disk cache.

    Use it as ``@kernelrt.njit`` or ``@kernelrt.njit(parallel=True, nogil=True)``. The result
    is a numba dispatcher: call it from Python or from other numba functions. The cache is
    the default one (``KERNELRT_CACHE_DIR``; off with ``KERNELRT_CACHE=0``).

    Raises:
        TypeError: ``cache`` is given (the cache is kernelrt's), or ``func`` is not a function.
    """
    if "cache" in options:
        raise TypeError("kernelrt.njit keeps compiled code in kernelrt's disk cache: do not pass cache=")

    def decorate(f):
        if not callable(f) or not hasattr(f, "__code__"):
            raise TypeError(f"kernelrt.njit decorates a Python function (got {f!r})")
        import numba  # lazy: importing kernelrt loads no numba

        if options.get("parallel"):
            prepare_threading_layer()
        dispatcher = numba.njit(**options)(f)
        settings = repr(sorted(options.items()))
        on_missing_overload(dispatcher, functools.partial(_ensure, dispatcher, settings))
        return dispatcher

    return decorate(func) if func is not None else decorate


def _ensure(dispatcher, settings: str, *args) -> tuple:
    """Give ``dispatcher`` an overload for ``args``' types, from the disk cache or compiled; its key.

    (numba's dispatcher has folded keyword arguments into ``args`` before it calls this.)
    """
    name = f"{dispatcher.py_func.__module__}.{dispatcher.py_func.__qualname__}"
    argtypes = tuple(dispatcher.typeof_pyval(a) for a in args)
    if argtypes in dispatcher.overloads:
        return argtypes
    target = f"cpu:{cpu_target()}"
    key = (KeyBuilder().add("function", name).add("code", function_fingerprint(dispatcher.py_func))
           .add("signature", ", ".join(map(str, argtypes))).add("options", settings).add("target", target)
           .add("codegen", codegen_settings("cpu")).add("versions", toolchain_versions("cpu")).digest())

    def compile_fn():
        dispatcher.compile(argtypes)
        return dispatcher.overloads[argtypes]

    meta = {"kernel": name, "target": target, "signature": str(argtypes)}
    through_cache(disk_cache_for(), key, meta, compile_fn, cpu_overload_state,
                  lambda state, _meta: add_cpu_overload(dispatcher, state), lambda: argtypes in dispatcher.overloads)
    return argtypes
