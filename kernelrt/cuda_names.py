"""What a name in a CUDA kernel's source refers to, for the CPU translation (cuda_on_cpu.py).

A name is looked up the way Python would at run time: in the function's globals and
closure (a parameter or local of the same name shadows them), then attribute by
attribute. The result says whether it is a ``numba.cuda`` built-in (``cuda_path``: its
path under ``numba.cuda``, however the module or the name was imported), a CUDA device
function (``device_py_func``), or a callee that cannot write an array (``pure_callee``).
Nothing here is imported at ``import kernelrt``: the translation imports it.
"""

from __future__ import annotations

import ast
import builtins
import functools
import types

__all__ = ["BLOCK_CALLS", "REFUSED", "SUPPORTED", "cuda_path", "device_py_func", "is_bit_count", "np_empty",
           "numba_copy_of", "numba_literal_unroll", "pure_callee", "resolve"]

# CUDA features the CPU translation refuses, and the words that say why.
REFUSED = {
    "cg": "of cooperative groups the CPU backend runs only cuda.cg.this_grid() and its sync()",
}
SUPPORTED = ("grid, gridsize, threadIdx, blockIdx, blockDim, gridDim, laneid, warpsize, atomic.*, "
             "local.array, const.array_like, shared.array, syncthreads*, syncwarp, shfl_*sync, "
             "all/any/eq/ballot_sync, match_*_sync, activemask, lanemask_lt, threadfence*, "
             "types.*, literal_unroll, device functions")
# numba.cuda built-ins that run in blocks (cuda_fission.py, cpu_collectives.py)
BLOCK_CALLS = {
    "syncthreads": "_kr_split:block", "syncwarp": "_kr_split:warp", "shared.array": "_kr_shared",
    "syncthreads_count": "_kr_coll_count", "syncthreads_and": "_kr_coll_and",
    "syncthreads_or": "_kr_coll_or", "shfl_sync": "_kr_coll_shfl_idx", "shfl_up_sync": "_kr_coll_shfl_up",
    "shfl_down_sync": "_kr_coll_shfl_down", "shfl_xor_sync": "_kr_coll_shfl_xor",
    "all_sync": "_kr_coll_all", "any_sync": "_kr_coll_any", "eq_sync": "_kr_coll_eq",
    "ballot_sync": "_kr_coll_ballot", "match_any_sync": "_kr_coll_match_any",
    "match_all_sync": "_kr_coll_match_all", "activemask": "_kr_coll_active",
    "lanemask_lt": "_kr_lanemask_lt", "threadfence": "_kr_fence", "threadfence_block": "_kr_fence",
    "threadfence_system": "_kr_fence", "nanosleep": "_kr_nanosleep",
}
_NUMPY_WRITERS = {"copyto", "put", "place", "putmask", "fill_diagonal", "put_along_axis"}
MISSING = object()


def _chain(node) -> list[str] | None:
    """``["cuda", "threadIdx", "x"]`` for ``cuda.threadIdx.x``; None for other expressions."""
    chain = []
    while isinstance(node, ast.Attribute):
        chain.append(node.attr)
        node = node.value
    if not isinstance(node, ast.Name):
        return None
    chain.append(node.id)
    return chain[::-1]


def resolve(node, ns: dict, local_names: set[str]):
    """The object ``node`` (a name or an attribute chain) refers to, or ``MISSING``."""
    chain = _chain(node)
    if chain is None or chain[0] in local_names:
        return MISSING
    value = ns.get(chain[0], getattr(builtins, chain[0], MISSING))
    for attr in chain[1:]:
        value = getattr(value, attr, MISSING)
    return value


