"""Prepared launches and launch sequences on the CPU backend; heat steps and the Chebyshev filter
through them equal the per-step launches they replace, bit for bit."""

import numpy as np
import pytest
from tests.support.kernels import axpy
from tests.support.step_loops import filter_per_step, heat_per_step, scaled_operator, small_mesh

from kernelrt import CPUBackend, KernelArgumentError, LaunchConfigError, LaunchSequence, PreparedLaunch
from kernelrt.kernels.laplacian.spmv import LaplacianOperator


@pytest.fixture
def cpu(cache_dir):
    return CPUBackend()


def _arrays(n=300):
    rng = np.random.default_rng(0)
    return np.zeros(n), rng.random(n), rng.random(n)


def test_prepare_launches_and_rebinds(cpu):
    out, x, y = _arrays()
    p = cpu.prepare(axpy, 3, 128, out, x, y, 2.0)
    assert isinstance(p, PreparedLaunch)
    np.testing.assert_array_equal(out, 0.0)  # prepare launches nothing
    p()
    np.testing.assert_array_equal(out, 2.0 * x + y)  # exact: the same expression as the kernel (no FMA on the CPU twin)
    out2 = np.zeros_like(out)
    p(out2, y, x, 3.0)  # buffer rotation and a per-step scalar
    np.testing.assert_array_equal(out2, 3.0 * y + x)
    p()  # stays bound to the last arguments
    assert p.args[0] is out2


def test_rebinding_other_kinds_is_refused(cpu):
    out, x, y = _arrays()
    p = cpu.prepare(axpy, 3, 128, out, x, y, 2.0)
    with pytest.raises(KernelArgumentError, match=r"argument 1 .*float64 1-d.*\(got ndarray float32"):
        p(out, x.astype(np.float32), y, 2.0)
    with pytest.raises(KernelArgumentError, match=r"argument 3 .*float.*\(got int\)"):
        p(out, x, y, 2)
    with pytest.raises(KernelArgumentError, match=r"takes 4 arguments \(got 3\)"):
        p(out, x, y)
    with pytest.raises(KernelArgumentError, match="layout"):
        p(out, x[::2].repeat(2)[::-1], y, 2.0)  # not C-contiguous
    ro = x.copy()
    ro.flags.writeable = False
    with pytest.raises(KernelArgumentError, match="read-only"):
        p(out, ro, y, 2.0)
    p()  # a refused re-bind leaves the last good one
    np.testing.assert_array_equal(out, 2.0 * x + y)


def test_prepare_checks_like_launch_kernel(cpu):
    out, x, y = _arrays()
    with pytest.raises(LaunchConfigError):
        cpu.prepare(axpy, 3, 2048, out, x, y, 2.0)
    with pytest.raises(KernelArgumentError, match="takes 4 arguments"):
        cpu.prepare(axpy, 3, 128, out, x, y)


def test_sequence_runs_in_order(cpu):
    out, x, y = _arrays()
    a, b = np.zeros_like(out), np.zeros_like(out)
    seq = cpu.sequence([cpu.prepare(axpy, 3, 128, a, a, x, 1.0), cpu.prepare(axpy, 3, 128, b, a, y, 1.0)])
    assert isinstance(seq, LaunchSequence) and seq.mode == "loop"
    seq.run(3)
    ra, rb = np.zeros_like(a), np.zeros_like(b)
    for _ in range(3):
        ra = ra + x
        rb = ra + y
    np.testing.assert_array_equal(a, ra)  # exact: the same additions in the same order
    np.testing.assert_array_equal(b, rb)
    seq.run(0)
    with pytest.raises(ValueError, match="repeats must be an int >= 0"):
        seq.run(-1)
    with pytest.raises(TypeError, match="prepared launches"):
        cpu.sequence([axpy])


@pytest.mark.parametrize("n_steps", [1, 2, 5, 6])
@pytest.mark.parametrize("k", [None, 3])
def test_heat_steps_equal_the_per_step_launches(cpu, n_steps, k):
    L, m = small_mesh()
    op = LaplacianOperator(L, m, backend=cpu)
    u0 = np.random.default_rng(1).random(L.shape[0] if k is None else (L.shape[0], k))
    got = op.heat_steps(u0, 1e-3, n_steps)
    np.testing.assert_array_equal(got, heat_per_step(op, u0, 1e-3, n_steps))  # bitwise: same launches, same order
    assert not np.shares_memory(got, u0)


@pytest.mark.parametrize("degree", [1, 2, 3, 7])
def test_chebyshev_filter_equals_the_per_step_launches(cpu, degree):
    L, m = small_mesh()
    blk = scaled_operator(L, m, cpu)
    y = np.random.default_rng(2).standard_normal((L.shape[0], 5))
    got = blk.filter(y, degree, 0.5, 12.0)
    np.testing.assert_array_equal(got, filter_per_step(blk, y, degree, 0.5, 12.0))  # bitwise
    ro = y.copy()
    ro.flags.writeable = False  # the caller's block may be read-only: prepared anew, same bits
    np.testing.assert_array_equal(blk.filter(ro, degree, 0.5, 12.0), got)
