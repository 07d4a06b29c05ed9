"""A subject's spectrum (``SubjectSpectrum``) and its file, ``<name>.npz``.

One ``.npz`` per subject (NumPy's own format: no extra dependency, one file per subject
so a cohort streams to disk and a partial run keeps what it finished). A file is written
to a temporary name in the same directory and renamed into place, so it is whole or
absent, never half-written, even if the writer is killed. Compressed files
(``np.savez_compressed``) are read by the same reader, with the same checks: zip keeps a
CRC-32 of every member's uncompressed bytes either way.
"""

from __future__ import annotations

import contextlib
import dataclasses
import hashlib
import os
import re
import uuid
from dataclasses import dataclass
from pathlib import Path

import numpy as np

__all__ = ["SubjectSpectrum", "check_spectrum_file", "finished_spectrum", "mesh_digest", "remove_stale_parts",
           "replaced_atomically", "spectrum_on_disk", "write_spectrum"]

_ARRAYS = ("evals", "evecs", "hks", "hks_times", "wks", "wks_energies")
_SCALARS = ("name", "n_vertices", "n_faces", "wks_sigma", "route", "max_residual", "seconds", "backend", "settings",
            "mesh", "dtype")
# the (N, ...) arrays, stored in the file's dtype; evals and the grids stay float64 (k and T values: small)
_PER_VERTEX = ("evecs", "hks", "wks")
DTYPES = ("float64", "float32")
_CHUNK = 1 << 20


@dataclass(frozen=True)
class SubjectSpectrum:
    """One subject's eigenpairs and descriptors (``cohort_spectra``).

    Attributes:
        name: the subject's name.
        n_vertices, n_faces: mesh size (faces kept: those repeating a vertex are dropped).
        evals: (k,) eigenvalues, ascending.
        evecs: (N, k) M-orthonormal eigenvectors, or None (``keep_evecs=False``, or written to ``path``).
        hks, hks_times: (N, T) heat kernel signature and its times, or None.
        wks, wks_energies, wks_sigma: (N, E) wave kernel signature, its log-energies and
            bandwidth, or None.
        route: the eigensolver route that ran (``Eigenpairs.route``).
        max_residual: the largest relative eigen-residual.
        seconds: eigensolver wall time.
        backend: where it ran ("cpu" or "cuda").
        reports: degenerate-face and isolated-vertex reports of this subject's assembly.
        settings: a digest of what it was computed with (k, descriptors and their grids,
            eigensolver options), which ``resume`` compares.
        mesh: a digest of the mesh it was computed from (``mesh_digest``: the file's bytes,
            or the arrays' dtype, shape and bytes), which ``resume`` compares too; recorded
            with ``out=`` only (else "").
        dtype: the dtype of ``evecs``, ``hks`` and ``wks`` ("float64", or "float32": half
            the size); computed in float64 either way, and ``evals`` and the grids stay float64.
        path: the ``.npz`` file the arrays were written to (``out=``), else None.
        resumed: True when ``resume=True`` found it already written and did not compute it.
    """

    name: str
    n_vertices: int
    n_faces: int
    evals: np.ndarray
    evecs: np.ndarray | None = None
    hks: np.ndarray | None = None
    hks_times: np.ndarray | None = None
    wks: np.ndarray | None = None
    wks_energies: np.ndarray | None = None
    wks_sigma: float | None = None
    route: str = ""
    max_residual: float = float("nan")
    seconds: float = float("nan")
    backend: str = ""
    reports: tuple = ()
    settings: str = ""
    mesh: str = ""
    dtype: str = "float64"
    path: Path | None = None
    resumed: bool = False

    def __repr__(self):
        where = f", path={str(self.path)!r}" if self.path else ""
        return (f"<SubjectSpectrum {self.name!r}: N={self.n_vertices}, k={len(self.evals)}, "
                f"route={self.route!r}, max residual {self.max_residual:.1e}{where}>")

    @classmethod
    def load(cls, path) -> SubjectSpectrum:
        """Read a subject's ``.npz`` (as ``cohort_spectra(out=...)`` wrote it) back, arrays included."""
        path = Path(path)
        with np.load(path, allow_pickle=False) as f:
            return cls(path=path, **_fields(f, _ARRAYS))


