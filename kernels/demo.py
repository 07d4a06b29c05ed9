"""``kernelrt demo``: both kernel families on the best backend, checked and timed.

On the backend ``get_backend`` picks (or the one asked for) it: says which and why;
compiles or loads the built-in kernels through the cache; runs the SFAP kernel on a
realistic motor unit and the Laplacian pipeline (topology, assembly, eigenpairs, HKS)
on an fsaverage-sized icosphere; checks every result against the in-repo NumPy
references and oracles; and times kernelrt beside those references in the same run.
Every step that takes over a second shows a progress bar on stderr when stderr is a terminal
(or in Jupyter: ``tqdm.auto``). A first run, which compiles the kernels, says so on stderr
before it starts, with an estimate of how long it takes.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import sys
import threading
import time
import warnings
from collections import Counter
from dataclasses import dataclass, field

import numpy as np
from tqdm.auto import tqdm  # a widget in Jupyter, text on a terminal

import kernelrt

from . import warm_specs
from .conventions import bars_visible

__all__ = ["DemoConfig", "run_demo", "add_demo_parser", "uncached_count", "compile_notice"]

LAPLACIAN_TOL = 1e-12
SFAP_TOL = 1e-12
# The first-run estimate, per kernel: numba takes 0.4 to 8 s a kernel; the 16 built-in CPU
# kernels took 16 to 28 s in all on a 2-core Xeon, so "about" and "an estimate" stay in the line.
SECONDS_PER_KERNEL = 1.0


@dataclass
class DemoConfig:
    """What the demo runs; the defaults are the issue's realistic sizes."""

    fibres: int = 200
    electrodes: int = 25
    dz: float = 0.1
    muscle_mm: float = 120.0
    level: int = 7  # icosphere level 7: 163,842 vertices (fsaverage's count)
    eigs: int = 50
    backend: str = "auto"
    device: int = 0
    references: bool = True
    progress: bool = True

    @classmethod
    def small(cls, **overrides) -> "DemoConfig":
        return cls(**{**dict(fibres=20, electrodes=5, dz=0.5, level=4, eigs=20), **overrides})


@dataclass
class Report:
    """Everything the demo measured; ``as_dict`` is the --json output."""

    backend: dict = field(default_factory=dict)
    kernels: dict = field(default_factory=dict)
    sfap: dict = field(default_factory=dict)
    laplacian: dict = field(default_factory=dict)
    checks: list = field(default_factory=list)
    total_s: float = 0.0

    def check(self, name: str, value: float, limit: float, detail: str = "") -> bool:
        ok = bool(np.isfinite(value) and value <= limit)
        self.checks.append({"name": name, "value": float(value), "limit": float(limit), "passed": ok, "detail": detail})
        return ok

    @property
    def passed(self) -> bool:
        return all(c["passed"] for c in self.checks)

    def as_dict(self) -> dict:
        return {"backend": self.backend, "kernels": self.kernels, "sfap": self.sfap, "laplacian": self.laplacian,
                "checks": self.checks, "passed": self.passed, "total_s": self.total_s}


@contextlib.contextmanager
def _step(label: str, enabled: bool):
    """Times a step; after a second, shows an elapsed-time bar until it ends."""
    done = threading.Event()
    timing = {"s": 0.0}

    def ticker():
        if done.wait(1.0) or not enabled:
            return

        # drawn only where someone sees it: a terminal or Jupyter (bars_visible),
        # so `kernelrt demo > log 2>&1` gets no carriage-return frames
        with tqdm(desc=label, bar_format="{desc}: {elapsed}", file=sys.stderr, leave=False, disable=not bars_visible()) as bar:
            while not done.wait(0.25):
                bar.refresh()

    thread = threading.Thread(target=ticker, daemon=True)
    thread.start()
    t0 = time.perf_counter()
    try:
        yield timing
    finally:
        timing["s"] = time.perf_counter() - t0
        done.set()
        thread.join()


