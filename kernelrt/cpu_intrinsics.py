"""CUDA's intrinsics on the CPU, for the kernels the CPU backend translates (cuda_on_cpu.py).

``INTRINSICS`` maps a path under ``numba.cuda``, as a kernel names it (``"popc"``,
``"fp16.hadd"``, ``"libdevice.sinf"``), to a function numba compiles for the CPU with the
GPU's typing (numba-cuda's signatures, unsafe argument conversions included: ``cuda.brev``
of an int64 reverses its low 32 bits there too) and the GPU's results:

* ``popc``, ``clz`` (int8...uint64, the result of the argument's type, counted over its own
  width: ``clz(0)`` is the width), ``brev`` (uint32, uint64), ``ffs`` (uint32: the 1-based
  position of the lowest set bit, 0 for 0), ``fma`` (float32/float64, rounded once:
  ``llvm.fma``), ``cbrt`` (libm's; the GPU's libdevice ``cbrt`` is also within 1 ulp, not
  always the same bits), ``selp(test, a, b)`` (``a`` and ``b`` of one type: float64, float32,
  [u]int16, [u]int32, [u]int64; the GPU wants a bool test, the CPU takes any truth value).
* ``fp16.*``: numba's CPU target has no float16 at all (no scalars, no arrays), so a half is
  carried in a float32, which holds every half exactly. Each function rounds its arguments
  to half first, as the GPU converts them to ``__half`` (ties to even, overflow to inf), and
  its result (a float32 holding a half, or a bool), so chains of them give the GPU's values.
  Bit for bit the GPU's: ``hadd hsub hmul hfma`` (one rounding), ``hneg habs hceil hfloor
  htrunc hrint``, the ordered comparisons (false for NaN, ``hne`` too) and the unordered
  ``__hequ``..., ``hmax``/``hmin`` (the other argument for a NaN, +0 above -0, as
  cuda_fp16.h documents; ``__hmax_nan``/``__hmin_nan`` give NaN), ``__hisnan __hisinf
  __float2half __double2half __half2float``, the ``__hadd``-style aliases, and ``hsin hcos``
  (checked against cuda_fp16.hpp's float32 algorithm and fix-ups over every half). The
  float64 libm result rounded once to half: ``hdiv hsqrt hrcp hrsqrt hexp hexp2 hexp10 hlog
  hlog2 hlog10 htanh htanh_approx``; the GPU computes these from float32 hardware
  approximations (``rcp.approx``, ``ex2.approx``, ``lg2.approx``...) plus fix-ups for the
  inputs where those misround, so expect it one half-ulp away on rare inputs, more often
  for ``htanh_approx`` (a plain ``tanh.approx.f16``). NaN payloads are not the GPU's 0x7fff.
* ``libdevice.*``: cpu_libdevice.py, plus ``float2half_rn`` and ``half2float`` here.

``modf(x)`` is ``math.modf`` (numba's CPU target lacks it), with numba-cuda's typing (float32
gives float32s, integers float64s) and Python's and C's values: ``(-0.0, -3.0)`` for -3.0,
``(0.0, inf)`` for inf, NaNs for NaN. ``bit_count(x)`` is ``int.bit_count``: the number of
ones in ``abs(x)``, an int64.

Not covered: Python operators on halves (``a + b`` of two fp16 results computes in float32
here, in half on the GPU: ``fp16.hadd`` gives the GPU's value), ``numba.float16`` casts and
float16 arrays, the ``fp16`` integer conversions and ``_sat``/``_relu`` variants. Imported
by the translation only (cuda_on_cpu.py), never by ``import kernelrt``.
"""

from __future__ import annotations

import math
import operator

import numpy as np
from numba import types
from numba.core.errors import TypingError
from numba.core.typing import signature
from numba.extending import intrinsic, overload, register_jitable

from .cpu_libdevice import (
    LIBDEVICE,
    bitreverse,
    concrete,
    ctlz,
    ctpop,
    cttz,
    fdiv,
    fmax_num,
    fmin_num,
    fused,
    modf_impl,
)

__all__ = ["INTRINSICS", "bit_count", "modf"]

_INTS = (types.int8, types.int16, types.int32, types.int64, types.uint8, types.uint16, types.uint32, types.uint64)
_SELP = (types.float64, types.float32, types.int16, types.uint16, types.int32, types.uint32, types.int64,
         types.uint64)
_F32, _F64 = types.float32, types.float64

# -- rounding to half, as the GPU's conversions --------------------------------------------------


