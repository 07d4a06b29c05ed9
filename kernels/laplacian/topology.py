"""MeshTopology: build the Laplacian's pattern once per face array, assemble it many times.

Owns the life cycle of the topology tables (host copies, per-device copies made on
first use, the atomic variant's face slots made only when asked for) and the
user-facing assembly entry points with their warnings. Geometry enters only through
``assemble`` / ``assemble_batch``; the face array is copied and validated once.

The CSR matrices returned share the topology's ``indptr`` / ``indices`` through
read-only views: cheap to make, and an in-place edit (``eliminate_zeros``) raises
instead of silently corrupting the pattern the next assembly relies on. Their values
and masses come from a ``HostBufferPool``: memory of earlier results is reused only
once nothing references those results any more. On a device, the working sets of
assemblies (flags, flag counter, stream, and the vertices, values and masses of results
that go back to the host) come from a ``DeviceBufferPool``, reused call after call.
"""

from __future__ import annotations

import logging
import threading
import warnings
from typing import Any, TypeAlias

import numpy as np
import numpy.typing as npt
import scipy.sparse as sp

import kernelrt

from .assembly import MASS_FLOOR, assemble_values
from .batching import run_on_device
from .buffers import DeviceBufferPool, HostBufferPool
from .eigen import Eigenpairs, eigenpairs
from .factor import ShiftPattern
from .inputs import (
    DegenerateMeshWarning,
    check_device_vertices,
    check_faces,
    check_report,
    check_vertex_batch,
    check_vertices,
)
from .pattern import build_face_slots, build_pattern
from .placement import cupy_or_none, host_backend

__all__ = ["MeshTopology", "DeviceCSR", "cotan_laplacian"]

_TABLES = ("indptr", "indices", "inc_ptr", "inc", "inc_nbr", "inc_slot", "diag_slot")  # deterministic kernel
_VARIANTS = ("deterministic", "atomic")
logger = logging.getLogger("kernelrt.laplacian")


# how degenerate faces are reported: "warn", "log" or a logger of the caller's
Report: TypeAlias = "str | logging.Logger | logging.LoggerAdapter[Any]"


class DeviceCSR:
    """A CSR matrix whose arrays live on a CUDA device (numba device arrays).

    Returned by ``assemble(..., keep_on_device=True)`` when CuPy is not installed;
    ``laplacian_matvec`` and ``LaplacianOperator`` take it directly.

    Attributes:
        data: (nnz,) float64 values on the device.
        indices: (nnz,) column indices on the device.
        indptr: (N + 1,) row pointers on the device.
        shape: ``(N, N)``.
    """

    __slots__ = ("data", "indices", "indptr", "shape")

    def __init__(self, data: Any, indices: Any, indptr: Any, shape: tuple[int, int]) -> None:
        self.data, self.indices, self.indptr, self.shape = data, indices, indptr, shape

    def __repr__(self):
        return f"<DeviceCSR {self.shape[0]}x{self.shape[1]} with {self.data.shape[0]} stored entries>"


def _readonly(a: np.ndarray) -> np.ndarray:
    view = a.view()
    view.flags.writeable = False
    return view


