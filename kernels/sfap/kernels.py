"""SFAP kernels: the electrode responses h and the fused current-density contraction.

``sfap_response`` (a per-thread ``@kernel``, CPU and CUDA) writes h[fb, j, e] (docs/sfap.md, "Electrode responses").

``sfap_columns`` is the fused contraction on the GPU (docs/sfap.md, "Implementation outline"): one block per (time tile of TK
samples, fibre, tile of 32 electrodes). The block walks the rows that can be non-zero
(host-computed, ``rows``) in chunks of RC rows. For each chunk it evaluates ψ (the current density's profile) into
shared memory only where the long-side mask A needs it and x > 0 (so exp runs only
there), and ψ at the mirror rows m(j) = mb - j when the chunk meets the short side; it
then forms the current I for the chunk in shared memory and every thread (one per
(time sample, electrode) of the tile) accumulates its output over the chunk's rows in
ascending j, a fixed summation order, so results do not depend on the launch.

Expected GPU cost per fibre: the contraction is Nt·Nz·Ne FMAs, each one coalesced
8-byte h load per lane (the 8 warps of a block share those rows through L1) plus one
broadcast shared load; ψ costs one exp per needed (row, sample), at most twice per A row
when the row is also a mirror source. Shared memory is a fixed 24.8 KiB per block for
any dz (rows are tiled, so dz = 0.01 needs no opt-in). For 200 fibres x 25 electrodes
at dz = 0.1 that is 2.4 G FMAs (about 0.5-2 ms on an H100 in FP64, L1-load bound) and
roughly 50-100 M exps; lanes 25-31 of each warp idle when Ne = 25.

The CPU twin (``_columns_cpu``) runs ``prange`` over (fibre, run of CTK-sample tiles)
tasks. Per tile it evaluates ψ once per needed row and sample with a SIMD e^{-x}
(cpu_math.py), Λ once per row, I as a few interval passes, and the contraction as
SIMD dot products of eight I rows with two h rows (h electrode-major on the CPU). Its
summation order is fixed by the compiled code and the tile, never by threads or batches.
Measured on 2 cores (AVX-512): 200 fibres x 25 electrodes at dz = 0.1 in ~0.45 CPU-s.

Both evaluate x³ as x·x·x where NumPy (MyoGen) calls pow: they differ by at most an ulp
(docs/sfap.md, "Exactness: what must be done how"), far below the 1e-12 target, and pow costs as much as two exps.
No FMA can change a mask or a row: x = -2(σ(z_j - ζ) - v t_k) uses the host's z and v t
(σ = ±1 makes σρ exact, so a fused σρ - vt rounds the same), and every mask is an
integer interval from the host (prep.py).
"""

from __future__ import annotations

import math

import numpy as np
from numba import cuda, float64, prange

import kernelrt

from .cpu_math import EXP_NEG_MAX, dot8, dot8x2, exp_neg
from .prep import (
    D1,
    F_DELTA,
    F_SCALE,
    F_ZETA,
    I_AHI,
    I_ALO,
    I_EHI,
    I_ELO,
    I_MB,
    I_NZ,
    I_SHI,
    I_SIGMA,
    I_SLO,
    RESPONSE_C,
)

__all__ = ["COLUMNS_BLOCK", "CTK", "RC", "TK", "TPB_E", "sfap_columns", "sfap_response"]

TPB_E = 32  # electrodes per block (threadIdx.x, one warp's lanes)
TK = 8  # time samples per block (threadIdx.y, one warp each)
RC = 128  # rows per shared-memory chunk: 3 * 8 * ~129 doubles = 24.8 KiB
RC1 = RC + 1  # shared-array shapes must be plain constants, not expressions
NTHREADS = TPB_E * TK
COLUMNS_BLOCK = (TPB_E, TK, 1)
CTK = 8  # time samples per CPU tile: eight dot products share each h load
MIN_CPU_TASKS = 64  # parallel tasks the CPU twin aims for (balances up to ~16 threads)
_NO_ROW = 1 << 62


