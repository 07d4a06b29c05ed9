"""Predicted H100 times of the kernel variants, from work counts and the defaults' measured times (no GPU).

Each variant of ``kernelrt.kernels.variants`` replaces a default kernel that ran on an
H100 (``bench/results/2026-11-26-nvidia-h100-80gb-hbm3-probe.json`` and its ncu summary).
For each target case this prints the default's measured time, the floor of the work
(gpu_floors.py), and the variant's predicted range:

* low: the variant's own design bound (the resource it is written to be limited by),
  never below the floor;
* high: the default's measured time scaled by how much that bound shrinks, i.e. the
  variant keeps the default's measured efficiency against its own bound.

The GPU probe (``--variant all``) then measures both side by side; a variant outside its
range points at a cause the model leaves out (latency, occupancy, the launch path).

    python bench/variant_predictions.py [--out bench/results/kernel-variants-predicted]
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from gpu_floors import (MODELS, assembly_floor, heat_floor, ico_counts, sfap_counts, sfap_floors, spmv_floor,
                        tiled_columns_bound)

HERE = Path(__file__).resolve().parent
PROBE = HERE / "results" / "2026-11-26-nvidia-h100-80gb-hbm3-probe.json"
H100 = next(p for p in MODELS if p.name == "H100")
# row_values on the H100 (ncu, ico7): 30.7 of 32 threads active per instruction, so the corner branch
# diverges little and removing it saves at most that share of issue; row_values_nodiv also holds 64
# registers instead of 72 (8 blocks per SM instead of 7, bench/results/kernel-resources.md).
ROW_VALUES_ACTIVE_THREADS = 30.7
# sfap_delay: per source and warp, an LDG of the table (32 consecutive doubles: 2 wavefronts) and a
# broadcast LDG of raw: 3 wavefronts per warp-FMA. sfap_delay_staged: per source and warp, 4 FMAs
# (4 electrodes) for one LDS of the table (2 wavefronts) and 4 broadcast LDS of raw: 1.5.
DELAY_WAVEFRONTS = {"direct": 3.0, "staged": 1.5}
STAGED_DELAY_PADDING = 28 / 25  # electrodes in groups of 4: 25 -> 28 lane slots
SELL_HBM_FRACTION = (0.65, 0.80)  # ELL/SELL on FEM-like matrices (GPU_PLAN L5's sources)
GRID_SYNC_S = (1e-6, 2e-6)  # one grid barrier on an H100, an estimate (GPU_PLAN L7)


def measured() -> dict:
    """{(case, what): seconds} of the committed H100 probe."""
    data = json.loads(PROBE.read_text())
    return {(r["case"], r["what"]): r["seconds"] for sec in data["sections"].values() for r in sec.get("rows", [])
            if r.get("seconds")}


def _row(family, variant, case, default_s, floor_s, low, high, model):
    low = max(low, floor_s)
    return {"family": family, "variant": variant, "case": case, "default_s": default_s, "floor_s": floor_s,
            "predicted_low_s": low, "predicted_high_s": max(high, low), "model": model}


def sfap_rows(times: dict) -> list[dict]:
    from kernelrt.kernels.sfap.inputs import check_inputs
    from kernelrt.kernels.sfap.prep import plan_fibres
    from kernelrt.kernels.sfap.reference import synthetic_motor_unit

    rows = []
    for name, nf, ne, dz, length in (("sfap-200x25-dz0.1", 200, 25, 0.1, 120.0),
                                     ("sfap-50x25-dz0.01", 50, 25, 0.01, 120.0),
                                     ("myogen-436x4-dz0.01", 436, 4, 0.01, 30.0)):
        plan = plan_fibres(**check_inputs(**synthetic_motor_unit(nf, ne, dz, length=length), min_radial_dist=None))
        counts = sfap_counts(plan, ne)
        floors = sfap_floors(counts, H100)
        cols, tiled = floors["sfap_columns"], tiled_columns_bound(plan, ne, H100)
        default = times[f"{name} sfap_columns", "kernel-only"]
        rows.append(_row("sfap_columns", "tiled", name, default, cols["floor_s"], tiled["design_bound_s"],
                         default * tiled["design_bound_s"] / cols["design_bound_s"],
                         f"L1 bound {cols['design_bound_s'] * 1e3:.3f} -> {tiled['design_bound_s'] * 1e3:.3f} ms "
                         f"({tiled['wavefronts_per_warp_fma']:.2f} wavefronts per warp-FMA, was 3)"))
        default = times[f"{name} sfap_delay", "kernel-only"]
        warp_fmas = counts["delay_fma"] / 32
        bound = {v: warp_fmas * w / (H100.sms * H100.clock) for v, w in DELAY_WAVEFRONTS.items()}
        bound["staged"] *= STAGED_DELAY_PADDING if ne == 25 else 1.0
        rows.append(_row("sfap_delay", "staged", name, default, floors["sfap_delay"]["floor_s"], bound["staged"],
                         default * bound["staged"] / bound["direct"],
                         f"L1 bound {bound['direct'] * 1e3:.3f} -> {bound['staged'] * 1e3:.3f} ms (raw staged in shared "
                         "memory: no 40 KB-strided global load per FMA)"))
    return rows


def laplacian_rows(times: dict) -> list[dict]:
    rows = []
    for level in (7, 8):
        c = ico_counts(level)
        name = f"ico{level}"
        floor = assembly_floor(c["n"], c["faces"], c["nnz"], H100)["floor_s"]
        default = times[f"{name} row_values", "kernel-only"]
        rows.append(_row("row_values", "nodiv", name, default, floor, floor, default * ROW_VALUES_ACTIVE_THREADS / 32,
                         f"divergence removed ({ROW_VALUES_ACTIVE_THREADS} of 32 threads active per instruction "
                         "measured), 72 -> 64 registers: at most a few % unless occupancy was the limit"))
        spmv = spmv_floor(c["n"], c["nnz"], H100)
        nbytes = spmv["work"]["bytes"] + 4 * c["n"]  # + the row lengths
        lo, hi = (nbytes / (f * H100.hbm) for f in reversed(SELL_HBM_FRACTION))
        default = times[f"{name} csr_matvec", "kernel-only"]
        rows.append(_row("sparse", "sell", f"{name} spmv", default, spmv["floor_s"], lo, hi,
                         f"{nbytes / 1e6:.1f} MB at {SELL_HBM_FRACTION[0]:.0%}-{SELL_HBM_FRACTION[1]:.0%} of HBM "
                         f"(scalar CSR measured at {spmv['work']['bytes'] / default / H100.hbm:.0%}"
                         f"{', L2-resident when repeated' if nbytes < 50e6 else ''})"))
        heat = heat_floor(c["n"], c["nnz"], 200, H100)
        step = heat["floor_s"] / 200
        rows.append(_row("loops", "cooperative", f"{name} heat200", times[f"{name} heat200 device arrays", "loop"],
                         heat["floor_s"], 200 * (step + GRID_SYNC_S[0]), 200 * (2 * step + GRID_SYNC_S[1]),
                         "200 x (one step's memory time (x1-2) + a grid barrier of 1-2 us); no launches"))
    return rows


def markdown(rows: list[dict]) -> str:
    def ms(s):
        return f"{s * 1e3:.3f}"

    lines = ["# Kernel variants: predicted H100 times (no GPU)", "",
             "Generated by `python bench/variant_predictions.py --out bench/results/kernel-variants-predicted` "
             "from work counts and the 2026-11-26 H100 probe. ms; the range and its model are in the script's "
             "docstring; the GPU probe's `--variant all` measures them.", "",
             "| family | variant | case | default measured | floor | predicted | model |", "|---|---|---|---|---|---|---|"]
    for r in rows:
        lines.append(f"| {r['family']} | {r['variant']} | {r['case']} | {ms(r['default_s'])} | {ms(r['floor_s'])} | "
                     f"{ms(r['predicted_low_s'])}-{ms(r['predicted_high_s'])} | {r['model']} |")
    return "\n".join(lines) + "\n"


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--out", type=Path, help="write <out>.json and <out>.md")
    args = p.parse_args(argv)
    times = measured()
    rows = sfap_rows(times) + laplacian_rows(times)
    table = markdown(rows)
    if args.out:
        args.out.with_suffix(".json").write_text(json.dumps({"peaks": H100.as_dict(), "rows": rows}, indent=1) + "\n")
        args.out.with_suffix(".md").write_text(table)
    print(table)
    return 0


if __name__ == "__main__":
    sys.exit(main())
