"""Conformance kernels (see conformance_kernels.py): atomics, passed as values too.

cudapy/test_atomics.py hands ``cuda.atomic.add`` (and and_, inc, exch ...) and a cast
function to device functions that apply them to shared or global arrays, indexed by ints
and tuples; compare-and-swap through a slice and a tuple index; max/min/nanmax returning
the old value; atomics on the real and imaginary views of a complex array. The file's
``atomic_max`` family is made by ``exec`` from a string: its source cannot be read, so the
target refuses it (a numba-cuda kernel with no Python source to translate).
"""

from __future__ import annotations

from textwrap import dedent
from typing import Any

import numpy as np
from numba import cuda
from numba.cuda import float32, float64, int32, uint32, uint64  # the names the copies use

from tests.support.conformance_case import REFUSE, Case

# -- cudapy/test_atomics.py (kernels compiled there by cuda.jit(signature)(fn)) -----------------


@cuda.jit(device=True)
def atomic_cast_to_uint64(num):
    return uint64(num)


@cuda.jit(device=True)
def atomic_cast_to_int(num):
    return int(num)


@cuda.jit(device=True)
def atomic_cast_none(num):
    return num


@cuda.jit(device=True)
def atomic_binary_1dim_shared(
    ary,
    idx,
    op2,
    ary_dtype,
    ary_nelements,
    binop_func,
    cast_func,
    initializer,
    neg_idx,
):
    tid = cuda.threadIdx.x
    sm = cuda.shared.array(ary_nelements, ary_dtype)
    sm[tid] = initializer
    cuda.syncthreads()
    bin = cast_func(idx[tid] % ary_nelements)
    if neg_idx:
        bin = bin % ary_nelements
    binop_func(sm, bin, op2)
    cuda.syncthreads()
    ary[tid] = sm[tid]


@cuda.jit(device=True)
def atomic_binary_1dim_shared2(
    ary, idx, op2, ary_dtype, ary_nelements, binop_func, cast_func
):
    tid = cuda.threadIdx.x
    sm = cuda.shared.array(ary_nelements, ary_dtype)
    sm[tid] = ary[tid]
    cuda.syncthreads()
    bin = cast_func(idx[tid] % ary_nelements)
    binop_func(sm, bin, op2)
    cuda.syncthreads()
    ary[tid] = sm[tid]


@cuda.jit(device=True)
def atomic_binary_2dim_shared(
    ary, op2, ary_dtype, ary_shape, binop_func, y_cast_func, neg_idx
):
    tx = cuda.threadIdx.x
    ty = cuda.threadIdx.y
    sm = cuda.shared.array(ary_shape, ary_dtype)
    sm[tx, ty] = ary[tx, ty]
    cuda.syncthreads()
    bin = (tx, y_cast_func(ty))
    if neg_idx:
        bin = (bin[0] % ary_shape[0], bin[1] % ary_shape[1])
    binop_func(sm, bin, op2)
    cuda.syncthreads()
    ary[tx, ty] = sm[tx, ty]


@cuda.jit(device=True)
def atomic_binary_2dim_global(ary, op2, binop_func, y_cast_func, neg_idx):
    tx = cuda.threadIdx.x
    ty = cuda.threadIdx.y
    bin = (tx, y_cast_func(ty))
    if neg_idx:
        bin = (bin[0] % ary.shape[0], bin[1] % ary.shape[1])
    binop_func(ary, bin, op2)


@cuda.jit(device=True)
def atomic_binary_1dim_global(
    ary, idx, ary_nelements, op2, binop_func, neg_idx
):
    tid = cuda.threadIdx.x
    bin = int(idx[tid] % ary_nelements)
    if neg_idx:
        bin = bin % ary_nelements
    binop_func(ary, bin, op2)


def atomic_add(ary):
    atomic_binary_1dim_shared(
        ary, ary, 1, uint32, 32, cuda.atomic.add, atomic_cast_none, 0, False
    )


