"""Draw a results file's figures again from its JSON: ``python tools/replot.py FILE.json [FILE.json ...]``.

A ``kernelrt bench`` result (``benchmarks``) gets the figures ``kernelrt bench --plot``
writes (kernelrt/bench_plots.py: ``<stem>-<suite>-<quantity>.png``); a GPU probe result
(``sections``: bench/gpu_probe.py) gets its ``<stem>-ratios.png`` (bench/gpu_report.py).
The PNGs go beside each JSON, or into ``--out DIR``. Committed figures are made this way
only, never edited by hand. A suite whose rows say they were measured before a fix
(``stale``) is not drawn, and the tool says so. Every file is read and checked before
anything is drawn; exit status 2 when one cannot be used.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "bench"))  # gpu_report: a script module of the checkout's bench/, not a package

from kernelrt.bench_plots import plot_results, stale_suites  # noqa: E402


def _load(path: Path) -> dict:
    try:
        data = json.loads(path.read_text())
    except (OSError, ValueError) as e:
        raise SystemExit(f"replot: {path}: not a readable JSON file ({e})") from None
    if not isinstance(data, dict) or not ({"benchmarks", "sections"} & set(data)):
        raise SystemExit(f"replot: {path}: expected a kernelrt bench result ('benchmarks') or a GPU probe "
                         f"result ('sections'); got keys {sorted(data)[:8] if isinstance(data, dict) else type(data).__name__}")
    return data


def replot(path: Path, data: dict, out_dir: Path | None = None) -> list[Path]:
    """Draw ``data`` (read from ``path``); returns the PNGs written and prints what was and was not drawn."""
    stem = (out_dir or path.parent) / path.stem
    if "benchmarks" in data:
        written = plot_results(data, stem)
        for suite, why in stale_suites(data).items():
            print(f"{path.name}: {suite}: not drawn: {why}")
    else:
        from gpu_report import plot_ratios

        png = stem.parent / f"{stem.name}-ratios.png"
        written = [png] if plot_ratios(data, png) else []
    if not written:
        print(f"{path.name}: nothing to draw (no rows with a figure)")
    return written


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(prog="python tools/replot.py", description=__doc__.split("\n\n")[0])
    parser.add_argument("files", nargs="+", type=Path, metavar="FILE.json")
    parser.add_argument("--out", type=Path, default=None, metavar="DIR", help="write the PNGs here (default: beside each JSON)")
    args = parser.parse_args(argv)
    if args.out is not None and not args.out.is_dir():
        parser.error(f"--out: {args.out} is not a directory")
    loaded = [(p, _load(p)) for p in args.files]  # all checked before anything is drawn
    for path, data in loaded:
        for png in replot(path, data, args.out):
            print(f"wrote {png}")
    return 0


if __name__ == "__main__":
    try:
        sys.exit(main())
    except SystemExit as e:  # a refusal names the file: status 2, as argparse's errors
        if isinstance(e.code, str):
            print(e.code, file=sys.stderr)
            sys.exit(2)
        raise
