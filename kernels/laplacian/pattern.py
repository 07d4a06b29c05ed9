"""Topology-only tables of the cotangent Laplacian, built once per face array.

Owns the CSR sparsity pattern of L (vertex adjacency plus the diagonal, sorted
columns, no duplicates) and the tables the value kernels read:

* ``inc_ptr`` / ``inc``: a vertex -> face-corner CSR. ``inc[t] = 3 f + c`` says vertex
  ``i`` is corner ``c`` of face ``f``. Entries are ordered corner-major, then by face,
  which is the order SpectralBrain's ``np.add.at`` mass accumulation visits them, so
  the deterministic kernel sums each mass in exactly that order.
* ``inc_nbr[2t]``, ``inc_nbr[2t + 1]``: the corner's two other vertices ``v_{c+1}``,
  ``v_{c+2}``, so the value kernel reads them in sequence instead of gathering the face
  first: one dependent random load less per corner (measured once at 655k vertices:
  57 -> 32 ms for the CPU value kernel).
* ``inc_slot[2t]``, ``inc_slot[2t + 1]``: positions in the CSR value array of
  ``(i, v_{c+1})`` and ``(i, v_{c+2})`` for that corner; ``diag_slot[i]`` of ``(i, i)``.
* ``face_slots`` (F, 9), only for the atomic per-face variant: per corner c,
  ``[diag of v_c, (v_c, v_{c+1}), (v_c, v_{c+2})]``.

Faces that repeat a vertex index are degenerate whatever the geometry, so they are
left out of every table (SpectralBrain drops them before assembly). Everything is
built by kernelrt kernels on the host CPU backend: a counting sort (a sequential count,
then a fill split by vertex ranges) and row-parallel passes for the adjacency (a
per-row insertion sort of ~13 candidates), no ``np.unique``.
"""

from __future__ import annotations

import numba
import numpy as np

import kernelrt

__all__ = ["Pattern", "build_pattern", "build_face_slots", "pattern_kernels"]


@kernelrt.kernel
def count_corners(t, faces, counts):
    """One thread: counts[v] = number of non-repeating faces with v as a corner."""
    if t == 0:
        for f in range(faces.shape[0]):
            a = faces[f, 0]
            b = faces[f, 1]
            c = faces[f, 2]
            if a != b and b != c and c != a:
                counts[a] += 1
                counts[b] += 1
                counts[c] += 1


@kernelrt.kernel
def fill_corners(p, faces, n_parts, cursor, inc, inc_nbr):
    """The counting sort's fill, corner-major then by face (see module doc).

    Thread p owns the vertices [p N / n_parts, (p + 1) N / n_parts): it scans every face
    but writes only its own vertices' entries, so threads never share a cursor and each
    vertex still receives its corners in (corner, face) order.
    """
    if p < n_parts:
        n = cursor.shape[0]
        lo = p * n // n_parts
        hi = (p + 1) * n // n_parts
        for c in range(3):
            c1 = (c + 1) % 3
            c2 = (c + 2) % 3
            for f in range(faces.shape[0]):
                v = faces[f, c]
                if v >= lo and v < hi:
                    a = faces[f, 0]
                    b = faces[f, 1]
                    d = faces[f, 2]
                    if a != b and b != d and d != a:
                        pos = cursor[v]
                        inc[pos] = 3 * f + c
                        inc_nbr[2 * pos] = faces[f, c1]
                        inc_nbr[2 * pos + 1] = faces[f, c2]
                        cursor[v] = pos + 1


@kernelrt.kernel
def row_candidates(i, inc_ptr, inc_nbr, cand, row_count):
    """Per row: neighbours and self, sorted and de-duplicated in cand's private window."""
    if i < row_count.shape[0]:
        t0 = inc_ptr[i]
        t1 = inc_ptr[i + 1]
        base = 2 * t0 + i  # each corner adds <= 2 neighbours, plus the diagonal
        cand[base] = i
        k = 1
        for t in range(2 * t0, 2 * t1):
            cand[base + k] = inc_nbr[t]
            k += 1
        for a in range(1, k):  # insertion sort: rows hold ~13 candidates
            x = cand[base + a]
            b = a - 1
            while b >= 0 and cand[base + b] > x:
                cand[base + b + 1] = cand[base + b]
                b -= 1
            cand[base + b + 1] = x
        u = 1
        for a in range(1, k):
            if cand[base + a] != cand[base + u - 1]:
                cand[base + u] = cand[base + a]
                u += 1
        row_count[i] = u


@kernelrt.kernel
def row_fill(i, inc_ptr, inc_nbr, cand, indptr, indices, inc_slot, diag_slot):
    """Per row: copy the unique columns into ``indices``; resolve each corner's two slots."""
    if i < diag_slot.shape[0]:
        t0 = inc_ptr[i]
        base = 2 * t0 + i
        start = indptr[i]
        n = indptr[i + 1] - start
        for a in range(n):
            col = cand[base + a]
            indices[start + a] = col
            if col == i:
                diag_slot[i] = start + a
        for t in range(2 * t0, 2 * inc_ptr[i + 1]):
            v = inc_nbr[t]
            for a in range(n):
                if indices[start + a] == v:
                    inc_slot[t] = start + a


