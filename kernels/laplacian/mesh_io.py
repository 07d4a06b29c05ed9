"""Reading triangle surface meshes from files, for the cohort tools.

Owns one job: a file name in, ``(vertices, faces)`` out, in the dtypes and layouts the
Laplacian kernels take, or an error that names the file. Nothing here writes meshes.

Which library reads which format:

* meshio: PLY, OBJ, OFF, legacy VTK, VTU and STL.
* nibabel: GIFTI (``.gii``, ``.surf.gii``) and FreeSurfer surfaces (``lh.pial``,
  ``rh.white``, ...), whose names have no suffix.

Both are well-kept readers, tested against files from the tools that write these formats;
we do not write parsers. They are imported when a file is read, not with this module
(``pip install 'kernelrt[distributed]'`` installs them).

What the readers leave to us, and what this module does about it:

* meshio 5.3's ``meshio.read`` prints its error and calls ``sys.exit(1)`` when a reader
  fails, so each format's own reader (``meshio.ply.read``, ...) is called instead.
* meshio has no VTP (VTK XML PolyData) reader, and its legacy VTK reader takes
  ``UNSTRUCTURED_GRID`` only, not ``POLYDATA``: ``.vtp`` files are recognised, so a scan
  does not silently skip them, and refused with a message that says how to convert them.
* Only triangles are read. Vertex and line cells (markers, feature edges) carry no surface
  and are ignored; any other cell (quads, polygons, volumes) is refused, with or without
  triangles beside it, since dropping it would leave holes in the surface.
* STL stores each triangle's three corners, so meshio merges equal corners: the vertex
  order is the order of first use, not the writer's. Binary STL and most FreeSurfer and
  GIFTI files store float32 coordinates.
* Coordinates are returned as stored: no GIFTI coordinate-system transform is applied, and
  FreeSurfer surfaces are in their surface RAS (tkr) space, as nibabel returns them.

Errors name the file: ``FileNotFoundError`` (no such path), ``ValueError`` (not a mesh
format, or a file that cannot be read as one), ``ImportError`` (reader not installed).
"""

from __future__ import annotations

import importlib
import os
import re
from collections.abc import Iterable
from pathlib import Path

import numpy as np

from .mesh_sizes import check_counts, check_sizes, why_missing

__all__ = ["FREESURFER_SURFACES", "MESH_SUFFIXES", "find_meshes", "read_mesh", "subject_names"]

MESH_SUFFIXES = (".ply", ".obj", ".off", ".vtk", ".vtp", ".vtu", ".stl", ".gii")
FREESURFER_SURFACES = (
    "pial", "white", "inflated", "sphere", "orig", "smoothwm", "midthickness", "sphere.reg",
)

_INT32_MAX = int(np.iinfo(np.int32).max)
_FORMATS = {
    ".ply": "PLY", ".obj": "OBJ", ".off": "OFF", ".vtk": "VTK", ".vtp": "VTP",
    ".vtu": "VTU", ".stl": "STL", ".gii": "GIFTI",
}
_MESHIO_MODULES = {"PLY": "ply", "OBJ": "obj", "OFF": "off", "VTK": "vtk", "VTU": "vtu", "STL": "stl"}
# Per-vertex data that sits beside the surfaces, named like them, skipped when a directory
# is scanned: FreeSurfer 7 writes lh.area.pial and lh.curv.pial (curv format, whose magic
# number read_geometry takes for a quad surface's), and HCP folders mix .shape.gii and
# .func.gii arrays with their .surf.gii files.
_FREESURFER_DATA = ("area", "curv", "thickness", "sulc", "volume")
_GIFTI_DATA = (
    ".func.gii", ".shape.gii", ".label.gii", ".time.gii", ".rgba.gii", ".tensor.gii", ".vector.gii",
)
_SUPPORTED = (
    f"supported: {', '.join(MESH_SUFFIXES)} (and .surf.gii), and FreeSurfer surfaces named "
    f"<hemi>.<surface> with <surface> one of {', '.join(FREESURFER_SURFACES)} (e.g. lh.pial)"
)


def _mesh_format(name: str) -> str | None:
    """The format a file name says it holds ("PLY", ..., "FreeSurfer"), or None."""
    low = name.lower()
    for suffix, fmt in _FORMATS.items():
        if low.endswith(suffix) and len(low) > len(suffix):
            return fmt
    parts = name.split(".")
    for n in (2, 1):  # "sphere.reg" spans two parts
        if len(parts) > n and all(parts[:-n]) and ".".join(parts[-n:]) in FREESURFER_SURFACES:
            return "FreeSurfer"
    return None


