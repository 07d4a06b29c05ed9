"""Subject names for FreeSurfer trees, and ``kernelrt cohort --subjects-dir`` (issue 26).

Before: every subject's ``surf/lh.pial`` was named ``lh.pial`` when it was alone in a run,
``bert_surf_lh.pial`` beside another subject's, so one subject's name (its output file)
depended on the rest of the cohort, and two runs into one ``--out`` overwrote each other.
Now a file in ``<subject>/surf/`` is ``<subject>_<hemi>.<surf>`` whatever else runs.

The subjects directory holds FreeSurfer surfaces written by nibabel on jittered level-1
icospheres (42 vertices), k = 4: a run takes well under a second.
"""

from __future__ import annotations

import csv
from pathlib import Path

import pytest
from kernelrt.kernels.laplacian import cotan_laplacian, eigenpairs, noisy_icosphere
from kernelrt.kernels.laplacian.mesh_files import freesurfer_surfaces, subject_names
from kernelrt.kernels.laplacian.mesh_io import read_mesh

from kernelrt.cli import main

K = 4


# -- names -------------------------------------------------------------------------------------


def test_a_surf_directory_names_its_files_after_the_subject(tmp_path):
    paths = [tmp_path / s / "surf" / f"{h}.pial" for s in ("bert", "ernie") for h in ("lh", "rh")]
    assert subject_names(paths) == ["bert_lh.pial", "bert_rh.pial", "ernie_lh.pial", "ernie_rh.pial"]


def test_a_subjects_name_does_not_depend_on_the_rest_of_the_cohort(tmp_path):
    bert = tmp_path / "bert" / "surf" / "rh.pial"
    assert subject_names([bert]) == ["bert_rh.pial"]  # was "rh.pial"
    assert subject_names([bert, tmp_path / "ernie" / "surf" / "rh.pial"]) == ["bert_rh.pial", "ernie_rh.pial"]
    assert subject_names(["bert/surf/lh.white"]) == ["bert_lh.white"]  # relative paths too


def test_one_subject_in_two_subjects_dirs_gets_the_directory_above_it(tmp_path):
    names = subject_names([tmp_path / "site-a" / "bert" / "surf" / "lh.pial",
                           tmp_path / "site-b" / "bert" / "surf" / "lh.pial"])
    assert names == ["site-a_bert_lh.pial", "site-b_bert_lh.pial"]


def test_other_meshes_in_a_surf_directory_take_the_subject_too(tmp_path):
    surf = tmp_path / "my subject" / "surf"
    names = subject_names([surf / "lh.midthickness.surf.gii", surf / "lh.x.ply", surf / "lh.x.obj"])
    assert names == ["my_subject_lh.midthickness", "my_subject_lh.x.ply", "my_subject_lh.x.obj"]


def test_plain_mesh_folders_keep_their_names(tmp_path):
    paths = [tmp_path / "bunny.ply", tmp_path / "meshes" / "sub-01.ply", tmp_path / "d" / "lh.pial"]
    assert subject_names(paths) == ["bunny", "sub-01", "lh.pial"]
    assert subject_names(["/surf/lh.pial"]) == ["lh.pial"]  # a surf/ at the root has no subject above it


# -- finding a SUBJECTS_DIR's surfaces ---------------------------------------------------------


def _subjects_dir(root: Path, surfaces: dict) -> dict:
    """FreeSurfer surfaces {subject: [file names]} under ``root``; returns {path: eigenvalues}."""
    evals = {}
    from nibabel.freesurfer import write_geometry

    for seed, (subject, names) in enumerate(sorted(surfaces.items())):
        (root / subject / "surf").mkdir(parents=True)
        for i, name in enumerate(names):
            path = root / subject / "surf" / name
            v, f = noisy_icosphere(1, 0.1, seed=10 * seed + i)
            write_geometry(str(path), v, f)
            L, m = cotan_laplacian(*read_mesh(path))  # the float32 coordinates the file holds
            evals[path] = eigenpairs(L, m, K).evals
    return evals


