"""Many independent jobs: throughput in one process and on a Dask ``LocalCluster`` of 1 and 2 workers.

Three groups, each entry's extra_info saying what it ran (``workers``: 0 in this process,
else the cluster's worker count; ``cores_allowed``; ``backend``):

* ``cohort-ico<level>-k<k>-S<S>``: S jittered icospheres (``noisy_icosphere(level, 0.1,
  seed=s)``, one shared face array), each subject's cotangent Laplacian, k eigenpairs and
  HKS/WKS (100 times / energies, the automatic grids). Entries, in this order:
  ``peer`` (SpectralBrain 0.1.0's own loop, ``BrainMesh(V, F).decompose(k)``,
  ``compute_hks``, ``compute_wks``, as bench_spectralbrain.py runs it, its integration off);
  ``serial`` (variant: kernelrt's per-subject functions in a plain loop, ``cotan_laplacian``,
  ``eigenpairs``, ``hks``, ``wks``); ``no-client`` (kernelrt: ``cohort_spectra(meshes, k)``
  in this process, all cores); ``workers-1``, ``workers-2`` (variants: ``cohort_spectra(...,
  client=...)`` on ``LocalCluster(n_workers=W, threads_per_worker=1, processes=True)``,
  each worker one core). extra_info: ``subjects_per_min``, ``ratio_vs_peer``; on the
  cluster ``ratio_vs_serial`` (against the plain loop), ``ratio_vs_in_process`` (against
  ``no-client``), ``seconds_per_subject_per_worker`` (median x W / S: what one worker,
  one GPU on a GPU cluster, spends per subject), ``eigen_s_mean`` (the eigensolve alone,
  timed on the worker), ``cluster_start_s`` and ``warmup_s`` (not timed) and the workers'
  ``worker_info``; ``evals_max_rel_diff`` against the peer (and the cluster's against
  ``no-client``).
* ``units-U<U>-<fibres>x<electrodes>-dz<dz>``: U synthetic motor units
  (``synthetic_motor_unit(fibres, electrodes, dz, seed=u)``; one electrode set, dt, dz and
  branch CVs common to all), each unit's SFAPs and MUAP. Entries: ``peer`` (MyoGen
  0.12's own ``MotorUnitSim.calc_sfaps`` + ``calc_muap`` unit after unit, served
  by bench/myogen_peer.py in its Python 3.12 interpreter as in bench_sfap.py: the timed
  loop sends each unit's inputs and runs it, a few ms of pipe per unit; ``compute_s`` is
  MyoGen's own seconds alone; skipped, with the reason, where no MyoGen interpreter is
  found); ``serial`` (variant: ``compute_sfaps`` in a plain loop); ``no-client``
  (kernelrt: ``compute_many(units)``); ``workers-1``, ``workers-2`` (variants:
  ``compute_many(units, client=...)``, one unit per task). extra_info ``units_per_s`` and
  the same ratios and per-worker seconds (``seconds_per_unit_per_worker``); the peer's
  ``channel_error_*`` of kernelrt against MyoGen for the last unit.
* ``task-overhead``, on the 2-worker cluster: the median round trip of an empty task
  (``client.submit(noop).result()``) and of two tiny kernel calls,
  ``compute_many`` of one 5-fibre unit and ``cohort_spectra`` of one level-2 icosphere
  (k = 4), each beside the same call in this process at one numba thread (a worker's
  share); ``overhead_s`` is the cluster's median minus the in-process one (the empty
  task: its whole round trip). The empty task's entry also carries ``extrapolation``:
  seconds per subject and per unit on one worker, and the overhead, the numbers from
  which the README extrapolates to N workers (N GPUs: one worker each).

Sizes: level 5 (10,242 vertices), k = 50, S = 8; U = 12 units of 200 fibres x 16
electrodes at dz = 0.05 mm (~0.5 s per unit on one core; MyoGen takes 4-7 s). Quick (``--quick``,
``KERNELRT_BENCH_QUICK=1``): level 4, k = 20, S = 4; U = 4 units of 100 fibres at dz = 0.1.
At most one cluster per worker count per run (module-scoped), started, given its
``KernelrtPlugin`` (which loads the kernels) and warmed with one subject or unit per
worker before anything is timed; closed at the end. Every route runs once untimed
first (imports, kernels, topologies). Plots (``--plot``): time and throughput against
cores, the cluster's one-core workers as the line and the in-process routes (all cores)
as levels. On a GPU host
every worker of this LocalCluster shares the one GPU (dask-cuda's LocalCUDACluster gives
each its own; not measured here).

Run: ``kernelrt bench distributed [--quick] [--plot]`` (or ``python -m pytest
bench/bench_distributed.py --benchmark-enable``). Never asserts on time.
"""

