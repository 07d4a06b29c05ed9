"""Conformance kernels (see conformance_kernels.py): math, cmath, complex numbers, Black-Scholes.

Transcendental results are compared with a few ulps of tolerance: the CPU's libm, numpy's
and the simulator's (Python's ``math`` in float64, rounded on the store) may differ in the
last bit; everything else (fmod, modf, trunc, frexp, isnan, complex +) is exact.
"""

from __future__ import annotations

import cmath
import math
from typing import Any

import numpy as np
from numba import cuda

from tests.support.conformance_case import Case, ulps

# -- cudapy/test_math.py, cudapy/test_frexp_ldexp.py (cuda.jit(signature)(fn) there) ----------


def math_acos(A, B):
    i = cuda.grid(1)
    B[i] = math.acos(A[i])


def math_atan2(A, B, C):
    i = cuda.grid(1)
    C[i] = math.atan2(A[i], B[i])


def math_exp(A, B):
    i = cuda.grid(1)
    B[i] = math.exp(A[i])


def math_erf(A, B):
    i = cuda.grid(1)
    B[i] = math.erf(A[i])


def math_lgamma(A, B):
    i = cuda.grid(1)
    B[i] = math.lgamma(A[i])


def math_hypot(A, B, C):
    i = cuda.grid(1)
    C[i] = math.hypot(A[i], B[i])


def math_pow(A, B, C):
    i = cuda.grid(1)
    C[i] = math.pow(A[i], B[i])


def math_fmod(A, B, C):
    i = cuda.grid(1)
    C[i] = math.fmod(A[i], B[i])


def math_modf(A, B, C):
    i = cuda.grid(1)
    B[i], C[i] = math.modf(A[i])


def math_isnan(A, B):
    i = cuda.grid(1)
    B[i] = math.isnan(A[i])


def math_trunc(A, B):
    i = cuda.grid(1)
    B[i] = math.trunc(A[i])


def math_pow_binop(A, B, C):
    i = cuda.grid(1)
    C[i] = A[i] ** B[i]


def math_mod_binop(A, B, C):
    i = cuda.grid(1)
    C[i] = A[i] % B[i]


def simple_frexp(aryx, aryexp, arg):
    aryx[0], aryexp[0] = math.frexp(arg)


def simple_ldexp(aryx, arg, exp):
    aryx[0] = math.ldexp(arg, exp)


# -- cudapy/test_complex_kernel.py, cudapy/test_complex.py ---------------------------------------


def test_cuda_complex_arg() -> Any:
    def foo(a, b):
        i = cuda.grid(1)
        a[i] += b

    return cuda.jit(foo)  # the original: @cuda.jit("void(complex128[:], complex128)")


def exp_usecase(x):
    return cmath.exp(x)


def sqrt_usecase(x):
    return cmath.sqrt(x)


def compile_scalar_func(pyfunc: Any) -> Any:  # for one argument; signatures dropped
    # First compile a scalar device function
    device_func = cuda.jit(device=True)(pyfunc)

    def kernel_func(out, a):
        i = cuda.grid(1)
        if i < out.shape[0]:
            out[i] = device_func(a[i])

    return cuda.jit(kernel_func)


# -- cudapy/test_blackscholes.py -----------------------------------------------------------------

RISKFREE = 0.02
VOLATILITY = 0.30

A1 = 0.31938153
A2 = -0.356563782
A3 = 1.781477937
A4 = -1.821255978
A5 = 1.330274429
RSQRT2PI = 0.39894228040143267793994605993438


def cnd(d):
    K = 1.0 / (1.0 + 0.2316419 * np.abs(d))
    ret_val = (
        RSQRT2PI
        * np.exp(-0.5 * d * d)
        * (K * (A1 + K * (A2 + K * (A3 + K * (A4 + K * A5)))))
    )
    return np.where(d > 0, 1.0 - ret_val, ret_val)


