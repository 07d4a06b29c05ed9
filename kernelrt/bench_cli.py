"""``kernelrt bench``: run the suites in bench/, write one results JSON, optionally plot.

The suites are pytest-benchmark modules (bench/bench_<suite>.py) that tag every
benchmark with ``group`` (one case) and ``extra_info``: ``role`` ("kernelrt" or "peer";
"variant" for another kernelrt route: plotted, not in the ratios), ``peer`` (its name),
and for plots ``figure``, ``x``, ``x_label`` and optionally ``x_scale`` ("log", the
default, or "linear"), ``series`` (the line an entry joins, instead of "kernelrt" or its
peer's name), ``throughput`` with ``throughput_label`` (a rate, plotted higher-is-better),
``bytes`` (memory traffic, for bandwidth) and ``peak_bandwidth``. Here the pairs become
ratios (peer time / kernelrt time, so > 1 means kernelrt is faster) measured in the same
run, and the file records the device, the versions and the commit.
"""

from __future__ import annotations

import datetime as _dt
import json
import os
import platform
import re
import subprocess
import sys
import tempfile
import xml.etree.ElementTree as ET
from pathlib import Path

from . import config
from .cuda_backend import CUDABackend
from .discovery import cpu_name, host_memory_info, package_versions, probe

__all__ = ["add_bench_parser", "run_bench", "summarize", "SUITES"]

SUITES = ("launch", "cache", "cuda_on_cpu", "sfap", "laplacian", "eigen", "myogen", "spectralbrain", "distributed")
# `kernelrt bench gpu`: bench/gpu_probe.py (not a pytest suite, so not part of "all"); these options go to it.
GPU_OPTIONS = {"--section": ("S1,S2", "sections (default: all)"), "--budget": ("SECONDS", "total seconds (default 330)"),
               "--variant": ("NAME", "A/B kernel variants of a group, or all"),
               "--backend": ("KIND", "auto, cuda or cpu"), "--peaks": ("PEAKS", "peak figures: a model or key=value,...")}


def _find_repo() -> Path:
    """The checkout whose bench/ to run: $KERNELRT_REPO, the working directory, or ours."""
    candidates = [config.bench_repo_override(), os.getcwd(), Path(__file__).resolve().parents[1]]
    for c in candidates:
        if c and (Path(c) / "bench" / "bench_launch.py").is_file():
            return Path(c).resolve()
    return Path(__file__).resolve().parents[1]


REPO = _find_repo()


def add_bench_parser(sub) -> None:
    p = sub.add_parser("bench", help="run the benchmark suites against their peers")
    p.add_argument("suites", nargs="*", default=["all"], choices=[*SUITES, "gpu", "all"], metavar="SUITE",
                   help=f"one or more of {', '.join(SUITES)} or all (default: all); or gpu alone: the GPU probe "
                        "(bench/gpu_probe.py, docs/gpu.md)")
    p.add_argument("--quick", action="store_true", help="small sizes and few rounds (a smoke run)")
    p.add_argument("--plot", action="store_true", help="also write PNG figures (needs matplotlib: the bench extra)")
    p.add_argument("--out", type=Path, default=None, help="output folder (default: bench/results)")
    p.add_argument("--json", action="store_true", help="print the results JSON")
    p.add_argument("--attach", action="append", default=[], metavar="NAME=PATH",
                   help="embed a JSON file, or a JUnit XML summary, in the results (repeatable)")
    gpu = p.add_argument_group("gpu probe options (kernelrt bench gpu; see python bench/gpu_probe.py --help)")
    for option, (metavar, text) in GPU_OPTIONS.items():
        gpu.add_argument(option, metavar=metavar, default=None, help=text)
    gpu.add_argument("--ncu", action="store_true", help="launch each target kernel twice for ncu, print nothing")
    p.set_defaults(func=_cmd_bench)


def _cmd_bench(args) -> int:
    if "gpu" in args.suites:
        return _cmd_gpu(args)
    given = [o for o in GPU_OPTIONS if getattr(args, o[2:]) is not None] + (["--ncu"] if args.ncu else [])
    if given:
        raise SystemExit(f"kernelrt bench: error: {', '.join(given)}: only for 'kernelrt bench gpu'")
    suites = list(SUITES) if "all" in args.suites else list(dict.fromkeys(args.suites))
    attachments = dict(_attachment(a) for a in args.attach)  # read first: bad paths fail fast
    result, path = run_bench(suites, quick=args.quick, out_dir=args.out, attachments=attachments)
    pngs = plot_results(result, path.with_suffix("")) if args.plot else []
    if args.json:
        print(json.dumps(result, indent=2))
    else:
        for r in result["ratios"]:
            print(f"{r['group']:40} {r['peer']:34} kernelrt {r['kernelrt_median_s'] * 1e3:10.3f} ms  "
                  f"peer {r['peer_median_s'] * 1e3:10.3f} ms  peer/kernelrt {r['ratio']:8.2f}")
        print(f"wrote {path}" + "".join(f"\nwrote {p}" for p in pngs))
    return 0 if result["pytest_exit_code"] == 0 else 1