def _say(report_json: bool, text: str = "") -> None:
    if not report_json:
        print(text, flush=True)


def run_demo(cfg: DemoConfig, *, as_json: bool = False) -> Report:
    """Run the demo; prints as it goes unless ``as_json``; returns the report."""
    t_start = time.perf_counter()
    rep = Report()
    with warnings.catch_warnings():  # the demo's first lines say which backend runs, and why
        warnings.simplefilter("ignore", kernelrt.CPUFallbackWarning)
        backend = kernelrt.get_backend(cfg.backend, device_id=cfg.device)
    avail = kernelrt.CUDABackend.availability(cfg.device)
    why = avail.reason if backend.name == "cpu" else f"cc {backend.compute_capability[0]}.{backend.compute_capability[1]}"
    rep.backend = {"name": backend.name, "device": backend.device_name, "why": why,
                   "cuda_available": avail.ok, "cuda_reason": avail.reason}
    _say(as_json, f"kernelrt demo on the {backend.name} backend: {backend.device_name}")
    _say(as_json, f"  why: {why if backend.name == 'cuda' else 'CUDA unavailable: ' + why}")
    _load_kernels(backend, cfg, rep, as_json)
    _sfap(backend, cfg, rep, as_json)
    _laplacian(backend, cfg, rep, as_json)
    rep.total_s = time.perf_counter() - t_start
    failed = [c["name"] for c in rep.checks if not c["passed"]]
    _say(as_json, f"\n{'all checks passed' if not failed else 'FAILED: ' + ', '.join(failed)} "
                  f"({len(rep.checks)} checks, {rep.total_s:.1f} s in total)")
    return rep


def uncached_count(specs, cache, target_prefix: str) -> int:
    """How many ``(kernel, signature)`` of ``specs`` have no entry in ``cache`` for their target.

    Judged from the entries' kernel names for targets starting with ``target_prefix``
    (``"cpu:"``, ``"cuda:sm_80"``): an entry that another version of a kernel's code left is
    taken as a hit, and the caller says so when that kernel compiles after all. A disabled
    cache has no entries: every kernel compiles.
    """
    have = Counter(e.kernel for e in cache.entries() if e.target.startswith(target_prefix)) if cache.enabled else Counter()
    want = Counter(kernel.qualname for kernel, _ in specs)
    return sum(max(0, n - have[name]) for name, n in want.items())


def compile_notice(count: int, cache) -> str:
    """The line a first run prints before compiling ``count`` kernels (``kernelrt demo``, ``cache warm``)."""
    what, them = (f"{count} kernels", "them") if count != 1 else ("1 kernel", "it")
    about = f"about {max(1, round(count * SECONDS_PER_KERNEL))} s, an estimate"
    if not cache.enabled:
        return (f"kernelrt: compiling {what} ({about}); the disk cache is off ({cache.disabled_reason}), "
                f"so every run compiles {them}")
    return f"kernelrt: compiling {what} once ({about}); later runs load {them} from the disk cache ({cache.directory})"


def _load_kernels(backend, cfg, rep, as_json) -> None:
    specs = warm_specs()[backend.name]
    prefix = "cpu:" if backend.name == "cpu" else "cuda:sm_{}{}".format(*backend.compute_capability)
    missing = uncached_count(specs, backend.cache, prefix)
    if missing:  # on stderr, also with --json: stdout is the report alone
        print(compile_notice(missing, backend.cache), file=sys.stderr, flush=True)
    statuses = []
    t0 = time.perf_counter()
    # a bar only on a terminal or in Jupyter (bars_visible); at once when compiling
    bar = tqdm(specs, desc="compiling kernels" if missing else "kernels", file=sys.stderr, leave=False,
               disable=not (cfg.progress and bars_visible()), delay=0 if missing else 1.0)
    for i, (kernel, sig) in enumerate(bar):
        statuses.append(backend.compile_kernel(kernel, sig).status)
        if statuses[-1] == "compiled" and not missing:  # the entries' names said cached: say it now
            missing = len(specs) - i
            tqdm.write(compile_notice(missing, backend.cache), file=sys.stderr)
    bar.close()
    seconds = time.perf_counter() - t0
    counts = {s: statuses.count(s) for s in dict.fromkeys(statuses)}
    rep.kernels = {"count": len(statuses), "statuses": counts, "seconds": seconds, "cache": str(backend.cache.directory)}
    how = ", ".join(f"{n} {'loaded from the disk cache' if s == 'disk' else s}" for s, n in counts.items())
    _say(as_json, f"kernels: {how} in {seconds:.2f} s ({backend.cache.directory})")


