"""The kernel variants' predicted H100 times (bench/variant_predictions.py): sane ranges, and the committed table current."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "bench"))
import gpu_floors as g  # noqa: E402
import variant_predictions as vp  # noqa: E402

COMMITTED = ROOT / "bench" / "results" / "kernel-variants-predicted.json"


@pytest.fixture(scope="module")
def rows(tmp_path_factory):
    out = tmp_path_factory.mktemp("pred") / "pred"
    assert vp.main(["--out", str(out)]) == 0
    return json.loads(out.with_suffix(".json").read_text())["rows"]


def test_each_range_lies_between_the_floor_and_the_scaled_default(rows):
    assert {r["family"] for r in rows} == {"sfap_columns", "sfap_delay", "row_values", "sparse", "loops"}
    for r in rows:
        assert 0 < r["floor_s"] <= r["predicted_low_s"] <= r["predicted_high_s"], r
    # where the default already runs near its floor the prediction says so: no win promised
    heat8 = next(r for r in rows if r["case"] == "ico8 heat200")
    assert heat8["predicted_high_s"] > heat8["default_s"] > heat8["predicted_low_s"]


def test_the_tiled_sfap_bound_falls_most_where_lanes_idled(rows):
    # MyoGen's 4 electrodes left 28 of 32 lanes idle: the tiled kernel's L1 bound falls ~28x there, ~3.7x at 25
    plan_rows = {r["case"]: r for r in rows if r["family"] == "sfap_columns"}
    assert set(plan_rows) == {"sfap-200x25-dz0.1", "sfap-50x25-dz0.01", "myogen-436x4-dz0.01"}
    ratio = {c: r["default_s"] / r["predicted_high_s"] for c, r in plan_rows.items()}
    assert ratio["myogen-436x4-dz0.01"] > 20 and 3 < ratio["sfap-200x25-dz0.1"] < 4.5


def test_the_committed_table_is_current(rows):
    # regenerate with: python bench/variant_predictions.py --out bench/results/kernel-variants-predicted
    committed = json.loads(COMMITTED.read_text())
    h100 = g.MODELS[[p.name for p in g.MODELS].index("H100")]
    assert committed["peaks"] == json.loads(json.dumps(h100.as_dict()))
    assert len(committed["rows"]) == len(rows)
    for old, new in zip(committed["rows"], rows):
        assert {k: v for k, v in old.items() if not k.endswith("_s")} == {k: v for k, v in new.items()
                                                                          if not k.endswith("_s")}
        for key in ("default_s", "floor_s", "predicted_low_s", "predicted_high_s"):
            assert new[key] == pytest.approx(old[key], rel=1e-9), (old["case"], key)
