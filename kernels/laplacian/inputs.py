"""Input checks for the cotangent-Laplacian library, run before any work is done.

Owns: the rules for what a vertex array and a face array may be, the conversion to
the exact dtypes and layouts the kernels are compiled for, the warning category
for meshes that are usable but suspicious (degenerate faces, isolated vertices), how
they are reported (``REPORTS``), and the forms a mass and a 1-D parameter may take
(a peer's diagonal sparse mass matrix, an (n, 1) column; never a quantity with units).
An operator's numbers (L's stored entries, the mass, eigenpairs, descriptor grids) must be
finite: ``check_finite`` refuses NaN and inf, before any work, in what the host holds
(eigenpairs' L and mass, a device mass once copied back; ``MeshTopology.eigenpairs`` and
so cohorts; ``hks``/``wks``; a host mass given to ``LaplacianOperator`` or
``as_spectralbrain``). A mass already on the device is checked by ``eigenpairs`` only.

Errors are ``TypeError`` (wrong kind of array) or ``ValueError`` (wrong shape or
content), with lowercase messages that name the argument and show what was given.
"""

from __future__ import annotations

import logging

import numpy as np
import scipy.sparse as sp

from ..conventions import refuse_quantity

__all__ = [
    "DegenerateMeshWarning",
    "REPORTS",
    "check_report",
    "check_finite",
    "mass_vector",
    "host_square_sparse",
    "host_vector",
    "check_vertices",
    "check_device_vertices",
    "check_vertex_batch",
    "check_faces",
    "index_dtype_for",
]

INT32_MAX = np.iinfo(np.int32).max


class DegenerateMeshWarning(UserWarning):
    """Degenerate faces were dropped, or vertices belong to no kept face."""


REPORTS = ("warn", "log")
MASS_HINT = "the lumped mass is each vertex's share of its faces' area: assemble it from finite vertices"
L_HINT = ("an assembled L is finite for finite vertices of moderate scale: check what produced it "
          "(coordinates near 1e150 overflow the cotangents)")


def check_report(report):
    """``report`` as given when it is "warn", "log" or a ``logging.Logger`` (or adapter)."""
    if isinstance(report, (logging.Logger, logging.LoggerAdapter)) or (isinstance(report, str) and report in REPORTS):
        return report
    raise ValueError(f"report must be 'warn', 'log' or a logging.Logger (got {report!r})")


def check_finite(a, name: str, what: str = "entries", hint: str = "") -> None:
    """Raise ``ValueError`` naming ``name`` if the host array ``a`` holds NaN or inf."""
    a = np.asarray(a)
    if a.dtype.kind != "f" and a.dtype.kind != "c":
        return  # integers and booleans are finite
    finite = np.isfinite(a)
    if finite.all():
        return
    n_nan = int(np.count_nonzero(np.isnan(a)))
    n_inf = int(a.size - np.count_nonzero(finite)) - n_nan
    raise ValueError(
        f"{name} must hold finite numbers (got {n_nan} NaN and {n_inf} inf among its {a.size} {what})"
        + (f"; {hint}" if hint else "")
    )


def _is_cupyx_sparse(a) -> bool:
    return type(a).__module__.startswith("cupyx.scipy.sparse")


def mass_vector(m, n: int, name: str = "m"):
    """The lumped mass as an (n,) vector, from any form a caller or a peer passes it in.

    Accepts an (n,) vector, an (n, 1) column, or a diagonal sparse (n, n) matrix in any
    SciPy or cupyx format (SpectralBrain's ``M``, a ``dia_matrix``): its diagonal. Host
    forms come back as NumPy arrays (dtype unchanged); a CUDA device array is returned as
    it is, a column reshaped to (n,).

    Raises:
        TypeError: a quantity with units, or not numbers.
        ValueError: another shape, NaN or inf in a host form (device arrays are checked
            where they are read back, as ``eigenpairs`` does), or a sparse matrix with
            non-zero off-diagonal entries (kernelrt's eigensolvers and heat steps need the
            lumped, diagonal mass).
    """
    want = f"{name} must have shape ({n},) or ({n}, 1), or be a diagonal sparse ({n}, {n}) matrix (the lumped mass)"
    if _is_cupyx_sparse(m):
        m = m.get()
    if sp.issparse(m):
        if m.shape != (n, n):
            raise ValueError(f"{want} (got a sparse matrix of shape {m.shape})")
        coo = m.tocoo()
        off = int(np.count_nonzero(coo.data[coo.row != coo.col]))
        if off:
            raise ValueError(
                f"{want} (got a sparse matrix with {off} non-zero off-diagonal entries: a consistent, "
                "non-lumped mass matrix, which kernelrt does not solve with)"
            )
        d = m.diagonal()
        check_finite(d, name, "diagonal entries", MASS_HINT)
        return d
    if hasattr(m, "__cuda_array_interface__"):  # CuPy or numba device array: stays on its device
        if len(m.shape) == 2 and m.shape[1] == 1:
            m = m.reshape(m.shape[0])
        if tuple(m.shape) != (n,):
            raise ValueError(f"{want} (got shape {tuple(m.shape)})")
        return m
    a = _as_real_array(m, name)
    if a.ndim == 2 and a.shape == (n, 1):
        a = a[:, 0]
        check_finite(a, name, "vertex masses", MASS_HINT)
        return a
    if a.shape == (n, n) and n > 1:
        raise ValueError(f"{want} (got a dense ({n}, {n}) array: pass its diagonal, np.diag({name}))")
    if a.shape != (n,):
        raise ValueError(f"{want} (got shape {a.shape})")
    check_finite(a, name, "vertex masses", MASS_HINT)
    return a


