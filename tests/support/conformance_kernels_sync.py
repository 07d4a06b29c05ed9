"""Conformance kernels (see conformance_kernels.py): shared memory and ``cuda.syncthreads``.

Static and dynamic shared arrays (slices of the dynamic one too), records and booleans in
shared memory, ``syncthreads_count/and/or``, ``threadfence``, the Jacobi relaxation of
cudapy/test_laplace.py and the tiled matrix product of cudapy/test_matmul.py. The doc
examples with shared memory and grid sync are in conformance_kernels_doc.py.
"""

from __future__ import annotations

from typing import Any

import numpy as np
from numba import cuda
from numba.cuda import float32, float64, int32
from numba.cuda.np import numpy_support as nps

from tests.support.conformance_case import REFUSE, Case

# -- cudapy/test_sync.py (cuda.jit(signature)(fn) there) -----------------------------------------


def useless_syncthreads(ary):
    i = cuda.grid(1)
    cuda.syncthreads()
    ary[i] = i


def simple_smem(ary):
    N = 100
    sm = cuda.shared.array(N, int32)
    i = cuda.grid(1)
    if i == 0:
        for j in range(N):
            sm[j] = j
    cuda.syncthreads()
    ary[i] = sm[i]


def coop_smem2d(ary):
    i, j = cuda.grid(2)
    sm = cuda.shared.array((10, 20), float32)
    sm[i, j] = (i + 1) / (j + 1)
    cuda.syncthreads()
    ary[i, j] = sm[i, j]


def dyn_shared_memory(ary):
    i = cuda.grid(1)
    sm = cuda.shared.array(0, float32)
    sm[i] = i * 2
    cuda.syncthreads()
    ary[i] = sm[i]


def use_threadfence(ary):
    ary[0] += 123
    cuda.threadfence()
    ary[0] += 321


def use_syncthreads_count(ary_in, ary_out):
    i = cuda.grid(1)
    ary_out[i] = cuda.syncthreads_count(ary_in[i])


def use_syncthreads_and(ary_in, ary_out):
    i = cuda.grid(1)
    ary_out[i] = cuda.syncthreads_and(ary_in[i])


def use_syncthreads_or(ary_in, ary_out):
    i = cuda.grid(1)
    ary_out[i] = cuda.syncthreads_or(ary_in[i])


# -- cudapy/test_sm.py ----------------------------------------------------------------------------


def _test_shared(arr: np.ndarray) -> Any:  # TestSharedMemory._test_shared, up to the kernel
    nthreads = 16
    dt = nps.from_dtype(arr.dtype)

    @cuda.jit
    def use_sm_chunk_copy(x, y):
        sm = cuda.shared.array(nthreads, dtype=dt)

        tx = cuda.threadIdx.x
        bx = cuda.blockIdx.x
        bd = cuda.blockDim.x

        # Load this block's chunk into shared
        i = bx * bd + tx
        if i < len(x):
            sm[tx] = x[i]

        cuda.syncthreads()

        # One thread per block writes this block's chunk
        if tx == 0:
            for j in range(nthreads):
                y[bd * bx + j] = sm[j]

    return use_sm_chunk_copy


def test_dynshared_slice_write() -> Any:
    # Test writing values into disjoint slices of dynamic shared memory
    @cuda.jit
    def slice_write(x):
        dynsmem = cuda.shared.array(0, dtype=int32)
        sm1 = dynsmem[0:1]
        sm2 = dynsmem[1:2]

        sm1[0] = 1
        sm2[0] = 2
        x[0] = dynsmem[0]
        x[1] = dynsmem[1]

    return slice_write


def test_dynshared_slice_overlap() -> Any:
    # Test reading values from overlapping slices of dynamic shared memory
    @cuda.jit
    def slice_overlap(x):
        dynsmem = cuda.shared.array(0, dtype=int32)
        sm1 = dynsmem[0:2]
        sm2 = dynsmem[1:4]

        dynsmem[0] = 1
        dynsmem[1] = 2
        dynsmem[2] = 3
        dynsmem[3] = 4
        x[0] = sm1[0]
        x[1] = sm1[1]
        x[2] = sm2[0]
        x[3] = sm2[1]
        x[4] = sm2[2]

    return slice_overlap


