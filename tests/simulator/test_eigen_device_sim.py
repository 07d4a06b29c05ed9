"""The Chebyshev route's device-side pieces under Numba's CUDA simulator (no CuPy).

Covers what the CPU layer cannot: the start-block kernel as a CUDA kernel (bitwise the CPU
backend's block), ``keep_on_device`` returning a device array, the residual report with its
product on the device, and HKS/WKS reading device eigenvectors. The CuPy forms (dense algebra
on the device) need a real GPU.
"""

from __future__ import annotations

import numpy as np
import pytest

import kernelrt
from kernelrt.kernels import laplacian as lap
from kernelrt.kernels.laplacian import subspace
from kernelrt.kernels.laplacian.eigen_report import report
from kernelrt.kernels.laplacian.reference import reference_laplacian


@pytest.fixture(scope="module")
def sphere():
    return reference_laplacian(*lap.icosphere(2))  # NumPy: spares compiling the assembly


def test_start_block_is_bitwise_the_cpu_block(gpu):
    dev = gpu.allocate((23, 6), np.float64)
    subspace.start_block(gpu, dev, col0=3)
    host = np.empty((23, 6))
    subspace.start_block(kernelrt.get_backend("cpu"), host, col0=3)
    # the simulator runs the kernel on Python integers, the CPU backend on int64: every
    # intermediate is below 2⁴⁹ and the scaling is by a power of two, so the same bits
    np.testing.assert_array_equal(gpu.to_host(dev), host)


def test_keep_on_device_and_the_device_report(gpu, sphere):
    L, m = sphere
    kept = lap.eigenpairs(L, m, 9, backend=gpu, method="chebyshev", keep_on_device=True)
    assert gpu.is_device_array(kept.evecs) and kept.evecs.shape == (L.shape[0], 9)
    plain = lap.eigenpairs(L, m, 9, backend=gpu, method="chebyshev")
    assert isinstance(plain.evecs, np.ndarray)
    vec = gpu.to_host(kept.evecs)
    np.testing.assert_array_equal(vec, plain.evecs)  # the same solve, one upload apart
    np.testing.assert_array_equal(kept.evals, plain.evals)
    # the device form (csr_matmat on the simulated device, the rest on the host) against the host
    # form (SciPy's product): the same sums in the same order, so equal in fact; 1e-12 relative
    # leaves room for the norms' BLAS order (the residuals are ~1e-12..1e-10)
    ref_res, ref_orth = report(L, m, kept.evals, vec)
    np.testing.assert_allclose(kept.residuals, ref_res, rtol=1e-12, atol=0)
    assert abs(kept.m_orthonormality - ref_orth) <= 1e-15
    assert kept.residuals.max() < 1e-9 and set(kept.phases) >= {"start", "filter", "qr", "eigh", "report"}


def test_host_routes_upload_when_kept(gpu, sphere):
    L, m = sphere
    kept = lap.eigenpairs(L, m, 9, backend=gpu, keep_on_device=True, method="cholesky")
    assert kept.method == "cholesky" and gpu.is_device_array(kept.evecs) and "factor" in kept.phases
    dense = lap.eigenpairs(L, m, 9, backend=gpu, keep_on_device=True)  # auto without CuPy, 162 vertices: dense
    assert dense.method == "dense" and gpu.is_device_array(dense.evecs)


def test_hks_and_wks_read_device_eigenvectors(gpu, sphere):
    L, m = sphere
    kept = lap.eigenpairs(L, m, 9, backend=gpu, method="chebyshev", keep_on_device=True)
    vec = gpu.to_host(kept.evecs)
    # without CuPy the device array is copied once, then the same NumPy expressions: equal
    np.testing.assert_array_equal(lap.hks(kept, backend=gpu, n_times=5), lap.hks(kept.evals, vec, n_times=5))
    np.testing.assert_array_equal(lap.wks(kept, backend=gpu, n_energies=5), lap.wks(kept.evals, vec, n_energies=5))
    # unsorted eigenvalues: the non-null columns are not one slice
    order = np.array([3, 0, 1, 2, 4, 5, 6, 7, 8])
    shuffled = gpu.to_device(np.ascontiguousarray(vec[:, order]))
    np.testing.assert_array_equal(lap.wks(kept.evals[order], shuffled, backend=gpu, n_energies=5),
                                  lap.wks(kept.evals[order], vec[:, order], n_energies=5))


def test_a_small_mesh_on_a_gpu_without_cupy_takes_the_dense_route(gpu, caplog):
    # without CuPy the GPU routes are out; a 42-vertex mesh is too small for the Cholesky route's
    # Krylov basis (it raised before), so "auto" picks the CPU's own choice: dense below 2,000
    L, m = reference_laplacian(*lap.icosphere(1))
    result = lap.eigenpairs(L, m, k=8, backend=gpu)
    assert result.method == "dense"
    assert "CuPy is not installed" in caplog.text
    ref = lap.eigenpairs(L, m, k=8, backend="cpu")
    # both dense LAPACK solves of the same matrix: eigenvalues agree to rounding (|λ| <= ~10 here)
    assert np.allclose(result.evals, ref.evals, rtol=0, atol=1e-12)
