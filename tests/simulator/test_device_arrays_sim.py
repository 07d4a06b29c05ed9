"""The arrays CUDABackend hands out under the CUDA simulator: numba's, never CuPy's.

The simulator's device arrays live in host memory, so ``arrays="auto"`` picks numba arrays
there and ``arrays="cupy"`` is refused; on a GPU see tests/gpu/test_foreign_arrays_gpu.py.
"""

import numpy as np
import pytest

from kernelrt import CUDABackend
from tests.support.kernels import axpy


def test_auto_gives_the_simulators_numba_arrays(gpu):
    assert gpu.arrays == "numba"
    x = np.arange(8.0)
    arrays = (gpu.allocate(8, np.float64), gpu.zeros(8, np.float64), gpu.to_device(x))
    assert all(getattr(type(a), "__cuda_ndarray__", False) is True for a in arrays)
    out, _, xd = arrays
    gpu.launch_kernel(axpy, 1, 8, out, xd, xd, 2.0)
    np.testing.assert_array_equal(gpu.to_host(out), 3.0 * x)  # exact: small integers, no FMA in the simulator


def test_cupy_arrays_need_a_real_gpu(cache_dir):
    with pytest.raises(ValueError, match=r"arrays='cupy' needs a real GPU: the CUDA simulator .*\(got arrays='cupy'\)"):
        CUDABackend(0, arrays="cupy")
    assert CUDABackend(0, arrays="numba").arrays == "numba"
    with pytest.raises(ValueError, match=r"arrays must be 'auto', 'cupy' or 'numba' \(got 'torch'\)"):
        CUDABackend(0, arrays="torch")
