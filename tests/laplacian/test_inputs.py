"""Tiny named meshes with hand-computed L and m, warnings, and bad inputs (CPU backend)."""

import math
import warnings

import numpy as np
import pytest

from kernelrt.kernels import laplacian as lap
from tests.support.laplacian_cases import book_of_three, single_tet, single_triangle, triangulated_square


def test_single_triangle():
    V, F = single_triangle()
    L, m = lap.cotan_laplacian(V, F, "cpu")
    expected = np.array([[1.0, -0.5, -0.5], [-0.5, 0.5, 0.0], [-0.5, 0.0, 0.5]])
    # hand-computed values against the kernel's rounded cot = <a, b> / |a x b| and (d/2)/3:
    # 1e-15 allows ~4 eps of rounding in those expressions (measured: exact here; the assembly
    # is bit-identical on every x86, no libm and no FMA)
    np.testing.assert_allclose(L.toarray(), expected, atol=1e-15)
    np.testing.assert_allclose(m, np.full(3, 1 / 6), rtol=1e-15)
    assert L.nnz == 9  # the right angle's cot is an explicit zero of the topology pattern


def test_triangulated_square_boundary_edges_carry_one_cotangent():
    V, F = triangulated_square()
    L, m = lap.cotan_laplacian(V, F, "cpu")
    # interior diagonal (0, 2): both opposite angles are 90° -> 0; boundary edges: one 45° -> -1/2.
    # Analytic values against a few roundings of the cotangent and area expressions: 1e-15 is
    # ~4 eps (measured: exact, as in test_single_triangle)
    assert L[0, 2] == pytest.approx(0.0, abs=1e-15)
    for i, j in [(0, 1), (1, 2), (2, 3), (3, 0)]:
        assert L[i, j] == pytest.approx(-0.5, rel=1e-15)
    assert L[1, 3] == 0.0  # exact: 1 and 3 share no face, nothing is stored there
    np.testing.assert_allclose(m, [1 / 3, 1 / 6, 1 / 3, 1 / 6], rtol=1e-15)  # ~4 eps, as above


def test_single_tet():
    V, F = single_tet()
    L, m = lap.cotan_laplacian(V, F, "cpu")
    cot60 = 1 / math.sqrt(3)
    expected = np.full((4, 4), -cot60)  # each edge: two 60° angles -> -(1/2)(2 cot 60°)
    np.fill_diagonal(expected, 3 * cot60)
    # analytic values (1/√3 and the area computed another way, each rounded) against the kernel's
    # quotient and cross-product norm, sums of 2-3 terms: ~10 roundings at most, so 1e-14 ≈ 45
    # eps is generous (measured: exact); the assembly is bit-identical on every x86
    np.testing.assert_allclose(L.toarray(), expected, rtol=1e-14)
    face_area = math.sqrt(3) / 4 * 8  # edge length 2√2
    np.testing.assert_allclose(m, np.full(4, face_area), rtol=1e-14)  # 3 faces x area / 3


def test_book_of_three_sums_every_page():
    V, F = book_of_three()
    L, _ = lap.cotan_laplacian(V, F, "cpu")
    # every page is isosceles with apex over the edge midpoint: angle at the apex has cot = (1 - 1/4)/1 ... via vectors
    cots = []
    for apex in (2, 3, 4):
        a, b = V[0] - V[apex], V[1] - V[apex]
        cots.append(a @ b / np.linalg.norm(np.cross(a, b)))
    # three cotangents of one sign, recomputed with NumPy's dot/norm/cross in another order than
    # the kernel's: a few ulp at most, 1e-14 ≈ 45 eps (measured: exact)
    assert L[0, 1] == pytest.approx(-0.5 * sum(cots), rel=1e-14)
    # the diagonal is minus the row's off-diagonal sum, so re-summing the row cancels to a few
    # roundings of max|L| = 1.875: 1e-15 ≈ 2 eps·max|L| (measured: 0)
    assert np.abs(np.asarray(L.sum(axis=1))).max() < 1e-15