def host_square_sparse(L):
    """A square sparse matrix of finite numbers on the host: a SciPy one as it is, a cupyx
    one copied back.

    Raises:
        TypeError: L is not a sparse matrix.
        ValueError: L is not square, or a stored entry is NaN or inf.
    """
    if hasattr(L, "get") and not sp.issparse(L):  # cupyx sparse matrix
        L = L.get()
    if not sp.issparse(L):
        raise TypeError(f"L must be a scipy or cupyx sparse matrix (got {type(L).__name__})")
    if L.ndim != 2 or L.shape[0] != L.shape[1]:
        raise ValueError(f"L must be square (got shape {L.shape})")
    data = L.data if L.format in ("csr", "csc", "coo", "bsr", "dia") else L.tocoo().data  # lil, dok
    check_finite(data, "L", "stored entries", L_HINT)
    return L


def host_vector(a, name: str) -> np.ndarray:
    """A 1-D float64 host array from an (n,) vector or an (n, 1) column (eigenvalues, times, energies)."""
    if hasattr(a, "get") and hasattr(a, "__cuda_array_interface__"):  # CuPy
        a = a.get()
    arr = _as_real_array(a, name)
    if arr.ndim == 2 and arr.shape[1] == 1:
        arr = arr[:, 0]
    if arr.ndim != 1:
        raise ValueError(f"{name} must be a 1-D (n,) array or an (n, 1) column (got shape {arr.shape})")
    return arr.astype(np.float64, copy=False)


def _as_real_array(a, name: str) -> np.ndarray:
    refuse_quantity(a, name)
    try:
        arr = np.asarray(a)
    except Exception as e:  # ragged lists and the like
        raise TypeError(f"{name} must be an array of numbers (got {type(a).__name__}: {e})") from None
    if arr.dtype == object or arr.dtype.kind not in "biuf":
        raise TypeError(f"{name} must hold real numbers (got dtype {arr.dtype})")
    return arr


def _as_coordinates(a, name: str) -> np.ndarray:
    """Real, non-boolean numbers (coordinates; booleans are a mistake, not 0/1 positions)."""
    arr = _as_real_array(a, name)
    if arr.dtype.kind == "b":
        raise TypeError(f"{name} must hold real numbers (got dtype bool)")
    return arr


def check_vertices(vertices, name: str = "vertices") -> np.ndarray:
    """``vertices`` as a writeable C-contiguous float64 (N, 3) array, N >= 1, all finite."""
    v = _as_coordinates(vertices, name)
    if v.ndim != 2 or v.shape[1] != 3:
        raise ValueError(f"{name} must have shape (N, 3) (got shape {v.shape})")
    if v.shape[0] == 0:
        raise ValueError(f"{name} must not be empty (got shape {v.shape})")
    # The kernels are compiled for writeable C-ordered float64: anything else is copied
    # once here, so a read-only or strided input never triggers a second compilation.
    v = np.require(v, np.float64, ["C", "W"])
    if not np.isfinite(v).all():
        bad = int(np.count_nonzero(~np.isfinite(v).all(axis=1)))
        raise ValueError(f"{name} must be finite ({bad} vertices have NaN or inf coordinates)")
    return v


