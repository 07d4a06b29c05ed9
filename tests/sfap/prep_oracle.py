"""The per-fibre host planning as it was before it was vectorised: the tests' oracle.

A verbatim copy of kernels/sfap/prep.py's loop over fibres (commit f41e564), which the
golden tables checked field by field. ``plan_fibres`` here must equal the vectorised
``kernelrt.kernels.sfap.prep.plan_fibres`` bit for bit on every field.
"""

from __future__ import annotations

import math

import numpy as np
from kernelrt.kernels.sfap.prep import (
    END_PLATE_HALF_WIDTH,
    KAPPA,
    N_FPAR,
    N_IPAR,
    SIGMA_I,
    FibrePlan,
    time_grid,
)

_EMPTY = (0, -1)


def _arange_values(start: float, step: float, n: int) -> np.ndarray:
    """numpy.arange(start, ., step) values with length n: start, start+step, start + i·δ."""
    out = np.empty(n)
    if n > 0:
        out[0] = start
    if n > 1:
        second = start + step
        out[1] = second
        # numpy's fill: δ is recomputed from the first two values, then one product
        # and one sum per element, each rounded (NumPy element-wise ops never fuse).
        delta = second - start
        out[2:] = start + np.arange(2, n, dtype=np.float64) * delta
    return out


def fibre_grid(zeta: float, a: float, b: float, dz: float) -> np.ndarray:
    """Fibre grid: the fibre's z rows, bit-identical to MyoGen's pair of numpy.arange calls."""
    n_left = max(0, math.ceil(((a - dz) - zeta) / (-dz)))
    n_right = max(0, math.ceil(((b + dz) - zeta) / dz))
    left = _arange_values(zeta, -dz, n_left)
    right = _arange_values(zeta, dz, n_right)
    return np.concatenate((left[::-1], right[1:]))


def _interval(mask: np.ndarray, what: str) -> tuple[int, int]:
    idx = np.flatnonzero(mask)
    if idx.size == 0:
        return _EMPTY
    lo, hi = int(idx[0]), int(idx[-1])
    if hi - lo + 1 != idx.size:
        # The z rows are monotone, so every mask (docs/sfap.md, "Masks") is one run of rows.
        raise RuntimeError(f"internal error: the {what} mask is not one interval of rows")
    return lo, hi


def _intersect(p: tuple[int, int], q: tuple[int, int]) -> tuple[int, int]:
    lo, hi = max(p[0], q[0]), min(p[1], q[1])
    return (lo, hi) if lo <= hi else _EMPTY


def _mirror(nz: int, s: int) -> tuple[tuple[int, int], int]:
    """Mirror map: rows j whose mirror source m(j) = mb - j is valid, and mb."""
    if s >= nz or s <= -2 * nz:
        return _EMPTY, 0
    if s >= 0:
        return (s, nz - 1), nz - 1 + s
    if s >= -nz:  # shift_padding zeroes the slice [nz + s:]
        return ((0, nz + s - 1) if nz + s > 0 else _EMPTY), nz - 1 + s
    # -2nz < s < -nz: the slice start nz + s is negative and wraps to 2nz + s.
    return (0, 2 * nz + s - 1), 2 * nz - 1 + s


def _fibre_rows(rho, vt, sigma, a_iv, s_iv, mb) -> np.ndarray:
    """Row ranges (Nt, 2) where I[:, k] may be non-zero, from x > 0 ⇔ σρ < v t."""
    nt = vt.shape[0]
    out = np.empty((nt, 2), np.int64)
    if sigma > 0:  # ψ_j ≠ 0 only for j < p_k
        p = np.searchsorted(rho, vt, side="left")
        lam_lo = np.full(nt, a_iv[0])
        lam_hi = np.minimum(a_iv[1], p - 1)
    else:  # ψ_j ≠ 0 only for j >= q_k
        q = np.searchsorted(rho, -vt, side="right")
        lam_lo = np.maximum(a_iv[0], q - 1)
        lam_hi = np.full(nt, a_iv[1])
    lam_ok = lam_lo <= lam_hi
    s_lo = np.maximum(s_iv[0], mb - lam_hi)
    s_hi = np.minimum(s_iv[1], mb - lam_lo)
    s_ok = lam_ok & (s_lo <= s_hi)
    big = np.iinfo(np.int64).max
    lo = np.minimum(np.where(lam_ok, lam_lo, big), np.where(s_ok, s_lo, big))
    hi = np.maximum(np.where(lam_ok, lam_hi, -1), np.where(s_ok, s_hi, -1))
    none = ~(lam_ok | s_ok)
    out[:, 0] = np.where(none, 0, lo)
    out[:, 1] = np.where(none, -1, hi)
    return out


