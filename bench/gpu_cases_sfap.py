"""GPU probe section ``sfap``: host planning, each SFAP kernel alone and ``compute_sfaps`` end to end.

Cases: bench_sfap.py's six (200 fibres x 25 electrodes at dz 0.1; 50 x 25 at dz 0.5 to
0.01) and MyoGen's default muscle as one average motor unit: 436 fibres x 4 electrodes
at dz 0.01 in a 30 mm muscle (GPU_PLAN S6; 4,357 fibres over 10 units). Smaller under
``--quick``, and tiny on the CPU backend and the simulator. Per case: ``plan_fibres``
(host), ``sfap_response``, ``sfap_columns``, ``sfap_delay`` and ``sfap_muap``
kernel-only on fixed device inputs, and ``compute_sfaps`` (host arrays in and out).
Floors: ``gpu_floors.sfap_floors`` from the plan's own work counts; the columns row
also carries the current kernel's L1 design bound.
"""

from __future__ import annotations

import numpy as np
from gpu_floors import sfap_counts, sfap_floors
from gpu_report import error_row, make_row
from gpu_timing import e2e, host_time, kernel_only

__all__ = ["run_sfap", "sfap_cases", "SfapSetup"]

MYOGEN = "myogen"  # MyoGen's default muscle: one average unit, 4 electrodes, a 30 mm muscle


def sfap_cases(probe) -> list[tuple[str, int, int, float, float]]:
    """(name, fibres, electrodes, dz, muscle length mm) for this probe's kind and ``--quick``."""
    if probe.kind == "simulated":
        return [(f"{MYOGEN}-2x4-dz1", 2, 4, 1.0, 6.0)]  # each simulated thread is a Python thread
    if probe.kind == "cpu":
        if probe.quick:
            return [("sfap-8x5-dz0.5", 8, 5, 0.5, 30.0), (f"{MYOGEN}-16x4-dz0.1", 16, 4, 0.1, 30.0)]
        return [("sfap-50x25-dz0.5", 50, 25, 0.5, 120.0), (f"{MYOGEN}-436x4-dz0.1", 436, 4, 0.1, 30.0)]
    bench = [("sfap-200x25-dz0.1", 200, 25, 0.1, 120.0)] + [
        (f"sfap-50x25-dz{dz:g}", 50, 25, dz, 120.0) for dz in (0.5, 0.1, 0.05, 0.02, 0.01)]
    if probe.quick:
        bench = [bench[0], bench[-1]]
    return bench + [(f"{MYOGEN}-436x4-dz0.01", 436, 4, 0.01, 30.0)]