@kernelrt.device
def fibre_params(ipar, fpar, fb):
    """Fibre ``fb``'s plan scalars (prep.py): the long-side, short-side and end-plate
    row intervals, the mirror base, the wave direction σ, ζ, Δ and the current scale."""
    sigma = 1.0 if ipar[fb, I_SIGMA] > 0 else -1.0
    return (ipar[fb, I_ALO], ipar[fb, I_AHI], ipar[fb, I_SLO], ipar[fb, I_SHI], ipar[fb, I_MB],
            ipar[fb, I_ELO], ipar[fb, I_EHI], sigma, fpar[fb, F_ZETA], fpar[fb, F_DELTA], fpar[fb, F_SCALE])


@kernelrt.device
def tile_rows(rows, fb, k0, tk, nt):
    """(lo, hi): the rows any of samples k0 .. k0 + tk - 1 (below nt) of fibre ``fb`` needs; lo > hi if none."""
    lo = _NO_ROW
    hi = -1
    for t in range(tk):
        kk = k0 + t
        if kk < nt and rows[fb, kk, 0] <= rows[fb, kk, 1]:
            lo = min(lo, rows[fb, kk, 0])
            hi = max(hi, rows[fb, kk, 1])
    return lo, hi


@kernelrt.device
def psi_at(z, fb, j, a_lo, a_hi, sigma, zeta, vtk):
    """ψ at row j of fibre ``fb`` for the sample whose v t is ``vtk``: evaluated only where
    the long-side mask A needs it (rows a_lo .. a_hi + 1) and x > 0, so exp runs only there."""
    p = 0.0
    if j >= a_lo and j <= a_hi + 1:
        x = -2.0 * (sigma * (z[fb, j] - zeta) - vtk)
        if x > 0.0:
            p = -4.0 * sigma * ((D1 * (3.0 * (x * x) - x * x * x)) * math.exp(-x))
    return p


@kernelrt.device
def current_at(j, lam, mir, e_lo, e_hi, sigma, scale):
    """I = c E σ(Λ - S) at row j from Λ and the mirrored Λ (0 on the end-plate rows E)."""
    c = 0.0
    if j < e_lo or j > e_hi:
        c = scale * (sigma * (lam - mir))
    return c


@kernelrt.kernel(ndim=2)
def sfap_response(i, fb, z, kr2, ze, nz, h):
    """h[fb, j, e] = C / sqrt(κ r² + (z_j - Z_e)²) for j < nz[fb]; i runs over (j, e)."""
    ne = ze.shape[0]
    if fb < nz.shape[0]:
        j = i // ne
        if j < nz[fb]:
            e = i - j * ne
            d = z[fb, j] - ze[e]
            h[fb, j, e] = RESPONSE_C / math.sqrt(kr2[fb, e] + d * d)


