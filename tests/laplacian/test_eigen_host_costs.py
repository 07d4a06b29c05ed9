"""The Chebyshev route's host-side costs, fixed: a seeded start block drawn by a kernel, CholeskyQR2
with its fallback, the residual report where the vectors are, results kept for HKS/WKS, phase times.
"""

import numpy as np
import pytest

import kernelrt
from kernelrt.kernels import laplacian as lap
from kernelrt.kernels.laplacian import subspace
from kernelrt.kernels.laplacian.chebyshev import chebyshev_eigenpairs, chebyshev_kernels
from kernelrt.kernels.laplacian.eigen_report import device_report, report
from kernelrt.kernels.laplacian.spmv import LaplacianOperator
from tests.support.laplacian_cases import blas_threads_during_eigh


def _mix(x):  # Wellons' lowbias32, in plain Python integers
    for shift, mult in ((16, 0x7FEB352D), (15, 0x846CA68B)):
        x = ((x ^ (x >> shift)) * mult) & 0xFFFFFFFF
    return x ^ (x >> 16)


def _reference_block(n, w, col0=0, seed=subspace.START_SEED):
    """The start block from its definition: a 64-bit counter hashed, mapped to (-1, 1)."""
    key, out = _mix(seed), np.empty((n, w))
    for r in range(n):
        for q in range(w):
            c = (col0 + q) * n + r
            out[r, q] = (_mix(_mix((c & 0xFFFFFFFF) ^ key) ^ (c >> 32)) - 2**31 + 0.5) * 2.0**-31
    return out


@pytest.fixture(scope="module")
def noisy():
    return lap.cotan_laplacian(*lap.noisy_icosphere(3, 0.1), backend="cpu")


def test_start_block_is_the_hash_bit_for_bit():
    be = kernelrt.get_backend("cpu")
    out = np.empty((53, 7))
    subspace.start_block(be, out, col0=5)
    np.testing.assert_array_equal(out, _reference_block(53, 7, col0=5))  # integers, then one exact scaling
    # a grown block's columns continue the same stream: columns 5.. of a wider block
    wide = np.empty((53, 12))
    subspace.start_block(be, wide)
    np.testing.assert_array_equal(wide[:, 5:], out)
    assert 4.656612873077393e-10 == 2.0**-31  # the kernel's literal


def test_start_block_is_a_good_random_block():
    be = kernelrt.get_backend("cpu")
    out = np.empty((4000, 60))
    subspace.start_block(be, out)
    assert -1 < out.min() and out.max() < 1
    # uniform on (-1, 1): mean 0 and std 1/√3, to ~4 standard errors of 240,000 draws
    assert abs(out.mean()) < 4 * 0.58 / np.sqrt(out.size) and abs(out.std() - 1 / np.sqrt(3)) < 2e-3
    assert np.linalg.cond(out) < 2.0  # a tall random block is well conditioned (measured 1.3)
    assert len(np.unique(out)) > 0.999 * out.size
    assert (subspace.random_fill, "int64, int64, float64[:, ::1]") in chebyshev_kernels()  # warmed by the cache


def test_cholesky_qr2_matches_householder():
    rng = np.random.default_rng(3)
    # columns with gains 1e-8 .. 1 (a filtered block's spread) around a well-conditioned core
    f = rng.standard_normal((3000, 40)) * np.logspace(-8, 0, 40) + 1e-3 * rng.standard_normal((3000, 40))
    q, how = subspace.orthonormalize(f, np, np.asarray)
    assert how == "cholesky"
    assert np.abs(q.T @ q - np.eye(40)).max() < 1e-14  # O(u) after round two
    qh = np.linalg.qr(f)[0]
    # the same subspace: the singular values of Qᵀ Q_h are cosines of principal angles, all 1
    np.testing.assert_allclose(np.linalg.svd(q.T @ qh, compute_uv=False), 1.0, rtol=0, atol=1e-12)


@pytest.mark.parametrize("case", ["dependent", "ill_conditioned", "nan"])
def test_cholesky_qr2_falls_back_to_householder(case):
    rng = np.random.default_rng(4)
    f = rng.standard_normal((500, 10))
    if case == "dependent":
        f[:, 3] = f[:, 1] + f[:, 2]  # exactly dependent: G is singular
    elif case == "ill_conditioned":
        f[:, 3] = f[:, 1] + 1e-11 * f[:, 2]  # κ ~ 1e11 after scaling: round one cannot be trusted
    else:
        f[7, 2] = np.nan
    q, how = subspace.orthonormalize(f, np, np.asarray)
    assert how == "householder" and q.shape == f.shape
    if case == "ill_conditioned":
        assert np.abs(q.T @ q - np.eye(10)).max() < 1e-14


def test_solve_uses_cholesky_qr_and_reports_phases(noisy):
    L, m = noisy
    _, _, info = chebyshev_eigenpairs(L, m, 16, backend="cpu")
    assert info["qr"]["cholesky"] + info["qr"]["householder"] == info["iterations"] + 1  # one per RR
    assert info["qr"]["cholesky"] >= info["qr"]["householder"]
    assert set(info["phases"]) == {"setup", "start", "filter", "qr", "rayleigh_ritz", "eigh"}
    assert all(v >= 0 for v in info["phases"].values()) and info["phases"]["filter"] > 0