def check_vertex_batch(vertices, n_vertices: int, name: str = "vertices") -> np.ndarray:
    """A cohort's vertices as a C-contiguous float64 (S, N, 3) array with N = ``n_vertices``."""
    v = _as_coordinates(vertices, name)
    if v.ndim != 3 or v.shape[2] != 3:
        raise ValueError(f"{name} must have shape (S, N, 3) for S subjects (got shape {v.shape})")
    if v.shape[0] == 0:
        raise ValueError(f"{name} must hold at least one subject (got shape {v.shape})")
    if v.shape[1] != n_vertices:
        raise ValueError(
            f"{name} must have the topology's {n_vertices} vertices per subject (got shape {v.shape})"
        )
    v = np.require(v, np.float64, ["C", "W"])
    finite = np.isfinite(v).all(axis=2)
    if not finite.all():
        subj = np.flatnonzero(~finite.all(axis=1))
        raise ValueError(
            f"{name} must be finite (subjects {subj[:5].tolist()}{'...' if subj.size > 5 else ''} "
            f"have NaN or inf coordinates)"
        )
    return v


def check_device_vertices(vertices, n_vertices: int, *, batch: bool, name: str = "vertices"):
    """A CUDA device array of vertices, checked for dtype, shape and layout (not values).

    Returns it unchanged: (S, N, 3) when ``batch``, else (N, 3). Checking finiteness would
    cost a device reduction and a sync; non-finite corners make their faces fail the
    degeneracy test instead, so they are dropped (and reported) rather than giving NaN.
    """
    shape = tuple(vertices.shape)
    want = f"(S, {n_vertices}, 3)" if batch else f"({n_vertices}, 3)"
    if np.dtype(vertices.dtype) != np.float64:
        raise TypeError(f"{name} on the device must be float64 (got {np.dtype(vertices.dtype)})")
    if shape != ((shape[0],) if batch else ()) + (n_vertices, 3) or (batch and shape[0] == 0):
        raise ValueError(f"{name} must have shape {want} (got shape {shape})")
    if not _c_contiguous(vertices):
        raise ValueError(f"{name} on the device must be C-contiguous (got strides {tuple(vertices.strides)})")
    return vertices


def _c_contiguous(a) -> bool:
    flags = getattr(a, "flags", None)
    if flags is not None:
        try:
            return bool(flags["C_CONTIGUOUS"])
        except (KeyError, TypeError):
            return bool(getattr(flags, "c_contiguous", False))
    return bool(getattr(a, "is_c_contiguous", lambda: False)())


def index_dtype_for(n_vertices: int, n_faces: int) -> np.dtype:
    """int32 when every index the pattern stores fits, else int64.

    The largest stored integers are 3F (packed face corners), N and nnz <= N + 6F.
    """
    if n_vertices + 6 * n_faces < INT32_MAX:
        return np.dtype(np.int32)
    return np.dtype(np.int64)


def check_faces(faces, n_vertices, name: str = "faces") -> np.ndarray:
    """``faces`` as a C-contiguous (F, 3) integer array with entries in [0, n_vertices).

    The result has the pattern's index dtype (``index_dtype_for``) and is a private
    copy, so later edits to the caller's array cannot corrupt a built topology.
    """
    if isinstance(n_vertices, bool) or not isinstance(n_vertices, (int, np.integer)):
        raise TypeError(f"n_vertices must be an int (got {type(n_vertices).__name__}: {n_vertices!r})")
    n_vertices = int(n_vertices)
    if n_vertices < 1:
        raise ValueError(f"n_vertices must be >= 1 (got {n_vertices})")
    f = _as_real_array(faces, name)
    if f.dtype.kind not in "iu":
        raise TypeError(f"{name} must hold integers (got dtype {f.dtype}); convert with .astype(int)")
    if f.ndim != 2 or f.shape[1] != 3:
        raise ValueError(f"{name} must have shape (F, 3) of triangles (got shape {f.shape})")
    if f.shape[0] == 0:
        raise ValueError(f"{name} must not be empty (got shape {f.shape})")
    lo, hi = int(f.min()), int(f.max())
    if lo < 0 or hi >= n_vertices:
        bad = lo if lo < 0 else hi
        raise ValueError(
            f"{name} must index vertices in [0, {n_vertices}) (got index {bad}); "
            f"faces are 0-based and negative indices are not allowed"
        )
    dtype = index_dtype_for(n_vertices, f.shape[0])
    return np.array(f, dtype=dtype, order="C", copy=True)