from __future__ import annotations

import contextlib
import functools
import importlib.util
import logging
import os
import statistics
import sys
import time
import warnings
from types import SimpleNamespace

import numpy as np
import pytest
from benchlib import QUICK, tag

LEVEL, K, SUBJECTS = (4, 20, 4) if QUICK else (5, 50, 8)
UNITS, FIBRES, ELECTRODES, DZ = (4, 100, 16, 0.1) if QUICK else (12, 200, 16, 0.05)
WORKERS = (1, 2)
ROUNDS = 2 if QUICK else 3
OVERHEAD_ROUNDS = (30, 10) if QUICK else (200, 50)  # (empty task, tiny kernel task)
CORES = os.cpu_count() or 1
COHORT = f"cohort-ico{LEVEL}-k{K}-S{SUBJECTS}"
POOL = f"units-U{UNITS}-{FIBRES}x{ELECTRODES}-dz{DZ:g}"
OVERHEAD = "task-overhead"
COMMON = ("electrodes", "dt", "dz", "branch_cv")  # one electrode set and grid for the whole pool
ROUTES = ("peer", "serial", "no-client", *(f"workers-{w}" for w in WORKERS))  # the order they run in
MEDIANS: dict = {}  # (group, route) -> median seconds, for the ratios of later entries
RESULTS: dict = {}  # (group, route) -> what the route computed, for the differences


def _workers(route: str) -> int:
    return int(route.split("-")[1]) if route.startswith("workers-") else 0


def _label(group: str, route: str) -> tuple[str, str | None]:
    """(role, name) of an entry: one kernelrt (in this process) against the peer, the rest variants."""
    what = "cohort_spectra" if group == COHORT else "compute_many"
    w = _workers(route)
    return {
        "peer": ("peer", "spectralbrain 0.1.0 loop (decompose, compute_hks, compute_wks)" if group == COHORT
                 else "myogen 0.12.0 loop (MotorUnitSim.calc_sfaps, calc_muap)"),
        "serial": ("variant", "kernelrt serial loop (cotan_laplacian, eigenpairs, hks, wks)" if group == COHORT
                   else "kernelrt serial loop (compute_sfaps)"),
        "no-client": ("kernelrt", None),
        f"workers-{w}": ("variant", f"kernelrt {what}, LocalCluster {w} worker{'s' * (w > 1)}"),
    }[route]


def _need_distributed() -> None:
    if importlib.util.find_spec("distributed") is None:
        pytest.skip("dask.distributed is not installed (pip install -e '.[distributed]')")


# -- inputs ------------------------------------------------------------------------------------


@functools.cache
def cohort() -> list:
    """The subjects: S jittered icospheres sharing one face array (a registered template)."""
    from kernelrt.kernels.laplacian import noisy_icosphere

    meshes = [noisy_icosphere(LEVEL, 0.1, seed=s) for s in range(SUBJECTS)]
    faces = meshes[0][1]
    return [(V, faces) for V, _ in meshes]


@functools.cache
def warm_subjects(n: int) -> list:
    """Subjects like the cohort's, not in it: the untimed first run."""
    from kernelrt.kernels.laplacian import noisy_icosphere

    faces = cohort()[0][1]
    return [(noisy_icosphere(LEVEL, 0.1, seed=SUBJECTS + i)[0], faces) for i in range(n)]


@functools.cache
def pool(n: int = UNITS, fibres: int = FIBRES, electrodes: int = ELECTRODES, dz: float = DZ,
         first_seed: int = 0) -> tuple[list, dict]:
    """(units, common): each unit's own fibres, and the arguments the units share."""
    from kernelrt.kernels.sfap.reference import synthetic_motor_unit

    cases = [synthetic_motor_unit(fibres, electrodes, dz, seed=first_seed + u) for u in range(n)]
    common = {key: cases[0][key] for key in COMMON}
    units = [{key: value for key, value in case.items() if key not in COMMON} for case in cases]
    return units, common


@functools.cache
def backend():
    import kernelrt

    return kernelrt.get_backend("auto")


# -- clusters ----------------------------------------------------------------------------------


def noop():
    """The empty task (pickled by value: the workers cannot import this module)."""


