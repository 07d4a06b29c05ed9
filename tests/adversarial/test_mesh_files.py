"""Mesh files that lie (issue 25, item 7): cut short, headers claiming more than the file holds,
links that lead nowhere, a directory that cannot be listed.

Each test failed before its fix: a binary PLY cut at a face boundary read as a surface with
a hole; a 6 KB PLY claiming 10^8 faces cost meshio 28 s and 2.5 GB; dangling links and
loops in a scanned directory vanished from the cohort (exit 0); an unreadable mesh
directory ended in a traceback.
"""

from __future__ import annotations

import csv
import os
import struct
import time

import numpy as np
import pytest
from kernelrt.kernels.laplacian import noisy_icosphere
from kernelrt.kernels.laplacian.mesh_io import find_meshes, read_mesh

from kernelrt.cli import main

from .test_cohort_outputs import OtherUser

meshio = pytest.importorskip("meshio")
freesurfer = pytest.importorskip("nibabel.freesurfer")


def _ply(path, binary=True, level=1, seed=1):
    v, f = noisy_icosphere(level, 0.1, seed=seed)
    meshio.write_points_cells(path, v, [("triangle", f)], binary=binary)
    data = path.read_bytes()
    return data, data.index(b"end_header\n") + len(b"end_header\n"), len(v), len(f)


def test_a_binary_ply_cut_at_a_face_boundary_is_an_error_not_a_surface_with_a_hole(tmp_path):
    data, header, nv, nf = _ply(tmp_path / "whole.ply")
    cut = tmp_path / "cut.ply"
    cut.write_bytes(data[: header + 24 * nv + 13 * (nf - 5)])  # 5 whole faces short
    with pytest.raises(ValueError) as info:
        read_mesh(cut)
    message = str(info.value)
    assert str(cut) in message and "too short for its header" in message
    assert f"{nf} face rows of at least 13 bytes" in message and f"the file has {len(data) - 65:,}" in message


def test_a_header_claiming_1e8_faces_is_refused_before_anything_is_allocated(tmp_path):
    path = tmp_path / "liar.ply"
    head = ("ply\nformat binary_little_endian 1.0\nelement vertex 3\nproperty double x\nproperty double y\n"
            "property double z\nelement face 100000000\nproperty list uchar int vertex_indices\nend_header\n")
    path.write_bytes(head.encode() + struct.pack("<9d", 0, 0, 0, 1, 0, 0, 0, 1, 0) + struct.pack("<B3i", 3, 0, 1, 2) * 450)
    assert path.stat().st_size < 6500
    t0 = time.perf_counter()
    with pytest.raises(ValueError, match=r"100,000,000 face rows of at least 13 bytes need at least 1,300,000,\d+ bytes"):
        read_mesh(path)
    assert time.perf_counter() - t0 < 2.0  # meshio took 28 s (and 2.5 GB) to fail on it


def test_an_ascii_ply_and_an_off_file_with_lying_counts_are_refused_by_size(tmp_path):
    _, _, nv, nf = _ply(tmp_path / "a.ply", binary=False)
    text = (tmp_path / "a.ply").read_text().replace(f"element face {nf}", "element face 100000000")
    (tmp_path / "b.ply").write_text(text)
    with pytest.raises(ValueError, match="ASCII PLY header and .*100,000,000 face rows of at least 8 bytes"):
        read_mesh(tmp_path / "b.ply")
    (tmp_path / "c.off").write_text("OFF\n3 100000000 0\n0 0 0\n1 0 0\n0 1 0\n3 0 1 2\n")
    with pytest.raises(ValueError, match="c.off is too short for its header: 3 OFF vertices"):
        read_mesh(tmp_path / "c.off")


def test_a_short_freesurfer_surface_and_binary_stl_say_what_was_expected(tmp_path):
    v, f = noisy_icosphere(1, 0.1, seed=2)
    freesurfer.write_geometry(str(tmp_path / "lh.pial"), v, f)
    data = (tmp_path / "lh.pial").read_bytes()
    (tmp_path / "rh.pial").write_bytes(data[:-60])  # the last five triangles, and the volume info, gone
    with pytest.raises(ValueError, match=rf"rh.pial is too short for its header: {len(v)} vertices and {len(f)} "
                                         r"triangles of 12 bytes each need at least"):
        read_mesh(tmp_path / "rh.pial")
    meshio.write_points_cells(tmp_path / "a.stl", v, [("triangle", f)], binary=True)
    stl = (tmp_path / "a.stl").read_bytes()
    (tmp_path / "b.stl").write_bytes(stl[:-50])
    with pytest.raises(ValueError, match=rf"a binary STL of {len(f)} triangles has {len(stl):,} bytes, "
                                         rf"the file has {len(stl) - 50:,}"):
        read_mesh(tmp_path / "b.stl")


