"""Cooperative heat steps and Chebyshev filter (kernels/laplacian/loops.py) on the CPU backend.

Each must give the launch-per-step path's bits: the CPU twins compute every element with the
per-step twins' expression, in the stored order, over the same inputs.
"""

import numpy as np
import pytest

from kernelrt.kernels import laplacian as lap
from kernelrt.kernels.laplacian import loops
from kernelrt.kernels.laplacian.chebyshev import _Block
from kernelrt.kernels.laplacian.spmv import LaplacianOperator

A, B = 2.0, 50.0  # a damped interval inside icosphere(3)'s spectrum


@pytest.fixture(scope="module")
def mesh():
    return lap.cotan_laplacian(*lap.icosphere(3), backend="cpu")


@pytest.fixture(scope="module")
def op(mesh):
    return LaplacianOperator(*mesh, backend="cpu")


@pytest.mark.parametrize("k", [None, 3])
@pytest.mark.parametrize("n_steps", [0, 1, 2, 5])
def test_heat_steps_equal_one_launch_per_step(op, k, n_steps):
    u = np.random.default_rng(n_steps).standard_normal(op.shape[0] if k is None else (op.shape[0], k))
    keep = u.copy()
    got = loops.heat_steps_cooperative(op, u, 1e-4, n_steps)
    np.testing.assert_array_equal(got, op.heat_steps(u, 1e-4, n_steps))
    np.testing.assert_array_equal(u, keep)  # the caller's array is only read
    assert got is not u and got.shape == u.shape


@pytest.mark.parametrize("degree", [1, 2, 5])  # 5 runs every branch of the 3-buffer rotation
def test_chebyshev_filter_equals_one_launch_per_degree(op, degree):
    blk = _Block(op, None)
    x = np.random.default_rng(degree).standard_normal((op.shape[0], 4))
    keep = x.copy()
    ref = blk.filter(x, degree, A, B)
    np.testing.assert_array_equal(loops.chebyshev_filter_cooperative(blk, x, degree, A, B), ref)
    np.testing.assert_array_equal(loops.chebyshev_filter_cooperative(op, x, degree, A, B), ref)
    np.testing.assert_array_equal(x, keep)
    # a vector is a block of one column
    vec = loops.chebyshev_filter_cooperative(op, x[:, 0], degree, A, B)
    assert vec.shape == (op.shape[0],)
    np.testing.assert_array_equal(vec, blk.filter(x[:, :1], degree, A, B)[:, 0])


def test_the_coefficient_table_is_filters_recurrence():
    coef = loops.chebyshev_coefficients(3, A, B)
    e, c = (B - A) / 2, (B + A) / 2
    s1 = e / -c
    s2 = 1 / (2 / s1 - s1)
    s3 = 1 / (2 / s1 - s2)
    np.testing.assert_array_equal(coef, [[s1 / e, c, 0.0], [2 * s2 / e, c, -s1 * s2], [2 * s3 / e, c, -s2 * s3]])


@pytest.mark.parametrize("bad", [-1, True, 2.0, "3"])
def test_bad_step_counts_are_refused(op, bad):
    with pytest.raises(ValueError, match=rf"n_steps must be an int >= 0 \(got {bad!r}\)".replace("'", ".")):
        loops.heat_steps_cooperative(op, np.zeros(op.shape[0]), 1e-4, bad)


@pytest.mark.parametrize("bad", [0, -2, True, 1.5])
def test_bad_degrees_are_refused(op, bad):
    with pytest.raises(ValueError, match=rf"degree must be an int >= 1 \(got {bad!r}\)"):
        loops.chebyshev_filter_cooperative(op, np.zeros((op.shape[0], 2)), bad, A, B)


def test_other_bad_arguments(mesh, op):
    with pytest.raises(ValueError, match=r"tau must be a finite number >= 0 \(got -1.0\)"):
        loops.heat_steps_cooperative(op, np.zeros(op.shape[0]), -1.0, 2)
    with pytest.raises(ValueError, match="needs the mass"):
        loops.heat_steps_cooperative(LaplacianOperator(mesh[0], backend="cpu"), np.zeros(op.shape[0]), 1e-4, 2)
    with pytest.raises(ValueError, match=r"u0 must have shape \(642,\) or \(642, k\) \(got \(5,\)\)"):
        loops.heat_steps_cooperative(op, np.zeros(5), 1e-4, 2)


def test_the_cpu_grid_is_one_block_and_the_specs_compile(cpu):
    assert loops.cooperative_blocks(cpu) == 1
    specs = loops.loop_variant_kernels("int64")
    assert [k.name for k, _ in specs] == ["heat_steps_coop", "heat_steps_block_coop", "cheb_filter_coop"]
    assert all("uint64[::1]" in s and "uint32" not in s for _, s in specs)
    for kernel, signature in loops.loop_variant_kernels("int32"):
        assert cpu.compile_kernel(kernel, signature).argtypes is not None


@pytest.mark.parametrize("n_rows, k", [(42, 3), (655_362, 50), (655_362, 5000), (655_362, 20_000)])
def test_a_cooperative_grid_never_exceeds_the_co_resident_blocks(monkeypatch, n_rows, k):
    monkeypatch.setattr(loops, "cooperative_blocks", lambda backend: 264)  # an H100: 132 SMs x 2
    (gx, gy), (bx, by) = loops._geometry_2d(None, n_rows, k)
    assert 1 <= gx * gy <= 264 and bx * by == 128
    assert gx == min(-(-k // bx), 264)  # the columns' grid-stride loop takes what one pass cannot cover
