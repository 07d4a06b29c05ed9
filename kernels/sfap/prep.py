"""Host preparation of the SFAP model (docs/sfap.md: time and fibre grids, masks, mirror map, delay): bit-exact in float64.

Everything that decides mask membership or the mirror map at a floating-point tie is
computed here with NumPy element-wise operations, which are never FMA-contracted, and
shipped to the kernels as numbers: the z rows, Δ, σ, the mask intervals, the mirror
base, ``v * t`` and ``κ r²``. The kernels then only subtract, so contraction on the GPU
cannot change which rows a mask keeps (docs/sfap.md, "Exactness: what must be done how").

The work is vectorised across fibres and equals, field for field and bit for bit, the
per-fibre evaluation of docs/sfap.md (tests/sfap/prep_oracle.py keeps that loop as the
tests' oracle):

* each fibre's rows are numpy.arange's fill (ζ, ζ + step, then ζ + i·δ: one rounded
  product and one rounded sum, never fused), written for a block of fibres at once;
* Δ is NumPy's pairwise mean of the row differences, reduced per group of fibres with
  the same row count (so each row's summation tree is the one ``np.mean`` uses alone);
* the mask intervals and the per-sample row bounds are found by exact searches that
  evaluate each mask's own expression at the rows that decide its bounds (bounds.py).

``plan_unit`` is the cheap whole-call part (time grid, row counts, v·t, κr², delays);
``plan_tables`` the per-fibre tables (tables.py) of any range of fibres, so that a caller
can plan batch b+1 while a device works on batch b (run.py); ``plan_fibres`` is both.
"""

from __future__ import annotations

import math

import numpy as np

from .bounds import Work, leading, plan_rows
from .tables import (
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
    N_FPAR,
    N_IPAR,
    FibrePlan,
    FibreTables,
    UnitPlan,
)

__all__ = [
    "D1", "F_DELTA", "F_SCALE", "F_ZETA", "I_AHI", "I_ALO", "I_EHI", "I_ELO", "I_MB", "I_NZ", "I_SHI",
    "I_SIGMA", "I_SLO", "KAPPA", "N_FPAR", "N_IPAR", "RESPONSE_C", "SIGMA_I", "SIGMA_R", "SIGMA_Z",
    "FibrePlan", "FibreTables", "UnitPlan", "fibre_grid", "plan_fibres", "plan_tables", "plan_unit",
    "time_grid",
]

# Model constants, written as MyoGen writes them (docs/sfap.md, "Units, inputs and constants").
D1 = 96.0
SIGMA_R = 63 / 1000
SIGMA_Z = 330 / 1000
SIGMA_I = 1.01 / 1000
KAPPA = SIGMA_Z / SIGMA_R
RESPONSE_C = ((1 / 4) / math.pi) / SIGMA_R
END_PLATE_HALF_WIDTH = 0.5

# The rows of a block of fibres are built this many doubles at a time: a few arrays of
# this size stay in a core's L2 cache (the element-wise passes are memory-bound otherwise).
GRID_BLOCK = 1 << 16
# Row-bound searches run over this many (fibre, sample) pairs at a time.
SEARCH_BLOCK = 1 << 16


def time_grid(nmj_z, left, right, cv, dt: float) -> np.ndarray:
    """Time grid: t_k = k·dt with numpy.arange's length rule for arange(0, T + dt, dt)."""
    t_max = 2 * max(float(np.max((nmj_z - left) / cv)), float(np.max((right - nmj_z) / cv)))
    nt = math.ceil(((t_max + dt) - 0.0) / dt)
    return np.arange(nt, dtype=np.float64) * dt


def _row_counts(zeta, a, b, dz: float) -> tuple[np.ndarray, np.ndarray]:
    """(n_left, Nz): the lengths of arange(ζ, a − dz, −dz) and of the whole grid."""
    n_left = np.maximum(0.0, np.ceil(((a - dz) - zeta) / (-dz))).astype(np.int64)
    n_right = np.maximum(0.0, np.ceil(((b + dz) - zeta) / dz)).astype(np.int64)
    return n_left, n_left + np.maximum(n_right - 1, 0)  # the grid is left[::-1] + right[1:]


