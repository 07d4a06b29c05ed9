"""Launch sequence of ``compute_sfaps`` on one backend: batches, kernels, delay, MUAP.

For each batch of fibres: copy the batch's host tables, launch ``sfap_response`` (h) and
``sfap_columns`` (the raw SFAPs, written straight into the full output array). Then the
delay and the MUAP: NumPy FFT and sum on the CPU, ``sfap_delay`` and ``sfap_muap`` on a
device, so a CUDA run copies nothing back unless asked.

The batch size comes from ``kernelrt.fit_batch`` with the backend's free memory (on the
CPU also capped at ``HOST_BUDGET_BYTES``), so a dz = 0.01 run with hundreds of fibres
never allocates more h than fits.
"""

from __future__ import annotations

import numba
import numpy as np

import kernelrt

from .delay import delay_fft, dirichlet_table, sfap_delay, sfap_muap
from .kernels import COLUMNS_BLOCK, TK, TPB_E, sfap_columns, sfap_response
from .prep import I_NZ, FibrePlan

__all__ = [
    "DELAY_BLOCK",
    "MUAP_BLOCK",
    "RESPONSE_BLOCK",
    "allocate_responses",
    "batch_bytes",
    "batch_size",
    "launch_columns",
    "launch_response",
    "run_plan",
    "upload_batch",
]

RESPONSE_BLOCK = (256, 1, 1)
DELAY_BLOCK = (64, 4, 1)
MUAP_BLOCK = (32, 8, 1)
_MAX_GRID_Y = 65535  # fibres per batch are the grid's y extent

HOST_BUDGET_BYTES = 1 << 30  # at most this much RAM for per-fibre buffers on the CPU
# On the CPU a batch needs only enough fibres to keep every thread busy: the columns twin
# splits each fibre into tiles (kernels.MIN_CPU_TASKS), so a few fibres per thread do;
# more only costs memory (h is Nz x Ne doubles per fibre: 1.5 MB at dz 0.01, 16 electrodes).
CPU_FIBRES_PER_THREAD = 4


