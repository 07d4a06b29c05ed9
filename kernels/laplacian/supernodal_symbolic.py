"""The symbolic phase of kernelrt's supernodal Cholesky: everything that depends on the pattern only.

Owns the analysis of a symmetric pattern that the numeric factorisation (supernodal.py)
repeats for new values without redoing it: a cohort of subjects sharing a face array
analyses once and factors each subject (issue 27). The steps, as in CHOLMOD and in Davis,
"Direct Methods for Sparse Linear Systems" (SIAM 2006), ch. 4:

1. a fill-reducing order: METIS nested dissection (pymetis) of the graph of A;
2. the elimination tree (Liu's algorithm with path compression) and its postorder, so that
   every subtree, and so every supernode, is a contiguous range of columns;
3. the column counts of L (row subtrees walked with a marker);
4. fundamental supernodes (a column whose only child is the previous one and whose
   structure is the previous one's minus its diagonal), then relaxed amalgamation with
   CHOLMOD's default rule (a child merges into its parent when the merged supernode has
   few columns or few explicit zeros): larger dense blocks for BLAS at a small cost in
   stored zeros;
5. each supernode's row structure, and the peak size of the update-matrix stack that the
   multifrontal factorisation needs.

Everything here is on integers; nothing rounds, so the analysis is the same on every CPU.
"""

from __future__ import annotations

import numpy as np
import scipy.sparse as sp

import kernelrt

__all__ = ["SymbolicFactor", "nested_dissection"]

# CHOLMOD's default relaxed amalgamation (cholmod_common: nrelax, zrelax): a merge is taken when
# the merged supernode has at most RELAX_COLUMNS[i] columns and a fraction of explicit zeros
# below RELAX_ZEROS[i] for some i (the first pair merges whatever the zeros), or a fraction
# below RELAX_ANY at any size.
RELAX_COLUMNS = (4, 16, 48)
RELAX_ZEROS = (1.0, 0.8, 0.1)
RELAX_ANY = 0.05


# METIS's ordering options: one refinement pass per level and separators balanced to 3%
# (METIS's defaults for ordering: 10 passes, 20%). At 163,842 / 655,362 vertices the order
# takes 0.68 / 3.3 s against 0.85 / 4.1 s, for 2.3% / 3.3% more factor entries and no
# slower solves (40,962 vertices: 0.14 s against 0.19 s; Intel Xeon, 2 vCPU).
METIS_OPTIONS = {"niter": 1, "ufactor": 30}


def nested_dissection(indptr: np.ndarray, indices: np.ndarray) -> np.ndarray:
    """METIS's fill-reducing order of a symmetric pattern: ``perm[new] = old``.

    The graph is the pattern without its diagonal. Needs pymetis (wheels for Linux,
    macOS and Windows).
    """
    import pymetis  # an optional dependency: supernodal.factor_library decides before this

    n = len(indptr) - 1
    rows = np.repeat(np.arange(n, dtype=np.int32), np.diff(indptr))
    off = rows != indices
    G = sp.csr_matrix((np.ones(int(off.sum()), np.int8), indices[off], np.r_[0, np.cumsum(np.bincount(rows[off], minlength=n))]),
                      shape=(n, n))
    perm, _ = pymetis.nested_dissection(pymetis.CSRAdjacency(G.indptr.astype(np.int32), G.indices.astype(np.int32)),
                                        options=pymetis.Options(**METIS_OPTIONS))
    return np.asarray(perm, dtype=np.int64)


@kernelrt.njit
def _etree(indptr, indices, n):
    # Liu: row k's entries i < k climb from i to the root of its current subtree (path compression)
    parent = np.full(n, -1, np.int64)
    ancestor = np.full(n, -1, np.int64)
    for k in range(n):
        for p in range(indptr[k], indptr[k + 1]):
            i = indices[p]
            while i != -1 and i < k:
                nxt = ancestor[i]
                ancestor[i] = k
                if nxt == -1:
                    parent[i] = k
                i = nxt
    return parent


@kernelrt.njit
def _postorder(parent, n):
    head = np.full(n, -1, np.int64)
    nxt = np.full(n, -1, np.int64)
    for j in range(n - 1, -1, -1):  # children in ascending order (the order nested dissection gave)
        p = parent[j]
        if p != -1:
            nxt[j] = head[p]
            head[p] = j
    post = np.empty(n, np.int64)
    stack = np.empty(n, np.int64)
    k = 0
    for root in range(n):
        if parent[root] != -1:
            continue
        top = 0
        stack[0] = root
        while top >= 0:
            p = stack[top]
            child = head[p]
            if child == -1:
                top -= 1
                post[k] = p
                k += 1
            else:
                head[p] = nxt[child]
                top += 1
                stack[top] = child
    return post


