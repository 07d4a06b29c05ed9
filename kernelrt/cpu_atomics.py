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

Built with numba's extension API (``intrinsic``, ``overload``, ``cgutils``). With the
debug mode's bounds checking on, the element address is checked like ``ary[idx]``.
"""

from __future__ import annotations

import math

from numba import types
from numba.core import cgutils
from numba.core.typing import signature
from numba.extending import intrinsic, overload, register_jitable

__all__ = ["OPERATIONS"]

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


@register_jitable
def _float_minmax(ary, idx, val, is_max, nan_aware):
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


# -- the operations, as the translated kernel calls them --------------------------------------

_add_int, _add_float = _rmw("add", _INTS), _rmw("fadd", _FLOATS)
_sub_int, _sub_float = _rmw("sub", _INTS), _rmw("fsub", _FLOATS)
_max_signed, _max_unsigned = _rmw("max", (types.int32, types.int64)), _rmw("umax", _UNSIGNED)
_min_signed, _min_unsigned = _rmw("min", (types.int32, types.int64)), _rmw("umin", _UNSIGNED)
_and, _or, _xor, _exch = (_rmw(op, _INTS) for op in ("and", "or", "xor", "xchg"))
_inc, _dec = _rmw("uinc_wrap", _UNSIGNED), _rmw("udec_wrap", _UNSIGNED)


# Stubs: the translated kernel calls these; numba compiles the overloads registered below.
def atomic_add(ary, idx, val): ...  # noqa: E704
def atomic_sub(ary, idx, val): ...  # noqa: E704
def atomic_max(ary, idx, val): ...  # noqa: E704
def atomic_min(ary, idx, val): ...  # noqa: E704
def atomic_nanmax(ary, idx, val): ...  # noqa: E704
def atomic_nanmin(ary, idx, val): ...  # noqa: E704
def atomic_and_(ary, idx, val): ...  # noqa: E704
def atomic_or_(ary, idx, val): ...  # noqa: E704
def atomic_xor(ary, idx, val): ...  # noqa: E704
def atomic_exch(ary, idx, val): ...  # noqa: E704
def atomic_inc(ary, idx, val): ...  # noqa: E704
def atomic_dec(ary, idx, val): ...  # noqa: E704
def atomic_cas(ary, idx, old, val): ...  # noqa: E704
def atomic_compare_and_swap(ary, old, val): ...  # noqa: E704


def _by_dtype(stub, ints, floats=None, unsigned=None):
    """Register ``stub``'s CPU implementation, chosen by the array's element type."""

    @overload(stub, target="cpu")
    def impl(ary, idx, val):
        if not isinstance(ary, types.Array):
            return None
        if unsigned is not None and ary.dtype in _UNSIGNED:
            return lambda ary, idx, val: unsigned(ary, idx, val)
        if ints is not None and ary.dtype in _INTS:
            return lambda ary, idx, val: ints(ary, idx, val)
        if floats is not None and ary.dtype in _FLOATS:
            return floats
        return None


_by_dtype(atomic_add, _add_int, lambda ary, idx, val: _add_float(ary, idx, val))
_by_dtype(atomic_sub, _sub_int, lambda ary, idx, val: _sub_float(ary, idx, val))
_by_dtype(atomic_max, _max_signed, lambda ary, idx, val: _float_minmax(ary, idx, val, True, False), _max_unsigned)
_by_dtype(atomic_min, _min_signed, lambda ary, idx, val: _float_minmax(ary, idx, val, False, False), _min_unsigned)
_by_dtype(atomic_nanmax, _max_signed, lambda ary, idx, val: _float_minmax(ary, idx, val, True, True), _max_unsigned)
_by_dtype(atomic_nanmin, _min_signed, lambda ary, idx, val: _float_minmax(ary, idx, val, False, True), _min_unsigned)
_by_dtype(atomic_and_, _and)
_by_dtype(atomic_or_, _or)
_by_dtype(atomic_xor, _xor)
_by_dtype(atomic_exch, _exch)
_by_dtype(atomic_inc, None, None, _inc)
_by_dtype(atomic_dec, None, None, _dec)


@overload(atomic_cas, target="cpu")
def _cas_impl(ary, idx, old, val):
    if isinstance(ary, types.Array) and ary.dtype in _INTS:
        return lambda ary, idx, old, val: _cas(ary, idx, old, val)[0]
    return None


@overload(atomic_compare_and_swap, target="cpu")
def _compare_and_swap_impl(ary, old, val):
    if isinstance(ary, types.Array) and ary.dtype in _INTS:
        zero = (0,) * ary.ndim if ary.ndim > 1 else 0
        return lambda ary, old, val: _cas(ary, zero, old, val)[0]
    return None


# cuda.atomic.<name> -> the stub the translated kernel calls
OPERATIONS = {name: globals()[f"atomic_{name}"] for name in (
    "add", "sub", "max", "min", "nanmax", "nanmin", "and_", "or_", "xor", "exch", "inc", "dec", "cas",
    "compare_and_swap")}
