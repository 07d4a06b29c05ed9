"""numba.cuda kernels that synchronise, on ``CPUBackend``: barriers, shared memory, warp
collectives (kernelrt/cuda_fission.py), and the built-ins reached by other names.

Each kernel is checked against a numpy reference written here; the conformance layer
(test_conformance.py, and its simulator twin) runs numba-cuda's own kernels.
"""

from __future__ import annotations

import subprocess
import sys

import numba
import numpy as np
import pytest
from numba import cuda, float32, float64, int32

import kernelrt
from kernelrt import CpuTranslationError
from tests.support.layers import ROOT

WARP = 32


@pytest.fixture
def cpu(tmp_path):
    return kernelrt.CPUBackend(cache_dir=tmp_path / "cache")


@cuda.jit
def block_sums(a, out):
    # shared memory, a tree reduction in a uniform while loop, a thread-dependent if
    buf = cuda.shared.array(128, float64)
    t = cuda.threadIdx.x
    buf[t] = a[cuda.grid(1)]
    cuda.syncthreads()
    s = cuda.blockDim.x // 2
    while s > 0:
        if t < s:
            buf[t] += buf[t + s]
        cuda.syncthreads()
        s //= 2
    if t == 0:
        out[cuda.blockIdx.x] = buf[0]


def test_shared_memory_tree_reduction(cpu):
    a = np.arange(512, dtype=np.float64)
    out = np.zeros(4)
    cpu.launch_kernel(block_sums, 4, 128, a, out)
    np.testing.assert_array_equal(out, a.reshape(4, 128).sum(1))  # exact: integer-valued float sums


@cuda.jit
def neighbour_after_barrier(a, out, n):
    # an early return before the barrier, a value carried across it, a local array across it
    i = cuda.grid(1)
    if i >= n:
        return
    mine = a[i] * 2
    scratch = cuda.local.array(2, int32)
    scratch[0] = i
    tile = cuda.shared.array(64, int32)
    tile[cuda.threadIdx.x] = mine
    cuda.syncthreads()
    left = tile[cuda.threadIdx.x - 1] if cuda.threadIdx.x > 0 else -1
    out[i] = left * 1000 + mine + scratch[0] * 0


def test_returned_threads_skip_the_rest_and_values_cross_the_barrier(cpu):
    a = np.arange(100, dtype=np.int32)
    out = np.full(128, -7, np.int32)
    cpu.launch_kernel(neighbour_after_barrier, 2, 64, a, out, 100)
    want = np.where(np.arange(100) % 64 == 0, -1, (np.arange(100) - 1) * 2) * 1000 + 2 * np.arange(100)
    np.testing.assert_array_equal(out[:100], want)
    assert (out[100:] == -7).all()  # returned threads wrote nothing


@cuda.jit
def barrier_counts(flags, out):
    t = cuda.threadIdx.x
    if t >= 100:
        return  # returned threads do not count
    c = cuda.syncthreads_count(flags[t])
    a = cuda.syncthreads_and(flags[t])
    o = cuda.syncthreads_or(flags[t])
    if t == 0:
        out[0], out[1], out[2] = c, a, o


def test_syncthreads_count_and_or(cpu):
    flags = np.zeros(128, np.int32)
    flags[[3, 50, 99, 120]] = 1
    out = np.zeros(3, np.int32)
    cpu.launch_kernel(barrier_counts, 1, 128, flags, out)
    assert out.tolist() == [3, 0, 1]


@cuda.jit
def shuffles(a, out):
    i = cuda.grid(1)
    v = a[i]
    out[0, i] = cuda.shfl_sync(0xFFFFFFFF, v, 5)
    out[1, i] = cuda.shfl_up_sync(0xFFFFFFFF, v, 3)
    out[2, i] = cuda.shfl_down_sync(0xFFFFFFFF, v, 3)
    out[3, i] = cuda.shfl_xor_sync(0xFFFFFFFF, v, 1)
    total = v
    for k in (16, 8, 4, 2, 1):
        total += cuda.shfl_xor_sync(0xFFFFFFFF, total, k)
    out[4, i] = total


