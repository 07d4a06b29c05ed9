"""Conformance kernels (see conformance_kernels.py): the documentation's shared-memory and
grid-sync examples.

doc_examples/test_matmul.py (``matmul`` and the tiled ``fast_matmul``), the shared-memory
reduction of doc_examples/test_reduction.py, the heat equation of doc_examples/test_laplace.py
and the row-by-row fill of doc_examples/test_cg.py (both synchronise the whole grid with
``cuda.cg.this_grid().sync()``), and cudapy/test_cooperative_groups.py's ``sync_group``.
The example's docstring line naming its source (a link) is left out of ``fast_matmul``.
Numba's simulator synchronises a grid only within one block, so multi-block grid syncs
are checked against numpy references only.
"""

from __future__ import annotations

from typing import Any

import numpy as np
from numba import cuda

from tests.support.conformance_case import Case

# -- doc_examples/test_matmul.py --------------------------------------------------------------


def test_matmul() -> Any:
    from numba.cuda import float32

    @cuda.jit
    def matmul(A, B, C):
        """Perform square matrix multiplication of C = A * B."""
        i, j = cuda.grid(2)
        if i < C.shape[0] and j < C.shape[1]:
            tmp = 0.0
            for k in range(A.shape[1]):
                tmp += A[i, k] * B[k, j]
            C[i, j] = tmp

    # Controls threads per block and shared memory usage.
    # The computation will be done on blocks of TPBxTPB elements.
    # TPB should not be larger than 32 in this example
    TPB = 8  # 16 in the example

    @cuda.jit
    def fast_matmul(A, B, C):
        """
        Perform matrix multiplication of C = A * B using CUDA shared memory.

        """
        # Define an array in the shared memory
        # The size and type of the arrays must be known at compile time
        sA = cuda.shared.array(shape=(TPB, TPB), dtype=float32)
        sB = cuda.shared.array(shape=(TPB, TPB), dtype=float32)

        x, y = cuda.grid(2)

        tx = cuda.threadIdx.x
        ty = cuda.threadIdx.y
        bpg = cuda.gridDim.x  # blocks per grid

        # Each thread computes one element in the result matrix.
        # The dot product is chunked into dot products of TPB-long vectors.
        tmp = float32(0.0)
        for i in range(bpg):
            # Preload data into shared memory
            sA[ty, tx] = 0
            sB[ty, tx] = 0
            if y < A.shape[0] and (tx + i * TPB) < A.shape[1]:
                sA[ty, tx] = A[y, tx + i * TPB]
            if x < B.shape[1] and (ty + i * TPB) < B.shape[0]:
                sB[ty, tx] = B[ty + i * TPB, x]

            # Wait until all threads finish preloading
            cuda.syncthreads()

            # Computes partial product on the shared memory
            for j in range(TPB):
                tmp += sA[ty, j] * sB[j, tx]

            # Wait until all threads finish computing
            cuda.syncthreads()
        if y < C.shape[0] and x < C.shape[1]:
            C[y, x] = tmp

    return matmul, fast_matmul


# -- doc_examples/test_reduction.py -------------------------------------------------------------


def test_ex_reduction() -> Any:
    from numba.cuda.types import int32

    a = np.arange(128)  # 1024 in the example
    nelem = len(a)

    @cuda.jit
    def array_sum(data):
        tid = cuda.threadIdx.x
        size = len(data)
        if tid < size:
            i = cuda.grid(1)

            # Declare an array in shared memory
            shr = cuda.shared.array(nelem, int32)
            shr[tid] = data[i]

            # Ensure writes to shared memory are visible
            # to all threads before reducing
            cuda.syncthreads()

            s = 1
            while s < cuda.blockDim.x:
                if tid % (2 * s) == 0:
                    # Stride by `s` and add
                    shr[tid] += shr[tid + s]
                s *= 2
                cuda.syncthreads()

            # After the loop, the zeroth  element contains the sum
            if tid == 0:
                data[tid] = shr[tid]

    return array_sum


# -- doc_examples/test_laplace.py, doc_examples/test_cg.py, cudapy/test_cooperative_groups.py ---


def test_ex_laplace() -> Any:
    @cuda.jit
    def solve_heat_equation(buf_0, buf_1, timesteps, k):
        i = cuda.grid(1)

        # Don't continue if our index is outside the domain
        if i >= len(buf_0):
            return

        # Prepare to do a grid-wide synchronization later
        grid = cuda.cg.this_grid()

        for step in range(timesteps):
            # Select the buffer from the previous timestep
            if (step % 2) == 0:
                data = buf_0
                next_data = buf_1
            else:
                data = buf_1
                next_data = buf_0

            # Get the current temperature associated with this point
            curr_temp = data[i]

            # Apply formula from finite difference equation
            if i == 0:
                # Left wall is held at T = 0
                next_temp = curr_temp + k * (data[i + 1] - (2 * curr_temp))
            elif i == len(data) - 1:
                # Right wall is held at T = 0
                next_temp = curr_temp + k * (data[i - 1] - (2 * curr_temp))
            else:
                # Interior points are a weighted average of their neighbors
                next_temp = curr_temp + k * (
                    data[i - 1] - (2 * curr_temp) + data[i + 1]
                )

            # Write new value to the next buffer
            next_data[i] = next_temp

            # Wait for every thread to write before moving on
            grid.sync()

    return solve_heat_equation