def test_blackscholes() -> Any:
    def cnd_cuda(d):
        K = 1.0 / (1.0 + 0.2316419 * math.fabs(d))
        ret_val = (
            RSQRT2PI
            * math.exp(-0.5 * d * d)
            * (K * (A1 + K * (A2 + K * (A3 + K * (A4 + K * A5)))))
        )
        if d > 0:
            ret_val = 1.0 - ret_val
        return ret_val

    cnd_cuda = cuda.jit(device=True)(cnd_cuda)  # the original: @cuda.jit(double(double), device=True, inline="always")

    def black_scholes_cuda(callResult, putResult, S, X, T, R, V):
        i = cuda.threadIdx.x + cuda.blockIdx.x * cuda.blockDim.x
        if i >= S.shape[0]:
            return
        sqrtT = math.sqrt(T[i])
        d1 = (math.log(S[i] / X[i]) + (R + 0.5 * V * V) * T[i]) / (
            V * sqrtT
        )
        d2 = d1 - V * sqrtT
        cndd1 = cnd_cuda(d1)
        cndd2 = cnd_cuda(d2)

        expRT = math.exp((-1.0 * R) * T[i])
        callResult[i] = S[i] * cndd1 - X[i] * expRT * cndd2
        putResult[i] = X[i] * expRT * (1.0 - cndd2) - S[i] * (1.0 - cndd1)

    return cuda.jit(black_scholes_cuda)  # the original: @cuda.jit(void(double[:], ..., double, double))


# -- launch cases --------------------------------------------------------------------------------


def _unary(dtype: Any, start: float = 0, stop: float = 1) -> Any:
    """unary_template: 50 values in [start, stop] and an output of the same type."""
    return lambda rng: (np.linspace(start, stop, 50).astype(dtype), np.zeros(50, dtype))


def _binary(dtype: Any, start: float = 0, stop: float = 1) -> Any:
    """binary_template's A (here against a second, shuffled operand) and an output."""
    def make(rng: np.random.Generator) -> tuple[Any, ...]:
        a = np.linspace(start, stop, 50).astype(dtype)
        return a, rng.permutation(a), np.zeros(50, dtype)

    return make


def _map1(f: Any) -> Any:
    return lambda a, b: (np.array([f(float(x)) for x in a]).astype(b.dtype),)


def _map2(f: Any) -> Any:
    return lambda a, b, c: (np.array([f(float(x), float(y)) for x, y in zip(a, b)]).astype(c.dtype),)


def _special(rng: np.random.Generator) -> tuple[Any, ...]:
    fi = np.finfo(np.float64)  # unary_bool_special_values
    a = np.array([0.0, fi.tiny / 4, fi.tiny, 0.5, 1.0, fi.max, np.inf, np.nan])
    return np.concatenate([a, -a]), np.zeros(16, dtype=np.int32)


def _modf(rng: np.random.Generator) -> tuple[Any, ...]:
    a = np.concatenate([np.linspace(0, 10, 46), [np.inf, -np.inf, -2.5, -0.0]])
    return a, np.zeros_like(a), np.zeros_like(a)


def _bs(rng: np.random.Generator) -> tuple[Any, ...]:
    def randfloat(rand_var: np.ndarray, low: float, high: float) -> np.ndarray:
        return (1.0 - rand_var) * low + rand_var * high

    n = 200
    s, x = randfloat(rng.random(n), 5.0, 30.0), randfloat(rng.random(n), 1.0, 100.0)
    t = randfloat(rng.random(n), 0.25, 10.0)
    return np.zeros(n), -np.ones(n), s, x, t, RISKFREE, VOLATILITY


def _bs_ref(call: np.ndarray, put: np.ndarray, S: np.ndarray, X: np.ndarray, T: np.ndarray,
            R: float, V: float) -> tuple[Any, ...]:
    sqrtT = np.sqrt(T)  # test_blackscholes.py's numpy black_scholes
    d1 = (np.log(S / X) + (R + 0.5 * V * V) * T) / (V * sqrtT)
    d2 = d1 - V * sqrtT
    cndd1, cndd2 = cnd(d1), cnd(d2)
    expRT = np.exp(-R * T)
    return S * cndd1 - X * expRT * cndd2, X * expRT * (1.0 - cndd2) - S * (1.0 - cndd1)


def _complex_values(rng: np.random.Generator) -> tuple[Any, ...]:
    reals = [-0.0, +0.0, 1, -1, +1.5, -3.5, -math.pi, +math.pi]  # basic_values / more_values, finite
    values = np.array([complex(x, y) for x in reals for y in reals])
    return np.zeros(values.size, np.complex128), values


_M = "cudapy/test_math.py::TestCudaMath."
_F32, _F64 = ulps(4, np.float32), ulps(4, np.float64)
_LIBM = "a transcendental function: libms (CPU, numpy, Python's math in the simulator) differ in the last bit"


def _math(name: str, test: str, fn: Any, make: Any, ref: Any, rtol: float = 0.0, atol: float = 0.0,
          why: str = _LIBM) -> Case:
    output = fn.__code__.co_argcount - 1  # the last argument
    return Case(name, _M + test, cuda.jit(fn), (1,), (50,), make, (output,), reference=ref, rtol=rtol, atol=atol,
                tolerance=why if rtol or atol else "")


