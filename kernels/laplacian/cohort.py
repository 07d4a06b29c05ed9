"""Cohorts: the spectrum (Laplacian, eigenpairs, HKS/WKS) of many subject surfaces.

``cohort_spectra`` runs one task per subject, here (no client) or on a Dask cluster
(``client=``; kernels/tasks.py), with the same results. What a cohort adds to the
per-subject functions:

* subjects sharing a face array (one template mesh, many registered geometries) share
  one ``MeshTopology`` per process: its pattern is built once, not per subject. Topologies
  are looked up by the faces' content, so this holds for meshes read from files on a
  worker too;
* order independence: eigenpairs are not seeded from the previous subject
  (``MeshTopology.eigenpairs(seed=False)``), so a result does not depend on which
  subjects a worker happened to run before it;
* a subject whose mesh is bad fails alone (``TaskFailure``, with its name), and a
  degenerate-face report is kept with the subject it belongs to;
* a worker that dies loses nothing: in-memory meshes travel inside tasks the scheduler can
  run again (``_send_arrays``), files are read again, and subjects are rerun elsewhere;
* with ``out=`` every result goes to ``<out>/<name>.npz`` as it arrives (written to a
  temporary file, then renamed: a file is whole or absent), so a cohort larger than
  memory streams through the client (cohort_store.py).
"""

from __future__ import annotations

import collections
import functools
import hashlib
import logging
import os
import threading
import uuid
import warnings
from dataclasses import dataclass, field, replace
from pathlib import Path

import numpy as np

from ..tasks import FailedTasks, check_client, check_errors, raise_failures, run_tasks
from .cohort_store import DTYPES, SubjectSpectrum, finished_spectrum, mesh_digest, write_spectrum
from .eigen import METHODS
from .factor import LIBRARIES
from .inputs import check_vertices, host_vector
from .spectral import hks, hks_times, wks, wks_params
from .topology import MeshTopology

__all__ = ["DESCRIPTORS", "CohortError", "SubjectSpectrum", "cohort_spectra", "settings_digest"]

DESCRIPTORS = ("hks", "wks")
EIGEN_OPTIONS = ("method", "sigma", "tol", "maxiter", "dense_max", "factor")
TOPOLOGIES_KEPT = 4  # distinct face arrays whose topology a process keeps (LRU)


class CohortError(FailedTasks):
    """Some subjects failed; the others completed (``results``, ``failures``: see ``FailedTasks``)."""


@dataclass(frozen=True)
class _Settings:
    k: int
    descriptors: tuple
    keep_evecs: bool
    hks_times: np.ndarray | None
    wks_energies: np.ndarray | None
    wks_sigma: float | None
    eigen_options: dict = field(default_factory=dict)
    dtype: str = "float64"  # of evecs, HKS and WKS as returned and written
    mesh_digests: bool = False  # with out=: each subject records its mesh's digest for resume (not in digest())

    def digest(self) -> str:
        """What a result depends on, as a short hex digest (``resume`` compares it)."""
        h = hashlib.blake2b(digest_size=12)
        h.update(repr((self.k, self.descriptors, self.wks_sigma, sorted(self.eigen_options.items()))).encode())
        for grid in (self.hks_times, self.wks_energies):
            h.update(b"-" if grid is None else grid.tobytes())
        if self.dtype != "float64":  # float64 digests stay those of files written before dtype= existed
            h.update(f"dtype={self.dtype}".encode())
        return h.hexdigest()


