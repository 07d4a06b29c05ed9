"""The fused flag count, the device working sets and the cohort pipeline, on the CPU.

The fused kernels must give the values, masses and flags of the kernels they replace
(tests/laplacian/assembly_reference.py) bit for bit, and their counter the flags' sum:
the warnings read it. The simulator layer checks the CUDA side
(tests/simulator/test_assembly_sim.py).
"""

from __future__ import annotations

import numba
import numpy as np
import pytest
from tests.laplacian.assembly_reference import assemble_before, awkward_cohort

import kernelrt
from kernelrt.kernels import laplacian as lap
from kernelrt.kernels.laplacian.assembly import ISOLATED, assemble_values
from kernelrt.kernels.laplacian.batching import MIN_CHUNK_BYTES, PIPELINE_CHUNKS, pipeline_chunk
from kernelrt.kernels.laplacian.buffers import DeviceBufferPool


@pytest.fixture(scope="module")
def cpu():
    return kernelrt.get_backend("cpu")


# the CPU twins run rows in parallel for few subjects, subjects in parallel for many
SUBJECT_PARALLEL = 4 * numba.config.NUMBA_NUM_THREADS


@pytest.mark.parametrize("variant", ["deterministic", "atomic"])
@pytest.mark.parametrize("level, n_subjects", [(1, 1), (1, 3), (0, SUBJECT_PARALLEL)])
def test_fused_count_gives_the_same_bits(cpu, variant, level, n_subjects):
    V, F = awkward_cohort(level, max(n_subjects, 2))
    V = V[:n_subjects]
    topo = lap.MeshTopology(F, V.shape[1])
    tables = topo._tables(cpu, variant)
    done = assemble_values(cpu, tables, np.ascontiguousarray(V), variant)
    vals, mass, flags = assemble_before(cpu, tables, np.ascontiguousarray(V), variant)
    # exact: the same arithmetic in the same order (numba compiles both without fastmath)
    np.testing.assert_array_equal(done.vals, vals)
    np.testing.assert_array_equal(done.mass, mass)
    np.testing.assert_array_equal(done.flags, flags)
    total = int(flags.sum())
    assert done.counts() == (total % ISOLATED, total // ISOLATED)
    n_bad, n_iso = done.counts()
    assert n_iso >= 1 and n_bad >= n_subjects  # the fixture has both kinds


def test_counts_reach_the_warnings(cpu):
    V, F = awkward_cohort(1, 3)
    topo = lap.MeshTopology(F, V.shape[1])
    with pytest.warns(lap.DegenerateMeshWarning) as caught:
        topo.assemble_batch(V, cpu)
    messages = sorted(str(w.message) for w in caught)
    N, n_faces = V.shape[1], topo.n_faces
    # subject 1 is a point: every face dropped, every vertex isolated; subjects 0 and 2 drop
    # the collinear face, and lose its midpoint vertex and the vertex in no face
    assert messages[0].startswith(f"{N + 4} vertex(es) (summed over 3 subjects)")
    assert messages[1].startswith(f"dropped {n_faces + 2} degenerate face(s) of {3 * n_faces}")


def test_unpacking_keeps_the_earlier_four_values(cpu):
    V, F = lap.icosphere(1)
    topo = lap.MeshTopology(F, len(V))
    vals, mass, n_bad, n_iso = assemble_values(cpu, topo._tables(cpu, "deterministic"), V[None].copy())
    assert (n_bad, n_iso) == (0, 0) and vals.shape == (1, topo.nnz) and mass.shape == (1, len(V))


def test_pipeline_chunk():
    per = 1 << 20
    assert pipeline_chunk(1, 100, per) == (1, 1)
    assert pipeline_chunk(10, 1, per) == (1, 1)  # only one subject fits: no second set
    assert pipeline_chunk(10, 3, per) == (1, 2)  # two chunks in flight must fit
    small = MIN_CHUNK_BYTES // per
    assert pipeline_chunk(10, 1000, per) == (10, 1)  # small subjects: one chunk, no pipeline
    many = 4 * PIPELINE_CHUNKS * small
    assert pipeline_chunk(many, 10**9, per) == (many // PIPELINE_CHUNKS, 2)


class _Backend:  # what DeviceBufferPool asks of a backend
    name, device_id = "fake", 0

    def allocate(self, shape, dtype):
        return np.empty(shape, dtype)

    def stream(self):
        return object()


def test_device_pool_reuses_given_back_sets_only():
    pool, be = DeviceBufferPool(max_bytes=1 << 20), _Backend()
    counter = lambda b: np.zeros(3, np.int64)  # noqa: E731
    a = pool.take(be, 2, 10, 40, True, counter)
    b = pool.take(be, 2, 10, 40, True, counter)
    assert a is not b and a.vals.shape == (2, 40) and a.verts.shape == (2, 10, 3)
    pool.give(a)
    assert pool.take(be, 2, 10, 40, True, counter) is a  # reused once given back
    assert pool.take(be, 2, 10, 40, False, counter).vals is None  # device results: no pooled outputs
    big = DeviceBufferPool(max_bytes=0)
    c = big.take(be, 2, 10, 40, True, counter)
    big.give(c)
    assert big.take(be, 2, 10, 40, True, counter) is not c  # over max_bytes: dropped