def test_whole_files_still_read(tmp_path):
    for binary in (True, False):
        _ply(tmp_path / f"w{binary}.ply", binary=binary)
        v, f = read_mesh(tmp_path / f"w{binary}.ply")
        assert v.shape == (42, 3) and f.shape == (80, 3)


TETRA_PLY = ("ply\nformat ascii 1.0\nelement vertex 4\nproperty float x\nproperty float y\nproperty float z\n"
             "element face 4\nproperty list uchar int vertex_indices\nend_header\n"
             "0 0 0\n1 0 0\n0 1 0\n0 0 1\n3 0 1 2\n3 0 1 3\n3 0 2 3\n3 1 2 3")
TETRA_OFF = "OFF\n4 4 0\n0 0 0\n1 0 0\n0 1 0\n0 0 1\n3 0 1 2\n3 0 1 3\n3 0 2 3\n3 1 2 3"


@pytest.mark.parametrize("name, text", [("tetra.ply", TETRA_PLY), ("tetra.off", TETRA_OFF)])
def test_the_smallest_ascii_files_are_not_refused(tmp_path, name, text):
    # one-digit values and no newline at the end: the last value has no separator, so a
    # bound of two bytes per value would refuse a valid file by one byte
    path = tmp_path / name
    path.write_text(text)
    vertices, faces = read_mesh(path)
    assert vertices.shape == (4, 3) and faces.shape == (4, 3)
    path.write_text(text[:-2])  # a value short: refused by size, before the reader
    with pytest.raises(ValueError, match="too short for its header"):
        read_mesh(path)


def test_dangling_links_and_loops_in_a_directory_are_failed_subjects_not_dropped(tmp_path, capsys):
    meshes, out = tmp_path / "meshes", tmp_path / "out"
    meshes.mkdir()
    _ply(meshes / "sub-01.ply")
    os.symlink(tmp_path / "gone.ply", meshes / "sub-02.ply")
    os.symlink(meshes / "sub-04.ply", meshes / "sub-03.ply")
    os.symlink(meshes / "sub-03.ply", meshes / "sub-04.ply")
    assert [p.name for p in find_meshes(meshes)] == ["sub-01.ply", "sub-02.ply", "sub-03.ply", "sub-04.ply"]
    with pytest.raises(FileNotFoundError, match="sub-02.ply is a dangling symbolic link .*gone.ply"):
        read_mesh(meshes / "sub-02.ply")
    with pytest.raises(FileNotFoundError, match="sub-03.ply is a symbolic link in a loop of links"):
        read_mesh(meshes / "sub-03.ply")

    code = main(["cohort", str(meshes), "--k", "4", "--out", str(out), "--descriptors", ""])
    capsys.readouterr()
    assert code == 1  # documented: some subjects failed
    with open(out / "summary.csv", newline="") as f:
        rows = {r["name"]: r for r in csv.DictReader(f)}
    assert rows["sub-01"]["status"] == "ok"
    assert "dangling symbolic link" in rows["sub-02"]["error"]
    assert all("loop of links" in rows[n]["error"] for n in ("sub-03", "sub-04"))


def test_an_unreadable_mesh_directory_exits_2_naming_it():
    # root reads every directory: the command runs as a second local user (skips where none can be made)
    with OtherUser() as other:
        meshes = other.dir / "meshes"
        meshes.mkdir()
        _ply(meshes / "sub-01.ply")
        os.chmod(meshes, 0o700)  # root's: the other user cannot list it
        result = other.kernelrt(["cohort", str(meshes), "--k", "4", "--out", str(other.dir / "out")])
    assert result.returncode == 2, result.stderr
    assert f"cannot list the mesh directory {meshes}: Permission denied" in result.stderr
    assert "Traceback" not in result.stderr


def test_a_directory_that_cannot_be_listed_exits_2_in_process(tmp_path, capsys, monkeypatch):
    # The same path for root, who lists every directory: iterdir fails as it would for another user.
    from pathlib import Path

    meshes = tmp_path / "meshes"
    meshes.mkdir()
    real = Path.iterdir

    def refusing(self):
        if self == meshes:
            raise PermissionError(13, "Permission denied", str(self))
        return real(self)

    monkeypatch.setattr(Path, "iterdir", refusing)
    with pytest.raises(SystemExit) as caught:
        main(["cohort", str(meshes), "--k", "4", "--out", str(tmp_path / "out")])
    assert caught.value.code == 2
    assert f"cannot list the mesh directory {meshes}: Permission denied" in capsys.readouterr().err
    assert not (tmp_path / "out").exists()


def test_vertices_come_back_equal(tmp_path):
    v, f = noisy_icosphere(1, 0.1, seed=3)
    meshio.write_points_cells(tmp_path / "x.ply", v, [("triangle", f)], binary=True)
    back, faces = read_mesh(tmp_path / "x.ply")
    assert np.array_equal(back, v) and np.array_equal(faces, f)
