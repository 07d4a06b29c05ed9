"""A translated kernel's bounds guard moved into its loop's range (kernelrt/cuda_guard.py).

The launches use grids larger than the data, so a guard that is dropped without its range
writes past the data (or raises), and one hoisted too far leaves elements unwritten; each
result is compared with the same guard evaluated in numpy. ``hoist_guard`` itself is
checked on what it takes out and what it must leave alone.
"""

from __future__ import annotations

import ast
import math

import numpy as np
import pytest
from numba import cuda, float64

import kernelrt
from kernelrt import cuda_guard

LIMIT = 40  # a module constant a guard may read


@pytest.fixture(scope="module")
def cpu(tmp_path_factory):
    return kernelrt.CPUBackend(cache_dir=tmp_path_factory.mktemp("cache"))


@cuda.jit
def mark_below(out, n):
    i = cuda.grid(1)
    if i >= n:
        return
    out[i] = i


@cuda.jit
def mark_window(out, lo, hi):
    # the open form, the index written out by hand, a bound through a local, two terms
    i = cuda.threadIdx.x + cuda.blockIdx.x * cuda.blockDim.x
    m = out.shape[0] - 1
    if lo < i and i <= hi and i < m:
        out[i] = i


@cuda.jit
def mark_either(out, lo, hi):
    i = cuda.grid(1)
    if i < lo or i > hi or i >= LIMIT:
        return
    out[i] = i


@cuda.jit
def interior(out, u):
    x, y = cuda.grid(2)
    if 0 < x < u.shape[1] - 1 and 0 < y < u.shape[0] - 1:
        out[y, x] = u[y, x - 1] + u[y, x + 1] + u[y - 1, x] + u[y + 1, x] - 4.0 * u[y, x]


@cuda.jit
def only(out, n):
    i = cuda.grid(1)
    if i != n:
        return
    out[i] = i


@cuda.jit
def partly(out, a):
    # the second term is not a bound on an index: it stays in the body
    i = cuda.grid(1)
    if i < out.shape[0] and a[i] > 0:
        out[i] = i


def _marks(n_threads: int, size: int, keep) -> np.ndarray:
    want = np.full(size, -1.0)
    for i in range(min(n_threads, size)):
        if keep(i):
            want[i] = i
    return want


@pytest.mark.parametrize("n", [0, 1, 37, 64, 100, -5])
def test_return_guard_against_an_integer(cpu, n):
    out = np.full(100, -1.0)  # the kernel trusts n: 100 elements, 96 threads
    cpu.launch_kernel(mark_below, 3, 32, out, n)
    np.testing.assert_array_equal(out, _marks(96, 100, lambda i: i < n))


@pytest.mark.parametrize("n", [2.5, 3.0, -0.5, 1e30, -1e30, math.inf, math.nan])
def test_return_guard_against_a_float(cpu, n):
    # i >= 2.5 returns from i = 3; a NaN bound never returns (the comparison is false)
    out = np.full(64, -1.0)
    cpu.launch_kernel(mark_below, 2, 32, out, n)
    np.testing.assert_array_equal(out, _marks(64, 64, lambda i: not (i >= n)))


@pytest.mark.parametrize("lo, hi", [(3, 20), (-4, 200), (10, 9), (2.5, 7.5), (math.nan, 9), (np.uint32(4), np.uint64(30))])
def test_wrapping_guard_with_two_ends(cpu, lo, hi):
    out = np.full(50, -1.0)
    cpu.launch_kernel(mark_window, 2, 32, out, lo, hi)
    np.testing.assert_array_equal(out, _marks(64, 50, lambda i: lo < i and i <= hi and i < 49))


@pytest.mark.parametrize("lo, hi", [(3, 20), (5, 100), (2.5, 7.5), (0, math.nan)])
def test_return_guard_with_alternatives_and_a_module_constant(cpu, lo, hi):
    out = np.full(60, -1.0)
    cpu.launch_kernel(mark_either, 2, 32, out, lo, hi)
    np.testing.assert_array_equal(out, _marks(64, 60, lambda i: not (i < lo or i > hi or i >= LIMIT)))


@pytest.mark.parametrize("n", [0, 17, 63, 64, -1, 3.0, 3.5, math.nan])
def test_a_single_thread(cpu, n):
    out = np.full(64, -1.0)
    cpu.launch_kernel(only, 2, 32, out, n)
    np.testing.assert_array_equal(out, _marks(64, 64, lambda i: not (i != n)))


