"""The CUDABackend documentation's examples against the simulated CUDABackend (unchanged
but for the ports in tests/examples/README.md)."""

import numpy as np
import pytest

from kernelrt import CudaUnavailableError
from tests.support.doc_examples import run_example


def test_overview():
    assert run_example("doc_overview")["backend"].name == "cuda"


def test_basic_computation(gpu):
    ns = run_example("doc_basic_gpu_computation")
    a, b = gpu.to_host(ns["a_gpu"]), gpu.to_host(ns["b_gpu"])
    np.testing.assert_array_equal(ns["result"], a + b)  # exact: one float32 add


def test_numba_cuda_kernel():
    ns = run_example("doc_cuda_kernel_with_numba")
    np.testing.assert_array_equal(ns["result"], ns["a"] + ns["b"])  # exact: one float32 add each


def test_memory_management():
    ns = run_example("doc_memory_management")
    assert ns["arr"].shape == (min(ns["free"] // 4, 1_000_000),)


def test_multi_gpu_needs_two_devices():
    ns = {}
    with pytest.raises(CudaUnavailableError, match=r"one device, 0 \(got 1\)") as info:
        run_example("doc_multi_gpu", namespace=ns)
    assert isinstance(info.value, RuntimeError)  # the documented contract
    assert ns["backend_0"].device_id == 0


def test_kernel_caching():
    assert run_example("doc_kernel_caching")["kernel"].status == "simulator"
