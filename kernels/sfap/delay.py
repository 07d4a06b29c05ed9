"""The NMJ delay of the SFAPs (docs/sfap.md, "Raw SFAP, NMJ delay, MUAP") and the MUAP sum, batched over channels.

Each fibre's channels are delayed by δ_f / dt = n + φ samples: a zero-fill shift by n,
then a band-limited *circular* shift by φ over N' = Nt (odd) or Nt + 1 samples.

* On the CPU, ``delay_fft`` does it for every (electrode, fibre) channel of a chunk of
  fibres at once with one real FFT of length N' (NumPy), which is exact to the last few
  bits; it can work in place.
* On a device, ``sfap_delay`` applies the equivalent Dirichlet-kernel matrix: one thread
  per output sample, Nt multiply-adds against a host-built table D(d - φ_f)
  (``dirichlet_table``), summed in ascending source order. Both forms match MyoGen's
  FFT to about 5e-15.

``sfap_muap`` sums the delayed SFAPs over fibres in ascending fibre order;
``jitter_muap`` is MyoGen's jittered MUAP (the same circular shift, per-fibre random).
"""

from __future__ import annotations

import math

import numpy as np

import kernelrt

__all__ = ["delay_fft", "dirichlet_table", "fractional_shift", "jitter_muap", "sfap_delay", "sfap_muap"]


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


@kernelrt.kernel(ndim=2)
def sfap_muap(e, k, sfaps, muap):
    """muap[k, e] = Σ_f sfaps[k, e, f], fibres in ascending order."""
    if e < sfaps.shape[1] and k < sfaps.shape[0]:
        acc = 0.0
        for f in range(sfaps.shape[2]):
            acc += sfaps[k, e, f]
        muap[k, e] = acc