def cohort_spectra(meshes, k: int = 100, *, descriptors=DESCRIPTORS, client=None, out=None, names=None,
                   backend=None, errors: str = "raise", keep_evecs: bool = False, hks_times=None,
                   wks_energies=None, wks_sigma=None, resume: bool = False, progress=False,
                   dtype="float64", compress: bool = False, **eigen_options) -> list:
    """The k smallest eigenpairs and the HKS/WKS of every subject, in input order.

    Args:
        meshes: the subjects: a sequence, or a mapping {name: mesh}. A mesh is a pair
            ``(vertices (N, 3), faces (F, 3))``, an object with ``.vertices`` and ``.faces``
            (SpectralBrain's ``TriangleMesh``, trimesh), or a path to a file that
            ``mesh_io.read_mesh`` reads (read where the task runs: on a worker, files
            must be on a filesystem it sees).
        k: eigenpairs per subject.
        descriptors: any of "hks", "wks".
        client: a ``distributed.Client``: one task per subject on its workers, each on its
            worker's backend (``kernelrt.distributed``); None runs here, on ``backend``.
        out: a directory: each subject's arrays go to ``<out>/<name>.npz`` as it completes
            and the returned results keep only the eigenvalues and the path.
        names: one name per subject; default: the mapping's keys, the files' names
            (``mesh_io.subject_names``), else ``subject-0000``, ... Names must be unique.
        backend: the backend of a run without a client (None: "auto").
        errors: "raise" raises ``CohortError`` after every subject has run if any failed
            (its ``results`` hold the others); "keep" returns ``TaskFailure`` in their place.
        keep_evecs: also return (or write) the (N, k) eigenvectors.
        hks_times: HKS times shared by all subjects (``shared_hks_times`` makes columns
            comparable across subjects); None: each subject's own grid, as ``hks``.
        wks_energies: WKS log-energies shared by all subjects; None: each subject's own.
        wks_sigma: the WKS bandwidth shared by all subjects; None: each subject's own.
        resume: with ``out``, subjects whose ``<out>/<name>.npz`` is already there (every
            array whole and consistent, same k, settings and descriptors, computed from
            the mesh as it is now: the file's bytes or the arrays) are not computed again:
            a cohort cut short (a preempted job, a dead client) continues where it stopped.
        progress: True draws a bar over subjects (on a terminal or in Jupyter); a callable gets 1 per subject.
        dtype: "float64", or "float32" to return and write ``evecs``, ``hks`` and ``wks`` in
            half the bytes (computed in float64, rounded where the task runs; ``evals`` and
            the grids stay float64). Part of the settings ``resume`` compares.
        compress: with ``out``, deflate each file (``np.savez_compressed``): smaller, slower
            to write; read back alike, and ``resume`` keeps files written either way.
        **eigen_options: passed to ``eigenpairs`` (method, sigma, tol, maxiter, dense_max, factor).

    Returns:
        A list of ``SubjectSpectrum`` (and ``TaskFailure`` with ``errors="keep"``).

    Raises:
        TypeError, ValueError: an argument is malformed (before any subject runs).
        CohortError: with ``errors="raise"``, after the others completed, if any subject failed.
    """
    settings = _check_settings(k, descriptors, keep_evecs, hks_times, wks_energies, wks_sigma, eigen_options, dtype)
    settings = replace(settings, mesh_digests=out is not None)  # hashing a mesh is for resume only
    check_errors(errors)
    check_client(client, backend)
    jobs, names = _jobs(meshes, names)
    for flag, what in ((resume, "resume=True continues a run"), (compress, "compress=True compresses the files")):
        if flag and out is None:
            raise ValueError(f"{what} written to out=: give out too")
    out = _out_dir(out)
    done = {}
    if resume:
        arrays, digest = settings.descriptors + ("evecs",) * settings.keep_evecs, settings.digest()
        done = {i: s for i, n in enumerate(names)
                if (s := finished_spectrum(out, n, digest, arrays, _mesh_digest(jobs[i]))) is not None}
    todo = [i for i in range(len(jobs)) if i not in done]
    jobs = [jobs[i] for i in todo]
    if client is not None and jobs:
        jobs = _send_arrays(client, jobs)
    on_done = None if out is None else functools.partial(_write, out, bool(compress))
    computed = run_tasks(functools.partial(_subject, settings), jobs, [names[i] for i in todo], backend=backend,
                         client=client, on_done=on_done, progress=progress, what="subjects") if jobs else []
    done.update(zip(todo, computed))
    results = [done[i] for i in range(len(names))]
    return raise_failures(results, errors, CohortError, "subjects")


