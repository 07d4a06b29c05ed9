"""One-pass scans of a host CSR matrix that ``eigenpairs`` makes before a solve.

At 655,362 vertices NumPy's forms of these took ~0.1 s each (gathers by row and column index,
temporaries of nnz doubles, SciPy's symmetrised copy for connected components), 5-8% of the
GPU route's 4.1 s end to end on an H200; one compiled pass each reads the arrays once.

* ``scaled_rows``: S L S with S = diag(1/√m), its largest absolute row sum and that of
  M⁻¹ L (the Chebyshev route's Gershgorin bounds), with the same products and the same
  summation order as ``data * s[rows] * s[indices]`` and ``np.bincount``: the same bits.
* ``joined_count``: the connected components of the graph of L's non-zero off-diagonal
  entries (union–find with path halving), or -1 where the pattern is not canonical (sorted,
  no duplicates: duplicates may sum to zero), which ``eigen.check_connected`` leaves to SciPy.

Serial on purpose: a pass over 4.6 million entries takes milliseconds, and no parallel region
means no threading layer to load from a caller's thread.
"""

import numpy as np

import kernelrt

__all__ = ["joined_count", "scaled_rows"]


@kernelrt.njit(nogil=True)
def _scaled_rows(data, indices, indptr, s, m):
    n = indptr.shape[0] - 1
    out = np.empty_like(data)
    top_scaled, top_mass, finite = 0.0, 0.0, True
    for r in range(n):
        sum_scaled, sum_plain = 0.0, 0.0
        for j in range(indptr[r], indptr[r + 1]):
            v = data[j] * s[r] * s[indices[j]]
            out[j] = v
            finite = finite and np.isfinite(v)
            sum_scaled += abs(v)
            sum_plain += abs(data[j])
        top_scaled = max(top_scaled, sum_scaled)
        top_mass = max(top_mass, sum_plain / m[r])
    return out, min(top_scaled, top_mass), finite


def scaled_rows(data, indices, indptr, m):
    """(S L S's data, min(max row sum |S L S|, max row sum |L| / m), all entries finite), S = diag(1/√m)."""
    return _scaled_rows(data, indices, indptr, 1.0 / np.sqrt(m), m)


@kernelrt.njit(nogil=True)
def _joined_count(data, indices, indptr):
    n = indptr.shape[0] - 1
    parent = np.arange(n)
    count = n
    for r in range(n):
        for j in range(indptr[r], indptr[r + 1]):
            c = indices[j]
            if c == r or data[j] == 0.0:
                continue
            a, b = r, c
            while parent[a] != a:  # path halving
                parent[a] = parent[parent[a]]
                a = parent[a]
            while parent[b] != b:
                parent[b] = parent[parent[b]]
                b = parent[b]
            if a != b:
                parent[max(a, b)] = min(a, b)
                count -= 1
    return count


def joined_count(L) -> int:
    """Components of L's non-zero off-diagonal graph, or -1 where L's CSR form is not canonical."""
    if not L.has_canonical_format:
        return -1
    return int(_joined_count(L.data, L.indices, L.indptr))
