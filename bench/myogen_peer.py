"""MyoGen 0.12 as a benchmark peer, served over stdin/stdout from its own Python 3.12 venv.

MyoGen needs Python >= 3.12 (kernelrt's venv may be older), so bench_sfap.py starts this
script once with that interpreter and sends one JSON command per line:

    {"load": "/path/case.npz"}   build a MotorUnitSim from the case's inputs
    {"run": true, "gpu": false}   calc_sfaps(use_gpu=...) + calc_muap(0); replies wall and CPU time
    {"save": "/path/out.npz"}     write the last result (for a parity check)
    {"quit": true}

Each reply is one JSON line. The process stays alive between rounds, so what the
benchmark times is MyoGen's own work plus a few milliseconds of pipe round trip, not
Python start-up or importing NEURON. Setup (venv): see tools/regen_sfap_golden.py.
"""

from __future__ import annotations

import contextlib
import io
import json
import sys
import time

import numpy as np


def main() -> int:
    with contextlib.redirect_stdout(io.StringIO()):  # NEURON's "no DISPLAY" banner
        from myogen.simulator.core.emg.intramuscular.motor_unit_sim import MotorUnitSim
    case = None
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
        elif "save" in cmd:
            np.savez(cmd["save"], **result)
            reply = {"ok": True}
        else:
            reply = {"ok": False, "error": f"unknown command {cmd!r}"}
        print(json.dumps(reply), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
