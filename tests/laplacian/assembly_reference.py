"""The value kernels as they were before the flag count was fused into them (issue 24).

Test-only: the same source as the release before, a per-row ``@kernel`` whose flags arrive
zeroed and a separate mass pass, so the tests can check that the fused kernels give the
very same values, masses and flags, and that their counter holds the flags' sum. Both use
the library's ``face_terms``, the face maths itself.
"""

from __future__ import annotations

import numpy as np

import kernelrt
from kernelrt.kernels.laplacian import assembly as A
from kernelrt.kernels.laplacian.placement import BLOCK, blocks

face_terms = A.face_terms
ISOLATED, MASS_FLOOR = A.ISOLATED, A.MASS_FLOOR


@kernelrt.kernel(ndim=2)
def row_values_before(i, s, V, inc_nbr, indptr, inc_ptr, inc, inc_slot, diag_slot, vals, mass, flags):
    if i < diag_slot.shape[0] and s < vals.shape[0]:
        r0 = indptr[i]
        r1 = indptr[i + 1]
        for q in range(r0, r1):
            vals[s, q] = 0.0
        m = 0.0
        bad = 0
        xi = V[s, i, 0]
        yi = V[s, i, 1]
        zi = V[s, i, 2]
        for t in range(inc_ptr[i], inc_ptr[i + 1]):
            c = inc[t] % 3
            a = inc_nbr[2 * t]
            b = inc_nbr[2 * t + 1]
            xa = V[s, a, 0]
            ya = V[s, a, 1]
            za = V[s, a, 2]
            xb = V[s, b, 0]
            yb = V[s, b, 1]
            zb = V[s, b, 2]
            if c == 0:
                kept, dot0, dot1, dot2, area2 = face_terms(xi, yi, zi, xa, ya, za, xb, yb, zb)
                da = dot2
                db = dot1
            elif c == 1:
                kept, dot0, dot1, dot2, area2 = face_terms(xb, yb, zb, xi, yi, zi, xa, ya, za)
                da = dot0
                db = dot2
            else:
                kept, dot0, dot1, dot2, area2 = face_terms(xa, ya, za, xb, yb, zb, xi, yi, zi)
                da = dot1
                db = dot0
            if kept:
                vals[s, inc_slot[2 * t]] -= (da / area2) * 0.5
                vals[s, inc_slot[2 * t + 1]] -= (db / area2) * 0.5
                m += area2 / 2.0 / 3.0
            elif c == 0:
                bad += 1
        acc = 0.0
        for q in range(r0, r1):
            acc += vals[s, q]
        vals[s, diag_slot[i]] = -acc
        if m <= 0.0:
            flags[s, i] = bad + ISOLATED
        elif bad:
            flags[s, i] = bad
        mass[s, i] = m if m > MASS_FLOOR else MASS_FLOOR


@kernelrt.kernel(ndim=2)
def finish_mass_before(i, s, mass, flags):
    if i < mass.shape[1] and s < mass.shape[0]:
        m = mass[s, i]
        if m <= 0.0:
            flags[s, i] += ISOLATED
        mass[s, i] = m if m > MASS_FLOOR else MASS_FLOOR


def assemble_before(backend, tables, V3, variant="deterministic"):
    """``(vals, mass, flags)`` on the host, from the kernels above (and the unchanged face kernel)."""
    S, N = V3.shape[0], V3.shape[1]
    nnz = tables["indices"].shape[0]
    vals = backend.zeros((S, nnz), np.float64)
    mass = backend.zeros((S, N), np.float64)
    flags = backend.zeros((S, N), np.int64)
    if variant == "deterministic":
        backend.launch_kernel(
            row_values_before, (blocks(N), S), (BLOCK, 1), V3, tables["inc_nbr"], tables["indptr"],
            tables["inc_ptr"], tables["inc"], tables["inc_slot"], tables["diag_slot"], vals, mass, flags,
        )
    else:
        backend.launch_kernel(A.face_values_atomic, (blocks(tables["faces"].shape[0]), S), (BLOCK, 1), V3,
                              tables["faces"], tables["face_slots"], vals, mass, flags)
        backend.launch_kernel(finish_mass_before, (blocks(N), S), (BLOCK, 1), mass, flags)
    return tuple(np.asarray(backend.to_host(a)) for a in (vals, mass, flags))


def awkward_cohort(level: int = 1, n_subjects: int = 3, seed: int = 0):
    """(V (S, N, 3), F): noisy icospheres plus a vertex in no face and one shared by a
    face made collinear in every subject, and one subject collapsed to a point (every
    face degenerate, every vertex isolated)."""
    from kernelrt.kernels import laplacian as lap

    V, F = lap.icosphere(level)
    rng = np.random.default_rng(seed)
    N = len(V)
    extra = np.array([[5.0, 5.0, 5.0], [0.0, 0.0, 0.0]])  # N: in no face; N + 1: on a collinear face
    F = np.vstack([F, [[0, 1, N + 1]]]).astype(F.dtype)
    cohort = []
    for s in range(n_subjects):
        Vs = np.vstack([V + 0.02 * rng.standard_normal(V.shape), extra])
        Vs[N + 1] = (Vs[0] + Vs[1]) / 2  # exactly collinear
        cohort.append(Vs if s != 1 else np.zeros_like(Vs))
    return np.stack(cohort), F
