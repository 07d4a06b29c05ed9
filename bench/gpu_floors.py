"""Hardware floors for the GPU probe: device peak figures and GPU_PLAN Appendix A's limit arithmetic.

A floor is the least time a workload can take on a device: its work counts (bytes
moved, FMAs, exps, PCIe bytes) divided by the device's peak rates. This module owns
the peak table (one row per model, matched on the device name), a fallback from the
device's attributes, ``--peaks`` overrides, and one function per row of
``GPU_PLAN.md`` Appendix A (S1-S6, L1-L9, R1-R2), each a pure function of counts and
``Peaks`` so the unit tests check it against the Appendix's numbers. Counting the work
of a real case (an SFAP plan, an icosphere) lives here too; timing lives elsewhere.
"""

from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass

import numpy as np

__all__ = ["Peaks", "MODELS", "peaks_for", "peaks_from_attributes", "parse_peaks", "ico_counts",
           "sfap_counts", "sfap_floors", "assembly_floor", "cohort_floor", "spmv_floor", "spmm_floor",
           "heat_floor", "chebyshev_floor", "copy_floor", "launch_floor", "columns_floor", "columns_design_bound", "tiled_columns_bound",
           "assembly_e2e_floor", "LAUNCH_FLOOR_S", "EXP_INSTR", "EXP_OVERCOMPUTE"]

EXP_INSTR = 20  # fp64-pipe instructions per libdevice exp (GPU_PLAN §2, an estimate)
EXP_OVERCOMPUTE = 1.5  # exps computed / exps needed (mirror rows, chunk edges; Appendix A S1)
FACE_VISIT_INSTR = 120  # fp64 instructions per (face, corner) visit of the assembly (Appendix A L1)
WAVEFRONTS_PER_WARP_FMA = 3  # sfap_columns: LDG.64 of h (2) + LDS broadcast of I (1)
LAUNCH_FLOOR_S = 3e-6  # cuLaunchKernel's host cost, the low end of 3-5 µs (GPU_PLAN §2)
RR_PASSES = 10  # Rayleigh-Ritz passes over the block per Chebyshev iteration (Appendix A L9)


@dataclass(frozen=True)
class Peaks:
    """A device's peak rates (SI units: bytes/s, FMA/s, Hz).

    ``pcie`` is the pinned host-device range seen in practice (high, low): floors use the
    high figure (the least time) and report the low one beside it. ``l2`` (bytes/s) is a
    lead figure, used only when a loop's working set fits ``l2_bytes``.
    """

    name: str
    hbm: float
    fp64_fma: float
    sms: int
    clock: float
    pcie: tuple[float, float] = (50e9, 25e9)
    l2: float | None = None
    l2_bytes: int | None = None
    l1_bytes_per_clk: int = 128
    source: str = "table"

    def as_dict(self) -> dict:
        return dataclasses.asdict(self)


# Datasheet figures; fp64_fma is the non-tensor-core fp64 rate / 2 (one FMA = 2 flops).
MODELS = [
    Peaks("H200", 4.8e12, 33.5e12 / 2, 132, 1.98e9, (50e9, 25e9), 10e12, 50 << 20),
    Peaks("H100 NVL", 3.9e12, 30e12 / 2, 132, 1.785e9, (50e9, 25e9), 10e12, 50 << 20),
    Peaks("H100 PCIe", 2.0e12, 25.6e12 / 2, 114, 1.755e9, (50e9, 25e9), 10e12, 50 << 20),
    Peaks("H100", 3.35e12, 33.5e12 / 2, 132, 1.98e9, (50e9, 25e9), 10e12, 50 << 20),  # SXM5
    Peaks("A100-SXM4-80GB", 2.039e12, 9.7e12 / 2, 108, 1.41e9, (25e9, 12e9), None, 40 << 20),
    Peaks("A100 80GB PCIe", 1.935e12, 9.7e12 / 2, 108, 1.41e9, (25e9, 12e9), None, 40 << 20),
    Peaks("A100", 1.555e12, 9.7e12 / 2, 108, 1.41e9, (25e9, 12e9), None, 40 << 20),
    Peaks("L40S", 0.864e12, 1.43e12 / 2, 142, 2.52e9, (25e9, 12e9)),
    Peaks("L4", 0.3e12, 0.49e12 / 2, 58, 2.04e9, (25e9, 12e9)),
    Peaks("V100", 0.9e12, 7.8e12 / 2, 80, 1.53e9, (12e9, 6e9)),
    Peaks("RTX 4090", 1.008e12, 1.29e12 / 2, 128, 2.52e9, (25e9, 12e9)),
    Peaks("RTX 3090", 0.936e12, 0.556e12 / 2, 82, 1.695e9, (25e9, 12e9)),
]
NOMINAL = "H100"  # the target: floors of CPU and simulator runs are this device's

