"""Regenerate the SFAP golden files (tests/data/sfap/sfap_{a,b,c,d}.npz) with MyoGen 0.12.0.

MyoGen >= 0.6.9 needs Python >= 3.12 and 0.12.0 ships only a cp312 wheel, so this
script runs in its own virtual environment, never inside kernelrt's (tests never
import it):

    python3.12 -m venv /tmp/myogen312
    /tmp/myogen312/bin/pip install myogen==0.12.0
    /tmp/myogen312/bin/python tools/regen_sfap_golden.py --out tests/data/sfap
    /tmp/myogen312/bin/python tools/regen_sfap_golden.py --check tests/data/sfap

``--check`` regenerates every file in memory and compares it with the stored one
(inputs must be identical; outputs are reported as bitwise-equal or as the
channel-relative error, since MyoGen's NumPy exp is SIMD-dispatched and not
bit-portable across CPUs, docs/sfap.md, "MyoGen pitfalls"). Importing MyoGen prints NEURON's
"no DISPLAY" warning; that is harmless.

Each case draws its inputs from ``numpy.random.default_rng(seed)`` in a fixed order
(see ``generate``), sets the NMJ positions and nerve paths directly on the motor unit
(so MyoGen's own NMJ simulation, RNG and KMeans play no part) and runs
``MotorUnitSim.calc_sfaps(use_gpu=False)`` and ``calc_muap(jitter_std=0)``. The raw
SFAPs are captured just before MyoGen's ``shift_sfaps``. The per-fibre debugging keys
(nz, dz_eff, shift_s, sigma, row_intervals, delay_s) are computed here with NumPy,
straight from the model (docs/sfap.md), not by MyoGen.
"""

from __future__ import annotations

import argparse
import json
import platform
import sys
import time
from pathlib import Path

import numpy as np

MUSCLE_LENGTH = 120.0
DT = 1 / 10240
BRANCH_CV = (5000.0, 2000.0)

# name: (seed, fibres, electrodes, dz, overrides)
CASES = {
    "sfap_a": (0, 8, 5, 0.1, None),
    "sfap_b": (1, 6, 4, 0.5, None),
    "sfap_c": (2, 4, 3, 0.02, None),
    "sfap_d": (3, 6, 4, 0.05, "tendons"),
}
CASE_D = (
    "seed 3, 6 fibres, 4 electrodes, L=120, CV~N(4000,300); overrides: nmj_z[0]=0.02, "
    "nmj_z[1]=L-0.03, nmj_z[2]=0.0; electrodes[0]=(x_f0, y_f0, 1.0) (exactly on fibre 0's axis)"
)


def generate(seed: int, nf: int, ne: int, length: float = MUSCLE_LENGTH) -> dict:
    """The inputs of one synthetic motor unit (the golden README's generator)."""
    rng = np.random.default_rng(seed)
    r = 2 * np.sqrt(rng.uniform(size=nf))  # uniform in a disc of radius 2 mm
    th = rng.uniform(0, 2 * np.pi, nf)
    xy = np.stack([r * np.cos(th), r * np.sin(th)], axis=1)
    diam = np.clip(rng.lognormal(np.log(0.05), 0.3, nf), 0.02, 0.08)
    cv = np.clip(rng.normal(4000, 300, nf), 2000, 6000)
    nmj = np.clip(length / 2 + rng.normal(0, 2, nf), 1, length - 1)
    paths = np.stack([rng.uniform(2, 15, nf), rng.uniform(0.5, 3, nf)], axis=1)
    u = np.array([1.0, 0.25, 0.35])
    u = u / np.linalg.norm(u)
    start = np.array([-(ne - 1) * 0.25 * u[0], -0.4, length / 2 - 1.5])
    electrodes = start + 0.5 * np.arange(ne)[:, None] * u
    electrodes[0, :2] = xy[0]  # electrode 0 sits at fibre 0's (x, y): r is clamped
    return {"fibre_xy": xy, "fibre_diam": diam, "fibre_cv": cv, "nmj_z": nmj, "nerve_paths": paths,
            "electrodes": electrodes}