def _sfap(backend, cfg, rep, as_json) -> None:
    from .sfap import compute_sfaps  # the families import numba: only when the demo runs
    from .sfap.reference import channel_error, reference_sfaps, synthetic_motor_unit

    case = synthetic_motor_unit(cfg.fibres, cfg.electrodes, cfg.dz, length=cfg.muscle_mm)
    _say(as_json, f"\nSFAP: {cfg.fibres} fibres x {cfg.electrodes} electrodes, dz {cfg.dz:g} mm, "
                  f"muscle {cfg.muscle_mm:g} mm, fs 10240 Hz")
    with _step("SFAP (kernelrt, first call)", cfg.progress) as t_first:
        compute_sfaps(**case, backend=backend)
    with _step("SFAP (kernelrt)", cfg.progress) as t_ours:
        res = compute_sfaps(**case, backend=backend)
    rep.sfap = {"fibres": cfg.fibres, "electrodes": cfg.electrodes, "dz": cfg.dz, "nt": int(res.t.shape[0]),
                "kernelrt_s": t_ours["s"], "kernelrt_first_call_s": t_first["s"]}
    line = (f"  kernelrt          {t_ours['s']:8.3f} s   (Nt = {res.t.shape[0]}; the first call, which also "
            f"starts threads and touches memory, took {t_first['s']:.3f} s)")
    if cfg.references:
        with _step("SFAP (NumPy reference)", cfg.progress) as t_ref:
            ref = reference_sfaps(**case)
        rep.sfap["reference_s"] = t_ref["s"]
        line += f"\n  NumPy reference   {t_ref['s']:8.3f} s   kernelrt is {t_ref['s'] / t_ours['s']:.1f}x faster"
        errs = {k: channel_error(getattr(res, k), ref[k]) for k in ("sfaps_raw", "sfaps", "muap")}
        rep.sfap["channel_errors"] = errs
        for k, e in errs.items():
            rep.check(f"sfap {k} channel-relative error vs reference", e, SFAP_TOL)
        line += ("\n  check: channel-relative error vs the reference: "
                 + ", ".join(f"{k} {e:.1e}" for k, e in errs.items()) + f" (<= {SFAP_TOL:g})")
    _say(as_json, line)


