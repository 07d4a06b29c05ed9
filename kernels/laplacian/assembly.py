"""Value kernels of the cotangent Laplacian and mass, for one subject or a cohort.

Owns the per-geometry work; the topology tables come from pattern.py.
Two variants fill the same CSR values (S, nnz), masses (S, N) and per-vertex flags:

* ``row_values`` (default, both backends): one thread per (row, subject). The thread
  visits its vertex's face corners, recomputes each face's cotangents from the face's
  corners in face order, writes ``L_ij`` for its own row, then ``L_ii`` as minus the
  off-diagonal sum in column order and the clamped mass. No atomics, so results are
  bitwise reproducible run to run; both ends of an edge evaluate the same expression,
  so L is bitwise symmetric. On the CPU the sums happen in SpectralBrain's order.
* ``face_values_atomic`` (CUDA, fp64 atomics, cc >= 6.0): one thread per (face,
  subject), 12 atomic adds (Σ w to the diagonals instead of a row sum), then
  ``finish_mass`` clamps. Its CPU twin loops the faces in order.

Per-face maths is exactly SpectralBrain 0.1.0's (``_drop_degenerate_faces`` and
``_cotangent_laplacian``; docs/laplacian.md): degenerate faces are masked to contribute 0.
``flags[s, i]`` = (degenerate faces whose corner 0 is i) + 2**32 * (i has no kept face),
so one integer sum gives both counts for the warnings; flags start zeroed and only the
rare non-zero rows are written.
"""

from __future__ import annotations

import math

import numba
import numpy as np
from numba import cuda

import kernelrt

from .placement import BLOCK, blocks

__all__ = [
    "face_terms",
    "row_values",
    "face_values_atomic",
    "finish_mass",
    "sum_flags",
    "assemble_values",
    "assembly_kernels",
    "ISOLATED",
]

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


@kernelrt.kernel(ndim=2)
def row_values(i, s, V, inc_nbr, indptr, inc_ptr, inc, inc_slot, diag_slot, vals, mass, flags):
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
            c = inc[t] % 3  # this row's corner in the face; the others follow in face order
            a = inc_nbr[2 * t]
            b = inc_nbr[2 * t + 1]
            xa = V[s, a, 0]
            ya = V[s, a, 1]
            za = V[s, a, 2]
            xb = V[s, b, 0]
            yb = V[s, b, 1]
            zb = V[s, b, 2]
            # Corners are passed in the face's own order so that every row evaluates a
            # face identically (bitwise symmetric L). Edge (i, a) is opposite corner
            # c+2, edge (i, b) opposite corner c+1.
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
        for q in range(r0, r1):  # the diagonal slot still holds 0.0 here
            acc += vals[s, q]
        vals[s, diag_slot[i]] = -acc
        if m <= 0.0:  # flags arrive zeroed: most rows write nothing
            flags[s, i] = bad + ISOLATED
        elif bad:
            flags[s, i] = bad
        mass[s, i] = m if m > MASS_FLOOR else MASS_FLOOR


@kernelrt.cuda_kernel(min_cc=(6, 0))
def face_values_atomic(V, faces, face_slots, vals, mass, flags):
    f, s = cuda.grid(2)
    if f < faces.shape[0] and s < vals.shape[0]:
        i0 = faces[f, 0]
        i1 = faces[f, 1]
        i2 = faces[f, 2]
        if i0 == i1 or i1 == i2 or i2 == i0:
            return  # repeating faces are counted by the topology
        kept, dot0, dot1, dot2, area2 = face_terms(
            V[s, i0, 0], V[s, i0, 1], V[s, i0, 2], V[s, i1, 0], V[s, i1, 1], V[s, i1, 2],
            V[s, i2, 0], V[s, i2, 1], V[s, i2, 2],
        )
        if not kept:
            cuda.atomic.add(flags, (s, i0), 1)
            return
        w0 = (dot0 / area2) * 0.5
        w1 = (dot1 / area2) * 0.5
        w2 = (dot2 / area2) * 0.5
        cuda.atomic.add(vals, (s, face_slots[f, 0]), w1 + w2)
        cuda.atomic.add(vals, (s, face_slots[f, 1]), -w2)
        cuda.atomic.add(vals, (s, face_slots[f, 2]), -w1)
        cuda.atomic.add(vals, (s, face_slots[f, 3]), w2 + w0)
        cuda.atomic.add(vals, (s, face_slots[f, 4]), -w0)
        cuda.atomic.add(vals, (s, face_slots[f, 5]), -w2)
        cuda.atomic.add(vals, (s, face_slots[f, 6]), w0 + w1)
        cuda.atomic.add(vals, (s, face_slots[f, 7]), -w1)
        cuda.atomic.add(vals, (s, face_slots[f, 8]), -w0)
        a3 = area2 / 2.0 / 3.0
        cuda.atomic.add(mass, (s, i0), a3)
        cuda.atomic.add(mass, (s, i1), a3)
        cuda.atomic.add(mass, (s, i2), a3)


