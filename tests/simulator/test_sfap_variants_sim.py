"""The SFAP column kernel's tiled variant against today's kernel, bit for bit, on the CUDA simulator.

``sfap_columns_tiled`` (kernels/sfap/columns_tiled.py) walks wider sample tiles, maps
lanes to (electrode, sample) pairs and keeps four samples per thread in registers; it
must still give ``sfap_columns``'s every bit (its docstring says why). The cases cover
the block shapes ``columns_tiling`` picks for 2, 5 and 34 electrodes (second electrode of a thread past the last one), rows that
span several chunks, both wave directions with mirror rows, ends away from 0 and a last
sample tile cut short by the time grid.
"""

from __future__ import annotations

import numpy as np
import pytest
from kernelrt.kernels.sfap import compute_sfaps
from kernelrt.kernels.sfap.columns_tiled import columns_tiling
from kernelrt.kernels.variants import use_variants
from tests.simulator.test_sfap_sim import tiny_case


def _electrodes(n):
    return np.column_stack([np.linspace(-1, 1, n), np.linspace(0.5, -0.5, n), np.linspace(0.5, 5.5, n)])


def _both(gpu, kwargs):
    with use_variants(sfap_columns="rows"):
        rows = compute_sfaps(**kwargs, backend=gpu)
    with use_variants(sfap_columns="tiled"):
        tiled = compute_sfaps(**kwargs, backend=gpu)
    return rows, tiled


@pytest.mark.parametrize(
    "ends, nmj, dz, n_electrodes",
    [
        ((0.0, 6.0), (1.0, 4.7), 0.5, 2),  # σ = +1 and σ = -1, 1 x 32 lanes, 128 samples a block
        ((3.0, 9.0), (3.2, 8.9), 0.2, 5),  # ends away from 0 (mirror beyond ±Nz), 4 x 8 lanes, 30 rows: 4 chunks
        ((0.0, 6.0), (0.0, 6.0), 0.5, 34),  # NMJ on the tendons, 32 x 8 lanes for 64 electrode slots
    ],
    ids=["2e-both-directions", "5e-shifted-ends", "34e-on-tendons"],
)
def test_tiled_columns_give_the_same_bits(gpu, ends, nmj, dz, n_electrodes):
    kwargs = tiny_case(ends, nmj, dz=dz)
    kwargs["electrodes"] = _electrodes(n_electrodes)
    rows, tiled = _both(gpu, kwargs)
    assert rows.sfaps_raw.shape[0] % 32 != 0  # the last sample tile is cut short by the grid
    assert np.abs(rows.sfaps_raw).max() > 0
    for key in ("sfaps_raw", "sfaps", "muap"):
        # exact: the same products summed in the same order (signed zeros aside, which equal compares alike)
        assert np.array_equal(getattr(tiled, key), getattr(rows, key)), key


def test_tiled_rows_span_several_chunks(gpu):
    """dz = 0.05 on a 6 mm fibre, one electrode: ~120 rows in chunks of 8 (the one-electrode tile's RC)."""
    kwargs = tiny_case(nmj=(2.5,), dz=0.05)
    kwargs["electrodes"] = kwargs["electrodes"][:1]
    assert columns_tiling(1)[1] == 8
    rows, tiled = _both(gpu, kwargs)
    assert np.array_equal(tiled.sfaps_raw, rows.sfaps_raw)


def test_the_variant_reaches_the_tiled_kernel(gpu, monkeypatch):
    """The setting picks the launch: spy on the backend's launches."""
    launched = []
    real = gpu.launch_kernel
    monkeypatch.setattr(gpu, "launch_kernel", lambda k, *a, **kw: (launched.append(k.name), real(k, *a, **kw))[1])
    kwargs = tiny_case(nmj=(2.0,))
    with use_variants(sfap_columns="tiled"):
        compute_sfaps(**kwargs, backend=gpu)
    assert "sfap_columns_tiled" in launched and "sfap_columns" not in launched
