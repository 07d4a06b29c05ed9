"""Arrays a translated kernel only adds into atomically get a copy per chunk of threads
(kernelrt/cuda_private.py): the results against numpy, and the kernels that must keep
their atomics because something else reads or writes the array."""

from __future__ import annotations

import ast

import numpy as np
import pytest
from numba import cuda

import kernelrt
from kernelrt import cuda_private


@pytest.fixture(scope="module")
def cpu(tmp_path_factory):
    return kernelrt.CPUBackend(cache_dir=tmp_path_factory.mktemp("cache"))


@cuda.jit
def histogram(values, hist):
    start, stride = cuda.grid(1), cuda.gridsize(1)
    for i in range(start, values.shape[0], stride):
        cuda.atomic.add(hist, values[i], 1)


@cuda.jit
def weighted(values, weights, hist):
    i = cuda.grid(1)
    if i < values.shape[0]:
        cuda.atomic.add(hist, values[i], weights[i])


@cuda.jit
def joint(x, y, hist2d, total):
    # two arrays added into, one with a tuple index
    i = cuda.grid(1)
    if i < x.shape[0]:
        cuda.atomic.add(hist2d, (x[i], y[i]), 1)
        cuda.atomic.add(total, 0, 1)


@cuda.jit
def counted(values, hist, old):
    # the atomic's result is read: the order of the adds shows, the atomics stay
    i = cuda.grid(1)
    if i < values.shape[0]:
        old[i] = cuda.atomic.add(hist, values[i], 1)


@cuda.jit
def read_back(values, hist, seen):
    # the array is read as well: the atomics stay
    i = cuda.grid(1)
    if i < values.shape[0]:
        cuda.atomic.add(hist, values[i], 1)
        seen[i] = hist[0] >= 0


def _values(n=100_003, bins=256, seed=0):
    return np.random.default_rng(seed).integers(0, bins, n).astype(np.int64)


@pytest.mark.parametrize("grid, block", [(64, 256), (3, 32), (1, 1), (2000, 128)])
def test_integer_histogram_is_exact(cpu, grid, block):
    values = _values()
    hist = np.full(256, 7, np.int64)  # the adds go on top of what is there
    cpu.launch_kernel(histogram, grid, block, values, hist)
    np.testing.assert_array_equal(hist, np.bincount(values, minlength=256) + 7)


@pytest.mark.parametrize("dtype", [np.int32, np.uint32, np.uint64])
def test_other_integer_types(cpu, dtype):
    values = _values(5000, 16)
    hist = np.zeros(16, dtype)
    cpu.launch_kernel(histogram, 8, 64, values, hist)
    np.testing.assert_array_equal(hist, np.bincount(values, minlength=16).astype(dtype))


def test_float_weights(cpu):
    values = _values(50_000, 32)
    w = np.random.default_rng(1).standard_normal(50_000)
    hist = np.zeros(32)
    cpu.launch_kernel(weighted, (50_000 + 255) // 256, 256, values, w, hist)
    # the same adds in another order: a few ulp of each bin's running sum (~1e3 terms of size 1)
    np.testing.assert_allclose(hist, np.bincount(values, weights=w, minlength=32), rtol=0, atol=1e-10)


def test_two_arrays_and_a_tuple_index(cpu):
    x, y = _values(20_000, 8, 2), _values(20_000, 5, 3)
    hist2d, total = np.zeros((8, 5), np.int64), np.zeros(1, np.int64)
    cpu.launch_kernel(joint, 100, 256, x, y, hist2d, total)
    want = np.zeros((8, 5), np.int64)
    np.add.at(want, (x, y), 1)
    np.testing.assert_array_equal(hist2d, want)
    assert total[0] == 20_000


def test_a_read_result_keeps_the_atomics(cpu):
    values = _values(4096, 4)
    hist, old = np.zeros(4, np.int64), np.full(4096, -1, np.int64)
    cpu.launch_kernel(counted, 16, 256, values, hist, old)
    np.testing.assert_array_equal(hist, np.bincount(values, minlength=4))
    for b in range(4):  # each add saw a distinct earlier count: 0, 1, ..., n_b - 1
        np.testing.assert_array_equal(np.sort(old[values == b]), np.arange(hist[b]))


def test_a_read_array_keeps_the_atomics(cpu):
    values = _values(4096, 4)
    hist, seen = np.zeros(4, np.int64), np.zeros(4096, np.bool_)
    cpu.launch_kernel(read_back, 16, 256, values, hist, seen)
    np.testing.assert_array_equal(hist, np.bincount(values, minlength=4))
    assert seen.all()


def test_copies_too_large_fall_back_to_atomics(cpu):
    bins = cuda_private.PRIVATE_BYTES // 8 // cuda_private.CHUNKS + 1  # 32 copies would pass the limit
    values = np.random.default_rng(4).integers(0, bins, 10_000).astype(np.int64)
    hist = np.zeros(bins, np.int64)
    cpu.launch_kernel(histogram, 4, 64, values, hist)
    np.testing.assert_array_equal(hist, np.bincount(values, minlength=bins))


def test_debug_mode_keeps_checked_atomics(tmp_path):
    debug = kernelrt.CPUBackend(cache_dir=tmp_path, debug=True)
    values = _values(1000, 8)
    values[500] = 8  # one past the end
    with pytest.raises(IndexError):
        debug.launch_kernel(histogram, 4, 64, values, np.zeros(8, np.int64))


def _entry_source(kernel) -> str:
    import linecache

    found = [lines for name, (_, _, lines, _) in linecache.cache.items()
             if name.endswith(f".{kernel.py_func.__name__} cpu translation>") and "test_cuda_private" in name]
    return "".join(found[-1])


def test_the_private_path_is_the_one_taken(cpu):
    values = _values(1000, 8)
    for kernel, args in ((histogram, (np.zeros(8, np.int64),)), (counted, (np.zeros(8, np.int64), np.zeros(1000, np.int64)))):
        cpu.launch_kernel(kernel, 4, 64, values, *args)
    assert "body_private(" in _entry_source(histogram) and "_kr_v_hist" in _entry_source(histogram)
    assert "body_private(" not in _entry_source(counted)


def _private(source: str, params=("values", "hist", "out")):
    return cuda_private.private_arrays(ast.parse(source).body, list(params))


def test_which_arrays_are_private():
    assert _private("_kr_atomic_add(hist, values[0], 1)") == ["hist"]
    assert _private("_kr_atomic_add(hist, 0, 1)\n_kr_atomic_add(out, 0, hist.shape[0])") == ["out"]
    assert _private("v = _kr_atomic_add(hist, 0, 1)") == []
    assert _private("_kr_atomic_add(hist, 0, 1)\nhist = out") == []
    assert _private("_kr_atomic_add(hist, 0, 1)\nf(hist)") == []
    assert _private("_kr_atomic_max(hist, 0, 1)") == []