class MeshTopology:
    """The cotangent Laplacian's sparsity pattern and value-kernel tables for one face array.

    Args:
        faces: (F, 3) integer triangles, 0-based, entries in [0, n_vertices).
        n_vertices: number of vertices N (vertices referenced by no face are allowed:
            they get an empty row, m = 1e-20 and a warning at assembly).
        report: how assembly reports degenerate faces and isolated vertices: "warn" (a
            ``DegenerateMeshWarning``, the default), "log" (``logger.warning`` on the
            "kernelrt.laplacian" logger) or a ``logging.Logger`` to log on (SpectralBrain's
            convention, with its own logger: the suites that run with warnings as errors
            then pass).

    Attributes:
        n_vertices: number of vertices N.
        n_faces: number of faces kept (faces repeating a vertex are dropped).
        nnz: stored entries; the diagonal of every row is stored, possibly as an
            explicit zero.
        index_dtype: int32, or int64 when N + 6F does not fit in int32.
        indptr: the CSR row pointers (a read-only view).
        indices: the CSR column indices, sorted within each row (a read-only view).
        n_repeated_faces: faces that repeat a vertex index (always dropped).
        n_unreferenced: vertices in no face with three distinct indices.
        report: as given.
    """

    def __init__(self, faces: npt.ArrayLike, n_vertices: int, *, report: Report = "warn") -> None:
        self.report = check_report(report)
        f = check_faces(faces, n_vertices)
        self._pattern = build_pattern(f, int(n_vertices), host_backend())
        p = self._pattern
        self.n_vertices = int(n_vertices)
        self.n_faces = int(f.shape[0])
        self.nnz = int(p.indices.shape[0])
        self.index_dtype = f.dtype
        self.n_unreferenced = int(np.count_nonzero(p.counts == 0))
        self.n_repeated_faces = self.n_faces - int(p.inc.shape[0]) // 3
        self._face_slots = None
        self._device: dict[tuple, dict] = {}
        self._lock = threading.Lock()
        self._pool = HostBufferPool()  # recycles the host outputs of repeated assemblies
        self._device_pool = DeviceBufferPool()  # and their device working sets (buffers.py)
        self._shift_pattern = None  # made by the first eigenpairs call
        self._last_evecs: dict[int, np.ndarray] = {}

    # -- pattern -----------------------------------------------------------------------------

    @property
    def indptr(self) -> np.ndarray:
        """(N + 1,) CSR row pointers of L's pattern (read-only)."""
        return _readonly(self._pattern.indptr)

    @property
    def indices(self) -> np.ndarray:
        """(nnz,) CSR column indices of L's pattern, sorted within each row (read-only)."""
        return _readonly(self._pattern.indices)

    @property
    def faces(self) -> np.ndarray:
        """(F, 3) the faces as given, in the pattern's index dtype (a read-only copy)."""
        return _readonly(self._pattern.faces)

    def __repr__(self):
        return (
            f"<MeshTopology N={self.n_vertices} F={self.n_faces} nnz={self.nnz} "
            f"index={self.index_dtype.name}>"
        )

    def to_csr(self, values: npt.ArrayLike) -> sp.csr_matrix:
        """The N x N CSR matrix with this pattern and ``values`` (nnz,) (shared, not copied)."""
        values = np.asarray(values)
        if values.shape != (self.nnz,):
            raise ValueError(f"values must have shape ({self.nnz},) (got {values.shape})")
        L = sp.csr_matrix((values, self.indices, self.indptr), shape=(self.n_vertices,) * 2, copy=False)
        L.has_sorted_indices = True
        L.has_canonical_format = True
        return L

    def matrices(self, values: npt.ArrayLike) -> list[sp.csr_matrix]:
        """One CSR matrix per row of a batch's ``values`` (S, nnz)."""
        values = np.asarray(values)
        if values.ndim != 2 or values.shape[1] != self.nnz:
            raise ValueError(f"values must have shape (S, {self.nnz}) (got {values.shape})")
        return [self.to_csr(v) for v in values]

    # -- tables on a backend ---------------------------------------------------------------------

    def eigenpairs(self, L: Any, m: Any, k: int = 100, *, seed: bool = True, **options: Any) -> Eigenpairs:
        """``eigenpairs(L, m, k, **options)`` for a subject assembled on this topology.

        The work that depends on the topology alone is done once, by the first subject:
        the shifted matrix's pattern (factor.py). The connected-component check runs on
        every subject's L (faces dropped as degenerate depend on its geometry). With
        ``seed=True`` the previous subject's eigenvectors (same k, kept on the topology)
        start the solve: ~20% fewer products on the Chebyshev route, no change on the
        Cholesky route (docs/laplacian.md, "Cohorts").
        """
        with self._lock:
            if self._shift_pattern is None:
                p = self._pattern
                Lc = sp.csr_matrix((np.zeros(self.nnz), p.indices, p.indptr), shape=(self.n_vertices,) * 2)
                self._shift_pattern = ShiftPattern(Lc)
            pattern = self._shift_pattern
            start = self._last_evecs.get(k) if seed else None
        result = eigenpairs(L, m, k, pattern=pattern, start=start, **options)
        if seed:
            with self._lock:
                self._last_evecs[k] = result.evecs
        return result

    def _tables(self, backend, variant: str) -> dict:
        """The kernel-facing tables on ``backend`` (copied to a device once, then cached)."""
        key = (backend.name, backend.device_id)
        with self._lock:
            tables = self._device.get(key)
            if tables is None:
                tables = {name: self._on(backend, getattr(self._pattern, name)) for name in _TABLES}
                self._device[key] = tables
            if variant == "atomic" and "face_slots" not in tables:
                if self._face_slots is None:
                    self._face_slots = build_face_slots(self._pattern, host_backend(backend))
                tables["faces"] = self._on(backend, self._pattern.faces)
                tables["face_slots"] = self._on(backend, self._face_slots)
            return tables

    @staticmethod
    def _on(backend, a: np.ndarray):
        # int32 tables go to the value kernels as uint32 views: numba then skips the
        # negative-index fix-up on every gather (~30 % of the CPU kernel's time at 655k
        # vertices). int64 tables stay signed: numba types uint64 (op) int64 as float64.
        if a.dtype == np.int32:
            a = a.view(np.uint32)
        return a if backend.name == "cpu" else backend.to_device(a)

    # -- assembly --------------------------------------------------------------------------------

    def assemble(self, vertices: Any, backend: str | kernelrt.Backend | None = None, *, variant: str = "deterministic",
                 keep_on_device: bool = False) -> tuple[Any, Any]:
        """Cotangent Laplacian L (PSD, SpectralBrain's sign) and lumped barycentric mass m.

        Args:
            vertices: (N, 3) finite coordinates: host array-like, or on a CUDA backend a
                C-contiguous float64 device array (used in place, not copied; NaN/inf are
                not checked there, and faces touching them are dropped as degenerate).
            backend: a kernelrt backend, a kind ("auto", "cpu", "cuda") or None (auto).
            variant: "deterministic" (atomic-free, bitwise reproducible; default) or
                "atomic" (per-face fp64 atomics; CUDA cc >= 6.0, CPU twin elsewhere).
            keep_on_device: on a CUDA backend, return device data: a cupyx CSR matrix and
                a CuPy mass vector when CuPy is installed, else a ``DeviceCSR`` and a numba
                device array. Ignored on the CPU.

        Returns:
            ``(L, m)``: scipy CSR (N, N) float64 and (N,) float64 on the host (default).

        Warns:
            DegenerateMeshWarning: degenerate faces were dropped, vertices lost all faces, or
                vertex areas fell below the mass floor 1e-20 and were raised to it (a mesh too
                small in its units); one message each per call, saying how many (logged
                instead with the topology's ``report="log"`` or a logger).
        """
        be = kernelrt.get_backend(backend)
        if _on_device(be, vertices):
            V3 = check_device_vertices(vertices, self.n_vertices, batch=False).reshape(1, self.n_vertices, 3)
        else:
            v = check_vertices(vertices)
            if v.shape[0] != self.n_vertices:
                raise ValueError(
                    f"vertices must have the topology's {self.n_vertices} rows (got shape {v.shape})"
                )
            V3 = v[None]
        vals, mass = self._run(V3, be, variant, keep_on_device)
        if be.name == "cpu" or not keep_on_device:
            return self.to_csr(vals[0]), mass[0]
        return self._device_result(be, vals[0], mass[0])

    def assemble_batch(self, vertices: Any, backend: str | kernelrt.Backend | None = None, *,
                       variant: str = "deterministic", keep_on_device: bool = False) -> tuple[Any, Any]:
        """Assemble a cohort sharing these faces in one launch (index: row x subject).

        Args:
            vertices: (S, N, 3) coordinates, one mesh per subject.
            backend: as in ``assemble``.
            variant: as in ``assemble``.
            keep_on_device: on CUDA, return the device arrays (the whole cohort must fit).

        Returns:
            ``(values, masses)``: (S, nnz) CSR values on this pattern and (S, N) masses
            (host numpy unless ``keep_on_device``). ``matrices(values)`` gives the S CSR
            matrices.
        """
        be = kernelrt.get_backend(backend)
        if _on_device(be, vertices):
            v = check_device_vertices(vertices, self.n_vertices, batch=True)
        else:
            v = check_vertex_batch(vertices, self.n_vertices)
        return self._run(v, be, variant, keep_on_device)

    def _run(self, V3, be, variant, keep_on_device):
        if variant not in _VARIANTS:
            raise ValueError(f"variant must be 'deterministic' or 'atomic' (got {variant!r})")
        tables = self._tables(be, variant)
        if be.name == "cpu":
            vals, mass, n_bad, n_iso = assemble_values(be, tables, V3, variant, self._pool)
        else:
            vals, mass, n_bad, n_iso = run_on_device(be, tables, V3, variant, self.nnz, keep_on_device,
                                                     self._device_pool)
        self._report_dropped(n_bad, n_iso, V3.shape[0], _n_at_floor(be, mass) - n_iso)
        return vals, mass

    def _report_dropped(self, n_bad_geometric: int, n_isolated: int, n_subjects: int, n_clamped: int = 0) -> None:
        n_bad = n_bad_geometric + self.n_repeated_faces * n_subjects
        where = "" if n_subjects == 1 else f" (summed over {n_subjects} subjects)"
        messages = []
        if n_bad:
            messages.append(
                f"dropped {n_bad} degenerate face(s) of {self.n_faces * n_subjects}{where} "
                f"(repeated index or 2·area <= 1e-12·longest edge²); they contribute nothing to L or m"
            )
        if n_isolated:
            messages.append(
                f"{n_isolated} vertex(es){where} belong to no kept face: their rows of L are empty "
                f"and m = 1e-20, which gives spurious zero eigenvalues; remove them before decomposing"
            )
        if n_clamped:
            messages.append(
                f"{n_clamped} vertex area(s){where} fell below the mass floor {MASS_FLOOR:g} and were raised to "
                f"it, so m no longer matches L there and the spectrum is wrong: the mesh is too small in its "
                f"units; scale the vertices up (e.g. metres to millimetres) before assembling"
            )
        for message in messages:
            if self.report == "warn":
                warnings.warn(message, DegenerateMeshWarning, stacklevel=4)
            else:
                (logger if self.report == "log" else self.report).warning("%s", message)

    def _device_result(self, be, vals, mass):
        cp = cupy_or_none(be)
        tables = self._tables(be, "deterministic")
        # back to the signed index types every sparse library expects (see _on)
        indices, indptr = (_signed(tables[name]) for name in ("indices", "indptr"))
        if cp is None:
            return DeviceCSR(vals, indices, indptr, (self.n_vertices,) * 2), mass
        import cupyx.scipy.sparse as csp  # optional GPU library: only for cupyx output on a GPU

        with be.activated():
            # Copies of the cached pattern: cupyx may sort or deduplicate in place, which
            # must not reach the tables later assemblies use.
            L = csp.csr_matrix(
                (cp.asarray(vals), cp.asarray(indices).copy(), cp.asarray(indptr).copy()),
                shape=(self.n_vertices,) * 2,
            )
            return L, cp.asarray(mass)


