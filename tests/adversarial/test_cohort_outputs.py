"""``kernelrt cohort``'s output directory under faults (issue 25, items 5, 6 and 8).

Each test failed before its fix: ``--resume`` kept a subject whose mesh file had changed
and one whose ``hks`` was corrupt (exit 0, BadZipFile on loading it); stale ``.part``
files stayed; a second run into the same ``--out`` ran alongside the first and
summary.csv lost the other run's subjects; an unwritable ``--out`` or parent, and a full
disk, ended in tracebacks (exit 1, no summary.csv).

The meshes are level-1 icospheres (42 vertices), k = 4: a run takes well under a second.
Tests run as root, who may write anywhere: permission tests run the command as a second
local user (``OtherUser``; skipped with the reason where none can be made), a full disk
is simulated in-process (the writer raises ENOSPC), and "a file where a directory should
be" is a real, root-proof unwritable parent.
"""

from __future__ import annotations

import csv
import errno
import os
import pwd
import shutil
import subprocess
import sys
import tempfile
import time
import zipfile
from pathlib import Path

import numpy as np
import pytest
from kernelrt.kernels.laplacian import SubjectSpectrum, cohort_store, noisy_icosphere

from kernelrt.cli import main

meshio = pytest.importorskip("meshio")
K = ["--k", "4"]
USER = "krtother"


class OtherUser:
    """A world-traversable scratch directory and ``kernelrt`` run as the local user ``krtother``."""

    def __enter__(self):
        if os.geteuid() != 0:
            pytest.skip("running the command as a second user needs root (to create it and switch to it)")
        try:
            pwd.getpwnam(USER)
        except KeyError:
            made = subprocess.run(["useradd", "--no-create-home", "--shell", "/usr/sbin/nologin", USER],
                                  capture_output=True, text=True)
            if made.returncode not in (0, 9):  # 9: made meanwhile by another test process
                pytest.skip(f"cannot create the local user {USER}: {made.stderr.strip() or made.returncode}")
        self.dir = Path(tempfile.mkdtemp(prefix="kernelrt-other-user-"))
        os.chmod(self.dir, 0o755)
        self.home = self.dir / "home"
        self.home.mkdir(mode=0o777)
        os.chmod(self.home, 0o777)
        try:
            probe = self.kernelrt(["--help"])
        except OSError as e:  # this interpreter lives where the user cannot reach (a root-only pyenv)
            self.__exit__()
            pytest.skip(f"{USER} cannot run {sys.executable}: {e}")
        if probe.returncode != 0:
            self.__exit__()
            pytest.skip(f"{USER} cannot run kernelrt: {probe.stderr.strip()[-300:]}")
        return self

    def kernelrt(self, argv) -> subprocess.CompletedProcess:
        env = {"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "HOME": str(self.home),
               "NUMBA_CACHE_DIR": str(self.home / "numba"), "KERNELRT_CACHE_DIR": str(self.home / "kernelrt"),
               "PYTHONDONTWRITEBYTECODE": "1"}
        return subprocess.run([sys.executable, "-m", "kernelrt", *argv], user=USER, cwd=self.home, env=env,
                              capture_output=True, text=True, timeout=120)

    def __exit__(self, *exc):
        shutil.rmtree(self.dir, ignore_errors=True)


def _mesh(path: Path, seed: int) -> np.ndarray:
    v, f = noisy_icosphere(1, 0.1, seed=seed)
    meshio.write_points_cells(path, v, [("triangle", f)], binary=True)
    return v


@pytest.fixture
def meshes(tmp_path) -> Path:
    d = tmp_path / "meshes"
    d.mkdir()
    for i in (1, 2, 3):
        _mesh(d / f"sub-0{i}.ply", seed=i)
    return d


def _summary(out: Path) -> dict:
    with open(out / "summary.csv", newline="") as f:
        return {r["name"]: r for r in csv.DictReader(f)}


def _cohort(*argv) -> int:
    return main(["cohort", *argv, *K])


# -- item 5: --resume keeps only what is whole and of the same mesh -----------------------------


