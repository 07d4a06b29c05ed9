"""The Cholesky route of ``eigenpairs``: shift-invert block Lanczos over a sparse Cholesky factor.

Owns what eigen.py's ``method="cholesky"`` does once the inputs are checked: the shift
(``default_sigma``), the Krylov sizes (``krylov_sizes``), the factor of ``A = L - σM``
(factor.py), the block Lanczos iteration on ``S = M^½ A⁻¹ M^½`` (lanczos.py) and the last
Rayleigh–Ritz with L. Each phase is timed.
"""

from __future__ import annotations

import logging
import threading
import time

import numpy as np
from scipy.linalg import eigh

from .factor import ShiftedFactor, ShiftPattern, with_full_diagonal
from .basis_products import inner, one_blas_thread, rotate_columns, sparse_product
from .lanczos import basis_workspace, block_lanczos, map_pages

__all__ = ["cholesky_eigenpairs", "default_sigma", "krylov_sizes", "SPECTRALBRAIN_SIGMA"]

logger = logging.getLogger("kernelrt.laplacian")

SPECTRALBRAIN_SIGMA = -0.01


def default_sigma(m: np.ndarray) -> float:
    """SpectralBrain's σ = -0.01 on the unit sphere, scaled with the surface's area.

    Shift-invert converges like the ratios of 1/(λ - σ); λ₁ scales like 1/area, so a
    fixed σ that is far below λ₁ on a unit sphere crowds every θ together on a
    mm-scale cortex (area ~1e5 mm², λ₁ ~ 2.5e-4). Scaling keeps λ₁/|σ| = 200.
    """
    return SPECTRALBRAIN_SIGMA * 4.0 * np.pi / float(m.sum())


