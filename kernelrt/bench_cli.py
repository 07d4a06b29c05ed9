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

import argparse
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
from .bench_plots import plot_results  # the figures: matplotlib loads only when one is drawn
from .cuda_backend import CUDABackend
from .discovery import cpu_name, host_memory_info, package_versions, probe

__all__ = ["add_bench_parser", "run_bench", "summarize", "SUITES"]

SUITES = ("launch", "cache", "cuda_on_cpu", "sfap", "laplacian", "eigen", "myogen", "spectralbrain", "distributed")
# `kernelrt bench gpu`: bench/gpu_probe.py (not a pytest suite, so not part of "all"); these options go to it.
GPU_OPTIONS = {"--section": ("S1,S2", "sections (default: all)"), "--budget": ("SECONDS", "total seconds (default 330)"),
               "--variant": ("NAME", "A/B kernel variants of a group, or all"),
               "--backend": ("KIND", "auto, cuda or cpu"), "--peaks": ("PEAKS", "peak figures: a model or key=value,..."),
               "--anchor-cap": ("SECONDS", "seconds each anchor eigensolver may run (default 60)")}


def _find_repo() -> Path:
    """The checkout whose bench/ to run: $KERNELRT_REPO, the working directory, or ours."""
    candidates = [config.bench_repo_override(), os.getcwd(), Path(__file__).resolve().parents[1]]
    for c in candidates:
        if c and (Path(c) / "bench" / "bench_launch.py").is_file():
            return Path(c).resolve()
    return Path(__file__).resolve().parents[1]


REPO = _find_repo()


def _suite(text: str) -> str:
    """SUITE's argparse type. Not ``choices``: Python 3.11's argparse checks a nargs="*"
    default against them as a whole list and refuses ``kernelrt bench`` (``invalid choice: ['all']``)."""
    if text not in (*SUITES, "gpu", "all"):
        raise argparse.ArgumentTypeError(f"invalid choice: {text!r} (choose from {', '.join((*SUITES, 'all', 'gpu'))})")
    return text


def add_bench_parser(sub) -> None:
    text = "run the benchmark suites against their peers (from a source checkout)"
    p = sub.add_parser("bench", help=text, description=f"kernelrt bench: {text}; writes one results JSON. "
                       "Exit status 0 when every benchmark ran, 1 otherwise.")
    p.add_argument("suites", nargs="*", type=_suite, default=["all"], metavar="SUITE",
                   help=f"one or more of {', '.join(SUITES)} or all (default: all); or gpu alone: the GPU probe "
                        "(bench/gpu_probe.py, docs/gpu.md)")
    p.add_argument("--quick", action="store_true", help="small sizes and few rounds (a smoke run)")
    p.add_argument("--plot", action="store_true", help="also write PNG figures (needs matplotlib: the bench extra)")
    p.add_argument("--out", type=Path, default=None, metavar="DIR", help="output folder (default: bench/results)")
    p.add_argument("--json", action="store_true",
                   help="print only the results, as one JSON document (pytest's output goes to stderr)")
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
    given = [o for o in GPU_OPTIONS if _gpu_option(args, o) is not None] + (["--ncu"] if args.ncu else [])
    if given:
        raise SystemExit(f"kernelrt bench: error: {', '.join(given)}: only for 'kernelrt bench gpu'")
    suites = list(SUITES) if "all" in args.suites else list(dict.fromkeys(args.suites))
    attachments = dict(_attachment(a) for a in args.attach)  # read first: bad paths fail fast
    result, path = run_bench(suites, quick=args.quick, out_dir=args.out, attachments=attachments,
                             log=sys.stderr if args.json else None)
    pngs = plot_results(result, path.with_suffix("")) if args.plot else []
    if args.json:
        print(json.dumps(result, indent=2))
    else:
        for r in result["ratios"]:
            print(f"{r['group']:40} {r['peer']:34} kernelrt {r['kernelrt_median_s'] * 1e3:10.3f} ms  "
                  f"peer {r['peer_median_s'] * 1e3:10.3f} ms  peer/kernelrt {r['ratio']:8.2f}")
        print(f"wrote {path}" + "".join(f"\nwrote {p}" for p in pngs))
    return 0 if result["pytest_exit_code"] == 0 else 1


def _gpu_option(args, option: str):
    return getattr(args, option[2:].replace("-", "_"))  # argparse's attribute for --anchor-cap is anchor_cap


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
        value = _gpu_option(args, option)
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


def _descriptor(stream):
    """Where a child process writes for ``stream``: None (inherit), its descriptor, or stderr's (2)."""
    try:
        return None if stream is None else stream.fileno()
    except (AttributeError, OSError, ValueError):  # a stream without one (a test's capture)
        return 2


def _bench_dir() -> Path:
    folder = REPO / "bench"
    if not folder.is_dir():
        raise SystemExit(f"kernelrt bench runs the suites in bench/ of a source checkout (not found at {folder})")
    return folder


def run_bench(suites, *, quick=False, out_dir=None, attachments=None, log=None) -> tuple[dict, Path]:
    """Run ``suites`` with pytest-benchmark; returns the summary and the JSON path written.

    ``log``: the stream for the pytest command line and pytest's output (default: stdout).
    """
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
        print("$ " + " ".join(cmd[1:]), file=log or sys.stdout, flush=True)
        code = subprocess.run(cmd, cwd=REPO, env=env, stdout=_descriptor(log)).returncode
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