def test_issue_5073() -> Any:
    arr = np.arange(128)  # 1024 in the original
    dt = nps.from_dtype(arr.dtype)

    @cuda.jit
    def sm_slice_copy(x, y, chunksize):
        dynsmem = cuda.shared.array(0, dtype=dt)
        sm1 = dynsmem[0:chunksize]
        sm2 = dynsmem[chunksize : chunksize * 2]

        tx = cuda.threadIdx.x
        bx = cuda.blockIdx.x
        bd = cuda.blockDim.x

        # load this block's chunk into shared
        i = bx * bd + tx
        if i < len(x):
            if tx < chunksize:
                sm1[tx] = x[i]
            else:
                sm2[tx - chunksize] = x[i]

        cuda.syncthreads()

        # one thread per block writes this block's chunk
        if tx == 0:
            for j in range(chunksize):
                y[bd * bx + j] = sm1[j]
                y[bd * bx + j + chunksize] = sm2[j]

    return sm_slice_copy


def _check_shared_array_size(shape: Any) -> Any:  # TestSharedMemoryIssue, up to the kernel
    @cuda.jit
    def s(a):
        arr = cuda.shared.array(shape, dtype=int32)
        a[0] = arr.size

    return s


def test_issue_872() -> Any:  # cudapy/test_lang.py
    def cuda_kernel_api_in_multiple_blocks(ary):
        for i in range(2):
            tx = cuda.threadIdx.x
        for j in range(3):
            ty = cuda.threadIdx.y
        sm = cuda.shared.array((2, 3), float64)
        sm[tx, ty] = 1.0
        ary[tx, ty] = sm[tx, ty]

    return cuda.jit(cuda_kernel_api_in_multiple_blocks)  # the original: @cuda.jit("void(float64[:,:])")


# -- cudapy/test_laplace.py, cudapy/test_matmul.py (their simulator sizes) -------------------------

tpb = 4
SM_SIZE = tpb, tpb
bpg = 2
n = bpg * tpb


def test_laplace_small() -> Any:
    def get_max(a, b):
        if a > b:
            return a
        else:
            return b

    get_max = cuda.jit(device=True)(get_max)  # the original: (float64(float64, float64), device=True, inline="always")

    def jocabi_relax_core(A, Anew, error):
        err_sm = cuda.shared.array(SM_SIZE, dtype=float64)

        ty = cuda.threadIdx.x
        tx = cuda.threadIdx.y
        bx = cuda.blockIdx.x
        by = cuda.blockIdx.y

        n = A.shape[0]
        m = A.shape[1]

        i, j = cuda.grid(2)

        err_sm[ty, tx] = 0
        if j >= 1 and j < n - 1 and i >= 1 and i < m - 1:
            Anew[j, i] = 0.25 * (
                A[j, i + 1] + A[j, i - 1] + A[j - 1, i] + A[j + 1, i]
            )
            err_sm[ty, tx] = Anew[j, i] - A[j, i]

        cuda.syncthreads()

        # max-reduce err_sm vertically
        t = tpb // 2
        while t > 0:
            if ty < t:
                err_sm[ty, tx] = get_max(err_sm[ty, tx], err_sm[ty + t, tx])
            t //= 2
            cuda.syncthreads()

        # max-reduce err_sm horizontally
        t = tpb // 2
        while t > 0:
            if tx < t and ty == 0:
                err_sm[ty, tx] = get_max(err_sm[ty, tx], err_sm[ty, tx + t])
            t //= 2
            cuda.syncthreads()

        if tx == 0 and ty == 0:
            error[by, bx] = err_sm[0, 0]

    return cuda.jit(jocabi_relax_core)  # the original: @cuda.jit(void(float64[:, :], float64[:, :], float64[:, :]))