def atomic_add2(ary):
    atomic_binary_2dim_shared(
        ary, 1, uint32, (4, 8), cuda.atomic.add, atomic_cast_none, False
    )


def atomic_add_float_3(ary):
    atomic_binary_2dim_shared(
        ary, 1.0, float32, (4, 8), cuda.atomic.add, atomic_cast_to_uint64, False
    )


def atomic_add_double_global(idx, ary):
    atomic_binary_1dim_global(ary, idx, 32, 1.0, cuda.atomic.add, False)


def atomic_sub2(ary):
    atomic_binary_2dim_shared(
        ary, 1, int32, (4, 8), cuda.atomic.sub, atomic_cast_none, False
    )


def atomic_and(ary, op2):
    atomic_binary_1dim_shared(
        ary, ary, op2, uint32, 32, cuda.atomic.and_, atomic_cast_none, 1, False
    )


def atomic_or_global(idx, ary, op2):
    atomic_binary_1dim_global(ary, idx, 32, op2, cuda.atomic.or_, False)


def atomic_xor2(ary, op2):
    atomic_binary_2dim_shared(
        ary, op2, uint32, (4, 8), cuda.atomic.xor, atomic_cast_none, False
    )


def atomic_inc32(ary, idx, op2):
    atomic_binary_1dim_shared2(
        ary, idx, op2, uint32, 32, cuda.atomic.inc, atomic_cast_none
    )


def atomic_dec32(ary, idx, op2):
    atomic_binary_1dim_shared2(
        ary, idx, op2, uint32, 32, cuda.atomic.dec, atomic_cast_none
    )


def atomic_exch2(ary, op2):
    atomic_binary_2dim_shared(
        ary, op2, uint32, (4, 8), cuda.atomic.exch, atomic_cast_none, False
    )


def gen_atomic_extreme_funcs(func):
    fns = dedent("""
    def atomic(res, ary):
        tx = cuda.threadIdx.x
        bx = cuda.blockIdx.x
        {func}(res, 0, ary[tx, bx])

    def atomic_double_normalizedindex(res, ary):
        tx = cuda.threadIdx.x
        bx = cuda.blockIdx.x
        {func}(res, 0, ary[tx, uint64(bx)])

    def atomic_double_oneindex(res, ary):
        tx = cuda.threadIdx.x
        {func}(res, 0, ary[tx])

    def atomic_double_shared(res, ary):
        tid = cuda.threadIdx.x
        smary = cuda.shared.array(32, float64)
        smary[tid] = ary[tid]
        smres = cuda.shared.array(1, float64)
        if tid == 0:
            smres[0] = res[0]
        cuda.syncthreads()
        {func}(smres, 0, smary[tid])
        cuda.syncthreads()
        if tid == 0:
            res[0] = smres[0]
    """).format(func=func)
    ld = {}
    exec(fns, {"cuda": cuda, "float64": float64, "uint64": uint64}, ld)
    return (
        ld["atomic"],
        ld["atomic_double_normalizedindex"],
        ld["atomic_double_oneindex"],
        ld["atomic_double_shared"],
    )


def atomic_compare_and_swap(res, old, ary, fill_val):
    gid = cuda.grid(1)
    if gid < res.size:
        old[gid] = cuda.atomic.compare_and_swap(res[gid:], fill_val, ary[gid])


def atomic_cas_2dim(res, old, ary, fill_val):
    gid = cuda.grid(2)
    if gid[0] < res.shape[0] and gid[1] < res.shape[1]:
        old[gid] = cuda.atomic.cas(res, gid, fill_val, ary[gid])


(
    atomic_max,
    atomic_max_double_normalizedindex,
    atomic_max_double_oneindex,
    atomic_max_double_shared,
) = gen_atomic_extreme_funcs("cuda.atomic.max")


# -- nested kernels of cudapy/test_atomics.py and cudapy/test_complex.py ------------------------


def test_atomic_add_returns_old() -> Any:
    @cuda.jit
    def kernel(x):
        x[1] = cuda.atomic.add(x, 0, 1)

    return kernel