def test_int64_faces_lists_and_readonly_inputs_give_the_same_result():
    V, F = lap.icosphere(2)
    L, m = lap.cotan_laplacian(V, F, "cpu")
    Vr = V.copy()
    Vr.flags.writeable = False
    for v, f in [(Vr, F.astype(np.int64)), (V.tolist(), F.tolist()), (np.asfortranarray(V), F.astype(np.uint16))]:
        L2, m2 = lap.cotan_laplacian(v, f, "cpu")
        # exact: every form becomes the same float64 V and index tables, then the same kernel
        np.testing.assert_array_equal(L2.data, L.data)
        np.testing.assert_array_equal(m2, m)


def test_topology_is_independent_of_later_edits_to_faces():
    V, F = lap.icosphere(2)
    F = F.copy()
    topo = lap.MeshTopology(F, len(V))
    L, _ = topo.assemble(V, "cpu")
    F[:] = 0
    L2, _ = topo.assemble(V, "cpu")
    np.testing.assert_array_equal(L.data, L2.data)  # exact: same tables, same deterministic kernel


def test_returned_pattern_is_read_only():
    V, F = single_triangle()
    L, _ = lap.cotan_laplacian(V, F, "cpu")
    with pytest.raises(ValueError, match="read-only"):
        L.eliminate_zeros()  # would corrupt the shared pattern; it refuses instead
    L2 = L.copy()
    L2.eliminate_zeros()
    assert L2.nnz == 7


def test_unreferenced_trailing_vertex_warns_and_gets_the_floor_mass():
    V, F = single_tet()
    V = np.vstack([V, [5.0, 5.0, 5.0]])
    topo = lap.MeshTopology(F, len(V))
    assert topo.n_unreferenced == 1
    with pytest.warns(lap.DegenerateMeshWarning, match="1 vertex"):
        L, m = topo.assemble(V, "cpu")
    assert L.shape == (5, 5) and m[4] == 1e-20  # the clamp's constant, assigned as is
    assert not L[4].toarray().any()  # exact: structural zeros (the diagonal may be -0.0)


def test_degenerate_faces_are_masked_not_nan():
    V, F = single_tet()
    V = np.vstack([V, (V[0] + V[1]) / 2])  # collinear with 0 and 1
    F = np.vstack([F, [[0, 1, 4], [2, 2, 3]]])
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        L, m = lap.cotan_laplacian(V, F, "cpu")
    messages = sorted(str(w.message) for w in caught if w.category is lap.DegenerateMeshWarning)
    assert len(messages) == 2
    assert messages[0].startswith("1 vertex(es) belong to no kept face")  # vertex 4, only in a dropped face
    assert messages[1].startswith("dropped 2 degenerate face(s) of 6")
    assert np.isfinite(L.data).all() and np.isfinite(m).all()
    L_ref, m_ref = lap.cotan_laplacian(*single_tet(), "cpu")
    # exact: the kept faces are visited in the same order; a dropped face only adds slots
    # holding a structural 0.0, which leaves the row sums unchanged
    np.testing.assert_array_equal(L[:4, :4].toarray(), L_ref.toarray())
    np.testing.assert_array_equal(m[:4], m_ref)


