"""``row_values_nodiv`` against ``row_values``, bit for bit, on the CUDA simulator.

The branch-free row kernel (kernels/laplacian/assembly_nodiv.py) selects a face's corners
instead of branching on the row's corner, and must still give every bit of the values,
masses and flags, and the same total in the fused flag counter. The meshes: a clean
icosphere, the awkward cohort (degenerate faces, a vertex in no face, a subject collapsed
to a point) and a three-subject cohort over several blocks. The simulator runs threads in
Python: tiny meshes only.
"""

from __future__ import annotations

import numpy as np
import pytest
from tests.laplacian.assembly_reference import awkward_cohort

from kernelrt.kernels import laplacian as lap
from kernelrt.kernels.laplacian.assembly import assemble_values, row_values
from kernelrt.kernels.laplacian.assembly_nodiv import row_values_nodiv
from kernelrt.kernels.laplacian.placement import BLOCK, blocks
from kernelrt.kernels.variants import use_variants


def _launch(gpu, kernel, tables, V):
    """``kernel`` over every (row, subject) of ``V`` (S, N, 3): host (vals, mass, flags, counter)."""
    S, N = V.shape[0], V.shape[1]
    nnz = tables["indices"].shape[0]
    # filled with garbage: the row kernels write every element, so none may survive
    vals = gpu.to_device(np.full((S, nnz), np.nan))
    mass = gpu.to_device(np.full((S, N), np.nan))
    flags = gpu.to_device(np.full((S, N), -1, np.int64))
    count = gpu.zeros(3, np.int64)
    gpu.launch_kernel(kernel, (blocks(N), S), (BLOCK, 1), gpu.to_device(np.ascontiguousarray(V)),
                      tables["inc_nbr"], tables["indptr"], tables["inc_ptr"], tables["inc"], tables["inc_slot"],
                      tables["diag_slot"], vals, mass, flags, count)
    return tuple(gpu.to_host(a) for a in (vals, mass, flags, count))


def _icosphere():
    V, F = lap.icosphere(1)
    return V[None], F


def _noisy_cohort(n_subjects):
    V, F = lap.icosphere(1)
    rng = np.random.default_rng(7)
    return np.stack([V + 0.05 * rng.standard_normal(V.shape) for _ in range(n_subjects)]), F


CASES = {
    "icosphere-1": _icosphere,
    "awkward": lambda: awkward_cohort(0, 3),  # 14 vertices, 3 subjects; subject 1 a point
    "cohort-3": lambda: _noisy_cohort(3),  # 42 vertices, 3 subjects: 3 blocks count into one counter
}


@pytest.mark.parametrize("case", sorted(CASES))
def test_nodiv_gives_row_values_bits(gpu60, case):
    V, F = CASES[case]()
    topo = lap.MeshTopology(F, V.shape[1])
    tables = topo._tables(gpu60, "deterministic")
    branchy = _launch(gpu60, row_values, tables, V)
    nodiv = _launch(gpu60, row_values_nodiv, tables, V)
    # exact: face_terms gets the same numbers in the same order either way
    for name, a, b in zip(("vals", "mass", "flags", "counter"), branchy, nodiv):
        assert np.array_equal(a, b), name
    assert not np.isnan(branchy[0]).any() and (branchy[2] >= 0).all()  # every element written
    assert branchy[3][2] == branchy[2].sum() and branchy[3][0] == branchy[3][1] == 0  # the counter's total
    if case == "awkward":
        assert branchy[3][2] > 0  # degenerate faces and isolated vertices were counted


def test_the_variant_routes_assembly_through_nodiv(gpu60, monkeypatch):
    """The setting picks the launch (a spy on the backend's launches), with the same results."""
    V, F = awkward_cohort(0, 3)
    topo = lap.MeshTopology(F, V.shape[1])
    launched = []
    real = gpu60.launch_kernel
    monkeypatch.setattr(gpu60, "launch_kernel", lambda k, *a, **kw: (launched.append(k.name), real(k, *a, **kw))[1])
    results = {}
    for name in ("branchy", "nodiv"):
        launched.clear()
        with use_variants(row_values=name), pytest.warns(lap.DegenerateMeshWarning) as caught:
            results[name] = topo.assemble_batch(V, gpu60) + (sorted(str(w.message) for w in caught),)
        # the cohort pipeline may cut it into chunks: one launch each, all of the chosen kernel
        assert launched and set(launched) == {{"branchy": "row_values", "nodiv": "row_values_nodiv"}[name]}, launched
    for a, b in zip(results["branchy"], results["nodiv"]):
        assert np.array_equal(a, b) if isinstance(a, np.ndarray) else a == b
    launched.clear()
    with use_variants(row_values="nodiv"):  # the atomic variant has no row kernel to swap
        assemble_values(gpu60, topo._tables(gpu60, "atomic"), gpu60.to_device(V), "atomic").counts()
    assert launched == ["face_values_atomic", "finish_mass"]