def write_spectrum(out: Path, spectrum: SubjectSpectrum, compress: bool = False) -> SubjectSpectrum:
    """Write ``<out>/<name>.npz`` atomically (``compress``: deflated, ``np.savez_compressed``);
    return the spectrum with only its eigenvalues and path."""
    path = Path(out) / f"{spectrum.name}.npz"
    contents = {name: getattr(spectrum, name) for name in _ARRAYS if getattr(spectrum, name) is not None}
    contents.update({name: np.asarray(getattr(spectrum, name)) for name in _SCALARS
                     if getattr(spectrum, name) is not None})
    contents["reports"] = np.asarray(spectrum.reports, dtype=str)
    with replaced_atomically(path, "wb") as f:
        (np.savez_compressed if compress else np.savez)(f, **contents)
    return dataclasses.replace(spectrum, evecs=None, hks=None, wks=None, path=path)


def mesh_digest(path=None, vertices=None, faces=None) -> str | None:
    """The blake2b digest of a mesh: a file's bytes, or the arrays' dtype, shape and bytes.

    None when the file cannot be read (its subject then fails where it runs). ``resume``
    keeps a subject's file only if the digest it carries is the mesh's digest now.
    """
    h = hashlib.blake2b(digest_size=16)
    if path is not None:
        try:
            with open(path, "rb") as f:
                while chunk := f.read(_CHUNK):
                    h.update(chunk)
        except OSError:
            return None
        return "file:" + h.hexdigest()
    for a in (vertices, faces):
        a = np.ascontiguousarray(a)
        h.update(f"{a.dtype.str}{a.shape};".encode())
        h.update(a.data)
    return "arrays:" + h.hexdigest()


def finished_spectrum(out: Path, name: str, settings: str, arrays, mesh: str | None = None) -> SubjectSpectrum | None:
    """A subject already written to ``<out>/<name>.npz`` with these settings, ``arrays`` and mesh.

    Args:
        out, name: where the file is: ``<out>/<name>.npz``.
        settings: the digest the file must carry (``SubjectSpectrum.settings``).
        arrays: the fields it must hold besides the eigenvalues ("hks", "wks", "evecs").
        mesh: the mesh's digest now (``mesh_digest``), which the file must carry; None
            when the mesh cannot be read (nothing is kept: the subject runs, and fails).

    Returns:
        The subject with its eigenvalues and path (``resumed=True``), or None when the file
        is absent, unreadable, cut short, damaged (every array is read in full, so a
        member whose checksum fails counts), inconsistent (``check_spectrum_file``),
        computed with other settings, from another mesh (a file edited since) or without
        an array asked for: it is then computed again. Nothing is unpickled.
    """
    path = Path(out) / f"{name}.npz"
    if mesh is None or not path.is_file():
        return None
    try:
        fields = check_spectrum_file(path)
    except ValueError:
        return None
    if fields.get("settings") != settings or fields.get("mesh") != mesh or any(fields.get(a) is None for a in ("evals", *arrays)):
        return None
    return spectrum_on_disk(path, fields, resumed=True)


def spectrum_on_disk(path, fields: dict, **overrides) -> SubjectSpectrum:
    """The subject a checked file holds (``check_spectrum_file``'s fields), with its
    eigenvalues only: the other arrays stay on disk. ``overrides`` replace fields."""
    kept = {k: v for k, v in fields.items() if k not in _ARRAYS or k == "evals"}
    return SubjectSpectrum(path=Path(path), **{**kept, **overrides})