def test_atomic_nanmax_returns_old_nan_in_array() -> Any:
    @cuda.jit
    def kernel(x):
        x[1] = cuda.atomic.nanmax(x, 0, 1)

    return kernel


def test_atomic_on_real() -> Any:
    @cuda.jit
    def atomic_add_one(values):
        i = cuda.grid(1)
        cuda.atomic.add(values.real, i, 1)

    return atomic_add_one


def test_atomic_on_imag() -> Any:
    @cuda.jit
    def atomic_add_one_j(values):
        i = cuda.grid(1)
        cuda.atomic.add(values.imag, i, 1)

    return atomic_add_one_j


# -- launch cases --------------------------------------------------------------------------------


def _u32(rng: np.random.Generator, shape: Any = 32) -> np.ndarray:
    return rng.integers(0, 32, size=shape).astype(np.uint32)


def _hist(ary: np.ndarray) -> tuple[Any, ...]:
    return (np.bincount(ary, minlength=32).astype(ary.dtype),)


def _and_ref(ary: np.ndarray, op2: Any) -> tuple[Any, ...]:
    # every element starts at the initializer 1; the bins some thread names become 1 & op2
    return (np.where(np.isin(np.arange(32), ary), 1 & op2, 1).astype(np.uint32),)


def _or_global(rng: np.random.Generator) -> tuple[Any, ...]:
    c = np.int32(rng.integers(500))
    return rng.integers(0, 32, size=32, dtype=np.int32), rng.integers(0, 32, size=32, dtype=np.int32), c


def _or_global_ref(idx: np.ndarray, ary: np.ndarray, op2: Any) -> tuple[Any, ...]:
    gold = ary.copy()
    for i in range(idx.size):
        gold[idx[i]] |= op2
    return (gold,)


def _inc_dec(rng: np.random.Generator) -> tuple[Any, ...]:  # inc_dec_1dim_setup(np.uint32)
    rconst = np.uint32(rng.integers(32))
    return _u32(rng), np.arange(32, dtype=np.uint32), rconst


def _cas(ndim: int) -> Any:  # check_cas(n=100, fill=-99, unfill=-1, dtype=np.int32)
    def make(rng: np.random.Generator) -> tuple[Any, ...]:
        res = rng.permutation(np.asarray([-99] * 50 + [-1] * 50, dtype=np.int32))
        if ndim == 2:
            res.shape = (10, -1)
        ary = rng.integers(1, 10, size=res.shape).astype(res.dtype)
        return res, np.zeros_like(res), ary, np.int32(-99)

    return make


def _cas_ref(res: np.ndarray, out: np.ndarray, ary: np.ndarray, fill: Any) -> tuple[Any, ...]:
    return np.where(res == fill, ary, res), res.copy()


def _complex(rng: np.random.Generator) -> tuple[Any, ...]:
    return (np.arange(32) + np.arange(32) * 1j,)


_A = "cudapy/test_atomics.py::TestCudaAtomics."
_PLUS1 = (lambda a: (a + 1,))

