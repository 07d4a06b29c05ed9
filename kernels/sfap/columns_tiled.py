"""``sfap_columns_tiled``: the fused SFAP contraction with a register tile, for the GPU (variant "tiled").

``sfap_columns`` (kernels.py) gives each thread one (sample, electrode) output and maps
a warp's lanes to 32 electrodes. Measured on an H100 (bench/results/, 200 fibres x 25
electrodes, dz 0.1): 5.2 ms, 6.7% of the fp64 pipe. Each of a block's 8 warps reloads
the same ``h[fb, j, :]`` row, so every FMA costs a global load and a shared load (three
L1 wavefronts per warp-FMA); and at MyoGen's default of 4 electrodes 28 of 32 lanes idle.

This kernel changes only who does which multiply-add:

* A thread keeps TR = 4 samples x RE = 2 electrodes of outputs in registers: per row it
  loads two ``h`` values and four values of I and does eight FMAs with them
  (0.75 L1 wavefronts per warp-FMA instead of 3).
* Lanes map to (electrode, sample) pairs: ``blockDim.x`` = TE electrode lanes (each
  with electrodes e and e + TE, so a load of h is TE consecutive doubles) by
  ``blockDim.y`` = TS sample lanes, chosen at launch from the electrode count
  (``columns_tiling``): four electrodes fill a warp as 2 x 16 lanes.
* A block covers TKB = TS x TR samples (32, or 64-128 below 5 electrodes): wide enough
  for the register tile, narrow enough that the rows it walks (the union of its
  samples' rows, which move about v dt / dz rows per sample) stay close to each
  sample's own. ``bench/gpu_floors.tiled_columns_bound`` counts them from a real plan.
* The current I of a chunk of RC rows lives in dynamic shared memory as cur[r][t]
  (samples contiguous: a warp's loads of one row are at most 16 consecutive doubles,
  one wavefront). RC keeps a chunk's ψ work near 8 values per thread for any block
  size, and the three buffers under the 48 KiB that need no opt-in.

Bitwise equal to ``sfap_columns``: ψ and I are the same expressions of the same inputs,
and each output is ``acc += I[t, j] * h[fb, j, e]`` over ascending j from 0.0. A block
may walk more rows than ``sfap_columns``'s 8-sample block, but outside a sample's own
rows I is exactly ±0 (the host's row bounds are the x > 0 test itself, bounds.py), and
adding a signed zero to a sum that started at +0.0 changes no bit. Proven on the CUDA
simulator (tests/simulator/test_sfap_variants_sim.py) and compiled for sm_80/sm_90 in the
PTX layer, and bit for bit on an H200 (tests/gpu/test_variants_gpu.py). There it was
1.3-1.6x faster than ``sfap_columns`` alone but not end to end (docs/gpu.md, "Kernel
variants"), so ``sfap_columns`` stays the default.

On the CPU the variant runs ``sfap_columns``'s twin: the CPU already tiles its own way
(eight samples per h load, electrode pairs), so this kernel has no twin.
"""

from __future__ import annotations

from numba import cuda, float64

import kernelrt

from .kernels import current_at, fibre_params, psi_at, tile_rows

__all__ = ["TR", "RE", "columns_tiling", "sfap_columns_tiled"]

TR = 4  # samples per thread, kept in registers
RE = 2  # electrodes per thread (e and e + TE), kept in registers
NACC = TR * RE  # a thread's sums (local-array shapes must be plain constants, not expressions)
PSI_PER_THREAD = 8  # ψ evaluations per thread per chunk, whatever the block size
MAX_STATIC_FREE_SMEM = 48 * 1024  # above this a launch needs the opt-in attribute


