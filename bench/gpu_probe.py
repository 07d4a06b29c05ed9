"""The GPU probe: one command that measures every number that matters against the hardware limit.

Usage::

    python bench/gpu_probe.py [--section copies,launch,...] [--budget SECONDS] [--out DIR] [--quick]
                              [--ncu] [--variant NAME|all] [--backend auto|cuda|cpu] [--peaks MODEL|k=v,...]

(or ``kernelrt bench gpu [same options]``). Sections, in order: ``copies``, ``launch``,
``sfap``, ``laplacian``, ``eigen``, ``integrations``, ``dask``, ``anchors``; each gets a
share of ``--budget`` (default 330 s) and stops between cases once it is spent,
recording what it skipped. Every row is kernel-only (CUDA events), end to end (host
arrays in and out), a copy, a launch or host work, with its floor computed here from
the case's work counts and the device's peaks (bench/gpu_floors.py) and the ratio
time / floor. On the CPU backend the figures are wall-clock times against the nominal
H100's floors ("cpu"); under the CUDA simulator they are marked "simulated".

Writes ``<date>-<device>-probe.json`` (``-variants.json`` with ``--variant``) and a PNG
of the ratios into ``--out`` (default bench/results), and prints a short table last.
``--ncu`` launches each target kernel exactly twice on fixed inputs and prints nothing
(for ``ncu -k regex:...``); with ``--variant`` the variant kernels are launched too. Docs: docs/gpu.md.
"""

from __future__ import annotations

import argparse
import datetime as _dt
import json
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
if str(HERE) not in sys.path:  # the sibling modules, also under PYTHONSAFEPATH=1 (tools/gpu_check.sh)
    sys.path.insert(0, str(HERE))

import gpu_floors  # noqa: E402
from gpu_report import plot_ratios, table_lines  # noqa: E402
from gpu_timing import Budget, Probe  # noqa: E402

SECTIONS = ("copies", "launch", "sfap", "laplacian", "eigen", "integrations", "dask", "anchors")
DEFAULT_BUDGET = 330.0


def _names(text: str, allowed, listed: str) -> list[str]:
    """The comma-separated names in ``text``, each one of ``allowed``; ``listed`` words the error."""
    names = [s.strip() for s in text.split(",") if s.strip()]
    if not names or any(s not in allowed for s in names):
        raise argparse.ArgumentTypeError(f"{listed} (got {text!r})")
    return list(dict.fromkeys(names))


def _sections(text: str) -> list[str]:
    return _names(text, SECTIONS, f"sections are {', '.join(SECTIONS)}")


def _budget(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a positive number of seconds (got {text!r})") from None
    if not value > 0 or value != value or value == float("inf"):
        raise argparse.ArgumentTypeError(f"expected a positive number of seconds (got {text})")
    return value


def _variant(text: str) -> list[str]:
    import gpu_variant_groups  # noqa: F401  (registers the variant families' groups)
    from gpu_variants import GROUPS

    if text == "all":
        return list(GROUPS)
    return _names(text, GROUPS, f"variant groups are {', '.join(GROUPS)} or all")


def _peaks_arg(text: str):
    try:
        return gpu_floors.parse_peaks(text)
    except ValueError as e:
        raise argparse.ArgumentTypeError(str(e)) from None


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="gpu_probe", description="kernelrt's GPU probe: every figure against its floor")
    p.add_argument("--section", type=_sections, default=list(SECTIONS), metavar="S1,S2",
                   help=f"sections to run, comma-separated (default: all of {','.join(SECTIONS)})")
    p.add_argument("--budget", type=_budget, default=DEFAULT_BUDGET, metavar="SECONDS",
                   help=f"seconds for the whole probe, shared by the sections (default {DEFAULT_BUDGET:g})")
    p.add_argument("--anchor-cap", type=_budget, default=60.0, metavar="SECONDS",
                   help="seconds each anchor eigensolver (torch.lobpcg, cupyx eigsh) may run to reach kernelrt's "
                        "accuracy before it is stopped unconverged (default 60)")
    p.add_argument("--out", type=Path, default=None, help="output folder (default: bench/results)")
    p.add_argument("--quick", action="store_true", help="fewer and smaller cases")
    p.add_argument("--ncu", action="store_true", help="launch each target kernel twice on fixed inputs, print nothing "
                   "(with --variant: the variant kernels too)")
    p.add_argument("--variant", type=_variant, default=None, metavar="NAME",
                   help="run the A/B kernel variants of a group (assembly, sfap_columns, sparse_spmv, loops_heat, ...) "
                        "or all, side by side")
    p.add_argument("--backend", choices=["auto", "cuda", "cpu"], default="auto", help="default: auto")
    p.add_argument("--peaks", type=_peaks_arg, default=None, metavar="MODEL|KEY=VALUE,...",
                   help="the floors' peak figures: a model of the table (H200) or overrides (hbm=3.0e12,...)")
    return p


def check_args(args) -> None:
    """Refuse what would fail after work started (an --out that is a file)."""
    if args.out is not None and args.out.exists() and not args.out.is_dir():
        raise SystemExit(f"gpu_probe: error: --out must be a folder (got the file {args.out})")


