"""Which files are meshes, and what their subjects are called, for the cohort tools.

Recognising a mesh format from a file's name (``mesh_io.read_mesh`` reads the file),
finding the mesh files of directories (``find_meshes``) and of a FreeSurfer
``SUBJECTS_DIR`` (``freesurfer_surfaces``), and naming each file's subject
(``subject_names``). Nothing here opens a mesh file.
"""

from __future__ import annotations

import os
import re
from collections.abc import Iterable
from pathlib import Path

__all__ = ["FREESURFER_HEMIS", "FREESURFER_SURFACES", "MESH_SUFFIXES", "find_meshes", "freesurfer_surfaces",
           "subject_names"]

MESH_SUFFIXES = (".ply", ".obj", ".off", ".vtk", ".vtp", ".vtu", ".stl", ".gii")
FREESURFER_SURFACES = (
    "pial", "white", "inflated", "sphere", "orig", "smoothwm", "midthickness", "sphere.reg",
)
FREESURFER_HEMIS = ("lh", "rh")

_FORMATS = {
    ".ply": "PLY", ".obj": "OBJ", ".off": "OFF", ".vtk": "VTK", ".vtp": "VTP",
    ".vtu": "VTU", ".stl": "STL", ".gii": "GIFTI",
}
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
    ``A-Z a-z 0-9 . _ -`` replaced by ``_``. A file in a FreeSurfer subject's ``surf``
    directory is named after its subject too: ``bert/surf/lh.pial`` -> ``bert_lh.pial``,
    whatever else the cohort holds. Names that collide (ignoring case, for
    case-insensitive file systems) get as many parent directory names as tell them apart
    (``a/lh.pial``, ``b/lh.pial`` -> ``a_lh.pial``, ``b_lh.pial``; above the subject for
    ``surf`` files: ``x/bert/surf/lh.pial`` -> ``x_bert_lh.pial``); files of one directory
    keep their suffixes instead (``sub.ply``, ``sub.obj``); the same file given twice is
    numbered (``sub_1``, ``sub_2``).

    Args:
        paths: mesh files, as ``find_meshes`` returns them.

    Returns:
        One name per path, in order.
    """
    paths = _as_path_list(paths)
    # abspath, not resolve: FreeSurfer 7's lh.pial is a link to lh.pial.T1
    places = [_place(Path(os.path.abspath(p))) for p in paths]
    dirs = [dirs for dirs, _ in places]
    names = [_safe(prefix + _stem(p.name)) for p, (_, prefix) in zip(paths, places)]
    groups: dict[str, list[int]] = {}
    for i, name in enumerate(names):
        groups.setdefault(name.casefold(), []).append(i)
    for members in groups.values():
        if len(members) == 1:
            continue
        # Parents cannot tell apart two files of one directory (sub.ply, sub.obj): their
        # full names can.
        full = {i: _safe(places[i][1] + paths[i].name) for i in members}
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


def _place(path: Path) -> tuple[tuple[str, ...], str]:
    """The directories above a file's name (those that tell collisions apart), and its name's prefix.

    A file in ``<subject>/surf/`` (a FreeSurfer subject's surfaces, named ``lh.pial``,
    ``rh.pial``... in every subject) takes its subject's name as a prefix, so that the
    subjects' surfaces never share a name: the directories are those above the subject.
    """
    parent = path.parent
    if parent.name == "surf" and parent.parent.name:
        return parent.parent.parent.parts[1:], parent.parent.name + "_"
    return parent.parts[1:], ""


def freesurfer_surfaces(subjects_dir: str | os.PathLike, surfaces=("pial",), hemis=FREESURFER_HEMIS) -> list[Path]:
    """Every subject's ``<subjects_dir>/<subject>/surf/<hemi>.<surface>``, present or not.

    Args:
        subjects_dir: a FreeSurfer ``SUBJECTS_DIR``. Its subjects are its subdirectories
            holding ``surf/`` or ``mri/`` (recon-all makes both), hidden ones aside, sorted
            by name; other entries (files, scripts folders) are not subjects.
        surfaces: surface names among ``FREESURFER_SURFACES`` ("pial", "white", ...).
        hemis: hemispheres among "lh", "rh".

    Returns:
        For each subject, each hemisphere, each surface: the path, whether or not the file
        exists. A missing surface is then a failed subject in a cohort (``read_mesh``
        says the file is not found), not a silent gap.

    Raises:
        FileNotFoundError, NotADirectoryError: ``subjects_dir`` is not a directory.
        ValueError: an unknown surface or hemisphere, or no subject in ``subjects_dir``.
        OSError: ``subjects_dir`` cannot be listed (``PermissionError``, ...), naming it.
    """
    surfaces, hemis = _choices("surfaces", surfaces, FREESURFER_SURFACES), _choices("hemis", hemis, FREESURFER_HEMIS)
    root = Path(subjects_dir)
    if not root.exists():
        raise FileNotFoundError(f"subjects directory not found: {root}")
    if not root.is_dir():
        raise NotADirectoryError(f"{root} is a file, not a FreeSurfer subjects directory")
    try:
        subjects = sorted((d for d in root.iterdir() if not d.name.startswith(".") and d.is_dir()
                           and ((d / "surf").is_dir() or (d / "mri").is_dir())), key=lambda d: d.name)
    except OSError as e:
        raise type(e)(e.errno, f"cannot list the subjects directory {root}: {e.strerror}") from e
    if not subjects:
        raise ValueError(f"{root} holds no FreeSurfer subject (a directory with surf/ or mri/ in it)")
    return [d / "surf" / f"{h}.{s}" for d in subjects for h in hemis for s in surfaces]


def _choices(what: str, given, allowed: tuple) -> tuple:
    given = (given,) if isinstance(given, str) else tuple(given)
    unknown = [g for g in given if g not in allowed]
    if unknown or not given:
        raise ValueError(f"{what} must be among {', '.join(allowed)} (got {', '.join(map(repr, given)) or 'none'})")
    return tuple(dict.fromkeys(given))