@kernelrt.kernel
def scatter_face_slots(i, inc_ptr, inc, inc_slot, diag_slot, face_slots):
    """Per row: write this vertex's three slots into its corner's part of face_slots."""
    if i < diag_slot.shape[0]:
        for t in range(inc_ptr[i], inc_ptr[i + 1]):
            p = inc[t]
            f = p // 3
            c = p - 3 * f
            face_slots[f, 3 * c] = diag_slot[i]
            face_slots[f, 3 * c + 1] = inc_slot[2 * t]
            face_slots[f, 3 * c + 2] = inc_slot[2 * t + 1]


_BLOCK = 256


def _grid(n: int) -> int:
    return max(1, -(-n // _BLOCK))


def _parts() -> int:
    """One vertex range per CPU thread for ``fill_corners`` (each range rescans all faces)."""
    return max(1, int(numba.get_num_threads()))


class Pattern:
    """The host-side tables listed in the module docstring (all C-contiguous numpy)."""

    __slots__ = (
        "n_vertices", "faces", "indptr", "indices", "inc_ptr", "inc", "inc_nbr", "inc_slot", "diag_slot", "counts"
    )

    def __init__(self, n_vertices, faces, indptr, indices, inc_ptr, inc, inc_nbr, inc_slot, diag_slot, counts):
        self.n_vertices = n_vertices
        self.faces = faces
        self.indptr = indptr
        self.indices = indices
        self.inc_ptr = inc_ptr
        self.inc = inc
        self.inc_nbr = inc_nbr
        self.inc_slot = inc_slot
        self.diag_slot = diag_slot
        self.counts = counts


def _u(a: np.ndarray) -> np.ndarray:
    """uint32 view of an int32 table (no copy): unsigned gathers skip numba's
    negative-index fix-up; int64 tables stay signed (uint64 op int64 types as float)."""
    return a.view(np.uint32) if a.dtype == np.int32 else a


def build_pattern(faces: np.ndarray, n_vertices: int, host) -> Pattern:
    """Build the pattern of validated ``faces`` (index dtype) on the CPU backend ``host``."""
    itype = faces.dtype
    n = int(n_vertices)
    counts = np.zeros(n, itype)
    host.launch_kernel(count_corners, 1, 1, _u(faces), _u(counts))
    inc_ptr = np.zeros(n + 1, itype)
    np.cumsum(counts, out=inc_ptr[1:])
    n_inc = int(inc_ptr[-1])
    inc = np.empty(n_inc, itype)
    inc_nbr = np.empty(2 * n_inc, itype)
    cursor = inc_ptr[:-1].copy()
    parts = _parts()
    host.launch_kernel(fill_corners, 1, parts, _u(faces), parts, _u(cursor), _u(inc), _u(inc_nbr))

    cand = np.empty(2 * n_inc + n, itype)
    row_count = np.empty(n, itype)
    host.launch_kernel(row_candidates, _grid(n), _BLOCK, _u(inc_ptr), _u(inc_nbr), _u(cand), _u(row_count))
    indptr = np.zeros(n + 1, itype)
    np.cumsum(row_count, out=indptr[1:])
    indices = np.empty(int(indptr[-1]), itype)
    inc_slot = np.empty(2 * n_inc, itype)
    diag_slot = np.empty(n, itype)
    host.launch_kernel(
        row_fill, _grid(n), _BLOCK, _u(inc_ptr), _u(inc_nbr), _u(cand), _u(indptr), _u(indices),
        _u(inc_slot), _u(diag_slot),
    )
    return Pattern(n, faces, indptr, indices, inc_ptr, inc, inc_nbr, inc_slot, diag_slot, counts)


def build_face_slots(p: Pattern, host) -> np.ndarray:
    """(F, 9) slots for the atomic per-face kernel; rows of repeating faces stay -1."""
    face_slots = np.full((p.faces.shape[0], 9), -1, p.faces.dtype)
    host.launch_kernel(
        scatter_face_slots, _grid(p.n_vertices), _BLOCK, _u(p.inc_ptr), _u(p.inc), _u(p.inc_slot),
        _u(p.diag_slot), _u(face_slots),
    )
    return face_slots


def pattern_kernels(itype: str) -> list:
    """(kernel, signature) of every pattern kernel, for ``warm_specs``."""
    utype = "uint32" if itype == "int32" else itype  # see _u
    v1, v2 = f"{utype}[::1]", f"{utype}[:, ::1]"
    return [
        (count_corners, f"{v2}, {v1}"),
        (fill_corners, f"{v2}, int64, {v1}, {v1}, {v1}"),
        (row_candidates, f"{v1}, {v1}, {v1}, {v1}"),
        (row_fill, f"{v1}, {v1}, {v1}, {v1}, {v1}, {v1}, {v1}"),
        (scatter_face_slots, f"{v1}, {v1}, {v1}, {v1}, {v2}"),
    ]
