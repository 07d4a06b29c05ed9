"""Reading triangle surface meshes from files, for the cohort tools.

Owns one job: a file name in, ``(vertices, faces)`` out, in the dtypes and layouts the
Laplacian kernels take, or an error that names the file. Nothing here writes meshes.
Which files are meshes and what their subjects are called: mesh_files.py.

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
from pathlib import Path

import numpy as np

# find_meshes and subject_names live in mesh_files (which files, what names); imported here
# too, where they were first defined
from .mesh_files import (
    _SUPPORTED,
    FREESURFER_SURFACES,
    MESH_SUFFIXES,
    _mesh_format,
    _per_vertex_data,
    find_meshes,
    freesurfer_surfaces,
    subject_names,
)
from .mesh_sizes import check_counts, check_sizes, why_missing

__all__ = ["FREESURFER_SURFACES", "MESH_SUFFIXES", "find_meshes", "freesurfer_surfaces", "read_mesh",
           "subject_names"]

_INT32_MAX = int(np.iinfo(np.int32).max)
_MESHIO_MODULES = {"PLY": "ply", "OBJ": "obj", "OFF": "off", "VTK": "vtk", "VTU": "vtu", "STL": "stl"}


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
