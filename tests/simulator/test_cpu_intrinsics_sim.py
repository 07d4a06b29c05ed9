"""cpu_intrinsics.py against the CUDA simulator's own ``cuda.popc``, ``brev``, ``clz``, ``ffs``,
``fma``, ``cbrt``, ``selp`` and ``cuda.fp16`` (numba/cuda/simulator/kernelapi.py).

They agree wherever the simulator implements the GPU's definition. Where it does not, the
CPU intrinsics follow the GPU (numba-cuda's lowering, libdevice and cuda_fp16.h) and the
tests below name the simulator's error: its bit intrinsics format the value as a 32-bit
Python string (negative numbers and 64-bit widths come out wrong), ``fma`` rounds twice,
``cbrt`` is ``a ** (1/3)`` (complex for negatives), ``hfloor`` calls ``np.ceil``, ``hmax``/
``hmin`` are Python's ``max``/``min`` (NaN handling depends on the order), ``hne`` is true
for NaN, ``hfma`` rounds twice, and its half math goes through numpy's float32 functions.
"""

from __future__ import annotations

import functools
import math
import warnings

import numba
import numpy as np
import pytest
from numba import cuda
from numba.cuda.simulator import kernelapi

from kernelrt.cpu_intrinsics import INTRINSICS

pytestmark = pytest.mark.sim

SIM = kernelapi.FakeCUDAModule((1, 1, 1), (1, 1, 1), 0)  # what a simulated kernel sees as ``cuda``
HALVES = np.arange(65536, dtype=np.uint16).view(np.float16)


def on_cpu(name: str, *args):
    return _jitted(name, len(args))(*args)


@functools.cache
def _jitted(name: str, n: int):
    fn = INTRINSICS[name]
    return {1: numba.njit(lambda a: fn(a)), 2: numba.njit(lambda a, b: fn(a, b)),
            3: numba.njit(lambda a, b, c: fn(a, b, c))}[n]


def over(name: str, *arrays, dtype=np.float32) -> np.ndarray:
    fn = INTRINSICS[name]
    if len(arrays) == 1:
        def run(out, a):
            for i in range(out.size):
                out[i] = fn(a[i])
    elif len(arrays) == 2:
        def run(out, a, b):
            for i in range(out.size):
                out[i] = fn(a[i], b[i])
    else:
        def run(out, a, b, c):
            for i in range(out.size):
                out[i] = fn(a[i], b[i], c[i])
    out = np.empty(len(arrays[0]), dtype)
    numba.njit(run)(out, *arrays)
    return out


def test_a_simulated_kernel_sees_these_intrinsics():
    @cuda.jit
    def kernel(a, out):
        i = cuda.grid(1)
        if i < a.size:
            out[i] = cuda.popc(a[i]) + cuda.clz(a[i]) + cuda.ffs(a[i])

    a = np.array([0, 1, 6, 255, 2**31 - 1, 2**20], np.uint32)
    out = np.zeros(a.size, np.int64)
    kernel[1, a.size](a, out)
    expected = [on_cpu("popc", v) + on_cpu("clz", v) + on_cpu("ffs", v) for v in a]
    assert out.tolist() == expected


def test_bit_intrinsics_agree_for_32_bit_non_negative_values():
    rng = np.random.default_rng(0)
    values = np.concatenate([[0, 1, 2, 3, 2**31 - 1, 2**31, 2**32 - 1], rng.integers(0, 2**32, 500)]).astype(np.uint32)
    for name in ("popc", "clz", "ffs", "brev"):
        assert [on_cpu(name, v) for v in values] == [getattr(SIM, name)(int(v)) for v in values], name
    assert [on_cpu("popc", np.int32(v)) for v in values[values < 2**31]] == \
        [SIM.popc(int(v)) for v in values[values < 2**31]]


def test_where_the_simulators_bit_intrinsics_leave_the_gpu():
    # popc(-1) on an int32 counts 32 ones on the GPU (llvm.ctpop); bin(-1) has one
    assert on_cpu("popc", np.int32(-1)) == 32 and SIM.popc(-1) == 1
    # clz and ffs of an int64 count over 64 bits on the GPU; the simulator pads to 32
    assert on_cpu("clz", np.int64(1)) == 63 and SIM.clz(1) == 31
    assert on_cpu("ffs", np.uint64(2**40)) == 41 and SIM.ffs(2**40) != 41
    # brev of a uint64 reverses 64 bits on the GPU
    assert on_cpu("brev", np.uint64(1)) == 2**63 and SIM.brev(1) == 2**31
    with pytest.raises(ValueError):
        SIM.brev(-1)  # "-000...1" reversed is no binary number; the GPU reverses the bits


