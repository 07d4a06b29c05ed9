"""read_mesh, find_meshes and subject_names: files written by meshio and nibabel, and real ones.

An icosphere written in each format comes back with the same faces and the vertices the
format stores. What each stores, as meshio 5.3 and nibabel 5 write it:

* exact float64: PLY (binary and ASCII), OBJ, OFF, legacy VTK (binary and ASCII), binary
  VTU, ASCII STL: binary formats store doubles, the ASCII writers print ``repr``-exact
  shortest decimals;
* 12 significant digits: ASCII VTU (``"{:.11e}"``);
* float32: binary STL, FreeSurfer, GIFTI (as written here and by FreeSurfer and Workbench).

Faces come back in the order written, except from STL: it stores three corners per
triangle, and meshio merges equal corners into vertices numbered by first use, so an
STL mesh is compared corner by corner.

Real files, when their packages are installed: nibabel's GIFTI test data (against nibabel's
own ``agg_data``), the Stanford Bunny of pymeshfix and pyvista's example PLYs (against the
plain binary-PLY parser of tests/support/bunny.py), and pyvista's POLYDATA globe.vtk.
"""

from __future__ import annotations

import importlib.util
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from kernelrt.kernels.laplacian import icosphere, mesh_io
from kernelrt.kernels.laplacian.mesh_io import (
    FREESURFER_SURFACES,
    MESH_SUFFIXES,
    find_meshes,
    read_mesh,
    subject_names,
)

from tests.support.bunny import bunny_path, read_binary_ply

ICO_V, ICO_F = icosphere(2)


def _package_dir(name: str) -> Path | None:
    """An installed package's directory, found without importing it (pyvista imports VTK)."""
    spec = importlib.util.find_spec(name)
    return Path(spec.origin).parent if spec is not None and spec.origin else None


def _write_meshio(path: Path, vertices, cells, **kwargs) -> Path:
    meshio = pytest.importorskip("meshio")
    meshio.write_points_cells(str(path), vertices, cells, **kwargs)
    return path


def _assert_kernel_form(V, F, n_vertices, n_faces):
    assert V.dtype == np.float64 and V.shape == (n_vertices, 3) and V.flags.c_contiguous
    assert F.dtype == np.int32 and F.shape == (n_faces, 3) and F.flags.c_contiguous


