"""Recycling of assembly memory: the large host arrays repeated assemblies return
(``HostBufferPool``) and their device working sets (``DeviceBufferPool``).

Why: at 655k vertices one assembly returns ~47 MB of fresh arrays. Fresh memory is
mapped page by page on first touch, and on this class of machine (a VM with
transparent huge pages) that first touch cost 30-40 ms per call, as much as the
kernel itself, and varied a lot from call to call. A loop over subjects or time steps
on one topology returns arrays of the same sizes every time, so their memory can be
reused once the caller has let go of the previous results.

Guarantee: a buffer is handed out again only when nothing but the pool references it
(CPython reference count), i.e. after every array, view or matrix built on it has been
freed. Results are therefore never overwritten while reachable. Only buffers of at
least ``min_bytes`` are pooled, at most ``max_buffers`` per pool; beyond that, plain
``numpy.empty``.

On a device, ``DeviceBufferPool`` keeps the working sets of one topology's assemblies
(``DeviceScratch``): the flags, the flag counter, a stream and, where the results go back
to the host, the vertices, values and masses. A set is taken for one assembly (or one
cohort slot) and given back by the code that ran it once the host has waited for that
work, so a set is never written while a launch or copy that uses it is in flight, and
never holds a result the caller was handed: values and masses returned on the device are
new arrays, not pooled ones.
"""

from __future__ import annotations

import sys
import threading

import numpy as np

__all__ = ["HostBufferPool", "DeviceBufferPool", "DeviceScratch"]

# references to a pooled buffer that is free: the pool's list, the loop variable and
# getrefcount's own argument
_FREE_REFS = 3


class HostBufferPool:
    """A small pool of host buffers, reused once unreferenced (see the module docstring)."""

    def __init__(self, max_buffers: int = 6, min_bytes: int = 4 << 20):
        self.max_buffers = max_buffers
        self.min_bytes = min_bytes
        self._bases: list[np.ndarray] = []
        self._lock = threading.Lock()

    def empty(self, shape, dtype) -> np.ndarray:
        """An uninitialised C-ordered array, backed by a recycled buffer when one is free."""
        dtype = np.dtype(dtype)
        nbytes = int(np.prod(shape)) * dtype.itemsize
        if nbytes < self.min_bytes or dtype.itemsize != 8:
            return np.empty(shape, dtype)
        with self._lock:
            for base in self._bases:
                if base.nbytes == nbytes and sys.getrefcount(base) <= _FREE_REFS:
                    return base.view(dtype).reshape(shape)
            # 8-byte elements, so a result's base has as many elements as the result:
            # scipy copies arrays that look like small views of a larger base.
            base = np.empty(nbytes // 8, np.float64)
            if len(self._bases) < self.max_buffers:
                self._bases.append(base)
            return base.view(dtype).reshape(shape)

    def zeros(self, shape, dtype) -> np.ndarray:
        out = self.empty(shape, dtype)
        out.fill(0)
        return out

    def clear(self) -> None:
        """Forget every pooled buffer (arrays already handed out stay valid)."""
        with self._lock:
            self._bases.clear()


class DeviceScratch:
    """One assembly's device working set (see the module docstring).

    Attributes:
        rows: subjects it holds (an assembly of fewer uses its first rows).
        flags: (rows, N) int64.
        count: the flag counter (``assembly.new_counter``).
        stream: the stream its work runs on.
        verts, vals, mass: (rows, N, 3), (rows, nnz), (rows, N) float64, or None when
            the results stay on the device.
    """

    __slots__ = ("key", "rows", "flags", "count", "stream", "verts", "vals", "mass", "nbytes")

    def __init__(self, backend, key, rows: int, n_vertices: int, nnz: int, outputs: bool, counter):
        self.key, self.rows = key, rows
        self.flags = backend.allocate((rows, n_vertices), np.int64)
        self.count = counter
        self.stream = backend.stream()
        self.verts = self.vals = self.mass = None
        if outputs:
            self.verts = backend.allocate((rows, n_vertices, 3), np.float64)
            self.vals = backend.allocate((rows, nnz), np.float64)
            self.mass = backend.allocate((rows, n_vertices), np.float64)
        self.nbytes = 8 * rows * (n_vertices * (5 if outputs else 1) + (nnz if outputs else 0))


class DeviceBufferPool:
    """Device working sets of one topology, reused across its assemblies.

    Args:
        max_bytes: the most device memory kept by sets nobody has taken; a set given back
            beyond that is dropped (freed), so a large cohort's chunks do not stay resident.
    """

    def __init__(self, max_bytes: int = 256 << 20):
        self.max_bytes = max_bytes
        self._free: list[DeviceScratch] = []
        self._lock = threading.Lock()

    def take(self, backend, rows: int, n_vertices: int, nnz: int, outputs: bool, new_counter) -> DeviceScratch:
        """A free set for ``rows`` subjects on ``backend``'s device, else a new one."""
        key = (backend.name, backend.device_id, rows, n_vertices, nnz, bool(outputs))
        with self._lock:
            for i, scratch in enumerate(self._free):
                if scratch.key == key:
                    return self._free.pop(i)
        return DeviceScratch(backend, key, rows, n_vertices, nnz, outputs, new_counter(backend))

    def give(self, scratch: DeviceScratch) -> None:
        """Return a set whose work the host has waited for."""
        with self._lock:
            kept = sum(s.nbytes for s in self._free)
            if kept + scratch.nbytes <= self.max_bytes:
                self._free.append(scratch)

    def clear(self) -> None:
        """Drop every free set (their device memory goes when nothing else holds it)."""
        with self._lock:
            self._free.clear()
