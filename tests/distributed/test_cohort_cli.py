"""``kernelrt cohort``: subject surfaces from files, on a local Dask cluster and in this process.

The mesh directory holds jittered level-3 icospheres (642 vertices: the dense route) in two
formats, PLY (meshio) and FreeSurfer surfaces (nibabel; one named sub-03.lh.pial beside the
PLY files, two named lh.pial in per-subject subdirectories), a PLY of two disjoint spheres
that fails alone (DisconnectedMeshError) and a README.txt that the directory scan skips.
The command runs in this process through ``kernelrt.cli.main``; the module starts one
LocalCluster, in the ``local:2`` run.
"""

from __future__ import annotations

import csv
import importlib.util
import json
import re
import subprocess
import sys
from types import SimpleNamespace

import numpy as np
import pytest
from kernelrt.kernels.laplacian import (
    SubjectSpectrum,
    cotan_laplacian,
    eigenpairs,
    noisy_icosphere,
)

from kernelrt.cli import main

meshio = pytest.importorskip("meshio")
freesurfer = pytest.importorskip("nibabel.freesurfer")

K = 8
BAD = "bad-two-pieces"
# find_meshes' order: the directory's files by name, then the files and directories given after it;
# the two lh.pial get their directory's name (subject_names)
NAMES = [BAD, "sub-01", "sub-02", "sub-03.lh.pial", "sub-04_lh.pial", "sub-05_lh.pial"]
GOOD = NAMES[1:]
SUMMARY_LINE = re.compile(
    r"^6 subjects: 5 written to (.+?)(?: \((\d+) kept from an earlier run\))?, 1 failed \(\d+\.\d s, \d+\.\d subjects/min\)$")


@pytest.fixture(scope="module")
def cohort(tmp_path_factory) -> SimpleNamespace:
    """The mesh directory, the command's MESH arguments, and each good subject's serial eigenvalues."""
    root = tmp_path_factory.mktemp("meshes")
    stored = {}  # name: (vertices as the file stores them, faces)
    for seed, name in ((1, "sub-01"), (2, "sub-02")):
        v, f = noisy_icosphere(3, 0.1, seed=seed)
        meshio.write_points_cells(root / f"{name}.ply", v, [("triangle", f)])
        stored[name] = (v, f)
    for seed, path, name in ((3, root / "sub-03.lh.pial", "sub-03.lh.pial"),
                             (4, root / "sub-04" / "lh.pial", "sub-04_lh.pial"),
                             (5, root / "sub-05" / "lh.pial", "sub-05_lh.pial")):
        v, f = noisy_icosphere(3, 0.1, seed=seed)
        path.parent.mkdir(exist_ok=True)
        freesurfer.write_geometry(str(path), v, f)
        stored[name] = (v.astype(np.float32).astype(np.float64), f)  # FreeSurfer files hold float32
    v, f = noisy_icosphere(3, 0.1, seed=9)
    meshio.write_points_cells(root / f"{BAD}.ply", np.concatenate([v, v + 5.0]),
                              [("triangle", np.concatenate([f, f + len(v)]))])
    (root / "README.txt").write_text("two formats and one bad mesh\n")
    serial = {}
    for name, (v, f) in stored.items():
        L, m = cotan_laplacian(v, f)
        serial[name] = eigenpairs(L, m, K).evals
    meshes = [str(root), str(root / "sub-04" / "lh.pial"), str(root / "sub-05")]
    return SimpleNamespace(root=root, meshes=meshes, serial=serial)


def _check_outputs(out, code, printed, serial) -> None:
    """Exit 1, the good subjects written and equal to the serial loop, the summary file and table."""
    assert code == 1
    # hidden: the run's lock file (cohort_outdir.py)
    assert sorted(p.name for p in out.iterdir() if not p.name.startswith(".")) == sorted(
        [f"{n}.npz" for n in GOOD] + ["summary.csv"])
    assert sorted(p.name for p in out.iterdir() if p.name.startswith(".")) == [".kernelrt-cohort.lock"]
    for name in GOOD:
        back = SubjectSpectrum.load(out / f"{name}.npz")
        evals = serial[name]
        # Not bitwise: the runs differ in the threads BLAS and LAPACK use (Dask's nanny sets one
        # per worker, this process uses every core), so sums are rounded in another order.
        assert np.max(np.abs(back.evals - evals)) <= 1e-10 * evals[-1]
        assert back.n_vertices == 642 and back.hks is not None and back.wks is not None and back.evecs is None

    with open(out / "summary.csv", newline="") as f:
        rows = list(csv.DictReader(f))
    assert [r["name"] for r in rows] == NAMES
    assert [r["status"] for r in rows] == ["failed"] + ["ok"] * len(GOOD)
    bad = rows[0]
    assert bad["error"].startswith("DisconnectedMeshError: the mesh has 2 connected components")
    assert bad["n_vertices"] == bad["lambda_k"] == ""
    for r in rows[1:]:
        evals = serial[r["name"]]
        assert r["n_vertices"] == "642" and r["n_faces"] == "1280" and r["route"] == "dense"
        assert float(r["lambda_1"]) == pytest.approx(evals[1], rel=1e-10)  # evals[0] is the constant mode's 0
        assert float(r["lambda_k"]) == pytest.approx(evals[-1], rel=1e-10)
        assert float(r["max_residual"]) < 1e-8 and r["reports"] == "0" and r["error"] == ""

    lines = printed.out.strip().splitlines()
    header = next(i for i, line in enumerate(lines) if line.startswith("name "))
    assert lines[header].split() == ["name", "status", "n_vertices", "n_faces", "lambda_1", "lambda_k", "route",
                                     "max_residual", "seconds", "backend", "reports", "error"]
    table = lines[header + 1: header + 1 + len(NAMES)]
    assert [line.split()[0] for line in table] == NAMES
    assert table[0].split()[1] == "failed" and "DisconnectedMeshError: the mesh has 2 connected" in table[0]
    assert all(line.split()[1] == "ok" for line in table[1:])
    assert len({line.index(" ok ") for line in table[1:]}) == 1  # aligned
    summary = SUMMARY_LINE.match(lines[-1])
    assert summary and summary.group(1) == str(out)


