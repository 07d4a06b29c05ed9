"""Rows, the printed table and the plots of the GPU probe.

A row is one figure: which section and case, what it times ("kernel-only", "e2e",
"host", "copy", "launch"), the seconds, how they were measured (``timing``), the floor
from bench/gpu_floors.py with its formula and work counts, the ratio time / floor, and
a status: "ok" (a GPU figure), "cpu" (the CPU backend's wall clock against the nominal
device's floor), "simulated" (the CUDA simulator: meaningless as speed), "error: ..."
or "skipped: ...". The table printed last is one short line per row (the GPU tool
keeps only the tail of the output). ``python bench/gpu_report.py RESULT.json ...`` prints
the rows of one or more probe results as a Markdown table (docs/gpu.md's results), then the
host profiles of the end-to-end rows that carry one.
"""

from __future__ import annotations

import math

__all__ = ["make_row", "error_row", "table_lines", "markdown_lines", "profile_lines", "plot_ratios"]


def make_row(probe, section: str, case: str, what: str, timing: dict, floor: dict | None, **extra) -> dict:
    """A row from a timing record (``gpu_timing``) and a floor record (``gpu_floors``, or None: no floor)."""
    seconds = timing.get("seconds")
    floor_s = floor["floor_s"] if floor else None
    ratio = seconds / floor_s if (seconds is not None and floor_s and seconds > 0) else None
    if probe.kind == "simulated":
        ratio = None  # the simulator's times say nothing about speed
    row = {"section": section, "case": case, "what": what, **timing, "floor_s": floor_s, "ratio": ratio,
           "status": probe.status()}
    if floor:
        row.update(floor_high_s=floor.get("floor_high_s"), floor_formula=floor["formula"], floor_parts_s=floor["parts_s"],
                   work=floor["work"], **({"design_bound_s": floor["design_bound_s"]} if "design_bound_s" in floor else {}))
    row.update(extra)
    return row


def error_row(section: str, case: str, what: str, error: BaseException) -> dict:
    """A row for a case that raised: the probe goes on with the next one."""
    text = f"{type(error).__name__}: {error}".splitlines()[0][:200]
    return {"section": section, "case": case, "what": what, "seconds": None, "floor_s": None, "ratio": None,
            "status": f"error: {text}"}


def _time(s) -> str:
    if s is None or (isinstance(s, float) and not math.isfinite(s)):
        return "-"
    if s < 1e-3:
        return f"{s * 1e6:.1f}us"
    if s < 1:
        return f"{s * 1e3:.2f}ms"
    return f"{s:.2f}s"


def table_lines(result: dict) -> list[str]:
    """The short table: one line per row, sections in order, then the skipped cases per section."""
    lines = [f"kernelrt GPU probe: {result['device']['name']} ({result['label']}); floors from {result['peaks']['name']} "
             f"({result['peaks']['source']})",
             f"{'case':38} {'what':11} {'time':>9} {'floor':>9} {'x floor':>8}  status"]
    for name, sec in result["sections"].items():
        rows = sec.get("rows", [])
        if not rows and not sec.get("skipped"):
            if sec.get("status") not in (None, "ran", "not selected"):
                lines.append(f"[{name}] {sec['status']}")
            continue
        lines.append(f"[{name}] {sec.get('spent_s', 0):.1f} s of {sec.get('budget_s', 0):.1f} s")
        for r in rows:
            ratio = "-" if r.get("ratio") is None else f"{r['ratio']:.1f}x"
            status = r["status"] if len(r["status"]) < 40 else r["status"][:37] + "..."
            lines.append(f"{r['case'][:38]:38} {r['what'][:11]:11} {_time(r.get('seconds')):>9} "
                         f"{_time(r.get('floor_s')):>9} {ratio:>8}  {status}")
        if sec.get("skipped"):
            first = sec["skipped"][0]["reason"]
            lines.append(f"  skipped {len(sec['skipped'])}: {', '.join(s['case'] for s in sec['skipped'])[:60]} "
                         f"({first[:50]})")
    return lines


def _limit(row) -> str:
    """The floor as a share of the time: 100% is the hardware limit (blank without a floor)."""
    ratio = row.get("ratio")
    return "" if not ratio else f"{100.0 / ratio:.0f}%" if ratio <= 20 else f"{100.0 / ratio:.1f}%"