@pytest.mark.parametrize(
    "vertices, faces, error, match",
    [
        (np.zeros((3, 2)), [[0, 1, 2]], ValueError, r"vertices must have shape \(N, 3\) \(got shape \(3, 2\)\)"),
        (np.zeros((0, 3)), [[0, 1, 2]], ValueError, "vertices must not be empty"),
        ([[0, 0, np.nan], [1, 0, 0], [0, 1, 0]], [[0, 1, 2]], ValueError, "vertices must be finite"),
        ([[0, 0, np.inf], [1, 0, 0], [0, 1, 0]], [[0, 1, 2]], ValueError, "1 vertices have NaN or inf"),
        (np.zeros((3, 3), complex), [[0, 1, 2]], TypeError, "vertices must hold real numbers"),
        ([["a", "b", "c"]] * 3, [[0, 1, 2]], TypeError, "vertices must hold real numbers"),
        (np.eye(3), np.array([[0.0, 1.0, 2.0]]), TypeError, r"faces must hold integers \(got dtype float64\)"),
        (np.eye(3), [[0, 1]], ValueError, r"faces must have shape \(F, 3\)"),
        (np.eye(3), np.zeros((0, 3), int), ValueError, "faces must not be empty"),
        (np.eye(3), [[0, 1, 3]], ValueError, r"faces must index vertices in \[0, 3\) \(got index 3\)"),
        (np.eye(3), [[0, -1, 2]], ValueError, r"\(got index -1\)"),
    ],
)
def test_bad_inputs(vertices, faces, error, match):
    with pytest.raises(error, match=match):
        lap.cotan_laplacian(vertices, faces, "cpu")


def test_bad_arguments():
    V, F = single_triangle()
    topo = lap.MeshTopology(F, 3)
    with pytest.raises(ValueError, match=r"vertices must have the topology's 3 rows \(got shape \(4, 3\)\)"):
        topo.assemble(np.zeros((4, 3)), "cpu")
    with pytest.raises(ValueError, match="variant must be 'deterministic' or 'atomic'"):
        topo.assemble(V, "cpu", variant="fast")
    with pytest.raises(ValueError, match="backend must be"):
        topo.assemble(V, "gpu")
    with pytest.raises(ValueError, match=r"vertices must have shape \(S, N, 3\)"):
        topo.assemble_batch(V, "cpu")
    with pytest.raises(ValueError, match="subjects"):
        topo.assemble_batch(np.stack([V, V + np.nan]), "cpu")
    with pytest.raises(TypeError, match="n_vertices must be an int"):
        lap.MeshTopology(F, 3.0)
    with pytest.raises(ValueError, match=r"values must have shape \(9,\)"):
        topo.to_csr(np.zeros(3))


def test_eigenpairs_arguments():
    V, F = lap.icosphere(1)
    L, m = lap.cotan_laplacian(V, F, "cpu")
    with pytest.raises(ValueError, match=r"k must be an int in \[1, 41\]"):
        lap.eigenpairs(L, m, 42, backend="cpu")
    with pytest.raises(ValueError, match="method must be"):
        lap.eigenpairs(L, m, 4, backend="cpu", method="lobpcg")
    with pytest.raises(ValueError, match=r"m must have shape \(42,\)"):
        lap.eigenpairs(L, m[:-1], 4, backend="cpu")
    with pytest.raises(TypeError, match="L must be a scipy or cupyx sparse matrix"):
        lap.eigenpairs(L.toarray(), m, 4, backend="cpu")


def test_no_warning_on_a_clean_mesh():
    V, F = lap.icosphere(2)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        lap.cotan_laplacian(V, F, "cpu")


@pytest.mark.slow  # compiles the int64 variants of the CPU kernels (~9 s)
def test_int64_index_tables_give_the_same_result(monkeypatch):
    """Meshes with N + 6F >= 2**31 get int64 tables; force that path on a small mesh."""
    from kernelrt.kernels.laplacian import inputs as laplacian_inputs

    V, F = lap.noisy_icosphere(2)
    ref = lap.MeshTopology(F, len(V))
    monkeypatch.setattr(laplacian_inputs, "index_dtype_for", lambda n, f: np.dtype(np.int64))
    wide = lap.MeshTopology(F, len(V))
    assert wide.index_dtype == np.int64 and wide.indices.dtype == np.int64
    np.testing.assert_array_equal(wide.indptr, ref.indptr)
    np.testing.assert_array_equal(wide.indices, ref.indices)
    for variant in ("deterministic", "atomic"):
        L, m = wide.assemble(V, "cpu", variant=variant)
        L_ref, m_ref = ref.assemble(V, "cpu", variant=variant)
        # exact: only the index width differs; the float arithmetic and its order do not
        np.testing.assert_array_equal(L.data, L_ref.data)
        np.testing.assert_array_equal(m, m_ref)