def case_inputs(name: str) -> tuple[dict, float, int, str | None]:
    seed, nf, ne, dz, overrides = CASES[name]
    inputs = generate(seed, nf, ne)
    note = None
    if overrides == "tendons":
        inputs["nmj_z"][0] = 0.02
        inputs["nmj_z"][1] = MUSCLE_LENGTH - 0.03
        inputs["nmj_z"][2] = 0.0
        inputs["electrodes"][0] = (inputs["fibre_xy"][0, 0], inputs["fibre_xy"][0, 1], 1.0)
        note = CASE_D
    return inputs, dz, seed, note


def run_myogen(inputs: dict, dz: float):
    """MyoGen's raw SFAPs, delayed SFAPs, MUAP and wall time for one motor unit."""
    from myogen.simulator.core.emg.intramuscular.motor_unit_sim import MotorUnitSim

    xy = inputs["fibre_xy"]
    mu = MotorUnitSim(
        muscle_fiber_centers__mm=xy,
        muscle_length__mm=MUSCLE_LENGTH,
        muscle_fiber_diameters__mm=inputs["fibre_diam"],
        muscle_fiber_conduction_velocity__mm_per_s=inputs["fibre_cv"],
        nominal_center__mm=xy.mean(axis=0),
        neuromuscular_junction_conduction_velocities__mm_per_s=list(BRANCH_CV),
    )
    mu._neuromuscular_z_coordinates__mm = inputs["nmj_z"][:, None].copy()
    mu.nerve_paths = inputs["nerve_paths"].copy()
    captured = {}
    shift = mu.shift_sfaps

    def capture_then_shift(dt):
        captured["raw"] = mu.sfaps.copy()
        return shift(dt)

    mu.shift_sfaps = capture_then_shift
    t0 = time.perf_counter()
    mu.calc_sfaps(0, DT, dz, inputs["electrodes"], verbose=False, use_gpu=False)
    wall = time.perf_counter() - t0
    muap = mu.calc_muap(jitter_std=0.0)
    return captured["raw"], np.array(mu.sfaps), np.array(muap), wall


def derived(inputs: dict, dz: float) -> dict:
    """Per-fibre debugging keys, from the model (docs/sfap.md), not from MyoGen."""
    nf = inputs["nmj_z"].shape[0]
    out = {k: [] for k in ("nz", "dz_eff", "shift_s", "sigma", "row_intervals", "delay_s")}
    for f in range(nf):
        zeta, a, b, v = float(inputs["nmj_z"][f]), 0.0, MUSCLE_LENGTH, float(inputs["fibre_cv"][f])
        z = np.concatenate((np.arange(zeta, a - dz, -dz)[::-1], np.arange(zeta, b + dz, dz)[1:]))
        delta = float(np.mean(np.diff(z)))
        L1, L2 = b - zeta, zeta - a
        sigma = 1 if L1 >= L2 else -1
        rho = z - zeta
        r_mask = ((rho - L1 / 2) <= L1 / 2) & ((rho - L1 / 2) >= -L1 / 2)
        w_mask = ((rho + L2 / 2) <= L2 / 2) & ((rho + L2 / 2) >= -L2 / 2)
        if sigma > 0:
            long_side, short_side = r_mask & ((rho / v) > 0), w_mask
        else:
            long_side, short_side = w_mask & (((-z + zeta) / v) > 0), r_mask
        suppressed = ~((z <= zeta - 0.5) | (z >= zeta + 0.5))

        def interval(mask):
            idx = np.flatnonzero(mask)
            return (int(idx[0]), int(idx[-1])) if idx.size else (-1, -2)

        out["nz"].append(z.shape[0])
        out["dz_eff"].append(delta)
        out["shift_s"].append(round((((L1 + L2) - (z[-1] + delta)) + L2 - L1) / delta))
        out["sigma"].append(sigma)
        out["row_intervals"].append(
            (int(np.flatnonzero(z == zeta)[0]), *interval(long_side), *interval(short_side), *interval(suppressed))
        )
        p = inputs["nerve_paths"][f]
        out["delay_s"].append(p[0] / BRANCH_CV[0] + p[1] / BRANCH_CV[1])
    types = {"nz": np.int64, "shift_s": np.int64, "sigma": np.int64, "row_intervals": np.int64}
    return {k: np.asarray(v, dtype=types.get(k, np.float64)) for k, v in out.items()}


