"""GPU probe sections ``copies`` and ``launch``: the runtime's transfers and launch path against their floors.

``copies``: ``to_device`` from pageable and from pinned host memory, ``to_host`` into a
new array and, where the backend's ``to_host`` takes ``out=``, into a pinned buffer the
caller owns; 4 MB to 1 GB on a GPU. Floor: bytes over pinned PCIe (R2).

``launch``: a 1,024-element axpy (4 arrays and a scalar, GPU_PLAN R1) launched by
kernelrt on the backend's arrays, on numba and CuPy arrays, through
``backend.prepare`` where the backend has it, and by numba's own ``kernel[grid, block]``
and a CuPy ``RawKernel``. The figure is the host's time per launch; the device time per
launch rides along. Floor: cuLaunchKernel's ~3 µs.
"""

from __future__ import annotations

import importlib.util
import inspect

import numpy as np
from gpu_floors import copy_floor, launch_floor
from gpu_report import error_row, make_row
from gpu_timing import e2e, kernel_only

from numba import cuda

import kernelrt

__all__ = ["run_copies", "run_launch", "axpy"]

N_AXPY = 1024


@kernelrt.kernel
def axpy(i, out, x, y, a):
    if i < out.shape[0]:
        out[i] = a * x[i] + y[i]


@cuda.jit  # numba's own launch of the same loop; a module global, as the CUDA simulator needs
def axpy_cuda(out, x, y, a):
    i = cuda.grid(1)
    if i < out.shape[0]:
        out[i] = a * x[i] + y[i]


def _sizes_mb(probe) -> list[int]:
    if probe.kind == "gpu":
        return [4, 64] if probe.quick else [4, 16, 64, 256, 1024]
    return [1] if (probe.quick or probe.kind == "simulated") else [1, 4]


def _pinned(probe, shape):
    """A page-locked host array where the backend can make one (its own helper if it has one), else numpy."""
    be = probe.backend
    if hasattr(be, "pinned_empty"):
        return be.pinned_empty(shape, np.float64)
    if be.name == "cuda":
        from numba import cuda

        with be.activated():
            return cuda.pinned_array(shape, np.float64)
    return np.empty(shape, np.float64)


def _has_out(be) -> bool:
    try:
        return "out" in inspect.signature(be.to_host).parameters
    except (TypeError, ValueError):
        return False


def run_copies(probe, budget) -> list[dict]:
    be, rows = probe.backend, []
    for mb in _sizes_mb(probe):
        case = f"copy-{mb}MB"
        if not budget.allows(case, 0.02 * mb if probe.gpu else 0.05 * mb):
            continue
        n = mb * (1 << 20) // 8
        floor = copy_floor(n * 8, probe.peaks)
        host = np.full(n, 1.5)  # cheap to make at 1 GB; the copies do not look at the values
        pinned = _pinned(probe, n)
        pinned[:] = host
        cases = [("to_device pageable", lambda: be.to_device(host)),
                 ("to_device pinned", lambda: be.to_device(pinned))]
        dev = be.to_device(host)
        cases.append(("to_host", lambda: be.to_host(dev)))
        if _has_out(be):
            out = _pinned(probe, n)
            cases.append(("to_host out=pinned", lambda: be.to_host(dev, out=out)))
        for what, fn in cases:
            try:
                timing = e2e(probe, fn, profile=mb >= 64)  # the >= 20 GB/s target is at >= 64 MB
                rows.append(make_row(probe, "copies", f"{case} {what}", "copy", timing, floor,
                                     bandwidth_gbs=n * 8 / timing["seconds"] / 1e9))
            except Exception as error:  # noqa: BLE001  (one failing case must not end the probe)
                rows.append(error_row("copies", f"{case} {what}", "copy", error))
        del dev, host, pinned
    return rows


def _launch_cases(probe):
    """(label, launch()) pairs for the axpy; each launch() is one launch with its arguments bound."""
    be = probe.backend
    rng = np.random.default_rng(0)
    host = [np.zeros(N_AXPY), rng.random(N_AXPY), rng.random(N_AXPY)]
    grid, block = N_AXPY // 128, 128
    arrays = [be.to_device(a) for a in host]
    kind = {"cpu": "numpy"}.get(be.name, getattr(be, "arrays", "?"))
    cases = [(f"kernelrt on {kind} arrays", lambda: be.launch_kernel(axpy, grid, block, *arrays, 2.0))]
    if hasattr(be, "prepare"):
        prepared = be.prepare(axpy, grid, block, *arrays, 2.0)
        cases.append(("kernelrt prepared launch", prepared))
    if be.name == "cpu":
        import numba

        @numba.njit(parallel=True)
        def axpy_numba(out, x, y, a):
            for i in numba.prange(out.shape[0]):
                out[i] = a * x[i] + y[i]

        cases.append(("numba njit(parallel) call", lambda: axpy_numba(*host, 2.0)))
        return cases
    with be.activated():
        numba_arrays = [cuda.to_device(a) for a in host]
    if kind != "numba":
        cases.append(("kernelrt on numba arrays", lambda: be.launch_kernel(axpy, grid, block, *numba_arrays, 2.0)))

    def numba_own():
        with be.activated():
            axpy_cuda[grid, block](*numba_arrays, 2.0)

    cases.append(("numba kernel[grid, block]", numba_own))
    if probe.gpu and importlib.util.find_spec("cupy") is not None:
        import cupy as cp

        with be.activated():
            cupy_arrays = [cp.asarray(a) for a in host]
            raw = cp.RawKernel(r'''extern "C" __global__ void axpy(double* out, const double* x, const double* y,
                double a, int n) { int i = blockIdx.x * blockDim.x + threadIdx.x; if (i < n) out[i] = a * x[i] + y[i]; }''',
                               "axpy")
        if kind != "cupy":
            cases.append(("kernelrt on cupy arrays", lambda: be.launch_kernel(axpy, grid, block, *cupy_arrays, 2.0)))

        def cupy_raw():
            with be.activated():
                raw((grid,), (block,), (*cupy_arrays, np.float64(2.0), np.int32(N_AXPY)))

        cases.append(("cupy RawKernel", cupy_raw))
    return cases


def run_launch(probe, budget) -> list[dict]:
    rows = []
    if not budget.allows("launch", 1.0):
        return rows
    try:
        cases = _launch_cases(probe)
    except Exception as error:  # noqa: BLE001
        return [error_row("launch", "axpy", "launch", error)]
    floor = launch_floor()
    for label, fn in cases:
        if not budget.allows(label, 0.2):
            continue
        try:
            t = kernel_only(probe, fn, 200)
            timing = {**t, "seconds": t["host_per_launch_s"], "device_per_launch_s": t["seconds"]}
            rows.append(make_row(probe, "launch", label, "launch", timing, floor, elements=N_AXPY))
        except Exception as error:  # noqa: BLE001
            rows.append(error_row("launch", label, "launch", error))
    return rows
