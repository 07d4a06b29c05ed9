"""Value kernels of the cotangent Laplacian and mass, for one subject or a cohort.

Owns the per-geometry work; the topology tables come from pattern.py.
Two variants fill the same CSR values (S, nnz), masses (S, N) and per-vertex flags:

* ``row_values`` (default, both backends): one thread per (row, subject). The thread
  visits its vertex's face corners, recomputes each face's cotangents from the face's
  corners in face order, writes ``L_ij`` for its own row, then ``L_ii`` as minus the
  off-diagonal sum in column order and the clamped mass (``row_terms``). No atomics on
  the values, so results are bitwise reproducible run to run; both ends of an edge
  evaluate the same expression, so L is bitwise symmetric. On the CPU the sums happen in
  SpectralBrain's order. ``row_values_nodiv`` (assembly_nodiv.py, the ``nodiv`` variant of
  kernelrt.kernels.variants) gives the same bits with the face's corners selected, not branched on.
* ``face_values_atomic`` (CUDA, fp64 atomics, cc >= 6.0): one thread per (face,
  subject), 12 atomic adds (Σ w to the diagonals instead of a row sum), then
  ``finish_mass`` clamps. Its CPU twin loops the faces in order.

Per-face maths (``face_terms``, in face_terms.py with ``finish_row``) is exactly SpectralBrain 0.1.0's (``_drop_degenerate_faces`` and
``_cotangent_laplacian``; docs/laplacian.md): degenerate faces are masked to contribute 0.
``flags[s, i]`` = (degenerate faces whose corner 0 is i) + 2**32 * (i has no kept face),
so one integer sum gives both counts for the warnings. That sum is taken inside the last
kernel of each variant (``row_values``, ``finish_mass``): a shared-memory sum per block,
one atomic add per block into a device counter, and the block that finishes last leaves
the total in the counter's word 2 and its other words zeroed for the next launch. No
extra launch, no memset and no copy: the host reads the counter when it needs the counts
(``Assembled.counts``) or copies it with the results. Both kernels hold barriers: they are
``@cuda_kernel``s whose CPU twins count in their loops. ``row_values`` writes every value
and flags word, so its outputs need no zeroing.
"""

from __future__ import annotations


import numba
import numpy as np
from numba import cuda

import kernelrt

from ..variants import variant as chosen_variant
from .face_terms import ISOLATED, MASS_FLOOR, face_terms, finish_row
from .placement import BLOCK, blocks

__all__ = ["face_terms", "row_terms", "count_block", "row_values", "face_values_atomic", "finish_mass", "Assembled",
           "assemble_values", "new_counter", "assembly_kernels", "ROW_KERNELS", "ISOLATED", "COUNTER_WORDS"]

COUNTER_WORDS = 3  # a flag counter: [sum of the blocks so far, blocks done, the last launch's sum]


@kernelrt.device
def row_terms(i, s, V, inc_nbr, indptr, inc_ptr, inc, inc_slot, diag_slot, vals, mass):
    """Row i of subject s: its L entries and clamped mass; returns its flags word."""
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
    return finish_row(i, s, r0, r1, diag_slot, vals, mass, m, bad)


@cuda.jit(device=True)
def count_block(word, count):
    """Add this block's flags words to ``count[0]``; the last block to finish moves the total
    to ``count[2]`` and zeroes words 0 and 1 for the next launch. Every thread of the block
    calls it (barriers). Global atomics: one per block for the sum, only where a word is
    not zero (rare), and one for the ticket."""
    tile = cuda.shared.array(1, numba.int64)
    first = cuda.threadIdx.x == 0 and cuda.threadIdx.y == 0
    if first:
        tile[0] = 0
    # the same answer in every thread (a uniform barrier below); an int32, never the word (2**32)
    if cuda.syncthreads_or(1 if word != 0 else 0):
        if word != 0:
            cuda.atomic.add(tile, 0, word)
        cuda.syncthreads()
        if first:
            cuda.atomic.add(count, 0, tile[0])
    if first:
        cuda.threadfence()  # this block's sum reaches the device before its ticket does
        if cuda.atomic.add(count, 1, 1) == cuda.gridDim.x * cuda.gridDim.y - 1:
            count[2] = cuda.atomic.exch(count, 0, 0)  # the last block: every sum is in
            cuda.atomic.exch(count, 1, 0)


@kernelrt.cuda_kernel
def row_values(V, inc_nbr, indptr, inc_ptr, inc, inc_slot, diag_slot, vals, mass, flags, count):
    """One thread per (row, subject): ``row_terms``, every flags word, their sum into ``count``."""
    i, s = cuda.grid(2)
    word = 0
    if i < diag_slot.shape[0] and s < vals.shape[0]:
        word = row_terms(i, s, V, inc_nbr, indptr, inc_ptr, inc, inc_slot, diag_slot, vals, mass)
        flags[s, i] = word
    count_block(word, count)  # every thread gets here: no early return above


