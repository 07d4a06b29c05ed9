"""bench/sfap_variants_e2e.py under the CUDA simulator: every variant pair runs, alternated, and gives the same bits.

On a GPU the script decides whether a variant that wins kernel-only also wins end to end
(the 2026-11-27 H200 sitting: the tiled columns did not); here it must run each pair, record
each round, and find the outputs equal.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def test_each_pair_runs_and_gives_the_same_bits(tmp_path, cache_dir):
    out = tmp_path / "e2e.json"
    env = dict(os.environ, NUMBA_ENABLE_CUDASIM="1")
    subprocess.run([sys.executable, str(ROOT / "bench" / "sfap_variants_e2e.py"), "--quick", "--rounds", "2",
                    "--out", str(out)], check=True, env=env, timeout=600, capture_output=True)
    case = json.loads(out.read_text())["cases"]["tiny-2x4-dz1"]
    assert {"rows+direct", "tiled+staged", "rows+staged", "tiled+direct"} <= set(case)
    assert all(len(case[pair]["all_s"]) == 2 for pair in ("rows+direct", "tiled+staged"))
    assert case["max_abs_diff"] == 0.0