def _grid_rows(zeta, n_left, nz, dz: float, out: np.ndarray, scratch=None) -> None:
    """Write each fibre's rows into ``out[:, :Nz]`` (numpy.arange's fill on either side of ζ).

    ``scratch``: two float64 arrays at least ``out``'s shape, reused across blocks so that
    the temporaries need no fresh pages each time.
    """
    m, w = out.shape
    d, step = (np.empty((m, w)), np.empty((m, w))) if scratch is None else (a[:m, :w] for a in scratch)
    j0 = n_left - 1  # the NMJ's row: ζ itself
    first_l, first_r = zeta + (-dz), zeta + dz  # arange's second value on each side
    np.subtract(np.arange(w, dtype=np.float64)[None, :], j0[:, None], out=d)  # exact small integers
    step[...] = (first_r - zeta)[:, None]  # arange's δ on the right ...
    np.copyto(step, (first_l - zeta)[:, None], where=d < 0)  # ... and on the left
    np.abs(d, out=d)  # i, the index within its arange
    np.multiply(d, step, out=out)
    out += zeta[:, None]  # ζ + i·δ: the product and the sum each rounded (no FMA in NumPy)
    f = np.arange(m)
    for col, value, ok in ((j0, zeta, j0 >= 0), (j0 - 1, first_l, j0 >= 1), (j0 + 1, first_r, j0 + 1 < nz)):
        out[f[ok], col[ok]] = value[ok]  # i = 0 and 1 are stored as arange stores them


def fibre_grid(zeta: float, a: float, b: float, dz: float) -> np.ndarray:
    """Fibre grid: the fibre's z rows, bit-identical to MyoGen's pair of numpy.arange calls."""
    n_left, nz = _row_counts(np.array([zeta]), np.array([a]), np.array([b]), dz)
    out = np.zeros((1, int(nz[0])))
    _grid_rows(np.array([zeta]), n_left, nz, dz, out)
    return out[0]


def plan_unit(*, fibre_xy, fibre_diameter, fibre_cv, nmj_z, fibre_ends, nerve_paths, branch_cv,
              electrodes, dt, dz, min_radial_dist) -> UnitPlan:
    """The whole-call part of the plan; inputs must already be validated float64 arrays."""
    left, right = fibre_ends[:, 0], fibre_ends[:, 1]
    t = time_grid(nmj_z, left, right, fibre_cv, dt)
    n_left, nz = _row_counts(nmj_z, left, right, dz)
    dx = electrodes[None, :, 0] - fibre_xy[:, 0, None]
    dy = electrodes[None, :, 1] - fibre_xy[:, 1, None]
    r = np.sqrt(dx * dx + dy * dy)
    r = np.where(r < min_radial_dist, min_radial_dist, r)  # strict <, as MyoGen
    q = (nerve_paths[:, 0] / branch_cv[0] + nerve_paths[:, 1] / branch_cv[1]) / dt
    n = np.floor(q)
    # c_f in Python floats, as MyoGen: float ** 2 is C pow(), which NumPy's square (x·x) or
    # SIMD power need not match bit for bit at a halfway case.
    scale = np.array([SIGMA_I * (math.pi * (d / 2) ** 2) for d in fibre_diameter.tolist()])
    return UnitPlan(
        t=t, vt=fibre_cv[:, None] * t[None, :], kr2=KAPPA * (r * r), delay_int=n.astype(np.int64),
        delay_frac=q - n, nz=nz, n_left=n_left, nmj_z=nmj_z, left=left, right=right, cv=fibre_cv,
        scale=scale.reshape(-1), dz=float(dz),
    )


