"""The host side of transfers, without a GPU: the pinned pool's reuse guarantee, ``out=`` checks,
the parallel host copy, and ``to_host(out=)`` on the CPU backend (the Backend contract)."""

import gc

import numpy as np
import pytest

from kernelrt import CPUBackend
from kernelrt.host_pool import PinnedPool
from kernelrt.transfers import check_out, parallel_copy


def _pool(**kw):
    made = []

    def alloc(nbytes):
        made.append(nbytes)
        return np.empty(nbytes, np.uint8)  # a stand-in for pinned memory: the pool only counts references

    return PinnedPool(alloc, **kw), made


def test_a_buffer_is_reused_only_once_every_result_is_gone():
    pool, made = _pool()
    a, _ = pool.take((1000,), np.float64)
    a[:] = 1.0
    b, _ = pool.take((1000,), np.float64)
    assert not np.shares_memory(a, b) and len(made) == 2  # a is alive: never handed out again
    view = a[10:20]  # a view keeps a's buffer too
    del a
    gc.collect()
    c, _ = pool.take((1000,), np.float64)
    assert not np.shares_memory(c, view) and len(made) == 3
    np.testing.assert_array_equal(view, 1.0)  # exact: never overwritten
    ptr = view.__array_interface__["data"][0] - 10 * 8
    del view
    d, _ = pool.take((1000,), np.float64)
    assert d.__array_interface__["data"][0] == ptr and len(made) == 3  # now reused


def test_results_have_the_shape_dtype_and_standard_strides():
    pool, _ = _pool()
    for shape, dtype in (((3, 4), np.float32), ((1, 7, 3), np.int64), ((), np.complex128), ((0,), np.float64)):
        a, _ = pool.take(shape, dtype)
        assert a.shape == shape and a.dtype == dtype and a.flags.c_contiguous and a.flags.writeable
        assert a.strides == np.empty(shape, dtype).strides


def test_the_pool_is_bounded_and_frees_unused_buffers():
    pool, made = _pool(max_buffers=2, max_bytes=1 << 20)
    a, _ = pool.take((100,), np.float64)
    b, _ = pool.take((200,), np.float64)
    c, slot = pool.take((300,), np.float64)
    assert c is None and slot is None  # full of buffers in use: the caller uses plain memory
    del a
    c, _ = pool.take((300,), np.float64)  # a's buffer is dropped to make room
    assert c is not None and len(pool) == 2
    big, _ = pool.take((1 << 20,), np.float64)  # more than max_bytes: never pooled
    assert big is None
    del b, c
    pool.clear()
    assert len(pool) == 0


def test_a_pending_copy_is_waited_for_before_reuse():
    pool, _ = _pool()
    waited = []

    class Event:
        def synchronize(self):
            waited.append(True)

    a, slot = pool.take((10,), np.float64)
    slot.pending = Event()
    del a
    pool.take((10,), np.float64)
    assert waited == [True] and slot.pending is None


@pytest.mark.parametrize(
    "out, error, words",
    [
        ([0.0] * 6, TypeError, "host numpy array"),
        (np.empty((2, 3), np.float32), TypeError, "dtype float64"),
        (np.empty((3, 2)), ValueError, "shape (2, 3)"),
        (np.empty((3, 2)).T, ValueError, "c-contiguous"),
    ],
)
def test_out_is_checked(out, error, words):
    with pytest.raises(error, match=r"(?i)out must") as info:
        check_out(out, (2, 3), np.float64)
    assert words.lower() in str(info.value).lower()


def test_read_only_out_is_refused():
    out = np.empty((2, 3))
    out.flags.writeable = False
    with pytest.raises(ValueError, match="writeable"):
        check_out(out, (2, 3), np.float64)


def test_parallel_copy_equals_copyto(monkeypatch):
    from kernelrt import transfers

    monkeypatch.setattr(transfers, "PARALLEL_MIN_BYTES", 1024)
    src = np.random.default_rng(0).random(100_003)
    dst = np.empty_like(src)
    parallel_copy(dst, src)
    np.testing.assert_array_equal(dst, src)  # exact: a copy


def test_cpu_to_host_into_out():
    cpu = CPUBackend()
    a = np.arange(12.0).reshape(3, 4)
    out = np.empty((3, 4))
    assert cpu.to_host(a, out=out) is out
    np.testing.assert_array_equal(out, a)
    with pytest.raises(ValueError, match=r"out must have shape \(3, 4\)"):
        cpu.to_host(a, out=np.empty(12))
    fresh = cpu.to_host(a)
    assert not np.shares_memory(fresh, a)
