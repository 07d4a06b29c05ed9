"""The ``row_values`` variants on the CPU: ``nodiv`` runs ``row_values``' twin, so the same bits.

The simulator layer proves the CUDA kernels equal (tests/simulator/test_assembly_variants_sim.py);
here the setting must reach the CPU backend too and change nothing.
"""

from __future__ import annotations

import numpy as np
import pytest
from tests.laplacian.assembly_reference import awkward_cohort

import kernelrt
from kernelrt.kernels import laplacian as lap
from kernelrt.kernels.laplacian.assembly import ROW_KERNELS, assembly_kernels, row_values
from kernelrt.kernels.laplacian.assembly_nodiv import assembly_variant_kernels, row_values_nodiv
from kernelrt.kernels.variants import use_variants


def test_nodiv_on_the_cpu_gives_the_same_bits(monkeypatch):
    cpu = kernelrt.get_backend("cpu")
    V, F = awkward_cohort(1, 3)
    topo = lap.MeshTopology(F, V.shape[1])
    launched = []
    real = cpu.launch_kernel
    monkeypatch.setattr(cpu, "launch_kernel", lambda k, *a, **kw: (launched.append(k.name), real(k, *a, **kw))[1])
    results = {}
    for name in ("branchy", "nodiv"):
        with use_variants(row_values=name), pytest.warns(lap.DegenerateMeshWarning) as caught:
            results[name] = topo.assemble_batch(V, cpu) + (sorted(str(w.message) for w in caught),)
    assert launched == ["row_values", "row_values_nodiv"]
    vals, mass, messages = results["branchy"]
    np.testing.assert_array_equal(results["nodiv"][0], vals)
    np.testing.assert_array_equal(results["nodiv"][1], mass)
    assert results["nodiv"][2] == messages  # the same counts reached the warnings


def test_the_variant_is_registered_with_row_values_launch_signature():
    assert ROW_KERNELS == {"branchy": row_values, "nodiv": row_values_nodiv}
    assert row_values_nodiv.cpu_twin is row_values.cpu_twin  # no second CPU path to keep equal
    for itype in ("int32", "int64"):
        signatures = [sig for k, sig in assembly_kernels(itype)["cuda"] if k is row_values]
        assert assembly_variant_kernels(itype) == [(row_values_nodiv, signatures[0])]
