"""cohort_spectra: a cohort here and on a two-process Dask cluster equals the serial loop.

Subjects: four jittered level-4 icospheres (2,562 vertices: the Cholesky route) sharing
one face array, two level-3 ones (642: the dense route) sharing another, and two bad
meshes (a NaN vertex; two disjoint pieces). k = 16 ends at a spectral gap of the sphere
(l = 0..3 is 1 + 3 + 5 + 7 modes, and the jitter splits each multiplet only slightly), so
the HKS/WKS, which sum over all k modes, are determined by the spectrum and comparable
across runs. Eigenvalues agree to 1e-10 of λ_max and descriptors to 1e-8 of their largest
entry: the runs differ only in the threads BLAS, LAPACK and the kernels use (rounding
order); measured on this machine: eigenvalues within 1.2e-14, HKS 2.4e-13, WKS 1.5e-12.
"""

from __future__ import annotations

import os
import stat
from types import SimpleNamespace

import numpy as np
import pytest
from kernelrt.kernels.laplacian import (
    CohortError,
    SubjectSpectrum,
    cohort_spectra,
    cotan_laplacian,
    eigenpairs,
    hks,
    noisy_icosphere,
    wks,
)
from kernelrt.kernels.laplacian import cohort as cohort_module
from kernelrt.kernels.tasks import TaskFailure

K = 16


def _cohort() -> dict:
    meshes = {f"sub-{s:02d}": noisy_icosphere(4, 0.1, seed=s) for s in range(4)}
    meshes.update({f"small-{s}": noisy_icosphere(3, 0.1, seed=10 + s) for s in range(2)})
    v, f = noisy_icosphere(3, 0.1, seed=99)
    nan = v.copy()
    nan[5, 1] = np.nan
    meshes["bad-nan"] = (nan, f)
    meshes["bad-two-pieces"] = (np.concatenate([v, v + 5.0]), np.concatenate([f, f + len(v)]))
    return meshes


MESHES = _cohort()
GOOD = [n for n in MESHES if not n.startswith("bad")]


@pytest.fixture(scope="module")
def serial():
    """The per-subject public functions, one subject after another."""
    out = {}
    for name in GOOD:
        L, m = cotan_laplacian(*MESHES[name])
        pairs = eigenpairs(L, m, K)
        out[name] = (pairs.evals, hks(pairs), wks(pairs))
    return out


def _assert_equal_to_serial(results, serial):
    assert [r.name for r in results] == list(MESHES)
    for r in results:
        if r.name.startswith("bad"):
            continue
        evals, h, w = serial[r.name]
        assert np.max(np.abs(r.evals - evals)) <= 1e-10 * evals[-1]
        assert np.max(np.abs(r.hks - h)) <= 1e-8 * np.abs(h).max()
        assert np.max(np.abs(r.wks - w)) <= 1e-8 * np.abs(w).max()


def _assert_bad_ones_failed_alone(results):
    failures = {r.name: r for r in results if isinstance(r, TaskFailure)}
    assert sorted(failures) == ["bad-nan", "bad-two-pieces"]
    assert "vertices must be finite" in failures["bad-nan"].message
    assert "connected components" in failures["bad-two-pieces"].message
    assert all(isinstance(r, SubjectSpectrum) for r in results if r.name in GOOD)


@pytest.mark.slow
def test_a_local_cohort_equals_the_serial_loop_and_bad_meshes_fail_alone(serial):
    results = cohort_spectra(MESHES, K, errors="keep")
    _assert_bad_ones_failed_alone(results)
    _assert_equal_to_serial(results, serial)
    routes = {r.name: r.route for r in results if r.name in GOOD}
    assert routes["sub-00"].startswith("cholesky") and routes["small-0"] == "dense"


@pytest.mark.slow
def test_a_cohort_on_the_cluster_equals_the_serial_loop(cluster, serial):
    with pytest.raises(CohortError) as caught:
        cohort_spectra(MESHES, K, client=cluster.client)
    message = str(caught.value)
    assert message.startswith("2 of 8 subjects failed") and "bad-nan" in message and "bad-two-pieces" in message
    results = caught.value.results
    _assert_bad_ones_failed_alone(results)
    _assert_equal_to_serial(results, serial)


@pytest.mark.slow
def test_with_out_each_subject_is_written_as_it_completes(cluster, serial, tmp_path):
    seen = []
    results = cohort_spectra(MESHES, K, client=cluster.client, out=tmp_path / "run", errors="keep",
                             keep_evecs=True, progress=seen.append)
    assert len(seen) == len(MESHES)
    files = sorted(p.name for p in (tmp_path / "run").iterdir())
    assert files == sorted(f"{n}.npz" for n in GOOD)  # failed subjects leave no file, nothing partial
    for r in results:
        if isinstance(r, TaskFailure):
            continue
        assert r.hks is None and r.evecs is None and r.path == tmp_path / "run" / f"{r.name}.npz"
        back = SubjectSpectrum.load(r.path)
        assert back.name == r.name and back.n_vertices == r.n_vertices and back.route == r.route
        np.testing.assert_array_equal(back.evals, r.evals)
        assert back.evecs.shape == (r.n_vertices, K)
    _assert_equal_to_serial([SubjectSpectrum.load(r.path) if isinstance(r, SubjectSpectrum) else r
                             for r in results], serial)


