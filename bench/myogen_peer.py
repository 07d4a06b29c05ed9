"""MyoGen 0.12 as a benchmark peer, served over stdin/stdout from its own Python 3.12 venv.

MyoGen needs Python >= 3.12 (kernelrt's venv may be older), so bench_sfap.py starts this
script once with that interpreter and sends one JSON command per line:

    {"load": "/path/case.npz"}   build a MotorUnitSim from the case's inputs
    {"run": true, "gpu": false}   calc_sfaps(use_gpu=...) + calc_muap(0); replies wall and CPU time
    {"save": "/path/out.npz"}     write the last result (for a parity check)
    {"emg": {...}}                build an IntramuscularEMG (see emg_case); muscle cached on disk
    {"worker_stats": n}           after a "myogen+kernelrt" run: calc_sfaps calls kernelrt served in the workers
    {"warm": true}                compile or load kernelrt's SFAP kernels (untimed)
    {"simulate": "myogen" | "myogen+kernelrt" | "kernelrt", "n_jobs": n}
                                  simulate_muaps of that EMG: MyoGen's own (n_jobs workers), MyoGen's
                                  with kernelrt enabled in its workers, or kernelrt's in-process
                                  one-call version; replies wall time and the peak RSS of this
                                  process above its start plus its workers' (workers_high_water)
    {"quit": true}

Each reply is one JSON line. The process stays alive between rounds, so what the
benchmark times is MyoGen's own work plus a few milliseconds of pipe round trip, not
Python start-up or importing NEURON. Setup (venv): see tools/regen_sfap_golden.py.
"""

from __future__ import annotations

import contextlib
import io
import json
import os
import sys
import time
from pathlib import Path

import numpy as np

# bench/ is this script's directory, on sys.path unless PYTHONSAFEPATH is set (tools/gpu_check.sh
# sets it, and the 2026-11-27 H200 sitting's MyoGen CuPy anchor died of it): put it there.
sys.path.insert(0, str(Path(__file__).resolve().parent))
from benchlib import peak_rss, vm_hwm  # noqa: E402


def emg_case(n_units: int, every: int, dz: float, cache: str):
    """MyoGen's documented iEMG set-up: a default Muscle of ``n_units`` units (cached with
    joblib, building takes minutes), every ``every``-th unit simulated, a 4-contact needle
    at mid-muscle (examples' ``IntramuscularElectrodeArray``), spatial step ``dz`` mm."""
    import joblib
    import quantities as pq
    from myogen import set_random_seed, simulator

    path = Path(cache) / f"myogen-muscle-{n_units}.pkl"
    if not path.is_file():
        set_random_seed(42)
        thresholds, _ = simulator.RecruitmentThresholds(
            N=n_units, recruitment_range__ratio=100, deluca__slope=5, konstantin__max_threshold__ratio=1.0,
            mode="combined")
        path.parent.mkdir(parents=True, exist_ok=True)
        joblib.dump(simulator.Muscle(recruitment_thresholds=thresholds, autorun=True), path)
    muscle = joblib.load(path)
    electrode = simulator.IntramuscularElectrodeArray(
        num_electrodes=4, inter_electrode_distance__mm=2.0 * pq.mm, differentiation_mode="consecutive",
        position__mm=(0.0 * pq.mm, 0.0 * pq.mm, 15.0 * pq.mm))
    units = list(range(0, n_units, every))
    emg = simulator.IntramuscularEMG(muscle_model=muscle, electrode_array=electrode,
                                     spatial_resolution__mm=dz * pq.mm, MUs_to_simulate=units)
    fibres = [int(muscle.resulting_number_of_innervated_fibers[u]) for u in units]
    return emg, fibres


def workers_high_water() -> int:
    """The sum of the peak RSS (``VmHWM``) of this process's children: joblib's loky workers.

    They stay up between calls and were started by the run just measured, so their peak is
    that run's. Added to this process's peak above its start (``benchlib.peak_rss``), it
    bounds the peak of the processes' sum from above, the same way for every mode. Nothing
    samples during the run: reading ``/proc/<pid>/smaps`` every few milliseconds cost a
    whole core here.
    """
    import psutil

    total = 0
    for child in psutil.Process().children(recursive=True):
        with contextlib.suppress(OSError):  # a worker may exit between listing and reading
            total += vm_hwm(child.pid)
    return total


