"""Warp and block collectives for kernels the CPU backend runs in blocks (cuda_fission.py).

After the split that a collective makes, every thread of the block has stored its operand
(``vals[t]``, ``t`` the thread's linear index in the block, x fastest as in CUDA); these
functions read those stores with numba-cuda's semantics:

* shuffles (``shfl_sync``, ``shfl_up_sync``, ``shfl_down_sync``, ``shfl_xor_sync``, width
  32): the value of the source lane of the thread's warp; a source outside the warp (or
  past a partial last warp) gives the thread its own value, as the hardware does;
* votes (``all_sync``, ``any_sync``, ``eq_sync``, ``ballot_sync``) and ``match_any_sync``,
  ``match_all_sync`` over the lanes of the warp named in the mask that exist and have not
  returned;
* ``syncthreads_count``, ``syncthreads_and``, ``syncthreads_or`` over the block's threads
  that have not returned (int32, as numba-cuda types them);
* ``activemask`` (the warp's lanes that reached the call: their guards held, they have not
  returned) and ``lanemask_lt``.

A lane that skipped the collective's ``if`` (a thread-dependent one) still counts if the
mask names it, with the operand it stored last: a mask that names inactive lanes is
undefined on a GPU too.
"""

from __future__ import annotations

import numpy as np
from numba import njit

__all__ = ["HELPERS"]

_WARP = 32


@njit(inline="always")
def _lanes(tid, nt, done, mask):
    """The warp's first thread and the participating lanes' bits."""
    base = tid - tid % _WARP
    bits = 0
    for lane in range(min(_WARP, nt - base)):
        if (mask >> lane) & 1 and not done[base + lane]:
            bits |= 1 << lane
    return base, bits


@njit
def _shfl(vals, tid, nt, lane):
    base = tid - tid % _WARP
    if lane < 0 or lane >= _WARP or base + lane >= nt:
        return vals[tid]
    return vals[base + lane]


@njit
def shfl_idx(vals, tid, nt, done, mask, src):
    return _shfl(vals, tid, nt, src & (_WARP - 1))


@njit
def shfl_up(vals, tid, nt, done, mask, delta):
    return _shfl(vals, tid, nt, tid % _WARP - delta)


@njit
def shfl_down(vals, tid, nt, done, mask, delta):
    return _shfl(vals, tid, nt, tid % _WARP + delta)


@njit
def shfl_xor(vals, tid, nt, done, mask, lane_mask):
    return _shfl(vals, tid, nt, (tid % _WARP) ^ lane_mask)


@njit
def vote_all(vals, tid, nt, done, mask):
    base, bits = _lanes(tid, nt, done, mask)
    for lane in range(_WARP):
        if (bits >> lane) & 1 and not vals[base + lane]:
            return False
    return True


@njit
def vote_any(vals, tid, nt, done, mask):
    base, bits = _lanes(tid, nt, done, mask)
    for lane in range(_WARP):
        if (bits >> lane) & 1 and vals[base + lane]:
            return True
    return False


@njit
def vote_eq(vals, tid, nt, done, mask):
    return vote_all(vals, tid, nt, done, mask) or not vote_any(vals, tid, nt, done, mask)


@njit(inline="always")
def _true_lanes(vals, tid, nt, done, mask):
    """The bits of the participating lanes whose operand is true."""
    base, bits = _lanes(tid, nt, done, mask)
    out = 0
    for lane in range(_WARP):
        if (bits >> lane) & 1 and vals[base + lane]:
            out |= 1 << lane
    return out


@njit
def ballot(vals, tid, nt, done, mask):
    return np.int32(np.uint32(_true_lanes(vals, tid, nt, done, mask)))


@njit
def match_any(vals, tid, nt, done, mask):
    base, bits = _lanes(tid, nt, done, mask)
    out = 0
    for lane in range(_WARP):
        if (bits >> lane) & 1 and vals[base + lane] == vals[tid]:
            out |= 1 << lane
    return np.int32(np.uint32(out))


@njit
def match_all(vals, tid, nt, done, mask):
    base, bits = _lanes(tid, nt, done, mask)
    for lane in range(_WARP):
        if (bits >> lane) & 1 and vals[base + lane] != vals[tid]:
            return np.int32(0), False
    return np.int32(np.uint32(bits)), True


@njit
def active(vals, tid, nt, done, mask):
    """activemask: the warp's lanes that reached this point (their guards held)."""
    return np.uint32(_true_lanes(vals, tid, nt, done, mask))


@njit(inline="always")
def is_active():
    return True


@njit
def block_count(vals, done):
    n = 0
    for t in range(vals.shape[0]):
        if not done[t] and vals[t]:
            n += 1
    return np.int32(n)


@njit
def block_and(vals, done):
    for t in range(vals.shape[0]):
        if not done[t] and not vals[t]:
            return np.int32(0)
    return np.int32(1)


@njit
def block_or(vals, done):
    for t in range(vals.shape[0]):
        if not done[t] and vals[t]:
            return np.int32(1)
    return np.int32(0)


@njit(inline="always")
def lanemask_lt(lane):
    return np.uint32((1 << lane) - 1)


@njit(inline="always")
def fence():
    return None


@njit(inline="always")
def nanosleep(ns):
    return None


# marker names of cuda_fission.py -> implementation
HELPERS = {
    "_kr_coll_count": block_count, "_kr_coll_and": block_and, "_kr_coll_or": block_or,
    "_kr_coll_shfl_idx": shfl_idx, "_kr_coll_shfl_up": shfl_up, "_kr_coll_shfl_down": shfl_down,
    "_kr_coll_shfl_xor": shfl_xor, "_kr_coll_all": vote_all, "_kr_coll_any": vote_any,
    "_kr_coll_eq": vote_eq, "_kr_coll_ballot": ballot, "_kr_coll_match_any": match_any,
    "_kr_coll_match_all": match_all, "_kr_coll_active": active, "_kr_active": is_active, "_kr_lanemask_lt": lanemask_lt,
    "_kr_fence": fence, "_kr_nanosleep": nanosleep,
}
