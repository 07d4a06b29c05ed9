"""The GPU sitting's scripts, checked without a GPU: step parsing, $OUT, and the ncu summary.

A GPU sitting is rare and short, so a typo in tools/gpu_check.sh costs a whole sitting: the
steps are parsed and a dry run (``GPU_CHECK_ALLOW_CPU=1``) writes only into ``$OUT``. The ncu
summary is checked on a CSV in the raw page's format (header row, units row, one launch a row).
"""

from __future__ import annotations

import importlib.util
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
SCRIPT = ROOT / "tools" / "gpu_check.sh"

_spec = importlib.util.spec_from_file_location("ncu_summary", ROOT / "tools" / "ncu_summary.py")
ncu_summary = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(ncu_summary)


def _run(*args, env=None, timeout=120):
    # no wheels: a .whl/ fetched here for a GPU machine holds another Python's wheels
    env = {"KERNELRT_WHEELS": os.devnull, **(env or {})}
    return subprocess.run(["bash", str(SCRIPT), *args], capture_output=True, text=True, timeout=timeout,
                          env={**os.environ, **env}, cwd=ROOT)


def test_help_lists_every_step():
    out = _run("--help")
    assert out.returncode == 0
    for step in ("deps", "tests", "demo", "probe", "ncu", "bench", "variants", "sweep", "e2e"):
        assert f"  {step} " in out.stdout


def test_unknown_step_is_refused_before_anything_runs(tmp_path):
    out = _run("deps", "probes", env={"OUT": str(tmp_path)})
    assert out.returncode == 2
    assert "unknown step 'probes'" in out.stderr
    assert list(tmp_path.iterdir()) == []  # nothing written


def test_dry_run_deps_installs_this_checkout_and_writes_only_to_out(tmp_path):
    site, out_dir = tmp_path / "site", tmp_path / "out"
    env = {"OUT": str(out_dir), "KERNELRT_SITE": str(site), "GPU_CHECK_ALLOW_CPU": "1", "PYTHON": sys.executable,
           "KERNELRT_CACHE_DIR": str(tmp_path / "cache")}
    out = _run("deps", env=env, timeout=300)
    assert out.returncode == 0, out.stdout[-3000:] + out.stderr[-3000:]
    assert (site / "kernelrt" / "kernels" / "sfap" / "__init__.py").is_file()  # kernels/ as kernelrt.kernels
    assert "imports ok" in out.stdout
    assert sorted(p.name for p in out_dir.iterdir()) == ["gpu-check.log"]
    again = _run("deps", env=env, timeout=300)  # a second call of the same sitting reuses the install
    assert "already installed" in again.stdout


def test_dry_run_variants_times_every_pair_and_says_when_ncu_is_missing(tmp_path):
    out_dir = tmp_path / "out"
    env = {"OUT": str(out_dir), "KERNELRT_SITE": str(tmp_path / "site"), "GPU_CHECK_ALLOW_CPU": "1",
           "GPU_CHECK_QUICK": "1", "PYTHON": sys.executable, "KERNELRT_CACHE_DIR": str(tmp_path / "cache"),
           "PATH": "/usr/bin:/bin"}  # no ncu on this PATH, whatever the machine has
    out = _run("deps", "variants", env=env, timeout=900)
    (result,) = out_dir.glob("*-variants.json")
    rows = json.loads(result.read_text())["sections"]["variants"]["rows"]
    assert {r["group"] for r in rows} >= {"assembly", "sfap_columns", "sfap_delay", "sparse_spmv", "loops_heat"}
    e2e = json.loads((out_dir / "sfap-variants-e2e.json").read_text())  # each pair end to end, too
    assert e2e["backend"] == "cpu" and e2e["cases"]["tiny-2x4-dz1"]["max_abs_diff"] == 0.0
    assert "ncu: not installed" in out.stdout + out.stderr  # reported, not skipped in silence
    assert out.returncode != 0


def test_dry_run_sweep_and_e2e_time_each_setting_and_case(tmp_path):
    out_dir = tmp_path / "out"
    env = {"OUT": str(out_dir), "KERNELRT_SITE": str(tmp_path / "site"), "GPU_CHECK_ALLOW_CPU": "1",
           "GPU_CHECK_QUICK": "1", "PYTHON": sys.executable, "KERNELRT_CACHE_DIR": str(tmp_path / "cache")}
    out = _run("deps", "sweep", "e2e", env=env, timeout=600)
    assert out.returncode == 0, out.stdout[-3000:] + out.stderr[-3000:]
    sweep = json.loads((out_dir / "chebyshev-sweep.json").read_text())
    assert sweep["backend"] == "cpu" and sweep["skipped"] == []
    for case in sweep["cases"].values():
        default = case["settings"]["default"]
        assert default["max_residual"] <= 1e-10 and default["evals_vs_default"] == 0.0
        assert default["degree_cap"] == 200 and default["block_asked"] is None
        for row in case["settings"].values():  # every setting finds the default's eigenvalues
            assert row["evals_vs_default"] < 1e-10 and row["iterations"] >= 1
    e2e = json.loads((out_dir / "eigen-e2e.json").read_text())
    assert [r["k"] for r in e2e["rows"]] == [10, 10] and all(r["max_residual"] < 1e-9 for r in e2e["rows"])
    assert sorted(p.name for p in out_dir.iterdir()) == ["chebyshev-sweep.json", "eigen-e2e.json", "gpu-check.log"]


