"""A vectorisable e^{-x} for the SFAP CPU twin (numba on the host only, never on a GPU).

libm's ``exp`` is a call LLVM cannot vectorise, and it was about half of the CPU twin's
time (tens of millions of evaluations per motor unit). ``exp_neg`` is branch-free
arithmetic that LLVM turns into SIMD code, about 4x faster per element when inlined
into a loop (measured on AVX-512: 1.4 ns against 5.9 ns in cache):

* n = round(x / ln 2), r = (n·ln2_hi - x) + n·ln2_lo (Cody-Waite: n·ln2_hi is exact),
  so |r| <= ln 2 / 2 and e^{-x} = 2^{-n} e^{r};
* e^{r} by its Taylor polynomial to degree 13 in Horner form (truncation < 4e-18);
* 2^{-n} built from its bit pattern, exact for n <= 1022.

Its error is at most 1 ulp from libm's correctly rounded result in a dense sweep
(tests/sfap/test_kernels.py), the same class as NumPy's own SIMD exp, which MyoGen uses and
which the 1e-12 accuracy target leaves room for (docs/sfap.md, "Exactness"). Valid for 0 <= x <= ``EXP_NEG_MAX``; callers clamp.

``dot8x2`` is the contraction's inner loop: the dot products of eight I rows (time
samples) with two h rows (electrodes), so each loaded I value feeds two FMAs (1.6x the
rate of ``dot8``, one electrode, measured: 41 against 26 GFLOP/s per core). Both are
compiled with ``reassoc`` and ``contract`` so LLVM keeps vector partial sums in
registers and uses FMA (2x a strict left-to-right sum, measured).
The summation order is then fixed by the compiled code, not by the data or the thread
count, so results stay deterministic; like a BLAS dot product, it is not ascending j.
"""

from __future__ import annotations

import math

import numba
from llvmlite import ir
from numba.core import types
from numba.core.extending import intrinsic

__all__ = ["EXP_NEG_MAX", "dot8", "dot8x2", "exp_neg"]

EXP_NEG_MAX = 700.0  # e^{-700} ~ 1e-304: beyond it callers use 0 (x³ e^{-x} is ~1e-295)
_LN2_HI = 6.93147180369123816490e-01  # fdlibm's split of ln 2: 32 trailing zero bits
_LN2_LO = 1.90821492927058770002e-10
_INV_LN2 = 1.44269504088896338700e00
# A dict, not a set: kernelrt's cache key hashes repr(options), and a set's order changes
# with PYTHONHASHSEED, which would give every process a different key (a cache miss).
_REASSOC_CONTRACT = {"contract": True, "reassoc": True}
_C2, _C3, _C4, _C5, _C6, _C7, _C8, _C9, _C10, _C11, _C12, _C13 = (1.0 / math.factorial(k) for k in range(2, 14))


@intrinsic
def _as_float64(typingctx, bits):
    """Reinterpret an int64 bit pattern as a float64 (a no-op bitcast LLVM vectorises)."""
    sig = types.float64(types.int64)

    def codegen(context, builder, signature, args):
        return builder.bitcast(args[0], ir.DoubleType())

    return sig, codegen


@numba.njit(inline="always", nogil=True)
def exp_neg(x):
    """e^{-x} for 0 <= x <= EXP_NEG_MAX, within 1 ulp; inline it into SIMD loops."""
    n = int(x * _INV_LN2 + 0.5)
    r = (n * _LN2_HI - x) + n * _LN2_LO
    p = _C13
    p = p * r + _C12
    p = p * r + _C11
    p = p * r + _C10
    p = p * r + _C9
    p = p * r + _C8
    p = p * r + _C7
    p = p * r + _C6
    p = p * r + _C5
    p = p * r + _C4
    p = p * r + _C3
    p = p * r + _C2
    p = p * r + 1.0
    p = p * r + 1.0
    return _as_float64((1023 - n) << 52) * p


@numba.njit(fastmath=_REASSOC_CONTRACT, nogil=True)
def dot8(h_row, cur, lo, r0, r1):
    """(Σ_r cur[t, r] h_row[lo + r] for t in 0..7) over r = r0 .. r1 - 1; cur is (8, >= r1)."""
    s0 = s1 = s2 = s3 = s4 = s5 = s6 = s7 = 0.0
    for r in range(r0, r1):
        hv = h_row[lo + r]
        s0 += cur[0, r] * hv
        s1 += cur[1, r] * hv
        s2 += cur[2, r] * hv
        s3 += cur[3, r] * hv
        s4 += cur[4, r] * hv
        s5 += cur[5, r] * hv
        s6 += cur[6, r] * hv
        s7 += cur[7, r] * hv
    return s0, s1, s2, s3, s4, s5, s6, s7


@numba.njit(fastmath=_REASSOC_CONTRACT, nogil=True)
def dot8x2(h_a, h_b, cur, lo, r0, r1):
    """``dot8`` for two h rows at once: returns (sums with h_a, sums with h_b)."""
    a0 = a1 = a2 = a3 = a4 = a5 = a6 = a7 = 0.0
    b0 = b1 = b2 = b3 = b4 = b5 = b6 = b7 = 0.0
    for r in range(r0, r1):
        x = h_a[lo + r]
        y = h_b[lo + r]
        c0 = cur[0, r]
        c1 = cur[1, r]
        c2 = cur[2, r]
        c3 = cur[3, r]
        c4 = cur[4, r]
        c5 = cur[5, r]
        c6 = cur[6, r]
        c7 = cur[7, r]
        a0 += c0 * x
        a1 += c1 * x
        a2 += c2 * x
        a3 += c3 * x
        a4 += c4 * x
        a5 += c5 * x
        a6 += c6 * x
        a7 += c7 * x
        b0 += c0 * y
        b1 += c1 * y
        b2 += c2 * y
        b3 += c3 * y
        b4 += c4 * y
        b5 += c5 * y
        b6 += c6 * y
        b7 += c7 * y
    return (a0, a1, a2, a3, a4, a5, a6, a7), (b0, b1, b2, b3, b4, b5, b6, b7)
