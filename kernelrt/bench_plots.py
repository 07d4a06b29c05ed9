"""Figures of ``kernelrt bench`` results: one PNG per suite and quantity, drawn from the results JSON only.

``kernelrt bench --plot`` draws them after a run and ``python tools/replot.py FILE.json``
draws them again from a committed file, so a figure is never edited by hand. Each
benchmark ``figure`` (``<suite>-<case>``) is one panel; the panels of a suite share a PNG
per quantity: time, speedup, peak memory, bandwidth, throughput (whichever the rows
record). How they are drawn, and why:

* one colour per implementation (``IMPLEMENTATIONS``: kernelrt, MyoGen, SpectralBrain,
  libigl, ...) in every figure; several series of one implementation in a panel (MyoGen's
  CPU and GPU paths, kernelrt's routes) share its hue in shades, with their own markers;
* a series with one size is a marker, never a line; a panel whose series all have the one
  same size is a bar chart;
* time, speedup and memory on log axes (sizes span decades); bandwidth as % of the
  device's peak where the rows record the peak, GB/s otherwise, both on a log axis (a few
  % of an HBM peak would lie on the floor of a linear one); throughput from zero;
* x ticks at the measured sizes, with thousands separators, when there are few;
* a suite with a row marked ``stale`` (measured before a fix; the JSON says so) is not
  drawn: ``stale_suites`` says which and why.
"""

from __future__ import annotations

import math
import textwrap
from pathlib import Path

__all__ = ["IMPLEMENTATIONS", "implementation", "plot_results", "figures", "png_path", "stale_suites"]

# (name, words that identify it in a series label, colour). Order matters: the first match
# wins, so "spectralbrain + kernelrt, backend=KernelrtBackend()" is kernelrt (kernelrt's
# code ran) and "spectralbrain ... eigsh (ARPACK + SuperLU)" is SpectralBrain.
# Colours: the Okabe-Ito set (distinguishable with the common colour-vision deficiencies) first.
IMPLEMENTATIONS = (
    ("kernelrt", ("kernelrt",), "#0072B2"),
    ("MyoGen", ("myogen",), "#D55E00"),
    ("SpectralBrain", ("spectralbrain",), "#E69F00"),
    ("libigl", ("libigl",), "#009E73"),
    ("robust-laplacian", ("robust-laplacian", "robust_laplacian"), "#CC79A7"),
    ("ARPACK + Cholesky", ("cholespy", "arpack"), "#8C564B"),
    ("CuPy", ("cupy", "cusparse"), "#56B4E9"),
    ("numba", ("numba", "njit"), "#7B52AE"),
    ("NumPy/SciPy reference", ("numpy", "scipy"), "#4D4D4D"),
)
_OTHER = "#999999"
_PEER_MARKERS = ("s", "^", "v", "D", "P", "X")
_PEER_LINES = ("--", ":", "-.", (0, (5, 1)), (0, (1, 1)), (0, (3, 1, 1, 1)))
_SHADES = (0.0, -0.3, 0.35, -0.55, 0.6, 0.15)  # < 0 darker, > 0 lighter, by rank in the family


def implementation(label: str) -> str:
    """The implementation a series label belongs to (``IMPLEMENTATIONS``' name), or "other"."""
    low = label.lower()
    return next((name for name, words, _ in IMPLEMENTATIONS if any(w in low for w in words)), "other")


def stale_suites(result: dict) -> dict[str, str]:
    """{suite: why} for the suites not drawn: a plotted row says it was measured before a fix."""
    out: dict[str, list] = {}
    for e in result["benchmarks"]:
        info = e["extra_info"]
        if info.get("figure") and "x" in info and info.get("stale"):
            out.setdefault(info["figure"].split("-")[0], []).append(info["stale"])
    return {s: f"{len(why)} rows measured before a fix ({why[0]})" for s, why in out.items()}


def png_path(stem: Path, suite: str, quantity: str) -> Path:
    """``<stem>-<suite>-<quantity>.png`` beside the JSON; the suite once when the stem already ends with it."""
    stem = Path(stem)
    name = stem.name if stem.name.endswith(f"-{suite}") else f"{stem.name}-{suite}"
    return stem.parent / f"{name}-{quantity}.png"