def test_two_dimensional_interior(cpu):
    u = np.random.default_rng(0).standard_normal((37, 45))
    out = np.zeros_like(u)
    cpu.launch_kernel(interior, (2, 3), (32, 16), out, u)
    want = np.zeros_like(u)
    want[1:-1, 1:-1] = u[1:-1, :-2] + u[1:-1, 2:] + u[:-2, 1:-1] + u[2:, 1:-1] - 4.0 * u[1:-1, 1:-1]
    np.testing.assert_allclose(out, want, rtol=1e-15, atol=1e-15)  # the same five terms in the same order


def test_a_term_on_data_stays_in_the_body(cpu):
    a = np.random.default_rng(1).standard_normal(70)
    out = np.full(70, -1.0)
    cpu.launch_kernel(partly, 3, 32, out, a)
    np.testing.assert_array_equal(out, np.where(a > 0, np.arange(70.0), -1.0))


# -- what hoist_guard takes out and what it leaves ------------------------------------------------


def _hoist(source: str, params=("out", "n"), constants=None):
    body = ast.parse(source).body
    entry_args = {p: ast.Name(f"a_{p}", ast.Load()) for p in params}
    body, bounds = cuda_guard.hoist_guard(body, entry_args, constants or {})
    return ast.unparse(ast.Module(body, [])), bounds


def test_the_guard_becomes_loop_bounds():
    body, bounds = _hoist("i = _kr_g0\nif i >= n:\n    return\nout[i] = 1.0")
    assert body == "i = _kr_g0\nout[i] = 1.0"
    assert bounds == [[("upper", "_kr_upper(a_n, False, True)")], [], []]


def test_literal_bounds_are_folded():
    _, bounds = _hoist("x, y = (_kr_g0, _kr_g1)\nif 0 < x <= 9 and y >= 2.5:\n    out[y, x] = 1.0")
    assert bounds == [[("lower", "1"), ("upper", "10")], [("lower", "3")], []]


@pytest.mark.parametrize("source", [
    "out[0] = 1.0\ni = _kr_g0\nif i >= n:\n    return\nout[i] = 1.0",  # a write before the guard
    "i = _kr_g0\nv = out[i]\nif i >= n:\n    return\nout[i] = v",  # a read before the guard
    "i = _kr_g0\nif i >= _kr_t0:\n    return\nout[i] = 1.0",  # a bound that differs between threads
    "i = _kr_g0\nif i >= n:\n    out[0] = 2.0\nout[i] = 1.0",  # not a return
    "i = _kr_g0 + 1\nif i >= n:\n    return\nout[i] = 1.0",  # not a grid index
    "i = _kr_g0\nif i < n:\n    out[i] = 1.0\nout[0] = 2.0",  # not the last statement
])
def test_what_is_not_a_hoistable_guard_stays(source):
    body, bounds = _hoist(source)
    assert body == ast.unparse(ast.parse(source))
    assert bounds == [[], [], []]


def test_a_parameter_reassigned_before_the_guard_is_not_a_bound():
    body, bounds = _hoist("i = _kr_g0\nn = _kr_t0\nif i >= n:\n    return\nout[i] = 1.0")
    assert bounds == [[], [], []] and "if i >= n" in body


def test_a_local_reassigned_to_a_uniform_value_is_substituted():
    _, bounds = _hoist("i = _kr_g0\nm = out.shape[0] - 1\nif i < m:\n    out[i] = 1.0")
    assert bounds == [[("upper", "_kr_upper(a_out.shape[0] - 1, False, False)")], [], []]


@pytest.mark.parametrize("e, inclusive, want", [(5, False, 5), (5, True, 6), (2.5, False, 3), (2.5, True, 3),
                                                (-0.5, False, 0), (3.0, True, 4), (math.inf, False, 1 << 62)])
def test_upper_is_the_first_index_past_the_range(e, inclusive, want):
    assert cuda_guard.upper(e, inclusive, False) == want
    assert all((i <= e if inclusive else i < e) == (i < want) for i in range(-3, 12))


@pytest.mark.parametrize("e, inclusive, want", [(5, False, 6), (5, True, 5), (2.5, False, 3), (2.5, True, 3),
                                                (-0.5, True, 0), (-math.inf, True, -(1 << 62))])
def test_lower_is_the_first_index_in_the_range(e, inclusive, want):
    assert cuda_guard.lower(e, inclusive, False) == want
    assert all((i >= e if inclusive else i > e) == (i >= want) for i in range(-3, 12))