def test_cuda_matmul() -> Any:
    def cu_square_matrix_mul(A, B, C):
        sA = cuda.shared.array(shape=SM_SIZE, dtype=float32)
        sB = cuda.shared.array(shape=(tpb, tpb), dtype=float32)

        tx = cuda.threadIdx.x
        ty = cuda.threadIdx.y
        bx = cuda.blockIdx.x
        by = cuda.blockIdx.y
        bw = cuda.blockDim.x
        bh = cuda.blockDim.y

        x = tx + bx * bw
        y = ty + by * bh

        acc = float32(0)  # forces all the math to be f32
        for i in range(bpg):
            if x < n and y < n:
                sA[ty, tx] = A[y, tx + i * tpb]
                sB[ty, tx] = B[ty + i * tpb, x]

            cuda.syncthreads()

            if x < n and y < n:
                for j in range(tpb):
                    acc += sA[ty, j] * sB[j, tx]

            cuda.syncthreads()

        if x < n and y < n:
            C[y, x] = acc

    return cuda.jit(cu_square_matrix_mul)  # the original: @cuda.jit(void(float32[:, ::1], ...))


# -- launch cases --------------------------------------------------------------------------------


def _laplace(rng: np.random.Generator) -> tuple[Any, ...]:
    a = rng.integers(0, 8, (8, 8)).astype(np.float64)  # sums of quarters of small integers: exact
    return a, a.copy(), np.zeros((2, 2))


def _laplace_ref(A: np.ndarray, Anew: np.ndarray, error: np.ndarray) -> tuple[Any, ...]:
    Anew, diff = Anew.copy(), np.zeros_like(A)
    Anew[1:-1, 1:-1] = 0.25 * (A[1:-1, 2:] + A[1:-1, :-2] + A[:-2, 1:-1] + A[2:, 1:-1])
    diff[1:-1, 1:-1] = Anew[1:-1, 1:-1] - A[1:-1, 1:-1]
    return Anew, diff.reshape(2, 4, 2, 4).max(axis=(1, 3))


def _recarray(rng: np.random.Generator) -> tuple[Any, ...]:
    recordwith2darray = np.dtype([("i", np.int32), ("j", np.float32, (3, 2))])
    arr = np.zeros(128, dtype=recordwith2darray).view(np.recarray)
    for x in range(len(arr)):
        arr[x].i = x
        j = np.arange(3 * 2, dtype=np.float32)
        arr[x].j = j.reshape(3, 2) * x
    return arr, np.zeros_like(arr)


def _bools(rng: np.random.Generator) -> tuple[Any, ...]:
    arr = rng.integers(2, size=(128,)).astype(np.bool_)
    return arr, np.zeros_like(arr)


def _votes(fill: int, zeros: tuple[int, ...], n: int) -> Any:
    def make(rng: np.random.Generator) -> tuple[Any, ...]:
        ary_in = np.full(n, fill, dtype=np.int32)
        ary_in[list(zeros)] = 1 - fill
        return ary_in, np.zeros(n, dtype=np.int32)

    return make


def _matmul(rng: np.random.Generator) -> tuple[Any, ...]:
    a, b = (rng.integers(0, 10, (n, n)).astype(np.float32) for _ in range(2))  # exact in float32
    return a, b, np.zeros_like(a)


_S = "cudapy/test_sync.py::TestCudaSync."
_SM = "cudapy/test_sm.py::TestSharedMemory."

