"""Plain NumPy reference of MyoGen's intramuscular SFAP model (docs/sfap.md).

Written straight from the model (docs/sfap.md) and on purpose independent of
``kernelrt.kernels.sfap``: it builds the grid with ``numpy.arange`` (what MyoGen does,
where the kernels use the explicit fibre-grid formula), evaluates the dense current density
for every row, mirrors with ``np.roll`` plus a literal ``shift_padding``, contracts with
a BLAS matrix product and delays with a full complex FFT. It is slow (Nt x Nz dense
per fibre): the tests use it at sizes the golden files do not cover, and ``kernelrt
demo`` and the benchmarks use it as the in-repo NumPy reference.

``synthetic_motor_unit`` draws a realistic motor unit the way the golden files'
generator does (tests/data/sfap/README.md).
"""

from __future__ import annotations

import math

import numpy as np

D1 = 96.0
SIGMA_R = 63 / 1000
SIGMA_Z = 330 / 1000
SIGMA_I = 1.01 / 1000


def time_grid(nmj_z, left, right, cv, dt):
    """Time grid: t = arange(0, 2 * max travel time + dt, dt)."""
    t_max = 2 * max(np.max((nmj_z - left) / cv), np.max((right - nmj_z) / cv))
    return np.arange(0, t_max + dt, dt)


def fibre_grid(zeta, a, b, dz):
    """Fibre grid: the z rows, as MyoGen builds them with numpy.arange."""
    z_left = np.arange(zeta, a - dz, -dz)
    z_right = np.arange(zeta, b + dz, dz)
    return np.concatenate((z_left[::-1], z_right[1:]))


def shift_padding(vec, s):
    """Roll rows by ``s`` and zero the rows that wrapped (head for s > 0, tail for s < 0)."""
    out = np.roll(vec, s, axis=0)
    n = out.shape[0]
    if s > 0:
        out[:s] = 0
    elif s < 0:
        out[n + s :] = 0  # a negative start wraps once more, as Python slicing does
    return out


def rosenfalck_dvdz(x):
    """g(x) = D1 (3x^2 - x^3) e^{-x} for x > 0, else 0."""
    out = np.zeros_like(x)
    pos = x > 0
    xp = x[pos]
    out[pos] = D1 * (3 * xp**2 - np.power(xp, 3)) * np.exp(-xp)
    return out


def current_density(t, z, zeta, a, b, v, d):
    """Current density: I[j, k] for the Nz rows of ``z``."""
    nz = z.shape[0]
    delta = np.mean(np.diff(z))
    zx = np.append(z, z[-1] + delta)  # the extended row
    L1, L2 = b - zeta, zeta - a
    sigma = 1.0 if L1 >= L2 else -1.0
    rho = zx - zeta
    x = -2 * (sigma * rho[:, None] - v * t[None, :])
    psi = -4 * sigma * rosenfalck_dvdz(x)
    rho = rho[:nz]
    R = ((rho - L1 / 2) <= L1 / 2) & ((rho - L1 / 2) >= -L1 / 2)
    W = ((rho + L2 / 2) <= L2 / 2) & ((rho + L2 / 2) >= -L2 / 2)
    P = (rho / v) > 0
    N = ((-z + zeta) / v) > 0
    A = (R & P) if sigma > 0 else (W & N)
    B = W if sigma > 0 else R
    E = (z <= zeta - 0.5) | (z >= zeta + 0.5)
    lam = A[:, None] * (psi[1:] - psi[:-1]) / delta
    s = round((((L1 + L2) - zx[-1]) + L2 - L1) / delta)
    mirrored = shift_padding(lam[::-1].copy(), s)
    S = B[:, None] * mirrored
    c = SIGMA_I * (math.pi * (d / 2) ** 2)
    return c * (E[:, None] * (sigma * (lam - S)))


def responses(z, electrodes, xy, r_min):
    """Electrode responses: h[j, e] for a fibre at ``xy``."""
    kappa = SIGMA_Z / SIGMA_R
    const = ((1 / 4) / math.pi) / SIGMA_R
    h = np.empty((z.shape[0], electrodes.shape[0]))
    for e, (ex, ey, ez) in enumerate(electrodes):
        r = math.sqrt((ex - xy[0]) ** 2 + (ey - xy[1]) ** 2)
        r = max(r, r_min)
        h[:, e] = const / np.sqrt(kappa * r**2 + (z - ez) ** 2)
    return h


