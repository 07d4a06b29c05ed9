"""Prepared launches and launch sequences on the simulated CUDABackend; heat steps and the
Chebyshev filter through them equal the per-step launches they replace, bit for bit."""

import numpy as np
import pytest
from tests.support.kernels import axpy
from tests.support.step_loops import filter_per_step, heat_per_step, scaled_operator, small_mesh

from kernelrt import BackendMismatchError, KernelArgumentError, LaunchConfigError
from kernelrt.kernels.laplacian.spmv import LaplacianOperator


def test_prepare_rebind_and_errors(gpu):
    rng = np.random.default_rng(0)
    x, y = rng.random(300), rng.random(300)
    out, dx, dy = gpu.zeros(300, np.float64), gpu.to_device(x), gpu.to_device(y)
    p = gpu.prepare(axpy, 3, 128, out, dx, dy, 2.0)
    np.testing.assert_array_equal(gpu.to_host(out), 0.0)  # prepare launches nothing
    p()
    np.testing.assert_array_equal(gpu.to_host(out), 2.0 * x + y)  # exact: the simulator computes as NumPy
    out2 = gpu.zeros(300, np.float64)
    p(out2, dy, dx, 3.0)
    np.testing.assert_array_equal(gpu.to_host(out2), 3.0 * y + x)
    with pytest.raises(KernelArgumentError, match=r"argument 1 .*\(got ndarray"):
        p(out, x, dy, 2.0)  # a host array where a device array was prepared
    with pytest.raises(KernelArgumentError, match=r"argument 1 .*float64.*\(got .*float32"):
        p(out, gpu.to_device(x.astype(np.float32)), dy, 2.0)
    with pytest.raises(LaunchConfigError):
        gpu.prepare(axpy, 3, 2048, out, dx, dy, 2.0)
    with pytest.raises(BackendMismatchError, match="host numpy"):  # as launch_kernel
        gpu.prepare(axpy, 3, 128, out, x, dy, 2.0)


def test_prepare_on_a_stream(gpu):
    x = np.arange(256.0)
    out, dx = gpu.zeros(256, np.float64), gpu.to_device(x)
    s = gpu.stream()
    gpu.prepare(axpy, 2, 128, out, dx, dx, 1.0, stream=s)()
    s.synchronize()
    np.testing.assert_array_equal(gpu.to_host(out), 2.0 * x)


def test_sequence_falls_back_to_a_loop(gpu):
    x = np.arange(256.0)
    a, dx = gpu.zeros(256, np.float64), gpu.to_device(x)
    seq = gpu.sequence([gpu.prepare(axpy, 2, 128, a, a, dx, 1.0)])
    seq.run(4)
    assert seq.mode == "loop" and "simulator" in seq.fallback
    np.testing.assert_array_equal(gpu.to_host(a), 4.0 * x)  # exact: small integers


@pytest.mark.parametrize("n_steps", [1, 4, 5])
@pytest.mark.parametrize("k", [None, 2])
def test_heat_steps_equal_the_per_step_launches(gpu, n_steps, k):
    L, m = small_mesh()
    op = LaplacianOperator(L, m, backend=gpu)
    u0 = np.random.default_rng(1).random(L.shape[0] if k is None else (L.shape[0], k))
    np.testing.assert_array_equal(op.heat_steps(u0, 1e-3, n_steps), heat_per_step(op, u0, 1e-3, n_steps))  # bitwise


@pytest.mark.parametrize("degree", [1, 4])
def test_chebyshev_filter_equals_the_per_step_launches(gpu, degree):
    L, m = small_mesh()
    blk = scaled_operator(L, m, gpu)
    y = np.random.default_rng(2).standard_normal((L.shape[0], 3))
    np.testing.assert_array_equal(blk.filter(y, degree, 0.5, 12.0), filter_per_step(blk, y, degree, 0.5, 12.0))
