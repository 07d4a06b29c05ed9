"""The sparse factor of the shifted operator ``A = L - σM`` that shift-invert solves with.

Owns the choice of factorisation library and its multi-column solve:

* **supernodal** (the default where pymetis is installed: kernelrt's own, supernodal.py,
  with METIS's order from pymetis): the analysis (ordering, elimination tree, supernodes)
  is kept on the ``ShiftPattern``, so a cohort of subjects sharing a topology analyses
  once and pays only the numeric factorisation per subject (0.32-0.42 s at 163,842
  vertices against cholespy's 2.6-3.5 s for analysis and factor together), and a single
  solve's factor is faster too (ico8: 14 s against 25 s); docs/laplacian.md, "kernelrt's
  supernodal Cholesky".
* **cholespy** (CHOLMOD with METIS inside; BSD-3 wrapper, wheels for Linux x86-64, macOS
  and Windows) where pymetis is not installed: a Cholesky factor of the symmetric positive
  definite ``A`` (σ < 0). Its solve takes a whole block of right-hand sides, ~8 ms a column
  at 163,842 vertices against ~19 ms for one column alone (measured here, blocks of 8).
* **SuperLU** (SciPy) when neither is installed: the factor SpectralBrain's route uses,
  2-3x slower to factor and per column.

``A`` is built from L's CSR arrays without a sparse-matrix sum: its pattern is L's
(every diagonal entry is stored, see pattern.py), so the shift touches only the diagonal.
A ``ShiftPattern`` keeps that pattern for one topology, so a cohort builds each
subject's ``A`` with one copy and one indexed subtraction, and keeps the supernodal
analysis once made. cholespy's fill-reducing ordering is not kept: it runs CHOLMOD's
analysis and factorisation in one call.
"""

from __future__ import annotations

import importlib
import logging

import numpy as np
import scipy.sparse as sp
from scipy.sparse.linalg import splu

__all__ = ["ShiftPattern", "ShiftedFactor", "factor_library", "with_full_diagonal", "LIBRARIES"]

logger = logging.getLogger("kernelrt.laplacian")

LIBRARIES = ("cholespy", "supernodal", "superlu")


def factor_library(requested: str = "auto") -> str:
    """The library a factorisation will use.

    "auto": kernelrt's supernodal factor where pymetis (its ordering) is installed, else
    cholespy, else SciPy's SuperLU (with a warning).
    """
    if requested not in ("auto",) + LIBRARIES:
        raise ValueError(f"factor must be 'auto', 'cholespy', 'supernodal' or 'superlu' (got {requested!r})")
    if requested == "superlu":
        return "superlu"
    if requested in ("auto", "supernodal") and importlib.util.find_spec("pymetis") is not None:
        return "supernodal"
    if requested == "supernodal":
        raise ImportError("factor='supernodal' needs the pymetis package (METIS's ordering): pip install pymetis")
    if importlib.util.find_spec("cholespy") is not None:
        return "cholespy"
    if requested == "cholespy":
        raise ImportError("factor='cholespy' needs the cholespy package: pip install cholespy")
    logger.warning("eigenpairs: neither pymetis nor cholespy is installed, so the shifted matrix is factored by "
                   "SciPy's SuperLU (2-3x slower; pip install pymetis)")
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
        self._symbolic = None

    def symbolic(self):
        """The supernodal analysis of this pattern (supernodal_symbolic.py), made on first use and kept.

        Two threads asking at once may both analyse; either result is the same analysis.
        """
        if self._symbolic is None:
            from .supernodal_symbolic import SymbolicFactor  # numba compiles it: only when asked for

            self._symbolic = SymbolicFactor(self.indptr, self.indices)
        return self._symbolic

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
        library: "cholespy", "supernodal" or "superlu" (see ``factor_library``).

    Raises:
        numpy.linalg.LinAlgError: A is not positive definite ("supernodal"; cholespy and
            SuperLU report their own errors).
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
        elif library == "supernodal":
            from .supernodal import SupernodalFactor

            self._solver = SupernodalFactor(pattern.symbolic(), values)
        else:
            A = sp.csc_matrix((values, pattern.indices, pattern.indptr), shape=(pattern.n, pattern.n))
            self._solver = splu(A)

    @property
    def order(self) -> np.ndarray | None:
        """The factor's row order (``order[new] = old``) where ``solve`` can work in it, else None.

        The supernodal factor's: an iteration that keeps its vectors in this order saves the
        solve both of its gathers (``solve(..., in_order=True)``). cholespy and SuperLU
        permute inside their own solves.
        """
        return self._solver.symbolic.perm if self.library == "supernodal" else None

    def to_mesh_order(self, Y: np.ndarray, scale: np.ndarray) -> None:
        """Y's rows, kept in ``order``, put back in the mesh's order and times ``scale`` (mesh order), in place."""
        from .supernodal import to_original_order

        if self.order is None:
            raise ValueError(f"a {self.library!r} factor has no order of its own")
        to_original_order(Y, self._solver.symbolic.inverse, scale)

    def solve(self, B: np.ndarray, scale: np.ndarray | None = None, in_order: bool = False) -> np.ndarray:
        """``A⁻¹ B`` (or ``D A⁻¹ D B``, ``D = diag(scale)``) for B of shape (N,) or (N, b), a new array.

        The supernodal factor returns it in B's memory order (column-major for a block of
        the Krylov basis); cholespy and SuperLU return it row-major. ``in_order``: B's rows,
        the scale's and the result's are in ``order`` (only where it is not None).
        """
        if in_order and self.order is None:
            raise ValueError(f"in_order=True needs a factor with an order (supernodal), not {self.library!r}")
        if self.library == "supernodal":  # scales while it permutes, no extra pass
            return self._solver.solve(B, scale, in_order=in_order)
        if scale is not None:
            d = scale if np.ndim(B) == 1 else scale[:, None]
            return self.solve(d * B) * d
        B = np.ascontiguousarray(B, dtype=np.float64)
        if self.library == "superlu":
            return np.ascontiguousarray(self._solver.solve(B))
        X = np.empty_like(B)
        self._solver.solve(B, X)
        return X
