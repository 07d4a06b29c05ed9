"""``numba.cuda.atomic`` for kernels that the CPU backend runs: real atomics, in parallel.

A translated CUDA kernel (cuda_on_cpu.py) runs its threads as iterations of a
``prange`` loop on several cores, so ``cuda.atomic.add(hist, b, 1)`` must be atomic
there too. Each operation is one LLVM atomic instruction on the element's address,
with the semantics of numba-cuda's (numba/cuda/cudaimpl.py, cudadrv/nvvm.py), "monotonic"
(relaxed) ordering as on the GPU, and the same indexing: an int or a tuple of ints,
negative indices wrapping around. The parallel loop's join orders everything before the
host reads the arrays.

* ``add``, ``sub`` (ints and floats), ``and_``, ``or_``, ``xor``, ``exch`` (ints),
  ``max``, ``min`` on ints, ``inc``, ``dec`` (unsigned): ``atomicrmw`` (``uinc_wrap`` and
  ``udec_wrap`` are CUDA's inc and dec exactly).
* ``max``, ``min``, ``nanmax``, ``nanmin`` on floats: a compare-and-swap loop with
  numba-cuda's NaN rules: ``max``/``min`` leave the element alone when it or the value
  is NaN; ``nanmax``/``nanmin`` ignore a NaN value and replace a NaN element.
* ``cas(ary, idx, old, val)`` and ``compare_and_swap(ary, old, val)`` (first element):
  ``cmpxchg``; they return the value found, as CUDA's do.

Built with numba's extension API (``intrinsic``, ``overload``, ``cgutils``). Two sets of
stubs: ``OPERATIONS``, and ``CHECKED_OPERATIONS`` for the debug mode, compiled with bounds
checking so that a bad index raises IndexError like ``ary[idx]``. Read-only arrays are
refused when the kernel is typed, as a store into them is.
"""

from __future__ import annotations

import math
import types as types_module

from numba import types
from numba.core import cgutils
from numba.core.errors import TypingError
from numba.core.typing import signature
from numba.extending import intrinsic, overload, register_jitable

__all__ = ["CHECKED_OPERATIONS", "OPERATIONS"]

_INTS = (types.int32, types.int64, types.uint32, types.uint64)
_UNSIGNED = (types.uint32, types.uint64)
_FLOATS = (types.float32, types.float64)


def _index_types_ok(idx) -> bool:
    if isinstance(idx, types.Integer):
        return True
    return isinstance(idx, types.BaseTuple) and all(isinstance(t, types.Integer) for t in idx.types)


def _element_pointer(context, builder, aryty, ary, idxty, idx):
    """Address of ``ary[idx]`` (wrapping negative indices, bounds-checked in debug mode)."""
    if isinstance(idxty, types.BaseTuple):
        raw = cgutils.unpack_tuple(builder, idx, len(idxty.types))
        idx_types = idxty.types
    else:
        raw, idx_types = [idx], [idxty]
    indices = [context.cast(builder, v, t, types.intp) for v, t in zip(raw, idx_types)]
    if len(indices) != aryty.ndim:
        raise TypeError(f"atomic on a {aryty.ndim}-D array takes {aryty.ndim} indices (got {len(indices)})")
    array = context.make_array(aryty)(context, builder, ary)
    return cgutils.get_item_pointer(context, builder, aryty, array, indices, wraparound=True,
                                    boundscheck=context.enable_boundscheck)


def _rmw(op: str, allowed):
    """An intrinsic ``(ary, idx, val) -> old`` doing ``atomicrmw op`` on ``ary[idx]``."""

    @intrinsic
    def rmw(typingctx, ary, idx, val):
        if not (isinstance(ary, types.Array) and ary.dtype in allowed and _index_types_ok(idx)):
            return None

        def codegen(context, builder, sig, args):
            aryty, idxty, valty = sig.args
            ptr = _element_pointer(context, builder, aryty, args[0], idxty, args[1])
            value = context.cast(builder, args[2], valty, aryty.dtype)
            return builder.atomic_rmw(op, ptr, value, "monotonic")

        return signature(ary.dtype, ary, idx, val), codegen

    return rmw


@intrinsic
def _cas(typingctx, ary, idx, old, val):
    """``(ary, idx, old, val) -> (found, swapped)``; floats compare by bit pattern (NaN too)."""
    if not (isinstance(ary, types.Array) and ary.dtype in _INTS + _FLOATS and _index_types_ok(idx)):
        return None

    def codegen(context, builder, sig, args):
        aryty, idxty, oldty, valty = sig.args
        dtype = aryty.dtype
        ptr = _element_pointer(context, builder, aryty, args[0], idxty, args[1])
        expected = context.cast(builder, args[2], oldty, dtype)
        new = context.cast(builder, args[3], valty, dtype)
        if dtype in _FLOATS:  # cmpxchg takes integers: swap the bit patterns
            bits = context.get_value_type(types.int64 if dtype == types.float64 else types.int32)
            ptr = builder.bitcast(ptr, bits.as_pointer())
            expected, new = builder.bitcast(expected, bits), builder.bitcast(new, bits)
        pair = builder.cmpxchg(ptr, expected, new, "monotonic", "monotonic")
        found, swapped = builder.extract_value(pair, 0), builder.extract_value(pair, 1)
        if dtype in _FLOATS:
            found = builder.bitcast(found, context.get_value_type(dtype))
        return context.make_tuple(builder, sig.return_type, [found, swapped])

    return signature(types.Tuple((ary.dtype, types.boolean)), ary, idx, old, val), codegen


