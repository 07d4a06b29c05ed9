"""Conformance kernels (see conformance_kernels.py): warp-level operations.

``syncwarp``, shuffles (``shfl_sync``, ``shfl_up/down/xor_sync``), votes (``all/any/eq_sync``,
``ballot_sync``), ``match_any/all_sync``, ``activemask``, ``lanemask_lt``, ``laneid`` and
``warpsize``. Numba's simulator implements none of the warp operations ("Warp Operations
are not yet implemented on cudasim"), so those cases are checked against the results the
numba-cuda tests expect on a GPU only.
"""

from __future__ import annotations

from typing import Any

import numpy as np
from numba import cuda
from numba.cuda import int32

from tests.support.conformance_case import Case

# -- cudapy/test_warp_ops.py, cudapy/test_sync.py (cuda.jit(signature)(fn) there) -------------


def useful_syncwarp(ary):
    i = cuda.grid(1)
    if i == 0:
        ary[0] = 42
    cuda.syncwarp(0xFFFFFFFF)
    ary[i] = ary[0]


def use_shfl_sync_idx(ary, idx):
    i = cuda.grid(1)
    val = cuda.shfl_sync(0xFFFFFFFF, i, idx)
    ary[i] = val


def use_shfl_sync_up(ary, delta):
    i = cuda.grid(1)
    val = cuda.shfl_up_sync(0xFFFFFFFF, i, delta)
    ary[i] = val


def use_shfl_sync_down(ary, delta):
    i = cuda.grid(1)
    val = cuda.shfl_down_sync(0xFFFFFFFF, i, delta)
    ary[i] = val


def use_shfl_sync_xor(ary, xor):
    i = cuda.grid(1)
    val = cuda.shfl_xor_sync(0xFFFFFFFF, i, xor)
    ary[i] = val


def use_shfl_sync_with_val(ary, into):
    i = cuda.grid(1)
    val = cuda.shfl_sync(0xFFFFFFFF, into, 0)
    ary[i] = val


def use_vote_sync_all(ary_in, ary_out):
    i = cuda.grid(1)
    pred = cuda.all_sync(0xFFFFFFFF, ary_in[i])
    ary_out[i] = pred


def use_vote_sync_any(ary_in, ary_out):
    i = cuda.grid(1)
    pred = cuda.any_sync(0xFFFFFFFF, ary_in[i])
    ary_out[i] = pred


def use_vote_sync_eq(ary_in, ary_out):
    i = cuda.grid(1)
    pred = cuda.eq_sync(0xFFFFFFFF, ary_in[i])
    ary_out[i] = pred


def use_vote_sync_ballot(ary):
    i = cuda.threadIdx.x
    ballot = cuda.ballot_sync(0xFFFFFFFF, True)
    ary[i] = ballot


def use_match_any_sync(ary_in, ary_out):
    i = cuda.grid(1)
    ballot = cuda.match_any_sync(0xFFFFFFFF, ary_in[i])
    ary_out[i] = ballot


def use_match_all_sync(ary_in, ary_out):
    i = cuda.grid(1)
    ballot, pred = cuda.match_all_sync(0xFFFFFFFF, ary_in[i])
    ary_out[i] = ballot if pred else 0


def use_independent_scheduling(arr):
    i = cuda.threadIdx.x
    if i % 4 == 0:
        ballot = cuda.ballot_sync(0x11111111, True)
    elif i % 4 == 1:
        ballot = cuda.ballot_sync(0x22222222, True)
    elif i % 4 == 2:
        ballot = cuda.ballot_sync(0x44444444, True)
    elif i % 4 == 3:
        ballot = cuda.ballot_sync(0x88888888, True)
    arr[i] = ballot


def test_activemask() -> Any:
    @cuda.jit
    def use_activemask(x):
        i = cuda.grid(1)
        if (i % 2) == 0:
            # Even numbered threads fill in even numbered array entries
            # with binary "...01010101"
            x[i] = cuda.activemask()
        else:
            # Odd numbered threads fill in odd numbered array entries
            # with binary "...10101010"
            x[i] = cuda.activemask()

    return use_activemask


