"""SFAP CUDA kernels under Numba's CUDA simulator, at sizes it runs in seconds.

The simulator executes every thread in Python (a few thousand thread-runs per second),
so these cases are tiny: one golden fibre with two electrodes, and millimetre-long
fibres against the NumPy reference. They exercise the device path end to end: the
column kernel's shared-memory chunks and syncthreads, the mirror rows, the Dirichlet
delay kernel, the MUAP kernel, batching and device-resident results.
"""

from __future__ import annotations

import numpy as np
import pytest
from kernelrt.kernels.sfap import prep as sfap_prep
from kernelrt.kernels.sfap import run as sfap_run
from kernelrt.kernels.sfap import compute_sfaps
from kernelrt.kernels.sfap.inputs import check_inputs
from kernelrt.kernels.sfap.reference import channel_error, reference_sfaps
from tests.support.layers import DATA

from kernelrt.arguments import is_device_array

# Channel-relative, as tests/support/sfap_cases.py's TOL (the golden data's 1e-12; docs/sfap.md
# ("Accuracy metric")). The simulator runs the CUDA kernels in Python floats (math.exp, no FMA,
# ascending-j sums); MyoGen and the NumPy reference use NumPy's SIMD exp and BLAS order.
# Measured <= 1.7e-15 over this module's cases
TOL = 1e-12


def tiny_case(ends=(0.0, 6.0), nmj=(1.0, 4.7), dz=0.5, seed=0):
    rng = np.random.default_rng(seed)
    nf = len(nmj)
    return {
        "fibre_xy": rng.uniform(-1, 1, (nf, 2)),
        "fibre_diameter": rng.uniform(0.03, 0.07, nf),
        "fibre_cv": rng.uniform(3500, 4500, nf),
        "nmj_z": np.array(nmj),
        "fibre_ends": np.tile(ends, (nf, 1)),
        "nerve_paths": rng.uniform(0.5, 5, (nf, 2)),
        "branch_cv": np.array([5000.0, 2000.0]),
        "electrodes": np.array([[0.0, 0.0, ends[0] + 2.0], [0.3, -0.2, ends[0] + 3.1]]),
        "dt": 1 / 10240,
        "dz": dz,
    }


def test_golden_fibre_of_sfap_b(gpu):
    """Fibre 0 of sfap_b sets the time grid, so its columns line up with the golden ones
    sample for sample (compared to TOL, 1e-12: MyoGen's exp and BLAS sum are not ours)."""
    g = np.load(DATA / "sfap" / "sfap_b.npz")
    fibres, electrodes = [0], [0, 1]
    kwargs = {
        "fibre_xy": g["fibre_xy"][fibres], "fibre_diameter": g["fibre_diam"][fibres],
        "fibre_cv": g["fibre_cv"][fibres], "nmj_z": g["nmj_z"][fibres],
        "fibre_ends": np.stack([g["left_end"], g["right_end"]], axis=1)[fibres],
        "nerve_paths": g["nerve_paths"][fibres], "branch_cv": g["nmj_branch_cv"],
        "electrodes": g["electrodes"][electrodes], "dt": float(g["dt"]), "dz": float(g["dz"]),
        "min_radial_dist": float(g["min_radial_dist"]),
    }
    result = compute_sfaps(**kwargs, backend=gpu)
    assert result.backend == "cuda"
    assert np.array_equal(result.t, g["t"])  # exact: t_k = k * dt on the host, as arange fills it
    cols = np.ix_(np.arange(g["t"].shape[0]), electrodes, fibres)
    # channel-relative at TOL (its reasons where it is defined); measured <= 1.7e-15
    assert channel_error(result.sfaps_raw, g["sfaps_raw"][cols]) <= TOL
    assert channel_error(result.sfaps, g["sfaps"][cols]) <= TOL
    assert channel_error(result.muap, g["sfaps"][cols].sum(axis=2)) <= TOL


@pytest.mark.parametrize(
    "ends, nmj",
    [
        ((0.0, 6.0), (1.0, 4.7)),  # σ = +1 and σ = -1
        ((0.0, 6.0), (0.0, 6.0)),  # NMJ on either tendon
        ((3.0, 9.0), (3.2, 8.9)),  # ends away from 0: mirror shift beyond ±Nz
    ],
    ids=["both-directions", "on-tendons", "shifted-ends"],
)
def test_matches_reference(gpu, cpu, ends, nmj):
    kwargs = tiny_case(ends, nmj)
    result = compute_sfaps(**kwargs, backend=gpu)
    ref = reference_sfaps(**kwargs)
    for key in ("sfaps_raw", "sfaps", "muap"):
        assert channel_error(getattr(result, key), ref[key]) <= TOL, key  # as TOL states; measured <= 1.1e-15
    on_cpu = compute_sfaps(**kwargs, backend=cpu)
    # math.exp and ascending-j sums here, exp_neg (1 ulp) and SIMD dot products on the CPU
    # (their order depends on the host's vector width): ~14 rows a channel at dz = 0.5, so a few
    # eps of the peak; measured 3.9e-16, a wide margin
    assert channel_error(result.sfaps_raw, on_cpu.sfaps_raw) <= 1e-14


def test_rows_span_several_chunks(gpu):
    """dz = 0.02 on a 6 mm fibre: ~300 rows, so the column kernel walks three chunks."""
    kwargs = tiny_case(nmj=(2.5,), dz=0.02)
    kwargs["electrodes"] = kwargs["electrodes"][:1]
    plan = sfap_prep.plan_fibres(**check_inputs(**kwargs, min_radial_dist=None))
    assert plan.nz_max > 2 * 128
    result = compute_sfaps(**kwargs, backend=gpu)
    ref = reference_sfaps(**kwargs)
    assert channel_error(result.sfaps_raw, ref["sfaps_raw"]) <= TOL  # as TOL states; measured 8.2e-16


def test_batches_and_device_results(gpu, monkeypatch):
    kwargs = tiny_case(nmj=(1.0, 4.7, 2.2))
    whole = compute_sfaps(**kwargs, backend=gpu)
    plan = sfap_prep.plan_fibres(**check_inputs(**kwargs, min_radial_dist=None))
    per_fibre, fixed = sfap_run.batch_bytes("cuda", plan, 2)
    monkeypatch.setattr(gpu, "get_memory_info", lambda: (int((fixed + per_fibre) / 0.7) + 1, 1 << 40))
    assert sfap_run.batch_size(gpu, plan, 2) == 1
    batched = compute_sfaps(**kwargs, backend=gpu, keep_on_device=True)
    assert all(is_device_array(getattr(batched, k)) for k in ("sfaps_raw", "sfaps", "muap"))
    for key in ("sfaps_raw", "sfaps", "muap"):
        # exact: every output element is one thread's sum in ascending j, whatever the batch
        assert np.array_equal(gpu.to_host(getattr(batched, key)), getattr(whole, key)), key


def test_more_electrodes_than_one_block_tile(gpu):
    """34 electrodes: the column kernel's grid has two electrode tiles (32 lanes each)."""
    kwargs = tiny_case(nmj=(2.0,))
    kwargs["electrodes"] = np.column_stack(
        [np.linspace(-1, 1, 34), np.linspace(0.5, -0.5, 34), np.linspace(0.5, 5.5, 34)]
    )
    result = compute_sfaps(**kwargs, backend=gpu)
    ref = reference_sfaps(**kwargs)
    for key in ("sfaps_raw", "sfaps", "muap"):
        assert channel_error(getattr(result, key), ref[key]) <= TOL, key  # as TOL states; measured <= 5.6e-16