def _per_vertex_data(name: str) -> bool:
    """Named like a mesh but holds per-vertex data (lh.area.pial, sulc.shape.gii)."""
    if name.lower().endswith(_GIFTI_DATA):
        return True
    parts = name.split(".")
    return any(
        len(parts) > n + 1 and ".".join(parts[-n:]) in FREESURFER_SURFACES and parts[-n - 1] in _FREESURFER_DATA
        for n in (1, 2)
    )


def _stem(name: str) -> str:
    """The file name without its mesh suffix; FreeSurfer names are kept whole."""
    low = name.lower()
    for suffix in (".surf.gii",) + MESH_SUFFIXES:
        if low.endswith(suffix) and len(low) > len(suffix):
            return name[: -len(suffix)]
    return name


def _import(module: str, fmt: str):
    try:
        return importlib.import_module(module)
    except ImportError as e:
        raise ImportError(
            f"reading {fmt} meshes needs {module}: pip install 'kernelrt[distributed]' installs it"
        ) from e


def read_mesh(path: str | os.PathLike) -> tuple[np.ndarray, np.ndarray]:
    """A triangle surface mesh from a file, in the form the Laplacian kernels take.

    Args:
        path: a mesh file: PLY, OBJ, OFF, legacy VTK (``UNSTRUCTURED_GRID``), VTU, STL,
            GIFTI, or a FreeSurfer surface (``lh.pial``, ``rh.sphere.reg``, ...). The
            format is chosen by the name (suffixes in any case), not sniffed.

    Returns:
        ``(vertices, faces)``: C-contiguous float64 (N, 3) vertices (2-D points get
        z = 0) and C-contiguous (F, 3) faces, int32 when the vertex indices fit, else
        int64, each in [0, N).

    Raises:
        FileNotFoundError: ``path`` does not exist, or is a dangling link or a loop of links.
        IsADirectoryError: ``path`` is a directory (``find_meshes`` scans those).
        ValueError: the name is not a mesh format this reads (VTP included); the reader
            fails on the file (``__cause__`` is its exception); the file is shorter than
            its header's element counts need, or holds fewer than they declare
            (``mesh_sizes``); or the file holds no
            triangles, cells other than triangles, faces that index missing vertices,
            or non-finite coordinates.
        ImportError: meshio or nibabel, whichever the format needs, is not installed.
    """
    path = Path(path)
    if not path.exists():
        raise FileNotFoundError(why_missing(path))
    if path.is_dir():
        raise IsADirectoryError(f"{path} is a directory, not a mesh file (find_meshes scans directories)")
    fmt = _mesh_format(path.name)
    if fmt is None:
        raise ValueError(f"{path} is not a recognised mesh file ({_SUPPORTED})")
    if fmt == "FreeSurfer" and _per_vertex_data(path.name):
        raise ValueError(
            f"{path} is named like FreeSurfer per-vertex data (curv format, as lh.area.pial), "
            "not a surface"
        )
    if fmt == "VTP":
        raise ValueError(
            f"cannot read {path}: meshio has no reader for VTP (VTK XML PolyData); save it as "
            "PLY or VTU, e.g. pyvista.read(path).save('mesh.ply')"
        )
    declared = check_sizes(path, fmt)  # before a reader allocates what a lying header claims
    if fmt in _MESHIO_MODULES:
        vertices, faces = _read_meshio(path, fmt)
    else:
        vertices, faces = _read_nibabel(path, fmt)
    check_counts(path, declared, vertices, faces)
    return _checked(path, fmt, vertices, faces)


def _read_meshio(path: Path, fmt: str) -> tuple[np.ndarray, np.ndarray]:
    meshio = _import("meshio", fmt)
    reader = getattr(meshio, _MESHIO_MODULES[fmt]).read
    try:
        # meshio's STL reader sniffs binary against ASCII by multiplying a numpy uint32
        # read from an ASCII header, which overflows and warns on every ASCII file
        with np.errstate(over="ignore"):
            mesh = reader(str(path))
    except Exception as e:
        hint = ""
        if fmt == "VTK" and "POLYDATA" in str(e):
            hint = " (meshio reads legacy VTK UNSTRUCTURED_GRID files only: save the surface as PLY or VTU)"
        raise ValueError(f"cannot read {path} as a {fmt} mesh: {_detail(e)}{hint}") from e

    points = np.asarray(mesh.points)
    if points.ndim == 2 and points.shape[1] == 2:
        # OBJ "v x y" lines give (N, 2) points: a planar mesh in z = 0
        points = np.column_stack([points, np.zeros(len(points), points.dtype)])
    elif fmt == "OBJ" and points.ndim == 2 and points.shape[1] > 3:
        # "v x y z w" (a weight) or "v x y z r g b" (MeshLab's vertex colours)
        points = points[:, :3]

    triangles = [np.asarray(c.data) for c in mesh.cells if c.type == "triangle"]
    others = {}
    for c in mesh.cells:
        if c.type != "triangle" and not _is_point_or_curve(c.type) and len(c.data):
            others[c.type] = others.get(c.type, 0) + len(c.data)
    n_tri = sum(len(t) for t in triangles)
    if others:
        found = ", ".join(f"{n} {t}" for t, n in others.items())
        what = f"{n_tri} triangles and {found}" if n_tri else found
        raise ValueError(
            f"{path} holds cells other than triangles ({what}); only triangle surfaces are read, "
            "and dropping the others would leave holes: triangulate the mesh first"
        )
    faces = np.concatenate(triangles) if triangles else np.empty((0, 3), np.int64)
    return points, faces


