"""Cohort assembly on a CUDA device: chunks that fit its memory, pipelined over two streams.

Owns the split of S subjects into launches that fit: each subject needs its vertices
(24 N bytes), values (8 nnz), masses (8 N) and flags (8 N) on the device. When the
result goes back to the host, subjects run in chunks sized by ``kernelrt.fit_batch``
(two chunks in flight must fit) through two working sets of the topology's
``DeviceBufferPool``, one stream each: chunk i+1's upload and kernel are queued before
chunk i's download, so they overlap it, and each download goes straight into the rows
of the result arrays handed back (no staging copy, no extra host pass). A cohort that
would fit whole is still cut into about ``PIPELINE_CHUNKS`` chunks (none under
``MIN_CHUNK_BYTES``) so that there is something to overlap. Results are the serial
version's bits: the same kernel on the same rows. When the result stays on the device,
the whole cohort must fit or a ``DeviceMemoryError`` says so before anything is launched.

The flag counts reach the caller without a copy of their own on the host path (the
counter is downloaded with each chunk); device results wait for the launch once, to
read the counter for the report.
"""

from __future__ import annotations

import numpy as np
from numba import cuda

import kernelrt

from .assembly import COUNTER_WORDS, ISOLATED, assemble_values, new_counter
from .buffers import DeviceBufferPool

__all__ = ["run_on_device", "bytes_per_subject", "pipeline_chunk", "PIPELINE_CHUNKS", "MIN_CHUNK_BYTES"]

PIPELINE_CHUNKS = 4
MIN_CHUNK_BYTES = 32 << 20  # smaller copies pay their fixed cost more than they overlap


def bytes_per_subject(n_vertices: int, nnz: int) -> int:
    return 24 * n_vertices + 8 * nnz + 16 * n_vertices


def pipeline_chunk(n_subjects: int, fit: int, per_subject: int) -> tuple[int, int]:
    """``(subjects per chunk, working sets)`` for ``fit`` subjects fitting the device at once."""
    half = fit // 2
    if n_subjects <= 1 or half < 1:
        return max(1, min(n_subjects, fit)), 1  # one chunk in flight at a time
    want = max(-(-n_subjects // PIPELINE_CHUNKS), -(-MIN_CHUNK_BYTES // per_subject))
    chunk = min(half, want, n_subjects)
    return chunk, 1 if chunk >= n_subjects else 2


def run_on_device(backend, tables, V3: np.ndarray, variant: str, nnz: int, keep_on_device: bool,
                  pool: DeviceBufferPool | None = None):
    """Assemble vertices ``V3`` (S, N, 3), host or device, on ``backend``; see the module docstring.

    ``pool``: the topology's device working sets (None: sets made for this call only).
    Returns ``(vals, mass, n_degenerate, n_isolated)`` with host arrays, or device arrays
    when ``keep_on_device``.
    """
    S, N = V3.shape[0], V3.shape[1]
    pool = pool if pool is not None else DeviceBufferPool(max_bytes=0)
    on_device = backend.is_device_array(V3)
    if keep_on_device:
        if not on_device:
            per = bytes_per_subject(N, nnz)
            free, _ = backend.get_memory_info()
            fit = kernelrt.fit_batch(S, per, free_bytes=free, what="cotangent assembly")
            if fit < S:
                raise kernelrt.DeviceMemoryError(
                    f"keep_on_device needs {S * per} bytes for {S} subjects but only {fit} subjects "
                    f"fit in the free device memory ({free} bytes); pass keep_on_device=False to "
                    f"assemble in chunks and copy each back",
                    S * per,
                    free,
                )
            V3 = backend.to_device(V3)
        scratch = pool.take(backend, S, N, nnz, False, new_counter)  # flags and counter only
        done = assemble_values(backend, tables, V3, variant, scratch=scratch)
        n_bad, n_iso = done.counts()  # the report needs them: waits for the launch
        pool.give(scratch)
        return done.vals, done.mass, n_bad, n_iso
    if on_device:  # one launch, the result comes back whole
        chunk, n_slots = S, 1
    else:
        per = bytes_per_subject(N, nnz)
        free, _ = backend.get_memory_info()
        chunk, n_slots = pipeline_chunk(S, kernelrt.fit_batch(S, per, free_bytes=free, what="cotangent assembly"),
                                        per)
    return _pipeline(backend, tables, V3, variant, nnz, chunk, n_slots, pool)


def _pipeline(backend, tables, V3, variant, nnz, chunk, n_slots, pool):
    S, N = V3.shape[0], V3.shape[1]
    starts = list(range(0, S, chunk))
    upload = not backend.is_device_array(V3)
    vals_h = np.empty((S, nnz), np.float64)
    mass_h = np.empty((S, N), np.float64)
    counts_h = np.zeros((len(starts), COUNTER_WORDS), np.int64)
    with backend.activated():  # numba's copies below run in the current device's context
        slots = [pool.take(backend, chunk, N, nnz, True, new_counter) for _ in range(n_slots)]

        def launch(c):
            a, b = starts[c], min(S, starts[c] + chunk)
            scratch = slots[c % n_slots]
            V = V3[a:b]
            if upload:
                V = _into_device(np.ascontiguousarray(V), scratch.verts[: b - a], scratch.stream)
            return assemble_values(backend, tables, V, variant, scratch=scratch, stream=scratch.stream)

        pending = launch(0)
        for c, a in enumerate(starts):
            b = min(S, a + chunk)
            done, stream = pending, slots[c % n_slots].stream
            # two sets: queue the next chunk first, so its upload and kernel overlap this
            # download (one set: the next chunk would overwrite this one's outputs: it waits)
            if n_slots == 2 and c + 1 < len(starts):
                pending = launch(c + 1)
            # straight into the result rows, final once the stream is synchronised
            backend.to_host(done.vals, stream=stream, out=vals_h[a:b])
            backend.to_host(done.mass, stream=stream, out=mass_h[a:b])
            backend.to_host(done.count, stream=stream, out=counts_h[c])
            if n_slots == 1 and c + 1 < len(starts):
                stream.synchronize()
                pending = launch(c + 1)
        for scratch in slots:
            scratch.stream.synchronize()
            pool.give(scratch)
    total = int(counts_h[:, 2].sum())
    return vals_h, mass_h, total % ISOLATED, total // ISOLATED


def _numba_view(d):
    """A numba device array over ``d`` (CuPy and other array-interface arrays: no sync)."""
    return d if hasattr(d, "copy_to_host") else cuda.as_cuda_array(d, sync=False)


def _into_device(host: np.ndarray, d, stream):
    """Queue the copy of ``host`` into device array ``d`` on ``stream``; returns ``d``."""
    _numba_view(d).copy_to_device(host, stream=stream)
    return d