def test_fma_selp_cbrt():
    a, b, c = 1 + 2.0**-27, 1 - 2.0**-27, -1.0
    assert on_cpu("fma", a, b, c) == -(2.0**-54)  # rounded once, as llvm.fma on the GPU
    assert SIM.fma(a, b, c) == 0.0  # a * b + c in Python: the product rounds first
    rng = np.random.default_rng(1)
    x, y, z = rng.standard_normal((3, 300))
    exact = [on_cpu("fma", *v) == SIM.fma(*v) for v in zip(x, y, z)]
    assert sum(exact) > 200  # mostly equal; a few differ by the second rounding
    for t, u, v in ((True, 3, 4), (False, 3, 4), (True, 1.5, -1.5), (0, np.uint16(1), np.uint16(2))):
        assert on_cpu("selp", t, u, v) == SIM.selp(t, u, v)
    positives = np.array([0.001, 0.5, 2.0, 3.0, 10.0, 27.0, 1000.0])
    # the simulator's cbrt is a ** (1/3) with 1/3 rounded, so its error grows with log(a):
    # within a few ulp of libm's cbrt for these
    np.testing.assert_array_max_ulp(over("cbrt", positives, dtype=np.float64),
                                    np.array([SIM.cbrt(v) for v in positives]), maxulp=4)
    assert on_cpu("cbrt", -8.0) == -2.0 and isinstance(SIM.cbrt(-8.0), complex)


def sim_fp16(name: str, *args) -> np.ndarray:
    with warnings.catch_warnings(), np.errstate(all="ignore"):
        warnings.simplefilter("ignore")
        return np.array([getattr(SIM.fp16, name)(*v) for v in zip(*args)], np.float16).astype(np.float32)


def equal(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    return (a == b) | (np.isnan(a) & np.isnan(b))


@pytest.mark.parametrize("name", ["hadd", "hsub", "hmul", "hdiv"])
def test_half_arithmetic_agrees(name):
    rng = np.random.default_rng(2)
    a, b = rng.choice(HALVES, 20000), rng.choice(HALVES, 20000)
    # exact: numpy's float16 arithmetic goes through float32, which rounds innocuously (24 >= 2 * 11 + 2)
    assert equal(over("fp16." + name, a.astype(np.float64), b.astype(np.float64)), sim_fp16(name, a, b)).all()


def test_hfma_rounds_once_where_the_simulator_rounds_twice():
    a, b, c = np.float16(1 + 2**-10), np.float16(1 - 2**-10), np.float16(-1)
    assert on_cpu("fp16.hfma", float(a), float(b), float(c)) == -(2.0**-20)
    assert SIM.fp16.hfma(a, b, c) == 0  # the float16 product rounds to 1 first


def test_half_comparisons_agree_but_hne_and_hmax_hmin_with_nan():
    values = np.array([0.0, -0.0, 1.0, -1.0, 2.5, np.inf, -np.inf, np.nan], np.float16)
    for x in values:
        for y in values:
            for name in ("heq", "hgt", "hge", "hlt", "hle"):
                assert on_cpu("fp16." + name, float(x), float(y)) == getattr(SIM.fp16, name)(x, y)
            nan = np.isnan(x) or np.isnan(y)
            assert on_cpu("fp16.hne", float(x), float(y)) == (SIM.fp16.hne(x, y) and not nan)  # ordered
            if not nan:
                assert on_cpu("fp16.hmax", float(x), float(y)) == SIM.fp16.hmax(x, y)
                assert on_cpu("fp16.hmin", float(x), float(y)) == SIM.fp16.hmin(x, y)
    nan, one = np.float16(np.nan), np.float16(1)
    assert on_cpu("fp16.hmax", math.nan, 1.0) == 1.0 and np.isnan(SIM.fp16.hmax(nan, one))  # the GPU drops the NaN
    assert on_cpu("fp16.hmax", 1.0, math.nan) == 1.0 and SIM.fp16.hmax(one, nan) == 1


ROUNDED_TWICE = {"hsin", "hcos", "hexp", "hexp2", "hlog", "hlog10"}


@pytest.mark.parametrize("name", ["hsin", "hcos", "hexp", "hexp2", "hexp10", "hlog", "hlog2", "hlog10", "hsqrt",
                                  "hrcp", "hceil", "htrunc", "hrint", "hneg", "habs"])
def test_half_math_over_every_half(name):
    cpu = over("fp16." + name, HALVES.astype(np.float64))
    sim = sim_fp16(name, HALVES)
    differ = np.flatnonzero(~equal(cpu, sim))
    if name not in ROUNDED_TWICE:
        assert differ.size == 0, HALVES[differ[:5]]
        return
    # numpy computes half math as float32 libm then half: two roundings, off by one half ulp
    # on a handful of inputs (hsin(0x32B3), hcos(0x2B7C), hexp(0x1F79)... are also the inputs
    # cuda_fp16.hpp corrects on the GPU); the CPU rounds the float64 result once
    steps = np.abs(cpu[differ].astype(np.float16).view(np.int16).astype(int) -
                   sim[differ].astype(np.float16).view(np.int16).astype(int))
    assert differ.size <= 8 and (steps == 1).all(), (HALVES[differ], steps)


def test_where_the_simulators_half_math_leaves_the_gpu():
    x = np.float16(2.5)
    assert on_cpu("fp16.hfloor", 2.5) == 2.0 and SIM.fp16.hfloor(x) == 3  # np.ceil in the simulator
    assert on_cpu("fp16.hrsqrt", -0.0) == -math.inf  # PTX rsqrt(-0) is -inf
    assert math.isnan(on_cpu("fp16.hrsqrt", -math.inf))  # PTX rsqrt(-inf) is NaN
    assert on_cpu("fp16.hrsqrt", 4.0) == float(SIM.fp16.hrsqrt(np.float16(4.0))) == 0.5
