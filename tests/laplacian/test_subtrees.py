"""The supernodal solve on two threads: the elimination tree's split (subtrees.py) and the split solve.

The split must be a partition of the supernodes into whole subtrees and a top that holds
every ancestor of them, or the parts would race on rows (forward) or read rows not yet
solved (backward); these are checked structurally. The split solve is checked against the
one-pass solve and SciPy (rounding differs only in the order the top's updates are
summed, so 1e-12, not bits), and against itself on one thread bit for bit: the split is
fixed by the tree, so the thread count must not change a result.
"""

import importlib.util

import numpy as np
import pytest
import scipy.sparse as sp
from numba import get_num_threads, set_num_threads

import kernelrt.kernels.laplacian as lap
from kernelrt.kernels.laplacian.factor import ShiftPattern, with_full_diagonal
from kernelrt.kernels.laplacian.subtrees import solve_split
from kernelrt.kernels.laplacian.supernodal import SupernodalFactor
from kernelrt.kernels.laplacian.supernodal_symbolic import SymbolicFactor

pytestmark = pytest.mark.skipif(importlib.util.find_spec("pymetis") is None, reason="pymetis is not installed")


def _shifted(V, F):
    L, m = lap.cotan_laplacian(V, F, "cpu")
    L = with_full_diagonal(L)
    pattern = ShiftPattern(L)
    values = pattern.shifted_values(L, m, -0.01 * 4 * np.pi / m.sum())
    return pattern, values, sp.csr_matrix((values, pattern.indices, pattern.indptr), shape=L.shape)


def _two_spheres():
    # two components: a forest with two roots, the split's first candidates
    V1, F1 = lap.noisy_icosphere(4, 0.1, seed=1)
    V2, F2 = lap.noisy_icosphere(3, 0.1, seed=2)
    return np.vstack([V1, V2 + 3.0]), np.vstack([F1, F2 + len(V1)])


def _check_split(sym, split):
    ns = len(sym.parent)
    owner = np.full(ns, -1)
    for part in range(split.parts):
        for lo, hi in split.ranges[split.rptr[part]:split.rptr[part + 1]]:
            assert np.all(owner[lo:hi] == -1)  # ranges disjoint
            owner[lo:hi] = part
            inside = sym.parent[lo:hi - 1]
            assert np.all((inside >= lo) & (inside < hi))  # a whole subtree: every parent inside but the root's
            assert sym.parent[hi - 1] == -1 or owner[sym.parent[hi - 1]] == -1  # the root's parent is not in a part
    assert np.array_equal(split.top, np.flatnonzero(owner == -1))
    for s in split.top:  # the top holds every ancestor of the parts
        assert sym.parent[s] == -1 or owner[sym.parent[s]] == -1
    columns = np.concatenate([np.arange(sym.start[s], sym.start[s + 1]) for s in split.top])
    assert np.array_equal(split.top_rows, columns)
    assert np.array_equal(np.flatnonzero(split.slot >= 0), np.sort(columns))
    assert np.array_equal(split.slot[split.top_rows], np.arange(len(columns)))
    assert abs(split.work.sum() - 1.0) < 1e-12 and len(split.work) == split.parts + 1


@pytest.mark.parametrize("mesh", ["ico5", "two spheres"])
def test_split_is_whole_subtrees_and_their_ancestors(mesh):
    V, F = lap.noisy_icosphere(5, 0.1) if mesh == "ico5" else _two_spheres()
    pattern, _, _ = _shifted(V, F)
    sym = pattern.symbolic()
    split = sym.solve_split()
    assert split is not None and split.parts == 2
    _check_split(sym, split)
    # nested dissection's halves: two parts of about equal work, a small top
    assert split.work[:2].min() > 0.35 and split.work[2] < 0.2
    assert sym.solve_split() is split  # made once per analysis (a cohort shares it)


def test_no_split_where_it_cannot_help():
    sym = SymbolicFactor(*_path_pattern(50))  # a path in its natural order: the tree is a chain
    assert solve_split(sym.start, sym.parent, sym.valptr) is None
    pattern, _, _ = _shifted(*lap.noisy_icosphere(3, 0.1))
    sym = pattern.symbolic()
    assert solve_split(sym.start, sym.parent, sym.valptr, parts=1) is None


def _path_pattern(n):
    P = sp.diags([np.ones(n - 1), np.ones(n), np.ones(n - 1)], [-1, 0, 1], format="csr")
    P.sort_indices()
    return P.indptr, P.indices, np.arange(n)


@pytest.mark.parametrize("small", [0, None, 10**9])  # BLAS for every supernode, the default, loops only
@pytest.mark.parametrize("width", [1, 8, 11])
@pytest.mark.parametrize("mesh", ["ico5", "two spheres"])
def test_split_solve_matches_one_pass_and_scipy(mesh, width, small):
    V, F = lap.noisy_icosphere(5, 0.1) if mesh == "ico5" else _two_spheres()
    pattern, values, A = _shifted(V, F)
    fac = SupernodalFactor(pattern.symbolic(), values)
    B = np.random.default_rng(width).standard_normal((A.shape[0], width))
    whole = fac.solve(B, split=False, small=small)
    X = fac.solve(B, small=small)
    assert np.abs(X - whole).max() <= 1e-12 * np.abs(whole).max()
    assert np.abs(A @ X - B).max() <= 1e-10 * np.abs(B).max()
    threads = get_num_threads()
    set_num_threads(1)  # the parts in turn on one thread: the same sums in the same order
    try:
        one = fac.solve(B, small=small)
    finally:
        set_num_threads(threads)
    np.testing.assert_array_equal(one, X)
