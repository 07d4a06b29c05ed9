"""Conformance kernels (see conformance_kernels.py): CUDA intrinsics, fastmath, random numbers.

popc/brev/clz/ffs/fma/cbrt/selp, ``int.bit_count``, ``round``, float16, ``fastmath=True``
and numba.cuda.random's xoroshiro128+ generators (whose state a kernel updates).
"""

from __future__ import annotations

from math import cos
from typing import Any

import numpy as np
from numba import cuda
from numba.cuda.random import (
    init_xoroshiro128p_states_cpu,
    xoroshiro128p_dtype,
    xoroshiro128p_normal_float32,
    xoroshiro128p_normal_float64,
    xoroshiro128p_uniform_float32,
    xoroshiro128p_uniform_float64,
)

from tests.support.conformance_case import REFUSE, Case, ulps

# -- cudapy/test_intrinsics.py (each compiled there by cuda.jit(signature)(fn)) -----------------


def simple_popc(ary, c):
    ary[0] = cuda.popc(c)


def simple_bit_count(ary, c):
    ary[0] = c.bit_count()


def simple_fma(ary, a, b, c):
    ary[0] = cuda.fma(a, b, c)


def simple_hadd(ary, a, b):
    ary[0] = cuda.fp16.hadd(a[0], b[0])


def simple_cbrt(ary, a):
    ary[0] = cuda.cbrt(a)


def simple_brev(ary, c):
    ary[0] = cuda.brev(c)


def simple_clz(ary, c):
    ary[0] = cuda.clz(c)


def simple_ffs(ary, c):
    ary[0] = cuda.ffs(c)


def simple_round(ary, c):
    ary[0] = round(c)


def branching_with_selps(a, b, c):
    i = cuda.grid(1)

    inner = cuda.selp(b % 2 == 0, c[i], 13)
    a[i] = cuda.selp(a[i] > 4, inner, 3)


# -- cudapy/test_fastmath.py ----------------------------------------------------------------------


def test_cosf() -> Any:  # TestFastMathOption.test_cosf: _test_fast_math_unary(cos, ...)
    op = cos

    def kernel(r, x):
        r[0] = op(x)

    return cuda.jit(fastmath=True)(kernel)  # the original: cuda.jit(sig, device=False, fastmath=True)(kernel)


# -- cudapy/test_random.py, doc_examples/test_random.py, doc_examples/test_montecarlo.py --------

UNIFORM = 1
NORMAL = 2


@cuda.jit
def rng_kernel_float32(states, out, count, distribution):
    thread_id = cuda.grid(1)

    for i in range(count):
        idx = thread_id * count + i

        if distribution == UNIFORM:
            out[idx] = xoroshiro128p_uniform_float32(states, thread_id)
        elif distribution == NORMAL:
            out[idx] = xoroshiro128p_normal_float32(states, thread_id)


@cuda.jit
def rng_kernel_float64(states, out, count, distribution):
    thread_id = cuda.grid(1)

    for i in range(count):
        idx = thread_id * count + i

        if distribution == UNIFORM:
            out[idx] = xoroshiro128p_uniform_float64(states, thread_id)
        elif distribution == NORMAL:
            out[idx] = xoroshiro128p_normal_float64(states, thread_id)



def test_ex_3d_grid() -> Any:
    @cuda.jit
    def random_3d(arr, rng_states):
        # Per-dimension thread indices and strides
        startx, starty, startz = cuda.grid(3)
        stridex, stridey, stridez = cuda.gridsize(3)

        # Linearized thread index
        tid = (startz * stridey * stridex) + (starty * stridex) + startx

        # Use strided loops over the array to assign a random value to each entry
        for i in range(startz, arr.shape[0], stridez):
            for j in range(starty, arr.shape[1], stridey):
                for k in range(startx, arr.shape[2], stridex):
                    arr[i, j, k] = xoroshiro128p_uniform_float32(
                        rng_states, tid
                    )

    return random_3d


def test_ex_montecarlo() -> Any:
    import numba

    @cuda.jit
    def mc_integrator_kernel(out, rng_states, lower_lim, upper_lim):
        """
        kernel to draw random samples and evaluate the function to
        be integrated at those sample values
        """
        size = len(out)

        gid = cuda.grid(1)
        if gid < size:
            # draw a sample between 0 and 1 on this thread
            samp = xoroshiro128p_uniform_float32(rng_states, gid)

            # normalize this sample to the limit range
            samp = samp * (upper_lim - lower_lim) + lower_lim

            # evaluate the function to be
            # integrated at the normalized
            # value of the sample
            y = func(samp)
            out[gid] = y

    # define a function to integrate
    @numba.jit
    def func(x):
        return 1.0 / x

    return mc_integrator_kernel


