"""Smallest eigenpairs of L v = λ M v and the HKS / WKS descriptors, as SpectralBrain 0.1.0.

Owns the spectral layer on top of (L, m):

* ``eigenpairs``: SciPy ARPACK shift-invert ``eigsh(L, k, M, sigma=-0.01, which='LM',
  tol=0)`` on the host (SpectralBrain's ``NumpyBackend``), sorted ascending and clipped
  at 0; or the dense standardised route ``Ã = S L S``, ``S = diag(1/√m)``, full ``eigh``,
  ``v = S ψ`` (SpectralBrain's GPU backends), run with CuPy on a CUDA backend or with
  NumPy when asked for explicitly. ``method="auto"`` takes the dense CuPy route on a
  CUDA backend for N <= ``dense_max`` and shift-invert otherwise (docs/laplacian.md, "Eigenpairs").
* ``hks`` / ``wks`` and their default grids (docs/laplacian.md, "Heat kernel signature" and "Wave kernel signature"), including the E <= 28
  WKS fallback and ``shared_hks_times`` for cohorts. On the host they use the same
  NumPy expressions as SpectralBrain, so they reproduce ``compute_hks`` /
  ``compute_wks`` bit for bit; on a CUDA backend with CuPy the GEMM runs on the device
  (cuBLAS), agreeing to rounding.
"""

from __future__ import annotations

import logging

import numpy as np
import scipy.sparse as sp
from scipy.sparse.linalg import eigsh

import kernelrt

from .placement import cupy_or_none

__all__ = [
    "eigenpairs",
    "hks",
    "wks",
    "hks_times",
    "wks_params",
    "shared_hks_times",
    "hks_batch",
]

logger = logging.getLogger("kernelrt.laplacian")

ZERO_TOL = 1e-10  # eigenvalues at or below this are the constant mode(s)
DENSE_MAX = 20000


# -- eigenpairs --------------------------------------------------------------------------


def _check_k(k, n: int) -> int:
    if isinstance(k, bool) or not isinstance(k, (int, np.integer)) or not 1 <= k < n:
        raise ValueError(f"k must be an int in [1, {n - 1}] for a {n}-vertex mesh (got {k!r})")
    return int(k)


def _host_csr(L):
    if hasattr(L, "get") and not sp.issparse(L):  # cupyx sparse matrix
        L = L.get()
    if not sp.issparse(L):
        raise TypeError(f"L must be a scipy or cupyx sparse matrix (got {type(L).__name__})")
    return L


def _host_vector(m, n: int, name: str) -> np.ndarray:
    a = m.get() if hasattr(m, "get") else (m.copy_to_host() if hasattr(m, "copy_to_host") else m)
    a = np.asarray(a, dtype=np.float64)
    if a.shape != (n,):
        raise ValueError(f"{name} must have shape ({n},) (got {a.shape})")
    return a


def eigenpairs(
    L,
    m,
    k: int = 100,
    *,
    backend=None,
    method: str = "auto",
    sigma: float = -0.01,
    which: str = "LM",
    tol: float = 0.0,
    maxiter=None,
    dense_max: int = DENSE_MAX,
):
    """The k smallest eigenpairs of ``L v = λ diag(m) v``, M-orthonormal, λ ascending, λ >= 0.

    Args:
        L: (N, N) symmetric stiffness matrix (scipy or cupyx sparse).
        m: (N,) lumped mass (diagonal of M).
        k: number of eigenpairs, 1 <= k < N.
        backend: decides the "auto" method (see the module docstring).
        method: "auto", "shift-invert" (SciPy ARPACK, host) or "dense" (standardised
            dense eigh: CuPy on a CUDA backend, else NumPy on the host; O(N³), 8N² bytes).
        sigma: ARPACK's shift (the dense route ignores sigma, which, tol and maxiter,
            and logs a warning when they differ from SpectralBrain's defaults).
        which: ARPACK's choice of eigenvalues around ``sigma``.
        tol: ARPACK's relative tolerance.
        maxiter: ARPACK's iteration limit.
        dense_max: largest N the "auto" method sends to the dense route.

    Returns:
        ``(evals (k,), evecs (N, k))`` as host NumPy arrays. Eigenvector signs, and the
        basis inside a degenerate eigenspace, are arbitrary.
    """
    L = _host_csr(L)
    n = L.shape[0]
    k = _check_k(k, n)
    m = _host_vector(m, n, "m")
    if method not in ("auto", "shift-invert", "dense"):
        raise ValueError(f"method must be 'auto', 'shift-invert' or 'dense' (got {method!r})")
    be = kernelrt.get_backend(backend)
    cp = cupy_or_none(be)
    if method == "auto":
        if be.name == "cuda" and cp is not None and n <= dense_max:
            method = "dense"
        else:
            if be.name == "cuda":
                why = (f"CuPy is not installed (install it with {be.availability(be.device_id).install_command})"
                       if cp is None else f"N = {n} > dense_max = {dense_max}")
                logger.warning("eigenpairs: %s; using the CPU SciPy shift-invert solver", why)
            method = "shift-invert"
    if method == "dense":
        if (sigma, which, tol, maxiter) != (-0.01, "LM", 0.0, None):
            logger.warning("eigenpairs: sigma/which/tol/maxiter are ignored by the dense method")
        with be.activated():  # CuPy on the backend's device
            evals, evecs = _dense(L, m, k, cp)
    else:
        evals, evecs = _shift_invert(L, m, k, sigma, which, tol, maxiter)
    order = np.argsort(evals)
    return np.clip(evals[order], 0.0, None), evecs[:, order]


