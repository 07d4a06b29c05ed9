"""compute_sfaps end to end under each pair of SFAP variants, interleaved in one process (GPU A/B).

    python bench/sfap_variants_e2e.py [--rounds N] [--out FILE] [--backend cuda|auto|cpu] [--quick]

The probe's ``--variant`` groups time the kernels alone; this times what a user calls, host
planning and copies included, for each (sfap_columns, sfap_delay) pair, alternating pairs
round by round so a host that slows down mid-run (another process, clocks) hits all alike.
Cases: the probe's 200 x 25 at dz 0.1 and MyoGen's default muscle (436 x 4 at dz 0.01);
``--quick``: 2 fibres x 4 electrodes (a dry run, or the CUDA simulator). Also reports the
largest difference between any pair's outputs and the defaults' (bitwise equal expected).
On the CPU backend the variants do not apply (the CPU runs its own twins): a dry run only.
Run by ``tools/gpu_check.sh variants``; the 2026-11-27 H200 sitting's figures are in
bench/results/2026-11-27-nvidia-h200-sfap-variants-e2e.json.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from pathlib import Path
from types import SimpleNamespace

import numpy as np

# bench/ on sys.path even under PYTHONSAFEPATH (tools/gpu_check.sh sets it): the cases are the probe's
sys.path.insert(0, str(Path(__file__).resolve().parent))
from gpu_cases_sfap import sfap_cases  # noqa: E402

CASE_NAMES = ("sfap-200x25-dz0.1", "myogen-436x4-dz0.01")  # of the probe's GPU cases (gpu_cases_sfap.py)


def main() -> None:
    import kernelrt
    from kernelrt.kernels.sfap import compute_sfaps
    from kernelrt.kernels.sfap.reference import synthetic_motor_unit
    from kernelrt.kernels.variants import DEFAULTS, FAMILIES, use_variants

    pairs = {f"{c}+{d}": dict(sfap_columns=c, sfap_delay=d)
             for c in FAMILIES["sfap_columns"] for d in FAMILIES["sfap_delay"]}
    baseline = f"{DEFAULTS['sfap_columns']}+{DEFAULTS['sfap_delay']}"

    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--rounds", type=int, default=7)
    p.add_argument("--out", default=None)
    p.add_argument("--backend", choices=["cuda", "auto", "cpu"], default="cuda")
    p.add_argument("--quick", action="store_true", help="2 fibres x 4 electrodes (a dry run, or the CUDA simulator)")
    args = p.parse_args()
    be = kernelrt.get_backend(args.backend)
    report = {"device": str(be), "backend": be.name, "rounds": args.rounds, "cases": {}}
    cases = [("tiny-2x4-dz1", 2, 4, 1.0, 6.0)] if args.quick else [
        c for c in sfap_cases(SimpleNamespace(kind="gpu", quick=False)) if c[0] in CASE_NAMES]
    for name, nf, ne, dz, length in cases:
        case = synthetic_motor_unit(nf, ne, dz, length=length)
        outs, times = {}, {k: [] for k in pairs}
        for label, choice in pairs.items():  # warm: compile or load, and keep one result each
            with use_variants(**choice):
                outs[label] = compute_sfaps(**case, backend=be)
        for _ in range(args.rounds):
            for label, choice in pairs.items():
                with use_variants(**choice):
                    t0 = time.perf_counter()
                    compute_sfaps(**case, backend=be)
                    times[label].append(time.perf_counter() - t0)
        a = outs[baseline]
        diff = max(float(np.max(np.abs(np.asarray(getattr(a, f)) - np.asarray(getattr(b, f)))))
                   for b in outs.values() for f in ("sfaps_raw", "sfaps", "muap"))
        report["cases"][name] = {k: {"median_s": statistics.median(v), "min_s": min(v), "all_s": v} for k, v in times.items()}
        report["cases"][name]["max_abs_diff"] = diff
        print(name, {k: f"{statistics.median(v) * 1e3:.2f} ms (min {min(v) * 1e3:.2f})" for k, v in times.items()},
              "max |diff|", diff, flush=True)
    if args.out:
        with open(args.out, "w") as fh:
            json.dump(report, fh, indent=1)


if __name__ == "__main__":
    main()
