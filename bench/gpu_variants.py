"""A/B kernel variants for the GPU probe (``--variant NAME``) and its ``--ncu`` launch set.

A group is a workload with one setup and one floor; its variants are launchers of the
same work by different kernels, timed side by side (kernel-only, or whole calls on
device-resident arrays for the loop groups) against that floor. This module holds the
assembly group (``row_values``, ``row_values_nodiv``, ``face_values_atomic``);
gpu_variant_groups.py the other families of ``kernelrt.kernels.variants``. Adding a
variant is one line::

    register_variant("assembly", "nodiv", lambda s, level, subjects: s.assembly_launcher("nodiv", subjects))

``ncu_launches`` launches each target kernel of the selected sections exactly twice on
fixed inputs and prints nothing, for ``ncu -k regex:...``.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from gpu_floors import assembly_floor, ico_counts
from gpu_report import error_row, make_row
from gpu_timing import e2e, kernel_only

__all__ = ["GROUPS", "register_variant", "run_variants", "ncu_launches", "NCU_KERNELS", "VARIANT_NCU_KERNELS"]


@dataclass
class Group:
    """A workload: ``cases(probe)`` -> [(case, setup args)], ``setup(probe, *args)``, ``floor(probe, setup, *args)``."""

    cases: object
    setup: object
    floor: object
    timing: str = "kernel-only"  # or "device-resident": wall clock of whole calls on device arrays (gpu_timing.e2e)
    variants: dict = field(default_factory=dict)


def _assembly_cases(probe):
    if probe.kind == "simulated":
        return [("ico1", 1, 1)]
    if probe.kind == "cpu":
        return [("ico3", 3, 1)] if probe.quick else [("ico5", 5, 1), ("cohort-ico4x4", 4, 4)]
    return [("ico7", 7, 1), ("ico8", 8, 1), ("cohort-ico7x100", 7, 100)]


def _assembly_setup(probe, level, subjects):
    from gpu_cases_laplacian import LaplacianSetup

    return LaplacianSetup(probe.backend, level, subjects)


def _assembly_floor(probe, setup, level, subjects):
    c = ico_counts(level)
    return assembly_floor(c["n"], c["faces"], c["nnz"], probe.peaks, subjects)


GROUPS: dict[str, Group] = {"assembly": Group(_assembly_cases, _assembly_setup, _assembly_floor)}


def register_variant(group: str, name: str, launcher) -> None:
    """Add ``launcher(setup, *case args) -> (kernel name, launch())`` as variant ``name`` of ``group``."""
    GROUPS[group].variants[name] = launcher


register_variant("assembly", "deterministic", lambda s, level, subjects: s.assembly_launcher("deterministic", subjects))
register_variant("assembly", "atomic", lambda s, level, subjects: s.assembly_launcher("atomic", subjects))
register_variant("assembly", "nodiv", lambda s, level, subjects: s.assembly_launcher("nodiv", subjects))

def run_variants(probe, budget, names: list[str]) -> list[dict]:
    """Every variant of each named group, case by case, side by side."""
    rows = []
    for gname in names:
        group = GROUPS[gname]
        for case, *args in group.cases(probe):
            if not budget.allows(f"{gname} {case}", 10.0 if probe.gpu else 5.0):
                continue
            try:
                setup = group.setup(probe, *args)
                floor = group.floor(probe, setup, *args)
            except Exception as error:  # noqa: BLE001  (one failing case must not end the probe)
                rows.append(error_row("variants", f"{gname} {case}", "setup", error))
                continue
            for vname, launcher in group.variants.items():
                label = f"{gname}/{vname} {case}"
                try:
                    kernel, launch = launcher(setup, *args)
                    timing = kernel_only(probe, launch, 20) if group.timing == "kernel-only" else e2e(probe, launch, 5)
                    rows.append(make_row(probe, "variants", label, group.timing, timing, floor,
                                         group=gname, variant=vname, kernel=kernel))
                except Exception as error:  # noqa: BLE001
                    rows.append(error_row("variants", label, "kernel-only", error))
    return rows


# -- ncu ------------------------------------------------------------------------------------------------

VARIANT_NCU_KERNELS = {"sfap": ("sfap_columns_tiled", "sfap_delay_staged"),
                       "laplacian": ("row_values_nodiv", "sell_matvec", "sell_matmat"), "eigen": ("sell_cheb_step",)}
NCU_KERNELS = {
    "sfap": ("sfap_response", "sfap_columns", "sfap_delay"),
    "laplacian": ("row_values", "face_values_atomic", "csr_matvec", "csr_matmat", "heat_step"),
    "eigen": ("cheb_step",),
}


def _ncu_sizes(probe):
    """(sfap case (fibres, electrodes, dz, length), icosphere level) for ``--ncu``."""
    if probe.kind == "simulated":
        return (2, 3, 1.0, 10.0), 1
    if probe.kind == "cpu":
        return (8, 5, 0.5, 30.0), 3
    return (200, 25, 0.1, 120.0), 7


def ncu_launches(probe, sections: list[str], times: int = 2, variants: bool = False) -> dict:
    """Launch each target kernel of ``sections`` ``times`` times on fixed inputs; returns {kernel: launches}.

    Inputs are built first, then the kernels launch in the library's order, so each reads
    real data; a kernel's first launch also loads or compiles it (ncu profiles launches,
    not loads), so no extra warm-up launch is made. ``variants`` (``--ncu --variant all``): each
    section's variant kernels (``VARIANT_NCU_KERNELS``) are launched too, after the defaults.
    """
    from gpu_cases_laplacian import LaplacianSetup
    from gpu_cases_sfap import SfapSetup

    counts: dict[str, int] = {}
    sfap, level = _ncu_sizes(probe)
    launchers = []
    if "sfap" in sections:
        s = SfapSetup(probe.backend, *sfap)
        launchers += [(name, fn) for name, fn in s.kernels() if name in NCU_KERNELS["sfap"]]
        if variants:
            launchers += [("sfap_columns_tiled", lambda: s.columns("tiled")), ("sfap_delay_staged", lambda: s.delay("staged"))]
    if "laplacian" in sections or "eigen" in sections:
        lap = LaplacianSetup(probe.backend, level)
        if "laplacian" in sections:
            launchers += [("row_values", lap.assembly_launcher("deterministic")[1]),
                          ("face_values_atomic", lap.assembly_launcher("atomic")[1]),
                          ("csr_matvec", lap.spmv), ("csr_matmat", lap.spmm), ("heat_step", lap.heat)]
        if "eigen" in sections:
            launchers.append(("cheb_step", lap.cheb))
        if variants:
            from gpu_variant_groups import SparseSetup

            sell = SparseSetup(probe.backend, level)
            if "laplacian" in sections:
                launchers += [("row_values_nodiv", lap.assembly_launcher("nodiv")[1]),
                              ("sell_matvec", sell.launcher("sell", "spmv")[1]),
                              ("sell_matmat", sell.launcher("sell", "spmm")[1])]
            if "eigen" in sections:
                launchers.append(("sell_cheb_step", sell.launcher("sell", "cheb")[1]))
    from kernelrt import ComputeCapabilityError

    for name, launch in launchers:
        for _ in range(times):
            try:
                launch()
            except ComputeCapabilityError:  # e.g. fp64 atomics below cc 6.0 (the simulator's 5.2): not this device's
                break
            counts[name] = counts.get(name, 0) + 1
    probe.sync()
    return counts