def test_a_cohort_builds_one_topology_per_face_array(monkeypatch):
    built = []

    class Counting(cohort_module.MeshTopology):
        def __init__(self, faces, n_vertices, **kw):
            built.append(n_vertices)
            super().__init__(faces, n_vertices, **kw)

    monkeypatch.setattr(cohort_module, "MeshTopology", Counting)
    monkeypatch.setattr(cohort_module, "_topologies", type(cohort_module._topologies)())
    v, f = noisy_icosphere(2, 0.1, seed=1)
    meshes = [(v * (1 + 0.01 * s), f.copy()) for s in range(3)] + [noisy_icosphere(1, 0.1, seed=2)]
    cohort_spectra(meshes, 4, descriptors=())
    assert built == [162, 42]  # three subjects on one face array (equal copies), one on another


def test_subjects_sharing_faces_share_one_topology():
    v, f = MESHES["sub-00"]
    t1 = cohort_module._topology(f, len(v))
    assert cohort_module._topology(f.copy(), len(v)) is t1  # by content, not identity
    assert cohort_module._topology(MESHES["small-0"][1], 642) is not t1


def test_degenerate_faces_are_reported_with_their_subject():
    v, f = noisy_icosphere(2, 0.1, seed=3)
    flat = v.copy()
    flat[f[0, 1]] = flat[f[0, 0]]  # collapse one edge: its two faces have zero area
    results = cohort_spectra({"clean": (v, f), "flat": (flat, f)}, 4, descriptors=())
    assert results[0].reports == ()
    assert len(results[1].reports) == 1 and "degenerate face" in results[1].reports[0]


def test_shared_descriptor_grids_are_used_for_every_subject():
    t, e = np.logspace(-2, 1, 7), np.linspace(1, 3, 5)
    results = cohort_spectra([MESHES["small-0"], MESHES["small-1"]], 8, hks_times=t, wks_energies=e, wks_sigma=0.3)
    for r in results:
        np.testing.assert_array_equal(r.hks_times, t)
        np.testing.assert_array_equal(r.wks_energies, e)
        assert r.hks.shape == (642, 7) and r.wks.shape == (642, 5) and r.wks_sigma == 0.3
    assert [r.name for r in results] == ["subject-0000", "subject-0001"]


@pytest.mark.parametrize("kwargs, error, words", [
    ({"k": 0}, ValueError, "k must be a positive int"),
    ({"descriptors": ("hks", "dks")}, ValueError, "descriptors must be among"),
    ({"errors": "ignore"}, ValueError, "errors must be one of"),
    ({"client": object()}, TypeError, "client must be a distributed.Client"),
    ({"names": ["a", "a"]}, ValueError, "names must be unique"),
    ({"names": ["a"]}, ValueError, "one name per mesh"),
    ({"which": "SM"}, TypeError, "unexpected options"),
    ({"wks_sigma": -1.0}, ValueError, "wks_sigma"),
    ({"wks_sigma": "0.3"}, ValueError, "wks_sigma must be a positive number"),
    ({"hks_times": [-1.0, 1.0]}, ValueError, "hks_times must be > 0"),
    ({"hks_times": []}, ValueError, "hks_times must be a non-empty array"),
    ({"wks_energies": [1.0, np.inf]}, ValueError, "wks_energies must be a non-empty array of finite"),
    ({"method": "nope"}, ValueError, "method must be one of"),
    ({"factor": "mkl"}, ValueError, "factor must be one of"),
    ({"tol": -1e-9}, ValueError, "tol must be a finite number > 0"),
    ({"sigma": 0.5}, ValueError, "sigma must be a finite number < 0"),
    ({"maxiter": 2.5}, ValueError, "maxiter must be a positive int"),
    ({"names": ["../escape", "b"]}, ValueError, "no '/'"),
    ({"names": [".hidden", "b"]}, ValueError, "leading '.'"),
    ({"backend": "cpu", "client": SimpleNamespace(map=1, run_on_scheduler=1, register_plugin=1)}, ValueError,
     "backend applies to a run without a client"),
])
def test_bad_arguments_are_refused_before_any_subject_runs(kwargs, error, words, tmp_path):
    meshes = [MESHES["small-0"], MESHES["small-1"]]
    with pytest.raises(error, match=words):
        cohort_spectra(meshes, **{"k": 4, "out": tmp_path / "never", **kwargs})
    assert not (tmp_path / "never").exists() or not any((tmp_path / "never").iterdir())