def _detail(e: Exception) -> str:
    # meshio raises a bare ReadError() for a VTU that is not VTK XML, and KeyError('vtktypeint64')
    # for legacy VTK files with 64-bit typed arrays: their str alone says nothing
    return f"{type(e).__name__}({e})" if isinstance(e, KeyError) else str(e) or type(e).__name__


def _is_point_or_curve(cell_type: str) -> bool:
    # meshio's names for 0-D and 1-D cells (its dimension table is private)
    return cell_type == "vertex" or cell_type.startswith("line") or cell_type == "VTK_LAGRANGE_CURVE"


def _read_nibabel(path: Path, fmt: str) -> tuple[np.ndarray, np.ndarray]:
    nibabel = _import("nibabel", fmt)
    try:
        if fmt == "FreeSurfer":
            from nibabel.freesurfer import read_geometry

            return read_geometry(str(path))
        image = nibabel.load(str(path))
        arrays = {
            intent: image.get_arrays_from_intent(intent)
            for intent in ("NIFTI_INTENT_POINTSET", "NIFTI_INTENT_TRIANGLE")
        }
    except Exception as e:
        raise ValueError(f"cannot read {path} as a {fmt} mesh: {_detail(e)}") from e
    for intent, found in arrays.items():
        if len(found) != 1:
            raise ValueError(
                f"{path} is not a GIFTI surface: it has {len(found)} {intent} data arrays, "
                f"a surface has one (intents present: {_intents(image)})"
            )
    return arrays["NIFTI_INTENT_POINTSET"][0].data, arrays["NIFTI_INTENT_TRIANGLE"][0].data


def _intents(image) -> str:
    from nibabel.nifti1 import intent_codes

    names = sorted({intent_codes.niistring[d.intent] for d in image.darrays})
    return ", ".join(names) or "none"


def _checked(path: Path, fmt: str, vertices, faces) -> tuple[np.ndarray, np.ndarray]:
    """The readers' arrays in the kernels' dtypes and layouts, after checks that name the file."""
    v, f = np.asarray(vertices), np.asarray(faces)
    if v.size == 0 or f.size == 0:  # an empty OBJ or ASCII STL parses to empty arrays
        raise ValueError(f"{path} holds no triangles ({len(v)} vertices, {len(f)} faces)")
    if v.ndim != 2 or v.shape[1] != 3 or v.dtype.kind not in "iuf":
        raise ValueError(f"{path}: expected (N, 3) vertex coordinates, got {v.dtype} {v.shape}")
    if f.ndim != 2 or f.shape[1] != 3 or f.dtype.kind not in "iu":
        raise ValueError(f"{path}: expected (F, 3) integer triangles, got {f.dtype} {f.shape}")
    n = v.shape[0]
    lo, hi = int(f.min()), int(f.max())
    if lo < 0 or hi >= n:
        # meshio turns OBJ's relative indices (f -3 -2 -1) into negative ones
        hint = " (OBJ's negative, relative indices are not supported)" if fmt == "OBJ" and lo < 0 else ""
        raise ValueError(f"{path}: faces index vertex {lo if lo < 0 else hi}, outside [0, {n}){hint}")
    # Big-endian arrays (binary VTK, FreeSurfer) become native here too.
    v = np.require(v, np.float64, ["C", "W"])
    bad = np.count_nonzero(~np.isfinite(v).all(axis=1))
    if bad:
        raise ValueError(f"{path}: {bad} vertices have NaN or inf coordinates")
    f = np.require(f, np.int32 if n - 1 <= _INT32_MAX else np.int64, ["C", "W"])
    return v, f


def _as_path_list(paths) -> list[Path]:
    # One path on its own is a common call; iterating a str would walk its characters.
    if isinstance(paths, (str, os.PathLike)):
        paths = [paths]
    return [Path(p) for p in paths]


def _scanned(name: str) -> bool:
    # Hidden files include macOS's "._sub-01.ply" AppleDouble files on shared drives.
    return not name.startswith(".") and _mesh_format(name) is not None and not _per_vertex_data(name)


