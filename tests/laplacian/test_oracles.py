"""Independent oracles: structure, area, the analytic sphere spectrum, heat-step closed form,
variant and batch agreement (CPU backend)."""

import numpy as np
import pytest
import scipy.linalg as sla
from kernelrt.kernels import laplacian as lap
from kernelrt.kernels.laplacian.reference import surface_area


@pytest.fixture(scope="module")
def ico3():
    V, F = lap.icosphere(3)
    L, m = lap.cotan_laplacian(V, F, "cpu")
    return V, F, L, m


@pytest.fixture(scope="module", params=[0.0, 0.1], ids=["ico4", "noisy_ico4"])
def sphere(request):
    V, F = lap.noisy_icosphere(4, request.param) if request.param else lap.icosphere(4)
    L, m = lap.cotan_laplacian(V, F, "cpu")
    return request.param, V, F, L, m


def test_structure(sphere):
    amplitude, V, F, L, m = sphere
    assert (L != L.T).nnz == 0  # bitwise symmetric: both ends of an edge evaluate one expression
    # structural checks of the golden data (tests/data/laplacian/README.md; docs/laplacian.md
    # ("Accuracy and oracles")): a row re-summed cancels to ~7 roundings of max|L| (measured
    # 3.1e-16·max|L|); Σ m and the area sum F = 5120 face areas in different groupings
    # (per-vertex thirds, then NumPy's pairwise sum): ~(6 + log2 F) eps (measured: equal).
    # 1e-13 leaves far more than that; assembly is bit-identical on every x86
    assert np.abs(np.asarray(L.sum(axis=1))).max() <= 1e-13 * abs(L).max()
    assert m.sum() == pytest.approx(surface_area(V, F), rel=1e-13)
    off = L.copy()
    off.setdiag(0)
    if amplitude == 0.0:
        assert off.data.max() <= 0.0  # Delaunay: an M-matrix
    else:
        assert (off.data > 0).sum() == 2 * 13  # golden README: 13 non-Delaunay edges


@pytest.mark.parametrize("amplitude", [0.0, 0.1])
def test_psd(amplitude):
    V, F = lap.noisy_icosphere(2, amplitude) if amplitude else lap.icosphere(2)
    L, m = lap.cotan_laplacian(V, F, "cpu")
    lam = sla.eigh(L.toarray(), np.diag(m), eigvals_only=True)
    # LAPACK's dense generalized eigh: backward stable, so the null eigenvalue lands at about
    # eps·λ_max (λ_max ≈ 80-90 here; measured -1.2e-14 and 2.8e-14), with BLAS/LAPACK kernels
    # that differ per machine. 1e-10 is the library's ZERO_TOL: what it would call the null mode
    assert lam.min() >= -1e-10
    assert abs(lam[0]) < 1e-10 and lam[1] > 1.0  # one connected component


def test_sphere_spectrum(sphere):
    """Multiplet means of λ against l(l+1) within 0.1·l(l+1)·h² (docs/laplacian.md ("Accuracy and oracles"))."""
    amplitude, V, F, L, m = sphere
    evals, _ = lap.eigenpairs(L, m, 64, backend="cpu")  # l = 0..7 complete
    h = lap.mean_edge_length(*lap.icosphere(4))
    radius2 = m.sum() / (4 * np.pi) if amplitude else 1.0  # noisy: rescale by the area gain
    assert evals[0] < 1e-11  # the null pair, as in test_golden.py::test_eigenpairs_shift_invert
    start = 1
    for l in range(1, 8):
        mult = evals[start : start + 2 * l + 1] * radius2
        start += 2 * l + 1
        target = l * (l + 1)
        # discretisation error of the mesh, O(h²): 0.1·l(l+1)·h² is docs/laplacian.md's safe
        # bound; rounding (~1e-14) does not count. Measured 0.6 (ico4) and 0.9 (noisy ico4) of it
        assert abs(mult.mean() / target - 1.0) <= 0.1 * target * h * h, (l, mult.mean())