# -- floats: compare-and-swap loops with numba-cuda's NaN rules ------------------------------


def _float_minmax_py(ary, idx, val, is_max, nan_aware):
    old = ary[idx]
    if math.isnan(val):  # a NaN value: max/min and nanmax/nanmin all leave the element alone
        return old
    if math.isnan(old) and not nan_aware:  # max/min never replace a NaN element
        return old
    while True:
        if not math.isnan(old):  # ordered: swap only if val is strictly better
            better = val > old if is_max else val < old
        else:  # NaN element (nanmax/nanmin only): replace it
            better = True
        if not better:
            return old
        found, swapped = _cas(ary, idx, old, val)
        if swapped:
            return old
        old = found


def _copy(func, name: str):
    """A second function object with ``func``'s code: numba registers options per object."""
    return types_module.FunctionType(func.__code__, func.__globals__, name, func.__defaults__)


_float_minmax = register_jitable(_copy(_float_minmax_py, "_float_minmax"))
_float_minmax_checked = register_jitable(boundscheck=True)(_copy(_float_minmax_py, "_float_minmax_checked"))

# -- the operations, as the translated kernel calls them --------------------------------------

_add_int, _add_float = _rmw("add", _INTS), _rmw("fadd", _FLOATS)
_sub_int, _sub_float = _rmw("sub", _INTS), _rmw("fsub", _FLOATS)
_max_signed, _max_unsigned = _rmw("max", (types.int32, types.int64)), _rmw("umax", _UNSIGNED)
_min_signed, _min_unsigned = _rmw("min", (types.int32, types.int64)), _rmw("umin", _UNSIGNED)
_and, _or, _xor, _exch = (_rmw(op, _INTS) for op in ("and", "or", "xor", "xchg"))
_inc, _dec = _rmw("uinc_wrap", _UNSIGNED), _rmw("udec_wrap", _UNSIGNED)

_NAMES = ("add", "sub", "max", "min", "nanmax", "nanmin", "and_", "or_", "xor", "exch", "inc", "dec", "cas",
          "compare_and_swap")


def _writable(ary, name: str) -> None:
    if isinstance(ary, types.Array) and not ary.mutable:
        raise TypingError(f"cuda.atomic.{name} on a read-only array (got {ary}); pass a writeable array")


def _operations(checked: bool) -> dict:
    """``cuda.atomic.<name>`` -> a stub whose CPU overloads do it; ``checked``: the overloads
    are compiled with bounds checking (the debug mode), so a bad index raises IndexError."""
    jit_options = {"boundscheck": True} if checked else {}
    minmax = _float_minmax_checked if checked else _float_minmax

    def stub(name):
        def atomic(*args):  # never called from Python: numba compiles the overload instead
            raise TypeError(f"cuda.atomic.{name} runs only inside a kernel")
        atomic.__name__ = atomic.__qualname__ = f"atomic_{name}" + ("_checked" if checked else "")
        return atomic

    ops = {name: stub(name) for name in _NAMES}

    def by_dtype(name, ints, floats=None, unsigned=None):
        @overload(ops[name], target="cpu", jit_options=jit_options)
        def impl(ary, idx, val):
            if not isinstance(ary, types.Array):
                return None
            _writable(ary, name)
            if unsigned is not None and ary.dtype in _UNSIGNED:
                return lambda ary, idx, val: unsigned(ary, idx, val)
            if ints is not None and ary.dtype in _INTS:
                return lambda ary, idx, val: ints(ary, idx, val)
            if floats is not None and ary.dtype in _FLOATS:
                return floats
            return None

    by_dtype("add", _add_int, lambda ary, idx, val: _add_float(ary, idx, val))
    by_dtype("sub", _sub_int, lambda ary, idx, val: _sub_float(ary, idx, val))
    by_dtype("max", _max_signed, lambda ary, idx, val: minmax(ary, idx, val, True, False), _max_unsigned)
    by_dtype("min", _min_signed, lambda ary, idx, val: minmax(ary, idx, val, False, False), _min_unsigned)
    by_dtype("nanmax", _max_signed, lambda ary, idx, val: minmax(ary, idx, val, True, True), _max_unsigned)
    by_dtype("nanmin", _min_signed, lambda ary, idx, val: minmax(ary, idx, val, False, True), _min_unsigned)
    for name, op in (("and_", _and), ("or_", _or), ("xor", _xor), ("exch", _exch)):
        by_dtype(name, op)
    by_dtype("inc", None, None, _inc)
    by_dtype("dec", None, None, _dec)

    @overload(ops["cas"], target="cpu", jit_options=jit_options)
    def _cas_impl(ary, idx, old, val):
        if isinstance(ary, types.Array) and ary.dtype in _INTS:
            _writable(ary, "cas")
            return lambda ary, idx, old, val: _cas(ary, idx, old, val)[0]
        return None

    @overload(ops["compare_and_swap"], target="cpu", jit_options=jit_options)
    def _compare_and_swap_impl(ary, old, val):
        if isinstance(ary, types.Array) and ary.dtype in _INTS:
            _writable(ary, "compare_and_swap")
            zero = (0,) * ary.ndim if ary.ndim > 1 else 0
            return lambda ary, old, val: _cas(ary, zero, old, val)[0]
        return None

    return ops


OPERATIONS = _operations(checked=False)
CHECKED_OPERATIONS = _operations(checked=True)
