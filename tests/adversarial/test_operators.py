"""Degenerate and non-finite operators (issue 25, items 4 and 10).

* Connectivity is judged on the assembled L's non-zero off-diagonal entries: a face that
  assembly drops as degenerate leaves explicit zeros in the pattern, and used to count as
  an edge, so two patches joined by one zero-area face, or a mesh whose every face is
  degenerate, returned extra zero eigenvalues as a good result.
* NaN or inf in L or m is refused before any work, with an error naming the argument,
  what was expected and what was given (it used to come back as NaN eigenvalues); the
  descriptors refuse non-finite eigenpairs the same way.
* A vertex area below the mass floor (1e-20) is raised to it: the assembly now says so,
  once per call, with the number of vertices and the fix (it used to be silent).
"""

from __future__ import annotations

import warnings

import numpy as np
import pytest
from kernelrt.kernels import laplacian as lap
from kernelrt.kernels.laplacian import eigen as eigen_module
from kernelrt.kernels.tasks import TaskFailure

FLOOR_MESSAGE = "fell below the mass floor 1e-20"


def _bridged_spheres():
    """Two level-2 icospheres (162 vertices each) joined by one zero-area face.

    The bridge face has sphere A's vertex 0 and the two ends of an edge of sphere B, placed
    so that the three are collinear (to rounding): assembly drops it as degenerate, so
    nothing of it reaches L, and the two spheres are two components of the operator.
    """
    V, F = lap.icosphere(2)
    b, c = int(F[0, 0]), int(F[0, 1])
    shift = V[0] - V[c] - 2.0 * (V[c] - V[b])  # B's vertex c lies 2|bc| before A's vertex 0, on line bc
    n = len(V)
    vertices = np.vstack([V, V + shift])
    faces = np.vstack([F, F + n, [[0, b + n, c + n]]])
    return vertices, faces


def _assemble_quietly(vertices, faces):
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        L, m = lap.cotan_laplacian(vertices, faces, "cpu")
    return L, m, [str(w.message) for w in caught if w.category is lap.DegenerateMeshWarning]


@pytest.fixture
def no_solve(monkeypatch):
    """Every route fails the test if it is reached: the checks must come first."""
    for name in ("cholesky_eigenpairs", "_shift_invert", "_dense", "chebyshev_eigenpairs"):
        monkeypatch.setattr(eigen_module, name, lambda *a, **k: pytest.fail("a route ran on a refused operator"))


def test_patches_joined_by_a_degenerate_face_are_two_components(no_solve):
    vertices, faces = _bridged_spheres()
    L, m, messages = _assemble_quietly(vertices, faces)
    assert messages == [f"dropped 1 degenerate face(s) of {len(faces)} (repeated index or 2·area <= "
                        "1e-12·longest edge²); they contribute nothing to L or m"]
    rows = np.repeat(np.arange(L.shape[0]), np.diff(L.indptr))
    assert np.count_nonzero(L.data[L.indices != rows] == 0) == 4  # the bridge's edges A0-b, A0-c, both ways
    words = r"2 connected components \(vertex counts 162, 162\) in L's non-zero weights"
    with pytest.raises(lap.DisconnectedMeshError, match=words):
        lap.eigenpairs(L, m, 6, backend="cpu")
    # a topology's eigenpairs (the cohort path) checks each subject's L, not the face pattern
    topology = lap.MeshTopology(faces, len(vertices), report="log")
    L2, m2 = topology.assemble(vertices, "cpu")
    with pytest.raises(lap.DisconnectedMeshError, match="2 connected components"):
        topology.eigenpairs(L2, m2, 6, backend="cpu")


def test_a_degenerate_bridge_fails_its_subject_in_a_cohort():
    good = lap.noisy_icosphere(2, 0.1, seed=1)
    results = lap.cohort_spectra({"good": good, "bridged": _bridged_spheres()}, 6, descriptors=(), errors="keep")
    assert isinstance(results[0], lap.SubjectSpectrum)
    assert isinstance(results[1], TaskFailure) and "2 connected components" in results[1].message


def test_a_mesh_whose_every_face_is_degenerate_is_refused(no_solve):
    V, F = lap.icosphere(1)
    flat = V.copy()
    flat[:, 1:] = 0.0  # every vertex on the x axis: every face has zero area
    L, m, messages = _assemble_quietly(flat, F)
    assert any(s.startswith(f"dropped {len(F)} degenerate face(s)") for s in messages)
    words = r"has 42 connected components \(vertex counts 1, 1, 1, 1, 1, ...\) \(42 of them single vertices"
    with pytest.raises(lap.DisconnectedMeshError, match=words):
        lap.eigenpairs(L, m, 4, backend="cpu")


def test_a_right_angled_grid_with_exact_zero_weights_stays_connected():
    """Zero weights that are not cuts: a square grid split along diagonals has cot 90° = 0 on
    every diagonal, and the grid edges still join every vertex."""
    n = 6
    x, y = np.meshgrid(np.arange(n, dtype=float), np.arange(n, dtype=float), indexing="ij")
    V = np.column_stack([x.ravel(), y.ravel(), np.zeros(n * n)])
    idx = np.arange(n * n).reshape(n, n)
    a, b, c, d = idx[:-1, :-1].ravel(), idx[1:, :-1].ravel(), idx[1:, 1:].ravel(), idx[:-1, 1:].ravel()
    F = np.vstack([np.column_stack([a, b, c]), np.column_stack([a, c, d])])
    L, m = lap.cotan_laplacian(V, F, "cpu")
    assert np.count_nonzero(L.data == 0) > 0  # the diagonals' weights are exact zeros
    evals = lap.eigenpairs(L, m, 4, backend="cpu").evals
    assert evals[0] < 1e-12 < evals[1]  # one null mode: a connected operator


