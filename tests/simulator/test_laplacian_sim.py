"""Laplacian CUDA kernels under Numba's CUDA simulator, on meshes of <= 163 vertices.

The simulator runs each thread in Python, so these use the golden edge-case meshes
(icosphere level 2 and variants) and level-1/2 spheres. They cover the CUDA paths the
CPU layer cannot: the per-row kernel as a CUDA kernel, the fp64-atomic per-face kernel
(needs a simulated cc >= 6.0), the shared-memory flag reduction, device-resident
results, products and heat steps on device arrays, and cohort assembly.
"""

from __future__ import annotations

import numpy as np
import pytest
from tests.support.laplacian_cases import EDGE_CASES, assemble_expecting_warnings, assert_matches_reference, edge_case

import kernelrt
from kernelrt.kernels import laplacian as lap


@pytest.mark.parametrize("name", EDGE_CASES)
def test_edge_cases_deterministic(gpu, name):
    V, F, L_ref, m_ref = edge_case(name)
    L, m = assemble_expecting_warnings(name, lambda: lap.cotan_laplacian(V, F, gpu))
    assert_matches_reference(L, m, L_ref, m_ref)


@pytest.mark.parametrize("name", ["closed", "degenerate_collinear", "nonmanifold_fin", "unreferenced_vertex"])
def test_edge_cases_atomic(gpu60, name):
    V, F, L_ref, m_ref = edge_case(name)
    L, m = assemble_expecting_warnings(name, lambda: lap.cotan_laplacian(V, F, gpu60, variant="atomic"))
    assert_matches_reference(L, m, L_ref, m_ref)


def test_atomic_needs_fp64_atomics(gpu):
    V, F, _, _ = edge_case("closed")
    with pytest.raises(kernelrt.ComputeCapabilityError, match="6.0"):
        lap.cotan_laplacian(V, F, gpu, variant="atomic")


def test_atomic_and_deterministic_agree_and_match_the_cpu(gpu60):
    V, F = lap.noisy_icosphere(2)
    topo = lap.MeshTopology(F, len(V))
    L_cpu, m_cpu = topo.assemble(V, "cpu")
    L_det, m_det = topo.assemble(V, gpu60)
    L_at, m_at = topo.assemble(V, gpu60, variant="atomic")
    # exact: the simulator does IEEE double arithmetic (Python floats: no FMA) in the same
    # order as the CPU kernel, which numba compiles without fastmath
    np.testing.assert_array_equal(L_det.data, L_cpu.data)
    np.testing.assert_array_equal(m_det, m_cpu)
    # the atomic variant sums the diagonal and the mass per face, another order (the simulator
    # runs the atomic adds in a fixed thread order, giving the CPU twin's bits): measured 1.0 and
    # 0.6 eps of the maximum; 1e-14 ≈ 45 eps and 1e-15 ≈ 4.5 eps, as in
    # tests/laplacian/test_oracles.py::test_atomic_and_deterministic_variants_agree
    assert np.abs(L_at.data - L_det.data).max() <= 1e-14 * abs(L_det).max()
    assert np.abs(m_at - m_det).max() <= 1e-15 * m_det.max()


def test_cohort_in_one_launch(gpu):
    V, F = lap.icosphere(1)
    rng = np.random.default_rng(0)
    cohort = np.stack([V + 0.02 * rng.standard_normal(V.shape) for _ in range(3)])
    topo = lap.MeshTopology(F, len(V))
    values, masses = topo.assemble_batch(cohort, gpu)
    ref_values, ref_masses = topo.assemble_batch(cohort, "cpu")
    np.testing.assert_array_equal(values, ref_values)  # exact, as in the test above
    np.testing.assert_array_equal(masses, ref_masses)
    dv, dm = topo.assemble_batch(cohort, gpu, keep_on_device=True)
    assert gpu.is_device_array(dv) and dv.shape == (3, topo.nnz)
    np.testing.assert_array_equal(gpu.to_host(dm), ref_masses)


