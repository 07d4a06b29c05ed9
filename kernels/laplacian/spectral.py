"""The HKS / WKS descriptors of eigenpairs, as SpectralBrain 0.1.0.

Owns the descriptor layer on top of ``eigenpairs`` (eigen.py):

* ``hks`` / ``wks`` and their default grids (docs/laplacian.md, "Heat kernel signature" and "Wave kernel signature"), including the E <= 28
  WKS fallback and ``shared_hks_times`` for cohorts. They take the eigenpairs as two
  arrays or as one decomposition object (SpectralBrain's ``SpectralDecomposition``,
  kernelrt's ``Eigenpairs``; interop.py). On the host they use the same
  NumPy expressions as SpectralBrain, so they reproduce ``compute_hks`` /
  ``compute_wks`` bit for bit; on a CUDA backend with CuPy the GEMM runs on the device
  (cuBLAS), agreeing to rounding. Eigenvectors already on the device (``eigenpairs(...,
  keep_on_device=True)``) are read there, with no host round trip; without CuPy, device
  arrays are copied to the host once.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import numpy.typing as npt

import kernelrt

from ..conventions import refuse_quantity
from .inputs import check_finite, host_vector
from .interop import eigenpairs_of
from .placement import cupy_or_none
from .spmv import _to_host

__all__ = [
    "hks",
    "wks",
    "hks_times",
    "wks_params",
    "shared_hks_times",
    "hks_batch",
]

ZERO_TOL = 1e-10  # eigenvalues at or below this are the constant mode(s)
_PAIRS_HINT = "pass what eigenpairs returned (it refuses NaN or inf in L and m)"


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


def _pair(evals, evecs, caller: str):
    """(evals as a 1-D float64 host array, evecs as given or as a NumPy array)."""
    evals, evecs = eigenpairs_of(evals, evecs, caller)
    evals = host_vector(evals, "evals")  # (k,) or a (k, 1) column
    check_finite(evals, "evals", "eigenvalues", _PAIRS_HINT)
    refuse_quantity(evecs, "evecs")
    if not hasattr(evecs, "ndim"):  # lists; device arrays stay where they are
        evecs = np.asarray(evecs)
    if evecs.ndim != 2 or evecs.shape[1] != evals.shape[0]:
        raise ValueError(f"evecs must have shape (N, {evals.shape[0]}) (got {tuple(evecs.shape)})")
    if isinstance(evecs, np.ndarray):  # device arrays are not read back to be checked
        check_finite(evecs, "evecs", "entries", _PAIRS_HINT)
    return evals, evecs


def _real(x) -> bool:
    # a Python or NumPy real scalar, or a 0-d array of one (np.asarray(0.5)); never a bool
    if isinstance(x, np.ndarray) and x.ndim == 0:
        x = x[()]
    return isinstance(x, (int, float, np.integer, np.floating)) and not isinstance(x, (bool, np.bool_))


def _grid(a, name: str) -> np.ndarray:
    a = host_vector(a, name)
    check_finite(a, name)
    return a


def _gemm(phi, weights, normalize: bool, be):
    """``(phi ∘ phi) weightsᵀ`` with optional column normalisation, on the device if possible."""
    cp = cupy_or_none(be)
    if cp is None:
        phi = np.asarray(_to_host(phi))  # CuPy or numba device arrays: one copy
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


def hks(evals: Any, evecs: Any = None, t: npt.ArrayLike | None = None, *, n_times: int = 100, normalize: bool = False,
        backend: str | kernelrt.Backend | None = None) -> np.ndarray:
    """Heat kernel signature ``Σ_i exp(-λ_i t) φ_i(x)²`` over all k modes (N, T).

    Args:
        evals: (k,) eigenvalues (or a (k, 1) column), or a decomposition object alone
            (SpectralBrain's ``mesh.decompose()``, kernelrt's ``Eigenpairs``).
        evecs: (N, k) eigenvectors, on the host or the device; None with a decomposition object.
        t: (T,) times (or a (T, 1) column); None uses ``hks_times(evals, n_times)``. For
            cohorts pass ``shared_hks_times`` so columns are comparable across subjects.
        n_times: number of default times.
        normalize: divide each column by its Euclidean norm.
        backend: a CUDA backend with CuPy runs the product on the device.

    Returns:
        (N, T) float64 host array.
    """
    evals, evecs = _pair(evals, evecs, "hks")
    t = hks_times(evals, n_times) if t is None else _grid(t, "t")
    weights = np.exp(-evals[None, :] * t[:, None])  # (T, k)
    return _gemm(evecs, weights, normalize, kernelrt.get_backend(backend))


def wks(evals: Any, evecs: Any = None, e: npt.ArrayLike | None = None, *, n_energies: int = 100,
        sigma: float | None = None, normalize: bool = True, backend: str | kernelrt.Backend | None = None) -> np.ndarray:
    """Wave kernel signature over the modes with λ > 1e-10 (N, E), columns L2-normalised.

    Args:
        evals: (k,) eigenvalues (or a (k, 1) column), or a decomposition object alone
            (SpectralBrain's ``mesh.decompose()``, kernelrt's ``Eigenpairs``).
        evecs: (N, k) eigenvectors, on the host or the device; None with a decomposition object.
        e: (E,) log-energies (or an (E, 1) column); ``e`` and ``sigma`` default to
            ``wks_params(evals, n_energies)``, each independently.
        n_energies: number of default energies.
        sigma: the bandwidth.
        normalize: divide each column by its Euclidean norm (default True).
        backend: a CUDA backend with CuPy runs the product on the device.

    Returns:
        (N, E) float64 host array.
    """
    evals, evecs = _pair(evals, evecs, "wks")
    nz = evals > ZERO_TOL
    if sigma is not None and not (_real(sigma) and np.isfinite(sigma)):
        raise ValueError(f"sigma must be a finite number, the WKS bandwidth in log-energy (got {sigma!r})")
    if e is None or sigma is None:
        auto_e, auto_sigma = wks_params(evals, n_energies)
        e = auto_e if e is None else e
        sigma = auto_sigma if sigma is None else sigma
    e = _grid(e, "e")
    diff = e[:, None] - np.log(evals[nz])[None, :]
    gauss = np.exp(-(diff**2) / (2 * sigma**2))
    gauss = gauss / np.clip(gauss.sum(axis=1, keepdims=True), 1e-30, None)
    return _gemm(_columns(evecs, nz), gauss, normalize, kernelrt.get_backend(backend))


def _columns(evecs, keep):
    """``evecs[:, keep]`` for NumPy, CuPy and numba device arrays (which index by slices only)."""
    if isinstance(evecs, np.ndarray):
        return evecs[:, keep]  # SpectralBrain's expression: the same bits
    idx = np.flatnonzero(keep)
    if idx.size and idx[-1] - idx[0] + 1 == idx.size:  # ascending λ: the null modes lead
        return evecs[:, int(idx[0]) : int(idx[-1]) + 1]
    return evecs[:, idx] if hasattr(evecs, "get") else _to_host(evecs)[:, idx]


def hks_batch(evals: npt.ArrayLike, evecs: Any, t: npt.ArrayLike, *, normalize: bool = False,
              backend: str | kernelrt.Backend | None = None) -> np.ndarray:
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
