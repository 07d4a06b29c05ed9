"""Laplacian kernels on a real CUDA GPU (skipped without one; fixture ``gpu`` from conftest).

Correctness at full size against the golden files and the CPU backend; timings are
printed (``-s``), never asserted.
"""

from __future__ import annotations

import importlib.util
import time

import numpy as np
import pytest
from tests.support.laplacian_cases import (EDGE_CASES, assemble_expecting_warnings, assert_matches_reference,
                                           blas_threads_during_eigh, edge_case, golden_L, load_golden)

from kernelrt.kernels import laplacian as lap

HAVE_CUPY = importlib.util.find_spec("cupy") is not None


@pytest.mark.parametrize("variant", ["deterministic", "atomic"])
@pytest.mark.parametrize("name", ["ico4", "noisy_ico4"])
def test_golden(gpu, name, variant):
    g = load_golden(name)
    L, m = lap.cotan_laplacian(g["V"], g["F"], gpu, variant=variant)
    assert_matches_reference(L, m, golden_L(g), g["m"])


@pytest.mark.parametrize("variant", ["deterministic", "atomic"])
@pytest.mark.parametrize("name", EDGE_CASES)
def test_edge_cases(gpu, name, variant):
    V, F, L_ref, m_ref = edge_case(name)
    L, m = assemble_expecting_warnings(name, lambda: lap.cotan_laplacian(V, F, gpu, variant=variant))
    assert_matches_reference(L, m, L_ref, m_ref)


def test_deterministic_is_bitwise_reproducible_and_symmetric(gpu):
    V, F = lap.noisy_icosphere(6)
    topo = lap.MeshTopology(F, len(V))
    L1, m1 = topo.assemble(V, gpu)
    L2, m2 = topo.assemble(V, gpu)
    # exact: one thread per row, no atomics, a fixed order; both ends of an edge run one expression
    np.testing.assert_array_equal(L1.data, L2.data)
    np.testing.assert_array_equal(m1, m2)
    assert (L1 != L1.T).nnz == 0
    L_cpu, m_cpu = topo.assemble(V, "cpu")
    # the GPU (CUDA) contracts multiply-adds into FMA by default, the CPU build does not: the
    # dot and cross products of each cotangent round differently, amplified where they cancel
    # (thin triangles of the noisy mesh), then summed over a row. docs/laplacian.md ("Assembly:
    # topology once, values many times") allows 1e-13·max|L| on a noisy ico6; a mass is (d/2)/3
    # summed over ~6 faces, d a cross-product norm: 1e-14 ≈ 45 eps of max m
    assert np.abs(L1.data - L_cpu.data).max() <= 1e-13 * abs(L_cpu).max()
    assert np.abs(m1 - m_cpu).max() <= 1e-14 * m_cpu.max()


@pytest.mark.parametrize("variant", ["deterministic", "atomic"])
def test_655362_vertices_match_the_cpu(gpu, variant):
    """ico8 with noise: the same pattern as the CPU, every entry within 1e-12 of max|L|."""
    V, F = lap.noisy_icosphere(8)
    assert len(V) == 655_362
    topo = lap.MeshTopology(F, len(V))
    L, m = topo.assemble(V, gpu, variant=variant)
    L_cpu, m_cpu = topo.assemble(V, "cpu")
    np.testing.assert_array_equal(L.indptr, L_cpu.indptr)
    np.testing.assert_array_equal(L.indices, L_cpu.indices)
    # FMA contraction on the GPU (and, for "atomic", fp64 atomics in a run-dependent order) against
    # the CPU's deterministic variant, on 1.3 M faces whose worst-shaped ones amplify the
    # contraction's rounding most: the golden 1e-12 (docs/laplacian.md ("Assembly: topology once,
    # values many times") states it for this mesh)
    assert np.abs(L.data - L_cpu.data).max() <= 1e-12 * np.abs(L_cpu.data).max()
    assert np.abs(m - m_cpu).max() <= 1e-12 * m_cpu.max()


def test_fsaverage_cohort(gpu):
    """100 subjects x 163,842 vertices (ico7), one launch per fitting chunk; kept on the device."""
    V, F = lap.icosphere(7)
    topo = lap.MeshTopology(F, len(V))
    rng = np.random.default_rng(0)
    cohort = V[None] * (1.0 + 0.05 * rng.standard_normal((100, 1, 1)))
    cohort += 0.001 * rng.standard_normal(cohort.shape)
    Vd = gpu.to_device(cohort)
    tables = topo._tables(gpu, "deterministic")
    from kernelrt.kernels.laplacian.assembly import assemble_values

    assemble_values(gpu, tables, Vd)  # compile or load
    gpu.synchronize()
    t0 = time.perf_counter()
    vals, mass, _, _ = assemble_values(gpu, tables, Vd)
    gpu.synchronize()
    seconds = time.perf_counter() - t0
    print(f"\nico7 x 100 subjects, device-resident vertices: {seconds * 1e3:.2f} ms")
    L0, m0 = topo.assemble(cohort[0], "cpu")
    # GPU FMA contraction against the CPU, as in test_deterministic_is_bitwise_reproducible_and_symmetric:
    # 1e-13·max|L| for L, and 1e-14 relative for masses, which are sums of ~6 positive terms
    np.testing.assert_allclose(gpu.to_host(vals)[0], L0.data, rtol=0, atol=1e-13 * abs(L0).max())
    np.testing.assert_allclose(gpu.to_host(mass)[0], m0, rtol=1e-14)


