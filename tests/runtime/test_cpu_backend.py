"""CPUBackend: every member of the Backend contract, and the kernel decorator on the CPU."""

import numpy as np
import pytest
from numba import cuda
from tests.support.kernels import (
    axpy,
    block_sums,
    expected_2d,
    expected_3d,
    gpu_only_scale,
    index_grid_2d,
    index_grid_3d,
    shifted_sqrt,
)

import kernelrt
from kernelrt import (
    BackendMismatchError,
    CPUBackend,
    KernelArgumentError,
    LaunchConfigError,
)


def test_identity_members(cpu):
    assert CPUBackend.check_available() is True
    assert CPUBackend.availability().ok and CPUBackend.availability().code == "ok"
    assert cpu.is_available
    assert cpu.name == "cpu"
    assert cpu.device_id == 0
    assert isinstance(cpu.device_name, str) and cpu.device_name
    assert cpu.compute_capability is None


def test_memory_members(cpu):
    a = cpu.allocate((3, 4), np.float64)
    assert isinstance(a, np.ndarray) and a.shape == (3, 4) and a.dtype == np.float64
    assert cpu.allocate(5).dtype == np.float32  # the contract's default dtype
    z = cpu.zeros((2, 2), np.int32)
    assert z.dtype == np.int32 and not z.any()
    host = np.arange(6.0).reshape(2, 3)[:, ::2]  # non-contiguous input
    dev = cpu.to_device(host)
    assert dev.flags.c_contiguous and np.array_equal(dev, host) and dev is not host  # exact: copies
    back = cpu.to_host(dev)
    assert np.array_equal(back, host) and back is not dev
    free, total = cpu.get_memory_info()
    assert 0 < free <= total
    cpu.synchronize()


def test_streams_and_events(cpu):
    s = cpu.stream()
    start, end = cpu.event(), cpu.event()
    start.record(s)
    cpu.launch_kernel(axpy, 1, 8, np.zeros(8), np.ones(8), np.ones(8), 1.0, stream=s)
    end.record(s)
    s.synchronize()
    end.synchronize()
    assert start.elapsed_time(end) >= 0.0