def _cmd_gpu(args) -> int:
    """``kernelrt bench gpu``: bench/gpu_probe.py in a child process, with the probe's options."""
    if args.suites != ["gpu"]:
        raise SystemExit(f"kernelrt bench: error: gpu runs alone (got {' '.join(args.suites)})")
    if args.plot or args.json or args.attach:
        raise SystemExit("kernelrt bench gpu: error: --plot, --json and --attach belong to the pytest suites "
                         "(the probe always writes its JSON and, with matplotlib, its plot)")
    script = _bench_dir() / "gpu_probe.py"
    if not script.is_file():
        raise SystemExit(f"kernelrt bench gpu: the probe is not in this checkout (no {script})")
    cmd = [sys.executable, str(script)]
    for option in GPU_OPTIONS:
        value = getattr(args, option[2:])
        if value is not None:
            cmd += [option, value]
    cmd += ["--quick"] * args.quick + ["--ncu"] * args.ncu + (["--out", str(args.out)] if args.out else [])
    return subprocess.run(cmd, cwd=REPO).returncode


def _attachment(spec: str) -> tuple[str, object]:
    name, sep, path = spec.partition("=")
    if not sep or not name or not path:
        raise SystemExit(f"--attach takes NAME=PATH (got {spec!r})")
    if not os.path.isfile(path):
        raise SystemExit(f"--attach {name}: no file at {path}")
    if path.endswith(".xml"):
        root = ET.parse(path).getroot()
        suite = root if root.tag == "testsuite" else root.find("testsuite")
        keys = ("tests", "failures", "errors", "skipped", "time")
        summary = {k: suite.get(k) for k in keys} if suite is not None else {}
        summary["failed"] = [f"{c.get('classname')}::{c.get('name')}" for c in root.iter("testcase")
                             if c.find("failure") is not None or c.find("error") is not None]
        return name, summary
    try:
        return name, json.loads(Path(path).read_text())
    except ValueError as e:
        raise SystemExit(f"--attach {name}: {path} is not JSON ({e})") from None


def _bench_dir() -> Path:
    folder = REPO / "bench"
    if not folder.is_dir():
        raise SystemExit(f"kernelrt bench runs the suites in bench/ of a source checkout (not found at {folder})")
    return folder


def run_bench(suites, *, quick=False, out_dir=None, attachments=None) -> tuple[dict, Path]:
    """Run ``suites`` with pytest-benchmark; returns the summary and the JSON path written."""
    folder = _bench_dir()
    files = [str(folder / f"bench_{s}.py") for s in suites]
    missing = [f for f in files if not os.path.exists(f)]
    if missing:
        raise SystemExit(f"benchmark suite not found: {', '.join(missing)}")
    env = dict(os.environ, KERNELRT_BENCH_QUICK="1" if quick else "0")
    with tempfile.TemporaryDirectory() as tmp:
        raw_path = Path(tmp) / "raw.json"
        cmd = [sys.executable, "-m", "pytest", *files, "--benchmark-enable", f"--benchmark-json={raw_path}",
               "-q", "-p", "no:cacheprovider", f"--rootdir={REPO}"]
        print("$ " + " ".join(cmd[1:]), flush=True)
        code = subprocess.run(cmd, cwd=REPO, env=env).returncode
        raw = json.loads(raw_path.read_text()) if raw_path.exists() else {"benchmarks": []}
    result = summarize(raw, suites=suites, quick=quick, pytest_exit_code=code)
    result["attachments"] = attachments or {}
    out_dir = Path(out_dir) if out_dir else folder / "results"
    out_dir.mkdir(parents=True, exist_ok=True)
    stem = f"{result['date']}-{_slug(result['device']['name'])}" + ("-quick" if quick else "")
    path = out_dir / f"{stem}.json"
    path.write_text(json.dumps(result, indent=2) + "\n")
    return result, path


