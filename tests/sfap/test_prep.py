"""Host preparation: the bit-exact fibre grid, the mirror map, the row bounds.

Accuracy is the channel-relative error of docs/sfap.md ("Accuracy metric").
"""

from __future__ import annotations

import numpy as np
import pytest
from kernelrt.kernels.sfap import prep as sfap_prep
from kernelrt.kernels.sfap.inputs import check_inputs
from kernelrt.kernels.sfap.reference import (
    current_density,
    fibre_grid,
    shift_padding,
)

from tests.support.sfap_cases import (
    make_case,
)

# -- host preparation: bit-exact grid, mirror map, row bounds ---------------------------


def test_grid_is_bitwise_numpy_arange():
    rng = np.random.default_rng(7)
    for _ in range(1500):
        dz = float(rng.choice([0.5, 0.3, 0.1, 0.07, 0.05, 0.02, 0.01, rng.uniform(0.005, 1.0)]))
        a = float(rng.choice([0.0, rng.uniform(-50, 50)]))
        b = a + float(rng.choice([30.0, 120.0, rng.uniform(2.0, 150.0)]))
        zeta = float(rng.choice([rng.uniform(a, b), a, b, a + rng.uniform(0, dz), b - rng.uniform(0, dz)]))
        # exact: both are start + i * delta with two roundings (NumPy's arange fill is not FMA-contracted)
        assert np.array_equal(sfap_prep.fibre_grid(zeta, a, b, dz), fibre_grid(zeta, a, b, dz)), (zeta, a, b, dz)


def test_tie_rows_follow_the_arange_grid():
    """At dz = 0.1 the rows at ζ ± 0.5 are exact ties; the end-plate mask must follow z's last bit."""
    rng = np.random.default_rng(0)
    flips = 0
    for zeta in rng.uniform(1, 119, 100):
        z = sfap_prep.fibre_grid(float(zeta), 0.0, 120.0, 0.1)
        j0 = int(np.flatnonzero(z == zeta)[0])  # exact: the grid starts at ζ itself
        kept = (z <= zeta - 0.5) | (z >= zeta + 0.5)
        flips += int(not kept[j0 + 5]) + int(not kept[j0 - 5])
    assert 0 < flips < 200  # some tie rows are suppressed, some kept: the grid decides


@pytest.mark.parametrize("nz", [1, 2, 5, 8])
def test_mirror_intervals_match_shift_padding(nz):
    rows = np.arange(nz)
    for s in range(-3 * nz - 1, 3 * nz + 2):
        expect = shift_padding(rows[::-1].astype(float) + 1, s) - 1  # source row, or -1
        valid, mb = sfap_prep._mirror(nz, s)
        got = np.full(nz, -1.0)
        got[valid[0] : valid[1] + 1] = mb - rows[valid[0] : valid[1] + 1]
        assert np.array_equal(got, expect), s  # exact: integer-valued row numbers


@pytest.mark.parametrize("ends", [(0.0, 20.0), (5.0, 25.0), (-10.0, 10.0)])
def test_row_bounds_cover_every_nonzero_current(ends):
    """The skipped rows are exactly zero in the dense reference current."""
    kwargs = make_case(nf=4, ne=1, dz=0.1, length=20.0, seed=3)
    kwargs["fibre_ends"] = np.tile(ends, (4, 1))
    kwargs["nmj_z"] = np.array([ends[0], ends[0] + 0.05, ends[1] - 7.0, ends[1]])
    plan = sfap_prep.plan_fibres(**check_inputs(**kwargs, min_radial_dist=None))
    for f in range(4):
        z = fibre_grid(kwargs["nmj_z"][f], *ends, kwargs["dz"])
        current = current_density(plan.t, z, kwargs["nmj_z"][f], *ends, kwargs["fibre_cv"][f], 0.05)
        j = np.arange(z.shape[0])[:, None]
        lo, hi = plan.rows[f, :, 0][None, :], plan.rows[f, :, 1][None, :]
        # exact: outside x > 0 the current is a structural 0.0 (masked), not a rounded value
        assert not np.any((current != 0) & ((j < lo) | (j > hi)))
