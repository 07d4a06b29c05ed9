"""``numba.cuda.libdevice`` on the CPU, and the building blocks of cpu_intrinsics.py.

``concrete(name, cases, impl)`` makes a function that numba types as numba-cuda types its
intrinsics and libdevice functions (a ``ConcreteTemplate``: the best of ``cases``, unsafe
conversions included), so a call gets the GPU's argument and result types; ``impl`` runs on
exactly those. Here too: the LLVM intrinsics for the GPU's bit operations and single-rounding
fma (``ctpop ctlz cttz bitreverse fused``) and ``fdiv``.

``LIBDEVICE`` maps a libdevice name (``"sinf"``, ``"popcll"``...) to its CPU function, with
numba-cuda's signature (libdevicefuncs.py: ``int32``/``int64`` even where libdevice reads
the bits as unsigned, a tuple for pointer results). Three kinds:

* bit for bit the GPU's: the integer functions (bit counts, ``byte_perm``, ``*hadd``,
  ``*mulhi``, ``*mul24``, ``*sad``, min/max, abs), bit casts, classifications, ``fabs
  copysign ceil floor trunc rint nearbyint round fdim fmod ldexp scalbn frexp ilogb logb
  modf nextafter saturatef sqrt fma``, the ``_rn`` arithmetic, float-to-integer conversions
  in all four modes (saturating, NaN to 0, as PTX ``cvt``), the ``_rn`` integer-to-float
  conversions. ``fmax``/``fmin`` return the other
  argument for a NaN and rank +0 above -0 (the rule cuda_fp16.h documents for halves).
* the CPU's libm, within each function's documented error, not bit-identical to libdevice:
  trigonometric, hyperbolic, exponential, logarithmic, error and gamma functions, ``pow
  hypot atan2 cbrt rcbrt rsqrt exp10 sincos``. An ``f`` variant computes in float32 where
  numba calls libm's float32 function, else in float64 rounded once to float32.
* ``fast_*``, the GPU's hardware approximations (errors per the CUDA C Programming Guide,
  e.g. ``__expf`` 2 + floor(abs(1.173 x)) ulp, ``__sinf`` 2^-21.41 absolute in [-pi, pi],
  ``__fdividef(x, y)`` 0 for 2^126 < |y| < 2^128): the accurate float32 function instead.

Not covered: the ``_rd``/``_ru``/``_rz`` arithmetic and integer-to-float conversions (no
per-instruction rounding mode on the CPU), ``sinpi cospi sincospi normcdf normcdfinv erfinv
erfcinv erfcx j0 j1 jn y0 y1 yn remainder remquo powi``. Division is LLVM's ``fdiv``: no
ZeroDivisionError. With fastmath the GPU flushes float32 subnormals; this module never does.
"""

from __future__ import annotations

import math
from types import FunctionType

import numpy as np
from llvmlite import ir
from numba import types
from numba.core.typing import Signature, signature
from numba.extending import intrinsic, register_jitable

__all__ = ["LIBDEVICE", "bitreverse", "concrete", "ctlz", "ctpop", "cttz", "fdiv", "fmax_num", "fmin_num", "fused",
           "modf_impl"]

_LETTERS = {"i": types.int32, "l": types.int64, "f": types.float32, "d": types.float64}


def _arity(n: int, body, name: str) -> object:
    """An intrinsic whose typing function takes exactly ``n`` arguments: ``body(typingctx, args)``."""
    if n == 1:
        def typer(typingctx, a) -> object:
            return body(typingctx, (a,))
    elif n == 2:
        def typer(typingctx, a, b) -> object:
            return body(typingctx, (a, b))
    else:
        def typer(typingctx, a, b, c) -> object:
            return body(typingctx, (a, b, c))
    typer.__name__ = typer.__qualname__ = name
    return intrinsic(typer)


def concrete(name: str, cases: list, impl) -> object:
    """A function typed like numba-cuda's ``ConcreteTemplate`` over ``cases`` and compiled
    from the Python function ``impl`` for the chosen case (its arguments already converted)."""

    def body(typingctx, args) -> object:
        sig = typingctx.resolve_overload(name, cases, args, {})
        if sig is None:
            return None

        def codegen(context, builder, sig, llargs) -> object:
            return context.compile_internal(builder, impl, sig, llargs)

        return sig, codegen

    return _arity(len(cases[0].args), body, f"cpu_{name}")