# fp64 FMA per clock per SM by compute capability (datacenter parts; others 1/64 of fp32).
_DFMA_PER_CLK = {(6, 0): 32, (7, 0): 32, (8, 0): 32, (9, 0): 64}


def peaks_for(device_name: str) -> Peaks | None:
    """The table row whose name the device name contains (first match), else None."""
    for p in MODELS:
        if p.name.lower() in device_name.lower():
            return p
    return None


def peaks_from_attributes(name: str, cc: tuple[int, int], sms: int, clock_khz: int, mem_clock_khz: int,
                          bus_bits: int) -> Peaks:
    """Estimated peaks from CUDA device attributes, for a model the table lacks.

    HBM/GDDR: 2 transfers per memory clock x bus width (DDR); fp64: the per-SM DFMA
    rate of the compute capability's datacenter part, else 2 per clock (1/64 of fp32).
    """
    hbm = 2.0 * mem_clock_khz * 1e3 * bus_bits / 8
    dfma = _DFMA_PER_CLK.get(tuple(cc), 2)
    return Peaks(name, hbm, dfma * sms * clock_khz * 1e3, sms, clock_khz * 1e3, (25e9, 12e9),
                 source="device attributes (estimated)")


_FIELDS = {"hbm": float, "fp64_fma": float, "sms": int, "clock": float, "l2": float, "pcie_high": float,
           "pcie_low": float}


def parse_peaks(text: str, base: Peaks | None = None) -> Peaks:
    """``--peaks``: a model of the table ("H200") or ``key=value`` pairs overriding ``base``.

    Keys: hbm, fp64_fma, sms, clock, l2, pcie_high, pcie_low (SI units, e.g. ``hbm=3.0e12``).

    Raises:
        ValueError: an unknown model or key, or a value that is not a positive number.
    """
    if "=" not in text:
        found = next((p for p in MODELS if p.name.lower() == text.strip().lower()), None)
        if found is None:
            names = ", ".join(repr(p.name) for p in MODELS)
            raise ValueError(f"--peaks must be a model ({names}) or key=value pairs (got {text!r})")
        return dataclasses.replace(found, source=f"--peaks {found.name}")
    base = base or peaks_for(NOMINAL)
    changes: dict = {}
    pcie = list(base.pcie)
    for item in text.split(","):
        key, _, value = item.partition("=")
        key = key.strip()
        if key not in _FIELDS:
            raise ValueError(f"--peaks keys are {', '.join(_FIELDS)} (got {key!r})")
        try:
            number = _FIELDS[key](float(value))
        except ValueError:
            raise ValueError(f"--peaks {key} must be a positive number (got {value!r})") from None
        if not number > 0 or not math.isfinite(number):
            raise ValueError(f"--peaks {key} must be a positive number (got {value!r})")
        if key.startswith("pcie"):
            pcie[0 if key == "pcie_high" else 1] = number
        else:
            changes[key] = number
    return dataclasses.replace(base, pcie=tuple(pcie), source=f"{base.source} with --peaks {text}", **changes)


def _floor(parts: dict, *, formula: str, work: dict, high: float | None = None) -> dict:
    """A floor record: the least time (s), its parts, the formula in words, the counts."""
    return {"floor_s": float(sum(parts.values())), "floor_high_s": high, "parts_s": parts, "formula": formula,
            "work": work}


# -- transfers and launches (R1, R2) ----------------------------------------------------------------


def copy_floor(nbytes: int, peaks: Peaks) -> dict:
    """R2: host<->device bytes over pinned PCIe (floor at the high figure, range to the low)."""
    hi, lo = peaks.pcie
    return _floor({"pcie": nbytes / hi}, high=nbytes / lo, formula="bytes / pinned PCIe", work={"pcie_bytes": nbytes})


