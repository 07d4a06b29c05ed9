"""The error every eigensolver route raises when it stops before all pairs converged."""

from __future__ import annotations

__all__ = ["EigenConvergenceError"]


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