CASES = [
    Case("syncthreads", _S + "test_useless_syncthreads", cuda.jit(useless_syncthreads), (1,), (10,),
         lambda r: (np.zeros(10, dtype=np.int32),), (0,), reference=lambda a: (np.arange(10),)),
    Case("shared_1d", _S + "test_simple_smem", cuda.jit(simple_smem), (1,), (100,),
         lambda r: (np.zeros(100, dtype=np.int32),), (0,), reference=lambda a: (np.arange(100),)),
    Case("shared_2d", _S + "test_coop_smem2d", cuda.jit(coop_smem2d), (1,), (10, 12),
         lambda r: (np.zeros((10, 12), dtype=np.float32),), (0,),
         reference=lambda a: (((np.arange(10)[:, None] + 1) / (np.arange(12) + 1)).astype(np.float32),)),
    Case("shared_dynamic", _S + "test_dyn_shared_memory", cuda.jit(dyn_shared_memory), (1,), (50,),
         lambda r: (np.zeros(50, dtype=np.float32),), (0,), shared_mem=50 * 4,
         reference=lambda a: (2 * np.arange(50, dtype=np.float32),)),
    Case("threadfence", _S + "test_threadfence_codegen", cuda.jit(use_threadfence), (1,), (1,),
         lambda r: (np.zeros(10, dtype=np.int32),), (0,), reference=lambda a: (np.r_[444, np.zeros(9)],)),
    Case("syncthreads_count", _S + "test_syncthreads_count", cuda.jit(use_syncthreads_count), (1,), (72,),
         _votes(1, (31, 42), 72), (1,), reference=lambda a, b: (np.full(72, 70),)),
    Case("syncthreads_and", _S + "test_syncthreads_and", cuda.jit(use_syncthreads_and), (1,), (100,),
         _votes(1, (31,), 100), (1,), reference=lambda a, b: (np.zeros(100),)),
    Case("syncthreads_or", _S + "test_syncthreads_or", cuda.jit(use_syncthreads_or), (1,), (100,),
         _votes(0, (31,), 100), (1,), reference=lambda a, b: (np.ones(100),)),
    Case("shared_recarray", _SM + "test_shared_recarray", _test_shared(_recarray(None)[0]), (8,), (16,),
         _recarray, (1,), reference=lambda x, y: (x,)),
    Case("shared_bool", _SM + "test_shared_bool", _test_shared(np.zeros(1, np.bool_)), (8,), (16,),
         _bools, (1,), reference=lambda x, y: (x,)),
    Case("dynshared_slice_write", _SM + "test_dynshared_slice_write", test_dynshared_slice_write(), (1,), (1,),
         lambda r: (np.zeros(2, dtype=np.int32),), (0,), shared_mem=2 * 4,
         reference=lambda x: (np.array([1, 2]),)),
    Case("dynshared_slice_overlap", _SM + "test_dynshared_slice_overlap", test_dynshared_slice_overlap(),
         (1,), (1,), lambda r: (np.zeros(5, dtype=np.int32),), (0,), shared_mem=5 * 4,
         reference=lambda x: (np.array([1, 2, 2, 3, 4]),)),
    Case("dynshared_slices_copy", _SM + "test_issue_5073", test_issue_5073(), (8,), (16,),
         lambda r: (np.arange(128), np.zeros(128, dtype=np.int64), 8), (1,), shared_mem=16 * 8,
         reference=lambda x, y, c: (x,)),
    Case("shared_array_size", "cudapy/test_sm.py::TestSharedMemoryIssue.test_issue_1051_shared_size_broken_2d",
         _check_shared_array_size((2, 3)), (1,), (1,), lambda r: (np.zeros(1, dtype=np.int32),), (0,),
         reference=lambda a: (np.array([6]),)),
    Case("shared_in_multiple_blocks", "cudapy/test_lang.py::TestLang.test_issue_872", test_issue_872(), (1,), (2, 3),
         lambda r: (np.zeros((2, 3)),), (0,), reference=lambda a: (np.ones((2, 3)),)),
    Case("laplace_jacobi", "cudapy/test_laplace.py::TestCudaLaplace.test_laplace_small", test_laplace_small(),
         (2, 2), (tpb, tpb), _laplace, (1, 2), reference=_laplace_ref),
    Case("matmul_shared", "cudapy/test_matmul.py::test_cuda_matmul", test_cuda_matmul(), (bpg, bpg), (tpb, tpb),
         _matmul, (2,), reference=lambda a, b, c: (a @ b,)),
]
