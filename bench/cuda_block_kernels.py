"""Kernels for the ``cuda_on_cpu`` suite that synchronise or call device functions, each
beside the loop a user would hand-write as ``njit(parallel=True)`` (bench_cuda_on_cpu.py).

* ``fast_matmul``: numba-cuda's documented tiled matrix product (shared-memory tiles, two
  barriers per tile); the hand-written loop accumulates each element over k in the same
  order, so the two give the same float32 bits.
* ``block_sums``: a shared-memory tree reduction per block of 256; the hand-written loop
  sums each block's slice.
* ``black_scholes``: numba-cuda's Black-Scholes test kernel, with its ``cnd`` device
  function; the hand-written loop calls the same function as an inlined ``njit``.
* ``histogram_loop``: the hand-written twin of bench_cuda_on_cpu's grid-stride histogram.
"""

import math

import numba
import numpy as np
from numba import cuda, float32, float64

TPB = 16
REDUCE_BLOCK = 256
RSQRT2PI = 0.39894228040143267793994605993438
A1, A2, A3, A4, A5 = 0.31938153, -0.356563782, 1.781477937, -1.821255978, 1.330274429


@cuda.jit
def fast_matmul(A, B, C):
    sA = cuda.shared.array(shape=(TPB, TPB), dtype=float32)
    sB = cuda.shared.array(shape=(TPB, TPB), dtype=float32)
    x, y = cuda.grid(2)
    tx = cuda.threadIdx.x
    ty = cuda.threadIdx.y
    bpg = cuda.gridDim.x
    tmp = float32(0.)
    for i in range(bpg):
        sA[ty, tx] = 0
        sB[ty, tx] = 0
        if y < A.shape[0] and (tx + i * TPB) < A.shape[1]:
            sA[ty, tx] = A[y, tx + i * TPB]
        if x < B.shape[1] and (ty + i * TPB) < B.shape[0]:
            sB[ty, tx] = B[ty + i * TPB, x]
        cuda.syncthreads()
        for j in range(TPB):
            tmp += sA[ty, j] * sB[j, tx]
        cuda.syncthreads()
    if y < C.shape[0] and x < C.shape[1]:
        C[y, x] = tmp


@numba.njit(parallel=True)
def matmul_loop(A, B, C):
    for y in numba.prange(C.shape[0]):
        for x in range(C.shape[1]):
            tmp = np.float32(0.0)
            for k in range(A.shape[1]):
                tmp += A[y, k] * B[k, x]
            C[y, x] = tmp


@cuda.jit
def block_sums(a, out):
    buf = cuda.shared.array(REDUCE_BLOCK, float64)
    t = cuda.threadIdx.x
    i = cuda.grid(1)
    buf[t] = a[i] if i < a.shape[0] else 0.0
    cuda.syncthreads()
    s = cuda.blockDim.x // 2
    while s > 0:
        if t < s:
            buf[t] += buf[t + s]
        cuda.syncthreads()
        s //= 2
    if t == 0:
        out[cuda.blockIdx.x] = buf[0]


@numba.njit(parallel=True)
def block_sums_loop(a, out):
    for b in numba.prange(out.shape[0]):
        s = 0.0
        for i in range(b * REDUCE_BLOCK, min((b + 1) * REDUCE_BLOCK, a.shape[0])):
            s += a[i]
        out[b] = s


@cuda.jit(device=True)
def cnd_cuda(d):
    K = 1.0 / (1.0 + 0.2316419 * math.fabs(d))
    ret_val = (RSQRT2PI * math.exp(-0.5 * d * d) * (K * (A1 + K * (A2 + K * (A3 + K * (A4 + K * A5))))))
    if d > 0:
        ret_val = 1.0 - ret_val
    return ret_val


@cuda.jit
def black_scholes(callResult, putResult, S, X, T, R, V):
    i = cuda.threadIdx.x + cuda.blockIdx.x * cuda.blockDim.x
    if i >= S.shape[0]:
        return
    sqrtT = math.sqrt(T[i])
    d1 = (math.log(S[i] / X[i]) + (R + 0.5 * V * V) * T[i]) / (V * sqrtT)
    d2 = d1 - V * sqrtT
    cndd1 = cnd_cuda(d1)
    cndd2 = cnd_cuda(d2)
    expRT = math.exp((-1.0 * R) * T[i])
    callResult[i] = S[i] * cndd1 - X[i] * expRT * cndd2
    putResult[i] = X[i] * expRT * (1.0 - cndd2) - S[i] * (1.0 - cndd1)


@numba.njit(inline="always")
def cnd(d):
    K = 1.0 / (1.0 + 0.2316419 * math.fabs(d))
    ret_val = (RSQRT2PI * math.exp(-0.5 * d * d) * (K * (A1 + K * (A2 + K * (A3 + K * (A4 + K * A5))))))
    if d > 0:
        ret_val = 1.0 - ret_val
    return ret_val


@numba.njit(parallel=True)
def black_scholes_loop(callResult, putResult, S, X, T, R, V):
    for i in numba.prange(S.shape[0]):
        sqrtT = math.sqrt(T[i])
        d1 = (math.log(S[i] / X[i]) + (R + 0.5 * V * V) * T[i]) / (V * sqrtT)
        d2 = d1 - V * sqrtT
        cndd1 = cnd(d1)
        cndd2 = cnd(d2)
        expRT = math.exp((-1.0 * R) * T[i])
        callResult[i] = S[i] * cndd1 - X[i] * expRT * cndd2
        putResult[i] = X[i] * expRT * (1.0 - cndd2) - S[i] * (1.0 - cndd1)


def options(n, seed=0):
    rng = np.random.default_rng(seed)
    return (np.zeros(n), np.zeros(n), rng.uniform(5.0, 30.0, n), rng.uniform(1.0, 100.0, n),
            rng.uniform(0.25, 10.0, n))


@numba.njit(parallel=True)
def histogram_loop(values, hist, chunks=32):
    # a histogram per chunk of values, summed at the end: how a CPU programmer writes it
    per = (values.shape[0] + chunks - 1) // chunks
    partial = np.zeros((chunks, hist.shape[0]), hist.dtype)
    for c in numba.prange(chunks):
        for i in range(c * per, min(values.shape[0], (c + 1) * per)):
            partial[c, values[i]] += 1
    for c in range(chunks):
        hist += partial[c]