def test_projected_eigh_runs_on_one_blas_thread(noisy, monkeypatch):
    """The b x b problems stay single-threaded (the GPU layer checks the CuPy route the same way)."""
    from threadpoolctl import threadpool_limits

    seen = blas_threads_during_eigh(monkeypatch)
    with threadpool_limits(limits=2, user_api="blas"):  # a pool of 2 outside, whatever the machine
        chebyshev_eigenpairs(*noisy, 16, backend="cpu")
    assert seen and set(seen) == {1}


def test_v0_wins_over_the_start_block(noisy):
    L, m = noisy
    ev, vec, _ = chebyshev_eigenpairs(L, m, 12, backend="cpu")
    # the converged vectors as v0: the first Rayleigh–Ritz already has them (up to rounding)
    ev2, _, info = chebyshev_eigenpairs(L, m, 12, backend="cpu", v0=vec)
    assert info["iterations"] <= 1
    np.testing.assert_allclose(ev2, ev, rtol=1e-9, atol=1e-9 * ev[1])


def test_device_report_equals_the_host_report(noisy):
    L, m = noisy
    result = lap.eigenpairs(L, m, 16, backend="cpu", method="chebyshev")
    op = LaplacianOperator(L, backend="cpu")  # kernelrt's csr_matmat instead of SciPy's product
    res, orth = device_report(op.matmat, m, result.evals, result.evecs, np, np.asarray)
    ref_res, ref_orth = report(L, m, result.evals, result.evecs)
    # csr_matmat sums each row in stored order from 0.0 as SciPy does (tests/laplacian/test_spmv.py),
    # and the rest is the same expressions: equal in fact. 1e-12 relative leaves room for a BLAS
    # that reduces the norms in another order (the residuals themselves are ~1e-11)
    np.testing.assert_allclose(res, ref_res, rtol=1e-12, atol=0)
    assert abs(orth - ref_orth) <= 1e-15 and orth == result.m_orthonormality
    np.testing.assert_array_equal(ref_res, result.residuals)


def test_keep_on_device_on_the_cpu_backend_is_numpy_and_feeds_hks(noisy):
    L, m = noisy
    result = lap.eigenpairs(L, m, 12, backend="cpu", method="chebyshev", keep_on_device=True)
    assert isinstance(result.evecs, np.ndarray)
    assert set(result.phases) >= {"start", "filter", "qr", "eigh", "report"}
    np.testing.assert_array_equal(lap.hks(result, backend="cpu"), lap.hks(result.evals, result.evecs.copy()))
    chol = lap.eigenpairs(L, m, 12, backend="cpu", method="cholesky")
    assert set(chol.phases) == {"factor", "solve", "orthogonalise", "rayleigh_ritz", "report"}
    assert all(v >= 0 for v in chol.phases.values()) and sum(chol.phases.values()) <= chol.seconds
    assert lap.eigenpairs(L, m, 12, backend="cpu", method="dense").phases is None


def test_results_match_the_normal_start(noisy):
    """Eigenvalues and residuals as the former host start (normal draws) reached; subspaces equal."""
    L, m = noisy
    k = 20  # cuts the l = 4 multiplet of the underlying sphere: compare subspaces, not vectors
    ev, vec, _ = chebyshev_eigenpairs(L, m, k, backend="cpu")
    v0 = np.random.default_rng(0).standard_normal((L.shape[0], k + 8))  # the former start block
    ev_n, vec_n, _ = chebyshev_eigenpairs(L, m, k, backend="cpu", v0=v0)
    np.testing.assert_allclose(ev, ev_n, rtol=1e-9, atol=1e-9 * ev[1])  # as test_chebyshev.py
    # principal angles between the M-orthonormal bases (noisy mesh: no exact multiplets)
    cosines = np.linalg.svd(vec.T @ (m[:, None] * vec_n), compute_uv=False)
    assert cosines.min() > 1 - 1e-8
    bound = 1.01 * np.sqrt(m.max() / m.min()) * 1e-10 * ev[-1] / np.maximum(ev, ev[1])
    np.testing.assert_array_less(report(L, m, ev, vec)[0], bound)


def test_keep_on_device_start_can_be_a_device_result(noisy):
    L, m = noisy
    # MeshTopology keeps the last result's vectors as the next start: a device array with
    # keep_on_device on a GPU; here a stand-in with the same protocol (.get())
    vec = lap.eigenpairs(L, m, 8, backend="cpu", method="chebyshev").evecs

    class Device:
        def __init__(self, a):
            self.a = a

        def get(self):
            return self.a

    again = lap.eigenpairs(L, m, 8, backend="cpu", method="chebyshev", start=Device(vec))
    assert again.residuals.max() < 1e-9


def test_the_host_report_makes_no_n_by_k_array():
    """report sums the residuals in place (basis_products.report_sums): L V, M V and the residual
    were three new N x k arrays, the largest part of the report's time at 50,000 vertices."""
    import tracemalloc

    V, F = lap.noisy_icosphere(5, 0.1, seed=2)
    L, m = lap.cotan_laplacian(V, F, backend="cpu")  # 10,242 vertices: the arrays dwarf fixed costs
    result = lap.eigenpairs(L, m, 16, backend="cpu")
    assert result.evecs.flags.c_contiguous  # what eigenpairs hands report
    report(L, m, result.evals, result.evecs)  # compiled before the count
    tracemalloc.start()
    try:
        report(L, m, result.evals, result.evecs)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert peak < result.evecs.nbytes / 4