def test_decorator_1d_matches_numpy(cpu):
    n = 1000
    rng = np.random.default_rng(0)
    x, y = rng.random(n), rng.random(n)
    out = cpu.zeros(n, np.float64)
    cpu.launch_kernel(axpy, (n + 127) // 128, 128, out, x, y, 2.5)
    # exact: numba compiles without fastmath, so LLVM never fuses a * x + y into an FMA (whatever
    # the CPU); both sides round the product and the sum separately
    np.testing.assert_array_equal(out, 2.5 * x + y)


@pytest.mark.parametrize("shape,grid,block", [((5, 7), (1, 2), (8, 4)), ((300, 3), (1, 75), (4, 4)), ((2, 500), (63, 1), (8, 2))])
def test_decorator_2d_matches_numpy(cpu, shape, grid, block):
    # Covers both CPU loop shapes: parallel over rows, and parallel over all threads.
    x = np.random.default_rng(1).random(shape)
    out = cpu.zeros(shape, np.float64)
    cpu.launch_kernel(index_grid_2d, grid, block, out, x)
    np.testing.assert_array_equal(out, expected_2d(x))  # exact: the same ops in the same order


def test_decorator_3d_matches_numpy(cpu):
    shape = (3, 4, 5)
    out = cpu.zeros(shape, np.float64)
    cpu.launch_kernel(index_grid_3d, (1, 1, 1), (5, 4, 3), out)
    np.testing.assert_array_equal(out, expected_3d(shape))


def test_index_space_is_grid_times_block(cpu):
    # Threads beyond the array are guarded by the kernel, as on a GPU.
    out = cpu.zeros(10, np.float64)
    cpu.launch_kernel(axpy, 3, 8, out, np.ones(10), np.ones(10), 1.0)
    np.testing.assert_array_equal(out, np.full(10, 2.0))  # exact here and below: small integers
    out = cpu.zeros(10, np.float64)
    cpu.launch_kernel(axpy, 1, 4, out, np.ones(10), np.ones(10), 1.0)  # only 4 threads
    np.testing.assert_array_equal(out, [2, 2, 2, 2, 0, 0, 0, 0, 0, 0])


def test_compile_kernel_with_signature(cpu):
    ck = cpu.compile_kernel(shifted_sqrt)
    assert ck.status in ("compiled", "disk", "memory")
    assert ck.backend == "cpu" and ck.argtypes is not None
    x = np.arange(16.0)
    out = cpu.zeros(16, np.float64)
    cpu.launch_kernel(ck, 2, 8, out, x)
    # NumPy's default rtol (1e-7): this checks the launch and the global OFFSET, not rounding; the
    # values are in fact equal (sqrt is correctly rounded in numba and NumPy, then one addition)
    np.testing.assert_allclose(out, np.sqrt(x) + 10.0)
    again = cpu.compile_kernel(shifted_sqrt)
    assert again.status == "memory"


def test_compile_kernel_lazy_and_explicit_signature(cpu):
    assert cpu.compile_kernel(axpy).status == "lazy"
    ck = cpu.compile_kernel(axpy, "float64[::1], float64[::1], float64[::1], float64")
    out = cpu.zeros(4, np.float64)
    cpu.launch_kernel(ck, 1, 4, out, np.ones(4), np.ones(4), 3.0)
    np.testing.assert_array_equal(out, np.full(4, 4.0))  # exact: small integers
    with pytest.raises(KernelArgumentError, match="float64"):
        cpu.launch_kernel(ck, 1, 4, out, np.ones(4, np.float32), np.ones(4), 3.0)


def test_cuda_kernel_with_cpu_twin(cpu):
    x = np.arange(100.0)
    out = cpu.zeros(1, np.float64)
    cpu.launch_kernel(block_sums, 2, 64, x, out)
    assert out[0] == x.sum()  # exact: integers < 2**53 sum exactly in any order


def test_get_backend():
    assert kernelrt.get_backend("cpu").name == "cpu"
    with pytest.raises(ValueError, match="'auto', 'cuda' or 'cpu'"):
        kernelrt.get_backend("gpu")


def test_import_touches_no_gpu_and_is_fast():
    import subprocess
    import sys

    code = (
        "import time, sys; t = time.perf_counter(); import kernelrt; dt = time.perf_counter() - t;"
        "print(dt, 'numba' in sys.modules, 'cupy' in sys.modules, 'pynvml' in sys.modules)"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout.split()
    assert float(out[0]) < 0.5
    assert out[1:] == ["False", "False", "False"]


# -- bad input: each a clear error, raised before anything runs ------------------------


@pytest.mark.parametrize(
    "grid,block,match",
    [
        (0, 32, r"grid.x must be >= 1 \(got 0\)"),
        (4, -1, r"block.x must be >= 1 \(got -1\)"),
        (2.0, 32, r"grid must be an int or a tuple"),
        ((1, 2, 3, 4), 32, r"grid must have 1 to 3 dimensions \(got 4"),
        ((1, "2"), 32, r"grid.y must be an int"),
        (4, (), r"block must have 1 to 3 dimensions \(got 0"),
        (True, 32, r"grid must be an int or a tuple"),
    ],
)
def test_bad_launch_configuration(cpu, grid, block, match):
    out = np.zeros(8)
    with pytest.raises(LaunchConfigError, match=match):
        cpu.launch_kernel(axpy, grid, block, out, np.ones(8), np.ones(8), 1.0)
    assert not out.any()


def test_bad_shared_mem(cpu):
    with pytest.raises(LaunchConfigError, match="shared_mem must be >= 0"):
        cpu.launch_kernel(axpy, 1, 8, np.zeros(8), np.ones(8), np.ones(8), 1.0, shared_mem=-4)


def test_wrong_argument_count(cpu):
    with pytest.raises(KernelArgumentError, match=r"takes 4 arguments \(out, x, y, a\) \(got 3\)"):
        cpu.launch_kernel(axpy, 1, 8, np.zeros(8), np.ones(8), np.ones(8))


def test_declared_signature_checks_dtype_shape_and_layout(cpu):
    out = np.zeros(8)
    with pytest.raises(KernelArgumentError, match=r"argument 'x' of 'shifted_sqrt' must be an array of float64 \(got float32\)"):
        cpu.launch_kernel(shifted_sqrt, 1, 8, out, np.ones(8, np.float32))
    with pytest.raises(KernelArgumentError, match=r"must be a 1-D array \(got 2-D, shape \(2, 4\)\)"):
        cpu.launch_kernel(shifted_sqrt, 1, 8, out, np.ones((2, 4)))
    with pytest.raises(KernelArgumentError, match=r"must be C-contiguous"):
        cpu.launch_kernel(shifted_sqrt, 1, 8, out, np.ones(16)[::2])
    with pytest.raises(KernelArgumentError, match=r"must be a 1-D float64 array \(got"):
        cpu.launch_kernel(shifted_sqrt, 1, 8, out, 3.0)
    assert not out.any()


def test_unsupported_argument_type(cpu):
    with pytest.raises(KernelArgumentError, match="type kernels cannot take"):
        cpu.launch_kernel(axpy, 1, 8, np.zeros(8), np.ones(8), np.ones(8), object())


def test_cuda_kernel_without_twin_is_translated(cpu):
    x = np.arange(8.0)
    cpu.launch_kernel(gpu_only_scale, 1, 8, x, 2.0)
    assert x.tolist() == [2.0 * i for i in range(8)]  # exact: doubling
    assert cpu.compile_kernel(gpu_only_scale, "float64[::1], float64").status in ("memory", "disk", "compiled")


def test_plain_function_runs_on_cpu(cpu):
    def plain(x):
        i = cuda.grid(1)
        if i < x.shape[0]:
            x[i] = i

    x = np.zeros(4)
    cpu.launch_kernel(plain, 1, 4, x)
    assert x.tolist() == [0.0, 1.0, 2.0, 3.0]


def test_non_function_refused(cpu):
    with pytest.raises(BackendMismatchError, match=r"launches kernels: .*\(got int ''\)"):
        cpu.launch_kernel(42, 1, 1, np.ones(1))


def test_kernel_not_callable_directly():
    with pytest.raises(BackendMismatchError, match="launch it with"):
        axpy(0, np.zeros(1), np.zeros(1), np.zeros(1), 1.0)


@pytest.mark.parametrize(
    "call,exc,match",
    [
        (lambda b: b.allocate((2, -1)), ValueError, "negative extents"),
        (lambda b: b.allocate("3"), TypeError, "shape must be an int or a tuple of ints"),
        (lambda b: b.allocate(3, object), TypeError, "numeric dtype"),
        (lambda b: b.zeros(3, "not-a-dtype"), TypeError, "must be a numpy dtype"),
    ],
)
def test_bad_allocation(cpu, call, exc, match):
    with pytest.raises(exc, match=match):
        call(cpu)


def test_bad_device_id():
    with pytest.raises(ValueError, match=r"one device, 0 \(got device_id=1\)"):
        CPUBackend(device_id=1)


def test_decorator_rejects_bad_definitions():
    with pytest.raises(TypeError, match="first 2 parameters must be the thread index"):
        kernelrt.kernel(ndim=2)(lambda i: None)
    with pytest.raises(ValueError, match="ndim must be 1, 2 or 3"):
        kernelrt.kernel(ndim=4)(lambda i, j, k, n: None)

    def with_default(i, x=1):
        pass

    with pytest.raises(TypeError, match="may not have a default"):
        kernelrt.kernel(with_default)
    with pytest.raises(ValueError, match="min_cc must be a"):
        kernelrt.kernel(min_cc="6")(lambda i: None)
    with pytest.raises(TypeError, match="CPU twin of .* must take"):
        block_sums.cpu(lambda grid, x, out: None)


def test_kernel_exceptions_are_not_retried(cpu):
    calls = np.zeros(1)

    @kernelrt.kernel
    def fails_once_compiled(i, counter, x):
        if i == 0:
            counter[0] += 1.0
            if x[0] < 0:
                raise ValueError("negative input")

    cpu.launch_kernel(fails_once_compiled, 1, 1, calls, np.ones(1))
    with pytest.raises(ValueError, match="negative input"):
        cpu.launch_kernel(fails_once_compiled, 1, 1, calls, -np.ones(1))
    assert calls[0] == 2.0  # the failing launch ran exactly once


@kernelrt.kernel(signature="int32[::1], int32")
def fill_int32(i, out, v):
    if i < out.shape[0]:
        out[i] = v


def test_declared_integers_are_range_checked_not_wrapped(cpu):
    out = np.zeros(4, np.int32)
    cpu.launch_kernel(fill_int32, 1, 4, out, 7)
    assert (out == 7).all()
    with pytest.raises(KernelArgumentError, match=r"argument 'v' of 'fill_int32' must fit in int32 .* \(got 1099511627776\)"):
        cpu.launch_kernel(cpu.compile_kernel(fill_int32), 1, 4, out, 2**40)
    assert (out == 7).all()


def test_new_argument_types_compile_exactly(cpu):
    # Once an overload exists, another argument type compiles its own (numba's exact-match
    # rule), never reuses the first through a lossy conversion.
    @kernelrt.kernel
    def store(i, out, v):
        if i < out.shape[0]:
            out[i] = v

    out = np.zeros(2)
    cpu.launch_kernel(store, 1, 2, out, 3)  # int64 scalar
    cpu.launch_kernel(store, 1, 2, out, 2.5)  # float64 scalar: a second overload
    assert (out == 2.5).all()  # exact: the value stored as is
    assert len(cpu._dispatchers[store].overloads) == 2