def test_nan_bounds_follow_the_comparison():
    big = 1 << 62
    assert cuda_guard.upper(math.nan, False, nan_runs_all=True) == big  # if i >= nan: return  never returns
    assert cuda_guard.upper(math.nan, False, nan_runs_all=False) == -big  # if i < nan: ...  never runs
    assert cuda_guard.lower(math.nan, True, nan_runs_all=True) == -big
    assert cuda_guard.lower(math.nan, True, nan_runs_all=False) == big


# -- the same in a block program: a run's own `if t < s` as the range of its thread loop ----------


@cuda.jit
def carry_across(a, out):
    # y is stored across the barrier and assigned in the run that ends in `if t < 16`:
    # every thread must still store it, so that run keeps its loop over all threads
    buf = cuda.shared.array(64, float64)
    t = cuda.threadIdx.x
    x = a[cuda.grid(1)]
    buf[t] = x
    cuda.syncthreads()
    y = x * 2.0
    if t < 16:
        buf[t] += buf[t + 16]
    cuda.syncthreads()
    out[cuda.grid(1)] = y + buf[t % 16]


@cuda.jit
def returned_then_ranged(out):
    # threads 40-47 have returned: the range t < 48 must still skip them
    buf = cuda.shared.array(64, float64)
    t = cuda.threadIdx.x
    buf[t] = t
    cuda.syncthreads()
    if t >= 40:
        return
    cuda.syncthreads()
    if t < 48:
        out[cuda.grid(1)] = buf[63 - t] + 1.0


@cuda.jit
def moved_index(out):
    # t is assigned twice: it is stored, not recomputed from the thread index
    buf = cuda.shared.array(64, float64)
    t = cuda.threadIdx.x
    buf[t] = t
    t = 63 - t
    cuda.syncthreads()
    if t < 8:
        out[cuda.grid(1)] = buf[t]


def test_a_stored_variable_is_kept_for_every_thread(cpu):
    a = np.random.default_rng(3).standard_normal(128)
    out = np.zeros(128)
    cpu.launch_kernel(carry_across, 2, 64, a, out)
    blocks = a.reshape(2, 64)
    head = blocks[:, :16] + blocks[:, 16:32]
    want = 2.0 * blocks + head[:, np.arange(64) % 16]
    np.testing.assert_array_equal(out, want.ravel())  # the same two adds per element


def test_a_returned_thread_stays_out_of_a_range(cpu):
    out = np.full(128, -1.0)
    cpu.launch_kernel(returned_then_ranged, 2, 64, out)
    want = np.full((2, 64), -1.0)
    want[:, :40] = 63.0 - np.arange(40) + 1.0
    np.testing.assert_array_equal(out, want.ravel())


def test_a_reassigned_index_is_not_the_loop_index(cpu):
    out = np.full(64, -1.0)
    cpu.launch_kernel(moved_index, 1, 64, out)
    want = np.full(64, -1.0)
    want[56:] = 63 - np.arange(56, 64)  # threads 56..63 have t = 7..0 and read buf[t] = t
    np.testing.assert_array_equal(out, want)


# -- grid-stride loops: the threads' loops together are every index once --------------------------


@cuda.jit
def stride_square(x, out):
    start, stride = cuda.grid(1), cuda.gridsize(1)
    for i in range(start, x.shape[0], stride):
        y = x[i] * x[i]
        out[i] = y + 1.0


@cuda.jit
def stride_running_sum(x, out):
    # acc is carried from one iteration to the next: the threads' own loops must stay
    acc = 0.0
    for i in range(cuda.grid(1), x.shape[0], cuda.gridsize(1)):
        acc += x[i]
        out[i] = acc


@cuda.jit
def stride_block_of(out):
    # the block index inside the loop is the thread's, not i's
    for i in range(cuda.grid(1), out.shape[0], cuda.gridsize(1)):
        out[i] = cuda.blockIdx.x


@cuda.jit
def stride_count(values, hist):
    for i in range(cuda.grid(1), values.shape[0], cuda.gridsize(1)):
        cuda.atomic.add(hist, values[i], 1)


@pytest.mark.parametrize("grid, block, n", [(4, 32, 1000), (64, 256, 1000), (1, 1, 17), (3, 32, 0)])
def test_a_grid_stride_loop_runs_every_index_once(cpu, grid, block, n):
    x = np.random.default_rng(5).standard_normal(n)
    out = np.zeros(n)
    cpu.launch_kernel(stride_square, grid, block, x, out)
    np.testing.assert_array_equal(out, x * x + 1.0)