@face_values_atomic.cpu
def _face_values_atomic_cpu(grid, block, V, faces, face_slots, vals, mass, flags):
    # Subjects are independent, faces are not (they share slots): parallel over subjects only.
    n_faces = min(faces.shape[0], grid[0] * block[0])
    n_subj = min(vals.shape[0], grid[1] * block[1])
    for s in numba.prange(n_subj):
        for f in range(n_faces):
            i0 = faces[f, 0]
            i1 = faces[f, 1]
            i2 = faces[f, 2]
            if i0 == i1 or i1 == i2 or i2 == i0:
                continue
            kept, dot0, dot1, dot2, area2 = face_terms(
                V[s, i0, 0], V[s, i0, 1], V[s, i0, 2], V[s, i1, 0], V[s, i1, 1], V[s, i1, 2],
                V[s, i2, 0], V[s, i2, 1], V[s, i2, 2],
            )
            if not kept:
                flags[s, i0] += 1
                continue
            w0 = (dot0 / area2) * 0.5
            w1 = (dot1 / area2) * 0.5
            w2 = (dot2 / area2) * 0.5
            vals[s, face_slots[f, 0]] += w1 + w2
            vals[s, face_slots[f, 1]] += -w2
            vals[s, face_slots[f, 2]] += -w1
            vals[s, face_slots[f, 3]] += w2 + w0
            vals[s, face_slots[f, 4]] += -w0
            vals[s, face_slots[f, 5]] += -w2
            vals[s, face_slots[f, 6]] += w0 + w1
            vals[s, face_slots[f, 7]] += -w1
            vals[s, face_slots[f, 8]] += -w0
            a3 = area2 / 2.0 / 3.0
            mass[s, i0] += a3
            mass[s, i1] += a3
            mass[s, i2] += a3


@kernelrt.kernel(ndim=2)
def finish_mass(i, s, mass, flags):
    if i < mass.shape[1] and s < mass.shape[0]:
        m = mass[s, i]
        if m <= 0.0:
            flags[s, i] += ISOLATED
        mass[s, i] = m if m > MASS_FLOOR else MASS_FLOOR


_SUM_BLOCK = 256


@kernelrt.cuda_kernel
def sum_flags(flags, out):
    """out[0] += sum(flags): grid-stride partial sums, a shared-memory tree, one atomic per block."""
    tile = cuda.shared.array(256, dtype=numba.int64)
    t = cuda.threadIdx.x
    i = cuda.grid(1)
    stride = cuda.gridsize(1)
    acc = 0
    while i < flags.shape[0]:
        acc += flags[i]
        i += stride
    tile[t] = acc
    cuda.syncthreads()
    half = cuda.blockDim.x // 2
    while half > 0:
        if t < half:
            tile[t] += tile[t + half]
        cuda.syncthreads()
        half //= 2
    if t == 0:
        cuda.atomic.add(out, 0, tile[0])


@sum_flags.cpu
def _sum_flags_cpu(grid, block, flags, out):
    acc = 0
    for i in numba.prange(flags.shape[0]):
        acc += flags[i]
    out[0] += acc


def assemble_values(backend, tables, V3, variant: str = "deterministic", pool=None):
    """Launch one assembly over all subjects of ``V3`` (S, N, 3) already on ``backend``.

    ``tables`` are the topology's arrays on the same backend (a dict); ``pool`` (a
    ``HostBufferPool``, CPU only) recycles the output memory of earlier calls. Returns
    ``(vals (S, nnz), mass (S, N), n_degenerate, n_isolated)``: arrays on the backend,
    counts summed over subjects.
    """
    S, N = V3.shape[0], V3.shape[1]
    nnz = tables["indices"].shape[0]
    host = pool if (pool is not None and backend.name == "cpu") else None
    empty = host.empty if host else backend.allocate
    zeros = host.zeros if host else backend.zeros
    if variant == "deterministic":
        vals = empty((S, nnz), np.float64)
        mass = empty((S, N), np.float64)
        flags = zeros((S, N), np.int64)
        backend.launch_kernel(
            row_values, (blocks(N), S), (BLOCK, 1), V3, tables["inc_nbr"], tables["indptr"],
            tables["inc_ptr"], tables["inc"], tables["inc_slot"], tables["diag_slot"], vals, mass, flags,
        )
    elif variant == "atomic":
        vals = zeros((S, nnz), np.float64)
        mass = zeros((S, N), np.float64)
        flags = zeros((S, N), np.int64)
        n_faces = tables["faces"].shape[0]
        backend.launch_kernel(
            face_values_atomic, (blocks(n_faces), S), (BLOCK, 1), V3, tables["faces"],
            tables["face_slots"], vals, mass, flags,
        )
        backend.launch_kernel(finish_mass, (blocks(N), S), (BLOCK, 1), mass, flags)
    else:
        raise ValueError(f"variant must be 'deterministic' or 'atomic' (got {variant!r})")
    total = _flag_total(backend, flags)
    return vals, mass, int(total % ISOLATED), int(total // ISOLATED)


def _flag_total(backend, flags) -> int:
    if backend.name == "cpu":
        return int(flags.sum())
    out = backend.zeros(1, np.int64)
    flat = flags.reshape(flags.shape[0] * flags.shape[1])
    n_blocks = min(blocks(flat.shape[0], _SUM_BLOCK), 1024)
    backend.launch_kernel(sum_flags, n_blocks, _SUM_BLOCK, flat, out)
    return int(backend.to_host(out)[0])


def assembly_kernels(itype: str) -> dict:
    """(kernel, signature) per backend of every kernel ``assemble_values`` launches."""
    utype = "uint32" if itype == "int32" else itype  # see MeshTopology._on
    i1, i2 = f"{utype}[::1]", f"{utype}[:, ::1]"
    f2, v3 = "float64[:, ::1]", "float64[:, :, ::1]"
    rows = (row_values, f"{v3}, {i1}, {i1}, {i1}, {i1}, {i1}, {i1}, {f2}, {f2}, int64[:, ::1]")
    atomic = (face_values_atomic, f"{v3}, {i2}, {i2}, {f2}, {f2}, int64[:, ::1]")
    finish = (finish_mass, f"{f2}, int64[:, ::1]")
    return {"cpu": [rows, atomic, finish], "cuda": [rows, atomic, finish, (sum_flags, "int64[::1], int64[::1]")]}
