"""Recycling of the large host arrays that repeated assemblies return.

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
"""

from __future__ import annotations

import sys
import threading

import numpy as np

__all__ = ["HostBufferPool"]

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