def summarize(raw: dict, *, suites=(), quick=False, pytest_exit_code=0) -> dict:
    """Turn pytest-benchmark JSON into kernelrt's results: entries, ratios, context."""
    entries = []
    for b in raw.get("benchmarks", []):
        info = dict(b.get("extra_info") or {})
        stats = b["stats"]
        entries.append({
            "group": b.get("group") or b["name"],
            "name": b["name"],
            "role": info.pop("role", "kernelrt"),
            "peer": info.pop("peer", None),
            "median_s": stats["median"],
            "min_s": stats["min"],
            "mean_s": stats["mean"],
            "rounds": stats["rounds"],
            "extra_info": info,
        })
    ratios = []
    for group in dict.fromkeys(e["group"] for e in entries):
        ours = [e for e in entries if e["group"] == group and e["role"] == "kernelrt"]
        peers = [e for e in entries if e["group"] == group and e["role"] == "peer"]
        if len(ours) != 1:
            continue
        for p in peers:
            ratios.append({
                "group": group,
                "peer": p["peer"] or p["name"],
                "kernelrt_median_s": ours[0]["median_s"],
                "peer_median_s": p["median_s"],
                "ratio": p["median_s"] / ours[0]["median_s"] if ours[0]["median_s"] > 0 else None,
            })
    return {
        "schema": 1,
        "date": _dt.date.today().isoformat(),
        "commit": _git("rev-parse", "HEAD"),
        "dirty": bool(_git("status", "--porcelain")),
        "suites": list(suites),
        "quick": quick,
        "pytest_exit_code": pytest_exit_code,
        "machine": _machine(),
        "device": _device(),
        "versions": package_versions(),
        "benchmarks": entries,
        "ratios": ratios,
    }


def _git(*args) -> str | None:
    try:
        out = subprocess.run(["git", *args], cwd=REPO, capture_output=True, text=True, timeout=10)
        return out.stdout.strip() if out.returncode == 0 else None
    except (OSError, subprocess.SubprocessError):
        return None


def _machine() -> dict:
    return {"cpu": cpu_name(), "cores": os.cpu_count(), "platform": platform.platform(),
            "host_memory_bytes": host_memory_info()[1]}


def _device() -> dict:
    avail = CUDABackend.availability()
    if avail.code == "ok":
        d = avail.devices[0]
        facts = probe()
        return {"backend": "cuda", "name": d.name, "compute_capability": list(d.compute_capability),
                "total_memory": d.total_memory, "driver": facts.driver_version, "cuda_runtime": facts.runtime_version}
    return {"backend": "cpu", "name": cpu_name(), "cuda_unavailable": avail.reason}



def _slug(text: str) -> str:
    return re.sub(r"[^a-z0-9]+", "-", text.lower()).strip("-")[:40] or "device"


# -- plots ---------------------------------------------------------------------------------


def plot_results(result: dict, stem: Path) -> list[Path]:
    """PNG figures per suite: time, speedup, and (where known) peak memory, bandwidth and throughput against size.

    Each benchmark ``figure`` (``<suite>-<case>``) is one panel; the panels of a suite share
    a PNG per quantity, with kernelrt and every peer as lines in the same panel.
    """
    try:  # optional (the bench extra), imported only for --plot
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        raise SystemExit("--plot needs matplotlib: pip install -e '.[bench]'") from None
    panels: dict[str, dict[str, list]] = {}
    for e in result["benchmarks"]:
        name = e["extra_info"].get("figure")
        if name and "x" in e["extra_info"]:
            panels.setdefault(name.split("-")[0], {}).setdefault(name, []).append(e)
    where = f"{result['device']['name']} ({result['device']['backend']}), {result['date']}"
    written = []
    for suite, figs in panels.items():
        series = {name: _series(rows) for name, rows in figs.items()}
        time_panels = {n: (s, lambda e: e["median_s"] * 1e3) for n, s in series.items()}
        written.append(_figure(plt, time_panels, figs, "median time [ms]", f"{suite}: time, lower is better\n{where}",
                               stem.parent / f"{stem.name}-{suite}-time.png", log=True))
        speed_panels = {n: (sp, None) for n, s in series.items() if (sp := _speedups(s))}
        if speed_panels:
            written.append(_figure(plt, speed_panels, figs, "peer time / kernelrt time",
                                   f"{suite}: speedup of kernelrt, higher is better\n{where}",
                                   stem.parent / f"{stem.name}-{suite}-speedup.png", log=True, baseline=1.0))
        mem_panels = {n: (s, lambda e: e["extra_info"]["peak_bytes"] / 1e6) for n, s in series.items()
                      if all(e["extra_info"].get("peak_bytes") is not None for e in figs[n])}
        if mem_panels:
            written.append(_figure(plt, mem_panels, figs, "peak RSS above start [MB]",
                                   f"{suite}: peak memory, lower is better\n{where}",
                                   stem.parent / f"{stem.name}-{suite}-memory.png", log=True))
        bw_panels = {n: (s, bw) for n, s in series.items() if (bw := _bandwidth(figs[n]))}
        if bw_panels:
            peak = next((e["extra_info"]["peak_bandwidth"] for rows in figs.values() for e in rows
                         if "peak_bandwidth" in e["extra_info"]), None)
            written.append(_figure(plt, bw_panels, figs, "kernel bytes / time [GB/s]",
                                   f"{suite}: effective rate of the timed call (end to end: copies included), higher is better\n{where}",
                                   stem.parent / f"{stem.name}-{suite}-bandwidth.png", log=False,
                                   baseline=peak / 1e9 if peak else None, baseline_label="device peak"))
        rate_panels = {n: (s, lambda e: e["extra_info"]["throughput"]) for n, s in series.items()
                       if all("throughput" in e["extra_info"] for e in figs[n])}
        if rate_panels:
            labels = {n: figs[n][0]["extra_info"].get("throughput_label", "items per second") for n in rate_panels}
            written.append(_figure(plt, rate_panels, figs, labels, f"{suite}: throughput, higher is better\n{where}",
                                   stem.parent / f"{stem.name}-{suite}-throughput.png", log=False, flat_single=True))
    return written


