"""SFAP kernels on a real GPU: golden parity, dz = 0.01 batching, device-resident results.

Skipped without a usable CUDA device (tests/gpu/conftest.py). Accuracy is the
channel-relative error of specs/SFAP.md §11 against MyoGen's golden outputs and against
the CPU backend.
"""

from __future__ import annotations

import numpy as np
import pytest
from kernelrt.kernels import sfap_prep, sfap_run
from kernelrt.kernels.sfap import compute_sfaps
from kernelrt.kernels.sfap_inputs import check_inputs
from kernelrt.kernels.sfap_reference import channel_error
from testlib import DATA

from kernelrt.arguments import is_device_array

GOLDEN = sorted((DATA / "sfap").glob("sfap_*.npz"))
TOL = 1e-12


def golden_inputs(path):
    g = np.load(path)
    kwargs = {
        "fibre_xy": g["fibre_xy"], "fibre_diameter": g["fibre_diam"], "fibre_cv": g["fibre_cv"],
        "nmj_z": g["nmj_z"], "fibre_ends": np.stack([g["left_end"], g["right_end"]], axis=1),
        "nerve_paths": g["nerve_paths"], "branch_cv": g["nmj_branch_cv"], "electrodes": g["electrodes"],
        "dt": float(g["dt"]), "dz": float(g["dz"]),
    }
    return kwargs, g


def motor_unit(nf, ne, dz, seed=0, length=120.0):
    rng = np.random.default_rng(seed)
    r, th = 2 * np.sqrt(rng.uniform(size=nf)), rng.uniform(0, 2 * np.pi, nf)
    u = np.array([1.0, 0.25, 0.35]) / np.linalg.norm([1.0, 0.25, 0.35])
    return {
        "fibre_xy": np.stack([r * np.cos(th), r * np.sin(th)], axis=1),
        "fibre_diameter": np.clip(rng.lognormal(np.log(0.05), 0.3, nf), 0.02, 0.08),
        "fibre_cv": np.clip(rng.normal(4000, 300, nf), 2000, 6000),
        "nmj_z": np.clip(length / 2 + rng.normal(0, 2, nf), 1, length - 1),
        "fibre_ends": np.tile([0.0, length], (nf, 1)),
        "nerve_paths": np.stack([rng.uniform(2, 15, nf), rng.uniform(0.5, 3, nf)], axis=1),
        "branch_cv": np.array([5000.0, 2000.0]),
        "electrodes": np.array([-3.0, -0.4, length / 2 - 1.5]) + 0.5 * np.arange(ne)[:, None] * u,
        "dt": 1 / 10240,
        "dz": dz,
    }


@pytest.mark.parametrize("path", GOLDEN, ids=lambda p: p.stem)
def test_golden(gpu, path):
    kwargs, g = golden_inputs(path)
    result = compute_sfaps(**kwargs, backend=gpu)
    assert result.backend == "cuda"
    assert np.array_equal(result.t, g["t"])
    for key in ("sfaps_raw", "sfaps", "muap"):
        err = channel_error(getattr(result, key), g[key])
        assert err <= TOL, f"{key}: channel-relative error {err:.2e}"


def test_dz_001_batches(gpu, cpu, monkeypatch):
    """dz = 0.01 (Nz = 12002): forced small batches give the unbatched result, and the CPU's."""
    kwargs = motor_unit(40, 25, 0.01)
    whole = compute_sfaps(**kwargs, backend=gpu)
    plan = sfap_prep.plan_fibres(**check_inputs(**kwargs, min_radial_dist=None))
    per_fibre, fixed = sfap_run.batch_bytes("cuda", plan, 25)
    monkeypatch.setattr(gpu, "get_memory_info", lambda: (int((fixed + 7 * per_fibre) / 0.7) + 1, 1 << 40))
    assert sfap_run.batch_size(gpu, plan, 25) == 7
    batched = compute_sfaps(**kwargs, backend=gpu)
    monkeypatch.undo()
    for key in ("sfaps_raw", "sfaps", "muap"):
        assert np.array_equal(getattr(batched, key), getattr(whole, key)), key
    on_cpu = compute_sfaps(**kwargs, backend=cpu)
    for key in ("sfaps_raw", "sfaps", "muap"):
        assert channel_error(getattr(whole, key), getattr(on_cpu, key)) <= TOL, key


def test_results_stay_on_the_device(gpu):
    result = compute_sfaps(**motor_unit(4, 3, 0.1), backend=gpu, keep_on_device=True)
    assert isinstance(result.t, np.ndarray)
    assert all(is_device_array(getattr(result, k)) for k in ("sfaps_raw", "sfaps", "muap"))
    assert gpu.to_host(result.sfaps).shape == (result.t.shape[0], 3, 4)


def test_free_memory_is_asked(gpu):
    """A 200-fibre dz = 0.01 unit fits the device's free memory through batching."""
    kwargs = motor_unit(200, 25, 0.01, seed=1)
    plan = sfap_prep.plan_fibres(**check_inputs(**kwargs, min_radial_dist=None))
    nb = sfap_run.batch_size(gpu, plan, 25)
    per_fibre, fixed = sfap_run.batch_bytes("cuda", plan, 25)
    assert fixed + nb * per_fibre <= 0.7 * gpu.get_memory_info()[0]
    result = compute_sfaps(**kwargs, backend=gpu)
    assert np.all(np.isfinite(result.sfaps))