def test_products_and_heat(gpu):
    V, F = lap.icosphere(6)
    L, m = lap.cotan_laplacian(V, F, "cpu")
    op = lap.LaplacianOperator(L, m, backend=gpu)
    x = np.random.default_rng(1).standard_normal(len(V))
    X = np.random.default_rng(2).standard_normal((len(V), 50))
    # the same row order as SciPy, but the GPU contracts acc + L_ij x_j into an FMA (one rounding
    # per term instead of two): a few ulp of Σ|L_ij x_j| per row. Rows sum to ~0, so y can be far
    # smaller than its terms: 1e-13 relative plus 1e-12 absolute (terms are O(10) on ico6)
    np.testing.assert_allclose(op.matvec(x), L @ x, rtol=1e-13, atol=1e-12)
    np.testing.assert_allclose(op.matvec(X), L @ X, rtol=1e-13, atol=1e-12)
    ref = lap.heat_steps(L, m, x, 1e-5, 20, backend="cpu")
    # 20 such products, each step also fusing u - τ·(acc/m): the per-step differences add up
    np.testing.assert_allclose(op.heat_steps(x, 1e-5, 20), ref, rtol=1e-12, atol=1e-12)


@pytest.mark.skipif(not HAVE_CUPY, reason="the dense eigen route and cupyx output need CuPy")
def test_cupy_routes(gpu):
    import cupyx.scipy.sparse as csp

    g = load_golden("ico4")
    L_dev, m_dev = lap.cotan_laplacian(g["V"], g["F"], gpu, keep_on_device=True)
    assert isinstance(L_dev, csp.csr_matrix)
    evals, evecs = lap.eigenpairs(L_dev, m_dev, 64, backend=gpu)  # dense standardised, CuPy eigh
    # cuSOLVER's dense eigh against SpectralBrain's ARPACK solve: the golden eigenvalue tolerance
    # (docs/laplacian.md ("Accuracy and oracles")); the routes agree to <= 5e-13 (its "Eigenpairs")
    assert np.abs(evals - g["evals"]).max() <= 1e-12 * g["evals"].max()
    k = int(g["hks_k"])
    H = lap.hks(g["evals"][:k], g["evecs"][:, :k], g["hks_t"], backend=gpu)
    W = lap.wks(g["evals"][:k], g["evecs"][:, :k], g["wks_e"], sigma=float(g["wks_sigma"]), backend=gpu)
    # the GEMM in cuBLAS (its own summation order and FMA) and CuPy's exp: to rounding, within the
    # golden descriptors' 1e-12 (docs/laplacian.md ("Descriptor parity"))
    assert np.abs(H - g["hks"]).max() <= 1e-12 * np.abs(g["hks"]).max()
    assert np.abs(W - g["wks"]).max() <= 1e-12 * np.abs(g["wks"]).max()


@pytest.mark.skipif(not HAVE_CUPY, reason="the Chebyshev route keeps its dense steps on the device with CuPy")
@pytest.mark.parametrize("level", [5, 7])
def test_chebyshev_route_on_the_device(gpu, level):
    """The sparse GPU eigensolver against the CPU Cholesky route (what "auto" picks beyond N = 20,000)."""
    V, F = lap.noisy_icosphere(level, 0.1)
    L, m = lap.cotan_laplacian(V, F, "cpu")
    ref = lap.eigenpairs(L, m, 100, backend="cpu")
    t0 = time.perf_counter()
    result = lap.eigenpairs(L, m, 100, backend=gpu, method="chebyshev" if level == 5 else "auto")
    seconds = time.perf_counter() - t0
    assert result.method == "chebyshev"
    nz = ref.evals > 1e-10
    # both converge to rounding-level residuals (1e-10 on the standardised operator here, ~1e-11
    # for the Cholesky route), so the eigenvalues agree far inside the 1e-10 relative bar
    assert np.max(np.abs(result.evals[nz] - ref.evals[nz]) / ref.evals[nz]) <= 1e-9
    # its tolerance is relative to θ_k for every pair, so the small λ carry up to
    # tol · λ_k / λ_1 · √(m_max / m_min) ≈ 1e-10 · 45 · 1.3 relative residual
    assert result.m_orthonormality < 1e-10 and result.residuals.max() < 1e-7
    print(f"chebyshev k=100 at {L.shape[0]} vertices: {seconds:.2f} s, {result.products} products")


@pytest.mark.skipif(not HAVE_CUPY, reason="the Chebyshev route keeps its dense steps on the device with CuPy")
def test_chebyshev_route_keeps_host_blas_to_one_thread(gpu, monkeypatch):
    """The 2026-11-26 sitting: with OpenBLAS's default pool the projected eigh took 7.1 s of 17.4 s
    at 655,362 vertices (40-130 ms a 120 x 120 call, 1 ms alone); one thread took it to 0.14 s."""
    V, F = lap.noisy_icosphere(4, 0.1)
    L, m = lap.cotan_laplacian(V, F, "cpu")
    seen = blas_threads_during_eigh(monkeypatch)
    lap.eigenpairs(L, m, 20, backend=gpu, method="chebyshev")
    assert seen and set(seen) == {1}