@pytest.mark.slow
def test_a_cohort_on_a_local_cluster_writes_the_good_subjects_and_reports_the_bad_one(cohort, tmp_path, capsys):
    out = tmp_path / "run"
    code = main(["cohort", *cohort.meshes, "--k", str(K), "--scheduler", "local:2", "--out", str(out)])
    printed = capsys.readouterr()
    _check_outputs(out, code, printed, cohort.serial)
    workers = re.findall(r"^  tcp://\S+  (cpu|cuda)  \S", printed.out, re.MULTILINE)
    assert "workers: 2" in printed.out and len(workers) == 2
    if importlib.util.find_spec("bokeh") is None:  # the scheduler's link would lead to "install bokeh"
        assert "dashboard" not in printed.out


def test_without_a_scheduler_the_cohort_runs_in_this_process(cohort, tmp_path, capsys):
    out = tmp_path / "run"
    code = main(["cohort", *cohort.meshes, "--k", str(K), "--out", str(out)])
    printed = capsys.readouterr()
    _check_outputs(out, code, printed, cohort.serial)
    assert "running in this process" in printed.out and "workers" not in printed.out


def test_resume_keeps_what_a_cut_short_run_wrote(cohort, tmp_path, capsys):
    out = tmp_path / "run"
    main(["cohort", *cohort.meshes, "--k", str(K), "--out", str(out)])
    kept = (out / "sub-01.npz").stat().st_mtime_ns
    (out / "sub-02.npz").unlink()
    capsys.readouterr()
    code = main(["cohort", *cohort.meshes, "--k", str(K), "--out", str(out), "--resume"])
    printed = capsys.readouterr()
    _check_outputs(out, code, printed, cohort.serial)
    assert (out / "sub-01.npz").stat().st_mtime_ns == kept  # not written again
    assert SUMMARY_LINE.match(printed.out.strip().splitlines()[-1]).group(2) == "4"  # all good ones but sub-02


def test_the_commands_descriptors_are_the_functions():
    from kernelrt.kernels import cohort_cli
    from kernelrt.kernels.laplacian import cohort

    assert cohort_cli.DESCRIPTORS == cohort.DESCRIPTORS


def test_json_prints_the_rows_alone_on_stdout(cohort, tmp_path, capsys):
    out = tmp_path / "run"
    files = [str(cohort.root / "sub-01.ply"), str(cohort.root / f"{BAD}.ply")]
    code = main(["cohort", *files, "--k", str(K), "--out", str(out), "--descriptors", "", "--json"])
    printed = capsys.readouterr()
    assert code == 1
    rows = json.loads(printed.out)
    assert [(r["name"], r["status"]) for r in rows] == [("sub-01", "ok"), (BAD, "failed")]
    assert rows[0]["lambda_k"] == pytest.approx(cohort.serial["sub-01"][-1], rel=1e-10)
    assert rows[0]["error"] is None and rows[1]["n_vertices"] is None
    assert "connected components" in rows[1]["error"]
    assert "2 subjects: 1 written to" in printed.err  # the messages for people go to stderr
    back = SubjectSpectrum.load(out / "sub-01.npz")
    assert back.hks is None and back.wks is None  # --descriptors '': eigenpairs only
    assert (out / "summary.csv").is_file()


@pytest.mark.parametrize("argv, words", [
    (["--k", "0"], "argument --k: expected a positive integer"),
    (["--scheduler", "local:0"], "argument --scheduler: local:N takes a positive number"),
    (["--scheduler", "local:x"], "argument --scheduler: local:N takes a positive number"),
    (["--descriptors", "hks,dks"], "argument --descriptors: unknown descriptor 'dks'"),
    (["--threads-per-task", "2"], "--threads-per-task applies to a Dask run"),
    (["MISSING"], "mesh file or directory not found"),
    (["EMPTY"], "holds no mesh files"),
])
def test_bad_arguments_exit_2_before_anything_runs(cohort, tmp_path, capsys, argv, words):
    (tmp_path / "empty").mkdir()
    places = {"MISSING": str(tmp_path / "missing.ply"), "EMPTY": str(tmp_path / "empty")}
    argv = [places.get(a, a) for a in argv]
    meshes = [] if set(places.values()) & set(argv) else cohort.meshes
    out = tmp_path / "never"
    with pytest.raises(SystemExit) as caught:
        main(["cohort", *meshes, "--out", str(out), *argv])
    err = capsys.readouterr().err
    assert caught.value.code == 2
    error = " ".join(err.split()).partition("kernelrt cohort: error: ")[2]  # after argparse's usage lines
    assert err.startswith("usage: kernelrt cohort") and words in error
    assert not out.exists()


def test_help_says_where_the_files_are_read(capsys):
    with pytest.raises(SystemExit) as caught:
        main(["cohort", "--help"])
    assert caught.value.code == 0
    assert "every worker must see them at the same paths" in " ".join(capsys.readouterr().out.split())


def test_the_kernelrt_command_imports_no_heavy_modules():
    # `kernelrt --help` imports the cohort parser: it must not pull in numba or Dask (seconds)
    heavy = ("numba", "dask", "distributed", "meshio", "nibabel")
    code = f"import sys, kernelrt.cli; print([m for m in {heavy!r} if m in sys.modules])"
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert result.stdout.strip() == "[]"
