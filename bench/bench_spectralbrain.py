"""End to end: SpectralBrain 0.1.0's spectral pipeline, alone and with kernelrt's integration, same run.

The pipeline of SpectralBrain's README: ``mesh = BrainMesh(V, F)``, ``decomp =
mesh.decompose(k)`` (its cotangent Laplacian, then ``NumpyBackend.eigsh``: ARPACK
shift-invert over SuperLU), ``compute_hks(decomp, shared_hks_times(decomp, 100))`` and
``compute_wks(decomp, n_energies=100)``, on ``noisy_icosphere(level)`` (a jittered unit
sphere: no eigenvalue multiplets, and SpectralBrain's shift σ = -0.01 suits its scale).
Three routes per case, one group (``sb-pipeline-k<k>-ico<level>``), in this order:

* ``spectralbrain`` (peer): SpectralBrain as installed, the integration off;
* ``kernelrt`` (kernelrt): the same code after ``kernelrt.integrations.spectralbrain.
  enable()``, the one-line switch: the Laplacian is kernelrt's, the eigensolve still
  SpectralBrain's ARPACK;
* ``kernelrt+backend`` (variant, plotted, not in the ratios): also
  ``decompose(k, backend=KernelrtBackend())``, kernelrt's eigensolver (block Lanczos
  over a Cholesky factor on the CPU).

Levels 5, 6, 7 (10,242 / 40,962 / 163,842 vertices) at k = 100; quick (``--quick``,
``KERNELRT_BENCH_QUICK=1``): levels 4, 5 at k = 20. One round per entry (the peer's
solve takes ~40 s at level 7). Each entry's extra_info: the stages' seconds
(``laplacian_s``, ``eigsh_s``, ``descriptors_s``), ``peak_bytes`` (the pipeline's peak
RSS above its inputs, in a fresh process; ``KERNELRT_BENCH_SB_RSS=0`` skips it),
``eigen_max_rel_diff`` and ``hks_max_rel_diff`` against the peer's run of the case, the
integration's counters and, for the variant, ``ratio_vs_peer``. Imports and kernel
compilation stay out of the timings (a small pipeline runs first).

Run: ``kernelrt bench spectralbrain [--quick] [--plot]`` (or ``python -m pytest
bench/bench_spectralbrain.py --benchmark-enable``); ``python bench/bench_spectralbrain.py
[--quick]`` prints ``run()``'s dict as JSON. Never asserts on time.
"""

from __future__ import annotations

import contextlib
import functools
import importlib.util
import json
import os
import sys
import time

import numpy as np
import pytest

QUICK = os.environ.get("KERNELRT_BENCH_QUICK", "") not in ("", "0")
RSS = os.environ.get("KERNELRT_BENCH_SB_RSS", "1") not in ("", "0")
ROUTES = ("spectralbrain", "kernelrt", "kernelrt+backend")  # the peer first: it is the reference
N_TIMES = N_ENERGIES = 100
REFERENCE: dict = {}


def levels_and_k(quick: bool = QUICK) -> tuple[tuple[int, ...], int]:
    return ((4, 5), 20) if quick else ((5, 6, 7), 100)


def cases(quick: bool = QUICK) -> list[tuple[int, int, str]]:
    levels, k = levels_and_k(quick)
    return [(level, k, route) for level in levels for route in ROUTES]


def label(route: str) -> tuple[str, str | None]:
    """(role, peer name) of a route."""
    return {"spectralbrain": ("peer", "spectralbrain 0.1.0"),
            "kernelrt": ("kernelrt", None),
            "kernelrt+backend": ("variant", "spectralbrain + kernelrt, backend=KernelrtBackend()")}[route]


def unavailable() -> str | None:
    if importlib.util.find_spec("spectralbrain") is None:
        return "spectralbrain is not installed (pip install -e '.[spectralbrain]')"
    return None


@functools.cache
def mesh(level: int) -> tuple[np.ndarray, np.ndarray]:
    from kernelrt.kernels.laplacian import noisy_icosphere

    V, F = noisy_icosphere(level)
    return V, F.astype(np.int64)  # BrainMesh stores int64 faces


@contextlib.contextmanager
def integration(on: bool):
    """The switch as a route wants it, restored after."""
    import kernelrt.integrations.spectralbrain as ksb

    was = ksb.INTEGRATION.enabled
    (ksb.enable if on else ksb.disable)()
    try:
        yield ksb
    finally:
        (ksb.enable if was else ksb.disable)()


def pipeline(route: str, V, F, k: int) -> dict:
    """SpectralBrain's pipeline on one mesh; the stages' seconds and what they produced."""
    import spectralbrain as sb
    from spectralbrain.spectral.lbo.descriptors import shared_hks_times

    with integration(route != "spectralbrain") as ksb:
        backend = ksb.KernelrtBackend(backend="cpu") if route == "kernelrt+backend" else None
        t0 = time.perf_counter()
        brain = sb.BrainMesh(V, F)
        brain.compute_laplacian()  # what decompose would build first
        t1 = time.perf_counter()
        decomp = brain.decompose(k=k, backend=backend)
        t2 = time.perf_counter()
        hks = sb.compute_hks(decomp, shared_hks_times(decomp, N_TIMES))
        wks = sb.compute_wks(decomp, n_energies=N_ENERGIES)
        t3 = time.perf_counter()
        stats = ksb.stats()
    return {"laplacian_s": t1 - t0, "eigsh_s": t2 - t1, "descriptors_s": t3 - t2, "evals": decomp.eigenvalues,
            "hks": hks, "wks_shape": wks.shape, "calls": stats["calls"], "fallbacks": stats["fallbacks"]}


