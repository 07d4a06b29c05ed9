"""Cases the golden files do not cover, against the NumPy reference (kernels/sfap/reference.py), and batching.

Accuracy is the channel-relative error of docs/sfap.md ("Accuracy metric").
"""

from __future__ import annotations

import numpy as np
import pytest
from kernelrt.kernels.sfap import compute_sfaps
from kernelrt.kernels.sfap import prep as sfap_prep
from kernelrt.kernels.sfap import run as sfap_run
from kernelrt.kernels.sfap.inputs import check_inputs
from kernelrt.kernels.sfap.reference import (
    fibre_grid,
    reference_sfaps,
)

from kernelrt import DeviceMemoryError
from tests.support.sfap_cases import (
    TOL,
    assert_matches,
    make_case,
)

# -- properties against the NumPy reference --------------------------------------------


def _check_reference(cpu, kwargs, tol=TOL):
    result = compute_sfaps(**kwargs, backend=cpu)
    # channel-relative at TOL (1e-12, its reasons in tests/support/sfap_cases.py): the NumPy
    # reference sums with BLAS and evaluates np.exp / x**3, the twin with dot8x2 and exp_neg.
    # Measured <= 6.4e-15 over this module's cases
    assert_matches(result, reference_sfaps(**kwargs), tol)
    return result


@pytest.mark.parametrize(
    "where",
    ["left", "left+half_dz", "left+dz", "right", "right-half_dz", "right-dz", "middle"],
)
def test_nmj_at_or_near_a_tendon(cpu, where):
    kwargs = make_case(nf=2, ne=3, dz=0.05, length=15.0, seed=11)
    a, b, dz = 0.0, 15.0, 0.05
    zeta = {
        "left": a, "left+half_dz": a + dz / 2, "left+dz": a + dz,
        "right": b, "right-half_dz": b - dz / 2, "right-dz": b - dz, "middle": 7.3,
    }[where]
    kwargs["nmj_z"] = np.array([zeta, 7.0])
    _check_reference(cpu, kwargs)


@pytest.mark.parametrize("ends", [(5.0, 25.0), (20.0, 35.0), (-10.0, 5.0)])
def test_shifted_fibre_ends_wrap_the_mirror(cpu, ends):
    """Ends away from 0 drive MyoGen's mirror shift s past ±Nz
    (the wrap cases of docs/sfap.md ("Mirror map"))."""
    kwargs = make_case(nf=3, ne=2, dz=0.1, length=15.0, seed=5)
    kwargs["fibre_ends"] = np.tile(ends, (3, 1))
    kwargs["nmj_z"] = np.array([ends[0] + 0.3, (ends[0] + ends[1]) / 2 + 1.0, ends[1] - 0.05])
    kwargs["electrodes"][:, 2] += ends[0]
    shifts = []
    for zeta in kwargs["nmj_z"]:
        z = fibre_grid(zeta, *ends, kwargs["dz"])
        delta = np.mean(np.diff(z))
        L1, L2 = ends[1] - zeta, zeta - ends[0]
        shifts.append((round((((L1 + L2) - (z[-1] + delta)) + L2 - L1) / delta), z.shape[0]))
    assert any(s < -nz or s >= nz for s, nz in shifts), shifts
    _check_reference(cpu, kwargs)


@pytest.mark.parametrize("sigma_side", ["left_of_middle", "right_of_middle"])
def test_both_wave_directions(cpu, sigma_side):
    kwargs = make_case(nf=2, ne=2, dz=0.1, length=20.0, seed=2)
    kwargs["nmj_z"] = np.array([6.0, 8.5]) if sigma_side == "left_of_middle" else np.array([12.0, 14.5])
    plan = sfap_prep.plan_fibres(**check_inputs(**kwargs, min_radial_dist=None))
    assert set(plan.ipar[:, sfap_prep.I_SIGMA]) == ({1} if sigma_side == "left_of_middle" else {-1})
    _check_reference(cpu, kwargs)


def test_electrode_on_a_fibre_axis_and_on_a_row(cpu):
    kwargs = make_case(nf=2, ne=2, dz=0.1, length=20.0, seed=4)
    z = sfap_prep.fibre_grid(float(kwargs["nmj_z"][0]), 0.0, 20.0, 0.1)
    kwargs["electrodes"][0] = (*kwargs["fibre_xy"][0], z[37])  # r = 0, clamped; z on a row
    _check_reference(cpu, kwargs)


@pytest.mark.parametrize("dz", [0.5, 0.25, 0.1, 0.05, 0.02])
def test_tie_step_sizes(cpu, dz):
    """0.5 / dz is an integer: the end-plate rows at ζ ± 0.5 are floating-point ties."""
    _check_reference(cpu, make_case(nf=3, ne=2, dz=dz, length=12.0, seed=int(1 / dz)))


def test_single_fibre_single_electrode(cpu):
    result = _check_reference(cpu, make_case(nf=1, ne=1, dz=0.07, length=25.0, seed=9))
    assert result.sfaps.shape[1:] == (1, 1) and result.muap.shape[1:] == (1,)


def test_min_radial_dist_and_slow_fibres(cpu):
    kwargs = make_case(nf=3, ne=3, dz=0.1, length=20.0, seed=8, cv=(2500.0, 800.0))
    kwargs["min_radial_dist"] = 0.3
    _check_reference(cpu, kwargs)


def test_nerve_delay_beyond_the_window_gives_zeros(cpu):
    kwargs = make_case(nf=2, ne=2, dz=0.1, length=10.0, seed=1)
    kwargs["nerve_paths"] = np.array([[5000.0, 0.0], [1.0, 0.5]])  # fibre 0: a 1 s delay
    result = _check_reference(cpu, kwargs)
    assert not np.any(result.sfaps[:, :, 0])


# -- batching -------------------------------------------------------------------------


def test_batches_give_the_same_result(cpu, monkeypatch):
    kwargs = make_case(nf=5, ne=3, dz=0.1, length=20.0, seed=6)
    whole = compute_sfaps(**kwargs, backend=cpu)
    plan = sfap_prep.plan_fibres(**check_inputs(**kwargs, min_radial_dist=None))
    per_fibre, fixed = sfap_run.batch_bytes("cpu", plan, 3)
    monkeypatch.setattr(cpu, "get_memory_info", lambda: (int((fixed + 2 * per_fibre) / 0.7) + 1, 1 << 40))
    assert sfap_run.batch_size(cpu, plan, 3) == 2
    launches = []
    real_launch = cpu.launch_kernel
    monkeypatch.setattr(cpu, "launch_kernel", lambda k, *a, **kw: (launches.append(k.name), real_launch(k, *a, **kw)))
    batched = compute_sfaps(**kwargs, backend=cpu)
    assert launches.count("sfap_columns") == 3
    for key in ("sfaps_raw", "sfaps", "muap"):
        # exact: each output column is one task's, in an order fixed by the compiled code and
        # the tile (not by batches or threads); same process, so the same SIMD width
        assert np.array_equal(getattr(batched, key), getattr(whole, key)), key


def test_no_room_for_one_fibre(cpu, monkeypatch):
    monkeypatch.setattr(cpu, "get_memory_info", lambda: (1024, 1 << 40))
    with pytest.raises(DeviceMemoryError, match="compute_sfaps needs"):
        compute_sfaps(**make_case(nf=2, ne=2), backend=cpu)