def test_resume_computes_again_a_subject_whose_mesh_file_changed(meshes, tmp_path, capsys):
    out = tmp_path / "out"
    assert _cohort(str(meshes), "--out", str(out)) == 0
    before = SubjectSpectrum.load(out / "sub-02.npz").evals
    _mesh(meshes / "sub-02.ply", seed=22)  # same name, another surface
    kept = (out / "sub-01.npz").stat().st_mtime_ns
    assert _cohort(str(meshes), "--out", str(out), "--resume") == 0
    printed = capsys.readouterr().out
    after = SubjectSpectrum.load(out / "sub-02.npz").evals
    fresh = tmp_path / "fresh"
    _cohort(str(meshes / "sub-02.ply"), "--out", str(fresh))
    assert not np.allclose(after, before)  # the old spectrum was kept before the fix
    np.testing.assert_allclose(after, SubjectSpectrum.load(fresh / "sub-02.npz").evals, rtol=1e-10)
    assert (out / "sub-01.npz").stat().st_mtime_ns == kept  # unchanged meshes are still kept
    assert "(2 kept from an earlier run)" in printed


def test_library_resume_computes_again_a_subject_whose_arrays_changed(tmp_path):
    # cohort_spectra(resume=True) itself, with in-memory meshes: the mesh digest is in each file
    from kernelrt.kernels.laplacian import cohort_spectra
    from kernelrt.kernels.laplacian.meshes import icosphere

    v, f = icosphere(1)
    meshes = {"a": (v, f), "b": (v * 1.5, f)}
    out = tmp_path / "out"
    first = cohort_spectra(meshes, k=4, out=out)
    meshes["b"] = (v * [1.0, 2.0, 1.0], f)  # same name, another surface
    again = cohort_spectra(meshes, k=4, out=out, resume=True)
    assert [s.resumed for s in again] == [True, False]
    fresh = cohort_spectra({"b": meshes["b"]}, k=4)[0]
    np.testing.assert_allclose(SubjectSpectrum.load(out / "b.npz").evals, fresh.evals, rtol=1e-10)
    assert not np.allclose(again[1].evals, first[1].evals)  # before the fix: the old spectrum, resumed


def _corrupt_member(path: Path, member: str) -> None:
    """Flip bytes in the middle of one array's data inside the .npz (its CRC no longer matches)."""
    with zipfile.ZipFile(path) as z:
        info = z.getinfo(f"{member}.npy")
    data = bytearray(path.read_bytes())
    start = info.header_offset + 30 + len(info.filename.encode()) + len(info.extra)  # local header
    at = start + info.compress_size // 2
    data[at: at + 8] = bytes(b ^ 0xFF for b in data[at: at + 8])
    path.write_bytes(bytes(data))


def test_resume_computes_again_a_file_whose_hks_is_corrupt(meshes, tmp_path, capsys):
    out = tmp_path / "out"
    assert _cohort(str(meshes), "--out", str(out)) == 0
    _corrupt_member(out / "sub-03.npz", "hks")
    with pytest.raises(zipfile.BadZipFile):
        SubjectSpectrum.load(out / "sub-03.npz")
    for name, kept in (("sub-01", True), ("sub-03", False)):
        mesh = cohort_store.mesh_digest(path=meshes / f"{name}.ply")
        found = cohort_store.finished_spectrum(out, name, _settings(out / "sub-01.npz"), ("hks",), mesh)
        assert (found is not None) == kept
    assert _cohort(str(meshes), "--out", str(out), "--resume") == 0
    assert "(2 kept from an earlier run)" in capsys.readouterr().out
    assert np.all(np.isfinite(SubjectSpectrum.load(out / "sub-03.npz").hks))  # whole again


def _settings(path: Path) -> str:
    with np.load(path, allow_pickle=False) as f:
        return str(f["settings"])


def test_a_kept_file_with_a_wrong_shape_or_nan_is_not_kept(meshes, tmp_path):
    out = tmp_path / "out"
    _cohort(str(meshes), "--out", str(out))
    path = out / "sub-01.npz"
    good = SubjectSpectrum.load(path)
    settings, mesh = _settings(path), good.mesh
    assert cohort_store.finished_spectrum(out, "sub-01", settings, ("hks", "wks"), mesh) is not None
    for field, bad in (("hks", good.hks[:-1]), ("wks", np.full_like(good.wks, np.nan))):
        with np.load(path, allow_pickle=False) as f:
            contents = {k: f[k] for k in f.files}
        contents[field] = bad
        np.savez(out / "sub-09.npz", **contents)
        assert cohort_store.finished_spectrum(out, "sub-09", settings, ("hks", "wks"), mesh) is None
        with pytest.raises(ValueError, match=field):
            cohort_store.check_spectrum_file(out / "sub-09.npz")


