"""CUDABackend(debug=True) under the simulator: its own kernels, in numba-cuda's debug mode."""

import warnings

import numpy as np
import pytest

import kernelrt
from kernelrt import CUDABackend


@kernelrt.kernel
def _ratio(i, out, x, y):
    if i < out.shape[0]:
        out[i] = x[i] / y[i]


def _launch(backend):
    x, y, out = backend.to_device(np.ones(4)), backend.to_device(np.zeros(4)), backend.zeros(4)
    backend.launch_kernel(_ratio, 1, 4, out, x, y)
    return backend.to_host(out)


def test_debug_backend_runs_its_own_kernels_in_debug_mode(cache_dir):
    fast, debug = CUDABackend(), CUDABackend(debug=True)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)  # numpy's warning for the fast kernel's 1/0
        assert np.all(np.isposinf(_launch(fast)))  # IEEE 754: 1/0 is +inf, exactly
    # The simulator runs a debug=True kernel with numpy's division errors raised.
    with pytest.raises(FloatingPointError, match="divide by zero"):
        _launch(debug)
    assert fast._dispatchers[_ratio] is not debug._dispatchers[_ratio]


def test_debug_from_the_environment(cache_dir, monkeypatch):
    monkeypatch.setenv("KERNELRT_DEBUG_KERNELS", "1")
    assert CUDABackend().debug is True
    assert CUDABackend(debug=False).debug is False  # the argument wins
    with pytest.raises(TypeError, match=r"debug must be True, False or None \(got int: 1\)"):
        CUDABackend(debug=1)