def plot_results(result: dict, stem: Path) -> list[Path]:
    """Write every figure of ``result`` as ``png_path(stem, suite, quantity)``; returns the paths written."""
    plt = _pyplot()
    written = []
    for suite, quantity, fig in figures(result):
        path = png_path(stem, suite, quantity)
        fig.savefig(path)
        plt.close(fig)
        written.append(path)
    return written


def figures(result: dict):
    """Yield ``(suite, quantity, Figure)`` for every figure of ``result``; the caller closes each."""
    plt = _pyplot()
    stale = stale_suites(result)
    panels: dict[str, dict[str, list]] = {}
    for e in result["benchmarks"]:
        name = e["extra_info"].get("figure")
        if name and "x" in e["extra_info"] and name.split("-")[0] not in stale:
            panels.setdefault(name.split("-")[0], {}).setdefault(name, []).append(e)
    device = result["device"]
    commit = str(result.get("commit") or "?")[:7] + (" + local changes" if result.get("dirty") else "")
    where = f"{device['name']} ({device['backend']}), {result['date']}, commit {commit}"
    for suite, figs in panels.items():
        series = {name: _series(rows) for name, rows in figs.items()}
        styles = _styles({label for s in series.values() for label in s})
        draw = dict(figs=figs, styles=styles)
        # seconds when no time is under one: 57.6 reads faster than 57,600
        unit, scale = ("s", 1.0) if min(e["median_s"] for rows in figs.values() for e in rows) >= 1 else ("ms", 1e3)
        yield suite, "time", _figure(plt, {n: (s, lambda e: e["median_s"] * scale) for n, s in series.items()},
                                     f"median time [{unit}]", f"{suite}: time, lower is better\n{where}", log=True, **draw)
        speed = {n: (sp, None) for n, s in series.items() if (sp := _speedups(s))}
        if speed:
            yield suite, "speedup", _figure(plt, speed, "peer time / kernelrt time",
                                            f"{suite}: speedup of kernelrt (> 1: kernelrt faster), higher is better\n{where}",
                                            log=True, baseline=(1.0, "same speed"), **draw)
        mem = {n: (s, lambda e: e["extra_info"]["peak_bytes"] / 1e6) for n, s in series.items()
               if all(e["extra_info"].get("peak_bytes") is not None for e in figs[n])}
        if mem:
            yield suite, "memory", _figure(plt, mem, "peak RSS above start [MB]",
                                           f"{suite}: peak memory, lower is better\n{where}", log=True, **draw)
        bw = {n: (s, f) for n, s in series.items() if (f := _bandwidth(figs[n]))}
        if bw:
            peak = next((e["extra_info"]["peak_bandwidth"] for rows in figs.values() for e in rows
                         if e["extra_info"].get("peak_bandwidth")), None)
            if peak:  # a share of the peak: the axis says how far from the limit
                bw = {n: (s, lambda e, f=f: f(e) * 1e9 / peak * 100) for n, (s, f) in bw.items()}
            label = f"% of the device peak ({peak / 1e12:.3g} TB/s)" if peak else "kernel bytes / time [GB/s]"
            yield suite, "bandwidth", _figure(
                plt, bw, label, f"{suite}: kernel bytes / end-to-end time (copies included), higher is better\n{where}",
                log=True, baseline=(100.0, "device peak") if peak else None, **draw)
        rate = {n: (s, lambda e: e["extra_info"]["throughput"]) for n, s in series.items()
                if all("throughput" in e["extra_info"] for e in figs[n])}
        if rate:
            labels = {n: figs[n][0]["extra_info"].get("throughput_label", "items per second") for n in rate}
            yield suite, "throughput", _figure(plt, rate, labels, f"{suite}: throughput, higher is better\n{where}",
                                               log=False, **draw)


def _pyplot():
    try:  # optional (the bench extra): imported only to draw
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        raise SystemExit("plots need matplotlib: pip install matplotlib (or the bench extra: 'kernelrt[bench]')") from None
    return plt