def _ir(name: str, n: int, build, kind=types.Integer) -> object:
    """An intrinsic on ``n`` values of one ``kind`` type, returning that type: ``build(builder, *values)``."""

    def body(typingctx, args) -> object:
        if not (isinstance(args[0], kind) and all(a == args[0] for a in args)):
            return None
        return signature(args[0], *args), lambda context, builder, sig, a: build(builder, *a)

    return _arity(n, body, name)


def _i1(value: int) -> ir.Constant:
    return ir.Constant(ir.IntType(1), value)


def _high(builder, signed: bool, x, y) -> ir.Value:
    """The high half of the double-width product (``mulhi``, ``mul64hi``)."""
    wide = ir.IntType(2 * x.type.width)
    ext = builder.sext if signed else builder.zext
    product = builder.mul(ext(x, wide), ext(y, wide))
    return builder.trunc(builder.lshr(product, ir.Constant(wide, x.type.width)), x.type)


def _pick(signed: bool, want_max: bool) -> object:
    def build(b, x, y) -> ir.Value:
        bigger = b.icmp_signed(">", x, y) if signed else b.icmp_unsigned(">", x, y)
        return b.select(bigger, x, y) if want_max else b.select(bigger, y, x)
    return build


def _halving(signed: bool, rounded: bool) -> object:
    """libdevice's ``hadd``/``rhadd``/``uhadd``/``urhadd``: (x + y [+ 1]) >> 1 without overflow."""
    def build(b, x, y) -> ir.Value:
        half = (b.ashr if signed else b.lshr)(b.xor(x, y), ir.Constant(x.type, 1))
        return b.sub(b.or_(x, y), half) if rounded else b.add(b.and_(x, y), half)
    return build


def _mul24(signed: bool) -> object:
    """The low 32 bits of the product of the low 24 bits, sign- or zero-extended (libdevice)."""
    def build(b, x, y) -> ir.Value:
        eight = ir.Constant(x.type, 8)
        shift = b.ashr if signed else b.lshr
        return b.mul(shift(b.shl(x, eight), eight), shift(b.shl(y, eight), eight))
    return build


def _sad(signed: bool) -> object:
    """z + |x - y| (PTX ``sad``), the difference taken as unsigned."""
    def build(b, x, y, z) -> ir.Value:
        less = b.icmp_signed("<", x, y) if signed else b.icmp_unsigned("<", x, y)
        return b.add(z, b.select(less, b.sub(y, x), b.sub(x, y)))
    return build


ctpop = _ir("ctpop", 1, lambda b, x: b.ctpop(x))
ctlz = _ir("ctlz", 1, lambda b, x: b.ctlz(x, _i1(0)))  # ctlz(0) is the width, as on the GPU
cttz = _ir("cttz", 1, lambda b, x: b.cttz(x, _i1(0)))
bitreverse = _ir("bitreverse", 1, lambda b, x: b.bitreverse(x))
fused = _ir("fused", 3, lambda b, x, y, z: b.fma(x, y, z), types.Float)  # llvm.fma: rounded once
fdiv = _ir("fdiv", 2, lambda b, x, y: b.fdiv(x, y), types.Float)  # never a ZeroDivisionError
_abs = _ir("abs", 1, lambda b, x: b.select(b.icmp_signed(">=", x, ir.Constant(x.type, 0)), x, b.neg(x)))


@intrinsic
def _as_int(typingctx, x) -> object:
    """The bits of a float32/float64 as int32/int64."""
    if not isinstance(x, types.Float) or x.bitwidth not in (32, 64):
        return None
    to = types.int32 if x.bitwidth == 32 else types.int64
    return signature(to, x), lambda context, builder, sig, a: builder.bitcast(a[0], ir.IntType(x.bitwidth))


