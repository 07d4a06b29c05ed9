"""The CUDABackend documentation's examples, on a machine without a GPU.

Ported only where the page cannot run as printed (tests/examples/README.md). Here they
run on the CPU fallback (``from kernelrt import CPUBackend as CUDABackend``); the simulator
layer runs them against the simulated CUDABackend, the GPU layer on a real device.
"""

import numpy as np
import pytest

import kernelrt
from tests.support.doc_examples import run_example


@pytest.fixture(autouse=True)
def _own_cache(cache_dir):
    """Every example compiles into this test's cache directory (KERNELRT_CACHE_DIR)."""


def test_overview_guard_without_a_gpu():
    ns = run_example("doc_overview")  # the real CUDABackend: the guard skips the backend
    assert kernelrt.CUDABackend.check_available() is False and "backend" not in ns
    ns = run_example("doc_overview", fallback=True)
    assert ns["backend"].name == "cpu"


def test_cuda_backend_raises_runtime_error_here():
    with pytest.raises(RuntimeError, match="no NVIDIA driver|no CUDA|driver"):
        kernelrt.CUDABackend()


def test_basic_computation():
    ns = run_example("doc_basic_gpu_computation", fallback=True)
    assert type(ns["result"]) is np.ndarray and ns["result"].dtype == np.float32
    np.testing.assert_array_equal(ns["result"], ns["a_gpu"] + ns["b_gpu"])  # exact: one float32 add


def test_numba_cuda_kernel_runs_on_the_cpu():
    ns = run_example("doc_cuda_kernel_with_numba", fallback=True)
    np.testing.assert_array_equal(ns["result"], ns["a"] + ns["b"])  # exact: one float32 add each


def test_memory_management():
    ns = run_example("doc_memory_management", fallback=True)
    assert ns["free"] <= ns["total"]
    assert ns["arr"].shape == (min(ns["free"] // 4, 1_000_000),) and ns["arr"].dtype == np.float32


def test_multi_gpu_needs_two_devices():
    ns = {}
    with pytest.raises(ValueError, match=r"CPUBackend has one device, 0 \(got device_id=1\)"):
        run_example("doc_multi_gpu", fallback=True, namespace=ns)
    assert ns["backend_0"].device_id == 0  # device 0 was made; the error is about device 1


def test_kernel_caching():
    ns = run_example("doc_kernel_caching", fallback=True)
    assert ns["kernel"].status == "memory"  # the second compile_kernel found the first's code
    assert [str(t) for t in ns["kernel"].argtypes] == ["float32"]  # np.float32 in the signature
