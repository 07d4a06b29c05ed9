"""The NMJ delay of the SFAPs (docs/sfap.md, "Raw SFAP, NMJ delay, MUAP") and the MUAP sum, batched over channels.

Each fibre's channels are delayed by δ_f / dt = n + φ samples: a zero-fill shift by n,
then a band-limited *circular* shift by φ over N' = Nt (odd) or Nt + 1 samples.

* On the CPU, ``delay_fft`` does it for every (electrode, fibre) channel of a chunk of
  fibres at once with one real FFT of length N' (NumPy), which is exact to the last few
  bits; it can work in place.
* On a device, ``sfap_delay`` applies the equivalent Dirichlet-kernel matrix: one thread
  per output sample, Nt multiply-adds against a host-built table D(d - φ_f)
  (``dirichlet_table``), summed in ascending source order. Both forms match MyoGen's
  FFT to about 5e-15. ``sfap_delay_staged`` (variant "staged" of
  ``kernelrt.kernels.variants``) does the same sums from shared memory, bit for bit;
  ``launch_delay`` launches the variant in force.

``sfap_muap`` sums the delayed SFAPs over fibres in ascending fibre order;
``jitter_muap`` is MyoGen's jittered MUAP (the same circular shift, per-fibre random).
"""

from __future__ import annotations

import math

import numpy as np
from numba import cuda, float64, njit, prange, uint64

import kernelrt

from ..variants import variant as chosen_variant

__all__ = ["DELAY_BLOCK", "DELAY_SIGNATURE", "delay_fft", "dirichlet_table",
           "fractional_shift", "jitter_muap", "launch_delay", "sfap_delay", "sfap_delay_staged", "sfap_muap"]

DELAY_BLOCK = (64, 4, 1)  # sfap_delay: 64 samples x 4 electrodes of one fibre
# The argument types the drivers compile sfap_delay and sfap_delay_staged for (warm_specs).
DELAY_SIGNATURE = "float64[:, :, ::1], float64[:, ::1], int64[::1], float64[:, :, ::1]"
STAGED_TK = 128  # sfap_delay_staged: output samples per block, one per thread
STAGED_EB = 4  # electrodes per block, all in each thread: one table load feeds 4 FMAs
STAGED_CHUNK = 256  # source samples staged per pass (shared arrays need a constant size)
STAGED_SPAN = STAGED_TK + STAGED_CHUNK - 1  # table columns a chunk meets (a plain name: a shape)
STAGED_BLOCK = (STAGED_TK, 1, 1)


def dirichlet_table(nt: int, frac: np.ndarray) -> np.ndarray:
    """D(d - φ_f) for d = -(nt - 1) .. nt - 1 as an (Nf, 2 nt - 1) table, column d + nt - 1.

    D(u) = sin(πu) / (N' sin(πu / N')) with D(0) = 1. The numerator is evaluated as
    -(-1)^d sin(πφ), which is exact in d, instead of sin(π(d - φ)) whose argument
    would lose ~1e-13 to rounding at large d.
    """
    n_odd = nt if nt % 2 else nt + 1
    d = np.arange(-(nt - 1), nt, dtype=np.float64)[:, None]
    phi = np.asarray(frac, dtype=np.float64)[None, :]
    sign = np.where(np.arange(-(nt - 1), nt) % 2 == 0, 1.0, -1.0)[:, None]
    u = d - phi
    with np.errstate(invalid="ignore", divide="ignore"):
        table = (-sign * np.sin(math.pi * phi)) / (n_odd * np.sin(math.pi * u / n_odd))
    # φ = 0 makes the shift an identity: D(d) is exactly 1 at d = 0 and 0 elsewhere.
    table = np.where(phi == 0.0, (d == 0.0).astype(np.float64), table)
    return np.ascontiguousarray(table.T)


CHUNK_BYTES = 32 << 20  # host FFT temporaries per chunk of fibres (spectrum and shifted copy)


