"""Explicit SIMD for the supernodal solve's small supernodes: sums of scaled rows, 8 values at a time.

Owns two numba intrinsics over flat float64 arrays (any C-contiguous shape, indexed as one
dimension), which supernodal.py's solve calls on rows of its row-major block:

* ``sub_products``: ``out[o + p·ostep + l] = (out[...] - Σ_q A[a + p·sp + q·sq] · inp[i + q·istep + l]) · scale``
  for p < P, q < Q, l < lanes. Each output row is loaded once, takes its Q scaled rows in a
  register and is stored once, divided by its pivot on the way (``scale``).
* ``copy_row``: one row of ``lanes`` values, moved as one vector.
* ``prefetch``: a cache line asked for ahead of its use (LLVM's ``llvm.prefetch``).

The lanes are one LLVM vector of 8 doubles (one AVX-512 register, two AVX2 ones); fewer
than 8 mask the loads and stores, so a block of any width runs through the same code, 8
columns at a time. Rows are written whole: a row stored as scalars and then loaded as one
vector stalls the load (the CPU cannot forward several narrow stores to one wide load).

Why not plain numba loops: at the solve's block width (8 right-hand sides) LLVM's loop
vectorizer leaves the loop over the columns scalar (8 iterations are fewer than its
vector body, and it cannot prove that two rows of the same array do not overlap). At
163,842 vertices the supernodes with fewer than 1,024 entries (22,013 of 23,093, 43% of
the factor) took 33 ms of a 51 ms solve of 8 columns as scalar loops, and 18.5 ms as
these vectors (Intel Xeon, one thread). The caller keeps every index in bounds: nothing
here is checked.
"""

from __future__ import annotations

from llvmlite import ir
from numba import types
from numba.core import cgutils
from numba.extending import intrinsic

__all__ = ["LANES", "copy_row", "prefetch", "sub_products"]

LANES = 8
_F64 = ir.DoubleType()
_VEC = ir.VectorType(_F64, LANES)
_MASK = ir.VectorType(ir.IntType(1), LANES)
_I32 = ir.IntType(32)


def _masked(builder, name: str, args_types, result):
    # llvm.masked.load/store: what AVX-512 masks (and AVX's vmaskmov) do in one instruction
    fnty = ir.FunctionType(result, args_types)
    return cgutils.get_or_insert_function(builder.module, fnty, name)


def _splat(builder, x, vector=_VEC):
    # x in every lane
    v = builder.insert_element(ir.Constant(vector, ir.Undefined), x, ir.Constant(_I32, 0))
    zeros = ir.Constant(ir.VectorType(_I32, LANES), [0] * LANES)
    return builder.shuffle_vector(v, ir.Constant(vector, ir.Undefined), zeros)


def _lanes_mask(builder, count):
    # the lanes below count: a partial row's mask
    vector = ir.VectorType(count.type, LANES)
    return builder.icmp_signed("<", ir.Constant(vector, list(range(LANES))), _splat(builder, count, vector))


def _load_store(builder, mask):
    """(load(base, index), store(value, base, index)) of one row of lanes; mask None: all of them."""
    vptr = _VEC.as_pointer()
    align = ir.Constant(_I32, 8)

    def load(base, index):
        p = builder.bitcast(builder.gep(base, [index]), vptr)
        if mask is None:
            return builder.load(p, align=8)
        fn = _masked(builder, "llvm.masked.load.v8f64.p0", [vptr, _I32, _MASK, _VEC], _VEC)
        return builder.call(fn, [p, align, mask, ir.Constant(_VEC, None)])

    def store(value, base, index):
        p = builder.bitcast(builder.gep(base, [index]), vptr)
        if mask is None:
            builder.store(value, p, align=8)
        else:
            fn = _masked(builder, "llvm.masked.store.v8f64.p0", [_VEC, vptr, _I32, _MASK], ir.VoidType())
            builder.call(fn, [value, p, align, mask])

    return load, store


def _emit(context, builder, ptrs, ints, mask):
    """The loop nest of ``sub_products``; ``mask`` None means all lanes (plain loads)."""
    out, A, inp = ptrs
    o, ostep, a, sp, sq, i, istep, P, Q, d = ints
    load, store = _load_store(builder, mask)
    acc = cgutils.alloca_once(builder, _VEC)  # promoted to a register by LLVM
    with cgutils.for_range(builder, P) as outer:
        p = outer.index
        row = builder.add(o, builder.mul(p, ostep))
        builder.store(load(out, row), acc)
        coef = builder.add(a, builder.mul(p, sp))
        with cgutils.for_range(builder, Q) as inner:
            q = inner.index
            splat = _splat(builder, builder.load(builder.gep(A, [builder.add(coef, builder.mul(q, sq))])))
            x = load(inp, builder.add(i, builder.mul(q, istep)))
            # contract: one fused multiply-subtract per lane where the CPU has FMA
            product = builder.fmul(splat, x, flags=("contract",))
            builder.store(builder.fsub(builder.load(acc), product, flags=("contract",)), acc)
        store(builder.fmul(builder.load(acc), _splat(builder, d)), out, row)