@kernelrt.cuda_kernel
def sfap_columns(z, vt, h, ipar, fpar, rows, out, f0):
    """out[k, e, f0 + fb] = Σ_j I_fb[j, k] h[fb, j, e]; grid (tiles of TK, fibres, tiles of 32 e).

    z (Nfb, Nz+1), vt (Nfb, Nt), ipar, fpar and rows are the batch's rows of the
    FibrePlan tables; h is (Nfb, Nz, Ne) here and (Nfb, Ne, Nz) for the CPU twin; out is
    the full (Nt, Ne, Nf) output and f0 the batch's first fibre.
    """
    psd = cuda.shared.array((TK, RC1), float64)  # ψ at rows jc .. jc + RC
    psm = cuda.shared.array((TK, RC1), float64)  # ψ at mirror rows mlo .. mlo + RC
    cur = cuda.shared.array((TK, RC), float64)  # I at rows jc .. jc + RC - 1
    tx = cuda.threadIdx.x
    ty = cuda.threadIdx.y
    tid = ty * TPB_E + tx
    fb = cuda.blockIdx.y
    k0 = cuda.blockIdx.x * TK
    e = cuda.blockIdx.z * TPB_E + tx
    nt = vt.shape[1]
    ne = out.shape[1]
    a_lo, a_hi, s_lo, s_hi, mb, e_lo, e_hi, sigma, zeta, delta, scale = fibre_params(ipar, fpar, fb)

    lo, hi = tile_rows(rows, fb, k0, TK, nt)  # every thread computes the same bounds

    acc = 0.0
    jc = lo
    while jc <= hi:
        mirror = jc <= s_hi and jc + RC - 1 >= s_lo
        mlo = mb - (jc + RC - 1)
        # 1. ψ at the chunk's rows (and its mirror rows) where A needs it and x > 0.
        for idx in range(tid, TK * (RC + 1), NTHREADS):
            t = idx // (RC + 1)
            r = idx - t * (RC + 1)
            kk = k0 + t
            pd = 0.0
            pm = 0.0
            if kk < nt:
                vtk = vt[fb, kk]
                pd = psi_at(z, fb, jc + r, a_lo, a_hi, sigma, zeta, vtk)
                if mirror:
                    pm = psi_at(z, fb, mlo + r, a_lo, a_hi, sigma, zeta, vtk)
            psd[t, r] = pd
            psm[t, r] = pm
        cuda.syncthreads()
        # 2. The current I = c E σ(Λ - S) at the chunk's rows.
        for idx in range(tid, TK * RC, NTHREADS):
            t = idx // RC
            r = idx - t * RC
            j = jc + r
            lam = 0.0
            if j >= a_lo and j <= a_hi:
                lam = (psd[t, r + 1] - psd[t, r]) / delta
            mir = 0.0
            if j >= s_lo and j <= s_hi:
                m = mb - j
                if m >= a_lo and m <= a_hi:
                    q = m - mlo
                    mir = (psm[t, q + 1] - psm[t, q]) / delta
            cur[t, r] = current_at(j, lam, mir, e_lo, e_hi, sigma, scale)
        cuda.syncthreads()
        # 3. This thread's output (sample ty, electrode e), rows in ascending order.
        if e < ne:
            jend = min(jc + RC, hi + 1)
            for j in range(jc, jend):
                acc += cur[ty, j - jc] * h[fb, j, e]
        cuda.syncthreads()
        jc += RC
    if e < ne and k0 + ty < nt:
        out[k0 + ty, e, f0 + fb] = acc