@register_jitable
def round_half(x: float, sticky: float) -> float:
    """``x`` (float64) rounded to the nearest half value, ties to even, as the GPU's ``cvt.rn.f16``;
    ``sticky``: the sign of (exact - x) where ``x`` is itself a rounded result (a tie in ``x``
    then rounds towards the exact value), else 0. Past 65504 it rounds to infinity."""
    a = abs(x)
    if a != a or a == math.inf:
        return x
    shift = 24 if a < 6.103515625e-05 else 11 - math.frexp(a)[1]  # below 2**-14 the step is 2**-24
    t = math.ldexp(a, shift)  # |x| in units of its half ulp: exact
    r = np.rint(t)
    if sticky != 0 and t - np.floor(t) == 0.5:
        r = np.floor(t) + (1.0 if (sticky > 0) == (x > 0) else 0.0)
    r = math.ldexp(r, -shift)
    return math.copysign(math.inf if r > 65504.0 else r, x)


@register_jitable
def _half_bits(x: float) -> int:
    """The bit pattern of ``x`` rounded to half (a NaN gives 0x7fff, the GPU's canonical NaN)."""
    h = round_half(np.float64(x), 0.0)
    sign = 0x8000 if math.copysign(1.0, h) < 0 else 0
    a = abs(h)
    if a != a:
        return 0x7FFF
    if a == math.inf:
        return sign | 0x7C00
    if a < 6.103515625e-05:
        return sign | int(math.ldexp(a, 24))
    m, e = math.frexp(a)
    return sign | ((e + 14) << 10) | (int(math.ldexp(m, 11)) - 1024)


@register_jitable
def _half_value(bits: int) -> float:
    """The value of the half whose bit pattern is the low 16 bits of ``bits``."""
    u = np.int64(bits) & 0xFFFF
    e, m = (u >> 10) & 0x1F, u & 0x3FF
    if e == 31:
        v = math.inf if m == 0 else math.nan
    else:
        v = math.ldexp(np.float64(m if e == 0 else m + 1024), (1 if e == 0 else e) - 25)
    return -v if u & 0x8000 else v


# -- numba.cuda.popc & co: numba-cuda's cases (numba/cuda/cudadecl.py) ------------------------


@intrinsic
def _selp(typingctx, test, a, b) -> object:
    """``a if test else b``, typed as numba-cuda's ``selp`` (one type for both, from ``_SELP``)."""
    if a != b or a not in _SELP:
        return None

    def codegen(context, builder, sig, args) -> object:
        return builder.select(context.cast(builder, args[0], sig.args[0], types.boolean), args[1], args[2])

    return signature(a, test, a, b), codegen


_CUDA = {
    "popc": concrete("popc", [signature(t, t) for t in _INTS], lambda x: ctpop(x)),
    "clz": concrete("clz", [signature(t, t) for t in _INTS], lambda x: ctlz(x)),
    "brev": concrete("brev", [signature(t, t) for t in (types.uint32, types.uint64)], lambda x: bitreverse(x)),
    "ffs": concrete("ffs", [signature(types.uint32, t) for t in _INTS], lambda x: 0 if x == 0 else cttz(x) + 1),
    "fma": concrete("fma", [signature(t, t, t, t) for t in (_F32, _F64)], lambda a, b, c: fused(a, b, c)),
    "cbrt": concrete("cbrt", [signature(t, t) for t in (_F32, _F64)], lambda x: np.cbrt(x)),
    "selp": _selp,
}

# -- numba.cuda.fp16: halves carried in float32 -------------------------------------------------


@register_jitable
def _h(x: float) -> float:
    """Argument ``x`` (float64) as the GPU's ``__half`` parameter: rounded to half."""
    return round_half(x, 0.0)


@register_jitable
def _hfma(a: float, b: float, c: float) -> float:
    p = _h(a) * _h(b)  # exact: 11-bit significands
    c = _h(c)
    s = p + c
    v = s - p
    error = (p - (s - v)) + (c - v)  # s + error == p + c exactly (2Sum)
    return round_half(s, error)


@register_jitable
def _exp10(x: float) -> float:
    return math.pow(10.0, x)


@register_jitable
def _rsqrt(x: float) -> float:
    return fdiv(1.0, math.sqrt(x))


@register_jitable
def _rcp(x: float) -> float:
    return fdiv(1.0, x)


@register_jitable
def _max_nan(a: float, b: float) -> float:
    return a + b if a != a or b != b else fmax_num(a, b)


@register_jitable
def _min_nan(a: float, b: float) -> float:
    return a + b if a != a or b != b else fmin_num(a, b)


@register_jitable
def _isinf(x: float) -> int:
    return 0 if not math.isinf(x) else (1 if x > 0 else -1)


def _unary(fn) -> object:
    return lambda a: round_half(fn(_h(a)), 0.0)