def test_warp_shuffles(cpu):
    a = np.arange(96, dtype=np.int64) * 3
    out = np.zeros((5, 96), np.int64)
    cpu.launch_kernel(shuffles, 1, 96, a, out)
    lane, base = np.arange(96) % WARP, np.arange(96) - np.arange(96) % WARP
    np.testing.assert_array_equal(out[0], a[base + 5])
    np.testing.assert_array_equal(out[1], np.where(lane >= 3, a[np.maximum(np.arange(96) - 3, 0)], a))
    np.testing.assert_array_equal(out[2], np.where(lane < WARP - 3, a[np.minimum(np.arange(96) + 3, 95)], a))
    np.testing.assert_array_equal(out[3], a[base + (lane ^ 1)])
    np.testing.assert_array_equal(out[4], np.repeat(a.reshape(3, WARP).sum(1), WARP))  # butterfly sum


@cuda.jit
def votes(p, out):
    i = cuda.grid(1)
    out[0, i] = cuda.all_sync(0xFFFFFFFF, p[i])
    out[1, i] = cuda.any_sync(0xFFFFFFFF, p[i])
    out[2, i] = cuda.eq_sync(0xFFFFFFFF, p[i])
    out[3, i] = cuda.ballot_sync(0x0000FFFF, p[i])
    out[4, i] = cuda.match_any_sync(0xFFFFFFFF, p[i])
    out[5, i] = cuda.lanemask_lt()
    out[6, i] = cuda.activemask()


def test_warp_votes_and_masks(cpu):
    p = np.zeros(40, np.int32)
    p[[1, 2, 20, 33]] = 1
    p[32:] = 1  # the partial second warp: 8 lanes, all true
    out = np.zeros((7, 40), np.int64)
    cpu.launch_kernel(votes, 1, 40, p, out)
    warp0, warp1 = slice(0, 32), slice(32, 40)
    assert (out[0, warp0] == 0).all() and (out[0, warp1] == 1).all()
    assert (out[1] == 1).all()
    assert (out[2, warp0] == 0).all() and (out[2, warp1] == 1).all()
    assert (out[3, warp0] == (1 << 1) | (1 << 2)).all() and (out[3, warp1] == 0xFF).all()
    ones0 = (1 << 1) | (1 << 2) | (1 << 20)
    match = np.where(p[warp0] == 1, ones0, 0xFFFFFFFF & ~ones0).astype(np.uint32).view(np.int32)
    np.testing.assert_array_equal(out[4, warp0], match)  # numba-cuda types match_any_sync int32
    np.testing.assert_array_equal(out[5], (1 << (np.arange(40) % WARP)) - 1)
    assert (out[6, warp0] == 0xFFFFFFFF).all() and (out[6, warp1] == 0xFF).all()


@cuda.jit
def tile_2d(a, out):
    # a 2-D block: threads linearised x fastest, as CUDA numbers them
    s = cuda.shared.array((4, 8), int32)
    x, y = cuda.threadIdx.x, cuda.threadIdx.y
    s[y, x] = a[y, x]
    cuda.syncthreads()
    out[y, x] = s[3 - (y % 4), 7 - x] + 100 * ((y * 8 + x) % 32)


def test_two_dimensional_block(cpu):
    a = np.arange(32, dtype=np.int32).reshape(4, 8)
    out = np.zeros((4, 8), np.int32)
    cpu.launch_kernel(tile_2d, 1, (8, 4), a, out)
    y, x = np.mgrid[0:4, 0:8]
    np.testing.assert_array_equal(out, a[3 - y, 7 - x] + 100 * ((y * 8 + x) % 32))


@cuda.jit
def thread_loop_barrier(out):
    for k in range(cuda.threadIdx.x):
        cuda.syncthreads()
    out[0] = 1


@cuda.jit(device=True)
def staged_sum(a, n, dtype):
    # a device function with shared memory and barriers, its size and type passed in
    s = cuda.shared.array(n, dtype)
    t = cuda.threadIdx.x
    s[t] = a[t]
    cuda.syncthreads()
    total = 0
    for k in range(n):
        total += s[k]
    return total