def launch_floor() -> dict:
    """R1: one kernel launch's host cost (cuLaunchKernel)."""
    return _floor({"launch": LAUNCH_FLOOR_S}, formula="cuLaunchKernel ~3 µs", work={"launches": 1})


# -- SFAP (S1-S6) ------------------------------------------------------------------------------------


def sfap_counts(plan, ne: int, tk: int = 8, lanes: int = 32) -> dict:
    """Work counts of one ``compute_sfaps`` call from its ``FibrePlan`` (GPU_PLAN §2's table).

    useful_fma: (rows that may be non-zero) x Ne; lane_slots: per tile of ``tk`` samples,
    the tile's row span x tk x 32 lanes x electrode tiles; exps_needed: rows behind the
    wave front (x > 0) of the long side, per sample; dense_fma: Nt x ΣNz x Ne; delay_fma:
    Σ_f Nt (Nt - n_f) Ne; bytes of h, of one output array, of the H2D tables and the D2H.
    """
    from kernelrt.kernels.sfap.prep import I_AHI, I_ALO, I_NZ, I_SIGMA

    nf, nt = plan.vt.shape
    lo, hi = plan.rows[:, :, 0], plan.rows[:, :, 1]
    span = np.where(hi >= lo, hi - lo + 1, 0)
    useful = int(span.sum()) * ne
    pad = (-nt) % tk  # tiles of tk samples: the tile's row span is walked by all its samples
    big = np.iinfo(np.int64).max
    tlo = np.pad(np.where(hi >= lo, lo, big), ((0, 0), (0, pad)), constant_values=big).reshape(nf, -1, tk).min(axis=2)
    thi = np.pad(np.where(hi >= lo, hi, -1), ((0, 0), (0, pad)), constant_values=-1).reshape(nf, -1, tk).max(axis=2)
    tile_rows = int(np.where(thi >= tlo, thi - tlo + 1, 0).sum())
    lane_slots = tile_rows * tk * lanes * (-(-ne // lanes))
    exps = 0
    for f in range(nf):
        rho = plan.z[f, plan.ipar[f, I_ALO]: plan.ipar[f, I_AHI] + 2] - plan.fpar[f, 0]
        exps += int(np.searchsorted(np.sort(rho * plan.ipar[f, I_SIGMA]), plan.vt[f], side="left").sum())
    nz = plan.ipar[:, I_NZ]
    out_bytes = 8 * nt * ne * nf
    h2d = 8 * (plan.z.size + plan.vt.size + plan.rows.size + plan.ipar.size + plan.fpar.size + plan.kr2.size
               + nf + nf * (2 * nt - 1) + nf + ne)  # + nz, the Dirichlet table, shifts, electrode z
    return {"fibres": nf, "electrodes": ne, "nt": nt, "nz_max": int(nz.max()), "useful_fma": useful,
            "lane_slots": lane_slots, "warp_fmas": lane_slots // lanes, "exps_needed": exps,
            "dense_fma": int(nt * int(nz.sum()) * ne), "delay_fma": int(nt * (nt - plan.delay_int.clip(0, nt)).sum() * ne),
            "h_bytes": 8 * int(nz.max()) * ne * nf, "out_bytes": out_bytes, "h2d_bytes": int(h2d),
            "d2h_bytes": 2 * out_bytes + 8 * nt * ne}


def columns_floor(useful_fma: float, exps_needed: float, peaks: Peaks) -> dict:
    """S1/S2: fp64 FMAs + computed exps (x 1.5, ~20 DP instructions each) at the fp64 rate."""
    return _floor({"fma": useful_fma / peaks.fp64_fma,
                   "exp": exps_needed * EXP_OVERCOMPUTE * EXP_INSTR / peaks.fp64_fma},
                  formula="useful FMA / fp64 + 1.5 exps x 20 instr / fp64",
                  work={"useful_fma": useful_fma, "exps_needed": exps_needed})


def columns_design_bound(warp_fmas: float, peaks: Peaks) -> float:
    """S1: the current kernel's own L1 bound: 3 wavefronts per warp-FMA, one per SM clock."""
    return warp_fmas * WAVEFRONTS_PER_WARP_FMA / (peaks.sms * peaks.clock)


def tiled_columns_bound(plan, ne: int, peaks: Peaks) -> dict:
    """``sfap_columns_tiled``'s own L1 bound (kernels/sfap/columns_tiled.py), as S1's for the current kernel.

    Blocks of TE x TS lanes (``columns_tiling``) over TKB = TS x TR samples, each thread
    TR samples x RE electrodes. Per row a warp issues TR x RE DFMA, TR LDS (one wavefront
    each: at most 16 consecutive doubles, or 2 when 32 sample lanes make it 256 B) and RE
    LDG of h (TE consecutive doubles: 2 wavefronts at TE = 32, else 1).
    """
    from kernelrt.kernels.sfap.columns_tiled import RE, TR, columns_tiling

    (te, ts, _), _, _ = columns_tiling(ne)
    counts = sfap_counts(plan, ne, tk=ts * TR, lanes=te * RE)  # lane_slots: tile rows x TKB x electrode slots
    lds = 2 if ts == 32 else 1
    ldg = 2 if te == 32 else 1
    wavefronts = (TR * lds + RE * ldg) / (TR * RE)
    warp_fmas = counts["lane_slots"] / 32
    return {"warp_fmas": warp_fmas, "wavefronts_per_warp_fma": wavefronts,
            "design_bound_s": warp_fmas * wavefronts / (peaks.sms * peaks.clock)}


def sfap_floors(counts: dict, peaks: Peaks) -> dict:
    """Floors of each SFAP row from ``sfap_counts``: response, columns, delay, muap, e2e."""
    cols = columns_floor(counts["useful_fma"], counts["exps_needed"], peaks)
    cols["design_bound_s"] = columns_design_bound(counts["warp_fmas"], peaks)
    delay = _floor({"fma": counts["delay_fma"] / peaks.fp64_fma}, formula="Σ Nt (Nt - n_f) Ne FMA / fp64",
                   work={"delay_fma": counts["delay_fma"]})
    response = _floor({"hbm": counts["h_bytes"] / peaks.hbm}, formula="h bytes / HBM", work={"bytes": counts["h_bytes"]})
    muap_bytes = counts["out_bytes"] + 8 * counts["nt"] * counts["electrodes"]
    muap = _floor({"hbm": muap_bytes / peaks.hbm}, formula="sfaps read + muap written / HBM", work={"bytes": muap_bytes})
    hi, lo = peaks.pcie
    pcie = counts["h2d_bytes"] + counts["d2h_bytes"]
    kernels = cols["floor_s"] + delay["floor_s"]
    e2e = _floor({"pcie": pcie / hi, "kernels": kernels}, high=pcie / lo + kernels,
                 formula="(H2D + D2H) / pinned PCIe + columns + delay floors",
                 work={"h2d_bytes": counts["h2d_bytes"], "d2h_bytes": counts["d2h_bytes"]})
    return {"sfap_response": response, "sfap_columns": cols, "sfap_delay": delay, "sfap_muap": muap, "e2e": e2e}


# -- cotangent Laplacian (L1-L9) ----------------------------------------------------------------------


def ico_counts(level: int) -> dict:
    """Icosphere sizes: N = 10·4^l + 2, F = 20·4^l, E = 30·4^l, nnz = N + 2E."""
    n, f, e = 10 * 4**level + 2, 20 * 4**level, 30 * 4**level
    return {"n": n, "faces": f, "edges": e, "nnz": n + 2 * e}


def assembly_bytes(n: int, faces: int, nnz: int) -> int:
    """L1: V 24N, inc_ptr + indptr 8(N+1), inc 12F, inc_nbr + inc_slot 48F, diag_slot 4N,
    vals 8·nnz, mass 8N, flags memset 8N and read 8N."""
    return 24 * n + 8 * (n + 1) + 12 * faces + 48 * faces + 4 * n + 8 * nnz + 24 * n


def assembly_floor(n: int, faces: int, nnz: int, peaks: Peaks, subjects: int = 1) -> dict:
    """L1/L2 kernel-only: max(HBM bytes, 3F visits x 120 fp64 instructions); e2e adds PCIe."""
    nbytes = assembly_bytes(n, faces, nnz) if subjects == 1 else subjects * (48 * n + 8 * nnz)
    mem, comp = nbytes / peaks.hbm, subjects * 3 * faces * FACE_VISIT_INSTR / peaks.fp64_fma
    return _floor({"bound": max(mem, comp)}, formula="max(bytes / HBM, 3F x 120 instr / fp64)",
                  work={"bytes": nbytes, "hbm_s": mem, "compute_s": comp, "subjects": subjects})


def assembly_e2e_floor(n: int, faces: int, nnz: int, peaks: Peaks, subjects: int = 1) -> dict:
    """L1 e2e / L4 e2e: V in, vals and mass out over pinned PCIe, plus the kernel floor."""
    pcie = subjects * (24 * n + 8 * nnz + 8 * n)
    kernel = assembly_floor(n, faces, nnz, peaks, subjects)["floor_s"]
    hi, lo = peaks.pcie
    return _floor({"pcie": pcie / hi, "kernel": kernel}, high=pcie / lo + kernel,
                  formula="(24N + 8 nnz + 8N) / pinned PCIe + kernel floor", work={"pcie_bytes": pcie})


def cohort_floor(n: int, faces: int, nnz: int, subjects: int, peaks: Peaks) -> dict:
    """L4 kernel-only: S x (24N + 8 nnz + 24N) bytes or S x 3F x 120 instructions, the larger."""
    return assembly_floor(n, faces, nnz, peaks, subjects)


def spmv_floor(n: int, nnz: int, peaks: Peaks) -> dict:
    """L5: 12·nnz + 4(N+1) + 16N bytes over HBM."""
    nbytes = 12 * nnz + 4 * (n + 1) + 16 * n
    return _floor({"hbm": nbytes / peaks.hbm}, formula="(12 nnz + 4(N+1) + 16N) / HBM", work={"bytes": nbytes})


def spmm_floor(n: int, nnz: int, k: int, peaks: Peaks) -> dict:
    """L6: X and Y (8Nk each) once, A (12 nnz) once per 32-column block; high: 6 more X passes (missed gathers)."""
    x = 8 * n * k
    nbytes = 2 * x + (-(-k // 32)) * 12 * nnz
    return _floor({"hbm": nbytes / peaks.hbm}, high=(nbytes + 6 * x) / peaks.hbm,
                  formula="(2 x 8Nk + ceil(k/32) x 12 nnz) / HBM", work={"bytes": nbytes})


def heat_floor(n: int, nnz: int, steps: int, peaks: Peaks) -> dict:
    """L7: per step 12 nnz + 4N + 24N bytes, from L2 when the step's set (+ a buffer) fits it, else HBM."""
    per_step = 12 * nnz + 28 * n
    in_l2 = peaks.l2 is not None and peaks.l2_bytes is not None and per_step + 8 * n <= peaks.l2_bytes
    rate = peaks.l2 if in_l2 else peaks.hbm
    return _floor({"memory": steps * per_step / rate}, high=steps * per_step / peaks.hbm,
                  formula=f"steps x (12 nnz + 28N) / {'L2' if in_l2 else 'HBM'}",
                  work={"bytes_per_step": per_step, "steps": steps, "l2_resident": in_l2})


def chebyshev_bytes_per_column(n: int, nnz: int, block: int) -> float:
    """L8: read Y, read X, write Z (3 x 8N) plus the matrix (12 nnz) twice per block of columns."""
    return 24 * n + 2 * 12 * nnz / block


def chebyshev_floor(n: int, nnz: int, products: int, block: int, iterations: int, peaks: Peaks) -> dict:
    """L8/L9: product columns x bytes per column, plus ~10 Rayleigh-Ritz passes over the N x b block per iteration."""
    spmm = products * chebyshev_bytes_per_column(n, nnz, block) / peaks.hbm
    rr = iterations * RR_PASSES * 8 * n * block / peaks.hbm
    return _floor({"filter": spmm, "rayleigh_ritz": rr}, formula="columns x (24N + 24 nnz / b) / HBM + 10 x 8Nb / HBM per iteration",
                  work={"products": products, "block": block, "iterations": iterations})