def build(name: str) -> dict:
    """Every key of one golden file."""
    import myogen

    inputs, dz, seed, note = case_inputs(name)
    raw, sfaps, muap, wall = run_myogen(inputs, dz)
    nf = inputs["nmj_z"].shape[0]
    t = np.arange(0, 2 * max(np.max(inputs["nmj_z"] / inputs["fibre_cv"]),
                             np.max((MUSCLE_LENGTH - inputs["nmj_z"]) / inputs["fibre_cv"])) + DT, DT)
    meta = {"myogen": myogen.__version__ if hasattr(myogen, "__version__") else "0.12.0",
            "numpy": np.__version__, "python": platform.python_version(), "machine": platform.machine(),
            "calc_sfaps_wall_s": wall, "shape": list(sfaps.shape)}
    if note:
        meta["case"] = note
    data = {
        "seed": np.int64(seed), "muscle_length": np.float64(MUSCLE_LENGTH), **inputs,
        "left_end": np.zeros(nf), "right_end": np.full(nf, MUSCLE_LENGTH),
        "nmj_branch_cv": np.array(BRANCH_CV), "t": t, **derived(inputs, dz),
        "dt": np.float64(DT), "dz": np.float64(dz), "min_radial_dist": np.float64(np.mean(inputs["fibre_diam"])),
        "sfaps_raw": raw, "sfaps": sfaps, "muap": muap, "meta_json": np.str_(json.dumps(meta)),
    }
    if data["t"].shape[0] != sfaps.shape[0]:
        raise RuntimeError(f"{name}: time grid of {t.shape[0]} samples, MyoGen gave {sfaps.shape[0]}")
    return data


def channel_error(y, ref) -> float:
    y = y.reshape(y.shape[0], -1)
    ref = ref.reshape(ref.shape[0], -1)
    return float(np.max(np.max(np.abs(y - ref), axis=0) / np.max(np.abs(ref), axis=0)))


def check(folder: Path) -> int:
    bad = 0
    for name in CASES:
        stored = np.load(folder / f"{name}.npz")
        fresh = build(name)
        for key, value in fresh.items():
            if key in ("sfaps_raw", "sfaps", "muap"):
                same = np.array_equal(value, stored[key])
                print(f"{name} {key:10} " + ("bitwise equal" if same else f"channel error {channel_error(value, stored[key]):.1e}"))
                bad += channel_error(value, stored[key]) > 1e-13
            elif key != "meta_json" and not np.array_equal(value, stored[key]):
                print(f"{name} {key}: differs from the stored file")
                bad += 1
    print("ok" if not bad else f"{bad} mismatches")
    return 1 if bad else 0


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, help="write the golden files into this folder")
    parser.add_argument("--check", type=Path, help="compare regenerated files with those in this folder")
    parser.add_argument("cases", nargs="*", default=list(CASES), help="case names (default: all)")
    args = parser.parse_args(argv)
    if args.check:
        return check(args.check)
    if not args.out:
        parser.error("give --out FOLDER or --check FOLDER")
    args.out.mkdir(parents=True, exist_ok=True)
    for name in args.cases:
        data = build(name)
        np.savez_compressed(args.out / f"{name}.npz", **data)
        print(f"wrote {args.out / name}.npz {data['sfaps'].shape}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