def _laplacian(backend, cfg, rep, as_json) -> None:
    from . import laplacian as lap  # imports numba: only when the demo runs
    from .laplacian.reference import reference_hks, reference_laplacian, surface_area

    V, F = lap.icosphere(cfg.level)
    n = V.shape[0]
    _say(as_json, f"\nLaplacian: icosphere level {cfg.level}, {n:,} vertices, {F.shape[0]:,} faces")
    out = rep.laplacian = {"vertices": n, "faces": int(F.shape[0])}
    with _step("topology", cfg.progress) as t_topo:
        topo = lap.MeshTopology(F, n)
    with _step("assembly", cfg.progress) as t_asm:
        L, m = topo.assemble(V, backend)
    out.update(topology_s=t_topo["s"], assembly_s=t_asm["s"])
    lines = [f"  topology          {t_topo['s']:8.3f} s (once per face array)",
             f"  assembly          {t_asm['s']:8.3f} s (per geometry)"]
    if cfg.references:
        with _step("assembly (NumPy reference)", cfg.progress) as t_ref:
            L_ref, m_ref = reference_laplacian(V, F)
        out["reference_assembly_s"] = t_ref["s"]
        lines.append(f"  NumPy reference   {t_ref['s']:8.3f} s   kernelrt assembly is {t_ref['s'] / t_asm['s']:.1f}x "
                     f"faster ({t_ref['s'] / (t_topo['s'] + t_asm['s']):.1f}x with the topology)")
        scale = abs(L_ref).max()
        rep.check("laplacian |L - L_ref| / max|L|", abs(L - L_ref).max() / scale, LAPLACIAN_TOL)
        rep.check("laplacian |m - m_ref| / max m", np.abs(m - m_ref).max() / m_ref.max(), LAPLACIAN_TOL)
    scale = abs(L).max()
    rep.check("laplacian symmetry |L - L^T| / max|L|", abs(L - L.T).max() / scale, 0.0)
    rep.check("laplacian row sums / max|L|", np.abs(np.asarray(L.sum(axis=1))).max() / scale, 1e-13)
    area = surface_area(V, F)
    rep.check("laplacian |sum(m) - area| / area", abs(m.sum() - area) / area, 1e-12)
    lines.append("  check: L matches the reference, is symmetric, rows sum to 0, sum(m) = surface area")

    with _step(f"eigenpairs (k = {cfg.eigs})", False) as t_eig:  # the solver draws its own bar
        result = lap.eigenpairs(L, m, cfg.eigs, backend=backend, progress=cfg.progress or None)
    evals, evecs = result
    out["eigenpairs_s"] = t_eig["s"]
    out["eigenpairs_route"] = result.route
    out["eigenpairs_max_residual"] = float(result.residuals.max())
    out["eigenpairs_m_orthonormality"] = result.m_orthonormality
    h = lap.mean_edge_length(V, F)
    worst = _sphere_spectrum_error(evals, h)
    lines.append(f"  eigenpairs k={cfg.eigs:<4} {t_eig['s']:8.3f} s   route: {result.route}"
                 f"{' on the host' if result.method in ('cholesky', 'shift-invert') else ''}")
    lines.append(f"  check: max residual |Lv - λMv| / |λMv| {result.residuals.max():.1e}, "
                 f"max |VᵀMV - I| {result.m_orthonormality:.1e}")
    rep.check("eigenpairs max relative residual", float(result.residuals.max()), 1e-9)
    rep.check("eigenpairs M-orthonormality", result.m_orthonormality, 1e-10)
    if worst is not None:
        lmax, ratio = worst
        rep.check("sphere spectrum: |mean_l / l(l+1) - 1| / (0.1 l(l+1) h^2), worst l", ratio, 1.0, f"l <= {lmax}")
        lines.append(f"  check: multiplet means of l(l+1), l = 1..{lmax}, within 0.1 l(l+1) h^2 "
                     f"(worst at {ratio:.0%} of the tolerance)")

    t = lap.hks_times(evals)
    with _step("HKS", cfg.progress) as t_hks:
        H = lap.hks(evals, evecs, t, backend=backend)
    out["hks_s"] = t_hks["s"]
    line = f"  HKS ({t.shape[0]} times)   {t_hks['s']:8.3f} s"
    if cfg.references:
        with _step("HKS (NumPy reference)", cfg.progress) as t_href:
            H_ref = reference_hks(evals, evecs, t)
        out["reference_hks_s"] = t_href["s"]
        err = np.abs(np.asarray(H) - H_ref).max() / np.abs(H_ref).max()
        rep.check("hks vs reference, relative", err, 1e-12)
        line += f"\n  NumPy reference   {t_href['s']:8.3f} s   check: relative difference {err:.1e} (<= 1e-12)"
    lines.append(line)
    _say(as_json, "\n".join(lines))