def _shift_invert(L, m, k, sigma, which, tol, maxiter):
    Lc = sp.csc_matrix(L, dtype=np.float64)
    M = sp.diags(m, 0, shape=L.shape, format="csc")
    # A fixed start vector: ARPACK's own random one comes from a generator whose state
    # persists across calls, so which member of a degenerate cluster it occasionally
    # misses (icospheres have many) changed from run to run. Not the constant vector:
    # that is the λ = 0 eigenvector and would span a one-dimensional Krylov space.
    v0 = np.random.default_rng(0).standard_normal(L.shape[0])
    return eigsh(Lc, k=k, M=M, sigma=sigma, which=which, tol=tol, maxiter=maxiter, v0=v0)


def _dense(L, m, k, cp):
    s = 1.0 / np.sqrt(np.clip(m, 1e-20, None))
    A = sp.csr_matrix(L).astype(np.float64).toarray()
    A *= s[:, None]
    A *= s[None, :]
    A = 0.5 * (A + A.T)  # symmetric to the last bit, as eigh assumes
    if cp is None:
        w, psi = np.linalg.eigh(A)
        return w[:k], s[:, None] * psi[:, :k]
    A_dev = cp.asarray(A)
    w, psi = cp.linalg.eigh(A_dev)
    out = cp.asnumpy(w[:k]), s[:, None] * cp.asnumpy(psi[:, :k])
    del A_dev, w, psi
    cp.get_default_memory_pool().free_all_blocks()
    return out


# -- descriptor parameters -----------------------------------------------------------------


def hks_times(evals, n_times: int = 100) -> np.ndarray:
    """SpectralBrain's automatic HKS time grid (Sun et al. 2009 bounds, log-spaced)."""
    lam = np.asarray(evals, dtype=np.float64)
    lam = lam[lam > ZERO_TOL]
    if len(lam) < 2:
        return np.logspace(-2, 2, n_times)
    c = 4.0 * np.log(10.0)
    t_min = max(c / lam[-1], 1e-6)
    t_max = min(c / lam[0], 1e6)
    return np.logspace(np.log10(t_min), np.log10(t_max), n_times)


def shared_hks_times(evals_list, n_times: int = 100) -> np.ndarray:
    """One HKS grid for a cohort: pooled min λ_1 and max λ_max over all subjects."""
    if isinstance(evals_list, np.ndarray) and evals_list.ndim == 1:
        evals_list = [evals_list]
    lam_max, lam_1 = [], []
    for ev in evals_list:
        ev = np.asarray(ev)
        nz = ev[ev > ZERO_TOL]
        if nz.size:
            lam_max.append(float(nz.max()))
            lam_1.append(float(nz.min()))
    if not lam_max:
        return np.logspace(-2, 2, n_times)
    return hks_times(np.concatenate([[0.0], [min(lam_1), max(lam_max)]]), n_times)


def wks_params(evals, n_energies: int = 100) -> tuple[np.ndarray, float]:
    """SpectralBrain's automatic WKS log-energies and bandwidth (fallback when E <= 28)."""
    lam = np.asarray(evals, dtype=np.float64)
    lam = lam[lam > ZERO_TOL]
    if len(lam) < 2:
        return np.linspace(-2, 2, n_energies), 1.0
    log_lam = np.log(lam)
    e_min, e_max = log_lam[0], log_lam[-1]
    sigma = 7.0 * (e_max - e_min) / n_energies
    lo, hi = e_min + 2 * sigma, e_max - 2 * sigma
    if lo >= hi:  # the inward shift leaves nothing: use the full range, narrower bands
        lo, hi = e_min, e_max
        sigma = (e_max - e_min) / (2 * n_energies)
    return np.linspace(lo, hi, n_energies), float(sigma)