def test_heat_steps_closed_form(ico3):
    """u0 = Φc → n steps give Φ (c ∘ (1 − τλ)^n) (docs/laplacian.md ("Products and heat steps"))."""
    V, F, L, m = ico3
    evals, phi = lap.eigenpairs(L, m, 16, backend="cpu")  # l <= 3, complete multiplets
    lam_max = sla.eigh(L.toarray(), np.diag(m), eigvals_only=True)[-1]
    tau = 0.5 / lam_max
    c = np.random.default_rng(7).standard_normal(16)
    u0 = phi @ c  # one BLAS product, shared by both runs below
    u = lap.heat_steps(L, m, u0, tau, 200, backend="cpu")
    expected = phi @ (c * (1.0 - tau * evals) ** 200)
    # exact in exact arithmetic; here the eigenpairs are ARPACK's (residual ~1e-14, solver and
    # BLAS order per machine) and 200 steps each round once per element, contracting (|1 - τλ|
    # <= 1). Measured 6.0e-15; 1e-12 is the golden eigen tolerance, a 150x margin
    assert np.abs(u - expected).max() <= 1e-12 * np.abs(expected).max()
    # a block of three right-hand sides steps column by column identically
    U = lap.heat_steps(L, m, np.stack([u0, 2 * u0, phi[:, 3]], axis=1), tau, 200, backend="cpu")
    # exact: the block and vector kernels sum each row in column order from 0.0 and round
    # u - tau * (acc / m) the same way; numba without fastmath never fuses or reorders
    np.testing.assert_array_equal(U[:, 0], u)


@pytest.mark.parametrize("amplitude", [0.0, 0.1])
def test_dense_route_agrees_with_shift_invert(amplitude):
    V, F = lap.noisy_icosphere(3, amplitude) if amplitude else lap.icosphere(3)
    L, m = lap.cotan_laplacian(V, F, "cpu")
    ev_si, vec_si = lap.eigenpairs(L, m, 16, backend="cpu", method="shift-invert")
    ev_d, vec_d = lap.eigenpairs(L, m, 16, backend="cpu", method="dense")
    # ARPACK shift-invert vs LAPACK's dense eigh: two solvers, each with its own BLAS order per
    # machine. 5e-13 is the agreement docs/laplacian.md ("Eigenpairs") states for ico4 and noisy
    # ico4 (measured here 1.1e-14); M-orthonormality to the golden 1e-12 (measured 2.7e-15)
    assert np.abs(ev_si - ev_d).max() <= 5e-13 * max(1.0, ev_si.max())
    gram = vec_d.T @ (m[:, None] * vec_d)
    assert np.abs(gram - np.eye(16)).max() < 1e-12


def test_atomic_and_deterministic_variants_agree(ico3):
    V, F, L, m = ico3
    L2, m2 = lap.cotan_laplacian(V, F, "cpu", variant="atomic")
    # both are fixed-order numba sums (the same bits on every x86); the atomic variant sums the
    # diagonal and the mass per face, another order: measured 1.1 and 0.7 eps of the maximum.
    # A diagonal sums ~12 half-cotangents of one sign (Delaunay), a mass 6 thirds: 1e-14 ≈ 45 eps
    # and 1e-15 ≈ 4.5 eps cover those orders (fixed numbers on every x86, so no drift)
    assert np.abs(L2.data - L.data).max() <= 1e-14 * abs(L).max()
    assert np.abs(m2 - m).max() <= 1e-15 * m.max()


def test_deterministic_is_reproducible():
    V, F = lap.noisy_icosphere(4)
    topo = lap.MeshTopology(F, len(V))
    runs = [topo.assemble(V, "cpu") for _ in range(3)]
    for L, m in runs[1:]:  # exact: one thread per row, no atomics, fixed summation order
        np.testing.assert_array_equal(L.data, runs[0][0].data)
        np.testing.assert_array_equal(m, runs[0][1])


@pytest.mark.parametrize("variant", ["deterministic", "atomic"])
def test_batch_equals_per_subject(variant):
    V, F = lap.icosphere(3)
    rng = np.random.default_rng(3)
    cohort = np.stack([V * (1 + 0.1 * s) + 0.01 * rng.standard_normal(V.shape) for s in range(4)])
    topo = lap.MeshTopology(F, len(V))
    values, masses = topo.assemble_batch(cohort, "cpu", variant=variant)
    assert values.shape == (4, topo.nnz) and masses.shape == (4, len(V))
    for s, Ls in enumerate(topo.matrices(values)):
        L, m = topo.assemble(cohort[s], "cpu", variant=variant)
        # exact: the same kernel and order per subject; a cohort only adds the subject index
        np.testing.assert_array_equal(Ls.data, L.data)
        np.testing.assert_array_equal(masses[s], m)