def markdown_lines(results: list[dict]) -> list[str]:
    """Every row of the probe results as one Markdown table, in section order; errors keep their text."""
    devices = sorted({f"{r['device']['name']} ({r['label']}, {r['date']}, commit {str(r.get('commit'))[:7]})"
                      for r in results})
    lines = [f"Probe rows: {'; '.join(devices)}. % of limit = floor / time.", "",
             "| section | case | what | time | floor | % of limit | status |", "|---|---|---|---|---|---|---|"]
    for result in results:
        for name, sec in result["sections"].items():
            for r in sec.get("rows", []):
                lines.append(f"| {name} | {r['case']} | {r['what']} | {_time(r.get('seconds'))} | "
                             f"{_time(r.get('floor_s'))} | {_limit(r)} | {r['status']} |")
    return lines


def profile_lines(results: list[dict], top: int = 6) -> list[str]:
    """The rows that carry a ``host_profile`` (gpu_timing.e2e): each one's top functions by own time."""
    lines = []
    for result in results:
        for name, sec in result["sections"].items():
            for r in sec.get("rows", []):
                if not r.get("host_profile"):
                    continue
                lines += ["", f"{name}: {r['case']} ({r['what']}, {_time(r.get('seconds'))}), one profiled call:", "",
                          "| function | calls | own | cumulative |", "|---|---|---|---|"]
                lines += [f"| `{f['function']}` | {f['calls']} | {_time(f['own_s'])} | {_time(f['cumulative_s'])} |"
                          for f in r["host_profile"][:top]]
    return ["", "Where the host time goes:"] + lines if lines else []


def plot_ratios(result: dict, path) -> bool:
    """One PNG: each row's time / floor, per section (log scale); False when matplotlib is missing or nothing to plot."""
    rows = [r for s in result["sections"].values() for r in s.get("rows", []) if r.get("ratio")]
    if not rows:
        return False
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        return False
    import matplotlib.ticker as ticker  # optional too: only drawing loads matplotlib

    fig, ax = plt.subplots(figsize=(9, 0.22 * len(rows) + 1.9), dpi=100, layout="constrained")
    labels = [f"{r['section']}: {r['case']} ({r['what']})" for r in rows]
    colours = {"kernel-only": "tab:blue", "e2e": "tab:orange", "copy": "tab:green", "launch": "tab:red",
               "loop": "tab:purple", "host": "tab:grey"}
    whats = [r["what"] for r in rows]
    bars = ax.barh(range(len(rows)), [r["ratio"] for r in rows], color=[colours.get(w, "tab:grey") for w in whats])
    ax.bar_label(bars, [f"{r['ratio']:.3g}x" for r in rows], fontsize=6, padding=2)
    ax.set_yticks(range(len(rows)), labels, fontsize=7)
    ax.set_ylim(len(rows) - 0.5, -0.5)  # first row on top, no blank band
    ax.set_xscale("log")
    ax.axvline(1.0, color="black", linewidth=1)
    # from below the limit (1) to room for the value labels
    ax.set_xlim(min(1.0, *(r["ratio"] for r in rows)) / 1.5, max(r["ratio"] for r in rows) * 2.5)
    ax.xaxis.set_major_formatter(ticker.FuncFormatter(lambda v, _: f"{v:,g}"))  # 1, 10, 100: not 10^0
    ax.xaxis.set_minor_formatter(ticker.NullFormatter())
    # what each colour is: the legend, one entry per kind of timing present
    handles = [plt.Rectangle((0, 0), 1, 1, color=colours.get(w, "tab:grey")) for w in dict.fromkeys(whats)]
    fig.legend(handles, list(dict.fromkeys(whats)), fontsize=7, loc="outside lower center", ncols=len(handles),
               title="what is timed", title_fontsize=7)
    ax.set_xlabel("time / floor (1 = the hardware limit; lower is better)")
    commit = str(result.get("commit") or "?")[:7] + (" + local changes" if result.get("dirty") else "")
    ax.set_title(f"kernelrt GPU probe, {result['device']['name']} ({result['label']}), {result['date']}\ncommit {commit}",
                 fontsize=9)
    ax.grid(True, axis="x", which="both", alpha=0.3)
    fig.savefig(path)
    plt.close(fig)
    return True


if __name__ == "__main__":
    import json
    import sys

    if len(sys.argv) < 2:
        sys.exit("usage: python bench/gpu_report.py PROBE.json [PROBE.json ...]  (prints a Markdown table)")
    loaded = [json.load(open(p)) for p in sys.argv[1:]]
    print("\n".join(markdown_lines(loaded) + profile_lines(loaded)))