def delay(y, shift):
    """NMJ delay: integer zero-fill shift, then a circular band-limited fractional shift (FFT)."""
    nt = y.shape[0]
    q = shift
    n = math.floor(q)
    phi = q - n
    out = np.zeros_like(y)
    if n < nt:
        out[n:] = y[: nt - n]
    if phi == 0:
        return out
    n_odd = nt if nt % 2 else nt + 1
    padded = np.zeros((n_odd,) + y.shape[1:])
    padded[:nt] = out
    spec = np.fft.fft(padded, axis=0)
    half = (n_odd - 1) // 2
    k = np.arange(1, half + 1)
    phase = np.exp(-2j * np.pi * phi * k / n_odd).reshape((-1,) + (1,) * (y.ndim - 1))
    spec[1 : half + 1] *= phase
    spec[n_odd - half :] = np.conj(spec[1 : half + 1][::-1])
    return np.real(np.fft.ifft(spec, axis=0))[:nt]


def reference_sfaps(
    fibre_xy, fibre_diameter, fibre_cv, nmj_z, fibre_ends, nerve_paths, branch_cv, electrodes, dt, dz,
    min_radial_dist=None,
):
    """The whole model; returns dict(t, sfaps_raw, sfaps, muap)."""
    fibre_xy = np.asarray(fibre_xy, float)
    d = np.asarray(fibre_diameter, float)
    v = np.asarray(fibre_cv, float)
    zeta = np.asarray(nmj_z, float)
    ends = np.asarray(fibre_ends, float)
    paths = np.asarray(nerve_paths, float)
    electrodes = np.asarray(electrodes, float)
    r_min = float(np.mean(d)) if min_radial_dist is None else float(min_radial_dist)
    t = time_grid(zeta, ends[:, 0], ends[:, 1], v, dt)
    nf, ne, nt = d.shape[0], electrodes.shape[0], t.shape[0]
    raw = np.zeros((nt, ne, nf))
    out = np.zeros((nt, ne, nf))
    for f in range(nf):
        a, b = float(ends[f, 0]), float(ends[f, 1])
        z = fibre_grid(float(zeta[f]), a, b, dz)
        current = current_density(t, z, float(zeta[f]), a, b, float(v[f]), float(d[f]))
        raw[:, :, f] = current.T @ responses(z, electrodes, fibre_xy[f], r_min)
        delay_s = paths[f, 0] / branch_cv[0] + paths[f, 1] / branch_cv[1]
        out[:, :, f] = delay(raw[:, :, f], float(delay_s / dt))
    return {"t": t, "sfaps_raw": raw, "sfaps": out, "muap": out.sum(axis=2)}


def channel_error(y, ref):
    """The accuracy metric (docs/sfap.md): max over channels of max_k |y - ref| / max_k |ref| (time is axis 0)."""
    y = np.asarray(y).reshape(y.shape[0], -1)
    ref = np.asarray(ref).reshape(ref.shape[0], -1)
    peak = np.max(np.abs(ref), axis=0)
    err = np.max(np.abs(y - ref), axis=0)
    with np.errstate(invalid="ignore", divide="ignore"):
        rel = np.where(peak > 0, err / np.where(peak > 0, peak, 1), np.where(err > 0, np.inf, 0.0))
    return float(np.max(rel)) if rel.size else 0.0


def synthetic_motor_unit(nf: int, ne: int, dz: float, seed: int = 0, length: float = 120.0) -> dict:
    """``compute_sfaps`` keyword arguments for a motor unit like the golden files' generator.

    Fibres in a disc of radius 2 mm, MyoGen's lognormal diameters, CV ~ N(4000, 300)
    mm/s, NMJs near mid-muscle, a linear needle-like array of ``ne`` electrodes at
    0.5 mm pitch; fs = 10240 Hz; muscle ``length`` mm.
    """
    rng = np.random.default_rng(seed)
    r = 2 * np.sqrt(rng.uniform(size=nf))
    th = rng.uniform(0, 2 * np.pi, nf)
    xy = np.stack([r * np.cos(th), r * np.sin(th)], axis=1)
    u = np.array([1.0, 0.25, 0.35]) / np.linalg.norm([1.0, 0.25, 0.35])
    return {
        "fibre_xy": xy,
        "fibre_diameter": np.clip(rng.lognormal(np.log(0.05), 0.3, nf), 0.02, 0.08),
        "fibre_cv": np.clip(rng.normal(4000, 300, nf), 2000, 6000),
        "nmj_z": np.clip(length / 2 + rng.normal(0, 2, nf), 1, length - 1),
        "fibre_ends": np.tile([0.0, length], (nf, 1)),
        "nerve_paths": np.stack([rng.uniform(2, 15, nf), rng.uniform(0.5, 3, nf)], axis=1),
        "branch_cv": np.array([5000.0, 2000.0]),
        "electrodes": np.array([-(ne - 1) * 0.25 * u[0], -0.4, length / 2 - 1.5]) + 0.5 * np.arange(ne)[:, None] * u,
        "dt": 1 / 10240,
        "dz": dz,
    }