# -- launch cases --------------------------------------------------------------------------------


def _states(n: int) -> np.ndarray:
    states = np.empty(n, dtype=xoroshiro128p_dtype)
    init_xoroshiro128p_states_cpu(states, 1, 0)  # create_xoroshiro128p_states(n, seed=1), on the host
    return states


def _rng(dtype: Any, distribution: int) -> Any:
    return lambda rng: (_states(64), np.zeros(64 * 4, dtype=dtype), 4, distribution)


def _rng_ref(draw: Any) -> Any:
    def reference(states: np.ndarray, out: np.ndarray, count: int, distribution: int) -> tuple[Any, ...]:
        states, out = states.copy(), out.copy()
        for tid in range(states.size):
            for i in range(count):
                out[tid * count + i] = draw(states, tid)
        return states, out

    return reference


def _random_3d_ref(arr: np.ndarray, states: np.ndarray) -> tuple[Any, ...]:
    arr, states = arr.copy(), states.copy()
    sx = sy = sz = 4  # grid (2, 2, 2) of blocks (2, 2, 2)
    for z0, y0, x0 in np.ndindex(sz, sy, sx):
        tid = z0 * sy * sx + y0 * sx + x0
        for i in range(z0, arr.shape[0], sz):
            for j in range(y0, arr.shape[1], sy):
                for k in range(x0, arr.shape[2], sx):
                    arr[i, j, k] = xoroshiro128p_uniform_float32(states, tid)
    return arr, states


def _mc_ref(out: np.ndarray, states: np.ndarray, lo: int, hi: int) -> tuple[Any, ...]:
    out, states = out.copy(), states.copy()
    for gid in range(out.size):  # numba types float32 * int64 as float64
        samp = np.float64(xoroshiro128p_uniform_float32(states, gid)) * (hi - lo) + lo
        out[gid] = 1.0 / samp
    return out, states


def _scalar(out_dtype: Any, *values: Any) -> Any:
    return lambda rng: (np.zeros(1, dtype=out_dtype), *values)


_I = "cudapy/test_intrinsics.py::TestCudaIntrinsic."
_CBRT = "cbrt: CUDA's cbrt and the CPU's cbrt / the simulator's a ** (1 / 3) agree to a few ulp, not bitwise"
_LIBM = "log/cos of float32 through different libms (and the simulator's float64 math module) differ by an ulp"