def _member(q: Path) -> bool:
    """A regular file, or a link that leads nowhere (dangling, or a loop): it fails as a subject."""
    return q.is_file() or (q.is_symlink() and not q.exists())


def find_meshes(paths: str | os.PathLike | Iterable[str | os.PathLike]) -> list[Path]:
    """The mesh files named by files and directories, for a cohort run.

    Args:
        paths: files, kept whatever their names (``read_mesh`` checks them), and
            directories, scanned non-recursively for files whose names are mesh formats
            (``MESH_SUFFIXES``, FreeSurfer surface names), sorted by name. Hidden files
            (macOS's ``._sub-01.ply``) and per-vertex data named like surfaces
            (``lh.area.pial``, ``*.shape.gii``) are skipped. A dangling symbolic link or
            a loop of links named like a mesh is kept: its subject fails (``read_mesh``
            says why) rather than vanishing from the cohort.

    Returns:
        The files in the order given, each once (same resolved path).

    Raises:
        FileNotFoundError: a path does not exist.
        ValueError: a directory holds no mesh file.
        OSError: a directory cannot be listed (``PermissionError``, ...), naming it.
    """
    found: list[Path] = []
    seen: set[Path] = set()
    for p in _as_path_list(paths):
        if not p.exists():
            raise FileNotFoundError(f"mesh file or directory not found: {p}")
        if p.is_dir():
            try:
                members = sorted((q for q in p.iterdir() if _scanned(q.name) and _member(q)), key=lambda q: q.name)
            except OSError as e:
                raise type(e)(e.errno, f"cannot list the mesh directory {p}: {e.strerror}") from e
            if not members:
                raise ValueError(f"directory {p} holds no mesh files ({_SUPPORTED})")
        else:
            members = [p]
        for q in members:
            try:
                key = q.resolve(strict=True)
            except (OSError, RuntimeError):  # a dangling link or a loop: kept, to fail as a subject
                key = Path(os.path.abspath(q))
            if key not in seen:
                seen.add(key)
                found.append(q)
    return found


def _safe(name: str) -> str:
    name = re.sub(r"[^A-Za-z0-9._-]", "_", name).lstrip(".")  # no hidden output files
    return name or "mesh"


def subject_names(paths: str | os.PathLike | Iterable[str | os.PathLike]) -> list[str]:
    """A distinct, file-name-safe name per mesh file, to name its outputs.

    The name is the file name without its mesh suffix (``sub-01.ply`` -> ``sub-01``,
    ``sub.surf.gii`` -> ``sub``, ``lh.pial`` -> ``lh.pial``), with characters other than
    ``A-Z a-z 0-9 . _ -`` replaced by ``_``. Names that collide (ignoring case, for
    case-insensitive file systems) get as many parent directory names as tell them apart
    (``a/lh.pial``, ``b/lh.pial`` -> ``a_lh.pial``, ``b_lh.pial``); files of one directory
    keep their suffixes instead (``sub.ply``, ``sub.obj``); the same file given twice is
    numbered (``sub_1``, ``sub_2``).

    Args:
        paths: mesh files, as ``find_meshes`` returns them.

    Returns:
        One name per path, in order.
    """
    paths = _as_path_list(paths)
    # abspath, not resolve: FreeSurfer 7's lh.pial is a link to lh.pial.T1
    dirs = [Path(os.path.abspath(p)).parent.parts[1:] for p in paths]
    names = [_safe(_stem(p.name)) for p in paths]
    groups: dict[str, list[int]] = {}
    for i, name in enumerate(names):
        groups.setdefault(name.casefold(), []).append(i)
    for members in groups.values():
        if len(members) == 1:
            continue
        # Parents cannot tell apart two files of one directory (sub.ply, sub.obj): their
        # full names can.
        full = {i: _safe(paths[i].name) for i in members}
        for i in members:
            if any(dirs[j] == dirs[i] and full[j].casefold() != full[i].casefold() for j in members):
                names[i] = full[i]
        for k in range(max(len(dirs[i]) for i in members) + 1):
            trial = {i: _safe("_".join(dirs[i][max(0, len(dirs[i]) - k):] + (names[i],))) for i in members}
            if len({t.casefold() for t in trial.values()}) == len(members):
                for i, t in trial.items():
                    names[i] = t
                break
    # Left: the same file given twice, or a prefixed name that met another's plain name.
    taken = {}
    for name in names:
        taken[name.casefold()] = taken.get(name.casefold(), 0) + 1
    used = set(taken)
    for i, name in enumerate(names):
        if taken[name.casefold()] > 1:
            k = 1
            while f"{name}_{k}".casefold() in used:
                k += 1
            names[i] = f"{name}_{k}"
            used.add(names[i].casefold())
    return names