def test_importing_does_not_import_the_readers():
    code = (
        "import sys, kernelrt.kernels.laplacian, kernelrt.kernels.laplacian.mesh_io; "
        "print(sorted(m for m in ('meshio', 'nibabel') if m in sys.modules))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]"


def test_names_recognised():
    assert MESH_SUFFIXES == (".ply", ".obj", ".off", ".vtk", ".vtp", ".vtu", ".stl", ".gii")
    assert "sphere.reg" in FREESURFER_SURFACES and "pial" in FREESURFER_SURFACES


# (suffix, writer options, relative tolerance of the vertices: 0 means bit for bit)
MESHIO_CASES = [
    ("ply", {}, 0),
    ("ply", {"binary": False}, 0),
    ("obj", {}, 0),
    ("off", {}, 0),
    ("vtk", {}, 0),  # meshio writes legacy VTK 5.1, big-endian: read back as native
    ("vtk", {"binary": False}, 0),
    ("vtu", {}, 0),
    ("vtu", {"binary": False}, 1e-11),  # "{:.11e}": 12 digits, rel. error <= 5e-12
]


@pytest.mark.parametrize(
    ("suffix", "options", "rtol"), MESHIO_CASES, ids=[f"{s}-{'ascii' if o else 'default'}" for s, o, _ in MESHIO_CASES]
)
def test_meshio_round_trip(tmp_path, suffix, options, rtol):
    path = _write_meshio(tmp_path / f"ico.{suffix}", ICO_V, [("triangle", ICO_F)], **options)
    V, F = read_mesh(str(path) if suffix == "ply" else path)  # str and os.PathLike
    _assert_kernel_form(V, F, len(ICO_V), len(ICO_F))
    np.testing.assert_array_equal(F, ICO_F)  # same order: no format here reorders faces
    if rtol == 0:
        np.testing.assert_array_equal(V, ICO_V)
    else:
        np.testing.assert_allclose(V, ICO_V, rtol=rtol, atol=1e-12)


def test_legacy_vtk_42_round_trip(tmp_path):
    meshio = pytest.importorskip("meshio")
    path = tmp_path / "ico.vtk"
    meshio.vtk.write(str(path), meshio.Mesh(ICO_V, [("triangle", ICO_F)]), fmt_version="4.2")
    V, F = read_mesh(path)
    np.testing.assert_array_equal(V, ICO_V)
    np.testing.assert_array_equal(F, ICO_F)


@pytest.mark.parametrize("binary", [False, True], ids=["ascii", "binary"])
def test_stl_round_trip_corner_by_corner(tmp_path, binary, recwarn):
    path = _write_meshio(tmp_path / "ico.STL", ICO_V, [("triangle", ICO_F)], binary=binary)  # suffix in any case
    V, F = read_mesh(path)
    _assert_kernel_form(V, F, len(ICO_V), len(ICO_F))
    stored = ICO_V.astype(np.float32).astype(np.float64) if binary else ICO_V  # binary STL: float32
    np.testing.assert_array_equal(V[F], stored[ICO_F])
    # meshio numbers the merged corners by first use: vertex i is the i-th new corner
    first_use = np.sort(np.unique(ICO_F.ravel(), return_index=True)[1])
    np.testing.assert_array_equal(V, stored[ICO_F.ravel()[first_use]])
    # meshio's ASCII/binary sniffing overflows a uint32 on ASCII files: not passed on
    assert not [w for w in recwarn if "overflow" in str(w.message)]


def test_freesurfer_round_trip(tmp_path):
    fs = pytest.importorskip("nibabel.freesurfer")
    for name in ("lh.pial", "rh.sphere.reg", "sub-01.lh.white"):
        fs.write_geometry(str(tmp_path / name), ICO_V, ICO_F)
        V, F = read_mesh(tmp_path / name)
        _assert_kernel_form(V, F, len(ICO_V), len(ICO_F))
        np.testing.assert_array_equal(V, ICO_V.astype(np.float32))  # FreeSurfer stores float32
        np.testing.assert_array_equal(F, ICO_F)  # stored big-endian: read back as native int32


def _gifti(pointset=True, triangle=True, extra=()):
    nib = pytest.importorskip("nibabel")
    darrays = list(extra)
    if pointset:
        coords = ICO_V.astype(np.float32)
        darrays.append(nib.gifti.GiftiDataArray(coords, "NIFTI_INTENT_POINTSET", "NIFTI_TYPE_FLOAT32"))
    if triangle:
        darrays.append(nib.gifti.GiftiDataArray(ICO_F, "NIFTI_INTENT_TRIANGLE", "NIFTI_TYPE_INT32"))
    return nib.gifti.GiftiImage(darrays=darrays)


@pytest.mark.parametrize("name", ["sub-01.surf.gii", "sub-01.gii"])
def test_gifti_round_trip(tmp_path, name):
    nib = pytest.importorskip("nibabel")
    nib.save(_gifti(), str(tmp_path / name))
    V, F = read_mesh(tmp_path / name)
    _assert_kernel_form(V, F, len(ICO_V), len(ICO_F))
    np.testing.assert_array_equal(V, ICO_V.astype(np.float32))
    np.testing.assert_array_equal(F, ICO_F)


@pytest.mark.parametrize(
    ("kwargs", "missing"),
    [({"triangle": False}, "0 NIFTI_INTENT_TRIANGLE"), ({"pointset": False}, "0 NIFTI_INTENT_POINTSET")],
)
def test_gifti_without_a_surface_array_is_refused(tmp_path, kwargs, missing):
    nib = pytest.importorskip("nibabel")
    path = tmp_path / "half.surf.gii"
    nib.save(_gifti(**kwargs), str(path))
    with pytest.raises(ValueError, match="not a GIFTI surface") as info:
        read_mesh(path)
    assert str(path) in str(info.value) and missing in str(info.value)


def test_quads_are_refused_naming_the_types(tmp_path):
    quad = np.array([[0, 1, 2, 3]])
    square = np.array([[0, 0, 0], [1, 0, 0], [1, 1, 0], [0, 1, 0], [2, 2, 0]], float)
    path = _write_meshio(tmp_path / "quads.vtu", square, [("quad", quad)])
    with pytest.raises(ValueError, match=r"cells other than triangles \(1 quad\)") as info:
        read_mesh(path)
    assert str(path) in str(info.value)
    # beside triangles too: dropping the quads would leave a hole
    path = _write_meshio(tmp_path / "mixed.obj", square, [("quad", quad), ("triangle", np.array([[1, 4, 2]]))])
    with pytest.raises(ValueError, match=r"1 triangles and 1 quad"):
        read_mesh(path)


def test_point_cloud_is_refused(tmp_path):
    path = _write_meshio(tmp_path / "cloud.ply", ICO_V, [])
    with pytest.raises(ValueError, match=f"{path} holds no triangles \\(162 vertices, 0 faces\\)"):
        read_mesh(path)


def test_vertex_and_line_cells_are_ignored(tmp_path):
    cells = [
        ("vertex", np.array([[5]])), ("triangle", ICO_F[:100]), ("line", np.array([[0, 1]])), ("triangle", ICO_F[100:]),
    ]
    V, F = read_mesh(_write_meshio(tmp_path / "marked.vtu", ICO_V, cells))
    np.testing.assert_array_equal(F, ICO_F)  # the triangle blocks, concatenated in order
    np.testing.assert_array_equal(V, ICO_V)


def test_obj_variants(tmp_path):
    """OBJ lines meshio passes through as they are: 2-D points, colours, relative indices."""
    pytest.importorskip("meshio")
    (tmp_path / "flat.obj").write_text("v 0 0\nv 1 0\nv 1 1\nf 1 2 3\n")  # meshio: (3, 2) points
    V, F = read_mesh(tmp_path / "flat.obj")
    np.testing.assert_array_equal(V, [[0, 0, 0], [1, 0, 0], [1, 1, 0]])
    np.testing.assert_array_equal(F, [[0, 1, 2]])
    (tmp_path / "colours.obj").write_text("v 0 0 1 1 0 0\nv 1 0 1 0 1 0\nv 1 1 1 0 0 1\nf 1//1 2//2 3//3\n")
    V, _ = read_mesh(tmp_path / "colours.obj")  # meshio: (3, 6) points
    np.testing.assert_array_equal(V, [[0, 0, 1], [1, 0, 1], [1, 1, 1]])
    (tmp_path / "relative.obj").write_text("v 0 0 0\nv 1 0 0\nv 1 1 0\nf -3 -2 -1\n")  # meshio: [-4, -3, -2]
    with pytest.raises(ValueError, match="outside \\[0, 3\\).*negative, relative"):
        read_mesh(tmp_path / "relative.obj")
    (tmp_path / "nan.obj").write_text("v nan 0 0\nv 1 0 0\nv 1 1 0\nf 1 2 3\n")
    with pytest.raises(ValueError, match="nan.obj: 1 vertices have NaN or inf coordinates"):
        read_mesh(tmp_path / "nan.obj")


def test_off_with_quads_is_refused(tmp_path):
    # meshio's OFF reader takes triangles only (and its writer drops quads, warning)
    pytest.importorskip("meshio")
    (tmp_path / "quad.off").write_text("OFF\n4 1 0\n0 0 0\n1 0 0\n1 1 0\n0 1 0\n4 0 1 2 3\n")
    with pytest.raises(ValueError, match="cannot read .*quad.off as a OFF mesh: .*triangular"):
        read_mesh(tmp_path / "quad.off")


def test_missing_file(tmp_path):
    path = tmp_path / "nope.ply"
    with pytest.raises(FileNotFoundError, match="nope.ply"):
        read_mesh(path)


def test_directory_is_not_a_mesh(tmp_path):
    (tmp_path / "d.ply").mkdir()
    with pytest.raises(IsADirectoryError, match="d.ply is a directory"):
        read_mesh(tmp_path / "d.ply")


@pytest.mark.parametrize("name", ["mesh.txt", "mesh", "lh.curv", "lh.white.H", "mesh.ply.bak"])
def test_unknown_name_lists_the_formats(tmp_path, name):
    (tmp_path / name).write_bytes(b"ply\n")
    with pytest.raises(ValueError, match="not a recognised mesh file.*\\.ply, .*lh\\.pial") as info:
        read_mesh(tmp_path / name)
    assert str(tmp_path / name) in str(info.value)


def test_vtp_is_refused_with_a_conversion_hint(tmp_path):
    (tmp_path / "s.vtp").write_text('<VTKFile type="PolyData"/>')
    with pytest.raises(ValueError, match="no reader for VTP.*save it as PLY or VTU"):
        read_mesh(tmp_path / "s.vtp")


def test_freesurfer_per_vertex_data_is_refused(tmp_path):
    fs = pytest.importorskip("nibabel.freesurfer")
    fs.write_morph_data(str(tmp_path / "lh.area.pial"), np.ones(10, np.float32))
    with pytest.raises(ValueError, match="per-vertex data"):
        read_mesh(tmp_path / "lh.area.pial")


def test_legacy_vtk_polydata_is_refused_not_exited(tmp_path):
    # meshio.read prints and calls sys.exit(1) here; read_mesh calls the VTK reader itself
    pytest.importorskip("meshio")
    path = tmp_path / "tri.vtk"
    path.write_text(
        "# vtk DataFile Version 4.2\nsurface\nASCII\nDATASET POLYDATA\n"
        "POINTS 3 double\n0 0 0 1 0 0 0 1 0\nPOLYGONS 1 4\n3 0 1 2\n"
    )
    with pytest.raises(ValueError, match="cannot read .*tri.vtk as a VTK mesh: .*POLYDATA.*save the surface"):
        read_mesh(path)


# The readers each format goes to, with a name they accept.
ALL_NAMES = ["x.ply", "x.obj", "x.off", "x.vtk", "x.vtu", "x.stl", "x.surf.gii", "lh.pial"]


@pytest.mark.parametrize("name", ALL_NAMES)
@pytest.mark.parametrize("content", [bytes(range(256)) * 4, b""], ids=["garbage", "empty"])
def test_unreadable_files_give_a_value_error_naming_them(tmp_path, name, content):
    pytest.importorskip("meshio")
    pytest.importorskip("nibabel")
    path = tmp_path / name
    path.write_bytes(content)
    with pytest.raises(ValueError) as info:
        read_mesh(path)
    assert str(path) in str(info.value)


def test_corrupt_ply_wraps_the_reader_error(tmp_path):
    pytest.importorskip("meshio")
    path = tmp_path / "corrupt.ply"
    path.write_bytes(b"\x00\xffgarbage\x13" * 50)
    with pytest.raises(ValueError, match=f"cannot read {path} as a PLY mesh: ") as info:
        read_mesh(path)
    assert info.value.__cause__ is not None


@pytest.mark.parametrize(("module", "name"), [("meshio", "x.ply"), ("nibabel", "lh.pial"), ("nibabel", "x.gii")])
def test_missing_reader_says_how_to_install_it(tmp_path, monkeypatch, module, name):
    (tmp_path / name).write_bytes(b"")
    monkeypatch.setitem(sys.modules, module, None)  # makes `import module` raise ImportError
    with pytest.raises(ImportError, match=f"needs {module}: pip install 'kernelrt\\[distributed\\]'"):
        read_mesh(tmp_path / name)


def test_faces_widen_to_int64_past_int32(tmp_path, monkeypatch):
    path = _write_meshio(tmp_path / "ico.ply", ICO_V, [("triangle", ICO_F)])
    monkeypatch.setattr(mesh_io, "_INT32_MAX", len(ICO_V) - 2)  # stands in for N > 2**31
    _, F = read_mesh(path)
    assert F.dtype == np.int64 and F.flags.c_contiguous
    np.testing.assert_array_equal(F, ICO_F)


# --- find_meshes -------------------------------------------------------------------------


def _touch(directory: Path, *names: str) -> None:
    directory.mkdir(parents=True, exist_ok=True)
    for name in names:
        (directory / name).write_bytes(b"")


def test_find_meshes_scans_a_directory(tmp_path):
    d = tmp_path / "cohort"
    _touch(d, "sub-02.ply", "sub-01.surf.gii", "README.txt", "._sub-03.ply", "sub-04.PLY")
    _touch(d / "nested", "sub-05.ply")  # not recursive
    assert find_meshes(d) == [d / "sub-01.surf.gii", d / "sub-02.ply", d / "sub-04.PLY"]
    # a named file is kept whatever its name; duplicates (same resolved path) go, order kept
    got = find_meshes([d / "README.txt", str(d), d / "nested" / ".." / "sub-02.ply"])
    assert got == [d / "README.txt", d / "sub-01.surf.gii", d / "sub-02.ply", d / "sub-04.PLY"]


def test_find_meshes_in_a_freesurfer_surf_directory(tmp_path):
    surf = tmp_path / "surf"
    _touch(
        surf, "lh.pial.T1", "lh.white", "lh.sphere.reg", "lh.area.pial", "lh.curv.pial", "lh.curv",
        "lh.thickness", "lh.white.H", "lh.sulc.shape.gii", "lh.midthickness.surf.gii", "rh.inflated",
    )
    (surf / "lh.pial").symlink_to("lh.pial.T1")  # as FreeSurfer 7 links it
    assert [p.name for p in find_meshes(surf)] == [
        "lh.midthickness.surf.gii", "lh.pial", "lh.sphere.reg", "lh.white", "rh.inflated",
    ]


def test_find_meshes_errors(tmp_path):
    with pytest.raises(FileNotFoundError, match="missing"):
        find_meshes([tmp_path / "missing"])
    _touch(tmp_path / "docs", "README.txt")
    with pytest.raises(ValueError, match=f"directory {tmp_path / 'docs'} holds no mesh files"):
        find_meshes(tmp_path / "docs")


# --- subject_names -----------------------------------------------------------------------


def test_subject_names_strip_the_mesh_suffix():
    assert subject_names(["sub-01.ply", "d/lh.pial", "sub.surf.gii", "x.GII", "notes.txt"]) == [
        "sub-01", "lh.pial", "sub", "x", "notes.txt",
    ]


def test_subject_names_prefix_parents_to_tell_collisions_apart(tmp_path):
    names = subject_names([tmp_path / "a" / "lh.pial", tmp_path / "b" / "lh.pial", tmp_path / "c" / "rh.pial"])
    assert names == ["a_lh.pial", "b_lh.pial", "rh.pial"]
    names = subject_names(["x/a/lh.pial", "y/a/lh.pial"])
    assert names == ["x_a_lh.pial", "y_a_lh.pial"]
    # one directory: the suffix tells them apart; case-only differences collide too
    assert subject_names(["d/sub.ply", "d/Sub.obj"]) == ["sub.ply", "Sub.obj"]
    assert subject_names(["d/s.ply", "d/s.ply"]) == ["s_1", "s_2"]


def test_subject_names_are_safe_file_names():
    names = subject_names(["my dir/sub 01 (ç).ply", "a:b/..ply.ply", "we*ird?.obj"])
    assert names == ["sub_01____", "ply", "we_ird_"]
    for name in subject_names(["p q/lh.pial", "r|s/lh.pial"]):
        assert all(c.isascii() and (c.isalnum() or c in "._-") for c in name), name


# --- real files shipped in installed packages ---------------------------------------------


def _nibabel_gifti_data() -> list[Path]:
    root = _package_dir("nibabel")
    return sorted((root / "gifti" / "tests" / "data").glob("*.gii")) if root else []


def test_nibabel_gifti_surfaces_match_nibabel():
    nib = pytest.importorskip("nibabel")
    files = _nibabel_gifti_data()
    if not files:
        pytest.skip("this nibabel ships no GIFTI test data (nibabel/gifti/tests/data)")
    surfaces = 0
    for path in files:
        image = nib.load(str(path))
        intents = {nib.nifti1.intent_codes.niistring[d.intent] for d in image.darrays}
        if not {"NIFTI_INTENT_POINTSET", "NIFTI_INTENT_TRIANGLE"} <= intents:
            with pytest.raises(ValueError, match="not a GIFTI surface"):  # labels, shapes, time series
                read_mesh(path)
            continue
        coords, triangles = image.agg_data(("pointset", "triangle"))
        if triangles.max() >= len(coords):  # excerpts of a surface: 10 vertices, indices to 25604
            want = f"faces index vertex {triangles.max()}, outside \\[0, {len(coords)}\\)"
            with pytest.raises(ValueError, match=want):
                read_mesh(path)
            continue
        surfaces += 1
        V, F = read_mesh(path)
        np.testing.assert_array_equal(V, coords.astype(np.float64))
        np.testing.assert_array_equal(F, triangles)
        assert F.dtype == np.int32 and V.flags.c_contiguous and F.flags.c_contiguous
    assert surfaces >= 1, [p.name for p in files]


def test_nibabel_freesurfer_surfaces_if_shipped():
    nib = pytest.importorskip("nibabel")
    root = _package_dir("nibabel")
    files = [p for p in root.rglob("*") if p.is_file() and mesh_io._mesh_format(p.name) == "FreeSurfer"]
    if not files:
        pytest.skip("this nibabel ships no FreeSurfer surface (its tests read them from nibabel-data)")
    for path in files:
        coords, faces = nib.freesurfer.read_geometry(str(path))
        V, F = read_mesh(path)
        np.testing.assert_array_equal(V, coords)
        np.testing.assert_array_equal(F, faces)


def _binary_plys() -> list[Path]:
    files = [bunny_path()] if bunny_path() else []
    root = _package_dir("pyvista")
    if root:
        files += [root / "examples" / n for n in ("sphere.ply", "ant.ply", "nut.ply")]
    return [p for p in files if p.is_file()]


def test_real_binary_plys_match_a_plain_parser():
    pytest.importorskip("meshio")
    files = _binary_plys()
    if not files:
        pytest.skip("neither pymeshfix's StanfordBunny.ply nor pyvista's example PLYs are installed")
    for path in files:  # VTK-written, binary little-endian float32 x y z and triangles
        V_ref, F_ref = read_binary_ply(path)
        V, F = read_mesh(path)
        np.testing.assert_array_equal(V, V_ref)
        np.testing.assert_array_equal(F, F_ref)


def _pyvista_example(name: str, what: str):
    """The path of one of pyvista's bundled example files, or a skip saying which is missing."""
    pytest.importorskip("meshio")
    root = _package_dir("pyvista")
    path = root / "examples" / name if root else None
    if path is None or not path.is_file():
        pytest.skip(f"pyvista's {name} ({what}) is not installed")
    return path


def test_real_ascii_ply_with_crlf_lines():
    path = _pyvista_example("airplane.ply", "an ASCII PLY with CRLF line ends")
    lines = path.read_text().splitlines()
    start = lines.index("end_header") + 1
    n = int(lines[2].split()[-1])
    V_ref = np.array([line.split() for line in lines[start : start + n]], float)
    F_ref = np.array([line.split()[1:] for line in lines[start + n :]], int)
    V, F = read_mesh(path)
    np.testing.assert_array_equal(V, V_ref.astype(np.float32))  # float32 properties
    np.testing.assert_array_equal(F, F_ref)


def test_real_polydata_vtk_is_refused():
    path = _pyvista_example("globe.vtk", "a legacy VTK POLYDATA file")
    with pytest.raises(ValueError, match="POLYDATA"):
        read_mesh(path)
