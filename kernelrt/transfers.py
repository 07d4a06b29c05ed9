"""Host <-> device copies for CUDABackend: pooled pinned results, chunked double-buffered uploads.

Owns ``CUDABackend.to_host`` and ``to_device`` (the backend delegates here) and what makes them
fast on a real GPU (docs/architecture.md, "Transfers"):

* ``to_host`` DMAs once, straight into a pinned buffer from a bounded ``PinnedPool`` that is
  handed to the caller as its array: no staging copy, no fresh pages. A buffer is reused only
  once nothing but the pool references it. With ``out=`` the copy goes into the caller's array.
  Copies under ``PINNED_MIN_BYTES`` (and any the full pool cannot take) use a plain numpy
  array: for a few KiB the driver's own staging costs less than holding a pinned buffer.
* ``to_device`` of ``STAGED_MIN_BYTES`` or more goes through two pinned chunk buffers of
  ``CHUNK_BYTES``: while chunk i's DMA runs on the copy stream, the host copies chunk i+1 into
  the other buffer with ``parallel_copy`` (threads: numpy releases the GIL in its copies); an
  event per buffer orders its reuse. Smaller copies go straight from pageable memory.

Without ``stream=`` both return complete results (the host waits); with a stream the copy is
queued on it and the result is valid once that stream is synchronised. Under the CUDA simulator
pinned arrays are numpy arrays and events do nothing, so the same code runs there. Module
constants are read at each call: tests lower them to cross chunk boundaries with small arrays.
"""

from __future__ import annotations

import concurrent.futures
import os
import threading

import numpy as np

from . import device_arrays
from .arguments import check_dtype, describe, is_device_array
from .host_pool import PinnedPool
from .stream_order import plan_launch, wait_for

__all__ = ["Transfers", "check_out", "parallel_copy", "CHUNK_BYTES", "STAGED_MIN_BYTES", "PINNED_MIN_BYTES"]

CHUNK_BYTES = 16 << 20  # per staging chunk: large enough for full-speed DMA, two of them pinned
STAGED_MIN_BYTES = 64 << 10  # to_device below this: one pageable copy, which the driver stages
PINNED_MIN_BYTES = 64 << 10  # to_host below this: a plain numpy array, not a pinned buffer
PARALLEL_MIN_BYTES = 4 << 20  # host copies split across threads from this size
_THREADS = max(1, min(8, os.cpu_count() or 1))
_executor = None
_executor_lock = threading.Lock()


def parallel_copy(dst: np.ndarray, src: np.ndarray) -> None:
    """``dst[...] = src`` for 1-D arrays of one dtype, in slices on several threads when large.

    One core's memcpy (~5-10 GB/s) is slower than a PCIe 5 link: the staging copy must be
    parallel for the DMA, not the host, to set the pace.
    """
    n = src.shape[0]
    if src.nbytes < PARALLEL_MIN_BYTES or _THREADS == 1:
        np.copyto(dst, src)
        return
    global _executor
    with _executor_lock:
        if _executor is None:
            _executor = concurrent.futures.ThreadPoolExecutor(_THREADS, thread_name_prefix="kernelrt-copy")
    edges = np.linspace(0, n, _THREADS + 1).astype(np.int64)
    parts = [_executor.submit(np.copyto, dst[lo:hi], src[lo:hi]) for lo, hi in zip(edges[:-1], edges[1:]) if hi > lo]
    for part in parts:
        part.result()


def check_out(out, shape, dtype) -> np.ndarray:
    """``out`` if it can take a copy of ``shape`` and ``dtype``, else a clear error (before any work).

    Raises:
        TypeError: ``out`` is not a numpy array, or has another dtype.
        ValueError: another shape, not C-contiguous, or read-only.
    """
    if not isinstance(out, np.ndarray):
        raise TypeError(f"out must be a host numpy array (got {describe(out)})")
    shape, dtype = tuple(shape), np.dtype(dtype)
    if out.dtype != dtype:
        raise TypeError(f"out must have dtype {dtype} to match the array (got {out.dtype})")
    if out.shape != shape:
        raise ValueError(f"out must have shape {shape} to match the array (got {out.shape})")
    if not out.flags.c_contiguous:
        raise ValueError("out must be C-contiguous (got a strided or Fortran-ordered array)")
    if not out.flags.writeable:
        raise ValueError("out must be writeable (got a read-only array)")
    return out


