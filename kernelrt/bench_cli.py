"""``kernelrt bench``: run the suites in bench/, write one results JSON, optionally plot.

The suites are pytest-benchmark modules (bench/bench_<suite>.py) that tag every
benchmark with ``group`` (one case) and ``extra_info``: ``role`` ("kernelrt" or "peer"),
``peer`` (its name), and for plots ``figure``, ``x``, ``x_label`` and optionally
``bytes`` (memory traffic, for bandwidth) and ``peak_bandwidth``. Here the pairs become
ratios (peer time / kernelrt time, so > 1 means kernelrt is faster) measured in the same
run, and the file records the device, the versions and the commit.
"""

from __future__ import annotations

import datetime as _dt
import json
import os
import re
import subprocess
import sys
import tempfile
from pathlib import Path

__all__ = ["add_bench_parser", "run_bench", "summarize", "SUITES"]

SUITES = ("launch", "cache", "sfap", "laplacian")
REPO = Path(__file__).resolve().parents[1]


def add_bench_parser(sub) -> None:
    p = sub.add_parser("bench", help="run the benchmark suites against their peers")
    p.add_argument("suites", nargs="*", default=["all"], choices=[*SUITES, "all"], metavar="SUITE",
                   help=f"one or more of {', '.join(SUITES)} or all (default: all)")
    p.add_argument("--quick", action="store_true", help="small sizes and few rounds (a smoke run)")
    p.add_argument("--plot", action="store_true", help="also write PNG figures (needs matplotlib: the bench extra)")
    p.add_argument("--out", type=Path, default=None, help="output folder (default: bench/results)")
    p.add_argument("--json", action="store_true", help="print the results JSON")
    p.add_argument("--attach", action="append", default=[], metavar="NAME=PATH",
                   help="embed a JSON file, or a JUnit XML summary, in the results (repeatable)")
    p.set_defaults(func=_cmd_bench)


def _cmd_bench(args) -> int:
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


def _attachment(spec: str) -> tuple[str, object]:
    name, sep, path = spec.partition("=")
    if not sep or not name or not path:
        raise SystemExit(f"--attach takes NAME=PATH (got {spec!r})")
    if not os.path.isfile(path):
        raise SystemExit(f"--attach {name}: no file at {path}")
    if path.endswith(".xml"):
        import xml.etree.ElementTree as ET

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
        "versions": _versions(),
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
    import platform

    from .devices import cpu_name
    from .memory import host_memory_info

    return {"cpu": cpu_name(), "cores": os.cpu_count(), "platform": platform.platform(),
            "host_memory_bytes": host_memory_info()[1]}


def _device() -> dict:
    from .cuda_backend import CUDABackend
    from .devices import cpu_name, probe

    avail = CUDABackend.availability()
    if avail.code == "ok":
        d = avail.devices[0]
        facts = probe()
        return {"backend": "cuda", "name": d.name, "compute_capability": list(d.compute_capability),
                "total_memory": d.total_memory, "driver": facts.driver_version, "cuda_runtime": facts.runtime_version}
    return {"backend": "cpu", "name": cpu_name(), "cuda_unavailable": avail.reason}


def _versions() -> dict:
    from .cli import _versions as versions

    return versions()


def _slug(text: str) -> str:
    return re.sub(r"[^a-z0-9]+", "-", text.lower()).strip("-")[:40] or "device"


# -- plots ---------------------------------------------------------------------------------


def plot_results(result: dict, stem: Path) -> list[Path]:
    """PNG figures: time vs size per series, speedup vs x, bandwidth vs x; returns paths."""
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        raise SystemExit("--plot needs matplotlib: pip install -e '.[bench]'") from None
    figures: dict[str, list] = {}
    for e in result["benchmarks"]:
        if "figure" in e["extra_info"] and "x" in e["extra_info"]:
            figures.setdefault(e["extra_info"]["figure"], []).append(e)
    written = []
    where = f"{result['device']['name']} ({result['device']['backend']}), {result['date']}"
    for name, rows in figures.items():
        xlabel = rows[0]["extra_info"].get("x_label", "size")
        series = _series(rows)
        written.append(_line_plot(plt, series, lambda e: e["median_s"] * 1e3, xlabel, "median time [ms]",
                                  f"{name}: time\n{where}", stem.parent / f"{stem.name}-{name}-time.png", log=True))
        speedups = _speedups(series)
        if speedups:
            written.append(_line_plot(plt, speedups, None, xlabel, "peer time / kernelrt time",
                                      f"{name}: speedup of kernelrt\n{where}",
                                      stem.parent / f"{stem.name}-{name}-speedup.png", log=True, baseline=1.0))
        if any("bytes" in e["extra_info"] for e in rows):
            bw = {s: [(x, e) for x, e in pts if "bytes" in e["extra_info"]] for s, pts in series.items()}
            peak = next((e["extra_info"]["peak_bandwidth"] for e in rows if "peak_bandwidth" in e["extra_info"]), None)
            written.append(_line_plot(plt, bw, lambda e: e["extra_info"]["bytes"] / e["median_s"] / 1e9, xlabel,
                                      "achieved bandwidth [GB/s]", f"{name}: memory bandwidth\n{where}",
                                      stem.parent / f"{stem.name}-{name}-bandwidth.png", log=False,
                                      baseline=peak / 1e9 if peak else None, baseline_label="device peak"))
    return written


def _series(rows) -> dict:
    out: dict[str, list] = {}
    for e in rows:
        label = "kernelrt" if e["role"] == "kernelrt" else (e["peer"] or e["name"])
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


def _line_plot(plt, series, value, xlabel, ylabel, title, path, *, log, baseline=None, baseline_label=None):
    fig, ax = plt.subplots(figsize=(7.5, 4.8), dpi=120)
    for label, pts in series.items():
        if not pts:
            continue
        xs = [x for x, _ in pts]
        ys = [v if value is None else value(v) for _, v in pts]
        style = dict(linewidth=2.4, marker="o") if label == "kernelrt" else dict(linewidth=1.6, marker="s", linestyle="--")
        ax.plot(xs, ys, label=label, **style)
    if baseline is not None:
        ax.axhline(baseline, color="grey", linewidth=1, linestyle=":", label=baseline_label)
    if log:
        ax.set_xscale("log")
        ax.set_yscale("log")
    ax.set_xlabel(xlabel)
    ax.set_ylabel(ylabel)
    ax.set_title(title, fontsize=10)
    ax.grid(True, which="both", alpha=0.3)
    ax.legend(fontsize=9)
    fig.tight_layout()
    fig.savefig(path)
    plt.close(fig)
    return path