CASES = [
    _math("math_acos_f8", "test_math_acos", math_acos, _unary(np.float64), _map1(math.acos), _F64),
    _math("math_atan2_f4", "test_math_atan2", math_atan2, _binary(np.float32), _map2(math.atan2), _F32),
    _math("math_exp_f8", "test_math_exp", math_exp, _unary(np.float64, -5, 5), _map1(math.exp), _F64),
    _math("math_erf_f4", "test_math_erf", math_erf, _unary(np.float32), _map1(math.erf), _F32),
    _math("math_lgamma_f8", "test_math_lgamma", math_lgamma, _unary(np.float64, 0.1, 1), _map1(math.lgamma), _F64,
          atol=_F64, why=_LIBM + "; lgamma has a root at 1, where a few ulps of 1.0 bound the absolute error"),
    _math("math_hypot_f8", "test_math_hypot", math_hypot, _binary(np.float64), _map2(math.hypot), _F64),
    _math("math_pow_f4", "test_math_pow", math_pow, _binary(np.float32), _map2(math.pow), _F32),
    _math("math_pow_binop_f8", "test_math_pow_binop", math_pow_binop, _binary(np.float64), _map2(math.pow), _F64),
    _math("math_fmod_f8", "test_math_fmod", math_fmod, _binary(np.float64, 1, 7), _map2(math.fmod)),
    _math("math_mod_binop_f4", "test_math_mod_binop", math_mod_binop, _binary(np.float32, 1, 7),
          lambda a, b, c: (np.mod(a, b),)),
    _math("math_trunc_f8", "test_math_trunc", math_trunc, _unary(np.float64, -3, 3),
          lambda a, b: (np.trunc(a),)),
    Case("math_modf_f8", _M + "test_math_modf", cuda.jit(math_modf), (1,), (50,), _modf, (1, 2),
         reference=lambda a, b, c: np.modf(a)),
    Case("math_isnan_f8", _M + "test_math_isnan (unary_bool_special_values)", cuda.jit(math_isnan), (1,), (16,),
         _special, (1,), reference=lambda a, b: (np.isnan(a).astype(np.int32),)),
    Case("math_frexp_f8", "cudapy/test_frexp_ldexp.py::TestCudaFrexpLdexp.test_frexp_f8", cuda.jit(simple_frexp),
         (1,), (1,), lambda r: (np.zeros(1), np.zeros(1, dtype=np.int32), 3.1415), (0, 1),
         reference=lambda x, e, arg: (np.array([0.785375]), np.array([2], np.int32))),
    Case("math_ldexp_f4", "cudapy/test_frexp_ldexp.py::TestCudaFrexpLdexp.test_ldexp_f4", cuda.jit(simple_ldexp),
         (1,), (1,), lambda r: (np.zeros(1, dtype=np.float32), np.float32(0.785375), 2), (0,),
         reference=lambda x, arg, e: (np.array([arg * 4], np.float32),)),
    Case("complex_arg", "cudapy/test_complex_kernel.py::TestCudaComplex.test_cuda_complex_arg",
         test_cuda_complex_arg(), (1,), (5,), lambda r: (np.arange(5, dtype=np.complex128), 2j), (0,),
         reference=lambda a, b: (a + 2j,)),
    Case("cmath_exp", "cudapy/test_complex.py::TestCMath.test_exp (compile_scalar_func)",
         compile_scalar_func(exp_usecase), (1,), (128,), _complex_values, (0,),
         reference=lambda out, a: (np.array([cmath.exp(complex(v)) for v in a]),), rtol=_F64, atol=1e-300,
         tolerance=_LIBM),
    Case("cmath_sqrt", "cudapy/test_complex.py::TestCMath.test_sqrt (compile_scalar_func)",
         compile_scalar_func(sqrt_usecase), (1,), (128,), _complex_values, (0,),
         reference=lambda out, a: (np.array([cmath.sqrt(complex(v)) for v in a]),), rtol=_F64, tolerance=_LIBM),
    Case("blackscholes", "cudapy/test_blackscholes.py::TestBlackScholes.test_blackscholes (signatures dropped)",
         test_blackscholes(), (2,), (128,), _bs, (0, 1), reference=_bs_ref, rtol=1e-12, atol=1e-12,
         tolerance="exp/log/sqrt through different libms; the original allows an L1 error of 1e-13"),
]