def settings_digest(k: int, descriptors=DESCRIPTORS, *, keep_evecs=False, hks_times=None, wks_energies=None,
                    wks_sigma=None, dtype="float64", **eigen_options) -> str:
    """The ``settings`` digest ``cohort_spectra`` with these arguments gives its subjects (and ``resume`` compares)."""
    return _check_settings(k, descriptors, keep_evecs, hks_times, wks_energies, wks_sigma, eigen_options,
                           dtype).digest()


# -- arguments (on the caller's side, before any work) ------------------------------------------


def _check_settings(k, descriptors, keep_evecs, hks_times, wks_energies, wks_sigma, eigen_options,
                    dtype="float64") -> _Settings:
    if isinstance(k, bool) or not isinstance(k, (int, np.integer)) or k < 1:
        raise ValueError(f"k must be a positive int (got {k!r})")
    if _dtype_name(dtype) not in DTYPES:
        raise ValueError(f"dtype must be float64 or float32 (got {dtype!r})")
    if isinstance(descriptors, str):
        descriptors = (descriptors,)
    descriptors = tuple(descriptors)
    unknown = [d for d in descriptors if d not in DESCRIPTORS]
    if unknown:
        raise ValueError(f"descriptors must be among {DESCRIPTORS} (got {unknown})")
    _check_eigen_options(eigen_options)
    grid = {name: None if a is None else host_vector(a, name)
            for name, a in (("hks_times", hks_times), ("wks_energies", wks_energies))}
    for name, a in grid.items():
        if a is not None and (a.size == 0 or not np.all(np.isfinite(a))):
            raise ValueError(f"{name} must be a non-empty array of finite numbers (got {a!r})")
    if grid["hks_times"] is not None and np.any(grid["hks_times"] <= 0):
        raise ValueError(f"hks_times must be > 0 (got {grid['hks_times']!r})")
    if wks_sigma is not None and not (_real(wks_sigma) and np.isfinite(wks_sigma) and wks_sigma > 0):
        raise ValueError(f"wks_sigma must be a positive number (got {wks_sigma!r})")
    return _Settings(int(k), descriptors, bool(keep_evecs), grid["hks_times"], grid["wks_energies"],
                     None if wks_sigma is None else float(wks_sigma), dict(eigen_options), _dtype_name(dtype))


def _dtype_name(dtype) -> str | None:
    """"float32" for "float32", np.float32 or np.dtype("float32"); None for what is not a dtype."""
    try:
        return np.dtype(dtype).name if isinstance(dtype, (str, type, np.dtype)) else None
    except TypeError:  # a name NumPy does not know
        return None


def _real(x) -> bool:
    return isinstance(x, (int, float, np.integer, np.floating)) and not isinstance(x, bool)


def _check_eigen_options(options: dict) -> None:
    """The ``eigenpairs`` options every subject would refuse, refused once, before any work."""
    extra = sorted(set(options) - set(EIGEN_OPTIONS))
    if extra:
        raise TypeError(f"cohort_spectra got unexpected options {extra}; eigenpairs options are {EIGEN_OPTIONS}")
    allowed = {"method": METHODS, "factor": ("auto", *LIBRARIES)}
    for name, values in allowed.items():
        if name in options and options[name] not in values:
            raise ValueError(f"{name} must be one of {', '.join(map(repr, values))} (got {options[name]!r})")
    checks = {"sigma": lambda x: np.isfinite(x) and x < 0, "tol": lambda x: np.isfinite(x) and x > 0,
              "maxiter": lambda x: isinstance(x, (int, np.integer)) and x > 0,
              "dense_max": lambda x: isinstance(x, (int, np.integer)) and x > 0}
    wanted = {"sigma": "a finite number < 0", "tol": "a finite number > 0", "maxiter": "a positive int",
              "dense_max": "a positive int"}
    for name, ok in checks.items():
        value = options.get(name)
        if value is not None and not (_real(value) and ok(value)):
            raise ValueError(f"{name} must be {wanted[name]} (got {value!r})")