@intrinsic
def _as_float(typingctx, x) -> object:
    """An int32/int64's bits as float32/float64."""
    if not isinstance(x, types.Integer) or x.bitwidth not in (32, 64):
        return None
    to, lty = (types.float32, ir.FloatType()) if x.bitwidth == 32 else (types.float64, ir.DoubleType())
    return signature(to, x), lambda context, builder, sig, a: builder.bitcast(a[0], lty)


@register_jitable
def _to_int(r: float, lo: int, hi: int) -> int:
    """Integral ``r`` as an integer clamped to [lo, hi], NaN to 0 (PTX ``cvt`` to an integer)."""
    if r != r:
        return 0
    if r <= lo:
        return lo
    if r >= hi:
        return hi
    return np.int64(r)


@register_jitable
def _to_u64_bits(r: float) -> int:
    """Integral ``r`` clamped to [0, 2**64 - 1], NaN to 0, as the bits of an int64."""
    if not r > 0:
        return np.int64(0)
    if r >= 18446744073709551616.0:
        return np.int64(-1)
    if r >= 9223372036854775808.0:
        return np.int64(r - 9223372036854775808.0) | np.int64(-9223372036854775808)
    return np.int64(r)


@register_jitable
def _round(x: float) -> float:
    """Half away from zero, as libdevice's ``round`` (add 0.5 rounding toward zero, truncate)."""
    t = np.trunc(x)
    return t + math.copysign(1.0, x) if abs(x - t) >= 0.5 else t


@register_jitable
def fmax_num(a: float, b: float) -> float:
    """The larger; the other argument for a NaN; +0 for a +0 and a -0 (IEEE maxNum)."""
    if a != a:
        return b
    if b != b:
        return a
    if a == b:  # equal zeros of either sign: +0 is the larger
        return b if math.copysign(1.0, a) < 0 else a
    return a if a > b else b


@register_jitable
def fmin_num(a: float, b: float) -> float:
    """The smaller; the other argument for a NaN; -0 for a +0 and a -0 (IEEE minNum)."""
    if a != a:
        return b
    if b != b:
        return a
    if a == b:
        return a if math.copysign(1.0, a) < 0 else b
    return a if a < b else b


@register_jitable
def _logb(x: float) -> float:
    if x != x:
        return x + x
    if abs(x) == math.inf:
        return math.inf
    return -math.inf if x == 0 else np.float64(math.frexp(x)[1] - 1)


@register_jitable
def _ilogb(x: float) -> int:
    if x != x or x == 0:
        return -2147483648
    return 2147483647 if abs(x) == math.inf else math.frexp(x)[1] - 1


@register_jitable
def modf_impl(x: float) -> tuple:
    """(fractional, integral), signs as C's and Python's: modf(-inf) is (-0.0, -inf)."""
    i = np.trunc(x)
    f = 0.0 if math.isinf(x) else x - i
    return math.copysign(f, x), i


@register_jitable
def _byte_perm(x: int, y: int, s: int) -> int:
    """Byte n of the result is byte (s >> 4n) & 7 of the eight bytes y:x (x the low four)."""
    v = (np.int64(y) << 32) | (np.int64(x) & 0xFFFFFFFF)
    out = 0
    for n in range(4):
        out |= ((v >> (8 * ((np.int64(s) >> (4 * n)) & 7))) & 0xFF) << (8 * n)
    return out


@register_jitable
def _exp10(x: float) -> float:
    return math.pow(10.0, np.float64(x))


@register_jitable
def _rsqrt(x: float) -> float:
    return fdiv(1.0, math.sqrt(np.float64(x)))


@register_jitable
def _rcbrt(x: float) -> float:
    return fdiv(1.0, np.cbrt(np.float64(x)))


def _saturating(rnd, lo: int, hi: int) -> object:
    return lambda x: _to_int(np.float64(rnd(x)), lo, hi)


def _saturating_u64(rnd) -> object:
    return lambda x: _to_u64_bits(np.float64(rnd(x)))