CASES = [
    Case("popc_u4", _I + "test_popc_u4", cuda.jit(simple_popc), (1,), (1,),
         _scalar(np.int32, np.uint32(0xFFFFFFFF)), (0,), reference=lambda a, c: (np.array([32]),)),
    Case("popc_u8", _I + "test_popc_u8", cuda.jit(simple_popc), (1,), (1,),
         _scalar(np.int32, np.uint64(0xFFFFFFFFFFFFFFFF)), (0,), reference=lambda a, c: (np.array([64]),)),
    Case("int_bit_count", _I + "test_bit_count_u2", cuda.jit(simple_bit_count), (1,), (1,),
         _scalar(np.int32, np.uint16(0xFFFF)), (0,), reference=lambda a, c: (np.array([16]),)),
    Case("fma_f8", _I + "test_fma_f8", cuda.jit(simple_fma), (1,), (1,),
         _scalar(np.float64, 2.0, 3.0, 4.0), (0,), reference=lambda r, a, b, c: (np.array([10.0]),)),
    Case("fma_f4", _I + "test_fma_f4", cuda.jit(simple_fma), (1,), (1,),
         _scalar(np.float32, np.float32(2.0), np.float32(3.0), np.float32(4.0)), (0,),
         reference=lambda r, a, b, c: (np.array([10.0], np.float32),)),
    Case("fp16_hadd", _I + "test_hadd", cuda.jit(simple_hadd), (1,), (1,),
         lambda r: (np.zeros(1, dtype=np.float16), np.array([3.0], np.float16), np.array([4.0], np.float16)),
         (0,), reference=lambda r, a, b: (a + b,), expect=REFUSE),
    Case("cbrt_f4", _I + "test_cbrt_f32", cuda.jit(simple_cbrt), (1,), (1,),
         _scalar(np.float32, np.float32(2.0)), (0,), reference=lambda r, a: (np.cbrt(np.float32([2.0])),),
         rtol=ulps(2, np.float32), tolerance=_CBRT),
    Case("cbrt_f8", _I + "test_cbrt_f64", cuda.jit(simple_cbrt), (1,), (1,),
         _scalar(np.float64, 6.0), (0,), reference=lambda r, a: (np.cbrt([6.0]),),
         rtol=ulps(2, np.float64), tolerance=_CBRT),
    Case("brev_u4", _I + "test_brev_u4", cuda.jit(simple_brev), (1,), (1,),
         _scalar(np.uint32, np.uint32(0x000030F0)), (0,),
         reference=lambda r, c: (np.array([0x0F0C0000], np.uint32),)),
    Case("clz_i4", _I + "test_clz_i4", cuda.jit(simple_clz), (1,), (1,),
         _scalar(np.int32, np.int32(0x00100000)), (0,), reference=lambda r, c: (np.array([11]),)),
    Case("clz_i4_0s", _I + "test_clz_i4_0s", cuda.jit(simple_clz), (1,), (1,),
         _scalar(np.int32, np.int32(0)), (0,), reference=lambda r, c: (np.array([32]),)),
    Case("ffs_u4", _I + "test_ffs_u4", cuda.jit(simple_ffs), (1,), (1,),
         _scalar(np.int32, np.uint32(0x80000000)), (0,), reference=lambda r, c: (np.array([32]),)),
    Case("ffs_i4", _I + "test_ffs_i4", cuda.jit(simple_ffs), (1,), (1,),
         _scalar(np.int32, np.int32(0x00100000)), (0,), reference=lambda r, c: (np.array([21]),)),
    Case("round_f8", _I + "test_round_f8", cuda.jit(simple_round), (1,), (1,),
         _scalar(np.int64, np.float64(2.5)), (0,), reference=lambda r, c: (np.array([2]),)),
    Case("selp", _I + "test_selp", cuda.jit(branching_with_selps), (32,), (1,),
         lambda r: (np.arange(32, dtype=np.int64), np.int64(6), np.full(shape=32, fill_value=17, dtype=np.int64)),
         (0,), reference=lambda a, b, c: (np.where(np.arange(32) > 4, 17, 3),)),
    # fastmath: the GPU's cos.approx.ftz.f32 and the CPU's fast-math cos agree to ~1e-6
    Case("fastmath_cos", "cudapy/test_fastmath.py::TestFastMathOption.test_cosf", test_cosf(), (1,), (1,),
         _scalar(np.float32, np.float32(0.7)), (0,), reference=lambda r, x: (np.cos(np.float32([0.7])),),
         rtol=1e-6, tolerance="fastmath=True allows approximate cos (the GPU's cos.approx.f32)"),
    Case("rng_uniform_f32", "cudapy/test_random.py::TestCudaRandomXoroshiro128p.test_uniform_float32",
         rng_kernel_float32, (2,), (32,), _rng(np.float32, UNIFORM), (0, 1),
         reference=_rng_ref(xoroshiro128p_uniform_float32)),
    Case("rng_normal_f32", "cudapy/test_random.py::TestCudaRandomXoroshiro128p.test_normal_float32",
         rng_kernel_float32, (2,), (32,), _rng(np.float32, NORMAL), (0, 1),
         reference=_rng_ref(xoroshiro128p_normal_float32), rtol=ulps(4, np.float32), tolerance=_LIBM),
    Case("rng_uniform_f64", "cudapy/test_random.py::TestCudaRandomXoroshiro128p.test_uniform_float64",
         rng_kernel_float64, (2,), (32,), _rng(np.float64, UNIFORM), (0, 1),
         reference=_rng_ref(xoroshiro128p_uniform_float64)),
    Case("doc_random_3d", "doc_examples/test_random.py::TestRandom.test_ex_3d_grid", test_ex_3d_grid(),
         (2, 2, 2), (2, 2, 2), lambda r: (np.zeros((5, 6, 7), dtype=np.float32), _states(64)), (0, 1),
         reference=_random_3d_ref),
    Case("doc_montecarlo", "doc_examples/test_montecarlo.py::TestMonteCarlo.test_ex_montecarlo",
         test_ex_montecarlo(), (2,), (128,), lambda r: (np.zeros(256, dtype="float32"), _states(256), 1, 2),
         (0, 1), reference=_mc_ref, rtol=ulps(2, np.float32),
         tolerance="numba computes samp * (hi - lo) + lo in float64, the simulator in float32 (NEP 50)"),
]