def _bad(a, where, value):
    a = a.copy()
    a[where] = value
    return a


@pytest.mark.parametrize("value, words", [(np.nan, "1 NaN and 0 inf"), (np.inf, "0 NaN and 1 inf")])
def test_non_finite_L_is_refused_before_any_work(no_solve, value, words):
    V, F = lap.icosphere(2)
    topology = lap.MeshTopology(F, len(V))
    L, m = topology.assemble(V, "cpu")
    L = L.copy()
    L.data[5] = value
    expected = rf"L must hold finite numbers \(got {words} among its {L.nnz} stored entries\)"
    for method in ("auto", "cholesky", "shift-invert", "dense", "chebyshev"):
        with pytest.raises(ValueError, match=expected):
            lap.eigenpairs(L, m, 4, backend="cpu", method=method)
    with pytest.raises(ValueError, match=expected):
        topology.eigenpairs(L, m, 4, backend="cpu")
    with pytest.raises(ValueError, match=expected):
        lap.eigenpairs(L.tocoo(), m, 4, backend="cpu")


@pytest.mark.parametrize("value, words", [(np.nan, "1 NaN and 0 inf"), (np.inf, "0 NaN and 1 inf")])
@pytest.mark.parametrize("form", ["vector", "column", "diagonal matrix"])
def test_non_finite_m_is_refused_before_any_work(no_solve, value, words, form):
    import scipy.sparse as sp

    V, F = lap.icosphere(2)
    L, m = lap.cotan_laplacian(V, F, "cpu")
    m = _bad(m, 7, value)
    given = {"vector": m, "column": m[:, None], "diagonal matrix": sp.diags(m)}[form]
    with pytest.raises(ValueError, match=rf"m must hold finite numbers \(got {words} among its 162 "):
        lap.eigenpairs(L, given, 4, backend="cpu")


def test_the_descriptors_refuse_non_finite_eigenpairs():
    V, F = lap.icosphere(2)
    pairs = lap.eigenpairs(*lap.cotan_laplacian(V, F, "cpu"), 8, backend="cpu")
    evals, evecs = pairs
    with pytest.raises(ValueError, match=r"evals must hold finite numbers \(got 1 NaN and 0 inf among its 8 "):
        lap.hks(_bad(evals, 3, np.nan), evecs)
    with pytest.raises(ValueError, match=r"evecs must hold finite numbers \(got 0 NaN and 1 inf"):
        lap.wks(evals, _bad(evecs, (0, 2), np.inf))
    with pytest.raises(ValueError, match=r"t must hold finite numbers"):
        lap.hks(pairs, t=np.array([1.0, np.nan]))
    with pytest.raises(ValueError, match=r"sigma must be a finite number"):
        lap.wks(pairs, sigma=np.nan)
    # the check refuses nothing sound: a 0-d array is a number, as it was before the check
    np.testing.assert_array_equal(lap.wks(pairs, sigma=np.asarray(0.5)), lap.wks(pairs, sigma=0.5))
    with pytest.raises(ValueError, match=r"sigma must be a finite number"):
        lap.wks(pairs, sigma=True)


def _floor_messages(caught) -> list[str]:
    return [str(w.message) for w in caught if FLOOR_MESSAGE in str(w.message)]


def test_vertex_areas_below_the_mass_floor_warn_once_per_call():
    V, F = lap.icosphere(2)
    tiny = V * 1e-11  # vertex areas ~1e-23: kept faces (the degeneracy test is relative), clamped masses
    topology = lap.MeshTopology(F, len(V))
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        _, m = topology.assemble(tiny, "cpu")
    assert np.all(m == 1e-20)
    messages = _floor_messages(caught)
    assert len(messages) == 1 and messages[0].startswith("162 vertex area(s) fell below the mass floor 1e-20")
    assert "scale the vertices up" in messages[0]
    assert all(w.category is lap.DegenerateMeshWarning for w in caught)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        topology.assemble_batch(np.stack([V, tiny, tiny]), "cpu")
    assert _floor_messages(caught) == [messages[0].replace("162 vertex area(s)", "324 vertex area(s) (summed over "
                                                                                 "3 subjects)")]


def test_only_clamped_areas_warn():
    V, F = lap.icosphere(2)
    one = V.copy()
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # a normal mesh: no warning at all
        lap.cotan_laplacian(one, F, "cpu")
    # isolated vertices keep their own message, not this one
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        lap.cotan_laplacian(np.vstack([V, [[5.0, 5.0, 5.0]]]), F, "cpu")
    assert _floor_messages(caught) == [] and any("belong to no kept face" in str(w.message) for w in caught)


def test_a_cohort_subject_keeps_its_mass_floor_report():
    V, F = lap.icosphere(2)
    results = lap.cohort_spectra({"normal": (V, F), "tiny": (V * 1e-11, F)}, 4, descriptors=())
    assert results[0].reports == ()
    assert len(results[1].reports) == 1 and FLOOR_MESSAGE in results[1].reports[0]