_LIBM = {  # the f variant computes in float32 where numba calls libm's float32 function
    "acos": math.acos, "acosh": math.acosh, "asin": math.asin, "asinh": math.asinh, "atan": math.atan,
    "atanh": math.atanh, "cos": math.cos, "cosh": math.cosh, "erf": math.erf, "erfc": math.erfc,
    "exp": math.exp, "exp2": math.exp2, "expm1": math.expm1, "lgamma": math.lgamma, "log": math.log,
    "log10": math.log10, "log1p": math.log1p, "log2": math.log2, "sin": math.sin, "sinh": math.sinh,
    "tan": math.tan, "tanh": math.tanh, "tgamma": math.gamma, "cbrt": np.cbrt, "exp10": _exp10,
    "rsqrt": _rsqrt, "rcbrt": _rcbrt,
    # exact
    "fabs": abs, "ceil": np.ceil, "floor": np.floor, "trunc": np.trunc, "rint": np.rint,
    "nearbyint": np.rint, "round": _round, "sqrt": math.sqrt, "logb": _logb,
}
_BINARY = {"atan2": math.atan2, "copysign": math.copysign, "fmod": np.fmod, "hypot": math.hypot,
           "nextafter": np.nextafter, "pow": math.pow, "fmax": fmax_num, "fmin": fmin_num,
           "fdim": lambda a, b: 0.0 if a <= b else a - b}
_ROUNDINGS = {"rn": np.rint, "rz": np.trunc, "rd": np.floor, "ru": np.ceil}
_INT_RANGES = {"int": ("i", -2**31, 2**31 - 1), "uint": ("i", 0, 2**32 - 1), "ll": ("l", -2**63, 2**63 - 1)}
_INT_OPS = {
    "ii>i": {"hadd": _halving(True, False), "rhadd": _halving(True, True), "uhadd": _halving(False, False),
             "urhadd": _halving(False, True), "max": _pick(True, True), "min": _pick(True, False),
             "umax": _pick(False, True), "umin": _pick(False, False), "mul24": _mul24(True),
             "umul24": _mul24(False), "mulhi": lambda b, x, y: _high(b, True, x, y),
             "umulhi": lambda b, x, y: _high(b, False, x, y)},
    "ll>l": {"llmax": _pick(True, True), "llmin": _pick(True, False), "ullmax": _pick(False, True),
             "ullmin": _pick(False, False), "mul64hi": lambda b, x, y: _high(b, True, x, y),
             "umul64hi": lambda b, x, y: _high(b, False, x, y)},
    "iii>i": {"sad": _sad(True), "usad": _sad(False)},
}
_OTHERS = {
    "abs": ("i>i", _abs), "llabs": ("l>l", _abs), "brev": ("i>i", bitreverse), "brevll": ("l>l", bitreverse),
    "clz": ("i>i", ctlz), "clzll": ("l>i", ctlz), "popc": ("i>i", ctpop), "popcll": ("l>i", ctpop),
    "ffs": ("i>i", lambda x: 0 if x == 0 else cttz(x) + 1),
    "ffsll": ("l>i", lambda x: 0 if x == 0 else cttz(x) + 1), "byte_perm": ("iii>i", _byte_perm),
    "float_as_int": ("f>i", _as_int), "int_as_float": ("i>f", _as_float),
    "double_as_longlong": ("d>l", _as_int), "longlong_as_double": ("l>d", _as_float),
    "double2hiint": ("d>i", lambda x: _as_int(x) >> 32), "double2loint": ("d>i", _as_int),
    "hiloint2double": ("ii>d", lambda hi, lo: _as_float((np.int64(hi) << 32) | (np.int64(lo) & 0xFFFFFFFF))),
    "double2float_rn": ("d>f", np.float32), "int2float_rn": ("i>f", np.float32),
    "int2double_rn": ("i>d", np.float64), "ll2float_rn": ("l>f", np.float32), "ll2double_rn": ("l>d", np.float64),
    "uint2float_rn": ("i>f", lambda x: np.float32(np.uint32(x))),
    "uint2double_rn": ("i>d", lambda x: np.float64(np.uint32(x))),
    "ull2float_rn": ("l>f", lambda x: np.float32(np.uint64(x))),
    "ull2double_rn": ("l>d", lambda x: np.float64(np.uint64(x))),
    "saturatef": ("f>f", lambda x: 0.0 if not x > 0 else (1.0 if x > 1 else x)),
    "frsqrt_rn": ("f>f", _rsqrt), "fsub_rn": ("ff>f", lambda a, b: a - b),
    "drcp_rn": ("d>d", lambda x: fdiv(1.0, x)), "frcp_rn": ("f>f", lambda x: fdiv(np.float32(1.0), x)),
}


