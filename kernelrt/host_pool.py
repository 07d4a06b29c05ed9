"""A bounded pool of page-locked (pinned) host buffers for the results of device-to-host copies.

Why: a copy into pageable memory runs through the driver's own pinned staging buffer (DMA,
then a host memcpy, in pieces), and fresh pages cost a page fault each on first touch
(30-40 ms per 47 MB on a VM: ``kernels/laplacian/buffers.py``). A pinned buffer takes the DMA
directly, at the link's speed, and a reused one is already mapped. Pinning memory is slow
(``cuMemHostAlloc`` locks every page) and takes it from the rest of the system, so buffers
are kept and reused, and the pool is bounded.

Guarantee (the idea of ``kernels/laplacian/buffers.py``'s ``HostBufferPool``): a buffer is handed
out again only when nothing but the pool references it (CPython reference count), i.e. after
every array and view built on it has been freed; numpy collapses a view's ``.base`` to the
buffer, so any live result, view or slice keeps it. A result is therefore never overwritten
while reachable. A buffer whose last copy was asynchronous (``stream=``) also carries an
event, waited for before the buffer is reused. (A raw pointer taken from a result, through
ctypes or ``__array_interface__``, is not a reference: keep the array alive while using it.)
"""

from __future__ import annotations

import sys
import threading

import numpy as np

__all__ = ["PinnedPool", "POOL_MAX_BUFFERS", "POOL_MAX_BYTES"]

POOL_MAX_BUFFERS = 16  # pooled buffers per backend, free or in use
POOL_MAX_BYTES = 1 << 30  # pinned bytes the pool keeps per backend
_GRAIN = 64 << 10  # buffers are whole multiples of this, so near sizes share buffers
# references to a pooled buffer that is free: the slot's attribute, the local name and
# getrefcount's own argument
_FREE_REFS = 3


class _Slot:
    __slots__ = ("buf", "pending")

    def __init__(self, buf):
        self.buf = buf  # a 1-D uint8 pinned array
        self.pending = None  # the event of an asynchronous copy into it, if any


class PinnedPool:
    """Pinned host buffers, reused once unreferenced (see the module docstring).

    Args:
        alloc: ``alloc(nbytes)`` -> a new 1-D uint8 pinned array (numba's ``pinned_array``
            inside the backend's ``activated()``; a numpy array under the simulator).
        max_buffers: buffers kept at most.
        max_bytes: bytes kept at most.
    """

    def __init__(self, alloc, max_buffers: int = POOL_MAX_BUFFERS, max_bytes: int = POOL_MAX_BYTES):
        self._alloc = alloc
        self.max_buffers, self.max_bytes = max_buffers, max_bytes
        self._slots: list[_Slot] = []
        self._lock = threading.Lock()

    @property
    def nbytes(self) -> int:
        """Pinned bytes held by the pool (free buffers and buffers in use)."""
        return sum(s.buf.nbytes for s in self._slots)

    def __len__(self) -> int:
        return len(self._slots)

    def take(self, shape, dtype) -> tuple:
        """``(array, slot)``: an uninitialised C-ordered array of ``shape`` and ``dtype`` on a
        pooled pinned buffer (``slot`` None for an empty array, which needs no buffer), or
        ``(None, None)`` when the pool is full of buffers in use.

        Reuses the smallest free buffer that holds it without wasting more than half; waits
        for a free buffer's pending copy first. Frees unused buffers to make room.
        """
        dtype = np.dtype(dtype)
        need = int(np.prod(shape, dtype=np.int64)) * dtype.itemsize
        if need == 0:  # nothing to pin (and numpy's own strides for an empty array)
            return np.empty(shape, dtype), None
        with self._lock:
            best = None
            for slot in self._slots:
                size = slot.buf.nbytes
                if need <= size <= 2 * need + _GRAIN and self._is_free(slot):
                    if best is None or size < best.buf.nbytes:
                        best = slot
            if best is None:
                best = self._new_slot(-(-need // _GRAIN) * _GRAIN)
                if best is None:
                    return None, None
            if best.pending is not None:
                best.pending.synchronize()
                best.pending = None
            return best.buf[:need].view(dtype).reshape(shape), best

    def _new_slot(self, nbytes: int):
        """A new pooled buffer of ``nbytes``, after dropping free ones to stay in bounds."""
        if nbytes > self.max_bytes:
            return None
        held = self.nbytes
        while len(self._slots) >= self.max_buffers or held + nbytes > self.max_bytes:
            free = [s for s in self._slots if self._is_free(s)]
            if not free:
                return None
            victim = max(free, key=lambda s: s.buf.nbytes)  # the largest frees the most pinned memory
            if victim.pending is not None:
                victim.pending.synchronize()
            self._slots.remove(victim)
            held -= victim.buf.nbytes
            del victim, free
        slot = _Slot(self._alloc(nbytes))
        self._slots.append(slot)
        return slot

    @staticmethod
    def _is_free(slot) -> bool:
        buf = slot.buf
        return sys.getrefcount(buf) <= _FREE_REFS

    def clear(self) -> None:
        """Drop the free buffers (their pinned memory is released); buffers in use stay pooled."""
        with self._lock:
            kept = []
            for slot in self._slots:
                if not self._is_free(slot):
                    kept.append(slot)
                elif slot.pending is not None:
                    slot.pending.synchronize()
            self._slots = kept