def _ceil_div(a: int, b: int) -> int:
    return -(-a // b)


def batch_bytes(backend_name: str, plan: FibrePlan, ne: int) -> tuple[int, int]:
    """(bytes per fibre of a batch, bytes fixed for the whole call) on that backend."""
    nf, nt = plan.vt.shape
    nz = plan.nz_max
    # h, z, vt and the two row bounds per sample, and the small per-fibre tables.
    per_fibre = 8 * (nz * ne + (nz + 1) + 3 * nt) + 8 * (plan.ipar.shape[1] + plan.fpar.shape[1] + ne)
    outputs = 8 * nt * ne * nf
    if backend_name == "cpu":
        fixed = 4 * outputs  # raw, delayed, and the FFT's shifted copy and spectrum
    else:  # raw, delayed, the Dirichlet table, the MUAP and the shifts
        fixed = 2 * outputs + 8 * (nf * (2 * nt - 1) + nt * ne + 2 * nf)
    return per_fibre, fixed


def batch_size(backend, plan: FibrePlan, ne: int) -> int:
    """Fibres per batch that fit 70 % of the backend's free memory (and the host budget)."""
    nf = plan.vt.shape[0]
    per_fibre, fixed = batch_bytes(backend.name, plan, ne)
    free, _ = backend.get_memory_info()
    cap = _MAX_GRID_Y
    if backend.name == "cpu":
        free = min(free, HOST_BUDGET_BYTES)
        cap = CPU_FIBRES_PER_THREAD * numba.get_num_threads()
    n = kernelrt.fit_batch(nf, per_fibre, fixed_bytes=fixed, free_bytes=free, what="compute_sfaps")
    return min(n, cap)


def upload_batch(backend, plan: FibrePlan, f0: int, f1: int) -> dict:
    """The per-fibre tables of fibres f0 .. f1 - 1 as backend arrays."""
    return {
        "z": backend.to_device(plan.z[f0:f1]),
        "nz": backend.to_device(np.ascontiguousarray(plan.ipar[f0:f1, I_NZ])),
        "kr2": backend.to_device(plan.kr2[f0:f1]),
        "vt": backend.to_device(plan.vt[f0:f1]),
        "ipar": backend.to_device(plan.ipar[f0:f1]),
        "fpar": backend.to_device(plan.fpar[f0:f1]),
        "rows": backend.to_device(plan.rows[f0:f1]),
        "f0": int(f0),
        "count": int(f1 - f0),
    }


def allocate_responses(backend, nb: int, nz: int, ne: int):
    """The h buffer for ``nb`` fibres: (nb, nz, ne) on a device, (nb, ne, nz) on the CPU.

    Lanes of a GPU warp are electrodes, so h[fb, j, :] is contiguous there; the CPU twin
    reduces over rows with SIMD, so it wants h[fb, e, :] contiguous instead.
    """
    shape = (nb, ne, nz) if backend.name == "cpu" else (nb, nz, ne)
    return backend.allocate(shape, np.float64)


def launch_response(backend, batch: dict, ze, h) -> None:
    """h for the batch (``h`` from ``allocate_responses``, at least ``batch["count"]`` fibres)."""
    ne = ze.shape[0]
    nz = batch["z"].shape[1] - 1
    grid = (_ceil_div(nz * ne, RESPONSE_BLOCK[0]), batch["count"], 1)
    view = h.transpose(0, 2, 1) if backend.name == "cpu" else h  # the kernel writes h[fb, j, e]
    backend.launch_kernel(sfap_response, grid, RESPONSE_BLOCK, batch["z"], batch["kr2"], ze, batch["nz"], view)


def launch_columns(backend, batch: dict, h, raw) -> None:
    """The batch's raw SFAPs, written into raw[:, :, f0:f0 + count]."""
    nt, ne = raw.shape[0], raw.shape[1]
    grid = (_ceil_div(nt, TK), batch["count"], _ceil_div(ne, TPB_E))
    args = (batch["z"], batch["vt"], h, batch["ipar"], batch["fpar"], batch["rows"], raw, batch["f0"])
    backend.launch_kernel(sfap_columns, grid, COLUMNS_BLOCK, *args)


def run_plan(backend, plan: FibrePlan, ze: np.ndarray, *, keep_raw: bool = True, progress=None):
    """(sfaps_raw, sfaps, muap) for ``plan``; backend arrays (numpy on the CPU).

    ``keep_raw=False`` delays the SFAPs in place of the raw ones (one (Nt, Ne, Nf) array
    instead of two) and returns None for them. ``progress(n)`` is called after each batch
    of n fibres.
    """
    nf, nt = plan.vt.shape
    ne = ze.shape[0]
    nb = batch_size(backend, plan, ne)
    raw = backend.zeros((nt, ne, nf), np.float64)
    h = allocate_responses(backend, nb, plan.nz_max, ne)
    ze_d = backend.to_device(ze)
    for f0 in range(0, nf, nb):
        batch = upload_batch(backend, plan, f0, min(nf, f0 + nb))
        hb = h if batch["count"] == nb else h[: batch["count"]]
        launch_response(backend, batch, ze_d, hb)
        launch_columns(backend, batch, hb, raw)
        if progress is not None:
            backend.synchronize()
            progress(batch["count"])
    del h
    if backend.name == "cpu":
        sfaps = delay_fft(raw, plan.delay_int, plan.delay_frac, out=None if keep_raw else raw)
        return (raw if keep_raw else None), sfaps, sfaps.sum(axis=2)
    sfaps, muap = _delay_on_device(backend, plan, raw)
    return (raw if keep_raw else None), sfaps, muap


def _delay_on_device(backend, plan: FibrePlan, raw):
    nt, ne, nf = raw.shape
    table = backend.to_device(dirichlet_table(nt, plan.delay_frac))
    shifts = backend.to_device(plan.delay_int)
    sfaps = backend.allocate((nt, ne, nf), np.float64)
    grid = (_ceil_div(nt, DELAY_BLOCK[0]), _ceil_div(ne, DELAY_BLOCK[1]), nf)
    backend.launch_kernel(sfap_delay, grid, DELAY_BLOCK, raw, table, shifts, sfaps)
    muap = backend.allocate((nt, ne), np.float64)
    grid = (_ceil_div(ne, MUAP_BLOCK[0]), _ceil_div(nt, MUAP_BLOCK[1]), 1)
    backend.launch_kernel(sfap_muap, grid, MUAP_BLOCK, sfaps, muap)
    return sfaps, muap