def test_ex_grid_sync() -> Any:
    def sequential_rows(M):
        col = cuda.grid(1)
        g = cuda.cg.this_grid()

        rows = M.shape[0]
        cols = M.shape[1]

        for row in range(1, rows):
            opposite = cols - col - 1
            # Each row's elements are one greater than the previous row
            M[row, col] = M[row - 1, opposite] + 1
            # Wait until all threads have written their column element,
            # and that the write is visible to all other threads
            g.sync()

    return cuda.jit(sequential_rows)  # the example: @cuda.jit(sig), sig = (int32[:, ::1],)


@cuda.jit
def sync_group(A):
    g = cuda.cg.this_grid()
    g.sync()
    A[0] = 1.0


# -- launch cases --------------------------------------------------------------------------------


def _heat(size: int) -> Any:
    def make(rng: np.random.Generator) -> tuple[Any, ...]:
        data = np.zeros(size)
        data[size // 2] = 10000  # the middle element is made very hot
        return data, np.zeros(size), 20, 0.25

    return make


def _heat_ref(buf_0: np.ndarray, buf_1: np.ndarray, timesteps: int, k: float) -> tuple[Any, ...]:
    bufs = [buf_0.copy(), buf_1.copy()]
    for step in range(timesteps):
        data, nxt = bufs[step % 2], bufs[1 - step % 2]
        curr = data.copy()
        nxt[0] = curr[0] + k * (data[1] - (2 * curr[0]))
        nxt[-1] = curr[-1] + k * (data[-2] - (2 * curr[-1]))
        nxt[1:-1] = curr[1:-1] + k * (data[:-2] - (2 * curr[1:-1]) + data[2:])
    return tuple(bufs)


def _fast_matmul(rng: np.random.Generator) -> tuple[Any, ...]:
    x_h = rng.integers(0, 10, (5, 23))  # the example's non-square case, with random integers
    y_h = rng.integers(0, 10, (23, 7)).astype(np.float64)
    return x_h, y_h, np.zeros([5, 7])


_matmul, _fast = test_matmul()
_DOC_SYNC = "the simulator synchronises a grid only within one block"

CASES = [
    Case("doc_matmul", "doc_examples/test_matmul.py::test_matmul (matmul)", _matmul, (2, 2), (4, 4),
         lambda r: (np.arange(64).reshape([8, 8]), r.integers(0, 9, (8, 8)).astype(float), np.zeros([8, 8])), (2,),
         reference=lambda a, b, c: (a @ b,)),
    Case("doc_fast_matmul", "doc_examples/test_matmul.py::test_matmul (fast_matmul, non-square)", _fast,
         (3, 3), (8, 8), _fast_matmul, (2,), reference=lambda a, b, c: (a @ b,)),
    Case("doc_reduction", "doc_examples/test_reduction.py::TestReduction.test_ex_reduction", test_ex_reduction(),
         (1,), (128,), lambda r: (np.arange(128),), (0,),
         reference=lambda a: (np.concatenate([[a.sum()], a[1:]]),)),
    Case("doc_heat_grid_sync_1_block", "doc_examples/test_laplace.py::TestLaplace.test_ex_laplace",
         test_ex_laplace(), (1,), (65,), _heat(65), (0, 1), reference=_heat_ref),
    Case("doc_heat_grid_sync", "doc_examples/test_laplace.py::TestLaplace.test_ex_laplace", test_ex_laplace(),
         (2,), (64,), _heat(127), (0, 1), reference=_heat_ref, sim=_DOC_SYNC),
    Case("doc_grid_sync_rows", "doc_examples/test_cg.py::TestCooperativeGroups.test_ex_grid_sync",
         test_ex_grid_sync(), (2,), (32,), lambda r: (np.zeros((64, 64), dtype=np.int32),), (0,),
         reference=lambda a: (np.tile(np.arange(64), (64, 1)).T,), sim=_DOC_SYNC),
    Case("grid_sync_group", "cudapy/test_cooperative_groups.py::TestCudaCooperativeGroups.test_sync_group",
         sync_group, (1,), (1,), lambda r: (np.full(1, fill_value=np.nan),), (0,), reference=lambda a: (np.ones(1),)),
]