@functools.cache
def warm(route: str) -> None:
    """A small pipeline first: imports, kernel loading and compilation stay out of the timed one."""
    pipeline(route, *mesh(2), 10)


def checks(level: int, k: int, route: str, out: dict) -> dict:
    """The stages' seconds, and the differences to the peer's run of the case."""
    info = {key: out[key] for key in ("laplacian_s", "eigsh_s", "descriptors_s", "calls", "fallbacks")}
    if route == "spectralbrain":
        REFERENCE[(level, k)] = (out["evals"], out["hks"])
    elif (level, k) in REFERENCE:
        evals, hks = REFERENCE[(level, k)]
        keep = evals > 1e-10
        info["eigen_max_rel_diff"] = float(np.max(np.abs(out["evals"][keep] - evals[keep]) / evals[keep]))
        info["hks_max_rel_diff"] = float(np.max(np.abs(out["hks"] - hks)) / np.max(np.abs(hks)))
        if route == ROUTES[-1]:
            del REFERENCE[(level, k)]  # the peer's descriptors: ~130 MB at level 7
    return info


def _child_peak(level: int, k: int, route: str) -> dict:
    """In a fresh process: the pipeline's peak RSS above the RSS with the mesh built."""
    from benchlib import peak_rss

    warm(route)
    V, F = mesh(level)
    return peak_rss(lambda: pipeline(route, V, F, k))


def peak_bytes(level: int, k: int, route: str) -> dict:
    from benchlib import fresh_process

    # the child decides its own switch: never inherit this process's (enable() sets the variable)
    env = {key: value for key, value in os.environ.items() if key != "KERNELRT_SPECTRALBRAIN"}
    return fresh_process(__file__, level, k, route, env=env)


# -- plain runner ----------------------------------------------------------------------------


def run(quick: bool = QUICK, rss: bool = False) -> dict:
    """Every case once, every route; a plain dict for a CLI (no pytest)."""
    rows: dict = {}
    for level, k, route in cases(quick):
        V, F = mesh(level)
        warm(route)
        t0 = time.perf_counter()
        out = pipeline(route, V, F, k)
        seconds = time.perf_counter() - t0
        row = rows.setdefault(f"sb-pipeline-k{k}-ico{level}", {"vertices": len(V), "k": k, "routes": {}})
        row["routes"][route] = {"seconds": seconds, **checks(level, k, route, out)}
        if rss:
            row["routes"][route].update(peak_bytes(level, k, route))
    for row in rows.values():
        peer = row["routes"]["spectralbrain"]["seconds"]
        row["peer_over"] = {r: peer / v["seconds"] for r, v in row["routes"].items() if r != "spectralbrain"}
    return {"cases": rows}


# -- pytest-benchmark suite ------------------------------------------------------------------


@pytest.mark.parametrize("level,k,route", [pytest.param(*c, id=f"k{c[1]}-ico{c[0]}-{c[2]}") for c in cases()])
def test_pipeline(benchmark, level, k, route):
    from benchlib import tag

    reason = unavailable()
    if reason:
        pytest.skip(reason)
    V, F = mesh(level)
    warm(route)
    role, peer = label(route)
    # figure "spectralbrain-pipeline-k<k>": time (and peak memory) against mesh size
    tag(benchmark, f"sb-pipeline-k{k}-ico{level}", role, peer=peer, figure=f"spectralbrain-pipeline-k{k}",
        x=len(V), x_label="vertices", k=k, mesh=f"noisy ico{level}", route=route)
    out = []
    benchmark.pedantic(lambda: out.append(pipeline(route, V, F, k)), rounds=1, iterations=1)
    benchmark.extra_info.update(checks(level, k, route, out[0]))
    peer_s = REFERENCE.get(("seconds", level, k))
    if route == "spectralbrain":
        REFERENCE[("seconds", level, k)] = benchmark.stats.stats.median
    elif peer_s and route == "kernelrt+backend":  # a variant: not in kernelrt bench's ratios
        benchmark.extra_info["ratio_vs_peer"] = peer_s / benchmark.stats.stats.median
    del out[:]  # the descriptors at level 7 are ~260 MB: free them before the child runs
    if RSS:
        benchmark.extra_info.update(peak_bytes(level, k, route))


if __name__ == "__main__":
    if sys.argv[1:2] == ["--rss"]:  # the child of peak_bytes()
        level, k, route = sys.argv[2:5]
        print(json.dumps(_child_peak(int(level), int(k), route)))
    else:
        print(json.dumps(run(quick="--quick" in sys.argv, rss="--rss-too" in sys.argv), indent=2))