def test_dry_run_probe_takes_more_options_from_probe_args(tmp_path):
    out_dir = tmp_path / "out"
    env = {"OUT": str(out_dir), "KERNELRT_SITE": str(tmp_path / "site"), "GPU_CHECK_ALLOW_CPU": "1",
           "GPU_CHECK_QUICK": "1", "PYTHON": sys.executable, "KERNELRT_CACHE_DIR": str(tmp_path / "cache"),
           "PROBE_BUDGET": "60", "PROBE_ARGS": "--section anchors --anchor-cap 5"}
    out = _run("deps", "probe", env=env, timeout=600)
    assert out.returncode == 0, out.stdout[-3000:] + out.stderr[-3000:]
    (path,) = out_dir.glob("*-probe.json")
    result = json.loads(path.read_text())
    assert result["argv"][-4:] == ["--section", "anchors", "--anchor-cap", "5"] and result["budget_s"] == 60
    assert [s for s, sec in result["sections"].items() if sec["status"] == "ran"] == ["anchors"]


def test_dry_run_tests_collects_the_gpu_layer_as_a_gpu_machine_does(tmp_path):
    """The GPU machine has kernelrt copied into $SITE, not installed in editable mode.

    There the checkout's kernelrt/ (no kernels/) must not shadow $SITE's: pytest's default import
    mode put the checkout first and the 2026-11-26 sitting's tests step failed to collect. A
    Python started with -S and site-packages on PYTHONPATH has no editable-install finder (.pth
    files are not read), as on that machine.
    """
    import sysconfig

    wrapper = tmp_path / "python"
    wrapper.write_text(f'#!/bin/sh\nexec "{sys.executable}" -S "$@"\n')
    wrapper.chmod(0o755)
    out_dir = tmp_path / "out"
    paths = sysconfig.get_paths()
    env = {"OUT": str(out_dir), "KERNELRT_SITE": str(tmp_path / "site"), "GPU_CHECK_ALLOW_CPU": "1",
           "PYTHON": str(wrapper), "KERNELRT_CACHE_DIR": str(tmp_path / "cache"),
           "PYTHONPATH": os.pathsep.join(dict.fromkeys([paths["purelib"], paths["platlib"]]))}
    out = _run("deps", "tests", env=env, timeout=600)
    assert out.returncode == 0, out.stdout[-3000:] + out.stderr[-3000:]
    report = (out_dir / "gpu-tests.txt").read_text()
    assert "skipped" in report and "error" not in report.lower()


RAW = """"ID","Process ID","Kernel Name","gpu__time_duration.sum","launch__registers_per_thread","dram__bytes_read.sum","dram__bytes_write.sum","sm__warps_active.avg.pct_of_peak_sustained_active","sm__pipe_fp64_cycles_active.avg.pct_of_peak_sustained_active","l1tex__t_sectors_pipe_lsu_mem_global_op_ld.sum","l1tex__t_requests_pipe_lsu_mem_global_op_ld.sum","smsp__thread_inst_executed_per_inst_executed.ratio"
"","","","usecond","register/thread","Mbyte","Kbyte","%","%","sector","request",""
"0","42","_ZN6cudapy7kernels4sfap7kernels12sfap_columnsB2v1E5ArrayIdLi2E","5,350.00","104","48.00","16,000.00","24.9","17.2","1,000","250","31.5"
"1","42","_ZN8__main__15heat_step_blockB2v3E","20.00","40","60.00","0","70.0","2.0","5,600","100","28.0"
"""


def test_ncu_summary_reads_units_and_names(tmp_path):
    path = tmp_path / "raw.csv"
    path.write_text(RAW)
    rows = ncu_summary.read_rows(path)
    assert rows[0]["gpu__time_duration.sum"] == pytest.approx(5.35e-3)
    assert rows[0]["dram__bytes_write.sum"] == pytest.approx(16e6)
    lines = ncu_summary.summarize(rows)
    assert lines[1].split()[:3] == ["sfap_columns", "5350.0us", "104"]
    assert lines[2].split()[0] == "heat_step_block"  # the longest known name, not heat_step
    cols = lines[1].split()
    assert float(cols[4]) == pytest.approx(64.0)  # 48 MB read + 16 MB written
    assert float(cols[7]) == pytest.approx(4.0)  # 1,000 sectors / 250 requests


H100_RAW = ROOT / "bench" / "results" / "2026-11-26-nvidia-h100-80gb-hbm3-ncu-raw.csv"


def test_ncu_summary_reads_the_h100_sittings_csv():
    """ncu 2025.3 writes "ms" and "Mbyte": the probe's CUDA events timed sfap_response at 51.6 us."""
    rows = ncu_summary.read_rows(H100_RAW)
    first = rows[0]
    assert ncu_summary.short_name(first["Kernel Name"]) == "sfap_response"
    assert first["gpu__time_duration.sum"] == pytest.approx(51.264e-6)
    line = ncu_summary.summarize(rows)[1].split()
    assert line[:2] == ["sfap_response", "51.3us"]
    assert 400 < float(line[5]) < 700  # GB/s: 27.8 MB in 51 us, not the 1 GB/s of a 10^3 slip


def test_ncu_summary_refuses_a_duration_in_an_unknown_unit(tmp_path):
    path = tmp_path / "raw.csv"
    path.write_text(RAW.replace('"usecond"', '"fortnight"'))
    with pytest.raises(ValueError, match="gpu__time_duration.sum.*fortnight"):
        ncu_summary.read_rows(path)


def test_ncu_summary_refuses_an_empty_csv(tmp_path):
    path = tmp_path / "raw.csv"
    path.write_text('"ID","Kernel Name"\n')
    with pytest.raises(ValueError, match="no launches"):
        ncu_summary.read_rows(path)
