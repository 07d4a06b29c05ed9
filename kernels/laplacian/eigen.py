"""Smallest eigenpairs of ``L v = λ M v``: the routes, their checks and what they report.

Owns ``eigenpairs`` (docs/laplacian.md, "Eigenpairs"): input checks made before any work
(finite L and m, one connected component of L's non-zero weights, k, shapes), the choice
of route, the result with its residuals and M-orthonormality, and the error when a solver
stops short. The routes:

* ``"cholesky"`` (the CPU default, cholesky_route.py): block Lanczos (lanczos.py) on the
  shift-invert operator, solving with a sparse Cholesky factor (factor.py: kernelrt's
  supernodal factor, else cholespy, else SciPy's SuperLU). 3.4-8.4x SpectralBrain's route on a
  2-vCPU Intel Xeon with the supernodal factor, its SIMD solve and both cores; 2.0-2.5x on an
  AMD EPYC before the column-major basis and that factor (bench/bench_eigen.py, docs/results.md).
* ``"shift-invert"``: SpectralBrain's own route, SciPy's ARPACK over SuperLU.
* ``"dense"``: the standardised dense ``eigh`` (SpectralBrain's GPU route, N <= 20,000).
* ``"chebyshev"``: Chebyshev-filtered subspace iteration (chebyshev.py), sparse products
  only, on any backend: the route for large meshes on a GPU.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from typing import Any

import numpy as np
import scipy.sparse as sp
from scipy.sparse.csgraph import connected_components
from scipy.sparse.linalg import ArpackNoConvergence, eigsh

import kernelrt

from ..conventions import converged_callback
from .chebyshev import chebyshev_eigenpairs
from .cholesky_route import SPECTRALBRAIN_SIGMA, cholesky_eigenpairs, default_sigma, krylov_sizes
from .csr_scans import joined_count
from .eigen_report import EigenConvergenceError, device_report, report
from .factor import ShiftPattern, factor_library
from .inputs import MASS_HINT, check_finite, host_square_sparse, mass_vector
from .placement import cupy_or_none
from .spmv import LaplacianOperator, _to_host

__all__ = ["eigenpairs", "Eigenpairs", "EigenConvergenceError", "DisconnectedMeshError", "METHODS"]

logger = logging.getLogger("kernelrt.laplacian")

METHODS = ("auto", "cholesky", "shift-invert", "dense", "chebyshev")
DENSE_MAX = 20000
DENSE_CPU_MAX = 2000


class DisconnectedMeshError(ValueError):
    """The mesh has several connected components, so λ = 0 has several eigenvectors."""


class Eigenpairs(tuple):
    """``(evals, evecs)``, unpacking as before, with what the solve reached.

    Attributes:
        evals: (k,) eigenvalues, ascending, clipped at 0.
        evecs: (N, k) M-orthonormal eigenvectors (a device array with ``keep_on_device``).
        method: the route that ran ("cholesky", "shift-invert", "dense", "chebyshev").
        factor: the factorisation library ("cholespy", "supernodal", "superlu") or None.
        residuals: (k,) ``‖L v - λ M v‖ / ‖λ M v‖``; for the null pair ``‖L v‖ / (λ₁ ‖M v‖)``.
        m_orthonormality: ``max |Vᵀ M V - I|``.
        products: operator applications (solves or sparse products, in columns), if counted.
        seconds: wall time of the whole call (checks, solve and this report).
        phases: seconds per phase, with "report" (the residuals above), for the Cholesky
            route ("factor", "solve": the shift-invert solves, "orthogonalise": the rest of
            the Lanczos iteration, "rayleigh_ritz": the last projection with L) and the
            Chebyshev route (chebyshev.py's ``info["phases"]``); None for the others.
    """

    def __new__(cls, evals: Any, evecs: Any, **info: Any) -> Eigenpairs:
        self = super().__new__(cls, (evals, evecs))
        self.__dict__.update(info)
        return self

    @property
    def evals(self) -> np.ndarray:
        """(k,) eigenvalues, ascending (the first of the pair)."""
        return self[0]  # type: ignore[no-any-return]  # a tuple of two arrays

    @property
    def evecs(self) -> Any:
        """(N, k) eigenvectors: a host array, or a device array with ``keep_on_device``."""
        return self[1]

    @property
    def route(self) -> str:
        """The route that ran, with its factorisation library: ``"cholesky (supernodal)"``."""
        return f"{self.method} ({self.factor})" if self.factor else self.method

    def summary(self) -> str:
        """One line: the route, the pairs, the time, the largest residual and M-orthonormality.

        For example ``"cholesky (supernodal): 100 pairs in 1.20 s, max residual 3.1e-12,
        M-orthonormality 2.2e-15"``.
        """
        return (f"{self.route}: {len(self[0])} pairs in {self.seconds:.2f} s, max residual "
                f"{self.residuals.max():.1e}, M-orthonormality {self.m_orthonormality:.1e}")


def _check_k(k, n: int) -> int:
    if isinstance(k, bool) or not isinstance(k, (int, np.integer)) or not 1 <= k < n:
        raise ValueError(f"k must be an int in [1, {n - 1}] for a {n}-vertex mesh (got {k!r})")
    return int(k)


def _host_vector(m, n: int, name: str) -> np.ndarray:
    # a vector, a column or a peer's diagonal sparse M (inputs.mass_vector), on the host
    v = mass_vector(m, n, name)  # checks host forms for NaN and inf
    a = np.asarray(_to_host(v), dtype=np.float64)
    if hasattr(v, "__cuda_array_interface__"):  # a device array: checked here, once on the host
        check_finite(a, name, "vertex masses", MASS_HINT)
    if not np.all(a > 0):
        raise ValueError(f"{name} must be positive everywhere (got min {a.min():g})")
    return a


def check_connected(L) -> None:
    """Raise ``DisconnectedMeshError`` when L's graph has several components.

    The graph is L's non-zero off-diagonal entries, not its stored pattern: a face that
    assembly dropped as degenerate leaves explicit zeros, which connect nothing, so two
    patches joined only by zero-area faces are two components (as their spectrum says).
    """
    if L.format in ("csr", "csc") and L.dtype == np.float64 and joined_count(L) == 1:
        return  # one compiled pass (csr_scans.py); SciPy below only when it is not one component
    G = sp.csr_matrix(L, copy=True)  # a copy: L's own (perhaps read-only) arrays stay as they are
    G.sum_duplicates()
    G.eliminate_zeros()
    count, labels = connected_components(G, directed=False)
    if count > 1:
        sizes = np.sort(np.bincount(labels))[::-1]
        shown = ", ".join(str(s) for s in sizes[:5]) + (", ..." if count > 5 else "")
        isolated = int(np.count_nonzero(sizes == 1))
        hint = (f" ({isolated} of them single vertices, likely referenced by no face or by degenerate "
                "faces only: drop them)" if isolated else "")
        raise DisconnectedMeshError(
            f"the mesh has {count} connected components (vertex counts {shown}){hint} in L's non-zero "
            f"weights (faces dropped as degenerate join nothing), so λ = 0 has "
            f"{count} eigenvectors and any basis of them is as good: compute the eigenpairs of each "
            "component separately (scipy.sparse.csgraph.connected_components gives the labels)"
        )


def eigenpairs(
    L: Any,
    m: Any,
    k: int = 100,
    *,
    backend: str | kernelrt.Backend | None = None,
    method: str = "auto",
    sigma: float | None = None,
    which: str = "LM",
    tol: float | None = None,
    maxiter: int | None = None,
    dense_max: int = DENSE_MAX,
    factor: str = "auto",
    start: Any = None,
    progress: bool | Callable[[int, int], object] | None = None,
    pattern: ShiftPattern | None = None,
    keep_on_device: bool = False,
) -> Eigenpairs:
    """The k smallest eigenpairs of ``L v = λ diag(m) v``, M-orthonormal, λ ascending, λ >= 0.

    Args:
        L: (N, N) symmetric stiffness matrix (scipy or cupyx sparse) of a connected mesh.
        m: lumped mass, positive: an (N,) vector, an (N, 1) column or a diagonal sparse
            matrix (SpectralBrain's ``M``); a non-diagonal matrix is refused.
        k: number of eigenpairs, 1 <= k < N.
        backend: decides the "auto" method.
        method: "auto" (dense on a CUDA backend with CuPy for N <= dense_max, Chebyshev on
            one beyond; elsewhere, a CUDA backend without CuPy included, dense for
            N <= 2,000 and Cholesky beyond), "cholesky", "shift-invert", "dense" or
            "chebyshev" (see the module docstring).
        sigma: the shift (< 0) of "cholesky" (default ``default_sigma(m)``) and
            "shift-invert" (default SpectralBrain's -0.01).
        which: ARPACK's choice around sigma ("shift-invert" only).
        tol: relative residual target; None is each route's default ("cholesky" 1e-13 on
            the shift-inverted operator, ARPACK 0 = machine precision, Chebyshev 1e-10).
        maxiter: iteration limit (restarts, ARPACK iterations, filter passes).
        dense_max: largest N the "auto" method sends to the dense route.
        factor: "auto", "cholespy", "supernodal" or "superlu" for "cholesky" (factor.py).
        start: optional (N, j) vectors to start from ("cholesky", "chebyshev"): a
            previous, similar mesh's eigenvectors make the solve shorter.
        progress: None, True (a bar on a terminal or in Jupyter) or ``callable(n_converged, k)``.
        pattern: the ``ShiftPattern`` of L's topology (``MeshTopology.eigenpairs`` passes
            its own, so a cohort skips the pattern work; the component check still runs).
        keep_on_device: on a CUDA backend, return evecs as a device array (CuPy's when
            CuPy is installed, as ``assemble(..., keep_on_device=True)``) for ``hks`` /
            ``wks``: the Chebyshev and dense routes keep the array their solve made, the
            host routes upload theirs once. Ignored on the CPU backend.

    Returns:
        ``Eigenpairs``: unpacks as ``(evals (k,), evecs (N, k))``, host NumPy arrays (evecs
        on the device with ``keep_on_device``), and reports the route, residuals and
        M-orthonormality. Eigenvector signs, and the basis inside a degenerate eigenspace,
        are arbitrary. Where the eigenvectors end on a device, the residuals are computed
        there (``eigen_report.device_report``).

    Raises:
        ValueError: NaN or inf in L or m, m not positive, or another malformed argument.
        DisconnectedMeshError: several connected components of L's non-zero off-diagonal
            entries (several λ = 0), e.g. patches joined only by degenerate faces.
        EigenConvergenceError: the iteration limit came first; says what was reached.
    """
    t0 = time.perf_counter()
    L = host_square_sparse(L)
    n = L.shape[0]
    k = _check_k(k, n)
    m = _host_vector(m, n, "m")
    if method not in METHODS:
        raise ValueError(f"method must be one of {', '.join(map(repr, METHODS))} (got {method!r})")
    if sigma is not None and not (np.isfinite(sigma) and sigma < 0):
        raise ValueError(f"sigma must be a finite number < 0, so that L - sigma M is positive definite (got {sigma!r})")
    if start is not None:  # a previous result's vectors, perhaps on the device
        start = np.asarray(_to_host(start), dtype=np.float64)
        if start.ndim != 2 or start.shape[0] != n or start.shape[1] > n // 2:
            raise ValueError(f"start must have shape ({n}, j) with j <= {n // 2} (got {start.shape})")
    be = kernelrt.get_backend(backend)
    on_device = be.name == "cuda"  # where the vectors may end (keep_on_device, the device report)
    # the Chebyshev route leaves its vectors on a CUDA device when they will be used there, or
    # when CuPy holds its block there (the report then runs on the device, not after a download)
    device_solve = keep_on_device or cupy_or_none(be) is not None
    method = _choose(method, be, n, dense_max)
    library = factor_library(factor) if method == "cholesky" else None
    sizes = krylov_sizes(k, n) if method == "cholesky" else None
    check_connected(L)  # on L's values: which faces were kept depends on the geometry, not the topology
    if pattern is not None and not pattern.matches(L):
        raise ValueError("L does not have this topology's sparsity pattern (was it assembled from another mesh?)")
    phases = None
    with converged_callback(progress, k, f"eigenpairs ({method})", "pair") as callback:
        if method == "cholesky":
            evals, evecs, products, phases = cholesky_eigenpairs(
                L, m, k, sigma, tol, maxiter, library, start, callback, pattern, sizes)
        elif method == "shift-invert":
            evals, evecs, products = _shift_invert(L, m, k, sigma, which, tol, maxiter)
        elif method == "chebyshev":
            kw = {"tol": tol} if tol is not None else {}
            if maxiter is not None:
                kw["maxiter"] = maxiter
            evals, evecs, info = chebyshev_eigenpairs(L, m, k, backend=be, v0=start, progress=callback,
                                                      keep_on_device=on_device and device_solve, **kw)
            products, phases = info["products"], info["phases"]
        else:
            if (sigma, tol, maxiter) != (None, None, None):
                logger.warning("eigenpairs: sigma/tol/maxiter are ignored by the dense method")
            with be.activated():  # CuPy on the backend's device
                evals, evecs = _dense(L, m, k, cupy_or_none(be), keep_on_device)
            products = None
    t_report = time.perf_counter()
    if isinstance(evecs, np.ndarray):
        order = np.argsort(evals)
        evals, evecs = np.clip(evals[order], 0.0, None), np.ascontiguousarray(evecs[:, order])
        residuals, m_orth = report(L, m, evals, evecs)
    else:  # the Chebyshev and dense routes' device results, ascending already
        evals = np.clip(evals, 0.0, None)
        with be.activated():
            residuals, m_orth = _device_report(L, m, evals, evecs, be)
    if keep_on_device and on_device:
        evecs = be.to_device(evecs)  # a device array is returned as is
    elif not isinstance(evecs, np.ndarray):
        evecs = be.to_host(evecs)
    if phases is not None:
        phases["report"] = time.perf_counter() - t_report
    result = Eigenpairs(evals, evecs, method=method, factor=library, residuals=residuals,
                        m_orthonormality=m_orth, products=products, seconds=time.perf_counter() - t0,
                        phases=phases)
    logger.info("eigenpairs: %s", result.summary())
    return result


def _choose(method: str, be, n: int, dense_max: int) -> str:
    if method != "auto":
        return method
    if be.name == "cuda" and cupy_or_none(be) is not None:
        return "dense" if n <= dense_max else "chebyshev"
    if be.name == "cuda":
        logger.warning("eigenpairs: CuPy is not installed (install it with %s); using the CPU routes",
                       be.availability(be.device_id).install_command)
    # a small mesh's dense eigh takes well under a second, and Krylov needs room
    return "dense" if n <= DENSE_CPU_MAX else "cholesky"


def _shift_invert(L, m, k, sigma, which, tol, maxiter):
    Lc = sp.csc_matrix(L, dtype=np.float64)
    M = sp.diags(m, 0, shape=L.shape, format="csc")
    # A fixed start vector: ARPACK's own random one comes from a generator whose state
    # persists across calls, so which member of a degenerate cluster it occasionally
    # misses (icospheres have many) changed from run to run. Not the constant vector:
    # that is the λ = 0 eigenvector and would span a one-dimensional Krylov space.
    v0 = np.random.default_rng(0).standard_normal(L.shape[0])
    sigma = SPECTRALBRAIN_SIGMA if sigma is None else sigma
    try:
        evals, evecs = eigsh(Lc, k=k, M=M, sigma=sigma, which=which, tol=0.0 if tol is None else tol,
                             maxiter=maxiter, v0=v0)
    except ArpackNoConvergence as exc:
        raise EigenConvergenceError(
            f"ARPACK: {len(exc.eigenvalues)} of {k} eigenpairs converged within maxiter = {maxiter}",
            evals=exc.eigenvalues, n_converged=len(exc.eigenvalues),
        ) from exc
    return evals, evecs, None


def _device_report(L, m, evals, evecs, be):
    """``report`` where ``evecs`` are: the product by kernelrt's SpMM (csr_matmat) on the device,
    the rest with CuPy. Without CuPy (the simulator) the GEMMs have no device library: the
    product still runs on the device, the rest on the host."""
    op, cp = LaplacianOperator(L, backend=be), cupy_or_none(be)
    if cp is not None:
        return device_report(op.matmat, cp.asarray(m), evals, cp.ascontiguousarray(evecs), cp, cp.asnumpy)
    return device_report(op.matmat, m, evals, be.to_host(evecs), np, np.asarray)


def _dense(L, m, k, cp, keep_on_device=False):
    s = 1.0 / np.sqrt(m)
    A = sp.csr_matrix(L).astype(np.float64).toarray()
    A *= s[:, None]
    A *= s[None, :]
    A = 0.5 * (A + A.T)  # symmetric to the last bit, as eigh assumes
    if cp is None:
        w, psi = np.linalg.eigh(A)
        return w[:k], s[:, None] * psi[:, :k]
    A_dev = cp.asarray(A)
    w, psi = cp.linalg.eigh(A_dev)
    if keep_on_device:  # the N x k result stays; eigenpairs reports on the device
        out = cp.asnumpy(w[:k]), cp.asarray(s)[:, None] * psi[:, :k]
    else:
        out = cp.asnumpy(w[:k]), s[:, None] * cp.asnumpy(psi[:, :k])
    del A_dev, w, psi
    cp.get_default_memory_pool().free_all_blocks()
    return out