def test_a_carried_value_keeps_the_threads_loops(cpu):
    x = np.random.default_rng(6).standard_normal(1000)
    out = np.zeros(1000)
    cpu.launch_kernel(stride_running_sum, 2, 64, x, out)
    want = np.zeros(1000)
    for t in range(128):
        want[t::128] = np.cumsum(x[t::128])
    np.testing.assert_array_equal(out, want)  # the same adds in the same order per thread


def test_the_position_inside_the_loop_keeps_the_threads_loops(cpu):
    out = np.full(1000, -1, np.int64)
    cpu.launch_kernel(stride_block_of, 3, 32, out)
    np.testing.assert_array_equal(out, (np.arange(1000) % 96) // 32)


def test_a_two_dimensional_launch_repeats_the_loop_per_row(cpu):
    # cuda.grid(1) is x only: every row of threads runs the same loop, as on the GPU
    values = np.random.default_rng(7).integers(0, 8, 5000)
    hist = np.zeros(8, np.int64)
    cpu.launch_kernel(stride_count, (4, 3), (32, 1), values, hist)
    np.testing.assert_array_equal(hist, 3 * np.bincount(values, minlength=8))


def test_the_collapse_and_what_prevents_it():
    loop = "start, stride = (_kr_g0, _kr_n0)\nfor i in range(start, n, stride):\n    out[i] = 1.0\n"
    body = ast.parse(loop).body
    entry_args = {p: ast.Name(f"a_{p}", ast.Load()) for p in ("out", "n")}
    body, bounds = cuda_guard.hoist_guard(body, entry_args, {}, collapse=True)
    assert bounds == [[("count", "a_n")], [], []]
    assert ast.unparse(ast.Module(body, [])).endswith("i = _kr_g0\nout[i] = 1.0")
    for stopper in ("    break", "    out[0] = _kr_t0", "    return", "    s = s + 1", "    _kr_dev0_f(_kr_g0, out)"):
        body = ast.parse(loop + stopper).body
        _, bounds = cuda_guard.hoist_guard(body, entry_args, {}, collapse=True)
        assert bounds == [[], [], []], stopper
    body = ast.parse(loop.replace("start, n, stride", "start, n, 2")).body  # not the grid's stride
    assert cuda_guard.hoist_guard(body, entry_args, {}, collapse=True)[1] == [[], [], []]


@cuda.jit
def upper_half(out):
    # a run's range with a lower end only
    buf = cuda.shared.array(64, float64)
    t = cuda.threadIdx.x
    buf[t] = 2.0 * t
    cuda.syncthreads()
    if t >= 40:
        out[cuda.grid(1)] = buf[t - 40]


def test_a_run_range_with_a_lower_end(cpu):
    out = np.full(64, -1.0)
    cpu.launch_kernel(upper_half, 1, 64, out)
    want = np.full(64, -1.0)
    want[40:] = 2.0 * np.arange(24)
    np.testing.assert_array_equal(out, want)


def test_thread_ranges_source():
    run = [ast.parse("if t >= lo and t < s:\n    buf[t] = 0.0").body[0]]
    remat = [ast.parse("t = _kr_t0").body[0]]
    ranges, body = cuda_guard.thread_ranges(remat, run, {"s", "lo", "buf"})
    assert ranges == ["range(max(0, _kr_lower(lo, True, False)), min(_kr_bd0, _kr_upper(s, False, False)))",
                      "range(_kr_bd1)", "range(_kr_bd2)"]
    assert ast.unparse(ast.Module(body, [])) == "buf[t] = 0.0"
    run = [ast.parse("if t >= lo and t < s:\n    buf[t] = 0.0").body[0]]
    ranges, body = cuda_guard.thread_ranges(remat, run, {"lo", "buf"})  # s differs between threads: it stays
    assert ranges[0] == "range(max(0, _kr_lower(lo, True, False)), _kr_bd0)"
    assert ast.unparse(ast.Module(body, [])) == "if t < s:\n    buf[t] = 0.0"
    run = [ast.parse("if t < s:\n    buf[t] = 0.0").body[0]]
    assert cuda_guard.thread_ranges(remat, run, {"buf"}) is None


def test_a_swap_reads_both_values_before_binding():
    # after `n, i = i, n`, n is the grid index and i the bound: the guard bounds n by a_n
    source = "i = _kr_g0\nn, i = (i, n)\nif n >= i:\n    return\nout[n] = 1.0"
    body, bounds = _hoist(source)
    assert bounds == [[("upper", "_kr_upper(a_n, False, True)")], [], []]
    assert "if" not in body