def _interval(lo, hi) -> tuple[np.ndarray, np.ndarray]:
    empty = lo > hi
    return np.where(empty, 0, lo), np.where(empty, -1, hi)


def _mirror(nz, s) -> tuple[tuple[np.ndarray, np.ndarray], np.ndarray]:
    """Mirror map: rows j whose mirror source m(j) = mb - j is valid, and mb (element-wise)."""
    nz, s = np.asarray(nz, np.int64), np.asarray(s, np.int64)
    none = (s >= nz) | (s <= -2 * nz)
    wraps = (s < -nz) & ~none  # -2nz < s < -nz: shift_padding's slice start wraps to 2nz + s
    lo = np.where(none | (s < 0), 0, s)
    hi = np.select([none, s >= 0, wraps], [-1, nz - 1, 2 * nz + s - 1], nz + s - 1)
    mb = np.select([none, wraps], [0, 2 * nz - 1 + s], nz - 1 + s)
    lo, hi = _interval(lo, hi)
    return (lo, hi), mb


def plan_tables(unit: UnitPlan, f0: int = 0, f1: int | None = None, width: int | None = None) -> FibreTables:
    """The per-fibre tables of fibres ``f0 .. f1 - 1`` (z padded to ``width`` columns,
    by default ``unit.nz_max + 1``), equal to those rows of ``plan_fibres``' tables."""
    f1 = unit.nz.shape[0] if f1 is None else f1
    width = unit.nz_max + 1 if width is None else width
    m, nt = f1 - f0, unit.t.shape[0]
    out = FibreTables(z=np.zeros((m, width)), ipar=np.zeros((m, N_IPAR), np.int64), fpar=np.zeros((m, N_FPAR)),
                      rows=np.empty((m, nt, 2), np.int64))
    work = Work()
    per_block = max(1, GRID_BLOCK // width)
    for b0 in range(0, m, per_block):
        _plan_grids(unit, f0 + b0, f0 + min(m, b0 + per_block), out, b0, work)
    _plan_masks(unit, f0, f1, out)
    per_block = max(1, SEARCH_BLOCK // max(nt, 1))
    for b0 in range(0, m, per_block):
        plan_rows(unit, f0 + b0, f0 + min(m, b0 + per_block), out, b0, work)
    return out


def _plan_grids(unit: UnitPlan, f0: int, f1: int, out: FibreTables, o0: int, work: Work) -> None:
    """z rows, the extended row and Δ of fibres f0 .. f1 - 1 (at out's rows o0 ...)."""
    sl = slice(f0, f1)
    m, nz, zeta = f1 - f0, unit.nz[sl], unit.nmj_z[sl]
    z = out.z[o0 : o0 + m]
    w = int(nz.max()) + 1
    _grid_rows(zeta, unit.n_left[sl], nz, unit.dz, z[:, :w], (work("d", (m, w)), work("step", (m, w))))
    steps = np.subtract(z[:, 1:w], z[:, : w - 1], out=work("d", (m, w - 1)))  # np.diff, row by row
    delta = np.full(m, unit.dz)
    for n in np.unique(nz[nz > 1]):
        # Δ = np.mean(np.diff(z)): one reduction per row count keeps NumPy's pairwise summation
        # tree of each row alone (a padded row would change it); a row view reduces alike.
        group = slice(None) if np.all(nz == n) else np.flatnonzero(nz == n)
        delta[group] = steps[group, : n - 1].mean(axis=1)
        if np.any(steps[group, : n - 1] < 0):
            raise RuntimeError("internal error: a fibre's z rows are not monotone")
    f = np.arange(m)
    z[f, nz] = z[f, nz - 1] + delta  # the extended row z_Nz
    pad = int(nz.min()) + 1  # padding, as before the fill
    z[:, pad:w][np.arange(pad, w)[None, :] > nz[:, None]] = 0.0
    out.fpar[o0 : o0 + m, F_DELTA] = delta


def _plan_masks(unit: UnitPlan, f0: int, f1: int, out: FibreTables) -> None:
    """σ, the mask intervals, the mirror shift and base of fibres f0 .. f1 - 1."""
    sl = slice(f0, f1)
    nz, zeta, a, b, v = unit.nz[sl], unit.nmj_z[sl], unit.left[sl], unit.right[sl], unit.cv[sl]
    z, width = out.z.reshape(-1), out.z.shape[1]
    delta = out.fpar[:, F_DELTA]
    j0 = unit.n_left[sl] - 1
    L1, L2 = b - zeta, zeta - a
    h1, h2, mh1, mh2 = L1 / 2, L2 / 2, -L1 / 2, -L2 / 2
    lo_e, hi_e = zeta - END_PLATE_HALF_WIDTH, zeta + END_PLATE_HALF_WIDTH

    def at(j, f):  # z_j and ρ_j of fibre f, as the whole-row masks compute them
        zj = z[f * width + j]
        return zj, zj - zeta[f]

    def search(test, rho_guess):  # leading rows where test holds; guess from ρ ≈ (j − j0)·Δ
        return leading(test, j0 + np.ceil(rho_guess / delta), nz)

    # Each mask of docs/sfap.md ("Masks") written as MyoGen writes it, tested row by row.
    r_lo = search(lambda j, f: ~((at(j, f)[1] - h1[f]) >= mh1[f]), 0.0)
    r_hi = search(lambda j, f: (at(j, f)[1] - h1[f]) <= h1[f], L1) - 1
    w_lo = search(lambda j, f: ~((at(j, f)[1] + h2[f]) >= mh2[f]), -L2)
    w_hi = search(lambda j, f: (at(j, f)[1] + h2[f]) <= h2[f], 0.0) - 1
    p_lo = search(lambda j, f: ~((at(j, f)[1] / v[f]) > 0), 0.0)
    n_hi = search(lambda j, f: ((-at(j, f)[0] + zeta[f]) / v[f]) > 0, 0.0) - 1
    e_lo = search(lambda j, f: at(j, f)[0] <= lo_e[f], -END_PLATE_HALF_WIDTH)
    e_hi = search(lambda j, f: ~(at(j, f)[0] >= hi_e[f]), END_PLATE_HALF_WIDTH) - 1
    up = L1 >= L2
    sigma = np.where(up, 1, -1)
    a_lo, a_hi = _interval(np.where(up, np.maximum(r_lo, p_lo), w_lo), np.where(up, r_hi, np.minimum(w_hi, n_hi)))
    b_lo, b_hi = _interval(np.where(up, w_lo, r_lo), np.where(up, w_hi, r_hi))
    e_lo, e_hi = _interval(e_lo, e_hi)
    z_ext = z[np.arange(f1 - f0) * width + nz]
    s = np.rint((((L1 + L2) - z_ext) + L2 - L1) / delta).astype(np.int64)  # half to even, as Python's round
    (m_lo, m_hi), mb = _mirror(nz, s)
    s_lo, s_hi = _interval(np.maximum(b_lo, m_lo), np.minimum(b_hi, m_hi))
    out.ipar[:] = np.stack([nz, a_lo, a_hi, s_lo, s_hi, mb, e_lo, e_hi, sigma], axis=1)
    out.fpar[:, F_ZETA] = zeta
    out.fpar[:, F_SCALE] = unit.scale[sl]


def plan_fibres(**inputs) -> FibrePlan:
    """Prepare every per-fibre table (``plan_unit``'s arguments, already validated)."""
    unit = plan_unit(**inputs)
    tables = plan_tables(unit)
    return FibrePlan(
        t=unit.t, z=tables.z, ipar=tables.ipar, fpar=tables.fpar, vt=unit.vt, kr2=unit.kr2, rows=tables.rows,
        delay_int=unit.delay_int, delay_frac=unit.delay_frac,
    )
