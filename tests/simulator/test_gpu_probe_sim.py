"""The GPU probe under Numba's CUDA simulator: the CUDA path end to end, every figure marked simulated."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
PROBE = ROOT / "bench" / "gpu_probe.py"


def _run(*args, cache):
    env = dict(os.environ, KERNELRT_CACHE_DIR=str(cache), NUMBA_ENABLE_CUDASIM="1")
    return subprocess.run([sys.executable, str(PROBE), *args], capture_output=True, text=True, env=env, cwd=ROOT,
                          timeout=900)


def test_the_probe_runs_on_the_simulated_gpu(tmp_path):
    # dask is left out: its worker processes take ~20 s here, and the CPU test covers the section
    sections = "copies,launch,sfap,laplacian,eigen,integrations,anchors"
    res = _run("--quick", "--budget", "600", "--section", sections, "--out", str(tmp_path / "out"),
               cache=tmp_path / "cache")
    assert res.returncode == 0, res.stdout[-3000:] + res.stderr[-3000:]
    (path,) = (tmp_path / "out").glob("*-probe.json")
    result = json.loads(path.read_text())
    assert result["label"] == "simulated" and result["device"]["simulated"] is True
    assert result["sections"]["dask"]["status"] == "not selected"
    rows = [r for s in result["sections"].values() for r in s.get("rows", [])]
    for name in ("copies", "launch", "sfap", "laplacian", "eigen"):
        assert result["sections"][name]["rows"], name
    assert rows and all(r["status"] == "simulated" and r["ratio"] is None for r in rows)
    assert all(r["timing"] in ("simulated", "wall") for r in rows)  # host work (planning, SciPy) is wall time
    kernels = [r for r in rows if r["what"] == "kernel-only"]
    assert kernels and all(r["timing"] == "simulated" and r["floor_s"] > 0 for r in kernels)
    assert any(r["case"] == "numba kernel[grid, block]" for r in rows)
    # the CPU route on the same matrix, with the eigenvalues' distance from the (simulated) GPU route's
    (cpu_route,) = [r for r in rows if r["case"].endswith("cpu route")]
    assert cpu_route["max_rel_eval_diff"] < 1e-9 and cpu_route["seconds"] > 0
    assert "(simulated)" in res.stdout.splitlines()[-1] or "simulated" in res.stdout


def test_ncu_mode_under_the_simulator_prints_nothing(tmp_path):
    res = _run("--ncu", "--section", "laplacian", cache=tmp_path / "cache")
    assert res.returncode == 0 and res.stdout == ""