def test_stale_part_files_are_removed_at_the_start_and_only_ours(meshes, tmp_path, capsys):
    out = tmp_path / "out"
    out.mkdir()
    stale = [out / ".sub-01.npz.0123456789ab.part", out / ".summary.csv.deadbeef0000.part"]
    others = [out / "notes.part", out / ".sub-01.npz.part", out / ".x.npz.0123456789AB.part",
              out / ".video.mp4.0123456789ab.part"]  # another program's download: not ours
    for p in stale + others:
        p.write_bytes(b"half")
    assert _cohort(str(meshes), "--out", str(out), "--resume") == 0
    assert not any(p.exists() for p in stale) and all(p.exists() for p in others)
    assert "removed 2 temporary files a killed run left" in capsys.readouterr().out


# -- item 6: one run at a time per --out; summary.csv from what is on disk ------------------------


def test_a_lock_file_planted_as_a_symlink_is_refused_and_its_target_kept(meshes, tmp_path, capsys):
    # Writing the holder's pid through the link would truncate any file the user can write.
    out, victim = tmp_path / "out", tmp_path / "victim.txt"
    out.mkdir()
    victim.write_text("precious")
    (out / ".kernelrt-cohort.lock").symlink_to(victim)
    with pytest.raises(SystemExit) as caught:
        _cohort(str(meshes), "--out", str(out))
    assert caught.value.code == 2
    assert "is a symlink" in capsys.readouterr().err
    assert victim.read_text() == "precious" and not list(out.glob("*.npz"))


def test_a_second_run_into_a_held_out_exits_2_naming_the_holders_pid(meshes, tmp_path, capsys):
    out = tmp_path / "out"
    out.mkdir()
    # another run, as the lock file records it: flock held, "pid host" inside
    holder = subprocess.Popen([sys.executable, "-c", (
        "import fcntl, os, time\n"
        f"fd = os.open({str(out / '.kernelrt-cohort.lock')!r}, os.O_RDWR | os.O_CREAT)\n"
        "fcntl.flock(fd, fcntl.LOCK_EX); os.write(fd, f'{os.getpid()} otherhost'.encode())\n"
        "print('held', flush=True); time.sleep(60)")], stdout=subprocess.PIPE, text=True)
    try:
        assert holder.stdout.readline().strip() == "held"
        with pytest.raises(SystemExit) as caught:
            _cohort(str(meshes), "--out", str(out))
        err = capsys.readouterr().err
    finally:
        holder.kill()
        holder.wait()
    assert caught.value.code == 2
    assert f"--out {out} is in use by another kernelrt cohort run (pid {holder.pid} on otherhost)" in " ".join(err.split())
    assert not list(out.glob("*.npz")) and not (out / "summary.csv").exists()
    assert _cohort(str(meshes), "--out", str(out)) == 0  # the holder's lock went with it


def test_summary_lists_every_subject_on_disk_not_only_the_last_runs(meshes, tmp_path, capsys):
    out = tmp_path / "out"
    assert _cohort(str(meshes / "sub-01.ply"), str(meshes / "sub-02.ply"), "--out", str(out)) == 0
    assert _cohort(str(meshes / "sub-03.ply"), "--out", str(out)) == 0
    rows = _summary(out)
    assert list(rows) == ["sub-03", "sub-01", "sub-02"]  # this run's, then the others on disk
    assert all(r["status"] == "ok" and r["n_vertices"] == "42" for r in rows.values())
    assert "summary.csv also lists 2 subjects of earlier runs" in capsys.readouterr().out


# -- item 8: output problems found first, and reported --------------------------------------------


