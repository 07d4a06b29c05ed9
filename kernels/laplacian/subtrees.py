"""Independent subtrees of a supernodal elimination tree: the split that lets a solve use two cores.

Owns the partition the supernodal solve runs in parallel (supernodal.py). In the forward
substitution a supernode updates only the rows of its ancestors, and in the backward one it
reads only theirs, so disjoint subtrees of the elimination tree can be solved at the same
time; what is left above them (the "top": nested dissection's first separators) runs alone,
after the subtrees in the forward pass and before them in the backward one. Rows of the top
that two subtrees both update are summed through one buffer per part (supernodal.py).

Nested dissection makes the tree's first split two halves of about equal size, so two parts
lose little to the top (at 163,842 vertices: 5% of the solve's multiply-adds, one dense supernode of 1,038 columns). The split is
fixed by the tree alone, not by the number of threads, so a solve's bits do not depend on
how many cores run it (one thread runs the parts in turn).
"""

from __future__ import annotations

import numpy as np

import kernelrt

__all__ = ["SolveSplit", "solve_split", "PARTS"]

# Parts of a split: two cores is the machine kernelrt is measured on (2-vCPU Intel Xeon / AMD
# EPYC), and a fixed count keeps results independent of the thread count.
PARTS = 2
# The top may hold at most this share of the work: past it, a split costs more than it gains.
TOP_LIMIT = 0.25


class SolveSplit:
    """Subtrees of the supernodal tree in ``parts`` groups, and the top that is left.

    Attributes:
        ranges: (g, 2) supernode ranges [first, last + 1), each a whole subtree.
        rptr: part p owns ``ranges[rptr[p]:rptr[p + 1]]``, in ascending order.
        top: the supernodes in no range, ascending (children before parents).
        slot: for each column of the factor, its row in the parts' top buffers, or -1.
        top_rows: the columns of the top supernodes (the buffers' rows).
        work: per part its share of the solve's multiply-adds, and the top's (last).
    """

    def __init__(self, ranges, rptr, top, slot, top_rows, work):
        self.ranges, self.rptr, self.top, self.slot, self.top_rows, self.work = ranges, rptr, top, slot, top_rows, work

    @property
    def parts(self) -> int:
        return len(self.rptr) - 1


@kernelrt.njit
def _subtree_sums(parent, work):
    # subtree work, first supernode and size of every subtree (children come before parents)
    ns = len(parent)
    total = work.astype(np.float64)
    first = np.arange(ns)
    size = np.ones(ns, np.int64)
    for s in range(ns):
        p = parent[s]
        if p >= 0:
            total[p] += total[s]
            first[p] = min(first[p], first[s])
            size[p] += size[s]
    return total, first, size


def _assign(candidates, total, parts):
    # longest processing time first: each subtree to the least loaded part
    load = np.zeros(parts)
    owner = {}
    for s in sorted(candidates, key=lambda s: -total[s]):
        p = int(np.argmin(load))
        load[p] += total[s]
        owner[s] = p
    return load, owner


def solve_split(start, parent, valptr, parts: int = PARTS) -> SolveSplit | None:
    """The split of smallest estimated time (top + largest part), or None if none helps.

    Args:
        start: each supernode's first column (and n); parent: each supernode's parent (-1
            at a root); valptr: where each supernode's values start.
        parts: the number of groups.
    """
    ns = len(parent)
    # a supernode's solve work: its triangle and the rows below (its stored block also holds
    # the triangle's unused upper half)
    c = np.diff(start).astype(np.float64)
    work = np.diff(valptr) - c * (c - 1) / 2
    whole = float(work.sum())
    if ns < 2 or parts < 2 or whole == 0.0:
        return None
    total, first, size = _subtree_sums(np.asarray(parent, np.int64), work)
    if np.any(np.arange(ns) - first + 1 != size):  # a subtree that is not one range of supernodes
        return None
    children = [[] for _ in range(ns)]
    for s in range(ns):
        if parent[s] >= 0:
            children[parent[s]].append(s)
    candidates = {s for s in range(ns) if parent[s] < 0}
    best, best_cost = None, whole  # no split: the whole work on one thread
    while True:
        load, owner = _assign(candidates, total, parts)
        top_work = whole - load.sum()
        if top_work > TOP_LIMIT * whole:
            break
        if top_work + load.max() < best_cost:
            best, best_cost = dict(owner), top_work + load.max()
        splittable = [s for s in candidates if children[s]]
        if not splittable:
            break
        s = max(splittable, key=lambda s: total[s])
        candidates.remove(s)
        candidates.update(children[s])
    if best is None:
        return None
    groups = [sorted(s for s, p in best.items() if p == part) for part in range(parts)]
    ranges = np.array([[first[s], s + 1] for g in groups for s in g], dtype=np.int64).reshape(-1, 2)
    rptr = np.r_[0, np.cumsum([len(g) for g in groups])].astype(np.int64)
    inside = np.zeros(ns, bool)
    for lo, hi in ranges:
        inside[lo:hi] = True
    top = np.flatnonzero(~inside).astype(np.int64)
    top_rows = np.concatenate([np.arange(start[s], start[s + 1]) for s in top]).astype(np.int64) if len(top) \
        else np.zeros(0, np.int64)
    slot = np.full(int(start[-1]), -1, np.int64)
    slot[top_rows] = np.arange(len(top_rows))
    part_work = [sum(total[s] for s in g) / whole for g in groups]
    return SolveSplit(ranges, rptr, top, slot, top_rows, np.array(part_work + [1.0 - sum(part_work)]))