def _binary(fn) -> object:
    return lambda a, b: round_half(fn(_h(a), _h(b)), 0.0)


def _compare(op, unordered: bool) -> object:
    if unordered:
        return lambda a, b: _h(a) != _h(a) or _h(b) != _h(b) or op(_h(a), _h(b))
    return lambda a, b: _h(a) == _h(a) and _h(b) == _h(b) and op(_h(a), _h(b))


_FP16_MATH = {"hsin": math.sin, "hcos": math.cos, "hexp": math.exp, "hexp2": math.exp2, "hexp10": _exp10,
              "hlog": math.log, "hlog2": math.log2, "hlog10": math.log10, "hsqrt": math.sqrt, "hrsqrt": _rsqrt,
              "hrcp": _rcp, "hceil": np.ceil, "hfloor": np.floor, "htrunc": np.trunc, "hrint": np.rint,
              "htanh": math.tanh, "htanh_approx": math.tanh}
_FP16_BINARY = {"hadd": operator.add, "hsub": operator.sub, "hmul": operator.mul, "hdiv": fdiv,
                "hmax": fmax_num, "hmin": fmin_num, "__hmax_nan": _max_nan, "__hmin_nan": _min_nan}
_COMPARISONS = {"eq": operator.eq, "ne": operator.ne, "gt": operator.gt, "ge": operator.ge, "lt": operator.lt,
                "le": operator.le}


def _fp16() -> dict[str, object]:
    """``fp16`` name -> (numba-cuda's signature with float64 for ``__half``, implementation)."""
    h1, h2, h3 = signature(_F32, _F64), signature(_F32, _F64, _F64), signature(_F32, _F64, _F64, _F64)
    table: dict[str, tuple] = {name: (h1, _unary(fn)) for name, fn in _FP16_MATH.items()}
    table.update({name: (h2, _binary(fn)) for name, fn in _FP16_BINARY.items()})
    for name, op in _COMPARISONS.items():
        table["h" + name] = (signature(types.boolean, _F64, _F64), _compare(op, False))
        table[f"__h{name}u"] = (signature(types.boolean, _F64, _F64), _compare(op, True))
    table["hfma"] = (h3, _hfma)
    table["hneg"] = (h1, lambda a: -_h(a))
    table["habs"] = (h1, lambda a: abs(_h(a)))
    table["__hisnan"] = (signature(types.boolean, _F64), lambda a: a != a)
    table["__hisinf"] = (signature(types.int32, _F64), lambda a: _isinf(_h(a)))
    table["__float2half"] = (signature(_F32, _F32), lambda a: _h(np.float64(a)))
    table["__double2half"] = (h1, _h)
    table["__half2float"] = (h1, _h)
    functions = {name: concrete(name, [sig], fn) for name, (sig, fn) in table.items()}
    for name in ("hadd", "hsub", "hmul", "hdiv", "hfma", "hneg", "habs", "heq", "hne", "hgt", "hge", "hlt", "hle",
                 "hmax", "hmin"):
        functions["__" + name] = functions[name]  # cuda_fp16.h's names, the same functions
    for name in ("hadd", "hsub", "hmul"):
        functions[f"__{name}_rn"] = functions[name]  # "_rn" only forbids contraction into an fma
    return functions


# -- math.modf, int.bit_count -------------------------------------------------------------------

modf = concrete("modf", [signature(types.UniTuple(t, 2), t) for t in (_F64, _F32)], modf_impl)


def bit_count(x: int) -> int:
    """``int.bit_count`` for numba: the number of ones in the binary form of ``abs(x)``."""
    raise TypeError("bit_count runs only inside a jitted function")


@overload(bit_count, target="cpu")
def _bit_count(x) -> object:
    if isinstance(x, types.Boolean):
        return lambda x: np.int64(1 if x else 0)
    if not isinstance(x, types.Integer):
        raise TypingError(f"bit_count takes an integer (got {x})")
    if x.signed:  # abs of the most negative int64 wraps to itself: 2**63 as unsigned, one bit
        return lambda x: np.int64(ctpop(np.uint64(abs(np.int64(x)))))
    return lambda x: np.int64(ctpop(np.uint64(x)))


INTRINSICS: dict[str, object] = {
    **_CUDA,
    **{f"fp16.{name}": fn for name, fn in _fp16().items()},
    **{f"libdevice.{name}": fn for name, fn in LIBDEVICE.items()},
    "libdevice.float2half_rn": concrete("float2half_rn", [signature(types.int16, _F32)], _half_bits),
    "libdevice.half2float": concrete("half2float", [signature(_F32, types.int16)], _half_value),
}
