"""Conformance kernels (see conformance_kernels.py): calls, casts, literal_unroll, debug=True.

Device functions, a ``numba.jit`` function, recursion, a plain ``@cuda.jit`` function
called from a kernel, ``cuda.declare_device`` (the target refuses it: it links CUDA C++),
``numba.cuda.types`` casts, ``literal_unroll``, and the error model of ``debug=True``.
"""

from __future__ import annotations

from typing import Any

import numpy as np
from numba import cuda, jit
from numba.cuda import types
from numba.cuda.misc.special import literal_unroll

from tests.support.conformance_case import REFUSE, Case

# -- cudapy/test_device_func.py ---------------------------------------------------------------


def test_use_add2f() -> Any:
    def add2f(a, b):
        return a + b

    add2f = cuda.jit(device=True)(add2f)  # the original: @cuda.jit("float32(float32, float32)", device=True)

    def use_add2f(ary):
        i = cuda.grid(1)
        ary[i] = add2f(ary[i], ary[i])

    return cuda.jit(use_add2f)  # the original: cuda.jit("void(float32[:])")(use_add2f)


def test_indirect_add2f() -> Any:
    def add2f(a, b):
        return a + b

    add2f = cuda.jit(device=True)(add2f)  # as above, signatures dropped

    def indirect(a, b):
        return add2f(a, b)

    indirect = cuda.jit(device=True)(indirect)

    def indirect_add2f(ary):
        i = cuda.grid(1)
        ary[i] = indirect(ary[i], ary[i])

    return cuda.jit(indirect_add2f)


def test_cpu_dispatcher() -> Any:
    # Test correct usage
    @jit
    def add(a, b):
        return a + b

    # TestDeviceFunc._check_cpu_dispatcher(add):
    @cuda.jit
    def add_kernel(ary):
        i = cuda.grid(1)
        ary[i] = add(ary[i], 1)

    return add_kernel


times2_cu = cuda.CUSource("""
extern "C" __device__
int times2(int *out, int a)
{
  *out = a * 2;
  return 0;
}
""")

times2_cabi_cu = cuda.CUSource("""
extern "C" __device__
int times2(int a)
{
  return a * 2;
}
""")


def test_declared_in_called_function() -> Any:
    times2 = cuda.declare_device("times2", "int32(int32)", link=times2_cu)

    @cuda.jit
    def device_func(x):
        return times2(x)

    @cuda.jit
    def kernel(r, x):
        i = cuda.grid(1)
        if i < len(r):
            r[i] = device_func(x[i])

    return kernel


def test_declare_device_cabi_basic() -> Any:
    times2 = cuda.declare_device(
        "times2", "int32(int32)", link=times2_cabi_cu, abi="c"
    )

    @cuda.jit
    def kernel(r, x):
        i = cuda.grid(1)
        if i < len(r):
            r[i] = times2(x[i])

    return kernel


# -- cudapy/recursion_usecases.py, cudapy/test_make_function_to_jit_function.py ---------------


@cuda.jit(device=True)
def fib3(n):
    if n < 2:
        return n

    return fib3(n - 1) + fib3(n - 2)


def test_global_implicit_sig() -> Any:
    cfunc = fib3  # TestSelfRecursion.check_fib(self.mod.fib3)

    @cuda.jit
    def kernel(r, x):
        r[0] = cfunc(x[0])

    return kernel


@cuda.jit
def consumer(func, *args):
    return func(*args)


_global = 123


def test_close_over_consts_w_args() -> Any:
    def impl_factory(consumer_func):
        def impl(x):
            y = 10

            def callinner(z):
                return y + z + _global

            return consumer_func(callinner, x)

        return impl

    func = impl_factory(consumer)
    # wrap_with_kernel_one_arg(func):
    jitted_func = cuda.jit(func)

    @cuda.jit
    def kernel(out, in1):
        out[0] = jitted_func(in1)

    return kernel


# -- cudapy/test_casting.py: numpy and numba.cuda.types casts in a device function --------------


def to_int8(x):
    return np.int8(x)


def to_uint32(x):
    return types.uint32(x)