class SfapSetup:
    """One case's plan and device inputs, and a launcher per kernel (used by the probe and ``--ncu``)."""

    def __init__(self, backend, nf: int, ne: int, dz: float, length: float, batch: int | None = None):
        from kernelrt.kernels.sfap import run as sfap_run
        from kernelrt.kernels.sfap.delay import dirichlet_table
        from kernelrt.kernels.sfap.inputs import check_inputs
        from kernelrt.kernels.sfap.prep import plan_fibres
        from kernelrt.kernels.sfap.reference import synthetic_motor_unit

        self.be, self.run = backend, sfap_run
        self.case = synthetic_motor_unit(nf, ne, dz, length=length)
        self.inputs = check_inputs(**self.case, min_radial_dist=None)
        self.plan_fn = lambda: plan_fibres(**self.inputs)
        self.full_plan = self.plan_fn()
        # The kernels run on one batch: on the CPU a batch holds a few fibres per thread; on a GPU
        # all of them unless free memory says otherwise, or ``batch`` (compute_sfaps' pipeline
        # launches batches of run.pipeline_batch(nf) fibres). Floors use the same fibres.
        nb = min(self.full_plan.vt.shape[0], sfap_run.batch_size(backend, self.full_plan, ne), batch or nf)
        self.plan = plan = _first(self.full_plan, nb)
        self.nf, self.nt = plan.vt.shape
        self.ne = ne
        be = backend
        self.batch = sfap_run.upload_batch(be, plan, 0, self.nf)
        self.ze = be.to_device(self.inputs["electrodes"][:, 2].copy())
        self.h = sfap_run.allocate_responses(be, self.nf, plan.nz_max, ne)
        self.raw = be.zeros((self.nt, ne, self.nf), np.float64)
        self.table = be.to_device(dirichlet_table(self.nt, plan.delay_frac))
        self.shifts = be.to_device(plan.delay_int)
        self.sfaps = be.zeros((self.nt, ne, self.nf), np.float64)
        self.muap = be.zeros((self.nt, ne), np.float64)

    def response(self):
        self.run.launch_response(self.be, self.batch, self.ze, self.h)

    def columns(self, variant: str | None = None):
        self.run.launch_columns(self.be, self.batch, self.h, self.raw, variant)

    def delay(self, variant: str | None = None):
        from kernelrt.kernels.sfap.delay import launch_delay

        launch_delay(self.be, self.raw, self.table, self.shifts, self.sfaps, variant)

    def muap_sum(self):
        from kernelrt.kernels.sfap.delay import sfap_muap

        b = self.run.MUAP_BLOCK
        self.be.launch_kernel(sfap_muap, (-(-self.ne // b[0]), -(-self.nt // b[1]), 1), b, self.sfaps, self.muap)

    def kernels(self) -> list:
        """(kernel name, launcher) in the order the library runs them."""
        return [("sfap_response", self.response), ("sfap_columns", self.columns), ("sfap_delay", self.delay),
                ("sfap_muap", self.muap_sum)]


def _first(plan, nb: int):
    """The plan of the first ``nb`` fibres (the time grid is the whole unit's)."""
    import dataclasses

    if nb == plan.vt.shape[0]:
        return plan
    per_fibre = ("z", "ipar", "fpar", "vt", "kr2", "rows", "delay_int", "delay_frac")
    return dataclasses.replace(plan, **{k: getattr(plan, k)[:nb] for k in per_fibre})


def _estimate(probe, nf: int, dz: float) -> float:
    """A generous guess of one case's seconds, for the budget check."""
    if probe.kind == "simulated":
        return 5.0
    scale = nf / 50 * (0.1 / dz) ** 0.5
    return (1.0 if probe.gpu else 3.0) * max(1.0, scale)


def run_sfap(probe, budget) -> list[dict]:
    rows = []
    for name, nf, ne, dz, length in sfap_cases(probe):
        if not budget.allows(name, _estimate(probe, nf, dz)):
            continue
        try:
            setup = SfapSetup(probe.backend, nf, ne, dz, length)
            floors = sfap_floors(sfap_counts(setup.plan, ne), probe.peaks)  # the kernels' fibres
            e2e_floor = sfap_floors(sfap_counts(setup.full_plan, ne), probe.peaks)["e2e"]
        except Exception as error:  # noqa: BLE001  (one failing case must not end the probe)
            rows.append(error_row("sfap", name, "setup", error))
            continue
        info = {"fibres": nf, "electrodes": ne, "dz": dz, "muscle_mm": length, "nt": setup.nt,
                "kernel_fibres": setup.nf}
        t = host_time(setup.plan_fn, 1 if probe.kind == "simulated" else 3)
        rows.append(make_row(probe, "sfap", f"{name} plan_fibres", "host", {"seconds": t, "timing": "wall"}, None,
                             **info))
        for kname, launch in setup.kernels():
            try:
                rows.append(make_row(probe, "sfap", f"{name} {kname}", "kernel-only", kernel_only(probe, launch, 20),
                                     floors[kname], **info))
            except Exception as error:  # noqa: BLE001
                rows.append(error_row("sfap", f"{name} {kname}", "kernel-only", error))
        from kernelrt.kernels.sfap import compute_sfaps

        try:
            timing = e2e(probe, lambda: compute_sfaps(**setup.case, backend=probe.backend), 3, profile=True)
            rows.append(make_row(probe, "sfap", f"{name} compute_sfaps", "e2e", timing, e2e_floor, **info))
        except Exception as error:  # noqa: BLE001
            rows.append(error_row("sfap", f"{name} compute_sfaps", "e2e", error))
        del setup
    return rows