@kernelrt.njit
def _column_counts(indptr, indices, parent, n):
    # L[i, j] != 0 exactly for the j on the etree paths from each A[i, j'] (j' < i) up to i
    count = np.ones(n, np.int64)
    mark = np.full(n, -1, np.int64)
    for i in range(n):
        mark[i] = i
        for p in range(indptr[i], indptr[i + 1]):
            j = indices[p]
            while j < i and mark[j] != i:
                count[j] += 1
                mark[j] = i
                j = parent[j]
    return count


@kernelrt.njit
def _supernodes(parent, count, n, relax_columns, relax_zeros, relax_any):
    children = np.zeros(n, np.int64)
    for j in range(n):
        if parent[j] != -1:
            children[parent[j]] += 1
    # fundamental supernodes: j + 1 continues j's when it is j's only parent-child link and
    # its structure is j's without j
    first = [0]
    for j in range(1, n):
        if not (parent[j - 1] == j and children[j] == 1 and count[j - 1] == count[j] + 1):
            first.append(j)
    ns = len(first)
    start = np.empty(ns + 1, np.int64)
    for s in range(ns):
        start[s] = first[s]
    start[ns] = n
    owner = np.empty(n, np.int64)
    for s in range(ns):
        owner[start[s]:start[s + 1]] = s
    sparent = np.full(ns, -1, np.int64)
    for s in range(ns):
        p = parent[start[s + 1] - 1]
        if p != -1:
            sparent[s] = owner[p]
    # relaxed amalgamation, right to left: s merges into the aggregate that begins at s + 1
    # when its parent lies in that aggregate (the columns stay contiguous)
    cols = np.empty(ns, np.int64)
    rows = np.empty(ns, np.int64)
    zeros = np.zeros(ns, np.float64)
    rep = np.arange(ns)  # the aggregate each fundamental supernode belongs to (its first one)
    merged = np.zeros(ns, np.bool_)
    for s in range(ns):
        cols[s] = start[s + 1] - start[s]
        rows[s] = count[start[s]]
    for s in range(ns - 2, -1, -1):
        p = sparent[s]
        if p == -1 or rep[p] != s + 1:
            continue
        a = s + 1
        c = cols[s] + cols[a]
        r = cols[s] + rows[a]
        z = zeros[s] + zeros[a] + cols[s] * (cols[s] + rows[a] - rows[s])
        total = c * r - c * (c - 1) / 2
        fraction = z / total
        take = fraction < relax_any
        for i in range(len(relax_columns)):
            if c <= relax_columns[i] and fraction < relax_zeros[i]:
                take = True
        if take:
            cols[s], rows[s], zeros[s] = c, r, z
            merged[a] = True
            rep[a] = s
            t = a + 1  # the rest of a's aggregate (contiguous after it)
            while t < ns and rep[t] == a:
                rep[t] = s
                t += 1
    keep = np.flatnonzero(~merged)
    nk = len(keep)
    super_start = np.empty(nk + 1, np.int64)
    super_rows = np.empty(nk, np.int64)
    for q in range(nk):
        super_start[q] = start[keep[q]]
        super_rows[q] = rows[keep[q]]
    super_start[nk] = n
    return super_start, super_rows


@kernelrt.njit
def _add_rows(source, lo, hi, below, s, mark, rows, k):
    # append the rows of source[lo:hi] from `below` on (past s's columns) not yet in s's structure
    for p in range(lo, hi):
        i = source[p]
        if i >= below and mark[i] != s:
            mark[i] = s
            rows[k] = i
            k += 1
    return k