def _chunks(shape, nf: int):
    nt, ne = shape[0], shape[1]
    per_fibre = 8 * ne * (3 * nt + 4)  # shifted copy, complex spectrum, irfft output
    step = max(1, CHUNK_BYTES // per_fibre)
    return ((f0, min(nf, f0 + step)) for f0 in range(0, nf, step))


def fractional_shift(x: np.ndarray, samples: np.ndarray) -> np.ndarray:
    """Band-limited circular delay of x (Nt, Ne, n) by ``samples[f]`` (any real) along axis 0.

    MyoGen's ``hr_shift_template`` with delay -samples: one real FFT of length N' = Nt (odd)
    or Nt + 1, bins 1 .. (N'-1)/2 turned by e^{-2πi samples k / N'}, truncated back to Nt.
    """
    nt = x.shape[0]
    n_odd = nt if nt % 2 else nt + 1
    spec = np.fft.rfft(x, n=n_odd, axis=0)  # bins 0 .. (N'-1)/2: no Nyquist bin
    k = np.arange(spec.shape[0], dtype=np.float64)[:, None, None]
    spec *= np.exp(-2j * np.pi * np.asarray(samples, dtype=np.float64)[None, None, :] * k / n_odd)
    return np.fft.irfft(spec, n=n_odd, axis=0)[:nt]


def delay_fft(raw: np.ndarray, delay_int: np.ndarray, delay_frac: np.ndarray, out: np.ndarray | None = None):
    """The NMJ delay on the host for raw (Nt, Ne, Nf): integer shift, then a batched real FFT.

    Works through chunks of fibres (``CHUNK_BYTES`` of temporaries each). ``out`` may be
    ``raw`` itself: the delay then happens in place and needs no second (Nt, Ne, Nf) array.
    """
    nt, _, nf = raw.shape
    out = np.empty_like(raw) if out is None else out
    for f0, f1 in _chunks(raw.shape, nf):
        shifted = np.zeros(raw[:, :, f0:f1].shape)
        for f in range(f0, f1):
            n = int(delay_int[f])
            if n < nt:
                shifted[n:, :, f - f0] = raw[: nt - n, :, f]
        frac = delay_frac[f0:f1]
        out[:, :, f0:f1] = fractional_shift(shifted, frac) if np.any(frac != 0.0) else shifted
    return out


def jitter_muap(sfaps: np.ndarray, shifts: np.ndarray) -> np.ndarray:
    """MyoGen's ``calc_muap(jitter_std > 0)``: Σ_f of each fibre's SFAPs advanced by ``shifts[f]`` samples.

    MyoGen applies ``hr_shift_template(sfaps[:, e, f], shifts[f])`` to every channel and sums
    over fibres; this is the same circular band-limited shift, batched, chunk by chunk.
    """
    nt, ne, nf = sfaps.shape
    muap = np.zeros((nt, ne))
    for f0, f1 in _chunks(sfaps.shape, nf):
        muap += fractional_shift(sfaps[:, :, f0:f1], -np.asarray(shifts[f0:f1], dtype=np.float64)).sum(axis=2)
    return muap


@kernelrt.kernel(ndim=3)
def sfap_delay(k, e, f, raw, table, delay_int, out):
    """out[k, e, f] = Σ_{m >= n_f} raw[m - n_f, e, f] D_f(k - m - φ_f); x = k, y = e, z = fibre.

    Threads of a warp share (e, f) and differ in k, so the raw sample is a broadcast and
    the table row (fibre-major) is read contiguously.
    """
    nt = raw.shape[0]
    if k < nt and e < raw.shape[1] and f < raw.shape[2]:
        n = delay_int[f]
        acc = 0.0
        for m in range(n, nt):
            acc += raw[m - n, e, f] * table[f, k - m + nt - 1]
        out[k, e, f] = acc


@kernelrt.cuda_kernel
def sfap_delay_staged(raw, table, delay_int, out):
    """``sfap_delay`` from shared memory; grid (tiles of STAGED_TK samples, groups of STAGED_EB electrodes, fibres).

    What: the same out[k, e, f], for a block's STAGED_TK samples and STAGED_EB electrodes
    of one fibre. Why: ``sfap_delay`` loads ``raw[m - n, e, f]`` (40 KB apart in m at
    25 electrodes x 200 fibres) and a table value from global memory for every FMA, and
    is load-latency bound (H100, 200 x 25, dz 0.1: 1.48 ms, 3.2% of the fp64 pipe). Here a
    block stages STAGED_CHUNK source samples of its electrodes' raw columns and the table
    columns they meet in shared memory, once per chunk for all its threads; a thread then
    loads each table value once for its STAGED_EB electrodes and each raw value is a
    broadcast: 1.25 shared loads per FMA instead of two global ones.

    Bitwise equal to ``sfap_delay``: with s = m - n and n_src = Nt - n sources, that
    kernel's sum is acc += raw[s, e, f] * table[f, k - s + n_src - 1] for s = 0 .. n_src - 1
    from 0.0; here every chunk adds exactly those products, s ascending within a chunk and
    chunks in order, onto the same accumulator, and NVVM contracts both kernels' update to
    one fma (tests/sfap/test_ptx_delay.py). Padding (sources past n_src, electrodes past
    Ne) is never part of a sum that is written. Proven on the CUDA simulator
    (tests/simulator/test_delay_variants_sim.py), compiled in the PTX layer and bit for bit
    on an H200, where it was 4.3-6.8x faster than ``sfap_delay``: the default since 2026-11-27.
    """
    rs = cuda.shared.array((STAGED_EB, STAGED_CHUNK), float64)  # raw[s0 + j, e0 + b, f] at [b, j]
    ts = cuda.shared.array(STAGED_SPAN, float64)  # the table columns the chunk meets
    acc = cuda.local.array(STAGED_EB, float64)
    tx = cuda.threadIdx.x
    k0 = cuda.blockIdx.x * STAGED_TK
    e0 = cuda.blockIdx.y * STAGED_EB
    f = cuda.blockIdx.z
    nt = raw.shape[0]
    ne = raw.shape[1]
    k = k0 + tx
    n_src = nt - delay_int[f]  # the zero-fill shift by n leaves raw[0 .. n_src - 1] in the output
    for b in range(STAGED_EB):
        acc[b] = 0.0
    for s0 in range(0, n_src, STAGED_CHUNK):
        for b in range(STAGED_EB):
            for j in range(tx, STAGED_CHUNK, STAGED_TK):
                v = 0.0
                if e0 + b < ne and s0 + j < n_src:
                    v = raw[s0 + j, e0 + b, f]
                rs[b, j] = v
        # Output k meets source s at column k - s + n_src - 1: ts[i] holds column base + i,
        # so thread tx finds source s0 + j at ts[tx - j + STAGED_CHUNK - 1].
        base = k0 - s0 + n_src - STAGED_CHUNK
        for i in range(tx, STAGED_SPAN, STAGED_TK):
            c = base + i
            v = 0.0
            if c >= 0 and c < table.shape[1]:
                v = table[f, c]
            ts[i] = v
        cuda.syncthreads()
        if k < nt:  # warps past Nt skip the sums, not the barriers
            # Unsigned indices (and bound: a mixed compare goes through float64): numba adds
            # no negative-index wraparound, so an iteration is five loads at fixed offsets.
            jn = uint64(min(STAGED_CHUNK, n_src - s0))
            ti = uint64(tx + STAGED_CHUNK - 1)  # ts index of source s0 for this thread
            j = uint64(0)
            while j < jn:
                t = ts[ti - j]
                for b in range(STAGED_EB):
                    acc[b] += rs[b, j] * t
                j += uint64(1)
        cuda.syncthreads()  # the next chunk overwrites rs and ts
    if k < nt:
        for b in range(STAGED_EB):
            if e0 + b < ne:
                out[k, e0 + b, f] = acc[b]


# sfap_delay's own body, inlined into the twin at numba IR level as kernelrt's CPU loops do
_delay_sample_cpu = njit(inline="always")(sfap_delay.py_func)


@sfap_delay_staged.cpu
def _delay_staged_cpu(grid, block, raw, table, delay_int, out):
    # Staging feeds a GPU block's FMAs; a CPU core's caches do that already, so the CPU
    # runs sfap_delay's per-sample sum: the same products in the same order.
    nt, ne, nf = raw.shape
    for r in prange(nf * ne):
        f = r // ne
        e = r - f * ne
        for k in range(nt):
            _delay_sample_cpu(k, e, f, raw, table, delay_int, out)


def launch_delay(backend, raw, table, shifts, out, variant: str | None = None) -> None:
    """out (Nt, Ne, Nf) = raw delayed by ``shifts`` (delay_int) and ``table`` (``dirichlet_table``), on ``backend``.

    ``variant``: "direct" (``sfap_delay``) or "staged" (``sfap_delay_staged``), bitwise
    equal; None: ``kernelrt.kernels.variants.variant("sfap_delay")``. A name outside the
    family raises ValueError.
    """
    nt, ne, nf = raw.shape
    if chosen_variant("sfap_delay", variant) == "staged":
        grid = (-(-nt // STAGED_TK), -(-ne // STAGED_EB), nf)
        backend.launch_kernel(sfap_delay_staged, grid, STAGED_BLOCK, raw, table, shifts, out)
        return
    grid = (-(-nt // DELAY_BLOCK[0]), -(-ne // DELAY_BLOCK[1]), nf)
    backend.launch_kernel(sfap_delay, grid, DELAY_BLOCK, raw, table, shifts, out)


@kernelrt.kernel(ndim=2)
def sfap_muap(e, k, sfaps, muap):
    """muap[k, e] = Σ_f sfaps[k, e, f], fibres in ascending order."""
    if e < sfaps.shape[1] and k < sfaps.shape[0]:
        acc = 0.0
        for f in range(sfaps.shape[2]):
            acc += sfaps[k, e, f]
        muap[k, e] = acc