def _by_lanes(builder, count, emit):
    # emit(mask) for a whole row (plain loads and stores) or a partial one (masked)
    with builder.if_else(builder.icmp_signed(">=", count, ir.Constant(count.type, LANES))) as (whole, part):
        with whole:
            emit(None)
        with part:
            emit(_lanes_mask(builder, count))


def _is_f64(*arrays) -> bool:
    return all(isinstance(x, types.Array) and x.dtype == types.float64 and x.layout == "C" for x in arrays)


def _as_intp(context, builder, signature, args, positions):
    return [context.cast(builder, args[k], signature.args[k], types.intp) for k in positions]


@intrinsic
def sub_products(typingctx, out, o, ostep, A, a, sp, sq, inp, i, istep, P, Q, lanes, scale):
    """``out[o + p ostep + l] = (out[...] - Σ_q A[a + p sp + q sq] inp[i + q istep + l]) scale``.

    See the module docstring; ``scale`` (a float) multiplies each row as it is stored: the
    triangular solve's division by the pivot, in the same register (1.0 leaves it exact).
    """
    ints = (o, ostep, a, sp, sq, i, istep, P, Q, lanes)
    if not (_is_f64(out, A, inp) and all(isinstance(x, types.Integer) for x in ints)
            and isinstance(scale, types.Float)):
        return None
    sig = types.void(out, o, ostep, A, a, sp, sq, inp, i, istep, P, Q, lanes, scale)

    def codegen(context, builder, signature, args):
        ptrs = [context.make_array(signature.args[k])(context, builder, args[k]).data for k in (0, 3, 7)]
        ints = _as_intp(context, builder, signature, args, (1, 2, 4, 5, 6, 8, 9, 10, 11))
        d = context.cast(builder, args[13], signature.args[13], types.float64)
        count = _as_intp(context, builder, signature, args, (12,))[0]
        _by_lanes(builder, count, lambda mask: _emit(context, builder, ptrs, ints + [d], mask))
        return context.get_dummy_value()

    return sig, codegen


@intrinsic
def copy_row(typingctx, out, o, inp, i, lanes):
    """``out[o + l] = inp[i + l]`` for l < lanes: a row moved as one vector.

    A row written as scalars and then read as one vector stalls the read (the CPU cannot
    forward several narrow stores to one wide load), so rows that ``sub_products`` reads
    are written whole.
    """
    if not (_is_f64(out, inp) and all(isinstance(x, types.Integer) for x in (o, i, lanes))):
        return None
    sig = types.void(out, o, inp, i, lanes)

    def codegen(context, builder, signature, args):
        dst, src = (context.make_array(signature.args[k])(context, builder, args[k]).data for k in (0, 2))
        o_, i_, count = _as_intp(context, builder, signature, args, (1, 3, 4))

        def emit(mask):
            load, store = _load_store(builder, mask)
            store(load(src, i_), dst, o_)

        _by_lanes(builder, count, emit)
        return context.get_dummy_value()

    return sig, codegen


@intrinsic
def prefetch(typingctx, arr, index):
    """Ask for the cache line of ``arr.flat[index]`` ahead of its use (a hint: nothing changes)."""
    if not (_is_f64(arr) and isinstance(index, types.Integer)):
        return None
    sig = types.void(arr, index)

    def codegen(context, builder, signature, args):
        base = context.make_array(signature.args[0])(context, builder, args[0]).data
        index_ = _as_intp(context, builder, signature, args, (1,))[0]
        ptr = builder.bitcast(builder.gep(base, [index_]), ir.IntType(8).as_pointer())
        fn = cgutils.get_or_insert_function(
            builder.module, ir.FunctionType(ir.VoidType(), [ptr.type, _I32, _I32, _I32]), "llvm.prefetch.p0")
        builder.call(fn, [ptr, ir.Constant(_I32, 0), ir.Constant(_I32, 3), ir.Constant(_I32, 1)])
        return context.get_dummy_value()

    return sig, codegen