@cuda.jit
def calls_staged_sum(a, out):
    total = staged_sum(a, 32, int32)
    out[cuda.threadIdx.x] = total + cuda.threadIdx.x


def test_device_functions_that_synchronise_are_inlined(cpu):
    a, out = np.arange(32, dtype=np.int32), np.zeros(32, np.int64)
    cpu.launch_kernel(calls_staged_sum, 1, 32, a, out)
    np.testing.assert_array_equal(out, a.sum() + np.arange(32))


@cuda.jit(device=True)
def returns_early(x):
    if x[0] > 0:
        return
    cuda.syncthreads()


@cuda.jit
def calls_synchronising_helper(out):
    returns_early(out)
    out[0] = 1


@cuda.jit
def grid_sync(out):
    g = cuda.cg.this_grid()
    for k in range(cuda.threadIdx.x):  # a grid barrier the threads reach different numbers of times
        g.sync()
    out[0] = 1


@cuda.jit
def ping_pong(a, b, steps):
    # every thread reads its neighbours' values of the previous step: a grid-wide barrier
    i = cuda.grid(1)
    if i >= a.shape[0]:
        return
    g = cuda.cg.this_grid()
    n = a.shape[0]
    for step in range(steps):
        src, dst = (a, b) if step % 2 == 0 else (b, a)
        dst[i] = src[(i + n - 1) % n] + src[(i + 1) % n]
        g.sync()


def test_grid_wide_barrier_orders_every_block(cpu):
    a = np.zeros(300, np.int64)
    a[7] = 1
    b = np.zeros_like(a)
    want_a, want_b = a.copy(), b.copy()
    for step in range(6):
        src, dst = (want_a, want_b) if step % 2 == 0 else (want_b, want_a)
        dst[:] = np.roll(src, 1) + np.roll(src, -1)
    cpu.launch_kernel(ping_pong, 3, 128, a, b, 6)
    np.testing.assert_array_equal(a, want_a)  # exact: integer sums
    np.testing.assert_array_equal(b, want_b)


@pytest.mark.parametrize("kernel, words", [
    (thread_loop_barrier, ["loop whose trip count differs between threads", "cuda.threadIdx", "undefined"]),
    (calls_synchronising_helper, ["device function", "returns_early", "returning before its end"]),
    (grid_sync, ["loop whose trip count differs between threads", "cuda.threadIdx"]),
])
def test_what_cannot_run_is_refused_by_name_before_running(cpu, kernel, words):
    out = np.zeros(64)
    with pytest.raises(CpuTranslationError) as info:
        cpu.launch_kernel(kernel, 1, 32, out)
    for word in words:
        assert word in str(info.value)
    assert "@k.cpu" in str(info.value) and "a block's threads run one after another" not in str(info.value)
    assert not out.any()


@cuda.jit
def dynamic_views(a, out, n):
    # every cuda.shared.array(0, ...) of a block is the launch's dynamic shared memory
    ints = cuda.shared.array(0, int32)
    floats = cuda.shared.array(0, float64)
    head = floats[0:n]
    t = cuda.threadIdx.x
    floats[t] = a[cuda.grid(1)]
    cuda.syncthreads()
    if t < n:
        out[cuda.grid(1)] = head[n - 1 - t] + ints[2 * t] * 0  # the same bytes, read as int32 too


@pytest.mark.parametrize("shared_mem", [64 * 8, 64 * 8 + 5])  # whole float64s only, as a GPU has
def test_dynamic_shared_memory_comes_from_the_launch(cpu, shared_mem):
    a = np.random.default_rng(9).standard_normal(128)
    out = np.zeros(128)
    cpu.launch_kernel(dynamic_views, 2, 64, a, out, 16, shared_mem=shared_mem)
    want = np.zeros((2, 64))
    want[:, :16] = a.reshape(2, 64)[:, 15::-1]
    np.testing.assert_array_equal(out, want.ravel())


def test_two_dynamic_arrays_alias(cpu):
    @cuda.jit
    def alias(x):
        a = cuda.shared.array(0, dtype=int32)
        b = cuda.shared.array(0, dtype=float32)
        t = cuda.threadIdx.x
        a[t] = t
        cuda.syncthreads()
        x[t] = b[t]

    x = np.zeros(8, np.float32)
    cpu.launch_kernel(alias, 1, 8, x, shared_mem=32)
    assert x.view(np.int32).tolist() == list(range(8))