# -- the forms a peer passes its data in (SpectralBrain: issue 13) ---------------------------


class _Quantity:
    """What pint's and quantities' Quantity have in common: ``.magnitude`` and ``.units``."""

    def __init__(self, magnitude, units):
        self.magnitude, self.units = np.asarray(magnitude), units

    def __array__(self, dtype=None, copy=None):  # pint strips the units here, with a warning
        return np.asarray(self.magnitude, dtype=dtype)


class _Decomposition:
    """SpectralBrain's SpectralDecomposition, duck-typed: it is never imported by kernelrt."""

    def __init__(self, evals, evecs):
        self.eigenvalues, self.eigenvectors = evals, evecs


def test_degenerate_faces_can_be_logged_instead_of_warned(caplog):
    import logging

    V, F = single_tet()
    F = np.vstack([F, [[2, 2, 3]]])
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # a suite that runs with warnings as errors
        with caplog.at_level(logging.WARNING, logger="kernelrt.laplacian"):
            L, _ = lap.cotan_laplacian(V, F, "cpu", report="log")
        records = [r for r in caplog.records if r.name == "kernelrt.laplacian"]
        assert [r.getMessage()[:29] for r in records] == ["dropped 1 degenerate face(s) "]
        mine = logging.getLogger("tests.mine")
        with caplog.at_level(logging.WARNING, logger="tests.mine"):
            lap.MeshTopology(F, len(V), report=mine).assemble(V, "cpu")
        assert any(r.name == "tests.mine" and "dropped 1" in r.getMessage() for r in caplog.records)
    with pytest.warns(lap.DegenerateMeshWarning):  # the default is unchanged
        L2, _ = lap.cotan_laplacian(V, F, "cpu")
    np.testing.assert_array_equal(L.data, L2.data)  # exact: reporting does not touch the values
    with pytest.raises(ValueError, match=r"report must be 'warn', 'log' or a logging.Logger \(got 'print'\)"):
        lap.MeshTopology(F, len(V), report="print")


def test_as_spectralbrain_gives_its_types_and_pruned_pattern():
    V, F = single_triangle()
    L, m = lap.cotan_laplacian(V, F, "cpu")
    L_sb, M_sb = lap.as_spectralbrain(L, m)
    assert L_sb.format == M_sb.format == "csc" and L_sb.dtype == M_sb.dtype == np.float64
    assert (L.nnz, L_sb.nnz) == (9, 7)  # the right angle's two explicit zeros are pruned
    np.testing.assert_array_equal(L_sb.toarray(), L.toarray())  # exact: the same values, another storage
    np.testing.assert_array_equal(M_sb.toarray(), np.diag(m))
    assert lap.as_spectralbrain(L, m, prune=False)[0].nnz == 9 and L.nnz == 9  # L itself untouched
    with pytest.raises(TypeError, match=r"L must be a scipy or cupyx sparse matrix \(got ndarray\)"):
        lap.as_spectralbrain(L.toarray(), m)
    with pytest.raises(ValueError, match=r"m must have shape \(3,\) or \(3, 1\)"):
        lap.as_spectralbrain(L, m[:2])


