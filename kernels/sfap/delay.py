"""The NMJ delay of the SFAPs (docs/sfap.md, "Raw SFAP, NMJ delay, MUAP") and the MUAP sum, batched over channels.

Each fibre's channels are delayed by δ_f / dt = n + φ samples: a zero-fill shift by n,
then a band-limited *circular* shift by φ over N' = Nt (odd) or Nt + 1 samples.

* On the CPU, ``delay_fft`` does it for every (electrode, fibre) channel at once with one
  real FFT of length N' (NumPy), which is exact to the last few bits.
* On a device, ``sfap_delay`` applies the equivalent Dirichlet-kernel matrix: one thread
  per output sample, Nt multiply-adds against a host-built table D(d - φ_f)
  (``dirichlet_table``), summed in ascending source order. Both forms match MyoGen's
  FFT to about 5e-15.

``sfap_muap`` sums the delayed SFAPs over fibres in ascending fibre order.
"""

from __future__ import annotations

import math

import numpy as np

import kernelrt

__all__ = ["delay_fft", "dirichlet_table", "sfap_delay", "sfap_muap"]


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


def delay_fft(raw: np.ndarray, delay_int: np.ndarray, delay_frac: np.ndarray) -> np.ndarray:
    """The NMJ delay on the host for raw (Nt, Ne, Nf): integer shift, then one batched real FFT."""
    nt, _, nf = raw.shape
    shifted = np.zeros_like(raw)
    for f in range(nf):
        n = int(delay_int[f])
        if n < nt:
            shifted[n:, :, f] = raw[: nt - n, :, f]
    if not np.any(delay_frac != 0.0):
        return shifted
    n_odd = nt if nt % 2 else nt + 1
    spec = np.fft.rfft(shifted, n=n_odd, axis=0)  # bins 0 .. (N'-1)/2: no Nyquist bin
    k = np.arange(spec.shape[0], dtype=np.float64)[:, None, None]
    spec *= np.exp(-2j * np.pi * delay_frac[None, None, :] * k / n_odd)
    return np.fft.irfft(spec, n=n_odd, axis=0)[:nt]


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