@pytest.fixture
def subjects(tmp_path):
    """bert: both pial and lh.white; ernie: lh.pial only; carl: mri/ only (recon-all stopped early);
    and entries that are not subjects."""
    pytest.importorskip("nibabel")
    pytest.importorskip("meshio")
    root = tmp_path / "subjects"
    evals = _subjects_dir(root, {"bert": ["lh.pial", "rh.pial", "lh.white"], "ernie": ["lh.pial"]})
    (root / "carl" / "mri").mkdir(parents=True)
    (root / "scripts").mkdir()  # neither surf/ nor mri/: not a subject
    (root / ".Trash" / "surf").mkdir(parents=True)  # hidden
    (root / "README.txt").write_text("not a subject\n")
    return root, evals


def test_freesurfer_surfaces_lists_every_subjects_surfaces_present_or_not(subjects):
    root, _ = subjects
    assert freesurfer_surfaces(root) == [root / s / "surf" / f"{h}.pial" for s in ("bert", "carl", "ernie")
                                         for h in ("lh", "rh")]
    assert freesurfer_surfaces(root, surfaces=("white", "pial"), hemis="rh") == [
        root / s / "surf" / f"rh.{x}" for s in ("bert", "carl", "ernie") for x in ("white", "pial")]


@pytest.mark.parametrize("where, kwargs, error, words", [
    ("missing", {}, FileNotFoundError, "subjects directory not found"),
    ("file", {}, NotADirectoryError, "is a file, not a FreeSurfer subjects directory"),
    ("empty", {}, ValueError, "holds no FreeSurfer subject"),
    ("empty", {"surfaces": ("curv",)}, ValueError, "surfaces must be among pial, white"),
    ("empty", {"hemis": ("both",)}, ValueError, "hemis must be among lh, rh"),
    ("empty", {"surfaces": ()}, ValueError, "surfaces must be among"),
])
def test_freesurfer_surfaces_refuses_what_is_not_a_subjects_dir(tmp_path, where, kwargs, error, words):
    (tmp_path / "empty").mkdir()
    (tmp_path / "file").write_text("x")
    with pytest.raises(error, match=words):
        freesurfer_surfaces(tmp_path / where, **kwargs)


# -- kernelrt cohort --subjects-dir --------------------------------------------------------------


def _rows(out: Path) -> list[dict]:
    with open(out / "summary.csv", newline="") as f:
        return list(csv.DictReader(f))


def _check_ok_rows(rows, evals, root):
    for r in rows:
        if r["status"] == "ok":
            subject, _, surface = r["name"].partition("_")
            expected = evals[root / subject / "surf" / surface]
            # one process, but the eigensolver's BLAS threads may sum in another order: not bitwise
            assert float(r["lambda_k"]) == pytest.approx(expected[-1], rel=1e-10)
            assert r["n_vertices"] == "42"


def test_subjects_dir_runs_every_subject_and_fails_the_missing_surfaces(subjects, tmp_path, capsys):
    root, evals = subjects
    out = tmp_path / "out"
    code = main(["cohort", "--subjects-dir", str(root), "--k", str(K), "--out", str(out), "--descriptors", ""])
    printed = capsys.readouterr().out
    assert code == 1
    rows = _rows(out)
    assert [(r["name"], r["status"]) for r in rows] == [
        ("bert_lh.pial", "ok"), ("bert_rh.pial", "ok"), ("carl_lh.pial", "failed"), ("carl_rh.pial", "failed"),
        ("ernie_lh.pial", "ok"), ("ernie_rh.pial", "failed")]
    assert rows[2]["error"] == f"FileNotFoundError: mesh file not found: {root / 'carl' / 'surf' / 'lh.pial'}"
    _check_ok_rows(rows, evals, root)
    assert sorted(p.name for p in out.glob("*.npz")) == ["bert_lh.pial.npz", "bert_rh.pial.npz", "ernie_lh.pial.npz"]
    assert "3 surfaces not found, failed rows: carl_lh.pial, carl_rh.pial, ernie_rh.pial" in printed