def test_mass_as_a_diagonal_sparse_matrix_or_a_column():
    V, F = lap.icosphere(1)
    L, m = lap.cotan_laplacian(V, F, "cpu")
    ref = lap.eigenpairs(L, m, 4, backend="cpu")
    x = np.linspace(0.0, 1.0, len(V))
    heat = lap.heat_steps(L, m, x, 1e-3, 2, backend="cpu")
    for mass in (sp_diags(m, "csc"), sp_diags(m, "csr"), sp_diags(m, "coo"), sp_diags(m, "dia"), m[:, None], list(m)):
        # exact: every form gives the same (N,) float64 vector before any arithmetic
        np.testing.assert_array_equal(lap.eigenpairs(L, mass, 4, backend="cpu").evals, ref.evals)
        np.testing.assert_array_equal(lap.heat_steps(L, mass, x, 1e-3, 2, backend="cpu"), heat)
    consistent = sp_diags(m, "csr") + 1e-3 * abs(L)
    for call in (lambda M: lap.eigenpairs(L, M, 4, backend="cpu"), lambda M: lap.LaplacianOperator(L, M, backend="cpu")):
        with pytest.raises(ValueError, match=r"m must have shape \(42,\) or \(42, 1\), or be a diagonal sparse "
                                             r"\(42, 42\) matrix \(the lumped mass\) \(got a sparse matrix with \d+ non-zero off-diag"):
            call(consistent)
        with pytest.raises(ValueError, match=r"\(got a dense \(42, 42\) array: pass its diagonal, np.diag\(m\)\)"):
            call(np.diag(m))
        with pytest.raises(ValueError, match=r"\(got a sparse matrix of shape \(41, 41\)\)"):
            call(sp_diags(m[:-1], "csc"))
        with pytest.raises(ValueError, match=r"\(got shape \(1, 42\)\)"):
            call(m[None, :])


def sp_diags(m, fmt):
    import scipy.sparse as sp

    return sp.diags(m, 0, format=fmt)


def test_quantities_with_units_are_refused_with_the_fix():
    V, F = single_triangle()
    with pytest.raises(TypeError, match=r"vertices must be plain numbers, not a quantity with units "
                                        r"\(got _Quantity in millimeter\): pass vertices.magnitude"):
        lap.cotan_laplacian(_Quantity(V, "millimeter"), F, "cpu")
    L, m = lap.cotan_laplacian(V, F, "cpu")
    with pytest.raises(TypeError, match=r"m must be plain numbers, not a quantity .* pass m.magnitude"):
        lap.LaplacianOperator(L, _Quantity(m, "mm**2"), backend="cpu")
    with pytest.raises(TypeError, match=r"t must be plain numbers, not a quantity .* pass t.magnitude"):
        lap.hks(np.array([0.0, 1.0]), np.ones((3, 2)), t=_Quantity([1.0], "s"))


def test_descriptors_take_a_decomposition_object_and_columns():
    evals, evecs = np.array([0.0, 2.0, 2.5, 6.0]), np.random.default_rng(0).standard_normal((10, 4))
    t = np.array([0.1, 1.0])
    ref_h, ref_w = lap.hks(evals, evecs, t), lap.wks(evals, evecs, n_energies=5)
    decomposition = _Decomposition(evals, evecs)
    # exact: the same arrays reach the same expressions
    np.testing.assert_array_equal(lap.hks(decomposition, t=t), ref_h)
    np.testing.assert_array_equal(lap.hks(evals[:, None], evecs, t[:, None]), ref_h)  # (k, 1) and (T, 1) columns
    np.testing.assert_array_equal(lap.wks(decomposition, n_energies=5), ref_w)
    e, sigma = lap.wks_params(evals, 5)
    np.testing.assert_array_equal(lap.wks(evals[:, None], evecs, e=e[:, None], sigma=sigma), ref_w)
    with pytest.raises(TypeError, match=r"hks needs the eigenvectors: pass hks\(evals, evecs\) .* \(got ndarray alone\)"):
        lap.hks(evals)
    with pytest.raises(TypeError, match=r"wks needs the eigenvectors: .* \(got object alone\)"):
        lap.wks(object())
    with pytest.raises(TypeError, match=r"hks takes a decomposition object alone: .* hks\(decomposition, t=...\) "
                                        r"\(got _Decomposition and a second positional argument ndarray\)"):
        lap.hks(decomposition, t)  # SpectralBrain's compute_hks(decomp, t_values) order
    with pytest.raises(ValueError, match=r"evals must be a 1-D \(n,\) array or an \(n, 1\) column \(got shape \(2, 2\)\)"):
        lap.hks(evals.reshape(2, 2), evecs)
    with pytest.raises(ValueError, match=r"t must be a 1-D \(n,\) array or an \(n, 1\) column \(got shape \(\)\)"):
        lap.hks(evals, evecs, 1.0)