def cuda_path(node, ns: dict, local_names: set[str]) -> str | None:
    """``"grid"``, ``"threadIdx.x"``, ``"atomic.add"``... if ``node`` names a CUDA built-in.

    The first object along the chain that is ``numba.cuda`` or one of its built-ins fixes
    the path; the rest of the chain is appended by name (the simulator's module gets its
    built-ins only while a kernel runs).
    """
    chain = _chain(node)
    if chain is None or chain[0] in local_names:
        return None
    names = _cuda_names()
    value = ns.get(chain[0], MISSING)
    for i, attr in enumerate(chain):
        if i:
            value = getattr(value, attr, MISSING)
        path = names.get(id(value))
        if path is None and isinstance(value, types.ModuleType) and value.__name__.startswith("numba.cuda."):
            path = value.__name__[len("numba.cuda."):]  # imported after the table was made (libdevice)
        if path is not None:
            return ".".join(filter(None, [path, *chain[i + 1 :]]))
        if value is MISSING:
            return None
    return None


def device_py_func(value):
    """The Python function of a CUDA device function or kernel (numba-cuda's or the
    simulator's), or None. numba-cuda compiles a kernel called from a kernel as a device
    function, so both are translated alike."""
    options = getattr(value, "targetoptions", None)
    if isinstance(options, dict) and hasattr(value, "py_func"):
        return value.py_func
    if isinstance(getattr(value, "_device", None), bool) and hasattr(value, "fn"):  # the CUDA simulator
        return value.fn
    return None


def pure_callee(value) -> bool:
    """Whether calling ``value`` cannot write an array argument: builtins, ``math``,
    ``cmath``, numpy's ufuncs and non-mutating functions. Anything else (a jitted helper,
    an array method, an unresolved name) may."""
    import numpy as np

    if value is MISSING:
        return False
    if isinstance(value, np.ufunc):
        return True
    module = getattr(value, "__module__", None) or ""
    if module in ("math", "cmath", "builtins"):  # math.exp, len, min, int, float, range...
        return True
    return module.split(".")[0] == "numpy" and getattr(value, "__name__", "") not in _NUMPY_WRITERS


def is_bit_count(node: ast.Call) -> bool:
    """``x.bit_count()`` (``int.bit_count``)."""
    return isinstance(node.func, ast.Attribute) and node.func.attr == "bit_count" and not node.args


def numba_copy_of(value, name: str) -> bool:
    """Whether ``value`` is numba-cuda's or the simulator's own copy of numba's ``name``."""
    return getattr(value, "__name__", None) == name and (getattr(value, "__module__", "") or "").startswith("numba")


def numba_literal_unroll() -> object:
    """numba.literal_unroll (numba-cuda re-exports its own)."""
    import numba  # lazy: importing kernelrt loads no numba

    return numba.literal_unroll


def np_empty() -> object:
    """numpy.empty, for cuda.local.array."""
    import numpy as np

    return np.empty


@functools.cache
def _cuda_names() -> dict[int, str]:
    """id -> path of the ``numba.cuda`` objects a kernel can name: the module, its built-ins
    (stubs, intrinsics, submodules such as ``libdevice``, however imported) and the atomics.
    numba's own names re-exported by ``numba.cuda`` (types, ``literal_unroll``) are left
    out: kernels use ``numba.float32`` and friends as dtypes."""
    import numba  # lazy: importing kernelrt loads no numba
    from numba import cuda  # lazy: importing kernelrt loads no numba
    from numba.core.types import Type

    names = {id(cuda): ""}
    for attr in dir(cuda):  # the simulator's module has fewer (it swaps them in at launch)
        value = getattr(cuda, attr, None)
        if attr.startswith("_") or value is None or isinstance(value, Type) or getattr(numba, attr, None) is value:
            continue
        if isinstance(value, types.ModuleType):
            inside = value.__name__.startswith("numba.cuda")
        else:
            inside = (getattr(value, "__module__", None) or "").startswith("numba.cuda") or \
                type(value).__module__.startswith("numba.cuda")
        if inside:
            names[id(value)] = attr
    atomic = getattr(cuda, "atomic", None)
    for op in dir(atomic) if atomic is not None else ():
        if not op.startswith("_"):
            names[id(getattr(atomic, op))] = f"atomic.{op}"
    return names