def test_lanemask_lt() -> Any:
    @cuda.jit
    def use_lanemask_lt(x):
        i = cuda.grid(1)
        x[i] = cuda.lanemask_lt()

    return use_lanemask_lt


def useless_syncwarp_with_mask(ary):
    i = cuda.grid(1)
    cuda.syncwarp(0xFFFF)
    ary[i] = i


def coop_syncwarp(res):
    sm = cuda.shared.array(32, int32)
    i = cuda.grid(1)

    sm[i] = i
    cuda.syncwarp()

    if i < 16:
        sm[i] = sm[i] + sm[i + 16]
        cuda.syncwarp(0xFFFF)

    if i < 8:
        sm[i] = sm[i] + sm[i + 8]
        cuda.syncwarp(0xFF)

    if i < 4:
        sm[i] = sm[i] + sm[i + 4]
        cuda.syncwarp(0xF)

    if i < 2:
        sm[i] = sm[i] + sm[i + 2]
        cuda.syncwarp(0x3)

    if i == 0:
        res[0] = sm[0] + sm[1]


# -- cudapy/test_intrinsics.py --------------------------------------------------------------------


def simple_laneid(ary):
    i = cuda.grid(1)
    ary[i] = cuda.laneid


def simple_warpsize(ary):
    ary[0] = cuda.warpsize


# -- launch cases --------------------------------------------------------------------------------


def _out(n: int, *scalars: Any, dtype: Any = np.int32) -> Any:
    return lambda rng: (np.zeros(n, dtype=dtype), *scalars)


def _pred(fill: int, flipped: tuple[int, ...], n: int = 32) -> Any:
    def make(rng: np.random.Generator) -> tuple[Any, ...]:
        ary_in = np.full(n, fill, dtype=np.int32)
        ary_in[list(flipped)] = 1 - fill
        return ary_in, np.zeros(n, dtype=np.int32)

    return make


def _down(ary: np.ndarray, delta: int) -> tuple[Any, ...]:
    i = np.arange(ary.size)
    return (np.where(i % 32 < 32 - delta, i + delta, i),)


_W = "cudapy/test_warp_ops.py::TestCudaWarpOperations."
_NO_WARP = "warp operations are not implemented in the simulator"
_U32 = np.uint32

