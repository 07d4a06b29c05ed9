"""Peers' types out of and into the Laplacian family: SpectralBrain's matrices and decompositions.

Owns the two conversions a SpectralBrain 0.1.0 user needs (docs/laplacian.md, "Using
kernelrt from SpectralBrain"):

* ``as_spectralbrain(L, m)``: kernelrt's ``(CSR L, mass vector)`` as SpectralBrain's
  ``_cotangent_laplacian`` returns them: L as ``csc_matrix`` with its pruned pattern (no
  stored zeros), M as a diagonal ``csc_matrix``. Same values, so bit-equal wherever
  kernelrt's assembly is (every manifold mesh).
* ``eigenpairs_of(evals, evecs)``: ``(evals, evecs)`` from two arrays or from one
  decomposition object, duck-typed (``.eigenvalues``/``.eigenvectors`` as SpectralBrain's
  ``SpectralDecomposition``, ``.evals``/``.evecs`` as kernelrt's ``Eigenpairs``), so
  ``hks``/``wks`` take ``mesh.decompose()``'s result. Nothing here imports a peer.

The mass the other direction (a peer's diagonal sparse ``M`` into ``eigenpairs`` or
``LaplacianOperator``) is an input rule: ``inputs.mass_vector``.
"""

from __future__ import annotations

import numpy as np
import scipy.sparse as sp

from .inputs import host_square_sparse, mass_vector
from .spmv import _to_host

__all__ = ["as_spectralbrain", "eigenpairs_of"]


def as_spectralbrain(L, m, *, prune: bool = True) -> tuple[sp.csc_matrix, sp.csc_matrix]:
    """L and the mass in SpectralBrain 0.1.0's types, as its ``_cotangent_laplacian`` returns them.

    SpectralBrain builds L from COO triplets, converts to CSC (summing duplicates) and
    adds the diagonal with a sparse sum, which drops every entry that sums to exactly 0;
    kernelrt's pattern comes from the topology and keeps those as explicit zeros. With
    ``prune=True`` they are dropped here too, so ``indptr``, ``indices`` and ``nnz`` are
    SpectralBrain's (code that reads the pattern as adjacency sees no difference).

    Args:
        L: (N, N) Laplacian, any SciPy sparse format or a cupyx matrix (copied to the host).
        m: the lumped mass: (N,) vector, (N, 1) column or diagonal sparse matrix.
        prune: drop stored zeros (SpectralBrain's pattern); False keeps kernelrt's.

    Returns:
        ``(L, M)``: a new ``scipy.sparse.csc_matrix`` (float64, sorted indices; L's own
        arrays are never modified) and ``scipy.sparse.diags(m, 0, format="csc")``.

    Raises:
        TypeError: L is not a sparse matrix.
        ValueError: L is not square, or m is not a lumped mass of matching size.
    """
    L = host_square_sparse(L)
    n = L.shape[0]
    mass = np.asarray(_to_host(mass_vector(m, n)), dtype=np.float64)
    # a new CSC whatever the input (tocsc of a CSC returns the same object): pruning it
    # must not touch L, whose CSR pattern kernelrt shares read-only with its topology
    Lc = sp.csc_matrix(L, dtype=np.float64, copy=True)
    Lc.sum_duplicates()
    if prune:
        Lc.eliminate_zeros()
    return Lc, sp.diags(mass, 0, shape=(n, n), format="csc")


def _arrays_of(obj):
    """(eigenvalues, eigenvectors) of a decomposition object, or None for anything else."""
    for vals, vecs in (("eigenvalues", "eigenvectors"), ("evals", "evecs")):
        a, b = getattr(obj, vals, None), getattr(obj, vecs, None)
        if a is not None and b is not None and not callable(a) and not callable(b):
            return a, b
    return None


def eigenpairs_of(evals, evecs, caller: str = "hks"):
    """``(evals, evecs)`` from the two arrays, or from one decomposition object as ``evals``.

    Args:
        evals: (k,) eigenvalues, or a decomposition object: SpectralBrain's
            ``SpectralDecomposition`` (``.eigenvalues``, ``.eigenvectors``), kernelrt's
            ``Eigenpairs`` (``.evals``, ``.evecs``) or anything else with either pair.
        evecs: (N, k) eigenvectors, or None when ``evals`` is a decomposition.
        caller: the function's name, for the messages.

    Raises:
        TypeError: evecs missing without a decomposition object, or given beside one.
    """
    pair = _arrays_of(evals)
    if pair is None and evecs is None:
        raise TypeError(
            f"{caller} needs the eigenvectors: pass {caller}(evals, evecs) with the (k,) eigenvalues and "
            "(N, k) eigenvectors, or one decomposition object with .eigenvalues and .eigenvectors "
            f"(SpectralBrain's SpectralDecomposition) or kernelrt's Eigenpairs (got {type(evals).__name__} alone)"
        )
    if pair is not None and evecs is not None:
        raise TypeError(
            f"{caller} takes a decomposition object alone: leave evecs out and pass the other arguments by "
            f"keyword, e.g. {caller}(decomposition, {'t' if caller == 'hks' else 'e'}=...) "
            f"(got {type(evals).__name__} and a second positional argument {type(evecs).__name__})"
        )
    return pair if pair is not None else (evals, evecs)