class Transfers:
    """The copies of one CUDABackend: its result pool, staging buffers and copy stream."""

    def __init__(self, backend):
        self.be = backend
        self.pool = PinnedPool(self._pinned)
        self._chunks: list = [None, None]  # two pinned staging buffers (uint8)
        self._events: list = [None, None]  # the last DMA out of each
        self._stream = None  # the copy stream of uploads given no stream=
        self._lock = threading.Lock()

    def _pinned(self, nbytes: int) -> np.ndarray:
        from numba import cuda  # lazy: importing kernelrt loads no numba

        with self.be.activated():
            return cuda.pinned_array(nbytes, np.uint8)

    # -- device to host ------------------------------------------------------------------------

    def to_host(self, a, stream=None, out=None) -> np.ndarray:
        if isinstance(a, np.ndarray):
            if out is None:
                return np.array(a, copy=True)
            np.copyto(check_out(out, a.shape, a.dtype), a)
            return out
        if not is_device_array(a):
            raise TypeError(f"to_host takes a device array (got {describe(a)})")
        be = self.be
        be._check_on_this_device(a, "a")
        if out is not None and hasattr(a, "shape") and hasattr(a, "dtype"):
            check_out(out, a.shape, a.dtype)  # before any work, where the array says its shape
        with be.activated():
            d, ordered_on = device_arrays.copy_view(a)  # a numba view, and the stream ``a`` is ordered on
            if out is not None:
                check_out(out, d.shape, d.dtype)
            on = ordered_on
            if stream is not None:
                on = be._stream_arg(stream)
                if not be.is_simulator:
                    wait_for(plan_launch(on, [ordered_on])[1], on)
            if not d.is_c_contiguous():  # numba copies the whole allocation and returns a strided view
                host = device_arrays.finished(d.copy_to_host(stream=on), on)
                if out is None:
                    return host
                np.copyto(out, host)
                return out
            slot = None
            dest = out
            if dest is None and d.nbytes >= PINNED_MIN_BYTES:
                dest, slot = self.pool.take(d.shape, d.dtype)
            if dest is None:
                dest = np.empty(d.shape, d.dtype)
            d.copy_to_host(dest, stream=on)
            if stream is None:
                return device_arrays.finished(dest, on)
            if slot is not None and on:  # asynchronous: the buffer is not reused before the copy ends
                event = be.event(timing=False)
                event.record(on)
                slot.pending = event
            return dest

    # -- host to device ------------------------------------------------------------------------

    def to_device(self, a, stream=None):
        be = self.be
        if is_device_array(a):
            be._check_on_this_device(a, "a")
            return a
        host = np.asarray(a)
        check_dtype(host.dtype, "the array's dtype")
        host = device_arrays.c_strides(host)
        with be.activated():
            s = be._stream_arg(stream)
            if host.nbytes < STAGED_MIN_BYTES:
                return device_arrays.upload(host, s, be.arrays, be.device_id)[0]
            if be.arrays == "cupy":
                out = device_arrays.cupy_array("empty", host.shape, host.dtype, be.device_id)
                view, ordered_on = device_arrays.copy_view(out)  # CuPy's stream: its pool handed ``out`` out there
            else:
                from numba import cuda  # lazy: importing kernelrt loads no numba

                out = view = cuda.device_array(host.shape, host.dtype, stream=s)
                ordered_on = 0
            with self._lock:
                on = s or self._copy_stream()  # a real stream: copies on stream 0 would block the host
                if not be.is_simulator:
                    wait_for(plan_launch(on, [ordered_on])[1], on)
                self._upload_chunks(host, view, on)
                if not s:  # no stream given: the result is complete on return, as a plain copy is
                    on.synchronize()
            return out

    def _copy_stream(self):
        if self._stream is None:
            self._stream = self.be.stream()
        return self._stream

    def _upload_chunks(self, host: np.ndarray, view, on) -> None:
        """Copy ``host`` into the contiguous device ``view`` through the two staging buffers.

        Call with ``_lock`` held, inside ``activated()``, with ``on`` a stream (not 0).
        """
        src = host.reshape(-1)
        flat = view.reshape(view.size)
        itemsize = host.dtype.itemsize
        per = max(1, CHUNK_BYTES // itemsize)
        for i, lo in enumerate(range(0, src.shape[0], per)):
            hi, j = min(lo + per, src.shape[0]), i % 2
            buf = self._chunk(j, per * itemsize)  # waits for the DMA that last read this buffer
            staged = buf[: (hi - lo) * itemsize].view(host.dtype)
            parallel_copy(staged, src[lo:hi])
            flat[lo:hi].copy_to_device(staged, stream=on)  # asynchronous: the next chunk's memcpy overlaps it
            if self._events[j] is None:
                self._events[j] = self.be.event(timing=False)
            self._events[j].record(on)

    def _chunk(self, j: int, nbytes: int) -> np.ndarray:
        """Staging buffer ``j`` (at least ``nbytes``), once the last copy out of it has finished."""
        if self._events[j] is not None:
            self._events[j].synchronize()
        if self._chunks[j] is None or self._chunks[j].nbytes < nbytes:
            self._chunks[j] = None
            self._chunks[j] = self._pinned(nbytes)
        return self._chunks[j]

    def release(self) -> None:
        """Free the staging buffers and the pool's free buffers (results in use stay valid)."""
        with self._lock:
            for j in (0, 1):
                if self._events[j] is not None:
                    self._events[j].synchronize()
                self._chunks[j] = None
        self.pool.clear()