def _series(rows) -> dict:
    out: dict[str, list] = {}
    for e in rows:
        label = e["extra_info"].get("series") or ("kernelrt" if e["role"] == "kernelrt" else (e["peer"] or e["name"]))
        out.setdefault(label, []).append((e["extra_info"]["x"], e))
    return {k: sorted(v, key=lambda p: p[0]) for k, v in out.items()}


def _speedups(series) -> dict:
    ours = dict(series.get("kernelrt", []))
    out = {}
    for label, pts in series.items():
        if label == "kernelrt":
            continue
        ratio = [(x, e["median_s"] / ours[x]["median_s"]) for x, e in pts if x in ours]
        if ratio:
            out[f"vs {label}"] = ratio
    return out


def _bandwidth(rows):
    """GB/s of an entry from the bytes kernelrt's entry at the same size moves (peers move the same)."""
    traffic = {e["extra_info"]["x"]: e["extra_info"]["bytes"] for e in rows if "bytes" in e["extra_info"]}
    if not traffic:
        return None
    return lambda e: traffic.get(e["extra_info"]["x"], float("nan")) / e["median_s"] / 1e9


def _figure(plt, panels, figs, ylabel, title, path, *, log, baseline=None, baseline_label=None, flat_single=False):
    """One PNG, a panel per figure. ``ylabel``: one label, or {panel: label}; ``flat_single``
    draws a series of one point (a single in-process run) as a level across the panel."""
    n = len(panels)
    cols = min(n, 3)
    rows = (n + cols - 1) // cols
    fig, axes = plt.subplots(rows, cols, figsize=(5.2 * cols, 4.0 * rows + 0.6), dpi=110, squeeze=False)
    for ax, (name, (series, value)) in zip(axes.flat, panels.items()):
        xscale = figs[name][0]["extra_info"].get("x_scale", "log")  # log: sizes span decades
        span = [min(x for pts in series.values() for x, _ in pts), max(x for pts in series.values() for x, _ in pts)]
        for label, pts in series.items():
            xs = [x for x, _ in pts]
            ys = [v if value is None else value(v) for _, v in pts]
            style = dict(linewidth=2.6, marker="o", zorder=3) if label == "kernelrt" else dict(linewidth=1.5, marker="s", linestyle="--")
            if flat_single and len(pts) == 1:
                (line,) = ax.plot(span, ys * 2, linewidth=1.5, linestyle="--", label=label)
                ax.plot(xs, ys, marker="s", linestyle="none", color=line.get_color())
            else:
                ax.plot(xs, ys, label=label, **style)
        if flat_single and not log:  # rates: from zero
            ax.set_ylim(bottom=0)
        if baseline is not None:
            ax.axhline(baseline, color="grey", linewidth=1, linestyle=":", label=baseline_label)
        ax.set_xscale(xscale)
        if xscale == "linear":  # few discrete values (worker counts): a tick at each
            ax.set_xticks(sorted({x for pts in series.values() for x, _ in pts}))
        if log:
            ax.set_yscale("log")
            ticker = matplotlib_ticker()
            plain = ticker.FuncFormatter(lambda v, _: f"{v:g}")
            ax.yaxis.set_major_formatter(plain)
            low, high = ax.get_ylim()
            # Label the minor ticks only when the axis spans less than a decade.
            ax.yaxis.set_minor_formatter(plain if high / low < 10 else ticker.NullFormatter())
            ax.tick_params(axis="y", which="minor", labelsize=7)
        ax.set_title(name, fontsize=10)
        ax.set_xlabel(figs[name][0]["extra_info"].get("x_label", "size"))
        ax.set_ylabel(ylabel.get(name, "") if isinstance(ylabel, dict) else ylabel)
        ax.grid(True, which="both", alpha=0.3)
        ax.legend(fontsize=7)
    for ax in list(axes.flat)[n:]:
        ax.set_visible(False)
    fig.suptitle(title, fontsize=11)
    fig.tight_layout()
    fig.savefig(path)
    plt.close(fig)
    return path


def matplotlib_ticker():
    import matplotlib.ticker  # optional: only plot_results calls this

    return matplotlib.ticker
