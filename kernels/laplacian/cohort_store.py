"""A subject's spectrum (``SubjectSpectrum``) and its file, ``<name>.npz``.

One ``.npz`` per subject (NumPy's own format: no extra dependency, one file per subject
so a cohort streams to disk and a partial run keeps what it finished). A file is written
to a temporary name in the same directory and renamed into place, so it is whole or
absent, never half-written, even if the writer is killed.
"""

from __future__ import annotations

import contextlib
import dataclasses
import os
import uuid
import zipfile
from dataclasses import dataclass
from pathlib import Path

import numpy as np

__all__ = ["SubjectSpectrum", "replaced_atomically", "write_spectrum"]

_ARRAYS = ("evals", "evecs", "hks", "hks_times", "wks", "wks_energies")
_SCALARS = ("name", "n_vertices", "n_faces", "wks_sigma", "route", "max_residual", "seconds", "backend", "settings")


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


def write_spectrum(out: Path, spectrum: SubjectSpectrum) -> SubjectSpectrum:
    """Write ``<out>/<name>.npz`` atomically; return the spectrum with only its eigenvalues and path."""
    path = Path(out) / f"{spectrum.name}.npz"
    contents = {name: getattr(spectrum, name) for name in _ARRAYS if getattr(spectrum, name) is not None}
    contents.update({name: np.asarray(getattr(spectrum, name)) for name in _SCALARS
                     if getattr(spectrum, name) is not None})
    contents["reports"] = np.asarray(spectrum.reports, dtype=str)
    with replaced_atomically(path, "wb") as f:
        np.savez(f, **contents)
    return dataclasses.replace(spectrum, evecs=None, hks=None, wks=None, path=path)


def finished_spectrum(out: Path, name: str, settings: str, arrays) -> SubjectSpectrum | None:
    """A subject already written to ``<out>/<name>.npz`` with these settings and ``arrays``.

    Args:
        out, name: where the file is: ``<out>/<name>.npz``.
        settings: the digest the file must carry (``SubjectSpectrum.settings``).
        arrays: the fields it must hold besides the eigenvalues ("hks", "wks", "evecs").

    Returns:
        The subject with its eigenvalues and path (``resumed=True``; its other arrays are
        not read), or None when the file is absent, unreadable, cut short, or computed with
        other settings or without an array asked for: it is then computed again.
    """
    path = Path(out) / f"{name}.npz"
    if not path.is_file():
        return None
    try:
        with np.load(path, allow_pickle=False) as f:
            if "settings" not in f.files or str(f["settings"]) != settings or \
                    any(a not in f.files for a in ("evals", *arrays)):
                return None
            return SubjectSpectrum(path=path, resumed=True, **_fields(f, ("evals",)))
    except (OSError, ValueError, KeyError, EOFError, zipfile.BadZipFile):  # not a whole file this module wrote
        return None


def _fields(f, arrays) -> dict:
    """``SubjectSpectrum`` fields from an open ``.npz``: its scalars, reports and ``arrays`` (those present)."""
    fields = {name: f[name] for name in arrays if name in f.files}
    fields.update({name: f[name].item() for name in _SCALARS if name in f.files})
    fields["reports"] = tuple(str(r) for r in f["reports"]) if "reports" in f.files else ()
    return fields


@contextlib.contextmanager
def replaced_atomically(path: Path, mode: str = "w", **open_options):
    """A file object whose contents replace ``path`` when the block ends, or never appear.

    Written to a hidden temporary file in the same directory (same filesystem), renamed
    over ``path`` on success and removed on any exception, so ``path`` is whole or absent.
    """
    path = Path(path)
    tmp = path.with_name(f".{path.name}.{uuid.uuid4().hex[:12]}.part")
    # os.open with 0o666 lets the umask decide the mode, as for any file the user writes
    # (tempfile.mkstemp would make it 0600, unreadable by a project's group)
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o666)
    try:
        with os.fdopen(fd, mode, **open_options) as f:
            yield f
        os.replace(tmp, path)
    except BaseException:
        os.unlink(tmp)
        raise
