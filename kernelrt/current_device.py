"""The calling thread's current CUDA device, entered and left around each operation.

``CurrentDevice(i)`` (a context manager) makes device ``i``'s primary context current for one backend
operation. If the thread's current context is already device ``i``'s, nothing is
pushed. If another device's is current, ``i``'s primary context is pushed and popped on
exit (also on errors), so the other device is current again. If none was current,
``i``'s context stays current afterwards, as numba's own model does: events, deferred
frees and numba calls made outside a backend operation then find a context, and it is
the device this thread works on, not device 0. A class, not a generator, because it
wraps every launch. ``active_devices()`` tells which scopes the thread is inside.
"""

from __future__ import annotations

import threading

from . import config
from .numba_internals import current_device_ordinal

__all__ = ["CurrentDevice", "active_devices"]

_tls = threading.local()


def active_devices() -> tuple[int, ...]:
    """The devices the calling thread has entered through backends, innermost last."""
    return tuple(getattr(_tls, "stack", ()))


class CurrentDevice:
    """Makes a device current on this thread for an operation (see the module docstring)."""

    __slots__ = ("device_id", "_gpu", "_pop")

    def __init__(self, device_id: int):
        self.device_id = device_id

    def __enter__(self):
        from numba import cuda  # lazy: importing kernelrt loads no numba

        self._gpu = cuda.gpus[self.device_id]
        current = _current_device()
        self._pop = current is not None and current != self.device_id
        if current != self.device_id:
            self._gpu.__enter__()  # pushes (and creates on first use) the primary context
        _tls.__dict__.setdefault("stack", []).append(self.device_id)
        return self

    def __exit__(self, *exc):
        _tls.stack.pop()
        if self._pop:
            self._gpu.__exit__(*exc)
        return False


def _current_device() -> int | None:
    """The device of the calling thread's current CUDA context, or None (one driver query)."""
    if config.simulator_enabled():
        return None  # the simulator's contexts are no-ops: always "push"
    return current_device_ordinal()
