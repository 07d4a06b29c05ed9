"""The per-face and per-row arithmetic the assembly kernels share (assembly.py, assembly_nodiv.py).

A leaf module: ``face_terms``, SpectralBrain 0.1.0's per-face quantities with its degeneracy
test (docs/laplacian.md, "Per-face quantities"), and ``finish_row``, a row's diagonal and
clamped mass once its off-diagonal entries are in. Every row kernel calls the same two
functions, so each gives the same bits.
"""

from __future__ import annotations

import math

import numba

import kernelrt

__all__ = ["ISOLATED", "MASS_FLOOR", "DEGENERATE_RTOL", "DBL_MAX", "face_terms", "finish_row"]

ISOLATED = 4294967296  # 2**32: the isolated-vertex unit inside a flags word
MASS_FLOOR = 1e-20
DEGENERATE_RTOL = 1e-12
DBL_MAX = 1.7976931348623157e308


# The face maths takes scalars, not arrays: a numba function that takes scalars is
# callable from CPU kernels, CUDA device code and the CUDA simulator (whose fake device
# arrays numba cannot unbox) alike.
@numba.njit(inline="always")
def face_terms(x0, y0, z0, x1, y1, z1, x2, y2, z2):
    """(kept, dot0, dot1, dot2, 2·area) of the triangle p0 p1 p2; cot_c = dot_c / (2·area).

    The division is left to the caller, which needs only two of the three cotangents
    per corner visit; the quotient is the same number either way.
    """
    # e2 = v1 - v0, e0 = v2 - v1, e1 = v0 - v2 (SpectralBrain's names)
    ax = x1 - x0
    ay = y1 - y0
    az = z1 - z0
    ux = x2 - x1
    uy = y2 - y1
    uz = z2 - z1
    wx = x0 - x2
    wy = y0 - y2
    wz = z0 - z2
    # Degeneracy test on |(v1 - v0) x (v2 - v0)|, a different cross than the area below,
    # exactly as SpectralBrain writes it.
    bx = x2 - x0
    by = y2 - y0
    bz = z2 - z0
    cx = ay * bz - az * by
    cy = az * bx - ax * bz
    cz = ax * by - ay * bx
    dd = math.sqrt(cx * cx + cy * cy + cz * cz)
    lmax = ax * ax + ay * ay + az * az
    l12 = ux * ux + uy * uy + uz * uz
    l20 = wx * wx + wy * wy + wz * wz
    if l12 > lmax:
        lmax = l12
    if l20 > lmax:
        lmax = l20
    kept = dd > DEGENERATE_RTOL * lmax and dd <= DBL_MAX  # False for NaN too
    k0 = uy * wz - uz * wy
    k1 = uz * wx - ux * wz
    k2 = ux * wy - uy * wx
    area2 = math.sqrt(k0 * k0 + k1 * k1 + k2 * k2)
    if not (kept and area2 > 0.0):  # never divide by zero later (the simulator would raise)
        return False, 0.0, 0.0, 0.0, 0.0
    dot0 = (-wx) * ax + (-wy) * ay + (-wz) * az  # <-e1, e2>: angle at p0
    dot1 = (-ax) * ux + (-ay) * uy + (-az) * uz  # <-e2, e0>: angle at p1
    dot2 = (-ux) * wx + (-uy) * wy + (-uz) * wz  # <-e0, e1>: angle at p2
    return True, dot0, dot1, dot2, area2


@kernelrt.device
def finish_row(i, s, r0, r1, diag_slot, vals, mass, m, bad):
    """Row i of subject s after its faces: L_ii as minus the off-diagonal sum in column order,
    the clamped mass ``m``; returns the row's flags word (``bad`` degenerate faces, + ISOLATED
    if no face was kept)."""
    acc = 0.0
    for q in range(r0, r1):  # the diagonal slot still holds 0.0 here
        acc += vals[s, q]
    vals[s, diag_slot[i]] = -acc
    mass[s, i] = m if m > MASS_FLOOR else MASS_FLOOR
    return bad + ISOLATED if m <= 0.0 else bad