class Clusters:
    """At most one LocalCluster per worker count, started on first use; all closed at the end."""

    def __init__(self):
        self.open: dict[int, SimpleNamespace] = {}

    def get(self, workers: int) -> SimpleNamespace:
        if workers not in self.open:
            self.open[workers] = self._start(workers)
        return self.open[workers]

    @staticmethod
    def _start(workers: int) -> SimpleNamespace:
        import cloudpickle
        import distributed

        from kernelrt.distributed import KernelrtPlugin, worker_info

        cloudpickle.register_pickle_by_value(sys.modules[__name__])  # noop() travels by value
        t0 = time.perf_counter()
        with warnings.catch_warnings():  # the scheduler's HTTP server takes another port than 8787 if busy
            warnings.filterwarnings("ignore", message="Port .* is already in use")
            cluster = distributed.LocalCluster(n_workers=workers, threads_per_worker=1, processes=True,
                                               dashboard_address=None, silence_logs=logging.ERROR)
        client = distributed.Client(cluster)
        client.wait_for_workers(workers)
        client.register_plugin(KernelrtPlugin())  # each worker makes its backend and loads the kernels
        start_s = time.perf_counter() - t0
        info = worker_info(client)
        keep = ("backend", "device", "threads_per_task", "kernels", "start_seconds")
        return SimpleNamespace(cluster=cluster, client=client, workers=workers, start_s=start_s, warmup_s={},
                               info=[{key: i.get(key) for key in keep} for i in info.values()])

    def close(self) -> None:
        for c in self.open.values():
            with contextlib.suppress(Exception):  # a cluster that fails to close does not fail the run
                c.client.close()
                c.cluster.close()
        self.open.clear()


@pytest.fixture(scope="module")
def clusters():
    held = Clusters()
    yield held
    held.close()


def _cluster_info(c: SimpleNamespace, workload: str) -> dict:
    return {"cluster_start_s": c.start_s, "warmup_s": c.warmup_s.get(workload), "worker_info": c.info}


# -- the routes --------------------------------------------------------------------------------


def serial_subjects(meshes, k: int, be) -> list:
    """kernelrt's per-subject public functions in a plain loop."""
    from kernelrt.kernels.laplacian import cotan_laplacian, eigenpairs, hks, wks

    out = []
    for V, F in meshes:
        L, m = cotan_laplacian(V, F, be)
        pairs = eigenpairs(L, m, k, backend=be)
        out.append(SimpleNamespace(evals=pairs.evals, hks=hks(pairs, backend=be), wks=wks(pairs, backend=be)))
    return out


def spectralbrain_subjects(meshes, k: int) -> list:
    """SpectralBrain's own pipeline per subject (bench_spectralbrain.pipeline, integration off)."""
    from bench_spectralbrain import pipeline

    return [SimpleNamespace(evals=pipeline("spectralbrain", V, F, k)["evals"]) for V, F in meshes]


def cohort_route(route: str, clusters: Clusters | None):
    """The route's call over ``meshes``, warmed (untimed) first: ``run(meshes)``."""
    from kernelrt.kernels.laplacian import cohort_spectra

    be = backend()
    if route == "peer":
        from bench_spectralbrain import unavailable, warm

        reason = unavailable()
        if reason:
            pytest.skip(reason)
        sb_meshes = [(V, F.astype(np.int64)) for V, F in cohort()]  # BrainMesh stores int64 faces
        warm("spectralbrain")
        spectralbrain_subjects(warm_subjects(1), K)
        return lambda: spectralbrain_subjects(sb_meshes, K)
    if route == "serial":
        serial_subjects(warm_subjects(1), K, be)
        return lambda: serial_subjects(cohort(), K, be)
    if route == "no-client":
        cohort_spectra(warm_subjects(1), K, backend=be)
        return lambda: cohort_spectra(cohort(), K, backend=be)
    _need_distributed()
    c = clusters.get(_workers(route))
    if "cohort" not in c.warmup_s:  # one subject per worker
        t0 = time.perf_counter()
        cohort_spectra(warm_subjects(c.workers), K, client=c.client)
        c.warmup_s["cohort"] = time.perf_counter() - t0
    return lambda: cohort_spectra(cohort(), K, client=c.client)


