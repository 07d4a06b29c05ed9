"""LaunchConfig: normalised, immutable, hashable; limits refused with the hardware value."""

import dataclasses

import pytest

from kernelrt import LaunchConfig, LaunchConfigError
from kernelrt.launch import DeviceLimits, check_limits


def test_normalised_to_three_tuples():
    c = LaunchConfig.of(4, (32, 2))
    assert c.grid == (4, 1, 1) and c.block == (32, 2, 1) and c.ndim == 2
    assert c.threads_per_block == 64 and c.shape == (128, 2, 1)
    assert LaunchConfig.of([4], [32, 2]) == c  # lists accepted, same value
    assert hash(c) == hash(LaunchConfig.of((4,), (32, 2)))
    assert repr(LaunchConfig.of(4, 32)) == "LaunchConfig(grid=(4,), block=(32,))"


def test_immutable():
    c = LaunchConfig.of(1, 1)
    with pytest.raises(dataclasses.FrozenInstanceError):
        c.grid = (2, 1, 1)


def test_numpy_ints_accepted():
    import numpy as np

    assert LaunchConfig.of(np.int64(3), (np.int32(8),)).grid == (3, 1, 1)


LIMITS = DeviceLimits(1024, (1024, 1024, 64), (2**31 - 1, 65535, 65535), 48 * 1024, 227 * 1024, "device 0 (H100)")


@pytest.mark.parametrize(
    "grid,block,smem,static,match",
    [
        (1, (32, 33), 0, 0, r"block \(32, 33\) has 1056 threads; the limit max_threads_per_block on device 0 \(H100\) is 1024"),
        (1, (1, 1, 65), 0, 0, "block.z = 65 exceeds the limit max_block_dim_z on device 0 \\(H100\\), which is 64"),
        (2**31, 1, 0, 0, "grid.x = 2147483648 exceeds the limit max_grid_dim_x"),
        (1, 1, 300 * 1024, 0, "shared memory 307200 bytes exceeds the limit max_shared_mem_per_block on device 0 \\(H100\\), which is 232448 bytes"),
        (1, 1, 200 * 1024, 40 * 1024, r"\(204800 dynamic \+ 40960 static\)"),
    ],
)
def test_limits_refused_not_clamped(grid, block, smem, static, match):
    with pytest.raises(LaunchConfigError, match=match):
        check_limits(LaunchConfig.of(grid, block, smem), LIMITS, static_shared_mem=static)


def test_within_limits_passes():
    check_limits(LaunchConfig.of((65535, 65535), (32, 32), 200 * 1024), LIMITS)


def test_kernel_register_limit():
    with pytest.raises(LaunchConfigError, match="register use allows at most 512 threads per block"):
        check_limits(LaunchConfig.of(1, 1024), LIMITS, max_threads_for_kernel=512)


from hypothesis import given
from hypothesis import strategies as st

dims = st.lists(st.integers(min_value=1, max_value=2**20), min_size=1, max_size=3)


@given(grid=dims, block=dims, smem=st.integers(min_value=0, max_value=2**20))
def test_normalisation_properties(grid, block, smem):
    c = LaunchConfig.of(tuple(grid), tuple(block), smem)
    assert len(c.grid) == len(c.block) == 3
    assert c.grid[: len(grid)] == tuple(grid) and set(c.grid[len(grid):]) <= {1}
    assert c.shape == tuple(g * b for g, b in zip(c.grid, c.block))
    assert c.ndim == max(len(grid), len(block))
    assert LaunchConfig.of(tuple(grid), tuple(block), smem) == c


@given(bad=st.one_of(st.integers(max_value=0), st.floats(), st.text(max_size=3), st.none()))
def test_anything_but_positive_ints_is_refused(bad):
    with pytest.raises(LaunchConfigError):
        LaunchConfig.of((1, bad), 32)