# -- descriptors ----------------------------------------------------------------------------


def _pair(evals, evecs):
    evals = np.asarray(evals, dtype=np.float64)
    if evals.ndim != 1:
        raise ValueError(f"evals must be 1-D (got shape {evals.shape})")
    if evecs.ndim != 2 or evecs.shape[1] != evals.shape[0]:
        raise ValueError(f"evecs must have shape (N, {evals.shape[0]}) (got {tuple(evecs.shape)})")
    return evals


def _gemm(phi, weights, normalize: bool, be):
    """``(phi ∘ phi) weightsᵀ`` with optional column normalisation, on the device if possible."""
    cp = cupy_or_none(be)
    if cp is None:
        phi = np.asarray(phi.get() if hasattr(phi, "get") else phi)
        out = phi**2 @ weights.T
        if normalize:
            out = out / np.clip(np.linalg.norm(out, axis=0, keepdims=True), 1e-30, None)
        return out
    with be.activated():
        p = cp.asarray(phi)
        out = (p * p) @ cp.asarray(weights).T
        if normalize:
            out = out / cp.clip(cp.linalg.norm(out, axis=0, keepdims=True), 1e-30, None)
        return cp.asnumpy(out)


def hks(evals, evecs, t=None, *, n_times: int = 100, normalize: bool = False, backend=None):
    """Heat kernel signature ``Σ_i exp(-λ_i t) φ_i(x)²`` over all k modes (N, T).

    ``t=None`` uses ``hks_times(evals, n_times)``; for cohorts pass
    ``shared_hks_times`` so columns are comparable across subjects.
    """
    evals = _pair(evals, evecs)
    t = hks_times(evals, n_times) if t is None else np.asarray(t, dtype=np.float64)
    weights = np.exp(-evals[None, :] * t[:, None])  # (T, k)
    return _gemm(evecs, weights, normalize, kernelrt.get_backend(backend))


def wks(evals, evecs, e=None, *, n_energies: int = 100, sigma=None, normalize: bool = True, backend=None):
    """Wave kernel signature over the modes with λ > 1e-10 (N, E), columns L2-normalised.

    ``e`` / ``sigma`` default to ``wks_params(evals, n_energies)``, each independently.
    """
    evals = _pair(evals, evecs)
    nz = evals > ZERO_TOL
    if e is None or sigma is None:
        auto_e, auto_sigma = wks_params(evals, n_energies)
        e = auto_e if e is None else e
        sigma = auto_sigma if sigma is None else sigma
    e = np.asarray(e, dtype=np.float64)
    diff = e[:, None] - np.log(evals[nz])[None, :]
    gauss = np.exp(-(diff**2) / (2 * sigma**2))
    gauss = gauss / np.clip(gauss.sum(axis=1, keepdims=True), 1e-30, None)
    phi = evecs[:, nz] if isinstance(evecs, np.ndarray) else evecs[:, np.flatnonzero(nz)]
    return _gemm(phi, gauss, normalize, kernelrt.get_backend(backend))


def hks_batch(evals, evecs, t, *, normalize: bool = False, backend=None):
    """HKS for S subjects on one time grid: evals (S, k), evecs (S, N, k) -> (S, N, T).

    On a CUDA backend with CuPy this is one batched GEMM; on the host, one GEMM per
    subject (identical to ``hks`` subject by subject).
    """
    evals = np.asarray(evals, dtype=np.float64)
    if evals.ndim != 2 or evecs.ndim != 3 or evecs.shape[0] != evals.shape[0] or evecs.shape[2] != evals.shape[1]:
        raise ValueError(
            f"evals must be (S, k) and evecs (S, N, k) (got {evals.shape} and {tuple(evecs.shape)})"
        )
    t = np.asarray(t, dtype=np.float64)
    weights = np.exp(-evals[:, None, :] * t[None, :, None])  # (S, T, k)
    be = kernelrt.get_backend(backend)
    cp = cupy_or_none(be)
    if cp is None:
        return np.stack([_gemm(evecs[s], weights[s], normalize, be) for s in range(evals.shape[0])])
    with be.activated():
        p = cp.asarray(evecs)
        out = cp.matmul(p * p, cp.asarray(weights).transpose(0, 2, 1))
        if normalize:
            out = out / cp.clip(cp.linalg.norm(out, axis=1, keepdims=True), 1e-30, None)
        return cp.asnumpy(out)