@kernelrt.njit
def _structure(indptr, indices, parent, start, nrows):
    # rows of supernode s: its columns, A's entries below them, its children's rows below them
    ns = len(start) - 1
    n = start[ns]
    owner = np.empty(n, np.int64)
    for s in range(ns):
        owner[start[s]:start[s + 1]] = s
    rowptr = np.zeros(ns + 1, np.int64)
    for s in range(ns):
        rowptr[s + 1] = rowptr[s] + nrows[s]
    rows = np.empty(rowptr[ns], np.int64)
    # children lists (postorder: every child precedes its parent)
    head = np.full(ns, -1, np.int64)
    nxt = np.full(ns, -1, np.int64)
    sparent = np.full(ns, -1, np.int64)
    for s in range(ns - 1, -1, -1):
        p = parent[start[s + 1] - 1]
        if p != -1:
            sparent[s] = owner[p]
            nxt[s] = head[sparent[s]]
            head[sparent[s]] = s
    mark = np.full(n, -1, np.int64)
    for s in range(ns):
        f, l = start[s], start[s + 1]
        k = rowptr[s]
        for j in range(f, l):
            rows[k] = j
            mark[j] = s
            k += 1
        for j in range(f, l):
            k = _add_rows(indices, indptr[j], indptr[j + 1], l, s, mark, rows, k)
        c = head[s]
        while c != -1:
            k = _add_rows(rows, rowptr[c], rowptr[c + 1], l, s, mark, rows, k)
            c = nxt[c]
        if k != rowptr[s + 1]:
            raise RuntimeError("supernodal structure does not match the column counts")
        rows[rowptr[s] + (l - f):k].sort()
    # the multifrontal stack's peak: children's update matrices wait until their parent runs
    top = 0
    peak = 0
    for s in range(ns):
        c = head[s]
        while c != -1:
            u = rowptr[c + 1] - rowptr[c] - (start[c + 1] - start[c])
            top -= u * u
            c = nxt[c]
        u = nrows[s] - (start[s + 1] - start[s])
        top += u * u
        peak = max(peak, top)
    return rowptr, rows, sparent, peak


class SymbolicFactor:
    """The analysis of one symmetric pattern: order, supernodes and their row structures.

    Args:
        indptr, indices: the CSR (= CSC) pattern of a symmetric matrix with every diagonal
            entry stored, canonical (sorted, no duplicates).
        perm: a fill-reducing order (``perm[new] = old``); default METIS nested dissection.

    Attributes:
        n: the order; perm: the final order (fill-reducing, then etree-postordered), with
        ``inverse[old] = new``; start: the first column of each supernode (and n);
        rowptr/rows: each supernode's sorted rows (its own columns first); parent: each
        supernode's parent supernode (-1 at a root); valptr: where each supernode's
        column-major block starts in the factor's values; nnz: the entries
        stored by the numeric factor (explicit zeros of the amalgamation included);
        stack_peak: the update stack's size; front_max: the largest front's order;
        a_indptr/a_indices/a_source: A's lower triangle in the final order, as CSC, with
        the position in the input's values array each entry comes from.
    """

    def __init__(self, indptr: np.ndarray, indices: np.ndarray, perm: np.ndarray | None = None):
        n = len(indptr) - 1
        indptr = np.asarray(indptr, dtype=np.int64)
        indices = np.asarray(indices, dtype=np.int64)
        self.input_nnz = len(indices)  # the length of the values a numeric factorisation takes
        if perm is None:
            perm = nested_dissection(indptr, indices)
        position = np.arange(1, len(indices) + 1, dtype=np.int64)  # + 1: no entry is a zero to drop
        # A in the fill-reducing order, carrying each entry's position in the input's values
        P = self._permuted(indptr, indices, position, perm, n)
        parent = _etree(P.indptr, P.indices, n)
        post = _postorder(parent, n)
        perm = perm[post]
        P = self._permuted(indptr, indices, position, perm, n)
        parent = _etree(P.indptr, P.indices, n)
        count = _column_counts(P.indptr, P.indices, parent, n)
        self.start, nrows = _supernodes(parent, count, n, np.array(RELAX_COLUMNS, np.int64),
                                        np.array(RELAX_ZEROS, np.float64), RELAX_ANY)
        self.rowptr, self.rows, self.parent, self.stack_peak = _structure(P.indptr, P.indices, parent, self.start, nrows)
        self.n, self.perm = n, perm
        self.inverse = np.empty(n, np.int64)
        self.inverse[perm] = np.arange(n)
        ncols = np.diff(self.start)
        self.valptr = np.r_[0, np.cumsum(nrows * ncols)].astype(np.int64)
        self.nnz = int(self.valptr[-1])
        self.front_max = int(nrows.max(initial=0))
        lower = sp.tril(P, format="csc")  # CSC of the lower triangle = rows >= column, per column
        lower.sort_indices()
        self.a_indptr, self.a_indices = lower.indptr.astype(np.int64), lower.indices.astype(np.int64)
        self.a_source = np.asarray(lower.data, dtype=np.int64) - 1

    def solve_split(self):
        """The tree's split into independent subtrees for two-thread solves (subtrees.py), made once."""
        if not hasattr(self, "_split"):
            from .subtrees import solve_split

            self._split = solve_split(self.start, self.parent, self.valptr)
        return self._split

    @staticmethod
    def _permuted(indptr, indices, position, perm, n) -> sp.csr_matrix:
        A = sp.csr_matrix((position, indices, indptr), shape=(n, n))
        P = A[perm][:, perm]
        P.sort_indices()
        return P

