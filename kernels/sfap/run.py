"""Launch sequence of ``compute_sfaps`` on one backend: batches, kernels, delay, MUAP.

For each batch of fibres: copy the batch's host tables, launch ``sfap_response`` (h) and
``sfap_columns`` (the raw SFAPs, written straight into the full output array). Then the
delay and the MUAP: NumPy FFT and sum on the CPU, ``sfap_delay`` and ``sfap_muap`` on a
device, so a CUDA run copies nothing back unless asked.

The batch size comes from ``kernelrt.fit_batch`` with the backend's free memory (on the
CPU also capped at ``HOST_BUDGET_BYTES``), so a dz = 0.01 run with hundreds of fibres
never allocates more h than fits.

On a device the host plans each batch's tables (prep.plan_tables) right after launching
the batch before it, so the planning of batch b+1 runs while the device works on batch b;
a call is split into at least ``PIPELINE_BATCHES`` batches (of ``PIPELINE_MIN_FIBRES`` or
more) for that. Everything the last launches need is copied before the first, so the
call returns as soon as its last kernel is queued. On the CPU the kernels take every core,
so planning is done once, up front, and batches are slices of it. Batches never change
the result (docs/sfap.md, "Batching does not change the result").
"""

from __future__ import annotations

import numba
import numpy as np

import kernelrt

from ..variants import variant as chosen_variant
from .columns_tiled import RE, TR, columns_tiling, sfap_columns_tiled
from .delay import DELAY_BLOCK, delay_fft, dirichlet_table, launch_delay, sfap_muap
from .kernels import COLUMNS_BLOCK, TK, TPB_E, sfap_columns, sfap_response
from .prep import I_NZ, N_FPAR, N_IPAR, FibreTables, UnitPlan, plan_tables

__all__ = [
    "DELAY_BLOCK",
    "MUAP_BLOCK",
    "RESPONSE_BLOCK",
    "allocate_responses",
    "batch_bytes",
    "batch_size",
    "launch_columns",
    "launch_response",
    "pipeline_batch",
    "plan_ahead",
    "run_plan",
    "upload_batch",
]

RESPONSE_BLOCK = (256, 1, 1)
MUAP_BLOCK = (32, 8, 1)
_MAX_GRID_Y = 65535  # fibres per batch are the grid's y extent

HOST_BUDGET_BYTES = 1 << 30  # at most this much RAM for per-fibre buffers on the CPU
# On the CPU a batch needs only enough fibres to keep every thread busy: the columns twin
# splits each fibre into tiles (kernels.MIN_CPU_TASKS), so a few fibres per thread do;
# more only costs memory (h is Nz x Ne doubles per fibre: 1.5 MB at dz 0.01, 16 electrodes).
CPU_FIBRES_PER_THREAD = 4
# On a device: split a call into this many batches at least, of this many fibres at least,
# so that host planning overlaps the kernels (a batch costs about 7 copies and 2 launches).
PIPELINE_BATCHES = 4
PIPELINE_MIN_FIBRES = 32


