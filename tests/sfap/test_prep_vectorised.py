"""The vectorised host planning equals the per-fibre loop it replaced, bit for bit.

The oracle is that loop, kept verbatim in tests/sfap/prep_oracle.py. Every field of the
plan is compared as raw bytes (so even a -0.0 for a 0.0 would fail): the masks and the
mirror map decide rows at floating-point ties, so "close" is not good enough.
"""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from kernelrt.kernels.sfap import prep as sfap_prep
from kernelrt.kernels.sfap.inputs import check_inputs
from kernelrt.kernels.sfap.reference import synthetic_motor_unit

from tests.sfap import prep_oracle
from tests.support.sfap_cases import GOLDEN, golden_inputs, make_case

FIELDS = ("t", "z", "ipar", "fpar", "vt", "kr2", "rows", "delay_int", "delay_frac")


def assert_same_plan(kwargs, min_radial_dist=None):
    inputs = check_inputs(**kwargs, min_radial_dist=min_radial_dist)
    got, want = sfap_prep.plan_fibres(**inputs), prep_oracle.plan_fibres(**inputs)
    for name in FIELDS:
        a, b = getattr(got, name), getattr(want, name)
        assert a.dtype == b.dtype and a.shape == b.shape, (name, a.dtype, a.shape, b.dtype, b.shape)
        # exact, as raw bytes: both are the same NumPy element-wise operations, never contracted
        assert a.tobytes() == b.tobytes(), name
    return got


@pytest.mark.parametrize("path", GOLDEN, ids=lambda p: p.stem)
def test_golden_units(path):
    kwargs, g = golden_inputs(path)
    assert_same_plan(kwargs, float(g["min_radial_dist"]))


@pytest.mark.parametrize("dz", [0.5, 0.1, 0.01])
def test_synthetic_units(dz):
    assert_same_plan(synthetic_motor_unit(40 if dz >= 0.1 else 12, 4, dz, seed=3))


@pytest.mark.parametrize("dz", [0.5, 0.01])
@pytest.mark.parametrize(
    "where",
    ["left", "right", "left+half_dz", "right-half_dz", "left+dz", "right-dz", "past_left", "past_right",
     "far_past_left", "far_past_right", "middle"],
)
def test_nmj_at_near_and_past_the_tendons(where, dz):
    """The cases of docs/sfap.md ("Fibre grid", "Mirror map"): an empty half grid, an empty
    long or short side, the mirror shift beyond ±Nz."""
    a, b = 0.0, 15.0
    zeta = {
        "left": a, "right": b, "left+half_dz": a + dz / 2, "right-half_dz": b - dz / 2, "left+dz": a + dz,
        "right-dz": b - dz, "past_left": a - 0.6 * dz, "past_right": b + 0.6 * dz, "far_past_left": a - 3.5 * dz,
        "far_past_right": b + 2.2 * dz, "middle": 7.5,
    }[where]
    kwargs = make_case(nf=3, ne=2, dz=dz, length=b, seed=5)
    kwargs["nmj_z"] = np.array([zeta, 7.0, zeta])
    plan = assert_same_plan(kwargs)
    if where.startswith("far_past"):  # no row on the near side of the NMJ: A or B is empty
        iv = plan.ipar[0]
        assert iv[sfap_prep.I_AHI] < iv[sfap_prep.I_ALO] or iv[sfap_prep.I_SHI] < iv[sfap_prep.I_SLO]


def test_one_fibre_and_mixed_row_counts():
    kwargs = make_case(nf=1, ne=1, dz=0.07, length=25.0, seed=9)
    assert_same_plan(kwargs)
    kwargs = make_case(nf=6, ne=3, dz=0.1, length=20.0, seed=2)
    kwargs["fibre_ends"] = np.array([[0.0, 20.0], [5.0, 25.0], [-10.0, 5.0], [0.0, 3.3], [1.0, 1.5], [0.0, 20.0]])
    kwargs["nmj_z"] = np.array([10.0, 6.0, 4.95, 0.0, 1.2, 19.95])
    assert_same_plan(kwargs)  # σ both ways, six different Nz in one call


