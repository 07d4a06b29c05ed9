"""Timing for the GPU probe: kernel-only, end-to-end and host figures, labelled by what measured them, and budgets.

* ``kernel_only(probe, launch)``: on a GPU, CUDA events around ``n`` back-to-back
  launches, with the host's time per launch recorded separately. When the host is the
  bottleneck (the events would then time launch overhead) the launches are queued behind
  a sleeping kernel first, so the events bracket device work alone; the record says
  which (``timing``). On the CPU backend: the wall clock (``timing`` "wall"); under the
  CUDA simulator: the wall clock too, labelled "simulated" (meaningless as speed).
* ``e2e(probe, fn)``: host arrays in, host arrays out, wall clock, best of a few rounds;
  with ``profile=True`` also where one call spends its host time (``host_profile``).
* ``Budget``: the probe's seconds shared across sections; a section stops between cases
  once its share is spent and records which cases it skipped.
"""

from __future__ import annotations

import cProfile
import math
import pstats
import statistics
import time
from pathlib import Path

__all__ = ["Probe", "Budget", "SectionBudget", "kernel_only", "e2e", "host_time", "host_profile"]

SLEEP_NS = 20_000  # one nanosleep call of the sleeper kernel (the hardware caps one call near 1 ms)


class Probe:
    """The backend under test and how its figures are labelled.

    Attributes:
        backend: the kernelrt backend.
        kind: "gpu" (a real CUDA device), "simulated" (Numba's CUDA simulator) or "cpu".
        quick: smaller cases and fewer launches.
        anchor_cap: seconds each anchor eigensolver may run before it stops unconverged.
    """

    def __init__(self, backend, quick: bool = False, anchor_cap: float = 60.0):
        self.backend = backend
        self.quick = quick
        self.anchor_cap = anchor_cap
        if backend.name == "cpu":
            self.kind = "cpu"
        else:
            self.kind = "simulated" if backend.is_simulator else "gpu"
        self._sleeper = None
        self.peaks = None  # gpu_floors.Peaks of the floors, set by gpu_probe.device_peaks

    @property
    def gpu(self) -> bool:
        return self.kind == "gpu"

    def launches(self, n_gpu: int) -> int:
        """Launches per kernel-only figure: ``n_gpu`` on a GPU, 1 under the simulator, few on the CPU."""
        if self.kind == "simulated":
            return 1
        if self.kind == "cpu":
            return 2 if self.quick else 3
        return max(2, n_gpu // 5) if self.quick else n_gpu

    def status(self) -> str:
        """The status of a figure this probe measured: "ok", "cpu" or "simulated"."""
        return {"gpu": "ok", "cpu": "cpu", "simulated": "simulated"}[self.kind]

    def sync(self) -> None:
        self.backend.synchronize()

    def sleeper(self):
        """A ``(seconds) -> None`` that queues a sleeping kernel on the default stream (cc >= 7.0), else None."""
        if not self.gpu or tuple(self.backend.compute_capability) < (7, 0):
            return None
        if self._sleeper is None:
            import numpy as np
            from numba import cuda

            @cuda.jit
            def gpu_probe_sleep(n, ns):  # named so that ncu's kernel regexes never match it
                for _ in range(n):
                    cuda.nanosleep(ns)

            def sleep(seconds: float) -> None:
                n = max(1, math.ceil(seconds * 1e9 / SLEEP_NS))
                with self.backend.activated():
                    gpu_probe_sleep[1, 1](n, np.uint32(SLEEP_NS))

            sleep(1e-5)  # compile now, outside any timed region
            self.sync()
            self._sleeper = sleep
        return self._sleeper


def host_time(fn, rounds: int = 3) -> float:
    """Best wall-clock seconds of ``rounds`` calls of ``fn`` (host work, nothing to synchronise)."""
    best = math.inf
    for _ in range(max(1, rounds)):
        t0 = time.perf_counter()
        fn()
        best = min(best, time.perf_counter() - t0)
    return best


def e2e(probe: Probe, fn, rounds: int = 3, profile: bool = False) -> dict:
    """Host in, host out: the best wall-clock seconds of ``rounds`` calls after one warm-up call.

    ``profile``: one more call under cProfile, after the timed ones, whose top functions by
    own time go in the record (``host_profile``): where an end-to-end figure far above its
    floor spends its host time (a device wait shows as the synchronising call's own time).
    """
    fn()
    probe.sync()
    if probe.kind == "simulated":
        rounds = 1
    times = []
    for _ in range(max(1, rounds)):
        t0 = time.perf_counter()
        fn()
        probe.sync()
        times.append(time.perf_counter() - t0)
    out = {"seconds": min(times), "median_s": statistics.median(times), "rounds": len(times),
           "timing": "simulated" if probe.kind == "simulated" else "wall"}
    if profile and probe.kind != "simulated":
        out["host_profile"] = host_profile(lambda: (fn(), probe.sync()))
    return out


def host_profile(fn, top: int = 12) -> list[dict]:
    """One call of ``fn`` under cProfile: its ``top`` functions by own time, with calls and cumulative time."""
    profiler = cProfile.Profile()
    profiler.runcall(fn)
    # the raw table: get_stats_profile() rounds its times to milliseconds
    raw = pstats.Stats(profiler).stats  # {(file, line, name): (primitive calls, calls, own, cumulative, callers)}
    ranked = sorted(raw.items(), key=lambda item: item[1][2], reverse=True)[:top]
    return [{"function": f"{Path(file).name}:{line}({name})", "calls": calls, "own_s": own, "cumulative_s": cumulative}
            for (file, line, name), (_, calls, own, cumulative, _) in ranked]


def kernel_only(probe: Probe, launch, n: int = 50) -> dict:
    """Device time per launch of ``launch()`` (one kernel launch, device arrays only), and host time per launch.

    GPU: events around ``n`` launches; if the host needed at least 80 % of the device
    time to queue them (launch-bound), a second pass queues them behind a sleeper so the
    events time the kernels back to back. The record's ``timing`` says which it is.
    """
    be = probe.backend
    n = probe.launches(n)
    launch()  # compile or load, first touch
    probe.sync()
    if not probe.gpu:
        t0 = time.perf_counter()
        for _ in range(n):
            launch()
        probe.sync()
        per = (time.perf_counter() - t0) / n
        return {"seconds": per, "host_per_launch_s": per, "launches": n,
                "timing": "simulated" if probe.kind == "simulated" else "wall"}
    device, queued, _ = _event_pass(be, launch, n)
    host = queued / n
    out = {"seconds": device, "host_per_launch_s": host, "launches": n, "timing": "cuda-events"}
    sleep = probe.sleeper()
    if host >= 0.8 * device and sleep is not None:
        sleep_s = 2.0 * queued + 1e-3  # longer than queueing the launches took
        out["seconds"], queued, slept = _event_pass(be, launch, n, lambda: sleep(sleep_s))
        clean = queued < slept  # the sleeper outlasted the queueing: the kernels ran back to back
        out.update(timing="cuda-events, queued behind a sleeper" if clean else "cuda-events (launch-bound: an upper bound)",
                   launch_bound_s=device, sleeper_s=slept, queued_s=queued)
    elif host >= 0.8 * device:
        out["timing"] = "cuda-events (launch-bound: an upper bound)"
    return out


def _event_pass(be, launch, n: int, before=None) -> tuple[float, float, float | None]:
    """CUDA events around ``n`` launches: (device seconds per launch, host seconds spent
    queueing them, seconds ``before()`` kept the stream busy ahead of them, or None)."""
    with be.activated():
        mark, start, end = be.event(), be.event(), be.event()
        if before is not None:
            mark.record()
            before()  # e.g. a sleeper kernel
        start.record()
        t0 = time.perf_counter()
        for _ in range(n):
            launch()
        queued = time.perf_counter() - t0
        end.record()
        end.synchronize()
        slept = None if before is None else mark.elapsed_time(start) / 1e3
        return start.elapsed_time(end) / 1e3 / n, queued, slept


class SectionBudget:
    """One section's share of the budget: ``allows(case, estimate)`` between cases, skips recorded."""

    def __init__(self, name: str, seconds: float):
        self.name, self.seconds = name, seconds
        self.t0 = time.perf_counter()
        self.skipped: list[dict] = []

    @property
    def spent(self) -> float:
        return time.perf_counter() - self.t0

    @property
    def left(self) -> float:
        return self.seconds - self.spent

    def allows(self, case: str, estimate: float = 0.0) -> bool:
        """True if ``case`` (expected to take ``estimate`` s) fits what is left; else records it as skipped for time."""
        if self.left > estimate and self.left > 0:
            return True
        self.skipped.append({"case": case, "reason": f"time budget: {self.left:.1f} s left of {self.seconds:.1f} s, "
                                                     f"the case needs ~{estimate:.1f} s"})
        return False

    def skip(self, case: str, reason: str) -> None:
        self.skipped.append({"case": case, "reason": reason})


class Budget:
    """The probe's total seconds, split across sections by weight; time a section leaves unspent passes on."""

    WEIGHTS = {"copies": 0.08, "launch": 0.04, "sfap": 0.22, "laplacian": 0.18, "eigen": 0.28,
               "integrations": 0.05, "dask": 0.07, "anchors": 0.08, "variants": 1.0}

    def __init__(self, total: float, sections: list[str]):
        self.total = total
        self.t0 = time.perf_counter()
        self.pending = list(sections)

    def left(self) -> float:
        return self.total - (time.perf_counter() - self.t0)

    def section(self, name: str) -> SectionBudget:
        """The next section's budget: its weight's share of what is left among the sections still to run."""
        weights = {s: self.WEIGHTS.get(s, 0.1) for s in self.pending}
        share = weights.get(name, 0.1) / sum(weights.values()) if weights else 1.0
        if name in self.pending:
            self.pending.remove(name)
        return SectionBudget(name, max(0.0, self.left()) * share)
