"""numba_internals against the installed numba: what a numba upgrade must keep working.

Each test drives one private API the way kernelrt does, on the CPU (the CUDA ones are
covered by the PTX, simulator and GPU layers), so a rename or a changed signature fails
here by name instead of somewhere inside a launch or a cache load.
"""

from __future__ import annotations

import pickle
import types

import numba
import numpy as np

from kernelrt import numba_internals as ni


def _twice(x):
    return 2.0 * x


def test_an_intrinsics_code_generator_is_found():
    from kernelrt.kernels.sfap.cpu_math import _as_float64  # the @intrinsic exp_neg calls

    # if numba renamed the attribute, the cache key would silently lose the intrinsic
    assert isinstance(ni.intrinsic_generator(_as_float64), types.FunctionType)
    assert ni.intrinsic_generator(_twice) is None


def test_a_cpu_overload_survives_serialisation_into_a_new_dispatcher():
    disp = numba.njit(_twice)
    disp.compile((numba.float64,))
    cres = disp.overloads[(numba.float64,)]
    payload = ni.serialize(ni.cpu_overload_state(cres))

    fresh = numba.njit(_twice)
    ni.add_cpu_overload(fresh, pickle.loads(payload))
    assert list(fresh.overloads) == [(numba.float64,)]
    misses = []
    ni.on_missing_overload(fresh, lambda *a, **k: misses.append(a))  # must not be needed
    assert fresh(3.5) == 7.0 and not misses


def test_a_type_miss_reaches_the_handler():
    disp = numba.njit(_twice)
    disp.compile((numba.float64,))
    seen = []

    def handler(*args, **kws):
        seen.append(args)
        disp.compile((numba.typeof(args[0]),))
        return (numba.typeof(args[0]),)  # the key in disp.overloads, as the backends return

    ni.on_missing_overload(disp, handler)
    assert disp(1.5) == 3.0 and seen == []  # an exact match never asks
    assert disp(np.int64(4)) == 8.0 and len(seen) == 1


def test_a_cuda_type_miss_launches_the_overload_itself():
    # numba-cuda launches what _compile_for_args returns: the _Kernel, whose entry_point
    # attribute exists and is None. (The real hook runs only on a GPU: tests/gpu.)
    kern = types.SimpleNamespace(entry_point=None)
    disp = types.SimpleNamespace(overloads={(numba.float64,): kern})
    ni.on_missing_overload(disp, lambda *args: (numba.float64,))
    assert disp._compile_for_args(1.0) is kern


def test_cuda_arch_names_the_a_variant_from_sm_90():
    assert ni.cuda_arch((8, 6)) == (8, 6, "")
    assert ni.cuda_arch((9, 0)) == (9, 0, "a")
    assert ni.cuda_arch((12, 0, "")) == (12, 0, "a")