@sfap_columns.cpu
def _columns_cpu(grid, block, z, vt, h, ipar, fpar, rows, out, f0):
    # The launch shape is the GPU's; the CPU tiles its own way. h is h[fb, e, j] here.
    nfb = ipar.shape[0]
    nt = vt.shape[1]
    ne = out.shape[1]
    ntile = (nt + CTK - 1) // CTK
    # Tasks are (fibre, run of tiles): at least MIN_CPU_TASKS of them to balance the
    # threads, few enough that each reuses its scratch buffers over many tiles. (Asking
    # numba.get_num_threads() here would make the compiled twin uncachable on disk.)
    groups = min(ntile, max(1, (MIN_CPU_TASKS + nfb - 1) // nfb))
    per_group = (ntile + groups - 1) // groups
    for task in prange(nfb * groups):
        fb = task // groups
        tile_lo = (task - fb * groups) * per_group
        tile_hi = min(ntile, tile_lo + per_group)
        nz = ipar[fb, I_NZ]
        a_lo, a_hi, s_lo, s_hi, mb, e_lo, e_hi, sigma, zeta, delta, scale = fibre_params(ipar, fpar, fb)
        lam = np.zeros((CTK, nz))  # Λ[t, j - w_lo] over the window of rows w_lo .. w_hi
        psi = np.zeros(nz + 1)
        cur = np.zeros((CTK, nz))  # I[t, j - lo] over the tile's rows lo .. hi
        acc = np.zeros((CTK, ne))
        for tile in range(tile_lo, tile_hi):
            k0 = tile * CTK
            nk = min(CTK, nt - k0)
            lo, hi = tile_rows(rows, fb, k0, nk, nt)
            acc[:, :] = 0.0  # stays 0 for tiles with no rows
            if lo <= hi:
                # Λ is needed at the direct rows [lo, hi] ∩ A and at the mirror rows of
                # [lo, hi] ∩ S, also inside A: one window of rows covers both.
                w_lo = _NO_ROW
                w_hi = -1
                if max(lo, a_lo) <= min(hi, a_hi):
                    w_lo = max(lo, a_lo)
                    w_hi = min(hi, a_hi)
                src_lo = max(a_lo, mb - min(hi, s_hi))
                src_hi = min(a_hi, mb - max(lo, s_lo))
                if max(lo, s_lo) <= min(hi, s_hi) and src_lo <= src_hi:
                    w_lo = min(w_lo, src_lo)
                    w_hi = max(w_hi, src_hi)
                nw = w_hi - w_lo + 1
                for t in range(CTK if nw > 0 else 0):
                    if t >= nk:  # past the end of the time grid: contributes nothing
                        lam[t, :nw] = 0.0
                        continue
                    vtk = vt[fb, k0 + t]
                    # Branch-free, so LLVM vectorises it (exp_neg is SIMD arithmetic).
                    for r in range(nw + 1):
                        x = -2.0 * (sigma * (z[fb, w_lo + r] - zeta) - vtk)
                        xc = min(max(x, 0.0), EXP_NEG_MAX)
                        p = -4.0 * sigma * ((D1 * (3.0 * (xc * xc) - xc * xc * xc)) * exp_neg(xc))
                        psi[r] = p if (x > 0.0) & (x <= EXP_NEG_MAX) else 0.0
                    for r in range(nw):
                        lam[t, r] = (psi[r + 1] - psi[r]) / delta
                # I = c E σ(Λ - S) over the tile's rows, as interval passes that LLVM
                # vectorises: Λ on A, minus the mirrored Λ on S, scaled, E zeroed.
                d_lo = max(lo, a_lo)
                d_hi = min(hi, a_hi)
                sj_lo = max(lo, s_lo, mb - a_hi)  # rows of S whose mirror source is in A
                sj_hi = min(hi, s_hi, mb - a_lo)
                for t in range(CTK):
                    for j in range(lo, hi + 1):
                        cur[t, j - lo] = 0.0
                    for j in range(d_lo, d_hi + 1):
                        cur[t, j - lo] = lam[t, j - w_lo]
                    for j in range(sj_lo, sj_hi + 1):
                        cur[t, j - lo] = cur[t, j - lo] - lam[t, mb - j - w_lo]
                    for j in range(lo, hi + 1):
                        cur[t, j - lo] = scale * (sigma * cur[t, j - lo])
                    for j in range(max(lo, e_lo), min(hi, e_hi) + 1):
                        cur[t, j - lo] = 0.0
                # Sixteen outputs (8 samples x 2 electrodes) per pass over the tile's I;
                # h is electrode-major here (see run_plan). Chunking rows to keep I in
                # L1 was measured 2x slower: the vectorised reduction's fixed cost
                # dominates short calls.
                n = hi - lo + 1
                for e in range(0, ne - 1, 2):
                    sa, sb = dot8x2(h[fb, e], h[fb, e + 1], cur, lo, 0, n)
                    for t in range(CTK):
                        acc[t, e] = sa[t]
                        acc[t, e + 1] = sb[t]
                if ne % 2:
                    s = dot8(h[fb, ne - 1], cur, lo, 0, n)
                    for t in range(CTK):
                        acc[t, ne - 1] = s[t]
            for t in range(nk):
                for e in range(ne):
                    out[k0 + t, e, f0 + fb] = acc[t, e]