@pytest.mark.parametrize("meshes, words", [
    ([3], r"meshes\[0\] must be a \(vertices, faces\) pair"),
    ("lh.pial", "meshes must be a sequence or a mapping"),
    ([], "meshes is empty"),
])
def test_malformed_cohorts_are_refused(meshes, words):
    with pytest.raises((TypeError, ValueError), match=words):
        cohort_spectra(meshes, 4)


def test_out_must_be_a_directory(tmp_path):
    (tmp_path / "file").write_text("x")
    with pytest.raises(ValueError, match="out must be a directory"):
        cohort_spectra([MESHES["small-0"]], 4, out=tmp_path / "file")


def test_meshes_as_objects_and_as_files_give_the_same_spectra(tmp_path):
    meshio = pytest.importorskip("meshio")
    from types import SimpleNamespace

    v, f = MESHES["small-0"]
    meshio.write_points_cells(tmp_path / "sub-a.ply", v, [("triangle", f)])  # binary PLY: float64, exact
    as_pair, as_object, as_file = cohort_spectra(
        [(v, f), SimpleNamespace(vertices=v, faces=f), tmp_path / "sub-a.ply"], 6,
        names=["pair", "object", "file"])
    for other in (as_object, as_file):
        np.testing.assert_array_equal(other.evals, as_pair.evals)
        np.testing.assert_array_equal(other.hks, as_pair.hks)
    assert [r.name for r in cohort_spectra([tmp_path / "sub-a.ply"], 4)] == ["sub-a"]  # named after the file


def test_resume_computes_only_the_subjects_not_yet_written(tmp_path):
    meshes = {name: MESHES[name] for name in ("small-0", "small-1", "bad-nan")}
    first = cohort_spectra(meshes, 6, out=tmp_path, errors="keep")
    (tmp_path / "small-1.npz").unlink()  # as if the run had stopped before it
    (tmp_path / "small-0.npz").touch()  # untouched content: still a whole file
    ran = []
    again = cohort_spectra(meshes, 6, out=tmp_path, errors="keep", resume=True, progress=ran.append)
    assert len(ran) == 2  # small-1 and the bad mesh, not small-0
    assert [type(r).__name__ for r in again] == ["SubjectSpectrum", "SubjectSpectrum", "TaskFailure"]
    for a, b in zip(first[:2], again[:2]):
        np.testing.assert_array_equal(a.evals, b.evals)
        assert b.path == a.path
    ran.clear()
    cohort_spectra(meshes, 8, out=tmp_path, errors="keep", resume=True, progress=ran.append)
    assert len(ran) == 3  # another k: every subject again
    ran.clear()
    (tmp_path / "small-0.npz").write_bytes(b"cut short")
    cohort_spectra(meshes, 8, out=tmp_path, errors="keep", resume=True, keep_evecs=True, progress=ran.append)
    assert len(ran) == 3  # a damaged file, and files without the eigenvectors asked for
    ran.clear()
    whole = (tmp_path / "small-0.npz").read_bytes()
    (tmp_path / "small-0.npz").write_bytes(whole[: len(whole) // 2])  # a zip cut in the middle
    again = cohort_spectra(meshes, 8, out=tmp_path, errors="keep", resume=True, hks_times=[0.5, 1.0],
                           progress=ran.append)
    assert len(ran) == 3  # the cut file, and other HKS times for the others
    ran.clear()
    again = cohort_spectra(meshes, 8, out=tmp_path, errors="keep", resume=True, hks_times=[0.5, 1.0],
                           progress=ran.append)
    assert len(ran) == 1 and [r.resumed for r in again[:2]] == [True, True]  # only the bad mesh again


def test_resume_needs_out():
    with pytest.raises(ValueError, match="give out too"):
        cohort_spectra([MESHES["small-0"]], 4, resume=True)


def test_result_files_get_the_users_usual_mode(tmp_path):
    old = os.umask(0o022)
    try:
        (result,) = cohort_spectra([MESHES["small-0"]], 4, out=tmp_path)
    finally:
        os.umask(old)
    assert stat.S_IMODE(result.path.stat().st_mode) == 0o644  # not tempfile's 0600
    assert [p.name for p in tmp_path.iterdir()] == [result.path.name]


@pytest.mark.slow
def test_relative_paths_are_read_where_the_workers_are(cluster, tmp_path, monkeypatch):
    meshio = pytest.importorskip("meshio")
    v, f = MESHES["small-0"]
    meshio.write_points_cells(tmp_path / "rel.ply", v, [("triangle", f)])
    monkeypatch.chdir(tmp_path)  # the workers' working directory stays where they started
    (result,) = cohort_spectra(["rel.ply"], 4, client=cluster.client)
    assert result.name == "rel" and result.n_vertices == len(v)