def _table() -> dict[str, tuple[str, object]]:
    """libdevice name -> (signature letters, implementation)."""
    t: dict[str, tuple[str, object]] = dict(_OTHERS)
    for name, fn in _LIBM.items():
        t[name], t[name + "f"] = ("d>d", fn), ("f>f", fn)
    for name, fn in _BINARY.items():
        t[name], t[name + "f"] = ("dd>d", fn), ("ff>f", fn)
    for suffix, x in (("", "d"), ("f", "f")):
        t["ldexp" + suffix] = t["scalbn" + suffix] = (x + "i>" + x, math.ldexp)
        t["frexp" + suffix] = (x + ">" + x + "i", math.frexp)
        t["ilogb" + suffix] = (x + ">i", _ilogb)
        t["modf" + suffix] = (x + ">" + x * 2, modf_impl)
        t["sincos" + suffix] = (x + ">" + x * 2, lambda v: (math.sin(v), math.cos(v)))
        t[("fma" if x == "d" else "fmaf") + "_rn"] = t["fma" + suffix] = (x * 3 + ">" + x, fused)
        t[x + "add_rn"] = (x * 2 + ">" + x, lambda a, b: a + b)  # round to nearest: the IEEE default
        t[x + "mul_rn"] = (x * 2 + ">" + x, lambda a, b: a * b)
        t[x + "div_rn"], t[x + "sqrt_rn"] = (x * 2 + ">" + x, fdiv), (x + ">" + x, math.sqrt)
        src = "double" if x == "d" else "float"
        for mode, rnd in _ROUNDINGS.items():
            for dst, (res, lo, hi) in _INT_RANGES.items():
                t[f"{src}2{dst}_{mode}"] = (f"{x}>{res}", _saturating(rnd, lo, hi))
            t[f"{src}2ull_{mode}"] = (f"{x}>l", _saturating_u64(rnd))
        t["llrint" + suffix] = (x + ">l", _saturating(np.rint, -2**63, 2**63 - 1))
        t["llround" + suffix] = (x + ">l", _saturating(_round, -2**63, 2**63 - 1))
        t["signbit" + x] = (x + ">i", lambda v: 1 if _as_int(v) < 0 else 0)
        t["isnan" + x] = (x + ">i", lambda v: 1 if v != v else 0)
        t["isinf" + x] = (x + ">i", lambda v: 1 if math.isinf(v) else 0)
        t["isfinited" if x == "d" else "finitef"] = (x + ">i", lambda v: 1 if math.isfinite(v) else 0)
    for spec, ops in _INT_OPS.items():
        for name, build in ops.items():
            t[name] = (spec, _ir(name, len(spec) - 2, build))
    for name in ("cosf", "expf", "exp10f", "log10f", "log2f", "logf", "powf", "sincosf", "sinf", "tanf"):
        t["fast_" + name] = t[name]  # the accurate function: see the module docstring
    t["fast_fdividef"] = ("ff>f", fdiv)
    return t


def _impl(fn, n: int) -> object:
    """A Python function for compile_internal: ``fn`` itself if it is one, else a call of it."""
    if isinstance(fn, FunctionType):
        return fn
    return {1: lambda x: fn(x), 2: lambda x, y: fn(x, y), 3: lambda x, y, z: fn(x, y, z)}[n]


def _spec(spec: str) -> Signature:
    """``"dd>d"``: signature(float64, float64, float64); two result letters make a tuple."""
    args, ret = spec.split(">")
    rets = [_LETTERS[c] for c in ret]
    rty = rets[0] if len(rets) == 1 else (types.UniTuple(rets[0], 2) if rets[0] == rets[1] else types.Tuple(rets))
    return signature(rty, *[_LETTERS[c] for c in args])


LIBDEVICE: dict[str, object] = {
    name: concrete(name, [_spec(spec)], _impl(fn, len(_spec(spec).args))) for name, (spec, fn) in sorted(_table().items())
}