def plan_fibres(*, fibre_xy, fibre_diameter, fibre_cv, nmj_z, fibre_ends, nerve_paths, branch_cv,
                electrodes, dt, dz, min_radial_dist) -> FibrePlan:
    """Prepare every per-fibre table; inputs must already be validated float64 arrays."""
    nf = fibre_cv.shape[0]
    left, right = fibre_ends[:, 0], fibre_ends[:, 1]
    t = time_grid(nmj_z, left, right, fibre_cv, dt)
    nt = t.shape[0]
    grids = [fibre_grid(float(nmj_z[f]), float(left[f]), float(right[f]), dz) for f in range(nf)]
    nz_max = max(g.shape[0] for g in grids)
    z = np.zeros((nf, nz_max + 1))
    ipar = np.zeros((nf, N_IPAR), np.int64)
    fpar = np.zeros((nf, N_FPAR))
    vt = fibre_cv[:, None] * t[None, :]
    rows = np.empty((nf, nt, 2), np.int64)
    for f, zf in enumerate(grids):
        zeta, a, b, v = float(nmj_z[f]), float(left[f]), float(right[f]), float(fibre_cv[f])
        nz = zf.shape[0]
        delta = float(np.mean(np.diff(zf))) if nz > 1 else dz  # Δ: the pairwise-summed mean step
        z[f, :nz] = zf
        z[f, nz] = zf[-1] + delta  # the extended row z_Nz
        L1, L2 = b - zeta, zeta - a
        sigma = 1 if L1 >= L2 else -1
        rho = zf - zeta
        r_mask = ((rho - L1 / 2) <= L1 / 2) & ((rho - L1 / 2) >= -L1 / 2)
        w_mask = ((rho + L2 / 2) <= L2 / 2) & ((rho + L2 / 2) >= -L2 / 2)
        if sigma > 0:
            a_iv = _interval(r_mask & ((rho / v) > 0), "long-side")
            b_iv = _interval(w_mask, "short-side")
        else:
            a_iv = _interval(w_mask & (((-zf + zeta) / v) > 0), "long-side")
            b_iv = _interval(r_mask, "short-side")
        kept = (zf <= zeta - END_PLATE_HALF_WIDTH) | (zf >= zeta + END_PLATE_HALF_WIDTH)
        e_iv = _interval(~kept, "end-plate")
        s = round(float((((L1 + L2) - z[f, nz]) + L2 - L1) / delta))  # half to even, as MyoGen's round
        valid, mb = _mirror(nz, s)
        s_iv = _intersect(b_iv, valid)
        ipar[f] = (nz, *a_iv, *s_iv, mb, *e_iv, sigma)
        fpar[f] = (zeta, delta, SIGMA_I * (math.pi * (float(fibre_diameter[f]) / 2) ** 2))
        rho_ext = z[f, : nz + 1] - zeta
        rows[f] = _fibre_rows(rho_ext, vt[f], sigma, a_iv, s_iv, mb)

    dx = electrodes[None, :, 0] - fibre_xy[:, 0, None]
    dy = electrodes[None, :, 1] - fibre_xy[:, 1, None]
    r = np.sqrt(dx * dx + dy * dy)
    r = np.where(r < min_radial_dist, min_radial_dist, r)  # strict <, as MyoGen
    kr2 = KAPPA * (r * r)

    q = (nerve_paths[:, 0] / branch_cv[0] + nerve_paths[:, 1] / branch_cv[1]) / dt
    n = np.floor(q)
    return FibrePlan(
        t=t, z=z, ipar=ipar, fpar=fpar, vt=vt, kr2=kr2, rows=rows,
        delay_int=n.astype(np.int64), delay_frac=q - n,
    )