def to_float64(x):
    return np.float64(x) / np.float64(2)


def _create_wrapped(pyfunc: Any) -> Any:  # TestCasting._create_wrapped, up to the kernel
    wrapped_func = cuda.jit(device=True)(pyfunc)

    @cuda.jit
    def cuda_wrapper_fn(arg, res):
        res[0] = wrapped_func(arg[0])

    return cuda_wrapper_fn


# -- cudapy/test_array_reductions.py: literal_unroll ---------------------------------------------


def test_all_basic() -> Any:
    cases = (
        np.float64([1.0, 0.0, float("inf"), float("nan")]),
        np.float64([1.0, -0.0, float("inf"), float("nan")]),
        np.float64([1.0, 1.5, float("inf"), float("nan")]),
        np.float64([[1.0, 1.5], [float("inf"), float("nan")]]),
        np.float64([[1.0, 1.5], [1.5, 1.0]]),
    )

    @cuda.jit
    def kernel(out):
        i = 0
        for case in literal_unroll(cases):
            out[i] = np.all(case)
            i += 1

    return kernel


# -- cudapy/test_exception.py, cudapy/test_fastmath.py: the error model, debug=True -------------


def test_no_zero_division_error() -> Any:
    @cuda.jit
    def f(r, x, y):
        r[0] = y[0] / x[0]
        r[1] = y[0]

    return f


def test_zero_division_error_in_debug() -> Any:
    @cuda.jit(debug=True, opt=False)
    def f(r, x, y):
        r[0] = y[0] / x[0]
        r[1] = y[0]

    return f


def test_user_raise() -> Any:
    @cuda.jit(debug=True, opt=False)
    def foo(do_raise):
        if do_raise:
            raise ValueError

    return foo


def test_exception() -> Any:
    def foo(ary):
        x = cuda.threadIdx.x
        if x == 2:
            # NOTE: indexing with a out-of-bounds constant can fail at
            # compile-time instead (because the getitem is rewritten as a
            # static_getitem)
            ary.shape[-x]

    return cuda.jit(debug=True, opt=False)(foo)  # safe_foo


# TestFastMathOption.test_divf_exception's kernel
def f10(r, x, y):
    r[0] = x / y


# -- launch cases --------------------------------------------------------------------------------


def _f32_arange10(rng: np.random.Generator) -> tuple[Any, ...]:
    return (np.arange(10, dtype=np.float32),)


def _div_args(rng: np.random.Generator) -> tuple[Any, ...]:
    return np.zeros(2), np.zeros(1), np.ones(1)


def _cast(value: Any, intype: Any, outtype: Any) -> Any:
    return lambda rng: (np.array([value], dtype=intype), np.zeros(1, dtype=outtype))


def _divf(rng: np.random.Generator) -> tuple[Any, ...]:
    return np.zeros(10, dtype=np.float32), np.float32(10.0), np.float32(0.0)


_D = "cudapy/test_device_func.py::TestDeviceFunc."
_E = "cudapy/test_exception.py::TestException."
_CAST = "cudapy/test_casting.py::TestCasting."
_NO_DECLARE = "the simulator's declare_device returns None"
_SIM_DEBUG = "the simulator ignores fastmath: with debug=True it raises where a fastmath division on the GPU does not"