def _series(rows) -> dict:
    out: dict[str, list] = {}
    for e in rows:
        label = e["extra_info"].get("series") or ("kernelrt" if e["role"] == "kernelrt" else (e["peer"] or e["name"]))
        out.setdefault(label, []).append((e["extra_info"]["x"], e))
    return {k: sorted(v, key=lambda p: p[0]) for k, v in out.items()}


def _speedups(series) -> dict:
    """{peer label: [(x, peer time / kernelrt time)]}: keyed by the peer, so it keeps the peer's colour."""
    ours = dict(series.get("kernelrt", []))
    out = {}
    for label, pts in series.items():
        ratio = [(x, e["median_s"] / ours[x]["median_s"]) for x, e in pts if x in ours] if label != "kernelrt" else []
        if ratio:
            out[label] = ratio
    return out


def _bandwidth(rows):
    """GB/s of an entry from the bytes kernelrt's entry at the same size moves (peers move the same)."""
    traffic = {e["extra_info"]["x"]: e["extra_info"]["bytes"] for e in rows if "bytes" in e["extra_info"]}
    if not traffic:
        return None
    return lambda e: traffic.get(e["extra_info"]["x"], float("nan")) / e["median_s"] / 1e9


def _styles(labels) -> dict[str, dict]:
    """Colour, marker and line per label: the implementation's hue; shades and markers by rank within it."""
    ranked: dict[str, list] = {}
    for label in sorted(labels, key=lambda s: (s != "kernelrt", s)):  # kernelrt's own series: the base shade
        ranked.setdefault(implementation(label), []).append(label)
    colours = {name: colour for name, _, colour in IMPLEMENTATIONS}
    out = {}
    for name, members in ranked.items():
        for rank, label in enumerate(members):
            colour = _shade(colours.get(name, _OTHER), _SHADES[rank % len(_SHADES)])
            if label == "kernelrt":
                out[label] = dict(color=colour, marker="o", linestyle="-", linewidth=2.6, zorder=3)
            else:
                i = (rank + (name == "kernelrt")) % len(_PEER_MARKERS)  # kernelrt's other routes: not its circle
                out[label] = dict(color=colour, marker=_PEER_MARKERS[i], linestyle=_PEER_LINES[i], linewidth=1.5, zorder=2)
    return out


def _shade(colour: str, amount: float) -> str:
    """``colour`` mixed toward white (amount > 0) or black (< 0)."""
    rgb = [int(colour[i:i + 2], 16) for i in (1, 3, 5)]
    target = 255 if amount > 0 else 0
    return "#" + "".join(f"{round(c + (target - c) * abs(amount)):02x}" for c in rgb)


def _number(v: float) -> str:
    """A tick label: thousands separators, no exponent between 0.001 and 10^9."""
    if v == 0:
        return "0"
    if not 1e-3 <= abs(v) < 1e9:
        return f"{v:.0e}"
    if abs(v) >= 1:
        return f"{v:,.0f}" if abs(v - round(v)) < 1e-9 * abs(v) else f"{v:,.3g}"
    return f"{v:.3g}"