def _sphere_spectrum_error(evals, h):
    """Worst |mean_l / l(l+1) - 1| / (0.1 l(l+1) h²) over the complete multiplets l >= 1."""
    lmax = int(np.floor(np.sqrt(len(evals)))) - 1  # (lmax + 1)² modes: l = 0..lmax complete
    if lmax < 1:
        return None
    worst, start = 0.0, 1
    for l in range(1, lmax + 1):
        mean = evals[start : start + 2 * l + 1].mean()
        start += 2 * l + 1
        target = l * (l + 1)
        worst = max(worst, abs(mean / target - 1.0) / (0.1 * target * h * h))
    return lmax, worst


# -- command line ----------------------------------------------------------------------------


def positive_int(text: str) -> int:
    """An argparse type: a positive integer (``kernelrt cohort`` uses it too)."""
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a positive integer (got {text!r})") from None
    if value < 1:
        raise argparse.ArgumentTypeError(f"expected a positive integer (got {value})")
    return value


def _positive_float(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a positive number (got {text!r})") from None
    if not value > 0 or not np.isfinite(value):
        raise argparse.ArgumentTypeError(f"expected a positive number (got {text})")
    return value


def _level(text: str) -> int:
    value = positive_int(text) if text != "0" else 0
    if value > 8:
        raise argparse.ArgumentTypeError(f"icosphere level must be 0..8 (got {value}; 8 is 655,362 vertices)")
    return value


def add_demo_parser(sub) -> None:
    text = "run both kernel families, checked against references, and time them"
    p = sub.add_parser("demo", help=text, description=f"{text}. The first run compiles the kernels "
                       "(it says so, with an estimate); later runs load them from the disk cache. "
                       "Exit status 0 when every check passed, 1 when one failed.")
    p.add_argument("--small", action="store_true",
                   help="small sizes, a few seconds: 20 fibres x 5 electrodes at dz 0.5, icosphere level 4, 20 eigenpairs")
    p.add_argument("--backend", choices=["auto", "cpu", "cuda"], default="auto",
                   help="the backend (default: auto, the one kernelrt.get_backend picks)")
    p.add_argument("--device", type=int, default=0, metavar="ID", help="CUDA device id (default 0)")
    p.add_argument("--fibres", type=positive_int, metavar="N", help="SFAP fibres (default 200; --small 20)")
    p.add_argument("--electrodes", type=positive_int, metavar="N", help="SFAP electrodes (default 25; --small 5)")
    p.add_argument("--dz", type=_positive_float, metavar="MM", help="SFAP spatial step in mm (default 0.1; --small 0.5)")
    p.add_argument("--level", type=_level, metavar="L",
                   help="icosphere level, 0..8 (default 7: 163,842 vertices; --small 4)")
    p.add_argument("--eigs", type=positive_int, metavar="K", help="eigenpairs (default 50; --small 20)")
    p.add_argument("--no-reference", action="store_true", help="skip the NumPy references (and their checks)")
    p.add_argument("--json", action="store_true",
                   help="print only the report, as one JSON document (messages and bars go to stderr)")
    p.set_defaults(func=_cmd_demo)


def _cmd_demo(args) -> int:
    overrides = {k: v for k, v in dict(fibres=args.fibres, electrodes=args.electrodes, dz=args.dz,
                                       level=args.level, eigs=args.eigs).items() if v is not None}
    overrides.update(backend=args.backend, device=args.device, references=not args.no_reference)
    cfg = DemoConfig.small(**overrides) if args.small else DemoConfig(**overrides)
    n_vertices = 10 * 4**cfg.level + 2
    if cfg.eigs >= n_vertices - 1:
        raise SystemExit(f"kernelrt demo: error: --eigs must be below {n_vertices - 1} for level {cfg.level} (got {cfg.eigs})")

    try:
        rep = run_demo(cfg, as_json=args.json)
    except kernelrt.CudaUnavailableError as e:
        raise SystemExit(f"kernelrt demo: error: --backend cuda: {e}") from None
    if args.json:
        print(json.dumps(rep.as_dict(), indent=2))
    return 0 if rep.passed else 1