CASES = [
    Case("device_function", _D + "test_use_add2f (signatures dropped)", test_use_add2f(), (1,), (10,),
         _f32_arange10, (0,), reference=lambda a: (a + a,)),
    Case("device_function_indirect", _D + "test_indirect_add2f (signatures dropped)", test_indirect_add2f(),
         (1,), (10,), _f32_arange10, (0,), reference=lambda a: (a + a,)),
    Case("numba_jit_function_in_kernel", _D + "test_cpu_dispatcher", test_cpu_dispatcher(), (1,), (10,),
         lambda r: (np.arange(10),), (0,), reference=lambda a: (a + 1,)),
    Case("recursion", "cudapy/test_recursion.py::TestSelfRecursion.test_global_implicit_sig",
         test_global_implicit_sig(), (1,), (1,),
         lambda r: (np.zeros(1, dtype=np.int64), np.asarray([10], dtype=np.int64)), (0,),
         reference=lambda r, x: (np.array([55]),)),
    Case("plain_jit_function_in_kernel",
         "cudapy/test_make_function_to_jit_function.py::TestMakeFunctionToJITFunction.test_close_over_consts_w_args",
         test_close_over_consts_w_args(), (1,), (1,),
         lambda r: (np.zeros(1, dtype=np.int64), 5), (0,), reference=lambda out, a: (np.array([10 + a + 123]),)),
    Case("declare_device", "cudapy/test_device_func.py::TestDeclareDevice.test_declared_in_called_function",
         test_declared_in_called_function(), (1,), (32,),
         lambda r: (np.zeros(10, dtype=np.int32), np.arange(10, dtype=np.int32)), (0,), expect=REFUSE,
         sim=_NO_DECLARE),
    Case("declare_device_cabi", "cudapy/test_device_func.py::TestDeclareDeviceCABI.test_declare_device_cabi_basic",
         test_declare_device_cabi_basic(), (1,), (32,),
         lambda r: (np.zeros(10, dtype=np.int32), np.arange(10, dtype=np.int32)), (0,), expect=REFUSE,
         sim=_NO_DECLARE),
    Case("cast_numba_types_uint32", _CAST + "test_float_to_unsigned (to_uint32)", _create_wrapped(to_uint32),
         (1,), (1,), _cast(7.9, np.float64, np.uint32), (1,), reference=lambda a, r: (np.array([7], np.uint32),)),
    Case("cast_np_int8", _CAST + "test_float_to_int (to_int8)", _create_wrapped(to_int8), (1,), (1,),
         _cast(-3.7, np.float32, np.int8), (1,), reference=lambda a, r: (np.array([-3], np.int8),)),
    Case("cast_np_float64", _CAST + "test_int_to_float (to_float64)", _create_wrapped(to_float64), (1,), (1,),
         _cast(7, np.int32, np.float64), (1,), reference=lambda a, r: (np.array([3.5]),)),
    Case("literal_unroll", "cudapy/test_array_reductions.py::TestArrayReductions.test_all_basic", test_all_basic(),
         (1,), (1,), lambda r: (np.zeros(5, dtype=np.bool_),), (0,),
         reference=lambda out: (np.array([False, False, True, True, True]),)),
    Case("division_by_zero", _E + "test_no_zero_division_error", test_no_zero_division_error(), (1,), (1,),
         _div_args, (0,), reference=lambda r, x, y: (np.array([np.inf, 1.0]),)),
    # debug=True: the Python error model; the launch raises and r is left as it was
    Case("debug_division_by_zero", _E + "test_zero_division_error_in_debug", test_zero_division_error_in_debug(),
         (1,), (1,), _div_args, (0,), reference=lambda r, x, y: (np.zeros(2),), raises=ZeroDivisionError,
         sim_raises=FloatingPointError),
    Case("debug_user_raise", _E + "test_user_raise", test_user_raise(), (1,), (1,),
         lambda r: (True,), (), raises=ValueError),
    Case("debug_index_error", _E + "test_exception (safe_foo)", test_exception(), (1,), (3,),
         lambda r: (np.array([0, 1]),), (), raises=IndexError),
    Case("fastmath_debug_no_raise", "cudapy/test_fastmath.py::TestFastMathOption.test_divf_exception (fastver)",
         cuda.jit(fastmath=True, debug=True, opt=False)(f10), (1,), (10,), _divf, (0,),
         reference=lambda r, x, y: (np.concatenate([[np.inf], np.zeros(9)]).astype(np.float32),), sim=_SIM_DEBUG),
    Case("debug_division_by_zero_f32", "cudapy/test_fastmath.py::TestFastMathOption.test_divf_exception (precver)",
         cuda.jit(debug=True, opt=False)(f10), (1,), (10,), _divf, (0,),
         reference=lambda r, x, y: (np.zeros(10, np.float32),), raises=ZeroDivisionError,
         sim_raises=FloatingPointError),
]
