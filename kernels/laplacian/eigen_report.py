"""How an eigensolve is judged: residuals, M-orthonormality, and the error when it stops short.

One measure for every route (eigen.py reports it, the benchmark and the solvers' tests
check it) and the error every iterative route raises at its iteration limit.
"""

from __future__ import annotations

import numpy as np

__all__ = ["EigenConvergenceError", "report"]


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
    """
    MV = m[:, None] * evecs
    R = L @ evecs - MV * evals
    positive = evals[evals > 1e-10 * max(float(evals.max()), 1e-300)]
    floor = float(positive.min()) if positive.size else 1.0
    residuals = np.linalg.norm(R, axis=0) / (np.maximum(np.abs(evals), floor) * np.linalg.norm(MV, axis=0))
    gram = evecs.T @ MV
    return residuals, float(np.abs(gram - np.eye(len(evals))).max())
