"""A cohort's files in float32 and compressed (``dtype=``, ``compress=``; ``--dtype``, ``--compress``).

float32 stores ``evecs``, ``hks`` and ``wks`` (the (N, ...) arrays) in half the bytes and
is part of the settings ``resume`` compares, so a run never keeps a file of the other
dtype; float64 stays the default, with the digests files carried before ``dtype`` existed.
Compression changes the bytes on disk, not the arrays: the same checked reader reads both,
CRC included, and ``resume`` keeps either.

Subjects: jittered level-2 icospheres (162 vertices, the dense route), k = 6.
"""

from __future__ import annotations

import csv
import zipfile

import numpy as np
import pytest
from kernelrt.kernels.laplacian import SubjectSpectrum, cohort_spectra, noisy_icosphere
from kernelrt.kernels.laplacian.cohort import settings_digest
from kernelrt.kernels.laplacian.cohort_store import check_spectrum_file, write_spectrum

from kernelrt.cli import main

K = 6
MESHES = {"a": noisy_icosphere(2, 0.1, seed=1), "b": noisy_icosphere(2, 0.1, seed=2)}
PER_VERTEX = ("evecs", "hks", "wks")
SMALL = ("evals", "hks_times", "wks_energies")


def _rewrite(path, **changes):
    """The file again with members replaced (None: removed), as another writer would leave it."""
    with np.load(path) as f:
        contents = {k: f[k] for k in f.files}
    contents.update(changes)
    np.savez(path, **{k: v for k, v in contents.items() if v is not None})


# -- dtype ---------------------------------------------------------------------------------------


def test_float32_stores_the_per_vertex_arrays_in_half_the_bytes(tmp_path):
    wide = cohort_spectra(MESHES, K, out=tmp_path / "64", keep_evecs=True)
    narrow = cohort_spectra(MESHES, K, out=tmp_path / "32", keep_evecs=True, dtype="float32")
    for w, n in zip(wide, narrow):
        a, b = SubjectSpectrum.load(w.path), SubjectSpectrum.load(n.path)
        assert (a.dtype, b.dtype) == ("float64", "float32") and n.dtype == "float32"
        for name in PER_VERTEX:
            x, y = getattr(a, name), getattr(b, name)
            assert x.dtype == np.float64 and y.dtype == np.float32
            # the float64 values rounded once (2**-24 of each entry); the atol covers the runs'
            # BLAS rounding order on entries near zero
            np.testing.assert_allclose(y, x, rtol=2.0 ** -23, atol=1e-12 * np.abs(x).max())
        for name in SMALL:
            assert getattr(b, name).dtype == np.float64
            np.testing.assert_allclose(getattr(b, name), getattr(a, name), rtol=1e-10)
        assert b.path.stat().st_size < 0.55 * a.path.stat().st_size
        assert a.settings != b.settings


def test_float32_without_out_returns_float32_arrays():
    (r,) = cohort_spectra([MESHES["a"]], K, keep_evecs=True, dtype=np.float32)
    assert r.dtype == "float32" and {getattr(r, n).dtype for n in PER_VERTEX} == {np.dtype(np.float32)}
    assert r.evals.dtype == np.float64


def test_float64_files_written_before_dtype_existed_are_still_resumed(tmp_path):
    # the digest those files carry, computed by the code before dtype= existed
    assert settings_digest(K) == settings_digest(K, dtype="float64") == "7d2042838b696107a582c5e7"
    (first,) = cohort_spectra({"a": MESHES["a"]}, K, out=tmp_path)
    _rewrite(first.path, dtype=None)  # no dtype member, as they were written
    ran = []
    (again,) = cohort_spectra({"a": MESHES["a"]}, K, out=tmp_path, resume=True, progress=ran.append)
    assert ran == [] and again.resumed and again.dtype == "float64"


def test_resume_never_mixes_dtypes(tmp_path):
    cohort_spectra(MESHES, K, out=tmp_path)
    ran = []
    results = cohort_spectra(MESHES, K, out=tmp_path, dtype="float32", resume=True, progress=ran.append)
    assert len(ran) == 2 and all(SubjectSpectrum.load(r.path).hks.dtype == np.float32 for r in results)
    ran.clear()
    cohort_spectra(MESHES, K, out=tmp_path, dtype=np.dtype("float32"), resume=True, progress=ran.append)
    assert ran == []
    cohort_spectra(MESHES, K, out=tmp_path, resume=True, progress=ran.append)
    assert len(ran) == 2


def test_a_file_whose_arrays_disagree_with_its_recorded_dtype_is_not_kept(tmp_path):
    (r,) = cohort_spectra({"a": MESHES["a"]}, K, out=tmp_path, dtype="float32")
    _rewrite(r.path, dtype=np.asarray("float64"))
    with pytest.raises(ValueError, match="records the dtype float64 but hks is float32, wks is float32"):
        check_spectrum_file(r.path)
    ran = []
    cohort_spectra({"a": MESHES["a"]}, K, out=tmp_path, dtype="float32", resume=True, progress=ran.append)
    assert len(ran) == 1
    _rewrite(r.path, dtype=np.asarray("float16"))
    with pytest.raises(ValueError, match="records the dtype 'float16', expected one of float64, float32"):
        check_spectrum_file(r.path)


