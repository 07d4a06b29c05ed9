"""Which stream a CUDABackend copy or launch runs on, and what orders it after its arrays.

A foreign array (CuPy, a CUDA array interface v3 producer) names the stream its data is
ordered on; ``0``/``1`` is the legacy default stream, ``2`` the per-thread default stream,
anything else a stream pointer. numba would make the host wait for that stream on every
launch; kernelrt orders the work on the device instead: a launch given no ``stream=`` runs
on the stream its first array names, and any other stream it must follow is waited for
with an event (``cuStreamWaitEvent``: the host never blocks). No event is needed where CUDA
already orders the two: the same stream, or the legacy default stream and a blocking
stream (one numba made, or the per-thread default stream), which wait for each other's
earlier work. A stream of unknown flags (a foreign pointer) is treated as non-blocking.

Streams here are numba's stream objects, or ``0`` for numba's default stream, which is the
legacy default stream (numba always uses the legacy-stream driver API). Nothing is
imported at ``import kernelrt``.
"""

from __future__ import annotations

import functools

__all__ = [
    "LEGACY_STREAM",
    "PER_THREAD_STREAM",
    "as_numba_stream",
    "needs_wait",
    "numba_stream",
    "plan_launch",
    "stream_key",
    "wait_for",
]

LEGACY_STREAM, PER_THREAD_STREAM = 1, 2  # the handles CUDA (and the array interface) reserve
_STREAMS: dict[int, object] = {}  # numba stream objects by handle: a wrapper only, never owns the stream


@functools.cache
def _numba_stream_type() -> type:
    from numba.cuda.cudadrv import driver  # lazy: importing kernelrt loads no numba

    return driver.Stream


def numba_stream(handle: int | None):
    """numba's stream for a stream handle an array names (None: no stream, 0 or 1: legacy)."""
    if not handle or handle == LEGACY_STREAM:
        return 0
    stream = _STREAMS.get(handle)
    if stream is None:
        from numba import cuda  # lazy: importing kernelrt loads no numba

        stream = cuda.per_thread_default_stream() if handle == PER_THREAD_STREAM else cuda.external_stream(handle)
        if len(_STREAMS) > 64:  # pointers of streams long destroyed: start over
            _STREAMS.clear()
        _STREAMS[handle] = stream
    return stream


def as_numba_stream(stream):
    """numba's stream for a ``stream=`` argument: None or 0, a numba stream, or a CuPy,
    PyTorch or other stream with ``__cuda_stream__``, ``.ptr`` or ``.cuda_stream``.

    Raises:
        TypeError: ``stream`` is none of these.
    """
    if stream is None or (type(stream) is int and stream == 0):
        return 0
    if isinstance(stream, _numba_stream_type()):
        return stream
    handle = _pointer_of(stream)
    if handle is None:
        raise TypeError(
            f"stream must be a numba stream (backend.stream()), a CuPy or PyTorch stream, 0 or None "
            f"(got {type(stream).__name__}: {stream!r})"[:300]
        )
    return numba_stream(handle)


def _pointer_of(stream) -> int | None:
    protocol = getattr(stream, "__cuda_stream__", None)  # (version, handle): cuda.core, CuPy 14, PyTorch
    if protocol is not None:
        value = protocol() if callable(protocol) else protocol
        if isinstance(value, tuple) and len(value) == 2:
            return int(value[1])
    for attr in ("ptr", "cuda_stream"):  # CuPy's Stream, PyTorch's torch.cuda.Stream
        value = getattr(stream, attr, None)
        if isinstance(value, int) and not isinstance(value, bool):
            return value
    return None


def stream_key(stream) -> tuple[int, bool]:
    """``(handle, blocking)`` of a numba stream or 0; handle 0 reads as the legacy stream."""
    if not isinstance(stream, _numba_stream_type()):
        return LEGACY_STREAM, True  # 0: numba's default stream
    handle = int(stream.handle) or LEGACY_STREAM
    # numba creates its streams blocking (CU_STREAM_DEFAULT); an external one may not be
    return handle, handle in (LEGACY_STREAM, PER_THREAD_STREAM) or not stream.external


def needs_wait(producer: tuple[int, bool], consumer: tuple[int, bool]) -> bool:
    """Whether work on ``consumer`` must wait for ``producer`` with an event (``stream_key``s)."""
    if producer[0] == consumer[0]:
        return False
    if producer[0] == LEGACY_STREAM:
        return not consumer[1]
    if consumer[0] == LEGACY_STREAM:
        return not producer[1]
    return True


def plan_launch(stream, producers: list, key=stream_key) -> tuple:
    """``(stream to launch on, streams it must wait for)``.

    Args:
        stream: the caller's stream (a numba stream or 0), or None: then the stream the
            first array names, else numba's default stream.
        producers: the streams the array arguments name, in argument order.
        key: ``stream_key`` (a parameter so the plan can be tested with stand-in streams).
    """
    target = stream if stream is not None else (producers[0] if producers else 0)
    target_key, seen, waits = key(target), set(), []
    for p in producers:
        k = key(p)
        if k not in seen:
            seen.add(k)
            if needs_wait(k, target_key):
                waits.append(p)
    return target, waits


def wait_for(producers: list, stream) -> None:
    """Make later work on ``stream`` wait for the work queued so far on each producer stream."""
    if not producers:
        return
    from numba import cuda  # lazy: importing kernelrt loads no numba

    for p in producers:
        event = cuda.event(timing=False)
        event.record(p)
        event.wait(stream)