def _figure(plt, panels, ylabel, title, *, figs, styles, log, baseline=None):
    """One figure, a panel per benchmark figure, the legend below them all. ``ylabel``: one label,
    or {panel: label}; ``baseline``: (value, label) drawn as a grey line."""
    n = len(panels)
    cols = min(n, 3)
    rows = (n + cols - 1) // cols
    fig, axes = plt.subplots(rows, cols, figsize=(max(5.2 * cols, 8.0), 3.8 * rows + 1.4), dpi=110, squeeze=False,
                             layout="constrained")
    for ax, (name, (series, value)) in zip(axes.flat, panels.items()):
        points = {label: [(x, v if value is None else value(v)) for x, v in pts] for label, pts in series.items()}
        info = figs[name][0]["extra_info"]
        xs = sorted({x for pts in points.values() for x, _ in pts})
        if len(xs) == 1:
            _bars(ax, points, styles, log=log, what=f"{info.get('x_label', 'size')} = {_number(xs[0])}")
        else:
            _lines(ax, points, styles, log=log, xs=xs, xscale=info.get("x_scale", "log"))
            ax.set_xlabel(info.get("x_label", "size"))
        if baseline is not None:
            ax.axhline(baseline[0], color="grey", linewidth=1, linestyle=":", label=baseline[1], gid="baseline")
        ax.set_title(name, fontsize=10)
        ax.set_ylabel(ylabel.get(name, "") if isinstance(ylabel, dict) else ylabel)
    for ax in list(axes.flat)[n:]:
        ax.set_visible(False)
    handles = {}
    for ax in axes.flat:
        for h, label in zip(*ax.get_legend_handles_labels()):
            handles.setdefault(label, h)
    fig.legend(handles.values(), handles.keys(), loc="outside lower center", ncols=min(3, len(handles)), fontsize=8)
    fig.suptitle(title, fontsize=11)
    return fig


def _lines(ax, points, styles, *, log, xs, xscale):
    """A line per series of several sizes, a marker for a series of one."""
    ticker = _ticker()
    for label, pts in points.items():
        style = dict(styles[label])
        if len(pts) == 1:  # one size: a point, not a level across the panel
            style.update(linestyle="none", markersize=8)
        ax.plot([x for x, _ in pts], [y for _, y in pts], label=label, **style)
    ax.set_xscale(xscale)
    if xscale == "linear" or len(xs) <= 6:  # few sizes: a tick at each, labelled as measured
        ax.set_xticks(xs, [_number(x) for x in xs], rotation=30 if len(xs) > 4 else 0)
        ax.xaxis.set_minor_formatter(ticker.NullFormatter())
    else:
        ax.xaxis.set_major_formatter(ticker.FuncFormatter(lambda v, _: _number(v)))
        ax.xaxis.set_minor_formatter(ticker.NullFormatter())
        ax.tick_params(axis="x", labelrotation=30)
    if log:
        _log_y(ax)
    else:  # rates: from zero
        ax.set_ylim(bottom=0)
        ax.yaxis.set_major_formatter(ticker.FuncFormatter(lambda v, _: _number(v)))
    ax.grid(True, which="both", alpha=0.3)


def _bars(ax, points, styles, *, log, what):
    """Every series at the one same size: a bar each, its value on top, from zero (bars from an
    arbitrary log floor would mislead about the ratio)."""
    labels = list(points)
    values = [points[label][0][1] for label in labels]
    bars = ax.bar(range(len(labels)), values, color=[styles[label]["color"] for label in labels], width=0.6,
                  label=labels)
    ax.bar_label(bars, [_number(float(f"{v:.3g}")) for v in values], fontsize=8, padding=2)
    ax.set_xticks(range(len(labels)), [textwrap.fill(label, 22, break_long_words=False) for label in labels], fontsize=7)
    ax.set_xlabel(what)
    ax.set_ylim(0, max(values) * 1.15)
    ax.yaxis.set_major_formatter(_ticker().FuncFormatter(lambda v, _: _number(v)))
    ax.grid(True, axis="y", alpha=0.3)


def _log_y(ax):
    ticker = _ticker()
    ax.set_yscale("log")
    ax.yaxis.set_major_formatter(ticker.FuncFormatter(lambda v, _: _number(v)))
    low, high = ax.get_ylim()
    if math.floor(math.log10(high)) - math.ceil(math.log10(low)) < 2:  # under 3 labelled powers of ten: label 2x and 5x too
        ax.yaxis.set_minor_locator(ticker.LogLocator(subs=(2.0, 5.0)))
        ax.yaxis.set_minor_formatter(ticker.FuncFormatter(lambda v, _: _number(v)))
    else:
        ax.yaxis.set_minor_formatter(ticker.NullFormatter())
    ax.tick_params(axis="y", which="minor", labelsize=7)


def _ticker():
    import matplotlib.ticker  # optional: only drawing calls this

    return matplotlib.ticker
