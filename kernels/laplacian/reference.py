"""Plain NumPy reference of the cotangent Laplacian and HKS (docs/laplacian.md).

Written from the conventions of docs/laplacian.md, independent of the kernels: vectorised per-face
cotangents, SpectralBrain's degeneracy test, a COO-to-CSR conversion that sums the six
entries per face, the diagonal as minus the row sums, the lumped barycentric mass
clamped at 1e-20, and HKS as ``(Φ∘Φ) exp(-λ t)ᵀ``. ``kernelrt demo`` and the tests use
it as the in-repo NumPy reference; it is what SpectralBrain's assembly costs.
"""

from __future__ import annotations

import numpy as np
import scipy.sparse as sp

__all__ = ["reference_laplacian", "reference_hks", "surface_area"]


def _face_geometry(V, F):
    p0, p1, p2 = V[F[:, 0]], V[F[:, 1]], V[F[:, 2]]
    d = np.linalg.norm(np.cross(p1 - p0, p2 - p0), axis=1)  # twice the area
    e0, e1, e2 = p2 - p1, p0 - p2, p1 - p0  # each edge opposite its corner
    lmax2 = np.max(np.stack([(e * e).sum(1) for e in (e0, e1, e2)]), axis=0)
    repeated = (F[:, 0] == F[:, 1]) | (F[:, 1] == F[:, 2]) | (F[:, 2] == F[:, 0])
    bad = repeated | ~np.isfinite(d) | (d <= 1e-12 * lmax2)
    return p0, p1, p2, d, bad


def reference_laplacian(V, F) -> tuple[sp.csr_matrix, np.ndarray]:
    """``(L, m)``: PSD cotangent Laplacian (CSR) and clamped barycentric mass."""
    V = np.asarray(V, np.float64)
    F = np.asarray(F, np.int64)
    n = V.shape[0]
    p0, p1, p2, d, bad = _face_geometry(V, F)
    keep = ~bad
    F, p0, p1, p2, d = F[keep], p0[keep], p1[keep], p2[keep], d[keep]
    # cot at a corner = <the two edges leaving it> / d; its weight goes to the opposite edge
    cot0 = ((p1 - p0) * (p2 - p0)).sum(1) / d
    cot1 = ((p2 - p1) * (p0 - p1)).sum(1) / d
    cot2 = ((p0 - p2) * (p1 - p2)).sum(1) / d
    i = np.concatenate([F[:, 1], F[:, 2], F[:, 2], F[:, 0], F[:, 0], F[:, 1]])
    j = np.concatenate([F[:, 2], F[:, 1], F[:, 0], F[:, 2], F[:, 1], F[:, 0]])
    w = -0.5 * np.concatenate([cot0, cot0, cot1, cot1, cot2, cot2])
    off = sp.coo_matrix((w, (i, j)), shape=(n, n)).tocsr()  # duplicates summed
    L = (off - sp.diags(np.asarray(off.sum(axis=1)).ravel())).tocsr()
    L.sort_indices()
    m = np.zeros(n)
    np.add.at(m, F.ravel(), np.repeat(d / 6.0, 3))
    return L, np.maximum(m, 1e-20)


def reference_hks(evals, evecs, t) -> np.ndarray:
    """HKS(x, t) = Σ_i exp(-λ_i t) φ_i(x)², shape (N, T)."""
    evals, evecs, t = np.asarray(evals), np.asarray(evecs), np.asarray(t)
    return (evecs * evecs) @ np.exp(-np.outer(t, evals)).T


def surface_area(V, F) -> float:
    """Total area of the faces the Laplacian keeps."""
    *_, d, bad = _face_geometry(np.asarray(V, np.float64), np.asarray(F, np.int64))
    return float(d[~bad].sum() / 2)