def krylov_sizes(k: int, n: int) -> dict:
    """Block width, kept Ritz vectors and basis size of the Cholesky route.

    Blocks of 8 balance the solves against the reorthogonalisation, which reads the whole
    basis twice per block (ico7, 163,842 vertices, k = 50: 6.7-7.3 s against 7.5-8.0 s with
    blocks of 4 and 14 s with 12; the Bunny, k = 50: 0.95-0.99 s against 1.06-1.07 s with 12
    and 1.17 s with 16). A restart keeps ``k + max(30, k/5)`` Ritz vectors and the basis
    grows by at least 70 columns between restarts (to 2.4k where that is more): with
    fewer new columns a cycle (k + 16 kept of a basis of 2.4k, 54 new ones at k = 50) the
    restarts came too often and the iteration took more solves. Medians of the old and
    these sizes alternating in one process (Intel Xeon, 2 vCPU): the Bunny at k = 50 0.90
    against 1.06 s (288 solves against 368), ico6 at k = 20 0.50 against 0.58 s and at k = 50
    0.79 against 0.84 s, ico7 at k = 50 3.58 against 4.04 s, a noisy ico6 cohort's subjects
    0.54-0.58 against 0.58-0.61 s (304-320 solves against 352); within 4% of the old at
    k = 100 (130 kept against 120, the basis 2.4k either way). A small mesh gets the basis
    that fits.
    """
    block = 8
    keep = k + max(30, k // 5)
    basis = max(int(2.4 * k), keep + 70)
    room = n - 2 * block
    if room < k + 16 + 3 * block:  # no room for k + 16 kept vectors and three blocks
        raise ValueError(
            f"method='cholesky' needs N >= {k + 16 + 5 * block} vertices for k = {k} (got N = {n}): "
            "use method='dense' for a mesh this small"
        )
    basis = min(basis, room)
    keep = min(keep, basis - 3 * block)
    return {"block": block, "keep": keep, "basis": basis}


def cholesky_eigenpairs(L, m, k, sigma, tol, maxiter, library, start, progress, pattern, sizes):
    """(λ ascending, X M-orthonormal, operator columns, phases) by the Cholesky route.

    The arguments are ``eigenpairs``' own, checked there; ``sizes`` is ``krylov_sizes(k, n)``.
    """
    sigma = default_sigma(m) if sigma is None else float(sigma)
    if pattern is None:
        L = with_full_diagonal(L)
        pattern = ShiftPattern(L)
    # One BLAS thread throughout, the factor included: the factor's and the solve's BLAS calls
    # are on small supernodes, where more threads only spin, and the products with the Krylov
    # basis split their rows between numba threads themselves (basis_products.py), each calling
    # single-threaded BLAS. An idle multithreaded OpenBLAS also keeps its threads spinning for a
    # while after each call (a user's, or a previous subject's last Rayleigh–Ritz): the numeric
    # factor then took 65-100 ms against 35 ms at 40,962 vertices (Intel Xeon, 2 vCPU).
    with one_blas_thread():
        return _solve(L, m, k, sigma, tol, maxiter, library, start, progress, pattern, sizes)


def _solve(L, m, k, sigma, tol, maxiter, library, start, progress, pattern, sizes):
    t0 = time.perf_counter()
    # The Krylov basis' pages mapped on another thread while this one makes the factor (METIS's
    # ordering and the numeric factorisation are serial), not before the iteration (23-67 ms at
    # 50,000 vertices, k = 50: lanczos.map_pages). The Bunny's first solve in a fresh process took
    # 0.78-0.82 s against 0.85-1.02 s; after another solve had freed memory, the factor took ~25 ms
    # longer beside the mapping and the iteration as much less (Intel Xeon, 2 vCPU)
    workspace = basis_workspace(L.shape[0], k, **sizes)
    mapping = threading.Thread(target=map_pages, args=(workspace,), name="kernelrt-basis-pages", daemon=True)
    mapping.start()
    try:
        fac = ShiftedFactor(pattern, pattern.shifted_values(L, m, sigma), library)
    finally:
        mapping.join()
    phases = {"factor": time.perf_counter() - t0, "solve": 0.0}
    logger.info("eigenpairs: Cholesky route, factor by %s, sigma = %.3g", library, sigma)
    root = np.sqrt(m)
    # The iteration runs in the supernodal factor's row order where there is one: S is then
    # P S Pᵀ, with the same eigenvalues, and each solve copies its block in and out instead of
    # gathering it (0.25 ms against 1.1 ms a solve at 50,000 x 8; Intel Xeon, 2 vCPU)
    order = fac.order
    in_order = order is not None
    scale = root[order] if in_order else root

    def apply(X):  # S = M^½ A⁻¹ M^½, symmetric, eigenvalues 1 / (λ - σ)
        t = time.perf_counter()
        out = fac.solve(X, scale, in_order=in_order)
        phases["solve"] += time.perf_counter() - t
        return out

    seed = None
    if start is not None:
        # The random combinations that form the first block (lanczos.py) taken before the
        # scaling and the permutation, which then move N x block numbers, not N x k: the scaled
        # and permuted copies of a cohort's previous eigenvectors were two fresh N x k arrays,
        # ~10 ms of a subject at 40,962 vertices and k = 50
        seed = np.asarray(start, dtype=np.float64) @ np.random.default_rng(0).standard_normal(
            (start.shape[1], sizes["block"]))
        seed *= root[:, None]
        if in_order:
            seed = seed[order]
    t0 = time.perf_counter()
    theta, Y, _, info = block_lanczos(
        apply, L.shape[0], k, **sizes, tol=1e-13 if tol is None else tol,
        maxiter=100 if maxiter is None else maxiter, start=seed, progress=progress, workspace=workspace,
    )
    t1 = time.perf_counter()
    phases["orthogonalise"] = t1 - t0 - phases["solve"]
    # A last Rayleigh–Ritz with L itself in the span found (X M-orthonormal, so a plain
    # k x k eigh): it undoes the ~1e-11 mixing that the final orthonormalisation spreads
    # between pairs, which would otherwise show as ~1e-10 residuals on the small λ.
    X = Y  # in place, as below: each new N x k array costs its page faults
    if in_order:  # back to the mesh's order, and X = M^-½ Y
        fac.to_mesh_order(X, 1.0 / root)
    else:
        X /= root[:, None]
    # (both products split between the cores, as the iteration's: basis_products.py)
    lam, C = eigh(inner(X, sparse_product(L, X)))
    rotate_columns(X, C)
    phases["rayleigh_ritz"] = time.perf_counter() - t1
    return lam, X, info["products"], phases
