"""CUDABackend's copies under the simulator: chunked uploads across chunk boundaries (chunk size
lowered), pooled results that are never overwritten while alive, ``out=``, streams."""

import gc

import numpy as np
import pytest

from kernelrt import transfers


@pytest.fixture
def small_chunks(monkeypatch):
    """Chunks of 40 bytes (5 float64), and every copy staged / pooled, so small arrays cross boundaries."""
    for name, value in (("CHUNK_BYTES", 40), ("STAGED_MIN_BYTES", 0), ("PINNED_MIN_BYTES", 0)):
        monkeypatch.setattr(transfers, name, value)


@pytest.mark.parametrize("n", [1, 4, 5, 6, 10, 11, 23])
@pytest.mark.parametrize("dtype", [np.float64, np.float32, np.int16, np.complex128])
def test_uploads_across_chunk_boundaries(gpu, small_chunks, n, dtype):
    host = (np.arange(n * 3) * 7 % 11).astype(dtype).reshape(n, 3)
    np.testing.assert_array_equal(gpu.to_host(gpu.to_device(host)), host)  # exact: copies
    s = gpu.stream()
    d = gpu.to_device(host[:, ::-1], stream=s)  # not contiguous: made so first, then staged
    back = gpu.to_host(d, stream=s)
    s.synchronize()
    np.testing.assert_array_equal(back, host[:, ::-1])


def test_an_item_larger_than_a_chunk(gpu, monkeypatch):
    monkeypatch.setattr(transfers, "CHUNK_BYTES", 4)
    monkeypatch.setattr(transfers, "STAGED_MIN_BYTES", 0)
    host = np.arange(9.0)
    np.testing.assert_array_equal(gpu.to_host(gpu.to_device(host)), host)


def test_a_live_result_is_never_overwritten(gpu, small_chunks):
    a, b = gpu.to_device(np.full(50, 1.0)), gpu.to_device(np.full(50, 2.0))
    ra = gpu.to_host(a)
    view = ra[5:]
    del ra
    rb = gpu.to_host(b)  # ra's buffer is still referenced through the view
    assert not np.shares_memory(rb, view)
    np.testing.assert_array_equal(view, 1.0)
    np.testing.assert_array_equal(rb, 2.0)
    del view
    gc.collect()
    rc = gpu.to_host(a)
    assert len(gpu._transfers.pool) == 2  # the freed buffer was reused, not a third one made
    np.testing.assert_array_equal(rc, 1.0)
    np.testing.assert_array_equal(rb, 2.0)


def test_to_host_into_out(gpu):
    d = gpu.to_device(np.arange(12.0).reshape(3, 4))
    out = np.full((3, 4), np.nan)
    assert gpu.to_host(d, out=out) is out
    np.testing.assert_array_equal(out, np.arange(12.0).reshape(3, 4))
    s = gpu.stream()
    out2 = np.empty((3, 4))
    assert gpu.to_host(d, stream=s, out=out2) is out2
    s.synchronize()
    np.testing.assert_array_equal(out2, out)
    host_in = np.arange(4.0)
    assert gpu.to_host(host_in, out=np.empty(4))[3] == 3.0  # a numpy array is copied too


@pytest.mark.parametrize(
    "out, error, match",
    [
        (np.full((4, 3), np.nan), ValueError, r"out must have shape \(3, 4\)"),
        (np.full((3, 4), np.nan, np.float32), TypeError, "out must have dtype float64"),
        (np.full((4, 3), np.nan).T, ValueError, "out must be C-contiguous"),
        ([[0.0] * 4] * 3, TypeError, "out must be a host numpy array"),
    ],
)
def test_bad_out_is_refused_before_any_work(gpu, out, error, match):
    d = gpu.to_device(np.arange(12.0).reshape(3, 4))
    with pytest.raises(error, match=match):
        gpu.to_host(d, out=out)
    if isinstance(out, np.ndarray):
        assert np.isnan(out).all()  # nothing written


def test_release_memory_drops_free_buffers(gpu, small_chunks):
    d = gpu.to_device(np.arange(10.0))
    kept = gpu.to_host(d)
    gpu.to_host(d)  # a result dropped at once
    gpu.release_memory()
    assert len(gpu._transfers.pool) == 1  # the live one stays pooled
    np.testing.assert_array_equal(kept, np.arange(10.0))