def _ceil_div(a: int, b: int) -> int:
    return -(-a // b)


def batch_bytes(backend_name: str, plan: UnitPlan, ne: int) -> tuple[int, int]:
    """(bytes per fibre of a batch, bytes fixed for the whole call) on that backend.

    ``plan`` is a ``UnitPlan`` or a ``FibrePlan`` (both have ``vt`` and ``nz_max``).
    """
    nf, nt = plan.vt.shape
    nz = plan.nz_max
    # h, z, vt and the two row bounds per sample, and the small per-fibre tables.
    per_fibre = 8 * (nz * ne + (nz + 1) + 3 * nt) + 8 * (N_IPAR + N_FPAR + ne)
    outputs = 8 * nt * ne * nf
    if backend_name == "cpu":
        fixed = 4 * outputs  # raw, delayed, and the FFT's shifted copy and spectrum
    else:  # raw, delayed, the Dirichlet table, the MUAP and the shifts
        fixed = 2 * outputs + 8 * (nf * (2 * nt - 1) + nt * ne + 2 * nf)
    return per_fibre, fixed


def batch_size(backend, plan: UnitPlan, ne: int) -> int:
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


def pipeline_batch(nf: int) -> int:
    """The most fibres a device batch holds so that planning overlaps the kernels."""
    return max(PIPELINE_MIN_FIBRES, _ceil_div(nf, PIPELINE_BATCHES))


def plan_ahead(unit: UnitPlan) -> tuple[int, FibreTables]:
    """The tables of a device call's first batch, planned before the call (``run_plan``'s
    ``planned``): ``compute_many`` plans unit u+1 this way while unit u runs."""
    n = min(unit.vt.shape[0], pipeline_batch(unit.vt.shape[0]))
    return 0, plan_tables(unit, 0, n)


def _tables_for(unit: UnitPlan, planned, f0: int, f1: int) -> FibreTables:
    """Fibres f0 .. f1 - 1's tables: rows of ``planned`` (first fibre, tables) if it holds them."""
    if planned is not None:
        p0, tables = planned
        if p0 <= f0 and f1 <= p0 + tables.ipar.shape[0]:
            a, b = f0 - p0, f1 - p0
            return FibreTables(z=tables.z[a:b], ipar=tables.ipar[a:b], fpar=tables.fpar[a:b], rows=tables.rows[a:b])
    return plan_tables(unit, f0, f1)


def upload_batch(backend, plan, f0: int, f1: int, tables: FibreTables | None = None) -> dict:
    """The per-fibre tables of fibres f0 .. f1 - 1 as backend arrays.

    ``plan``: a ``FibrePlan`` (its rows f0 .. f1 - 1 are copied), or a ``UnitPlan`` with
    ``tables`` holding exactly those fibres (``plan_tables(unit, f0, f1)``).
    """
    tables = tables or FibreTables(z=plan.z[f0:f1], ipar=plan.ipar[f0:f1], fpar=plan.fpar[f0:f1], rows=plan.rows[f0:f1])
    return {
        "z": backend.to_device(tables.z),
        "nz": backend.to_device(np.ascontiguousarray(tables.ipar[:, I_NZ])),
        "kr2": backend.to_device(plan.kr2[f0:f1]),
        "vt": backend.to_device(plan.vt[f0:f1]),
        "ipar": backend.to_device(tables.ipar),
        "fpar": backend.to_device(tables.fpar),
        "rows": backend.to_device(tables.rows),
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


def launch_columns(backend, batch: dict, h, raw, variant: str | None = None) -> None:
    """The batch's raw SFAPs, written into raw[:, :, f0:f0 + count].

    ``variant``: "rows" (``sfap_columns``) or "tiled" (``sfap_columns_tiled``, GPU only:
    the CPU runs its own twin either way); None: ``variants.variant("sfap_columns")``.
    """
    nt, ne = raw.shape[0], raw.shape[1]
    args = (batch["z"], batch["vt"], h, batch["ipar"], batch["fpar"], batch["rows"], raw, batch["f0"])
    if chosen_variant("sfap_columns", variant) == "tiled" and backend.name != "cpu":
        block, rc, smem = columns_tiling(ne)
        grid = (_ceil_div(nt, TR * block[1]), batch["count"], _ceil_div(ne, RE * block[0]))
        backend.launch_kernel(sfap_columns_tiled, grid, block, *args, rc, shared_mem=smem)
        return
    grid = (_ceil_div(nt, TK), batch["count"], _ceil_div(ne, TPB_E))
    backend.launch_kernel(sfap_columns, grid, COLUMNS_BLOCK, *args)


def run_plan(backend, unit: UnitPlan, ze: np.ndarray, *, keep_raw: bool = True, progress=None, planned=None):
    """(sfaps_raw, sfaps, muap) for ``unit``; backend arrays (numpy on the CPU).

    ``keep_raw=False`` delays the SFAPs in place of the raw ones (one (Nt, Ne, Nf) array
    instead of two) and returns None for them. ``progress(n)`` is called after each batch
    of n fibres. ``planned``: (first fibre, ``FibreTables``) already planned (``plan_ahead``).
    On a device the call returns once everything is queued; the arrays are valid in
    stream order.
    """
    nf, nt = unit.vt.shape
    ne = ze.shape[0]
    on_cpu = backend.name == "cpu"
    nb = batch_size(backend, unit, ne)
    if on_cpu:
        planned = planned or (0, plan_tables(unit))  # all cores run the kernels: plan once, up front
    else:
        nb = min(nb, pipeline_batch(nf))
    batches = [(f0, min(nf, f0 + nb)) for f0 in range(0, nf, nb)]
    raw = backend.zeros((nt, ne, nf), np.float64)
    h = allocate_responses(backend, nb, unit.nz_max, ne)
    ze_d = backend.to_device(ze)
    # The delay's inputs are copied now: a copy after the launches would wait for them.
    delay_args = None if on_cpu else (backend.to_device(dirichlet_table(nt, unit.delay_frac)),
                                      backend.to_device(unit.delay_int))
    tables = _tables_for(unit, planned, *batches[0])
    for i, (f0, f1) in enumerate(batches):
        batch = upload_batch(backend, unit, f0, f1, tables)
        hb = h if batch["count"] == nb else h[: batch["count"]]
        launch_response(backend, batch, ze_d, hb)
        launch_columns(backend, batch, hb, raw)
        if i + 1 < len(batches):  # the host plans the next batch while the device runs this one
            tables = _tables_for(unit, planned, *batches[i + 1])
        if progress is not None:
            backend.synchronize()
            progress(batch["count"])
    del h
    if on_cpu:
        sfaps = delay_fft(raw, unit.delay_int, unit.delay_frac, out=None if keep_raw else raw)
        return (raw if keep_raw else None), sfaps, sfaps.sum(axis=2)
    sfaps, muap = _delay_on_device(backend, raw, *delay_args)
    return (raw if keep_raw else None), sfaps, muap


def _delay_on_device(backend, raw, table, shifts):
    nt, ne, nf = raw.shape
    sfaps = backend.allocate((nt, ne, nf), np.float64)
    launch_delay(backend, raw, table, shifts, sfaps)
    muap = backend.allocate((nt, ne), np.float64)
    grid = (_ceil_div(ne, MUAP_BLOCK[0]), _ceil_div(nt, MUAP_BLOCK[1]), 1)
    backend.launch_kernel(sfap_muap, grid, MUAP_BLOCK, sfaps, muap)
    return sfaps, muap