def _n_at_floor(be, mass) -> int:
    """Vertices whose mass the assembly clamped to ``MASS_FLOOR`` (isolated ones included)."""
    if isinstance(mass, np.ndarray):
        return int(np.count_nonzero(mass <= MASS_FLOOR))
    cp = cupy_or_none(be)
    if cp is None:
        return int(np.count_nonzero(be.to_host(mass) <= MASS_FLOOR))
    with be.activated():
        return int(cp.count_nonzero(cp.asarray(mass) <= MASS_FLOOR))


def _on_device(be, vertices) -> bool:
    return be.name == "cuda" and be.is_device_array(vertices)


def _signed(a):
    return a.view(np.int32) if a.dtype == np.uint32 else a


def cotan_laplacian(vertices: Any, faces: npt.ArrayLike, backend: str | kernelrt.Backend | None = None, *,
                    report: Report = "warn", **options: Any) -> tuple[Any, Any]:
    """``MeshTopology(faces, len(vertices), report=report).assemble(vertices, backend, **options)``.

    Validates the vertices before building anything. Build a ``MeshTopology`` yourself
    to reuse the pattern across geometries (several subjects, time steps, surrogates).
    ``as_spectralbrain(L, m)`` turns the result into SpectralBrain's types.
    """
    be = kernelrt.get_backend(backend)
    if _on_device(be, vertices):
        return MeshTopology(faces, int(vertices.shape[0]), report=report).assemble(vertices, be, **options)
    v = check_vertices(vertices)
    return MeshTopology(faces, v.shape[0], report=report).assemble(v, be, **options)