def _jobs(meshes, names) -> tuple[list[dict], list[str]]:
    """One job per subject: ``{"path": ...}`` or ``{"vertices": ..., "faces": ...}``."""
    if isinstance(meshes, (str, os.PathLike)) or not hasattr(meshes, "__iter__"):
        raise TypeError(f"meshes must be a sequence or a mapping of meshes (got {type(meshes).__name__})")
    if isinstance(meshes, collections.abc.Mapping):
        given, meshes = [str(n) for n in meshes], list(meshes.values())
    else:
        given, meshes = None, list(meshes)
    if not meshes:
        raise ValueError("meshes is empty")
    jobs = [_job(mesh, i) for i, mesh in enumerate(meshes)]
    if names is None:
        names = given or _default_names(jobs)
    names = [str(n) for n in names]
    if len(names) != len(jobs):
        raise ValueError(f"names must have one name per mesh ({len(jobs)}) (got {len(names)})")
    repeated = sorted({n for n in names if names.count(n) > 1})
    if repeated:
        raise ValueError(f"subject names must be unique (repeated: {repeated[:5]})")
    unsafe = [n for n in names if not n or n.startswith(".") or any(c in n for c in "/\\\0")]
    if unsafe:
        raise ValueError(f"subject names name their files <out>/<name>.npz: no '/', '\\', NUL or leading '.' "
                         f"(got {unsafe[:5]})")
    for job, name in zip(jobs, names):
        job["name"] = name
    return jobs, names


def _job(mesh, i: int) -> dict:
    if isinstance(mesh, (str, os.PathLike)):
        return {"path": os.path.abspath(mesh)}  # a worker's working directory is not ours
    if hasattr(mesh, "vertices") and hasattr(mesh, "faces"):
        return {"vertices": mesh.vertices, "faces": mesh.faces}
    if isinstance(mesh, (tuple, list)) and len(mesh) == 2:
        return {"vertices": mesh[0], "faces": mesh[1]}
    raise TypeError(
        f"meshes[{i}] must be a (vertices, faces) pair, an object with .vertices and .faces, or a file path "
        f"(got {type(mesh).__name__})"
    )


def _default_names(jobs: list[dict]) -> list[str]:
    if all("path" in j for j in jobs):
        from .mesh_io import subject_names

        return subject_names([j["path"] for j in jobs])
    return [f"subject-{i:04d}" for i in range(len(jobs))]


def _out_dir(out) -> Path | None:
    if out is None:
        return None
    if not isinstance(out, (str, os.PathLike)):
        raise TypeError(f"out must be a directory path or None (got {type(out).__name__})")
    out = Path(out)
    if out.exists() and not out.is_dir():
        raise ValueError(f"out must be a directory (got the file {out})")
    out.mkdir(parents=True, exist_ok=True)
    return out


def _send_arrays(client, jobs: list[dict]) -> list[dict]:
    """In-memory meshes go to the cluster inside tasks that return them (a face array shared by
    subjects, once), and each subject's task takes their futures.

    Not ``client.scatter``: scattered data has no lineage, so when the worker holding it dies
    the subjects that need it are cancelled. A task keeps its arguments on the scheduler until
    it is forgotten, so the scheduler runs it again elsewhere and a killed worker loses no
    subject; the price is a copy of each array on the scheduler until its subjects complete.
    """
    shared, keys = {}, {}  # content key -> future; id -> content key (subjects often pass one object)
    run = uuid.uuid4().hex[:8]
    with warnings.catch_warnings():  # the arrays are meant to travel in the graph
        warnings.filterwarnings("ignore", message="Sending large graph", category=UserWarning)
        for i, job in enumerate(jobs):
            if "faces" in job:
                f = job["faces"]
                key = keys.get(id(f)) or keys.setdefault(id(f), _faces_key(f))
                if key not in shared:
                    shared[key] = client.submit(_array, f, key=f"kernelrt-faces-{run}-{len(shared)}", pure=False)
                job["faces"] = shared[key]
                job["vertices"] = client.submit(_array, job["vertices"], key=f"kernelrt-vertices-{run}-{i}",
                                                pure=False)
    return jobs