def columns_tiling(ne: int) -> tuple[tuple[int, int, int], int, int]:
    """(block (TE, TS, 1), rows per chunk RC, dynamic shared memory in bytes) for ``ne`` electrodes.

    TE: the smallest power of two with RE x TE >= min(ne, 64); TS: 8 sample lanes, or more
    so that a block fills a warp (TE x TS >= 32). RC keeps the ψ work of a chunk
    (TKB x (RC + 1) values) near 8 per thread, is even (a warp's reads of ψ, RC + 1 doubles
    apart, then fall in distinct banks) and keeps the three buffers under 48 KiB.
    """
    if ne < 1:
        raise ValueError(f"ne must be >= 1 electrode (got {ne})")
    te = 1
    while RE * te < min(ne, 64):
        te *= 2
    ts = max(8, 32 // te)
    tkb = ts * TR
    rc = PSI_PER_THREAD * te * ts // tkb // 2 * 2
    rc = max(8, min(rc, (MAX_STATIC_FREE_SMEM // 8 - 2 * tkb) // (3 * tkb) // 2 * 2))
    return (te, ts, 1), rc, 8 * tkb * (3 * rc + 2)


@kernelrt.cuda_kernel
def sfap_columns_tiled(z, vt, h, ipar, fpar, rows, out, f0, rc):
    """out[k, e, f0 + fb] = Σ_j I_fb[j, k] h[fb, j, e]; grid (tiles of TKB samples, fibres, tiles of RE x TE electrodes).

    Arguments as ``sfap_columns`` (h is (Nfb, Nz, Ne)), plus ``rc``, the rows per chunk
    the launch sized the dynamic shared memory for (``columns_tiling``).
    """
    smem = cuda.shared.array(0, float64)  # ψ at rows jc.. | ψ at mirror rows mlo.. | cur[r][t]
    te_n = cuda.blockDim.x
    ts_n = cuda.blockDim.y
    tkb = ts_n * TR
    w = rc + 1
    off_m = tkb * w
    off_c = 2 * tkb * w
    tx = cuda.threadIdx.x
    ty = cuda.threadIdx.y
    nthreads = te_n * ts_n
    tid = ty * te_n + tx
    fb = cuda.blockIdx.y
    k0 = cuda.blockIdx.x * tkb
    e0 = cuda.blockIdx.z * (RE * te_n) + tx  # this thread's electrodes: e0 and e0 + te_n
    e1 = e0 + te_n
    nt = vt.shape[1]
    ne = out.shape[1]
    a_lo, a_hi, s_lo, s_hi, mb, e_lo, e_hi, sigma, zeta, delta, scale = fibre_params(ipar, fpar, fb)

    lo, hi = tile_rows(rows, fb, k0, tkb, nt)

    acc = cuda.local.array(NACC, float64)  # constant indices after unrolling: registers
    for q in range(NACC):
        acc[q] = 0.0
    jc = lo
    while jc <= hi:
        mirror = jc <= s_hi and jc + rc - 1 >= s_lo
        mlo = mb - (jc + rc - 1)
        # 1. ψ at the chunk's rows (and its mirror rows): sfap_columns's psi_at.
        for idx in range(tid, tkb * w, nthreads):
            t = idx // w
            r = idx - t * w
            kk = k0 + t
            pd = 0.0
            pm = 0.0
            if kk < nt:
                vtk = vt[fb, kk]
                pd = psi_at(z, fb, jc + r, a_lo, a_hi, sigma, zeta, vtk)
                if mirror:
                    pm = psi_at(z, fb, mlo + r, a_lo, a_hi, sigma, zeta, vtk)
            smem[idx] = pd
            smem[off_m + idx] = pm
        cuda.syncthreads()
        # 2. I = c E σ(Λ - S) at the chunk's rows, written row-major (samples contiguous).
        for idx in range(tid, tkb * rc, nthreads):
            r = idx // tkb
            t = idx - r * tkb
            j = jc + r
            lam = 0.0
            if j >= a_lo and j <= a_hi:
                lam = (smem[t * w + r + 1] - smem[t * w + r]) / delta
            mir = 0.0
            if j >= s_lo and j <= s_hi:
                m = mb - j
                if m >= a_lo and m <= a_hi:
                    q = m - mlo
                    mir = (smem[off_m + t * w + q + 1] - smem[off_m + t * w + q]) / delta
            smem[off_c + idx] = current_at(j, lam, mir, e_lo, e_hi, sigma, scale)
        cuda.syncthreads()
        # 3. This thread's TR x RE outputs (samples ty + q TS, electrodes e0, e1), rows ascending.
        if e0 < ne:
            jend = min(jc + rc, hi + 1)
            for j in range(jc, jend):
                h0 = h[fb, j, e0]
                h1 = h[fb, j, e1] if e1 < ne else 0.0  # e1's sums are not written then
                base = off_c + (j - jc) * tkb + ty
                for q in range(TR):
                    cq = smem[base + q * ts_n]
                    acc[q] += cq * h0
                    acc[TR + q] += cq * h1
        cuda.syncthreads()
        jc += rc
    for q in range(TR):
        kk = k0 + ty + q * ts_n
        if kk < nt:
            if e0 < ne:
                out[kk, e0, f0 + fb] = acc[q]
            if e1 < ne:
                out[kk, e1, f0 + fb] = acc[TR + q]