def simulate(emg, mode: str, n_jobs: int):
    """MUAPs of every simulated unit, the wall time and the peak memory of this process and its workers."""
    import kernelrt.integrations.myogen as kmyogen

    (kmyogen.enable if mode == "myogen+kernelrt" else kmyogen.disable)()
    run = {}

    def simulate_muaps():
        t0 = time.perf_counter()
        if mode == "kernelrt":
            run["block"] = kmyogen.simulate_muaps(emg, verbose=False)
        else:
            run["block"] = emg.simulate_muaps(n_jobs=n_jobs, verbose=False)
        run["seconds"] = time.perf_counter() - t0

    with contextlib.redirect_stderr(io.StringIO()):  # MyoGen's per-fibre bars
        here_peak = peak_rss(simulate_muaps)["peak_bytes"]
    workers = workers_high_water()
    here = kmyogen.stats()  # kernelrt's calls and fallbacks to MyoGen's own code in this process
    reply = {"seconds": run["seconds"], "peak_bytes": here_peak + workers, "worker_peak_bytes": workers,
             "calls": here["calls"], "fallbacks": here["fallbacks"]}
    muaps = [np.asarray(s.analogsignals[0].magnitude) for s in run["block"].segments]
    return muaps, reply


def main() -> int:
    with contextlib.redirect_stdout(io.StringIO()):  # NEURON's "no DISPLAY" banner
        from myogen.simulator.core.emg.intramuscular.motor_unit_sim import MotorUnitSim
    case = None
    emg = None
    result = None
    for line in sys.stdin:
        cmd = json.loads(line)
        if "quit" in cmd:
            break
        if "load" in cmd:
            case = dict(np.load(cmd["load"]))
            reply = {"ok": True, "fibres": int(case["fibre_xy"].shape[0])}
        elif "run" in cmd:
            xy = case["fibre_xy"]
            mu = MotorUnitSim(
                muscle_fiber_centers__mm=xy,
                muscle_length__mm=float(case["fibre_ends"][0, 1]),
                muscle_fiber_diameters__mm=case["fibre_diameter"],
                muscle_fiber_conduction_velocity__mm_per_s=case["fibre_cv"],
                nominal_center__mm=xy.mean(axis=0),
                neuromuscular_junction_conduction_velocities__mm_per_s=[float(c) for c in case["branch_cv"]],
            )
            mu._muscle_fiber_left_ends__mm = case["fibre_ends"][:, :1].copy()
            mu._muscle_fiber_right_ends__mm = case["fibre_ends"][:, 1:].copy()
            mu._neuromuscular_z_coordinates__mm = case["nmj_z"][:, None].copy()
            mu.nerve_paths = case["nerve_paths"].copy()
            t0, c0 = time.perf_counter(), time.process_time()
            gpu = bool(cmd.get("gpu", False))  # True: MyoGen's own CuPy path
            mu.calc_sfaps(0, float(case["dt"]), float(case["dz"]), case["electrodes"], verbose=False, use_gpu=gpu)
            muap = mu.calc_muap(jitter_std=0.0)
            wall, cpu = time.perf_counter() - t0, time.process_time() - c0
            result = {"sfaps": np.asarray(mu.sfaps), "muap": np.asarray(muap)}
            reply = {"ok": True, "seconds": wall, "cpu_seconds": cpu}
        elif "emg" in cmd:
            spec = cmd["emg"]
            with contextlib.redirect_stdout(io.StringIO()):
                emg, fibres = emg_case(spec["n_units"], spec["every"], spec["dz"], spec["cache"])
            reply = {"ok": True, "fibres": fibres}
        elif "worker_stats" in cmd:  # after a "myogen+kernelrt" run: the workers' own counters
            from joblib import Parallel, delayed

            import kernelrt.integrations.myogen as kmyogen

            n_jobs = int(cmd["worker_stats"])
            stats = Parallel(n_jobs=n_jobs)(delayed(kmyogen.stats)() for _ in range(4 * n_jobs))
            per_worker = {s["pid"]: s for s in stats}
            reply = {"ok": True, "worker_calls": sum(s["calls"] for s in per_worker.values()),
                     "worker_fallbacks": sum(s["fallbacks"] for s in per_worker.values()),
                     "worker_pids": sorted(per_worker), "pid": os.getpid()}
        elif "warm" in cmd:  # kernelrt's kernels into the disk cache (and this process), untimed
            from kernelrt.kernels.sfap import compute_sfaps
            from kernelrt.kernels.sfap.reference import synthetic_motor_unit

            compute_sfaps(**synthetic_motor_unit(2, 4, 0.5), backend="auto")
            reply = {"ok": True}
        elif "simulate" in cmd:
            muaps, reply = simulate(emg, cmd["simulate"], int(cmd.get("n_jobs", os.cpu_count() or 1)))
            result = {f"muap_{i}": m for i, m in enumerate(muaps)}
            reply["ok"] = True
        elif "save" in cmd:
            np.savez(cmd["save"], **result)
            reply = {"ok": True}
        else:
            reply = {"ok": False, "error": f"unknown command {cmd!r}"}
        print(json.dumps(reply), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
