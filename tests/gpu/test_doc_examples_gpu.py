"""The CUDABackend documentation's examples on a real GPU: CuPy arrays when CuPy is
installed (the cuda12/cuda13 extras), the numba.cuda kernel launched on them."""

import numpy as np
import pytest

from kernelrt import CUDABackend
from tests.support.doc_examples import run_example


def test_overview(cache_dir):
    assert run_example("doc_overview")["backend"].name == "cuda"


def test_basic_computation_returns_cupy_arrays(cache_dir):
    cp = pytest.importorskip("cupy")
    ns = run_example("doc_basic_gpu_computation")
    assert isinstance(ns["a_gpu"], cp.ndarray) and isinstance(ns["c_gpu"], cp.ndarray)
    np.testing.assert_array_equal(ns["result"], cp.asnumpy(ns["a_gpu"]) + cp.asnumpy(ns["b_gpu"]))  # exact: one float32 add


def test_numba_cuda_kernel(cache_dir):
    ns = run_example("doc_cuda_kernel_with_numba")
    np.testing.assert_array_equal(ns["result"], ns["a"] + ns["b"])  # exact: one float32 add each


def test_memory_management(cache_dir):
    ns = run_example("doc_memory_management")
    assert 0 < ns["free"] <= ns["total"] and ns["arr"].shape == (1_000_000,)


def test_multi_gpu(cache_dir):
    from kernelrt.discovery import probe

    if len(probe().devices) < 2:
        pytest.skip("needs two GPUs")
    ns = run_example("doc_multi_gpu")
    assert ns["backend_1"].device_id == 1


def test_kernel_caching(cache_dir):
    ns = run_example("doc_kernel_caching")
    assert ns["kernel"].status == "memory"
    again = CUDABackend(enable_caching=True).compile_kernel(ns["my_func"], (np.float32,))
    assert again.status == "memory"  # the same function: its compiled code is reused