def test_cohort_descriptors_share_one_time_grid():
    V, F = lap.icosphere(3)
    topo = lap.MeshTopology(F, len(V))
    cohort = np.stack([V, 1.5 * V])
    values, masses = topo.assemble_batch(cohort, "cpu")
    pairs = [lap.eigenpairs(Ls, ms, 16, backend="cpu") for Ls, ms in zip(topo.matrices(values), masses)]
    t = lap.shared_hks_times([ev for ev, _ in pairs], n_times=8)
    # the larger sphere has λ_1 / 2.25 and the smaller λ_max: the grid spans both
    c = 4 * np.log(10)
    # logspace returns 10**log10(t) at the ends: an ulp of log10 t (|log10 t| <= 1.1 here) is
    # ~2.3 ulp of t, plus np.power's own ulp (SIMD-dispatched: AVX-512 and AVX2 differ by one),
    # so a few eps; 1e-14 ≈ 45 eps (measured: equal)
    assert t[0] == pytest.approx(c / pairs[0][0][-1], rel=1e-14) and t[-1] == pytest.approx(c / pairs[1][0][1], rel=1e-14)
    H = lap.hks_batch(np.stack([p[0] for p in pairs]), np.stack([p[1] for p in pairs]), t, backend="cpu")
    for s, (ev, vec) in enumerate(pairs):
        # exact: on the host hks_batch makes the very same np.exp and GEMM calls per subject
        # (same shapes and layouts, same process); nothing is compared across machines
        np.testing.assert_array_equal(H[s], lap.hks(ev, vec, t, backend="cpu"))


def test_wks_main_branch_for_many_energies(ico3):
    V, F, L, m = ico3
    evals, evecs = lap.eigenpairs(L, m, 16, backend="cpu")
    e, sigma = lap.wks_params(evals, 100)
    lo, hi = np.log(evals[1]), np.log(evals[-1])
    # the same expressions, but np.log on two scalars here and on an array in wks_params, whose
    # SIMD loop may differ by an ulp (AVX-512 vs AVX2); hi - lo ≈ 1.8 barely amplifies it, and
    # linspace returns its ends exactly. 1e-14 ≈ 45 eps (measured: equal)
    assert sigma == pytest.approx(7 * (hi - lo) / 100, rel=1e-14)
    assert e[0] == pytest.approx(lo + 2 * sigma, rel=1e-14) and e[-1] == pytest.approx(hi - 2 * sigma, rel=1e-14)
    W = lap.wks(evals, evecs, backend="cpu")
    # wks normalises each column with np.linalg.norm(axis=0), a sequential (not pairwise) sum
    # of N squares, and this checks it with another: each rounds by up to ~N eps / 2. Measured
    # 6.4e-15 (29 eps), 6.8e-15 with OpenBLAS's SkylakeX GEMM: too close to the old 1e-14.
    np.testing.assert_allclose(np.linalg.norm(W, axis=0), 1.0, rtol=len(V) * np.finfo(np.float64).eps)
    H = lap.hks(evals, evecs, backend="cpu", normalize=True)
    assert H.shape == (len(V), 100)


def test_repeated_assemblies_never_overwrite_live_results():
    """Output memory is recycled (laplacian.buffers) only once earlier results are unreachable."""
    V, F = lap.icosphere(7)  # large enough (9 MB of values > 4 MB) for the pool to engage
    shapes = [V, V * [1.0, 2.0, 1.0], V * [1.0, 1.0, 3.0]]  # anisotropic: different L
    topo = lap.MeshTopology(F, len(V))
    expected = [lap.cotan_laplacian(v, F, "cpu") for v in shapes]
    L1, m1 = topo.assemble(shapes[0], "cpu")
    L2, m2 = topo.assemble(shapes[1], "cpu")
    L3, m3 = topo.assemble(shapes[2], "cpu")
    for (L, m), (Le, me) in zip([(L1, m1), (L2, m2), (L3, m3)], expected):
        # exact: the same deterministic kernel on the same input (a wrong buffer would differ)
        np.testing.assert_array_equal(L.data, Le.data)  # all three intact while alive
        np.testing.assert_array_equal(m, me)
    assert not np.shares_memory(L1.data, L2.data) and not np.shares_memory(L2.data, L3.data)
    view = L2.data[:10]
    del L1, m1, L2, m2, L3, m3
    results = [topo.assemble(shapes[0], "cpu") for _ in range(3)]  # may reuse freed memory...
    for L, _ in results:
        assert not np.shares_memory(L.data, view)  # ...never the memory a live slice uses
        np.testing.assert_array_equal(L.data, expected[0][0].data)
    np.testing.assert_array_equal(view, expected[1][0].data[:10])
