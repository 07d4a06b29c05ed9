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


def test_the_numba_names_prepared_cuda_launches_use_exist():
    """No GPU here: pin the private numba-cuda names the CUDA prepared launch relies on
    (numba_internals.prepared_overload / core_stream / launch_overload)."""
    pytest.importorskip("numba_cuda", reason="numba-cuda is not installed: these are its private names")
    import inspect

    from numba.cuda import dispatcher
    from numba.cuda.cudadrv import driver

    params = list(inspect.signature(dispatcher._Kernel.launch).parameters)
    assert params == ["self", "args", "griddim", "blockdim", "stream", "sharedmem"]
    assert callable(driver._to_core_stream)
    src = inspect.getsource(dispatcher.CUDADispatcher.call)  # the dispatcher's own path: choose, then launch
    assert "kernel.launch(args, griddim, blockdim, stream, sharedmem)" in src
    assert "_to_core_stream(stream)" in inspect.getsource(dispatcher._LaunchConfiguration.__init__)


def test_the_cuda_binder_resolves_once_and_launches_the_overload(monkeypatch):
    """CUDABackend's prepared path without a GPU: stand-ins for the backend, the dispatcher and
    numba's overload record what the binder does (scalar arguments only: no device memory)."""
    pytest.importorskip("numba_cuda", reason="numba-cuda is not installed: the binder types arguments with it")
    import contextlib

    import kernelrt
    from kernelrt import cuda_prepared
    from kernelrt.launch import LaunchConfig

    @kernelrt.kernel
    def two_scalars(i, a, b):
        pass

    launched, ensured = [], []

    class Overload:
        def launch(self, args, grid, block, stream, shared_mem):
            launched.append((args, grid, block, stream, shared_mem))

    class Dispatcher:
        overloads = {}

    class Backend:
        is_simulator, device_id, arrays = False, 0, "numba"
        _first_foreign = kernelrt.CUDABackend._first_foreign  # the real argument checks

        def activated(self):
            return contextlib.nullcontext()

        def _ensure(self, k, argtypes):
            ensured.append(argtypes)
            Dispatcher.overloads[tuple(argtypes)] = Overload()

    monkeypatch.setattr(cuda_prepared, "core_stream", lambda s: ("core", s))
    cfg = LaunchConfig.of(2, 32)
    binder = cuda_prepared.CudaBinder(Backend(), two_scalars, Dispatcher(), cfg, None, None)
    p = PreparedLaunch(two_scalars, "two_scalars", (2.0, 3), None, binder)
    p()
    p(4.0, 5)
    assert len(ensured) == 1  # the overload is chosen once
    assert launched == [((2.0, 3), (2, 1, 1), (32, 1, 1), ("core", 0), 0), ((4.0, 5), (2, 1, 1), (32, 1, 1), ("core", 0), 0)]
    seq = cuda_prepared.GraphSequence(Backend(), [p])
    seq.run(3)
    assert seq.mode == "loop" and "CuPy" in seq.fallback and len(launched) == 5