def test_an_out_under_a_file_exits_2_before_any_work(meshes, tmp_path, capsys):
    (tmp_path / "file").write_text("not a directory")
    with pytest.raises(SystemExit) as caught:
        _cohort(str(meshes), "--out", str(tmp_path / "file" / "out"))
    err = capsys.readouterr().err
    assert caught.value.code == 2 and "--out: cannot write to" in err and "Not a directory" in err


def test_an_out_the_user_cannot_write_exits_2_before_any_subject_runs():
    with OtherUser() as other:
        meshes, out = other.dir / "meshes", other.dir / "out"
        meshes.mkdir()
        _mesh(meshes / "sub-01.ply", seed=1)
        out.mkdir(mode=0o755)  # root's: the other user may read it, not write
        t0 = time.perf_counter()
        result = other.kernelrt(["cohort", str(meshes), *K, "--out", str(out)])
        seconds = time.perf_counter() - t0
        assert not any(out.iterdir())
    assert result.returncode == 2, result.stderr
    assert f"--out: cannot write to {out}: Permission denied" in result.stderr and "Traceback" not in result.stderr
    assert "subject" not in result.stdout, (result.stdout, seconds)  # nothing ran


def test_a_probe_that_cannot_be_written_exits_2_before_any_subject_runs(meshes, tmp_path, capsys, monkeypatch):
    # What the second-user test shows with real permissions, here for root: the probe's
    # os.open fails as it would for a user without write permission (EACCES).
    from kernelrt.kernels.laplacian import cohort_outdir

    real_open = os.open

    def refusing(path, *a, **kw):
        if ".kernelrt-probe-" in str(path):
            raise PermissionError(errno.EACCES, os.strerror(errno.EACCES), str(path))
        return real_open(path, *a, **kw)

    monkeypatch.setattr(cohort_outdir.os, "open", refusing)
    with pytest.raises(SystemExit) as caught:
        _cohort(str(meshes), "--out", str(tmp_path / "out"))
    printed = capsys.readouterr()
    assert caught.value.code == 2 and "--out: cannot write to" in printed.err and "Permission denied" in printed.err
    assert "subject" not in printed.out and not list((tmp_path / "out").iterdir())


def test_a_full_disk_stops_the_run_reports_it_and_still_writes_the_summary(meshes, tmp_path, capsys, monkeypatch):
    real = cohort_store.replaced_atomically
    written = []

    def full_after_one(path, *a, **kw):  # one subject fits, then the disk is full (summary.csv still fits)
        if str(path).endswith(".npz"):
            if written:
                raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC), str(path))
            written.append(path)
        return real(path, *a, **kw)

    monkeypatch.setattr(cohort_store, "replaced_atomically", full_after_one)
    out = tmp_path / "out"
    assert _cohort(str(meshes), "--out", str(out)) == 1
    printed = capsys.readouterr().out
    assert "the run stopped: OSError: [Errno 28] No space left on device" in printed
    rows = _summary(out)
    assert [r["status"] for r in rows.values()] == ["ok", "failed", "failed"]
    assert "not written: the run stopped: OSError: [Errno 28]" in rows["sub-02"]["error"]
    assert sorted(p.name for p in out.glob("*.npz")) == ["sub-01.npz"] and not list(out.glob(".*.part"))


def test_after_a_full_disk_an_earlier_file_of_another_mesh_is_not_reported_ok(meshes, tmp_path, capsys,
                                                                              monkeypatch):
    # The summary after a stop lists as ok only files resume would keep: an earlier run's
    # file of the same mesh and settings is, one of a mesh edited since is not.
    out = tmp_path / "out"
    assert _cohort(str(meshes), "--out", str(out)) == 0
    _mesh(meshes / "sub-03.ply", seed=33)  # edited since: its old file describes another surface
    real = cohort_store.replaced_atomically

    def full(path, *a, **kw):
        if str(path).endswith(".npz"):
            raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC), str(path))
        return real(path, *a, **kw)

    monkeypatch.setattr(cohort_store, "replaced_atomically", full)
    capsys.readouterr()
    assert _cohort(str(meshes), "--out", str(out)) == 1
    rows = _summary(out)
    assert {n: r["status"] for n, r in rows.items()} == {"sub-01": "ok", "sub-02": "ok", "sub-03": "failed"}
    assert "not written: the run stopped" in rows["sub-03"]["error"]
