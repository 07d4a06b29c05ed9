"""How an eigensolve is judged: residuals, M-orthonormality, and the error when it stops short.

One measure for every route (eigen.py reports it, the benchmark and the solvers' tests
check it) and the error every iterative route raises at its iteration limit. ``report``
takes host arrays; ``device_report`` is the same measure where the eigenvectors already
are (a device, through an operator's product), bringing back k + 1 numbers instead of
moving N x k ones.
"""

from __future__ import annotations

import numpy as np

from .basis_products import report_sums

__all__ = ["EigenConvergenceError", "report", "device_report", "relative_residuals", "smallest_positive"]


class EigenConvergenceError(RuntimeError):
    """The iteration limit came before every requested eigenpair converged.

    Attributes:
        evals: the eigenvalue estimates reached (solver order), or None.
        residuals: their relative residuals, or None.
        n_converged: how many pairs met the tolerance.
    """

    def __init__(self, message: str, evals=None, residuals=None, n_converged: int = 0):
        super().__init__(message)
        self.evals, self.residuals, self.n_converged = evals, residuals, n_converged


def report(L, m, evals, evecs) -> tuple[np.ndarray, float]:
    """Relative residuals ``‖L v - λ M v‖ / ‖λ M v‖`` per pair and ``max |VᵀMV - I|``.

    The null pair (λ ~ 0) is measured against λ₁, the smallest eigenvalue above 1e-10 of
    the largest: relative to its own λ it would be rounding over rounding.

    The sums run on numba's threads with no N x k temporary (``basis_products.report_sums``;
    a column-major ``evecs`` is copied row-major first): each residual entry is rounded as
    ``device_report`` rounds it, only the norms' sums are grouped differently. The product,
    M V and the residual as arrays took 32-34 ms at 50,000 vertices, k = 50, against 13-14 ms.
    """
    evals = np.asarray(evals, dtype=np.float64)
    residual, mv, gram = report_sums(L, np.ascontiguousarray(evecs, dtype=np.float64), m, evals)
    return relative_residuals(residual, mv, evals), float(np.abs(gram - np.eye(len(evals))).max())


def device_report(product, m, evals, evecs, xp, host) -> tuple[np.ndarray, float]:
    """``report``'s measure computed where ``evecs`` live; only k norms and a scalar come back.

    Args:
        product: ``L @ X`` on that side (e.g. a ``LaplacianOperator``'s ``matmat``), a new
            array (it is overwritten with the residual).
        m: (N,) mass, ``xp``'s array.
        evals: (k,) host eigenvalues.
        evecs: (N, k), ``xp``'s array.
        xp: the array module of ``m`` and ``evecs`` (CuPy on a GPU, NumPy on the host).
        host: turns an ``xp`` array into a NumPy array.
    """
    return _measure(product(evecs), m, evals, evecs, xp, host)


def _measure(LV, m, evals, evecs, xp, host):
    # The same expressions in the same order on both sides: on the host, ``report``'s bits.
    # LV, the product's own new array, becomes the residual in place, and the norms are
    # sums of squares without a squared copy: at 163,842 vertices and k = 100 each N x k
    # temporary is 131 MB to allocate, fault in and stream (four of them cost ~0.5 s).
    evals = np.asarray(evals, dtype=np.float64)
    MV = m[:, None] * evecs
    gram = evecs.T @ MV
    mv_norms = xp.sqrt(xp.einsum("ij,ij->j", MV, MV))
    MV *= xp.asarray(evals)
    LV -= MV  # R = L V - M V Λ
    norms = host(xp.stack([xp.sqrt(xp.einsum("ij,ij->j", LV, LV)), mv_norms]))  # (2, k): one transfer
    return relative_residuals(norms[0], norms[1], evals), float(host(xp.abs(gram - xp.eye(len(evals))).max()))


def relative_residuals(residual, mv, evals) -> np.ndarray:
    """``‖L v - λ M v‖ / (|λ| ‖M v‖)`` per pair from the two norms, the null pair's |λ| replaced by λ₁.

    ``report``'s measure from norms computed elsewhere (a solver's own residual block, as the
    benchmark's anchors compute it); λ₁ is ``smallest_positive(evals)`` (1.0 when there is none).
    """
    floor = smallest_positive(evals)
    return residual / (np.maximum(np.abs(evals), 1.0 if floor is None else floor) * mv)


def smallest_positive(evals) -> float | None:
    """λ₁: the smallest eigenvalue above 1e-10 of the largest (the null pair's scale), or None if none is."""
    evals = np.asarray(evals, dtype=np.float64)
    positive = evals[evals > 1e-10 * max(float(evals.max()), 1e-300)]
    return float(positive.min()) if positive.size else None