CASES = [
    Case("atomic_add_shared", _A + "test_atomic_add", cuda.jit(atomic_add), (1,), (32,), lambda r: (_u32(r),),
         (0,), reference=_hist),
    Case("atomic_add_shared_2d", _A + "test_atomic_add2", cuda.jit(atomic_add2), (1,), (4, 8),
         lambda r: (_u32(r, (4, 8)),), (0,), reference=_PLUS1),
    Case("atomic_add_f4_uint64_index", _A + "test_atomic_add_float_3", cuda.jit(atomic_add_float_3), (1,), (4, 8),
         lambda r: (_u32(r, (4, 8)).astype(np.float32),), (0,), reference=_PLUS1),
    Case("atomic_add_f8_global", _A + "test_atomic_add_double_global", cuda.jit(atomic_add_double_global), (1,),
         (32,), lambda r: (r.integers(0, 32, size=32, dtype=np.int64), np.zeros(32, np.float64)), (1,),
         reference=lambda idx, ary: (np.bincount(idx, minlength=32).astype(np.float64),)),
    Case("atomic_sub_shared_2d", _A + "test_atomic_sub2", cuda.jit(atomic_sub2), (1,), (4, 8),
         lambda r: (r.integers(0, 32, size=(4, 8), dtype=np.int32),), (0,), reference=lambda a: (a - 1,)),
    Case("atomic_and_shared", _A + "test_atomic_and", cuda.jit(atomic_and), (1,), (32,),
         lambda r: (_u32(r), np.uint32(r.integers(500))), (0,), reference=_and_ref),
    Case("atomic_or_global", _A + "test_atomic_or_global", cuda.jit(atomic_or_global), (1,), (32,), _or_global,
         (1,), reference=_or_global_ref),
    Case("atomic_xor_shared_2d", _A + "test_atomic_xor2", cuda.jit(atomic_xor2), (1,), (4, 8),
         lambda r: (_u32(r, (4, 8)), np.uint32(r.integers(500))), (0,), reference=lambda a, c: (a ^ c,)),
    Case("atomic_inc", _A + "test_atomic_inc_32", cuda.jit(atomic_inc32), (1,), (32,), _inc_dec, (0,),
         reference=lambda a, i, c: (np.where(a >= c, 0, a + 1).astype(np.uint32),)),
    Case("atomic_dec", _A + "test_atomic_dec_32", cuda.jit(atomic_dec32), (1,), (32,), _inc_dec, (0,),
         reference=lambda a, i, c: (np.where(a == 0, c, np.where(a > c, c, a - 1)).astype(np.uint32),)),
    Case("atomic_exch_shared_2d", _A + "test_atomic_exch2", cuda.jit(atomic_exch2), (1,), (4, 8),
         lambda r: (_u32(r, (4, 8)), np.uint32(r.integers(50, 100))), (0,),
         reference=lambda a, c: (np.full((4, 8), c, np.uint32),)),
    Case("atomic_compare_and_swap_slice", _A + "test_atomic_compare_and_swap", cuda.jit(atomic_compare_and_swap),
         (10,), (10,), _cas(1), (0, 1), reference=_cas_ref),
    Case("atomic_cas_2d_tuple_index", _A + "test_atomic_cas_2dim", cuda.jit(atomic_cas_2dim), (1, 1), (10, 10),
         _cas(2), (0, 1), reference=_cas_ref),
    Case("atomic_add_returns_old", _A + "test_atomic_add_returns_old", test_atomic_add_returns_old(), (1,), (1,),
         lambda r: (np.array([10, 0], dtype=np.float32),), (0,), reference=lambda x: (np.array([11, 10], np.float32),)),
    Case("atomic_nanmax_returns_old", _A + "test_atomic_nanmax_returns_old_nan_in_array",
         test_atomic_nanmax_returns_old_nan_in_array(), (1,), (1,),
         lambda r: (np.array([np.nan, np.nan], dtype=np.float32),), (0,),
         reference=lambda x: (np.array([1, np.nan], np.float32),)),
    Case("atomic_add_complex_real", "cudapy/test_complex.py::TestAtomicOnComplexComponents.test_atomic_on_real",
         test_atomic_on_real(), (1,), (32,), _complex, (0,), reference=_PLUS1),
    Case("atomic_add_complex_imag", "cudapy/test_complex.py::TestAtomicOnComplexComponents.test_atomic_on_imag",
         test_atomic_on_imag(), (1,), (32,), _complex, (0,), reference=lambda a: (a + 1j,)),
    # made by exec(): inspect cannot find its source
    Case("atomic_max_exec_generated", _A + "test_atomic_max_int32 (gen_atomic_extreme_funcs)", cuda.jit(atomic_max),
         (4,), (8,), lambda r: (np.zeros(1, np.int32), r.integers(-65535, 65535, size=(8, 4)).astype(np.int32)),
         (0,), expect=REFUSE, reference=lambda res, vals: (np.array([max(0, vals.max())], np.int32),)),
]