def device_peaks(backend, override=None):
    """The floors' peaks: ``--peaks``, else the table row of the device, its attributes, or the nominal H100."""
    if override is not None:
        return override
    if backend.name == "cuda" and not backend.is_simulator:
        found = gpu_floors.peaks_for(backend.device_name)
        if found is not None:
            return found
        try:
            from numba import cuda

            with backend.activated():
                d = cuda.get_current_device()
                return gpu_floors.peaks_from_attributes(
                    backend.device_name, backend.compute_capability, d.MULTIPROCESSOR_COUNT, d.CLOCK_RATE,
                    d.MEMORY_CLOCK_RATE, d.GLOBAL_MEMORY_BUS_WIDTH)
        except Exception:  # noqa: BLE001  (an attribute numba lacks: the nominal device, labelled)
            pass
    import dataclasses

    nominal = gpu_floors.peaks_for(gpu_floors.NOMINAL)
    what = "CUDA simulator" if backend.name == "cuda" else "CPU backend"
    return dataclasses.replace(nominal, source=f"nominal {nominal.name} SXM: no GPU measured ({what})")


def _runners():
    from gpu_cases_extra import run_anchors, run_dask, run_integrations
    from gpu_cases_laplacian import run_eigen, run_laplacian
    from gpu_cases_runtime import run_copies, run_launch
    from gpu_cases_sfap import run_sfap

    return {"copies": run_copies, "launch": run_launch, "sfap": run_sfap, "laplacian": run_laplacian,
            "eigen": run_eigen, "integrations": run_integrations, "dask": run_dask, "anchors": run_anchors}


def run_probe(probe, sections: list[str], total: float, variants: list[str] | None = None) -> dict:
    """Run the sections (or the variant groups) within ``total`` seconds; returns {section: record}."""
    if variants is not None:
        import gpu_variant_groups  # noqa: F401
        from gpu_variants import run_variants

        plan = {"variants": lambda p, b: run_variants(p, b, variants)}
    else:
        runners = _runners()
        plan = {s: runners[s] for s in sections}
    budget = Budget(total, list(plan))
    out = {s: {"status": "not selected"} for s in SECTIONS} if variants is None else {}
    for name, run in plan.items():
        sec = budget.section(name)
        record = {"status": "ran", "budget_s": sec.seconds}
        try:
            record["rows"] = run(probe, sec)
        except Exception as error:  # noqa: BLE001  (a section that breaks leaves the others running)
            from gpu_report import error_row

            record["rows"] = [error_row(name, name, "section", error)]
        record.update(spent_s=sec.spent, skipped=sec.skipped)
        out[name] = record
    return out


def _result(probe, args, sections: dict, t0: float) -> dict:
    from kernelrt.bench_cli import _git, _machine

    be = probe.backend
    return {
        "schema": "kernelrt-gpu-probe/1",
        "date": _dt.date.today().isoformat(),
        "commit": _git("rev-parse", "HEAD"),
        "dirty": bool(_git("status", "--porcelain")),
        "argv": sys.argv[1:],
        "label": probe.kind,
        "quick": probe.quick,
        "device": {"backend": be.name, "name": be.device_name, "simulated": probe.kind == "simulated",
                   "compute_capability": list(be.compute_capability) if be.compute_capability else None},
        "machine": _machine(),
        "peaks": probe.peaks.as_dict(),
        "budget_s": args.budget,
        "total_s": time.perf_counter() - t0,
        "sections": sections,
    }


def main(argv=None) -> int:
    args = build_parser().parse_args(argv)
    check_args(args)
    import kernelrt

    try:
        backend = kernelrt.get_backend(args.backend)
    except kernelrt.CudaUnavailableError as e:
        raise SystemExit(f"gpu_probe: error: --backend cuda: {e}") from None
    probe = Probe(backend, quick=args.quick, anchor_cap=args.anchor_cap)
    probe.peaks = device_peaks(backend, args.peaks)
    if args.ncu:
        from gpu_variants import ncu_launches

        ncu_launches(probe, args.section, variants=bool(args.variant))
        return 0
    t0 = time.perf_counter()
    sections = run_probe(probe, args.section, args.budget, args.variant)
    result = _result(probe, args, sections, t0)
    out_dir = args.out or HERE / "results"
    out_dir.mkdir(parents=True, exist_ok=True)
    from kernelrt.bench_cli import _slug

    stem = f"{result['date']}-{_slug(backend.device_name)}-{'variants' if args.variant else 'probe'}"
    path = out_dir / f"{stem}.json"
    path.write_text(json.dumps(result, indent=2, default=_json_default) + "\n")
    print(f"wrote {path}")
    png = out_dir / f"{stem}-ratios.png"
    if plot_ratios(result, png):
        print(f"wrote {png}")
    print("\n".join(table_lines(result)), flush=True)
    errors = [r for s in sections.values() for r in s.get("rows", []) if r["status"].startswith("error")]
    return 1 if errors else 0


def _json_default(value):
    """NumPy scalars and arrays in rows (phase timers, counts) as plain JSON."""
    if hasattr(value, "tolist"):
        return value.tolist()
    return str(value)


if __name__ == "__main__":
    sys.exit(main())
