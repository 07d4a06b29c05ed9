"""Cohort assembly on a CUDA device within its free memory.

Owns the split of S subjects into launches that fit: each subject needs its vertices
(24 N bytes), values (8 nnz), masses (8 N) and flags (8 N) on the device. When the
result goes back to the host, subjects are processed in chunks sized by
``kernelrt.fit_batch``; when it stays on the device, the whole cohort must fit or a
``DeviceMemoryError`` says so before anything is launched.
"""

from __future__ import annotations

import numpy as np

import kernelrt

from .assembly import assemble_values

__all__ = ["run_on_device", "bytes_per_subject"]


def bytes_per_subject(n_vertices: int, nnz: int) -> int:
    return 24 * n_vertices + 8 * nnz + 16 * n_vertices


def run_on_device(backend, tables, V3: np.ndarray, variant: str, nnz: int, keep_on_device: bool):
    """Assemble vertices ``V3`` (S, N, 3), host or device, on ``backend``; see the module docstring.

    Returns ``(vals, mass, n_degenerate, n_isolated)`` with host arrays, or device arrays
    when ``keep_on_device``.
    """
    S, N = V3.shape[0], V3.shape[1]
    if backend.is_device_array(V3):  # already resident: one launch, the result stays or comes back whole
        vals, mass, n_bad, n_iso = assemble_values(backend, tables, V3, variant)
        if not keep_on_device:
            vals, mass = backend.to_host(vals), backend.to_host(mass)
        return vals, mass, n_bad, n_iso
    per = bytes_per_subject(N, nnz)
    free, _ = backend.get_memory_info()
    chunk = kernelrt.fit_batch(S, per, free_bytes=free, what="cotangent assembly")
    if keep_on_device:
        if chunk < S:
            raise kernelrt.DeviceMemoryError(
                f"keep_on_device needs {S * per} bytes for {S} subjects but only {chunk} subjects "
                f"fit in the free device memory ({free} bytes); pass keep_on_device=False to "
                f"assemble in chunks and copy each back",
                S * per,
                free,
            )
        vals, mass, n_bad, n_iso = assemble_values(backend, tables, backend.to_device(V3), variant)
        return vals, mass, n_bad, n_iso
    vals_h = np.empty((S, nnz), np.float64)
    mass_h = np.empty((S, N), np.float64)
    n_bad = n_iso = 0
    for a in range(0, S, chunk):
        b = min(S, a + chunk)
        vals, mass, nb, ni = assemble_values(backend, tables, backend.to_device(V3[a:b]), variant)
        vals_h[a:b] = backend.to_host(vals)
        mass_h[a:b] = backend.to_host(mass)
        n_bad += nb
        n_iso += ni
    return vals_h, mass_h, n_bad, n_iso