def _array(a):
    """A mesh array sent inside its task (``_send_arrays``): the task's result is the array."""
    return a


def _faces_key(faces) -> tuple:
    """A face array's identity by content: equal arrays share a topology and are sent once."""
    f = np.ascontiguousarray(faces)
    return f.shape, f.dtype.str, hashlib.blake2b(f.tobytes(), digest_size=16).hexdigest()


# -- one subject (where the task runs) ----------------------------------------------------------


def _mesh_digest(job: dict) -> str | None:
    """What ``resume`` compares: the mesh file's bytes, or the arrays (``mesh_digest``)."""
    if "path" in job:
        return mesh_digest(path=job["path"])
    return mesh_digest(vertices=job["vertices"], faces=job["faces"])


def _subject(settings: _Settings, job: dict, backend) -> SubjectSpectrum:
    # before reading: an edit between the two gives a file resume redoes
    mesh = _mesh_digest(job) if settings.mesh_digests else None
    if "path" in job:
        from .mesh_io import read_mesh

        vertices, faces = read_mesh(job["path"])
    else:
        vertices, faces = job["vertices"], job["faces"]
    v = check_vertices(vertices)
    topology = _topology(faces, v.shape[0])
    _REPORTS.lines = []
    L, m = topology.assemble(v, backend)
    pairs = topology.eigenpairs(L, m, settings.k, seed=False, backend=backend, **settings.eigen_options)
    stored = functools.partial(np.asarray, dtype=settings.dtype)  # rounded here: a float32 result travels in half
    arrays = {"evals": pairs.evals, "evecs": stored(pairs.evecs) if settings.keep_evecs else None}
    if "hks" in settings.descriptors:
        t = settings.hks_times if settings.hks_times is not None else hks_times(pairs.evals)
        arrays["hks"], arrays["hks_times"] = stored(hks(pairs, t=t, backend=backend)), t
    if "wks" in settings.descriptors:
        e, sigma = wks_params(pairs.evals)
        e = settings.wks_energies if settings.wks_energies is not None else e
        sigma = settings.wks_sigma if settings.wks_sigma is not None else sigma
        arrays["wks"] = stored(wks(pairs, e=e, sigma=sigma, backend=backend))
        arrays["wks_energies"], arrays["wks_sigma"] = e, sigma
    return SubjectSpectrum(
        name=job["name"], n_vertices=topology.n_vertices, n_faces=topology.n_faces, route=pairs.route,
        max_residual=float(pairs.residuals.max()), seconds=pairs.seconds, backend=backend.name,
        reports=tuple(_REPORTS.lines), settings=settings.digest(), mesh=mesh or "", dtype=settings.dtype, **arrays,
    )


class _ReportCollector(logging.Logger):
    """A topology's ``report``: keeps its degenerate-face lines for the subject on this thread."""

    def __init__(self):
        super().__init__("kernelrt.laplacian.cohort")
        self._local = threading.local()

    lines = property(lambda self: self._local.__dict__.setdefault("lines", []),
                     lambda self, value: setattr(self._local, "lines", value))

    def warning(self, fmt, *args, **kwargs):
        self.lines.append(fmt % args if args else str(fmt))


_REPORTS = _ReportCollector()
_topologies: collections.OrderedDict = collections.OrderedDict()
_topologies_lock = threading.Lock()


def _topology(faces, n_vertices: int) -> MeshTopology:
    """This process's topology for ``faces`` (by content), built on first use."""
    f = np.ascontiguousarray(faces)
    key = (n_vertices, *_faces_key(f))
    with _topologies_lock:
        topology = _topologies.get(key)
        if topology is not None:
            _topologies.move_to_end(key)
            return topology
    topology = MeshTopology(f, n_vertices, report=_REPORTS)
    with _topologies_lock:
        topology = _topologies.setdefault(key, topology)
        while len(_topologies) > TOPOLOGIES_KEPT:
            _topologies.popitem(last=False)
    return topology


def _write(out: Path, compress: bool, i: int, spectrum: SubjectSpectrum) -> SubjectSpectrum:
    return write_spectrum(out, spectrum, compress=compress)