def test_hemi_and_surf_choose_the_surfaces(subjects, tmp_path, capsys):
    root, evals = subjects
    out = tmp_path / "out"
    code = main(["cohort", "--subjects-dir", str(root), "--hemi", "lh", "--surf", "white,pial", "--k", str(K),
                 "--out", str(out), "--descriptors", ""])
    assert code == 1  # carl has no surfaces, ernie no lh.white
    rows = _rows(out)
    assert [(r["name"], r["status"]) for r in rows] == [
        ("bert_lh.white", "ok"), ("bert_lh.pial", "ok"), ("carl_lh.white", "failed"), ("carl_lh.pial", "failed"),
        ("ernie_lh.white", "failed"), ("ernie_lh.pial", "ok")]
    _check_ok_rows(rows, evals, root)


def test_subjects_dir_defaults_to_freesurfers_variable(subjects, tmp_path, capsys, monkeypatch):
    """With no MESH and no --subjects-dir, FreeSurfer's SUBJECTS_DIR is the subjects directory."""
    root, evals = subjects
    out = tmp_path / "out"
    monkeypatch.setenv("SUBJECTS_DIR", str(root))
    code = main(["cohort", "--hemi", "lh", "--k", str(K), "--out", str(out), "--descriptors", ""])
    assert code == 1  # carl has no surfaces
    assert f"--subjects-dir {root} (from SUBJECTS_DIR)" in capsys.readouterr().err
    rows = _rows(out)
    assert [(r["name"], r["status"]) for r in rows] == [
        ("bert_lh.pial", "ok"), ("carl_lh.pial", "failed"), ("ernie_lh.pial", "ok")]
    _check_ok_rows(rows, evals, root)
    monkeypatch.delenv("SUBJECTS_DIR")
    with pytest.raises(SystemExit) as e:  # unset: nothing to run is still a usage error
        main(["cohort", "--k", str(K), "--out", str(tmp_path / "out2")])
    assert e.value.code == 2


def test_mesh_files_and_a_subjects_dir_run_together_each_file_once(subjects, tmp_path, capsys):
    root, evals = subjects
    out = tmp_path / "out"
    code = main(["cohort", str(root / "bert" / "surf" / "lh.pial"), "--subjects-dir", str(root), "--hemi", "lh",
                 "--k", str(K), "--out", str(out), "--descriptors", ""])
    assert code == 1
    assert [r["name"] for r in _rows(out)] == ["bert_lh.pial", "carl_lh.pial", "ernie_lh.pial"]


@pytest.mark.parametrize("argv, words", [
    (["--surf", "white", "MESH"], "--surf and --hemi choose the surfaces of --subjects-dir: give it too"),
    (["--hemi", "lh", "MESH"], "--surf and --hemi choose the surfaces of --subjects-dir: give it too"),
    ([], "give MESH files or directories, or --subjects-dir"),
    (["--subjects-dir", "MISSING"], "subjects directory not found"),
    (["--subjects-dir", "EMPTY"], "holds no FreeSurfer subject (a directory with surf/ or mri/ in it)"),
    (["--subjects-dir", "EMPTY", "--surf", "curv"], "argument --surf: expected surfaces among pial,white"),
    (["--subjects-dir", "EMPTY", "--hemi", "left"], "argument --hemi: invalid choice: 'left'"),
])
def test_bad_subjects_dir_arguments_exit_2_before_anything_runs(tmp_path, capsys, argv, words):
    (tmp_path / "empty").mkdir()
    (tmp_path / "sub.ply").write_text("")
    places = {"MISSING": str(tmp_path / "missing"), "EMPTY": str(tmp_path / "empty"), "MESH": str(tmp_path / "sub.ply")}
    out = tmp_path / "never"
    with pytest.raises(SystemExit) as caught:
        main(["cohort", *[places.get(a, a) for a in argv], "--out", str(out)])
    assert caught.value.code == 2
    assert words in " ".join(capsys.readouterr().err.split())
    assert not out.exists()


def test_the_commands_surface_names_are_mesh_files():
    from kernelrt.kernels import cohort_cli
    from kernelrt.kernels.laplacian import mesh_files

    assert cohort_cli.SURFACES == mesh_files.FREESURFER_SURFACES
    assert cohort_cli.HEMIS["both"] == mesh_files.FREESURFER_HEMIS
    assert {h for h in cohort_cli.HEMIS if h != "both"} == set(mesh_files.FREESURFER_HEMIS)