@cuda.jit
def plain_kernel_helper(x):
    return x + 1  # a plain @cuda.jit function: numba-cuda compiles a call to it as a device function


@cuda.jit
def casts_and_values(a, out):
    i = cuda.grid(1)
    if i < a.shape[0]:
        out[i] = numba.cuda.types.uint32(a[i]) + plain_kernel_helper(i)
        add = cuda.atomic.add  # an atomic passed as a value
        add(out, out.shape[0] - 1, 1)
        acc = 0
        for c in numba.literal_unroll((1, 2.5, 3)):
            acc += c
        out[i] += int(acc)


def test_casts_atomics_as_values_literal_unroll_and_plain_kernels_as_callees(cpu):
    a = np.array([-1.0, 2.7, 3.2, 0.0])
    out = np.zeros(5, np.int64)
    cpu.launch_kernel(casts_and_values, 1, 4, a, out)
    # uint32(-1.0) wraps to 2**32 - 1 (as on the GPU's cvt.rzi.u32 of a negative... the host's
    # float->uint conversion: numba casts through int64 first)
    assert out[1:4].tolist() == [2 + 2 + 6, 3 + 3 + 6, 0 + 4 + 6]
    assert out[4] == 4


@cuda.jit(debug=True, opt=False)
def divide(a, b, out):
    i = cuda.grid(1)
    if i < out.shape[0]:
        out[i] = a[i] // b[i]


def test_a_kernels_own_debug_flag_raises_as_on_the_gpu(cpu):
    a, b = np.array([4, 5]), np.array([2, 0])
    with pytest.raises(ZeroDivisionError):
        cpu.launch_kernel(divide, 1, 2, a, b, np.zeros(2, np.int64))
    with pytest.raises(IndexError):  # debug=True checks bounds: a and b have 3 elements, out 4
        cpu.launch_kernel(divide, 1, 4, np.ones(3, np.int64), np.ones(3, np.int64), np.zeros(4, np.int64))


def test_a_block_kernel_loads_from_the_disk_cache_in_a_new_process(tmp_path):
    """The per-signature block function is compiled into the entry, so a new process runs it
    from the cache without compiling (numba's typing, where it is written, never runs)."""
    script = (
        "import sys, numpy as np, kernelrt\n"
        "from tests.runtime.test_cuda_blocks_on_cpu import block_sums\n"
        f"cpu = kernelrt.CPUBackend(cache_dir={str(tmp_path / 'c')!r})\n"
        "a, out = np.arange(256, dtype=np.float64), np.zeros(2)\n"
        "cpu.launch_kernel(block_sums, 2, 128, a, out)\n"
        "assert out.tolist() == [a[:128].sum(), a[128:].sum()], out\n"
        "print(cpu.cache.stats.hits, cpu.cache.stats.misses)\n"
    )
    runs = [subprocess.run([sys.executable, "-c", script], cwd=ROOT, capture_output=True, text=True, check=True)
            for _ in range(2)]
    assert runs[0].stdout.split() == ["0", "1"] and runs[1].stdout.split() == ["1", "0"], [r.stdout for r in runs]


def _scale(x):
    i = cuda.grid(1)
    if i < x.shape[0]:
        x[i] *= 2


def test_a_signature_given_to_kernelrt_instead_of_an_eager_decorator(cpu):
    """The documented answer for @cuda.jit("sig") without a driver: the signature goes to
    compile_kernel or cuda_kernel, which check arguments against it."""
    x = np.ones(4, np.float32)
    cpu.compile_kernel(cuda.jit(_scale), "void(float32[::1])")[1, 4](x)
    cpu.launch_kernel(kernelrt.cuda_kernel(_scale, signature="void(float32[::1])"), 1, 4, x)
    assert x.tolist() == [4.0] * 4
    with pytest.raises(kernelrt.KernelArgumentError):
        cpu.compile_kernel(cuda.jit(_scale), "void(float32[::1])")[1, 4](np.ones(4))