# The row kernel of each ``row_values`` variant (kernelrt.kernels.variants). assembly_nodiv
# adds its own when imported: it imports this module, so this module cannot import it.
ROW_KERNELS = {"branchy": row_values}


# inlined at numba IR level on the CPU (a call per row costs); numba-cuda refuses that
# inlining of a register_jitable function, and NVVM inlines it anyway
_row_terms_cpu = numba.njit(inline="always")(row_terms)


@row_values.cpu
def _row_values_cpu(grid, block, V, inc_nbr, indptr, inc_ptr, inc, inc_slot, diag_slot, vals, mass, flags, count):
    # a generated @kernel(ndim=2)'s loops and threshold (CPUBackend's min_rows, a constant
    # here): subjects in parallel if enough, else rows
    n_rows = min(diag_slot.shape[0], grid[0] * block[0])
    n_subj = min(vals.shape[0], grid[1] * block[1])
    if n_subj >= 4 * numba.config.NUMBA_NUM_THREADS:
        for s in numba.prange(n_subj):
            for i in range(n_rows):
                flags[s, i] = _row_terms_cpu(i, s, V, inc_nbr, indptr, inc_ptr, inc, inc_slot, diag_slot, vals, mass)
    else:
        for s in range(n_subj):
            for i in numba.prange(n_rows):
                flags[s, i] = _row_terms_cpu(i, s, V, inc_nbr, indptr, inc_ptr, inc, inc_slot, diag_slot, vals, mass)
    # summed here, not as a prange reduction: numba's reduction analysis fails on the
    # inlined row_terms under Python 3.12 ("unexpected cycle in lookup()")
    total = 0
    for s in range(n_subj):
        for i in range(n_rows):
            total += flags[s, i]
    count[2] = total


@kernelrt.cuda_kernel(min_cc=(6, 0))
def face_values_atomic(V, faces, face_slots, vals, mass, flags):
    f, s = cuda.grid(2)
    if f < faces.shape[0] and s < vals.shape[0]:
        i0, i1, i2 = faces[f, 0], faces[f, 1], faces[f, 2]
        if i0 == i1 or i1 == i2 or i2 == i0:
            return  # repeating faces are counted by the topology
        kept, dot0, dot1, dot2, area2 = face_terms(
            V[s, i0, 0], V[s, i0, 1], V[s, i0, 2], V[s, i1, 0], V[s, i1, 1], V[s, i1, 2],
            V[s, i2, 0], V[s, i2, 1], V[s, i2, 2],
        )
        if not kept:
            cuda.atomic.add(flags, (s, i0), 1)
            return
        w0, w1, w2 = (dot0 / area2) * 0.5, (dot1 / area2) * 0.5, (dot2 / area2) * 0.5
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
            i0, i1, i2 = faces[f, 0], faces[f, 1], faces[f, 2]
            if i0 == i1 or i1 == i2 or i2 == i0:
                continue
            kept, dot0, dot1, dot2, area2 = face_terms(
                V[s, i0, 0], V[s, i0, 1], V[s, i0, 2], V[s, i1, 0], V[s, i1, 1], V[s, i1, 2],
                V[s, i2, 0], V[s, i2, 1], V[s, i2, 2],
            )
            if not kept:
                flags[s, i0] += 1
                continue
            w0, w1, w2 = (dot0 / area2) * 0.5, (dot1 / area2) * 0.5, (dot2 / area2) * 0.5
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


@kernelrt.cuda_kernel
def finish_mass(mass, flags, count):
    """Clamp the masses summed by ``face_values_atomic``; every final flags word into ``count``."""
    i, s = cuda.grid(2)
    word = 0
    if i < mass.shape[1] and s < mass.shape[0]:
        m = mass[s, i]
        word = flags[s, i]  # the degenerate faces the face kernel counted
        if m <= 0.0:
            word += ISOLATED
            flags[s, i] = word
        mass[s, i] = m if m > MASS_FLOOR else MASS_FLOOR
    count_block(word, count)


@finish_mass.cpu
def _finish_mass_cpu(grid, block, mass, flags, count):
    n_rows = min(mass.shape[1], grid[0] * block[0])
    n_subj = min(mass.shape[0], grid[1] * block[1])
    total = 0
    for s in range(n_subj):
        for i in numba.prange(n_rows):
            m = mass[s, i]
            word = flags[s, i]
            if m <= 0.0:
                word += ISOLATED
                flags[s, i] = word
            mass[s, i] = m if m > MASS_FLOOR else MASS_FLOOR
            total += word
    count[2] = total


