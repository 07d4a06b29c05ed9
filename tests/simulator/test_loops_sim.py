"""Cooperative heat steps and Chebyshev filter (kernels/laplacian/loops.py) as CUDA kernels, simulated.

The simulator runs a grid barrier as a block barrier, so the cooperative grids are one block
here and the grid-stride loops cover every row; the per-step paths launch the same
expression per element, so the results are the same bits.
"""

from __future__ import annotations

import numpy as np
import pytest

from kernelrt.kernels import laplacian as lap
from kernelrt.kernels.laplacian import loops
from kernelrt.kernels.laplacian.chebyshev import _Block
from kernelrt.kernels.laplacian.reference import reference_laplacian
from kernelrt.kernels.laplacian.spmv import LaplacianOperator

A, B = 1.0, 12.0  # a damped interval inside icosphere(1)'s spectrum


@pytest.fixture(scope="module")
def mesh():
    return reference_laplacian(*lap.icosphere(1))  # NumPy: spares compiling the assembly


def test_heat_steps_equal_one_launch_per_step(gpu, mesh):
    op = LaplacianOperator(*mesh, backend=gpu)
    assert loops.cooperative_blocks(gpu) == 1
    rng = np.random.default_rng(0)
    for shape in [(op.shape[0],), (op.shape[0], 3)]:
        u = rng.standard_normal(shape)
        for n_steps in (0, 1, 2, 5):
            got = loops.heat_steps_cooperative(op, u, 1e-2, n_steps)
            assert isinstance(got, np.ndarray) and got.shape == u.shape  # a host u gives a host result
            np.testing.assert_array_equal(got, op.heat_steps(u, 1e-2, n_steps))
    u_dev = gpu.to_device(u)  # a device u: a device result, u_dev only read
    got = loops.heat_steps_cooperative(op, u_dev, 1e-2, 5)
    assert gpu.is_device_array(got)
    np.testing.assert_array_equal(gpu.to_host(got), op.heat_steps(u, 1e-2, 5))
    np.testing.assert_array_equal(gpu.to_host(u_dev), u)


def test_chebyshev_filter_equals_one_launch_per_degree(gpu, mesh):
    op = LaplacianOperator(*mesh, backend=gpu)
    blk = _Block(op, None)
    x = np.random.default_rng(1).standard_normal((op.shape[0], 3))
    x_dev = gpu.to_device(x)
    for degree in (1, 2, 5):  # 5 runs every branch of the 3-buffer rotation
        ref = blk.filter(x, degree, A, B)
        np.testing.assert_array_equal(loops.chebyshev_filter_cooperative(blk, x, degree, A, B), ref)
        got = loops.chebyshev_filter_cooperative(op, x_dev, degree, A, B)
        np.testing.assert_array_equal(gpu.to_host(got), ref)
    np.testing.assert_array_equal(gpu.to_host(x_dev), x)  # the input block is never written