def units_route(route: str, clusters: Clusters | None, state: dict):
    """The route's call over the pool, warmed (untimed) first."""
    from kernelrt.kernels.sfap import compute_many, compute_sfaps

    be = backend()
    units, common = pool()
    if route == "peer":
        from bench_sfap import MyoGenPeer, _myogen_python

        python = _myogen_python()
        if python is None:
            pytest.skip("no Python 3.12 with myogen==0.12.0 found (set KERNELRT_MYOGEN_PYTHON; "
                        "tools/regen_sfap_golden.py)")
        peer = state["peer"] = MyoGenPeer(python)
        warm_units, warm_common = pool(1, first_seed=UNITS)
        peer.load({**warm_common, **warm_units[0]})
        peer.run()  # imports (NEURON) and first-call costs stay out of the timed loop

        def run():
            compute = cpu = 0.0
            for unit in units:
                peer.load({**common, **unit})
                compute += peer.run()
                cpu += peer.last_cpu_s
            state["compute_s"], state["cpu_s"] = compute, cpu

        return run
    if route == "serial":
        compute_sfaps(**common, **pool(1, first_seed=UNITS)[0][0], backend=be)
        return lambda: [compute_sfaps(**common, **unit, backend=be) for unit in units]
    if route == "no-client":
        compute_many(pool(1, first_seed=UNITS)[0], backend=be, **common)
        return lambda: compute_many(units, backend=be, **common)
    _need_distributed()
    c = clusters.get(_workers(route))
    if "units" not in c.warmup_s:  # one unit per worker
        t0 = time.perf_counter()
        compute_many(pool(c.workers, first_seed=UNITS)[0], client=c.client, **common)
        c.warmup_s["units"] = time.perf_counter() - t0
    return lambda: compute_many(units, client=c.client, **common)


# -- shared bookkeeping ------------------------------------------------------------------------


def _tag(benchmark, group: str, route: str, rate_label: str, **info) -> None:
    role, name = _label(group, route)
    w = _workers(route)
    tag(benchmark, group, role, peer=name, route=route, workers=w,
        cores_allowed=w if w else CORES, backend=backend().name if route != "peer" else "cpu",
        # x: the cores a route uses. The cluster's routes make the line (a one-core worker
        # each); the in-process routes, on all cores, are levels to compare it with.
        figure=f"distributed-{group}", x=w or CORES, x_label="cores (Dask workers of one core each)",
        x_scale="linear", series="kernelrt" if w else f"kernelrt in this process, {CORES} cores" if route == "no-client" else None,
        throughput_label=rate_label, **info)


def _ratios(benchmark, group: str, route: str, items: int, per: str) -> float:
    """Record the route's median and its ratios to the routes before it; returns the median."""
    median = benchmark.stats.stats.median
    MEDIANS[(group, route)] = median
    info = benchmark.extra_info
    w = _workers(route)
    if route != "peer" and (group, "peer") in MEDIANS:
        info["ratio_vs_peer"] = MEDIANS[(group, "peer")] / median
    if w:
        for other, key in (("serial", "ratio_vs_serial"), ("no-client", "ratio_vs_in_process")):
            if (group, other) in MEDIANS:
                info[key] = MEDIANS[(group, other)] / median
        info[f"seconds_per_{per}_per_worker"] = median * w / items
    return median


def _per_item(key, items: int) -> float | None:
    return MEDIANS[key] / items if key in MEDIANS else None  # None: that entry did not run


def _rel_diff(a, b) -> float:
    a, b = np.asarray(a), np.asarray(b)
    keep = np.abs(b) > 1e-10  # the constant mode's λ = 0 has no relative error
    return float(np.max(np.abs(a[keep] - b[keep]) / np.abs(b[keep])))


# -- pytest-benchmark suite --------------------------------------------------------------------


@pytest.mark.parametrize("route", ROUTES, ids=[f"{COHORT}-{r}" for r in ROUTES])
def test_cohort(benchmark, clusters, route):
    run = cohort_route(route, clusters)
    _tag(benchmark, COHORT, route, "subjects per minute", subjects=SUBJECTS, level=LEVEL,
         vertices=len(cohort()[0][0]), k=K, n_times=100, n_energies=100)
    out = []
    benchmark.pedantic(lambda: out.append(run()), rounds=ROUNDS, iterations=1)
    median = _ratios(benchmark, COHORT, route, SUBJECTS, "subject")
    info = benchmark.extra_info
    info["subjects_per_min"] = info["throughput"] = SUBJECTS * 60.0 / median
    evals = [s.evals for s in out[-1]]
    RESULTS[(COHORT, route)] = evals
    if route != "peer" and (COHORT, "peer") in RESULTS:
        info["evals_max_rel_diff"] = max(_rel_diff(a, b) for a, b in zip(evals, RESULTS[(COHORT, "peer")]))
    if _workers(route):
        if (COHORT, "no-client") in RESULTS:
            info["evals_max_rel_diff_vs_in_process"] = max(
                _rel_diff(a, b) for a, b in zip(evals, RESULTS[(COHORT, "no-client")]))
        info["eigen_s_mean"] = statistics.fmean(s.seconds for s in out[-1])
        info.update(_cluster_info(clusters.get(_workers(route)), "cohort"))