class Assembled:
    """What one ``assemble_values`` launch made: ``vals`` (S, nnz), ``mass`` (S, N), ``flags``
    (S, N) and ``count``, the flag counter (word 2: the launch's flags sum once it is done).

    ``counts()`` reads the counter when first asked (on CUDA a copy that waits for the
    launch). Unpacking gives the earlier ``(vals, mass, n_degenerate, n_isolated)``.
    """

    __slots__ = ("vals", "mass", "flags", "count", "_backend", "_total")

    def __init__(self, backend, vals, mass, flags, count):
        self.vals, self.mass, self.flags, self.count = vals, mass, flags, count
        self._backend, self._total = backend, None

    def counts(self) -> tuple[int, int]:
        """``(n_degenerate, n_isolated)`` summed over the subjects."""
        if self._total is None:
            self._total = int(self._backend.to_host(self.count)[2])
        return self._total % ISOLATED, self._total // ISOLATED

    def __iter__(self):
        return iter((self.vals, self.mass, *self.counts()))


def new_counter(backend):
    """A flag counter (zeroed once: each launch leaves words 0 and 1 zeroed)."""
    return backend.zeros(COUNTER_WORDS, np.int64)


def assemble_values(backend, tables, V3, variant: str = "deterministic", pool=None, *, scratch=None,
                    stream=None) -> Assembled:
    """Launch one assembly over all subjects of ``V3`` (S, N, 3) already on ``backend``.

    ``tables`` are the topology's arrays on ``backend`` (a dict); ``pool`` (a
    ``HostBufferPool``, CPU only) recycles the output memory of earlier calls. Nothing
    waits for the device. ``scratch`` (a ``DeviceScratch``) gives the counter and, for the
    deterministic variant, the flags and (if it has them) vals and mass to write, its first
    S rows; the atomic variant sums into new zeroed arrays. ``stream``: the launch stream
    (None: the backend's choice).
    """
    S, N = V3.shape[0], V3.shape[1]
    nnz = tables["indices"].shape[0]
    host = pool if (pool is not None and backend.name == "cpu") else None
    empty = host.empty if host else backend.allocate
    zeros = host.zeros if host else backend.zeros
    count = scratch.count if scratch is not None else new_counter(backend)
    if variant == "deterministic":  # the kernel writes every element: nothing to zero
        own = scratch is not None and scratch.vals is not None
        vals = scratch.vals[:S] if own else empty((S, nnz), np.float64)
        mass = scratch.mass[:S] if own else empty((S, N), np.float64)
        flags = scratch.flags[:S] if scratch is not None else empty((S, N), np.int64)
        rows = chosen_variant("row_values")
        if rows not in ROW_KERNELS:
            raise RuntimeError(f"row_values variant {rows!r} is not loaded: import {__package__}.assembly_{rows}")
        backend.launch_kernel(
            ROW_KERNELS[rows], (blocks(N), S), (BLOCK, 1), V3, tables["inc_nbr"], tables["indptr"],
            tables["inc_ptr"], tables["inc"], tables["inc_slot"], tables["diag_slot"], vals, mass, flags, count,
            stream=stream,
        )
    elif variant == "atomic":
        vals = zeros((S, nnz), np.float64)
        mass = zeros((S, N), np.float64)
        flags = zeros((S, N), np.int64)
        n_faces = tables["faces"].shape[0]
        backend.launch_kernel(
            face_values_atomic, (blocks(n_faces), S), (BLOCK, 1), V3, tables["faces"],
            tables["face_slots"], vals, mass, flags, stream=stream,
        )
        backend.launch_kernel(finish_mass, (blocks(N), S), (BLOCK, 1), mass, flags, count, stream=stream)
    else:
        raise ValueError(f"variant must be 'deterministic' or 'atomic' (got {variant!r})")
    return Assembled(backend, vals, mass, flags, count)


def assembly_kernels(itype: str) -> dict:
    """(kernel, signature) per backend of every kernel ``assemble_values`` launches."""
    utype = "uint32" if itype == "int32" else itype  # see MeshTopology._on
    i1, i2 = f"{utype}[::1]", f"{utype}[:, ::1]"
    f2, v3, n1, n2 = "float64[:, ::1]", "float64[:, :, ::1]", "int64[::1]", "int64[:, ::1]"
    rows = (row_values, f"{v3}, {i1}, {i1}, {i1}, {i1}, {i1}, {i1}, {f2}, {f2}, {n2}, {n1}")
    atomic = (face_values_atomic, f"{v3}, {i2}, {i2}, {f2}, {f2}, {n2}")
    finish = (finish_mass, f"{f2}, {n2}, {n1}")
    return {"cpu": [rows, atomic, finish], "cuda": [rows, atomic, finish]}
