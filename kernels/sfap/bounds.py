"""Exact interval searches of the host planning: mask bounds and per-sample row bounds.

Every mask of docs/sfap.md ("Masks") and every ``numpy.searchsorted`` count of the row
bounds is a test that is True then False along a fibre's rows, because it is a monotone
function of z_j (rounding is monotone, the rows are non-decreasing). So its bound is found
exactly by evaluating the test itself, in its own operation order, at a guessed row and
stepping one row at a time until it changes: the rows that decide a bound are tested as
the whole-row NumPy expression would test them (prep.py checks that the rows are monotone).
"""

from __future__ import annotations

import math

import numpy as np

from .tables import F_DELTA, I_AHI, I_ALO, I_MB, I_NZ, I_SHI, I_SIGMA, I_SLO, FibreTables, UnitPlan

__all__ = ["Work", "leading", "plan_rows"]


class Work:
    """Scratch arrays by name, reused from block to block.

    Fresh temporaries of a few hundred KiB each cost more than the arithmetic on them:
    glibc hands freed memory back to the system and every new array faults its pages in
    again (measured: 5-8 ns per element instead of 0.3). Blocks write into these instead.
    """

    def __init__(self):
        self._arrays: dict[str, np.ndarray] = {}

    def __call__(self, name: str, shape: tuple, dtype=np.float64) -> np.ndarray:
        size = math.prod(shape)
        buf = self._arrays.get(name)
        if buf is None or buf.size < size or buf.dtype != dtype:
            buf = self._arrays[name] = np.empty(size, dtype)
        return buf[:size].reshape(shape)


def leading(holds, guess, n) -> np.ndarray:
    """Per entry, the number of leading rows j in [0, n) where ``holds(j, entries)`` is True.

    ``holds`` must be True then False along j (monotone). Starting from ``guess``, entries
    step one row at a time while a test says they are off; only those are tested again.
    """
    p = np.clip(guess, 0, n).astype(np.int64)
    todo = np.arange(p.size)
    while todo.size:
        q, nt = p[todo], n[todo]
        up = q < nt
        up[up] = holds(q[up], todo[up])  # row q holds: more rows than q
        down = ~up & (q > 0)
        down[down] = ~holds(q[down] - 1, todo[down])  # row q - 1 fails: fewer than q
        p[todo[up]] += 1
        p[todo[down]] -= 1
        todo = todo[up | down]
    return p


def plan_rows(unit: UnitPlan, f0: int, f1: int, out: FibreTables, o0: int, work: Work) -> None:
    """Row bounds per sample of fibres f0 .. f1 - 1, from x > 0 ⇔ σρ < v t.

    Written in place into ``work``'s arrays (``Work``); integer arithmetic is exact.
    """
    m, nt = f1 - f0, unit.t.shape[0]
    o = slice(o0, o0 + m)
    ipar, zeta = out.ipar[o], unit.nmj_z[f0:f1, None]
    z, row0 = out.z.reshape(-1), (o0 + np.arange(m))[:, None] * out.z.shape[1]
    up = ipar[:, I_SIGMA, None] > 0
    down = ~up
    n = ipar[:, I_NZ, None] + 1  # ρ over the Nz rows and the extended one
    shape = (m, nt)
    x = np.multiply(unit.vt[f0:f1], np.where(up, 1.0, -1.0), out=work("x", shape))  # ±v t, exactly

    def holds(rho, res, tmp):  # σ = +1: ρ_j < v t (searchsorted "left"); σ = −1: ρ_j <= −v t ("right")
        np.less(rho, x, out=res)
        np.equal(rho, x, out=tmp)
        tmp &= down
        res |= tmp
        return res

    # Guess the count from ρ_j ≈ (j − j0)·Δ, then test the rows at and just below the guess.
    guess = np.divide(x, out.fpar[o, F_DELTA, None], out=work("rho", shape))  # rho is free until the test
    np.ceil(guess, out=guess)
    guess += unit.n_left[f0:f1, None] - 1
    np.clip(guess, 0, n, out=guess)
    count = work("count", shape, np.int64)
    count[...] = guess
    idx, rho = work("idx", shape, np.intp), work("rho", shape)
    res, tmp, off = work("res", shape, bool), work("tmp", shape, bool), work("off", shape, bool)
    np.minimum(count, n - 1, out=idx)
    idx += row0
    np.subtract(z.take(idx, out=rho), zeta, out=rho)
    np.logical_and(holds(rho, res, tmp), np.less(count, n, out=off), out=off)  # more rows hold
    np.maximum(count, 1, out=idx)
    idx += row0 - 1
    np.subtract(z.take(idx, out=rho), zeta, out=rho)
    np.logical_not(holds(rho, res, tmp), out=res)
    res &= np.greater(count, 0, out=tmp)  # fewer rows hold
    off |= res
    if off.any():  # off by a row or so where ρ_j ≈ ±v t: step those exactly
        e = np.flatnonzero(off)
        f, xs, ds = e // nt, x.reshape(-1)[e], down[e // nt, 0]
        count.reshape(-1)[e] = leading(
            lambda j, k: (lambda r: (r < xs[k]) | (ds[k] & (r == xs[k])))(z[row0[f[k], 0] + j] - zeta[f[k], 0]),
            count.reshape(-1)[e], n[f, 0])
    # Λ rows: σ = +1 [A_lo, min(A_hi, p − 1)], σ = −1 [max(A_lo, q − 1), A_hi]; the offsets
    # ±2^40 switch the unused bound off without a select.
    big = np.int64(1) << 40
    lam_lo = np.add(count, np.where(up, -big, 0) - 1, out=work("lam_lo", shape, np.int64))
    np.maximum(lam_lo, ipar[:, I_ALO, None], out=lam_lo)
    lam_hi = np.add(count, np.where(up, 0, big) - 1, out=work("lam_hi", shape, np.int64))
    np.minimum(lam_hi, ipar[:, I_AHI, None], out=lam_hi)
    # Mirror rows j = mb − i for i in Λ, within S (empty whenever Λ is).
    m_lo = np.subtract(ipar[:, I_MB, None], lam_hi, out=work("m_lo", shape, np.int64))
    np.maximum(m_lo, ipar[:, I_SLO, None], out=m_lo)
    m_hi = np.subtract(ipar[:, I_MB, None], lam_lo, out=work("m_hi", shape, np.int64))
    np.minimum(m_hi, ipar[:, I_SHI, None], out=m_hi)
    # The hull of the two intervals; an empty one does not count, both empty is (0, −1).
    for lo, hi in ((lam_lo, lam_hi), (m_lo, m_hi)):
        np.greater(lo, hi, out=tmp)
        np.copyto(lo, np.iinfo(np.int64).max, where=tmp)
        np.copyto(hi, -1, where=tmp)
    rows = out.rows[o]
    np.minimum(lam_lo, m_lo, out=rows[:, :, 0])
    np.maximum(lam_hi, m_hi, out=rows[:, :, 1])
    np.copyto(rows[:, :, 0], 0, where=rows[:, :, 1] < 0)
