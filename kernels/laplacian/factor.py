"""The sparse factor of the shifted operator ``A = L - σM`` that shift-invert solves with.

Owns the choice of factorisation library and its multi-column solve:

* **cholespy** (CHOLMOD with METIS inside; BSD-3 wrapper, wheels for Linux x86-64, macOS
  and Windows): a Cholesky factor of the symmetric positive definite ``A`` (σ < 0). Its
  solve takes a whole block of right-hand sides, ~8 ms a column at 163,842 vertices
  against ~19 ms for one column alone (measured here, blocks of 8).
* **SuperLU** (SciPy) when cholespy is not installed: the factor SpectralBrain's route
  uses, 2-3x slower to factor and per column.

``A`` is built from L's CSR arrays without a sparse-matrix sum: its pattern is L's
(every diagonal entry is stored, see pattern.py), so the shift touches only the diagonal.
A ``ShiftPattern`` keeps that pattern for one topology, so a cohort builds each
subject's ``A`` with one copy and one indexed subtraction. The fill-reducing ordering
is not kept: cholespy runs CHOLMOD's analysis and factorisation in one call (the
analysis, METIS nested dissection, is ~55% of its 1.6 s at 163,842 vertices).
"""

from __future__ import annotations

import importlib
import logging

import numpy as np
import scipy.sparse as sp
from scipy.sparse.linalg import splu

__all__ = ["ShiftPattern", "ShiftedFactor", "factor_library", "with_full_diagonal", "LIBRARIES"]

logger = logging.getLogger("kernelrt.laplacian")

LIBRARIES = ("cholespy", "superlu")


def factor_library(requested: str = "auto") -> str:
    """The library a factorisation will use: cholespy when importable, else SuperLU."""
    if requested not in ("auto",) + LIBRARIES:
        raise ValueError(f"factor must be 'auto', 'cholespy' or 'superlu' (got {requested!r})")
    if requested == "superlu":
        return "superlu"
    if importlib.util.find_spec("cholespy") is not None:
        return "cholespy"
    if requested == "cholespy":
        raise ImportError("factor='cholespy' needs the cholespy package: pip install cholespy")
    logger.warning("eigenpairs: cholespy is not installed, so the shifted matrix is factored by SciPy's SuperLU "
                   "(2-3x slower; pip install cholespy)")
    return "superlu"


def with_full_diagonal(L) -> sp.csr_matrix:
    """L as canonical CSR with every diagonal entry stored (explicit zeros where absent).

    The cotangent Laplacians of pattern.py already are; other matrices are rebuilt once.
    """
    L = L if sp.isspmatrix_csr(L) or isinstance(L, sp.csr_array) else sp.csr_matrix(L)
    n = L.shape[0]
    if L.has_canonical_format:
        rows = np.repeat(np.arange(n), np.diff(L.indptr))
        if int(np.count_nonzero(rows == L.indices)) == n:
            return L
    coo = L.tocoo()
    idx = np.arange(n)
    full = sp.csr_matrix((np.r_[coo.data, np.zeros(n)], (np.r_[coo.row, idx], np.r_[coo.col, idx])), shape=L.shape)
    full.sum_duplicates()  # sums duplicates, keeps explicit zeros
    return full


class ShiftPattern:
    """L's symmetric CSR pattern, made ready to build ``L - σM`` for any values on it.

    A symmetric matrix's CSR arrays are also its CSC arrays, so no transposition is
    needed; what is kept is the position of each row's diagonal entry and the 32-bit
    indices both libraries take.

    Args:
        L: canonical CSR with a full diagonal (``with_full_diagonal``).
    """

    def __init__(self, L):
        self.n, self.nnz = L.shape[0], int(L.nnz)
        self.indptr = np.array(L.indptr, dtype=np.int32)
        self.indices = np.array(L.indices, dtype=np.int32)
        rows = np.repeat(np.arange(self.n, dtype=np.int32), np.diff(self.indptr))
        self.diag = np.flatnonzero(rows == self.indices)

    def matches(self, L) -> bool:
        """Whether L (canonical, full diagonal) has exactly this pattern."""
        return (
            L.shape == (self.n, self.n) and L.nnz == self.nnz
            and np.array_equal(L.indptr, self.indptr) and np.array_equal(L.indices, self.indices)
        )

    def shifted_values(self, L, m: np.ndarray, sigma: float) -> np.ndarray:
        """The values of ``L - σ diag(m)`` for an L with this pattern."""
        values = np.array(L.data, dtype=np.float64)
        values[self.diag] -= sigma * m
        return values


class ShiftedFactor:
    """A factor of ``A = L - σ diag(m)`` with a multi-column ``solve``.

    Args:
        pattern: the ``ShiftPattern`` of L (kept by a cohort, made once otherwise).
        values: ``pattern.shifted_values(L, m, sigma)``.
        library: "cholespy" or "superlu" (see ``factor_library``).
    """

    def __init__(self, pattern: ShiftPattern, values: np.ndarray, library: str):
        self.library, self.n = library, pattern.n
        if library == "cholespy":
            cholespy = importlib.import_module("cholespy")
            # copies: cholespy's C++ side sorts and compacts the arrays it is given in
            # place (cholesky_solver.cpp), and the pattern is shared by a whole cohort
            self._solver = cholespy.CholeskySolverD(
                pattern.n, pattern.indptr.copy(), pattern.indices.copy(), values, cholespy.MatrixType.CSR
            )
        else:
            A = sp.csc_matrix((values, pattern.indices, pattern.indptr), shape=(pattern.n, pattern.n))
            self._solver = splu(A)

    def solve(self, B: np.ndarray) -> np.ndarray:
        """``A⁻¹ B`` for B of shape (N,) or (N, b), as a new C-contiguous array."""
        B = np.ascontiguousarray(B, dtype=np.float64)
        if self.library == "superlu":
            return np.ascontiguousarray(self._solver.solve(B))
        X = np.empty_like(B)
        self._solver.solve(B, X)
        return X