@pytest.mark.parametrize("route", ROUTES, ids=[f"{POOL}-{r}" for r in ROUTES])
def test_units(benchmark, clusters, route):
    state: dict = {}
    try:
        run = units_route(route, clusters, state)
        _tag(benchmark, POOL, route, "motor units per second", units=UNITS, fibres=FIBRES, electrodes=ELECTRODES,
             dz=DZ, units_per_task=1)
        benchmark.pedantic(run, rounds=1 if route == "peer" else ROUNDS, iterations=1)
        median = _ratios(benchmark, POOL, route, UNITS, "unit")
        info = benchmark.extra_info
        info["units_per_s"] = info["throughput"] = UNITS / median
        if route == "peer":
            from bench_sfap import accuracy_against

            units, common = pool()
            info.update(compute_s=state["compute_s"], cpu_s=state["cpu_s"])
            info.update(accuracy_against(state["peer"].result(), {**common, **units[-1]}, backend()))
        if _workers(route):
            info.update(_cluster_info(clusters.get(_workers(route)), "units"))
    finally:
        if "peer" in state:
            state["peer"].close()


@contextlib.contextmanager
def one_thread():
    """numba at one thread in this process: a worker's share, for the in-process side of the overhead."""
    import numba

    was = numba.get_num_threads()
    numba.set_num_threads(1)
    try:
        yield
    finally:
        numba.set_num_threads(was)


def tiny_calls() -> dict:
    """The tiny kernel calls: ``name -> call(client)``."""
    from kernelrt.kernels.laplacian import cohort_spectra, noisy_icosphere
    from kernelrt.kernels.sfap import compute_many

    units, common = pool(1, 5, 8, 0.5, first_seed=100)
    mesh = [noisy_icosphere(2, 0.1, seed=0)]
    return {"compute_many-5-fibres": lambda client: compute_many(units, client=client, **common),
            "cohort_spectra-ico2-k4": lambda client: cohort_spectra(mesh, 4, client=client)}


OVERHEAD_ENTRIES = [f"{call}-{where}" for call in ("compute_many-5-fibres", "cohort_spectra-ico2-k4")
                    for where in ("in-process", "workers-2")] + ["empty-task"]


@pytest.mark.parametrize("entry", OVERHEAD_ENTRIES, ids=[f"{OVERHEAD}-{e}" for e in OVERHEAD_ENTRIES])
def test_task_overhead(benchmark, clusters, entry):
    _need_distributed()
    client = clusters.get(2).client
    empty_rounds, kernel_rounds = OVERHEAD_ROUNDS
    where = "in-process" if entry.endswith("-in-process") else "workers-2"
    tag(benchmark, OVERHEAD, "variant", peer=f"{entry} round trip", threads=1, workers=0 if where == "in-process" else 2)
    info = benchmark.extra_info
    if entry == "empty-task":
        client.submit(noop, pure=False).result()
        benchmark.pedantic(lambda: client.submit(noop, pure=False).result(), rounds=empty_rounds, iterations=1,
                           warmup_rounds=3)
        median = info["overhead_s"] = benchmark.stats.stats.median
        info["extrapolation"] = {  # one worker per GPU: N workers do ~N / (seconds per item + overhead) items/s
            "seconds_per_subject_one_worker": _per_item((COHORT, "workers-1"), SUBJECTS),
            "seconds_per_unit_one_worker": _per_item((POOL, "workers-1"), UNITS),
            "empty_task_s": median,
            **{f"{call}_overhead_s": MEDIANS[(OVERHEAD, call)] for call in tiny_calls() if (OVERHEAD, call) in MEDIANS},
            "cohort": COHORT, "units": POOL,
        }
        return
    call = entry[: -len(where) - 1]
    fn = tiny_calls()[call]
    if where == "in-process":
        with one_thread():
            fn(None)
            benchmark.pedantic(lambda: fn(None), rounds=kernel_rounds, iterations=1)
        MEDIANS[(OVERHEAD, entry)] = benchmark.stats.stats.median
        return
    fn(client)
    benchmark.pedantic(lambda: fn(client), rounds=kernel_rounds, iterations=1)
    median = benchmark.stats.stats.median
    local = MEDIANS.get((OVERHEAD, f"{call}-in-process"))
    if local is not None:
        info["overhead_s"] = MEDIANS[(OVERHEAD, call)] = median - local
        info["in_process_s"] = local
