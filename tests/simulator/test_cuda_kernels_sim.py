"""Plain numba.cuda kernels: CPUBackend's translation against Numba's CUDA simulator.

The same kernels and launch cases as tests/runtime/test_cuda_kernels_on_cpu.py, run by
the simulator (``kernel[grid, block](...)`` with host arrays, thread by thread in Python)
and by the CPU backend on the same inputs; the outputs must agree.
"""

import math

import numpy as np
import pytest

import kernelrt
from tests.support import cuda_kernels as ck


@pytest.mark.parametrize("case", ck.CASES, ids=lambda c: c.name)
def test_cpu_backend_matches_the_simulator(case, cache_dir):
    simulated = ck.arguments(case, seed=3)
    on_cpu = ck.arguments(case, seed=3)
    case.kernel[case.grid, case.block](*simulated)
    kernelrt.CPUBackend().launch_kernel(case.kernel, case.grid, case.block, *on_cpu)
    for index in case.outputs:
        if case.name == "math_cmath":
            # the simulator computes cmath/math in Python (float64 libm), numba's CPU code
            # calls libm through LLVM: equal up to a few ulp of cos, sin and exp
            np.testing.assert_allclose(on_cpu[index], simulated[index], rtol=4 * 2.0**-52)
        else:
            # exact: integer work, integer-valued float sums and the same + and * in the
            # same order (the simulator runs numpy scalar arithmetic; numba contracts no FMA)
            np.testing.assert_array_equal(on_cpu[index], simulated[index], err_msg=f"argument {index}")


def test_the_simulated_cuda_backend_runs_the_same_kernel(gpu):
    case = next(c for c in ck.CASES if c.name == "atomic_add_histogram")
    values, hist = ck.arguments(case)
    d_hist = gpu.to_device(hist)
    gpu.launch_kernel(case.kernel, case.grid, case.block, gpu.to_device(values), d_hist)
    np.testing.assert_array_equal(gpu.to_host(d_hist), np.bincount(values, minlength=hist.size))  # exact: counts


def test_float_rule_cases_agree(cache_dir):
    """The simulator's Python max() and the GPU's rules agree on ordered values."""
    case = next(c for c in ck.CASES if c.name == "atomic_max_min_float")
    args = ck.arguments(case, seed=11)
    case.kernel[case.grid, case.block](*args)
    assert all(math.isfinite(v) for v in args[2])  # every bin received a value


def test_numba_style_launch_on_the_simulated_cuda_backend(gpu):
    a, b, c = (gpu.to_device(x) for x in ck.arguments(ck.CASES[0]))
    k = gpu.compile_kernel(ck.vector_add, "float32[::1], float32[::1], float32[::1]")
    k[4, 256](a, b, c)
    k[(4,), (256,), 0, 0](a, b, c)
    np.testing.assert_array_equal(gpu.to_host(c), gpu.to_host(a) + gpu.to_host(b))  # exact: one float32 add
    with pytest.raises(kernelrt.LaunchConfigError, match="max_threads_per_block"):
        k[1, 2048](a, b, c)