CASES = [
    Case("syncwarp", _W + "test_useful_syncwarp", cuda.jit(useful_syncwarp), (1,), (32,), _out(32), (0,),
         reference=lambda a: (np.full(32, 42),), sim=_NO_WARP),
    Case("syncwarp_mask", "cudapy/test_sync.py::TestCudaSync.test_useless_syncwarp_with_mask",
         cuda.jit(useless_syncwarp_with_mask), (1,), (10,), _out(10), (0,), reference=lambda a: (np.arange(10),),
         sim=_NO_WARP),
    Case("syncwarp_cooperative", "cudapy/test_sync.py::TestCudaSync.test_coop_syncwarp", cuda.jit(coop_syncwarp),
         (1,), (32,), _out(1), (0,), reference=lambda a: (np.array([496]),), sim=_NO_WARP),
    Case("shfl_sync_idx", _W + "test_shfl_sync_idx", cuda.jit(use_shfl_sync_idx), (1,), (32,),
         _out(32, np.int32(4)), (0,), reference=lambda a, idx: (np.full(32, 4),), sim=_NO_WARP),
    Case("shfl_up_sync", _W + "test_shfl_sync_up", cuda.jit(use_shfl_sync_up), (1,), (32,), _out(32, np.int32(4)),
         (0,), reference=lambda a, d: (np.concatenate([np.arange(4), np.arange(28)]),), sim=_NO_WARP),
    # two warps: each shuffles within itself
    Case("shfl_down_sync", _W + "test_shfl_sync_down (two warps)", cuda.jit(use_shfl_sync_down), (1,), (64,),
         _out(64, np.int32(4)), (0,), reference=_down, sim=_NO_WARP),
    Case("shfl_xor_sync", _W + "test_shfl_sync_xor (two warps)", cuda.jit(use_shfl_sync_xor), (1,), (64,),
         _out(64, np.int32(16)), (0,), reference=lambda a, x: (np.arange(64) ^ 16,), sim=_NO_WARP),
    Case("shfl_sync_f8", _W + "test_shfl_sync_types (float64)", cuda.jit(use_shfl_sync_with_val), (1,), (32,),
         _out(32, np.float64(np.pi), dtype=np.float64), (0,), reference=lambda a, v: (np.full(32, np.pi),),
         sim=_NO_WARP),
    Case("vote_all_sync", _W + "test_vote_sync_all", cuda.jit(use_vote_sync_all), (1,), (32,), _pred(1, (31,)),
         (1,), reference=lambda a, b: (np.zeros(32),), sim=_NO_WARP),
    Case("vote_any_sync", _W + "test_vote_sync_any", cuda.jit(use_vote_sync_any), (1,), (32,), _pred(0, (2, 5)),
         (1,), reference=lambda a, b: (np.ones(32),), sim=_NO_WARP),
    Case("vote_eq_sync", _W + "test_vote_sync_eq", cuda.jit(use_vote_sync_eq), (1,), (32,), _pred(0, (1,)),
         (1,), reference=lambda a, b: (np.zeros(32),), sim=_NO_WARP),
    Case("ballot_sync", _W + "test_vote_sync_ballot", cuda.jit(use_vote_sync_ballot), (1,), (32,),
         _out(32, dtype=_U32), (0,), reference=lambda a: (np.full(32, 0xFFFFFFFF, _U32),), sim=_NO_WARP),
    Case("match_any_sync", _W + "test_match_any_sync", cuda.jit(use_match_any_sync), (1,), (10,),
         lambda r: (np.arange(10, dtype=np.int32) % 2, np.zeros(10, dtype=np.int32)), (1,),
         reference=lambda a, b: (np.tile((0b0101010101, 0b1010101010), 5),), sim=_NO_WARP),
    Case("match_all_sync", _W + "test_match_all_sync", cuda.jit(use_match_all_sync), (1,), (10,),
         _pred(0, (), 10), (1,), reference=lambda a, b: (np.full(10, 0b1111111111),), sim=_NO_WARP),
    Case("ballot_independent_scheduling", _W + "test_independent_scheduling",
         cuda.jit(use_independent_scheduling), (1,), (32,), _out(32, dtype=_U32), (0,),
         reference=lambda a: (np.tile(np.array((0x11111111, 0x22222222, 0x44444444, 0x88888888), _U32), 8),),
         sim=_NO_WARP),
    Case("activemask", _W + "test_activemask", test_activemask(), (1,), (32,), _out(32, dtype=_U32), (0,),
         reference=lambda a: (np.tile(np.array((0x55555555, 0xAAAAAAAA), _U32), 16),), sim=_NO_WARP),
    Case("lanemask_lt", _W + "test_lanemask_lt", test_lanemask_lt(), (1,), (32,), _out(32, dtype=_U32), (0,),
         reference=lambda a: (np.asarray([(2**i) - 1 for i in range(32)], dtype=_U32),), sim=_NO_WARP),
    Case("laneid", "cudapy/test_intrinsics.py::TestCudaIntrinsic.test_simple_laneid", cuda.jit(simple_laneid),
         (1,), (64,), _out(64), (0,), reference=lambda a: (np.tile(np.arange(32), 2),)),
    Case("warpsize", "cudapy/test_intrinsics.py::TestCudaIntrinsic.test_simple_warpsize", cuda.jit(simple_warpsize),
         (1,), (1,), _out(1), (0,), reference=lambda a: (np.array([32]),)),
]