def check_spectrum_file(path) -> dict:
    """Every field of a subject's ``.npz``, each array read in full and checked; ValueError if not whole.

    Checks: the file is a zip NumPy reads without unpickling (stored or compressed), every
    member's checksum, the scalars ``n_vertices``/``n_faces``/``settings`` are there,
    ``evals`` is a non-empty finite vector, each array present has the shape the others
    imply (``evecs`` (N, k), ``hks`` (N, len(hks_times)), ``wks`` (N, len(wks_energies)))
    and finite values, and ``evecs``/``hks``/``wks`` have the dtype the file records
    (``dtype``; float64 in files written before it was recorded).
    """
    try:
        with np.load(path, allow_pickle=False) as f:
            fields = _fields(f, _ARRAYS)
    except Exception as e:  # noqa: BLE001 - zip, CRC, pickle, header and I/O errors alike
        raise ValueError(f"{path} cannot be read back: {type(e).__name__}: {e}") from e
    missing = [k for k in ("evals", "n_vertices", "n_faces", "settings") if k not in fields]
    if missing:
        raise ValueError(f"{path} lacks {', '.join(missing)}")
    n, evals = fields["n_vertices"], fields["evals"]
    if evals.ndim != 1 or evals.size == 0:
        raise ValueError(f"{path}: evals has shape {evals.shape}, expected (k,)")
    shapes = {"evecs": (n, evals.size)}
    for a, grid in (("hks", "hks_times"), ("wks", "wks_energies")):
        if a in fields:
            if grid not in fields:
                raise ValueError(f"{path} holds {a} without {grid}")
            shapes[a], shapes[grid] = (n, fields[grid].size), (fields[grid].size,)
    for a, value in fields.items():
        if a in _ARRAYS:
            if a in shapes and value.shape != shapes[a]:
                raise ValueError(f"{path}: {a} has shape {value.shape}, expected {shapes[a]}")
            if value.dtype.kind not in "fiu" or not np.all(np.isfinite(value)):
                raise ValueError(f"{path}: {a} holds values that are not finite numbers")
    dtype = fields.get("dtype", "float64")
    if dtype not in DTYPES:
        raise ValueError(f"{path} records the dtype {dtype!r}, expected one of {', '.join(DTYPES)}")
    wrong = [f"{a} is {fields[a].dtype}" for a in _PER_VERTEX if a in fields and fields[a].dtype != np.dtype(dtype)]
    if wrong:
        raise ValueError(f"{path} records the dtype {dtype} but {', '.join(wrong)}")
    return fields


# replaced_atomically's temporary names for the files kernelrt writes (not another program's)
STALE_PART = re.compile(r"^\.(.+\.npz|summary\.csv)\.[0-9a-f]{12}\.part$")


def remove_stale_parts(out) -> list[Path]:
    """Remove the temporary files a killed writer left in ``out`` (only ``replaced_atomically``'s names).

    Call it only while no writer runs in ``out`` (``kernelrt cohort`` holds its lock).
    """
    removed = []
    for p in Path(out).iterdir():
        if STALE_PART.match(p.name) and p.is_file() and not p.is_symlink():
            with contextlib.suppress(FileNotFoundError):
                p.unlink()
                removed.append(p)
    return removed


def _fields(f, arrays) -> dict:
    """``SubjectSpectrum`` fields from an open ``.npz``: its scalars, reports and ``arrays`` (those present)."""
    fields = {name: f[name] for name in arrays if name in f.files}
    fields.update({name: f[name].item() for name in _SCALARS if name in f.files})
    fields["reports"] = tuple(str(r) for r in f["reports"]) if "reports" in f.files else ()
    return fields


@contextlib.contextmanager
def replaced_atomically(path: Path, mode: str = "w", **open_options):
    """A file object whose contents replace ``path`` when the block ends, or never appear.

    Written to a hidden temporary file in the same directory (same filesystem), flushed to
    disk, renamed over ``path`` on success and removed on any exception, so ``path`` is
    whole or absent. A killed writer leaves its temporary file: ``remove_stale_parts``.
    """
    path = Path(path)
    tmp = path.with_name(f".{path.name}.{uuid.uuid4().hex[:12]}.part")
    # os.open with 0o666 lets the umask decide the mode, as for any file the user writes
    # (tempfile.mkstemp would make it 0600, unreadable by a project's group)
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o666)
    try:
        with os.fdopen(fd, mode, **open_options) as f:
            yield f
            f.flush()
            os.fsync(f.fileno())  # the data on disk before the name: a crash leaves the old file, not an empty one
        os.replace(tmp, path)
    except BaseException:
        with contextlib.suppress(OSError):  # the first error is the one to report
            os.unlink(tmp)
        raise
