"""The fused flag count and the two-stream cohort pipeline under the CUDA simulator.

The CUDA kernels (block sums in shared memory, ``syncthreads_or``, one atomic per block,
the last block moving the total and zeroing the counter) against the kernels they
replace, bit for bit, on meshes with degenerate faces and isolated vertices; and cohorts
cut into several chunks against one launch. The simulator runs threads in Python: tiny
meshes only.
"""

from __future__ import annotations

import numpy as np
import pytest
from tests.laplacian.assembly_reference import assemble_before, awkward_cohort

import kernelrt
from kernelrt.kernels import laplacian as lap
from kernelrt.kernels.laplacian import batching
from kernelrt.kernels.laplacian.assembly import ISOLATED, assemble_values, new_counter
from kernelrt.kernels.laplacian.buffers import DeviceBufferPool


@pytest.mark.parametrize("variant", ["deterministic", "atomic"])
def test_fused_count_gives_the_same_bits(gpu60, variant):
    V, F = awkward_cohort(0, 3)  # 14 vertices, 3 subjects: 3 blocks count into one counter
    topo = lap.MeshTopology(F, V.shape[1])
    tables = topo._tables(gpu60, variant)
    Vd = gpu60.to_device(V)
    vals, mass, flags = assemble_before(gpu60, tables, Vd, variant)
    scratch = DeviceBufferPool().take(gpu60, 3, V.shape[1], topo.nnz, False, new_counter)
    for _ in range(2):  # the counter the first launch leaves serves the second
        done = assemble_values(gpu60, tables, Vd, variant, scratch=scratch)
        # exact: the simulator does IEEE double arithmetic in the kernels' order, and the
        # face kernel's atomic adds in a fixed thread order
        np.testing.assert_array_equal(gpu60.to_host(done.vals), vals)
        np.testing.assert_array_equal(gpu60.to_host(done.mass), mass)
        np.testing.assert_array_equal(gpu60.to_host(done.flags), flags)
        total = int(flags.sum())
        np.testing.assert_array_equal(gpu60.to_host(done.count), [0, 0, total])  # words 0, 1 zeroed again
        assert done.counts() == (total % ISOLATED, total // ISOLATED)
    assert done.counts()[1] >= V.shape[1]  # the collapsed subject: every vertex isolated


def _force_chunks(gpu, monkeypatch, topo, n_subjects):
    """Free memory for ``n_subjects`` subjects, so fit_batch cuts the cohort."""
    per = batching.bytes_per_subject(topo.n_vertices, topo.nnz)
    monkeypatch.setattr(gpu, "get_memory_info", lambda: (int(n_subjects * per / 0.7) + 1, 1 << 40))


@pytest.mark.parametrize("fit, expected", [(3, (1, 2)), (1, (1, 1))])
def test_cohort_in_chunks_matches_one_launch(gpu, monkeypatch, fit, expected):
    V, F = awkward_cohort(0, 5)
    topo = lap.MeshTopology(F, V.shape[1])
    with pytest.warns(lap.DegenerateMeshWarning) as whole:
        ref_vals, ref_mass = topo.assemble_batch(gpu.to_device(V), gpu)  # device in: one launch
    _force_chunks(gpu, monkeypatch, topo, fit)
    per = batching.bytes_per_subject(topo.n_vertices, topo.nnz)
    assert batching.pipeline_chunk(5, fit, per) == expected  # 5 chunks, over two streams or one
    for _ in range(2):  # the second call reuses the topology's working sets
        with pytest.warns(lap.DegenerateMeshWarning) as chunked:
            vals, mass = topo.assemble_batch(V, gpu)
        np.testing.assert_array_equal(vals, ref_vals)  # exact: the same kernel on the same rows
        np.testing.assert_array_equal(mass, ref_mass)
        assert sorted(map(str, (w.message for w in chunked))) == sorted(map(str, (w.message for w in whole)))
    with pytest.warns(lap.DegenerateMeshWarning):
        cpu_vals, cpu_mass = topo.assemble_batch(V, "cpu")
    np.testing.assert_array_equal(vals, cpu_vals)  # exact, as in test_laplacian_sim.py
    np.testing.assert_array_equal(mass, cpu_mass)


def test_keep_on_device_reports_and_returns_new_arrays(gpu):
    V, F = awkward_cohort(0, 2)
    topo = lap.MeshTopology(F, V.shape[1])
    with pytest.warns(lap.DegenerateMeshWarning) as caught:
        first, _ = topo.assemble_batch(V, gpu, keep_on_device=True)
    assert len(caught) == 2  # degenerate faces and isolated vertices
    kept = gpu.to_host(first).copy()
    with pytest.warns(lap.DegenerateMeshWarning):
        second, _ = topo.assemble_batch(2 * V, gpu, keep_on_device=True)
    np.testing.assert_array_equal(gpu.to_host(first), kept)  # not overwritten by the next call
    assert second is not first
