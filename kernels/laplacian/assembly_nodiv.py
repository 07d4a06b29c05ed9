"""``row_values_nodiv``: the per-row value kernel without the divergent corner branch.

What: the ``nodiv`` variant of the ``row_values`` family (``kernelrt.kernels.variants``).
Why: ``row_terms`` visits a vertex's face corners behind ``if c == 0 / elif c == 1 / else``,
each arm an inlined copy of ``face_terms`` with the corners rotated. The rows of a warp
sit at different corners of their faces, so a warp runs up to all three arms one after
the other (up to 3x the fp64 work), and the three copies cost registers. Here the face's
three vertex ids are chosen by the corner index with selects (no arithmetic, no branch
around the face maths), their coordinates loaded, ``face_terms`` called once, and the two
dot products the row needs chosen the same way. Choosing ids rather than the nine
coordinates keeps fewer values live: ptxas (CUDA 12.9) gives 64 registers at sm_80 and
sm_90 with int32 indices (66 with int64) against ``row_values``' 72, so 8 resident blocks
of 128 threads instead of 7; selecting the coordinates took 70 to 74. The price: row i's own coordinates are
loaded per face instead of once per row (L1 hits).

It is bitwise equal to ``row_values``: ``face_terms`` gets the same numbers in the same
order as the branch that ``row_values`` takes, and every sum after it is the same sum in
the same order, with the same fused flag count (``count_block``). Its CPU twin is
``row_values``' own, whose branches cost a CPU nothing. On an H200 (2026-11-27) it tied
with ``row_values`` (the driver's JIT gave it 88 registers, not ptxas's 64), which stays the
default.
"""

from __future__ import annotations

import numba
from numba import cuda

import kernelrt

from .assembly import ROW_KERNELS, assembly_kernels, count_block, row_values
from .face_terms import face_terms, finish_row

__all__ = ["by_corner", "row_terms_nodiv", "row_values_nodiv", "assembly_variant_kernels"]


@numba.njit(inline="always")
def by_corner(c, v0, v1, v2):
    """``(v0, v1, v2)[c]`` for c in 0..2, written as conditional expressions: on scalars
    NVVM makes them ``selp`` instructions, with nothing computed but the choice."""
    return v0 if c == 0 else (v1 if c == 1 else v2)


@kernelrt.device
def row_terms_nodiv(i, s, V, inc_nbr, indptr, inc_ptr, inc, inc_slot, diag_slot, vals, mass):
    """``row_terms`` with its face corners selected instead of branched on: the same result."""
    r0 = indptr[i]
    r1 = indptr[i + 1]
    for q in range(r0, r1):
        vals[s, q] = 0.0
    m = 0.0
    bad = 0
    for t in range(inc_ptr[i], inc_ptr[i + 1]):
        c = inc[t] % 3  # this row's corner in the face; the others follow in face order
        # int64 as i is: with a uint32 id among its choices NVVM kept one select a branch
        a = numba.int64(inc_nbr[2 * t])
        b = numba.int64(inc_nbr[2 * t + 1])
        # The face's corners in its own order, as row_terms passes them: (i, a, b) at
        # c == 0, (b, i, a) at c == 1, (a, b, i) at c == 2.
        p0 = by_corner(c, i, b, a)
        p1 = by_corner(c, a, i, b)
        p2 = by_corner(c, b, a, i)
        kept, dot0, dot1, dot2, area2 = face_terms(
            V[s, p0, 0], V[s, p0, 1], V[s, p0, 2], V[s, p1, 0], V[s, p1, 1], V[s, p1, 2],
            V[s, p2, 0], V[s, p2, 1], V[s, p2, 2],
        )
        # edge (i, a) is opposite corner c+2, edge (i, b) opposite corner c+1
        da = by_corner(c, dot2, dot0, dot1)
        db = by_corner(c, dot1, dot2, dot0)
        if kept:
            vals[s, inc_slot[2 * t]] -= (da / area2) * 0.5
            vals[s, inc_slot[2 * t + 1]] -= (db / area2) * 0.5
            m += area2 / 2.0 / 3.0
        elif c == 0:
            bad += 1
    return finish_row(i, s, r0, r1, diag_slot, vals, mass, m, bad)


@kernelrt.cuda_kernel
def row_values_nodiv(V, inc_nbr, indptr, inc_ptr, inc, inc_slot, diag_slot, vals, mass, flags, count):
    """``row_values`` over ``row_terms_nodiv``: one thread per (row, subject), the same outputs."""
    i, s = cuda.grid(2)
    word = 0
    if i < diag_slot.shape[0] and s < vals.shape[0]:
        word = row_terms_nodiv(i, s, V, inc_nbr, indptr, inc_ptr, inc, inc_slot, diag_slot, vals, mass)
        flags[s, i] = word
    count_block(word, count)  # every thread gets here: no early return above


# The CPU runs row_values' twin: the same results, and a CPU core pays nothing for the
# branch a warp diverges on.
row_values_nodiv.cpu(row_values.cpu_twin)
# assemble_values finds the kernel here: assembly.py cannot import this module (a cycle)
ROW_KERNELS["nodiv"] = row_values_nodiv


def assembly_variant_kernels(itype: str) -> list:
    """(kernel, signature) of ``row_values_nodiv``, launched as ``row_values`` is (``assembly_kernels``)."""
    signature = next(sig for kernel, sig in assembly_kernels(itype)["cuda"] if kernel is row_values)
    return [(row_values_nodiv, signature)]