def test_device_resident_matrix_products_and_heat(gpu):
    V, F, L_ref, m_ref = edge_case("closed")
    L_dev, m_dev = lap.cotan_laplacian(V, F, gpu, keep_on_device=True)
    assert isinstance(L_dev, lap.DeviceCSR) and gpu.is_device_array(m_dev)  # no CuPy here
    op = lap.LaplacianOperator(L_dev, m_dev, backend=gpu)
    L_cpu, m_cpu = lap.cotan_laplacian(V, F, "cpu")
    x = np.random.default_rng(1).standard_normal(len(V))
    X = np.random.default_rng(2).standard_normal((len(V), 5))
    # exact: one sum per row in column order from 0.0, no FMA, like SciPy's (test_laplacian_spmv)
    np.testing.assert_array_equal(op.matvec(x), L_cpu @ x)  # host in, host out
    y_dev = op.matvec(gpu.to_device(x))  # device in, device out
    assert gpu.is_device_array(y_dev)
    np.testing.assert_array_equal(gpu.to_host(y_dev), L_cpu @ x)
    np.testing.assert_array_equal(op.matvec(X), L_cpu @ X)
    tau = 1e-3
    expected = lap.heat_steps(L_cpu, m_cpu, X, tau, 3, backend="cpu")
    np.testing.assert_array_equal(op.heat_steps(X, tau, 3), expected)
    np.testing.assert_array_equal(op.heat_steps(x, tau, 3), lap.heat_steps(L_cpu, m_cpu, x, tau, 3, backend="cpu"))


def test_host_scipy_matrix_on_the_device(gpu):
    V, F = lap.icosphere(1)
    L, m = lap.cotan_laplacian(V, F, "cpu")
    x = np.arange(len(V), dtype=np.float64)
    np.testing.assert_array_equal(lap.laplacian_matvec(L, x, backend=gpu), L @ x)  # exact, as above


def test_eigenpairs_fall_back_to_the_host_without_cupy(gpu):
    V, F = lap.icosphere(2)
    L, m = lap.cotan_laplacian(V, F, "cpu")
    ev, vec = lap.eigenpairs(L, m, 9, backend=gpu)
    ref, _ = lap.eigenpairs(L, m, 9, backend="cpu")
    # the fallback is the very same host eigsh call (same fixed start vector, same process), so in
    # fact equal; 1e-12 absolute is the golden eigenvalue tolerance (docs/laplacian.md ("Accuracy
    # and oracles")), which any correct host route would meet
    np.testing.assert_allclose(ev, ref, rtol=0, atol=1e-12)


def test_device_resident_vertices(gpu):
    V, F = lap.noisy_icosphere(1)
    topo = lap.MeshTopology(F, len(V))
    L_ref, m_ref = topo.assemble(V, "cpu")
    L, m = topo.assemble(gpu.to_device(V), gpu)  # device in, host out
    np.testing.assert_array_equal(L.data, L_ref.data)  # exact: the CPU kernel's arithmetic and order
    L_dev, m_dev = topo.assemble(gpu.to_device(V), gpu, keep_on_device=True)  # device in, device out
    np.testing.assert_array_equal(gpu.to_host(L_dev.data), L_ref.data)
    np.testing.assert_array_equal(gpu.to_host(L_dev.indices), L_ref.indices)  # signed int32 again
    assert L_dev.indices.dtype == np.int32
    values, masses = topo.assemble_batch(gpu.to_device(np.stack([V, 2 * V])), gpu)
    # exact: doubling V scales every difference by 2 and every area by 4 (powers of two,
    # sqrt(16 x) = 4 sqrt(x)), so nothing rounds differently
    np.testing.assert_array_equal(masses[1], 4 * m_ref)
    with pytest.raises(TypeError, match="vertices on the device must be float64"):
        topo.assemble(gpu.to_device(V.astype(np.float32)), gpu)
    with pytest.raises(ValueError, match=r"vertices must have shape \(42, 3\)"):
        topo.assemble(gpu.to_device(V[:-1]), gpu)


def test_cotan_laplacian_takes_device_vertices(gpu):
    V, F = lap.icosphere(1)
    L, m = lap.cotan_laplacian(gpu.to_device(V), F, gpu)
    L_ref, m_ref = lap.cotan_laplacian(V, F, "cpu")
    np.testing.assert_array_equal(L.data, L_ref.data)  # exact, as above
    np.testing.assert_array_equal(m, m_ref)
