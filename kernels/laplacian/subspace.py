"""Block primitives of the Chebyshev route: a seeded start block drawn where the block lives, and CholeskyQR2.

Owns two pieces of chebyshev.py's outer iteration that would otherwise cost host time on a GPU:

* ``start_block``: fills an (N, w) block with uniform values in (-1, 1) from a counter-based
  integer hash of (seed, column, row), as one kernelrt kernel (``random_fill``), so nothing is
  drawn on the host and nothing is uploaded. Every operation is on integers below 2⁶³ (32-bit
  words multiplied in 16-bit halves) and the last step is a multiply by a power of two, which
  rounds nowhere: the block is bitwise the same on the CPU backend, under the CUDA simulator
  (Python integers) and on a GPU.
* ``orthonormalize``: CholeskyQR2 (two rounds of G = FᵀF, R = chol(G), F ← F R⁻¹; Yamamoto,
  Nakatsukasa, Yanagisawa & Fukaya 2015), which is GEMMs on the block plus b × b work on the
  host, with Householder QR as the fallback (module constant QR_CERTIFICATE says when).
"""

from __future__ import annotations

import numpy as np
from scipy.linalg import solve_triangular

import kernelrt

from .placement import blocks

__all__ = ["random_fill", "start_block", "orthonormalize", "subspace_kernels", "QR_CERTIFICATE", "START_SEED"]

START_SEED = 0x5EED  # the start block's seed: a fixed seed keeps runs, and backends, identical
# Round one leaves Q₁ = F R₁⁻¹ with ‖Q₁ᵀQ₁ − I‖ ~ u κ(F)² (κ of the column-scaled F). When
# ‖Q₁ᵀQ₁ − I‖_F <= 0.5 the Gram matrix of round two has its eigenvalues in [0.5, 1.5], so κ(Q₁) <= √3
# and round two returns Q orthonormal to O(u) (the same paper's bound with κ = √3). Round two's Gram
# matrix is computed anyway: the check costs a b × b norm. Above 0.5 (κ(F) beyond ~1e8, e.g. a grown
# block's heavily filtered columns) Householder QR, which is stable for any κ, takes over.
QR_CERTIFICATE = 0.5


@kernelrt.device
def _mul32(x, c):
    # (x c) mod 2³², x and c below 2³², with every intermediate below 2⁴⁹: the same integers in
    # numba's int64, on the GPU and in the simulator's Python ints (a 64-bit product would overflow)
    return (((((x >> 16) * c) & 0xFFFF) << 16) + (x & 0xFFFF) * c) & 0xFFFFFFFF


@kernelrt.device
def _mix32(x):
    # Wellons' "lowbias32" (hash-prospector): a bijection on 32-bit words with a low avalanche bias
    x ^= x >> 16
    x = _mul32(x, 0x7FEB352D)
    x ^= x >> 15
    x = _mul32(x, 0x846CA68B)
    x ^= x >> 16
    return x


@kernelrt.kernel
def random_fill(i, key, col0, out):
    # Thread i writes out[r, q] (row-major, so a warp's stores are consecutive). The counter is
    # (col0 + q) N + r: a block grown by extra columns (col0 = b) gets new values, never repeats.
    w = out.shape[1]
    if i < out.shape[0] * w:
        r = i // w
        q = i - r * w
        c = (col0 + q) * out.shape[0] + r
        h = _mix32(_mix32((c & 0xFFFFFFFF) ^ key) ^ (c >> 32))
        # (h − 2³¹ + ½) 2⁻³¹: in (-1, 1), mean exactly 0; h < 2³² so every step is exact
        out[r, q] = ((h - 2147483648) + 0.5) * 4.656612873077393e-10


def start_block(be, out, col0: int = 0, seed: int = START_SEED) -> None:
    """Fill ``out`` (N, w), a float64 array on ``be``, with the seeded values of columns ``col0 ..``."""
    key = int(_mix32(seed & 0xFFFFFFFF))  # plain Python: the same word the kernels would compute
    size = int(out.shape[0]) * int(out.shape[1])
    block = 128  # 1-D, so grid x (limit 2³¹ − 1 blocks) covers any block
    be.launch_kernel(random_fill, blocks(size, block), block, key, int(col0), out)


def subspace_kernels() -> list:
    """(kernel, signature) of every launch here, for ``warm_specs``."""
    return [(random_fill, "int64, int64, float64[:, ::1]")]


def _right_factor(g: np.ndarray) -> np.ndarray:
    """``X`` with ``F X`` orthonormal for ``g = FᵀF``: D R⁻¹, R = chol(D g D), D = diag(g)^-½.

    The diagonal scaling is free (it comes from g's diagonal) and takes the filter's column
    gains (up to chebyshev.MAX_GAIN apart) out of the Cholesky factor's condition.
    """
    diag = np.diag(g)
    if not (np.isfinite(g).all() and (diag > 0).all()):
        raise np.linalg.LinAlgError("zero or non-finite column")
    d = 1.0 / np.sqrt(diag)
    r = np.linalg.cholesky(d[:, None] * g * d[None, :]).T  # upper: D g D = Rᵀ R
    x = d[:, None] * solve_triangular(r, np.eye(len(g)), lower=False)
    if not np.isfinite(x).all():
        raise np.linalg.LinAlgError("singular Cholesky factor")
    return x


def orthonormalize(f, xp, host):
    """(Q, how): Q orthonormal with span(Q) = span(f), by CholeskyQR2 or Householder QR.

    Args:
        f: (N, b) block, ``xp``'s array (NumPy on the host, CuPy on a GPU).
        xp: its array module.
        host: turns an ``xp`` array into a NumPy array (the b × b Gram matrices go to the host:
            a b × b Cholesky on a GPU is launch-bound).

    Returns:
        Q, and "cholesky" or "householder": which one ran (the second when round one's Cholesky
        failed or round two's Gram matrix missed QR_CERTIFICATE).
    """
    try:
        q1 = f @ xp.asarray(_right_factor(host(f.T @ f)))
        g2 = host(q1.T @ q1)
        if np.linalg.norm(g2 - np.eye(len(g2))) <= QR_CERTIFICATE:
            return q1 @ xp.asarray(_right_factor(g2)), "cholesky"
    except np.linalg.LinAlgError:
        pass
    return xp.linalg.qr(f)[0], "householder"