@pytest.mark.parametrize("kwargs, words", [
    ({"dtype": "float16"}, "dtype must be float64 or float32 (got 'float16')"),
    ({"dtype": "double precision"}, "dtype must be float64 or float32"),
    ({"dtype": 32}, "dtype must be float64 or float32 (got 32)"),
    ({"compress": True, "out": None}, "compress=True compresses the files written to out=: give out too"),
])
def test_bad_dtype_or_compress_is_refused_before_any_subject_runs(tmp_path, kwargs, words):
    with pytest.raises(ValueError, match=words.replace("(", r"\(").replace(")", r"\)")):
        cohort_spectra(MESHES, K, **{"out": tmp_path / "never", **kwargs})
    assert not (tmp_path / "never").exists()


# -- compress ------------------------------------------------------------------------------------


def _compression(path) -> set:
    with zipfile.ZipFile(path) as z:
        return {i.compress_type for i in z.infolist()}


def test_a_compressed_file_holds_the_same_arrays(tmp_path):
    (s,) = cohort_spectra([MESHES["a"]], K, keep_evecs=True, names=["a"])
    (tmp_path / "plain").mkdir()
    (tmp_path / "packed").mkdir()
    plain, packed = write_spectrum(tmp_path / "plain", s), write_spectrum(tmp_path / "packed", s, compress=True)
    assert _compression(plain.path) == {zipfile.ZIP_STORED} and _compression(packed.path) == {zipfile.ZIP_DEFLATED}
    a, b = SubjectSpectrum.load(plain.path), SubjectSpectrum.load(packed.path)
    for name in PER_VERTEX + SMALL:
        np.testing.assert_array_equal(getattr(b, name), getattr(a, name))
    assert check_spectrum_file(packed.path)["settings"] == s.settings


def test_a_damaged_compressed_file_is_refused_and_computed_again(tmp_path):
    (r,) = cohort_spectra({"a": MESHES["a"]}, K, out=tmp_path, compress=True)
    data = bytearray(r.path.read_bytes())
    with zipfile.ZipFile(r.path) as z:
        info = z.getinfo("hks.npy")
    start = info.header_offset + 30 + len(info.filename) + len(info.extra)  # the local header's fixed 30 bytes
    data[start + info.compress_size // 2] ^= 0x01
    r.path.write_bytes(bytes(data))
    with pytest.raises(ValueError, match="cannot be read back"):
        check_spectrum_file(r.path)
    ran = []
    cohort_spectra({"a": MESHES["a"]}, K, out=tmp_path, compress=True, resume=True, progress=ran.append)
    assert len(ran) == 1 and _compression(r.path) == {zipfile.ZIP_DEFLATED}
    assert SubjectSpectrum.load(r.path).hks.shape == (162, 100)


def test_resume_keeps_files_compressed_or_not(tmp_path):
    cohort_spectra({"a": MESHES["a"]}, K, out=tmp_path, compress=True)
    ran = []
    cohort_spectra({"a": MESHES["a"], "b": MESHES["b"]}, K, out=tmp_path, resume=True, progress=ran.append)
    assert len(ran) == 1  # b only
    cohort_spectra({"a": MESHES["a"], "b": MESHES["b"]}, K, out=tmp_path, resume=True, compress=True,
                   progress=ran.append)
    assert len(ran) == 1
    assert _compression(tmp_path / "a.npz") == {zipfile.ZIP_DEFLATED}
    assert _compression(tmp_path / "b.npz") == {zipfile.ZIP_STORED}


# -- the command ---------------------------------------------------------------------------------


def test_the_command_writes_float32_compressed_files_and_resumes_them_only_as_float32(tmp_path, capsys):
    meshio = pytest.importorskip("meshio")
    for name, (v, f) in MESHES.items():
        meshio.write_points_cells(tmp_path / f"{name}.ply", v, [("triangle", f)])
    out = tmp_path / "out"
    argv = ["cohort", str(tmp_path / "a.ply"), str(tmp_path / "b.ply"), "--k", str(K), "--out", str(out),
            "--keep-evecs"]
    assert main([*argv, "--dtype", "float32", "--compress"]) == 0
    assert f"2 subjects, k = 6, hks, wks -> {out} (float32, compressed)" in capsys.readouterr().out
    for name in MESHES:
        back = SubjectSpectrum.load(out / f"{name}.npz")
        assert back.dtype == "float32" and back.evecs.dtype == np.float32 and back.evals.dtype == np.float64
        assert _compression(out / f"{name}.npz") == {zipfile.ZIP_DEFLATED}
    assert main([*argv, "--dtype", "float32", "--resume"]) == 0
    assert "(2 kept from an earlier run)" in capsys.readouterr().out
    assert main([*argv, "--resume"]) == 0  # float64 asked: computed again
    assert "kept" not in capsys.readouterr().out
    with open(out / "summary.csv", newline="") as f:
        assert [r["status"] for r in csv.DictReader(f)] == ["ok", "ok"]
    assert SubjectSpectrum.load(out / "a.npz").hks.dtype == np.float64


def test_the_command_refuses_another_dtype(tmp_path, capsys):
    with pytest.raises(SystemExit) as caught:
        main(["cohort", str(tmp_path), "--out", str(tmp_path / "never"), "--dtype", "float16"])
    assert caught.value.code == 2 and "argument --dtype: invalid choice: 'float16'" in capsys.readouterr().err