def test_tiny_blocks(monkeypatch):
    """One fibre per grid block and a few samples per search block give the same tables."""
    monkeypatch.setattr(sfap_prep, "GRID_BLOCK", 1)
    monkeypatch.setattr(sfap_prep, "SEARCH_BLOCK", 7)
    kwargs = make_case(nf=5, ne=2, dz=0.05, length=12.0, seed=4)
    kwargs["nmj_z"][0] = 0.0
    assert_same_plan(kwargs)


def test_tables_of_a_range_are_rows_of_the_whole():
    inputs = check_inputs(**make_case(nf=9, ne=2, dz=0.1, length=20.0, seed=7), min_radial_dist=None)
    whole = sfap_prep.plan_fibres(**inputs)
    unit = sfap_prep.plan_unit(**inputs)
    for f0, f1 in ((0, 9), (0, 1), (3, 7), (8, 9)):
        part = sfap_prep.plan_tables(unit, f0, f1)
        for name in ("z", "ipar", "fpar", "rows"):
            # exact: a fibre's tables depend on that fibre alone
            assert getattr(part, name).tobytes() == getattr(whole, name)[f0:f1].tobytes(), (name, f0, f1)


@pytest.mark.parametrize("nz", [1, 2, 5, 8])
def test_mirror_is_element_wise(nz):
    s = np.arange(-3 * nz - 1, 3 * nz + 2)
    (lo, hi), mb = sfap_prep._mirror(np.full(s.shape, nz), s)
    for i, si in enumerate(s.tolist()):
        assert ((int(lo[i]), int(hi[i])), int(mb[i])) == prep_oracle._mirror(nz, si), si


@st.composite
def motor_units(draw):
    """Random small units: any ends, NMJs anywhere near or past them, tie and odd steps."""
    seed = draw(st.integers(0, 2**32 - 1))
    nf = draw(st.integers(1, 6))
    dz = draw(st.sampled_from([0.5, 0.3, 0.25, 0.1, 0.07, 0.05, 0.02, 0.01]) | st.floats(0.004, 1.0))
    a = draw(st.sampled_from([0.0, -10.0, 5.0]) | st.floats(-50.0, 50.0))
    length = draw(st.sampled_from([20.0, 30.0, 120.0]) | st.floats(2.0, 60.0))
    length = max(length, 2 * dz + 0.5)
    shared_ends = draw(st.booleans())
    rng = np.random.default_rng(seed)
    ends = np.tile([a, a + length], (nf, 1))
    if not shared_ends:
        ends[:, 0] += rng.uniform(-3, 3, nf)
        ends[:, 1] = ends[:, 0] + np.maximum(rng.uniform(0.3, 1.0, nf) * length, 2 * dz + 0.1)
    kind = rng.integers(0, 6, nf)
    left, right = ends[:, 0], ends[:, 1]
    zeta = np.select(
        [kind == 0, kind == 1, kind == 2, kind == 3, kind == 4],
        [left, right, left + rng.uniform(-2, 2, nf) * dz, right + rng.uniform(-2, 2, nf) * dz,
         np.round(rng.uniform(left, right) / dz) * dz],  # on the nominal grid: ties at ζ ± 0.5
        rng.uniform(left, right),
    )
    return {
        "fibre_xy": rng.uniform(-2, 2, (nf, 2)), "fibre_diameter": rng.uniform(0.02, 0.08, nf),
        "fibre_cv": rng.uniform(800.0, 6000.0, nf), "nmj_z": zeta, "fibre_ends": ends,
        "nerve_paths": rng.uniform(0, 20, (nf, 2)), "branch_cv": np.array([5000.0, 2000.0]),
        "electrodes": rng.uniform(-3, 3, (draw(st.integers(1, 4)), 3)) + [0, 0, a + length / 2],
        "dt": draw(st.sampled_from([1 / 10240, 1 / 4096, 1 / 20000])), "dz": dz,
    }


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(kwargs=motor_units())
def test_random_units(kwargs):
    assert_same_plan(kwargs)
