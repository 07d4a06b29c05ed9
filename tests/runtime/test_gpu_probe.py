"""The GPU probe (bench/gpu_probe.py, ``kernelrt bench gpu``) end to end on the CPU backend.

One quick run with every section (module fixture) is checked for its JSON, rows, floors,
labels and the table printed last; a tiny budget must skip every case cleanly; bad
arguments must fail before any work; ``--ncu`` must print nothing and launch each target
kernel exactly twice; ``--variant`` must time the variants side by side.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
PROBE = ROOT / "bench" / "gpu_probe.py"
SECTIONS = ["copies", "launch", "sfap", "laplacian", "eigen", "integrations", "dask", "anchors"]


def run_probe(*args, cache, cwd=None, module=False):
    env = dict(os.environ, KERNELRT_CACHE_DIR=str(cache))
    cmd = [sys.executable, "-m", "kernelrt.cli", "bench", "gpu", *args] if module else [sys.executable, str(PROBE), *args]
    return subprocess.run(cmd, capture_output=True, text=True, env=env, cwd=cwd or ROOT, timeout=900)


def only_json(folder: Path) -> dict:
    (path,) = folder.glob("*.json")
    return json.loads(path.read_text())


@pytest.fixture(scope="module")
def cache(tmp_path_factory):
    return tmp_path_factory.mktemp("probe-cache")


@pytest.fixture(scope="module")
def quick_run(tmp_path_factory, cache):
    out = tmp_path_factory.mktemp("probe-out")
    res = run_probe("--backend", "cpu", "--quick", "--budget", "600", "--out", str(out), cache=cache)
    return res, out


def test_quick_cpu_run_writes_every_section(quick_run):
    res, out = quick_run
    assert res.returncode == 0, res.stdout[-2000:] + res.stderr[-2000:]
    result = only_json(out)
    assert list(result["sections"]) == SECTIONS
    assert result["label"] == "cpu" and result["device"]["backend"] == "cpu"
    assert result["peaks"]["name"] == "H100" and "nominal" in result["peaks"]["source"]
    assert all(s["status"] == "ran" for s in result["sections"].values())
    assert (out / f"{out.glob('*.json').__next__().stem}-ratios.png").is_file()
    # the sections that need no peer produced rows; the others say why they skipped
    for name in ("copies", "launch", "sfap", "laplacian", "eigen", "dask", "anchors"):
        assert result["sections"][name]["rows"], name
    integrations = result["sections"]["integrations"]
    assert integrations["rows"] or all("not installed" in s["reason"] for s in integrations["skipped"])
    assert any("no GPU" in s["reason"] for s in result["sections"]["anchors"]["skipped"])


def test_rows_have_floors_ratios_and_cpu_labels(quick_run):
    rows = [r for s in only_json(quick_run[1])["sections"].values() for r in s["rows"]]
    assert rows and all(r["status"] == "cpu" for r in rows)  # no error rows either
    assert {r["what"] for r in rows} >= {"kernel-only", "e2e", "host", "copy", "launch"}
    for r in rows:
        assert r["seconds"] > 0 and r["timing"] == "wall"
        if r["what"] in ("kernel-only", "copy", "launch", "loop") or r["section"] in ("sfap", "laplacian", "eigen"):
            if r["what"] != "host":
                assert r["floor_s"] > 0 and r["ratio"] == pytest.approx(r["seconds"] / r["floor_s"]), r["case"]
                assert r["floor_formula"] and r["work"]
    kernel_rows = [r for r in rows if r["what"] == "kernel-only"]
    assert all(r["host_per_launch_s"] > 0 and r["launches"] >= 2 for r in kernel_rows)
    names = {r["case"] for r in rows}
    for kernel in ("sfap_response", "sfap_columns", "sfap_delay", "sfap_muap", "compute_sfaps", "plan_fibres"):
        assert any(n.startswith("myogen-") and n.endswith(kernel) for n in names), kernel
    assert any("row_values" in n for n in names) and any("csr_matmat" in n for n in names)
    eigen = [r for r in rows if r["section"] == "eigen"]
    assert all(r["products"] > 0 and r["iterations"] > 0 and r["max_residual"] < 1e-8 for r in eigen)
    dask = [r for r in rows if r["section"] == "dask"]
    assert len(dask) == 2 and all(r["matches_no_client_bitwise"] for r in dask)
    # per-task compute times from Dask's task stream, and the workers' first call on its own
    assert all(r["tasks"] >= 2 and 0 < r["task_compute_median_s"] <= r["task_compute_max_s"] for r in dask)
    assert all(r["first_call_s"] > 0 for r in dask)


def test_the_end_to_end_rows_far_from_their_targets_say_where_their_host_time_goes(quick_run):
    result = only_json(quick_run[1])
    rows = [r for s in result["sections"].values() for r in s["rows"]]
    profiled = {r["case"] for r in rows if "host_profile" in r}
    assert any(c.endswith(" assemble") for c in profiled) and any(c.endswith(" assemble_batch") for c in profiled)
    assert any(c.endswith("compute_sfaps") for c in profiled) and any("device arrays" in c for c in profiled)
    for r in rows:
        for f in r.get("host_profile", []):
            assert f["calls"] >= 1 and 0 <= f["own_s"] <= f["cumulative_s"] + 1e-9 and ":" in f["function"]
    sfap = next(r for r in rows if r["case"].endswith("compute_sfaps"))
    own = [f["own_s"] for f in sfap["host_profile"]]
    assert own == sorted(own, reverse=True) and sum(own) <= 10 * sfap["seconds"]  # one call, its top functions
    report = subprocess.run([sys.executable, str(ROOT / "bench" / "gpu_report.py"), str(next(quick_run[1].glob("*.json")))],
                            capture_output=True, text=True, timeout=60)
    assert report.returncode == 0 and "Where the host time goes:" in report.stdout
    assert f"sfap: {sfap['case']} (e2e" in report.stdout and "| function | calls | own | cumulative |" in report.stdout


def test_sfap_floor_uses_the_cases_own_counts(quick_run):
    sys.path.insert(0, str(ROOT / "bench"))
    import gpu_floors
    from kernelrt.kernels.sfap.inputs import check_inputs
    from kernelrt.kernels.sfap.prep import plan_fibres
    from kernelrt.kernels.sfap.reference import synthetic_motor_unit

    rows = only_json(quick_run[1])["sections"]["sfap"]["rows"]
    row = next(r for r in rows if r["case"].endswith("sfap_columns") and r["kernel_fibres"] == r["fibres"])
    case = synthetic_motor_unit(row["fibres"], row["electrodes"], row["dz"], length=row["muscle_mm"])
    counts = gpu_floors.sfap_counts(plan_fibres(**check_inputs(**case, min_radial_dist=None)), row["electrodes"])
    assert row["work"]["useful_fma"] == counts["useful_fma"] and row["work"]["exps_needed"] == counts["exps_needed"]


def test_the_table_is_printed_last(quick_run):
    lines = quick_run[0].stdout.strip().splitlines()
    header = next(i for i, line in enumerate(lines) if line.startswith("case "))
    assert lines[header - 1].startswith("kernelrt GPU probe: ") and not any(line.startswith("wrote ") for line in lines[header:])
    assert "[anchors]" in "\n".join(lines[header:])
    assert all(len(line) <= 100 for line in lines[header:])


def test_a_spent_budget_skips_every_case_cleanly(tmp_path, cache):
    res = run_probe("--backend", "cpu", "--quick", "--budget", "0.001", "--out", str(tmp_path), cache=cache)
    assert res.returncode == 0, res.stderr[-2000:]
    result = only_json(tmp_path)
    for name, sec in result["sections"].items():
        assert sec["status"] == "ran" and sec["rows"] == [] and sec["skipped"], name
    reasons = [s["reason"] for sec in result["sections"].values() for s in sec["skipped"]]
    assert any(r.startswith("time budget: ") for r in reasons)
    assert "skipped" in res.stdout.splitlines()[-1]


@pytest.mark.parametrize("args,message", [
    (["--section", "copies,gpu"], "sections are copies, launch, sfap"),
    (["--budget", "0"], "argument --budget: expected a positive number of seconds (got 0)"),
    (["--budget", "soon"], "argument --budget: expected a positive number of seconds (got 'soon')"),
    (["--anchor-cap", "-5"], "argument --anchor-cap: expected a positive number of seconds (got -5)"),
    (["--variant", "tiled"], "variant groups are assembly, sfap_columns, sfap_delay, sparse_spmv"),
    (["--peaks", "hbm=-3"], "--peaks hbm must be a positive number (got '-3')"),
    (["--backend", "gpu"], "argument --backend: invalid choice: 'gpu'"),
])
def test_bad_arguments_fail_before_any_work(tmp_path, cache, args, message):
    res = run_probe("--backend", "cpu", *args, "--out", str(tmp_path / "out"), cache=cache)
    assert res.returncode != 0 and message in res.stderr
    assert not (tmp_path / "out").exists()


def test_out_must_be_a_folder(tmp_path, cache):
    (tmp_path / "file").write_text("")
    res = run_probe("--backend", "cpu", "--out", str(tmp_path / "file"), cache=cache)
    assert res.returncode != 0 and "--out must be a folder" in res.stderr


def test_ncu_mode_prints_nothing_and_launches_each_kernel_twice(cache, monkeypatch):
    res = run_probe("--backend", "cpu", "--ncu", "--section", "laplacian,eigen", cache=cache)
    assert res.returncode == 0 and res.stdout == ""
    monkeypatch.setenv("KERNELRT_CACHE_DIR", str(cache))
    monkeypatch.syspath_prepend(str(ROOT / "bench"))
    import gpu_probe
    from gpu_timing import Probe
    from gpu_variants import NCU_KERNELS, VARIANT_NCU_KERNELS, ncu_launches

    import kernelrt

    probe = Probe(kernelrt.CPUBackend(), quick=True)
    probe.peaks = gpu_probe.device_peaks(probe.backend)
    counts = ncu_launches(probe, ["sfap", "laplacian", "eigen"])
    assert counts == {k: 2 for names in NCU_KERNELS.values() for k in names}
    # --ncu --variant: the variant kernels after the defaults, twice each as well
    with_variants = ncu_launches(probe, ["sfap", "laplacian", "eigen"], variants=True)
    assert with_variants == {**counts, **{k: 2 for names in VARIANT_NCU_KERNELS.values() for k in names}}


def test_variants_side_by_side(tmp_path, cache):
    res = run_probe("--backend", "cpu", "--quick", "--variant", "assembly", "--out", str(tmp_path), cache=cache)
    assert res.returncode == 0, res.stderr[-2000:]
    (path,) = tmp_path.glob("*-variants.json")
    rows = json.loads(path.read_text())["sections"]["variants"]["rows"]
    assert [r["variant"] for r in rows] == ["deterministic", "atomic", "nodiv"]
    assert [r["kernel"] for r in rows] == ["row_values", "face_values_atomic", "row_values_nodiv"]
    assert rows[0]["floor_s"] == rows[1]["floor_s"] == rows[2]["floor_s"] > 0


def test_every_variant_family_is_timed_side_by_side(tmp_path, cache):
    groups = "sfap_columns,sfap_delay,sparse_spmv,sparse_spmm,sparse_cheb,loops_heat,loops_filter"
    res = run_probe("--backend", "cpu", "--quick", "--variant", groups, "--out", str(tmp_path), cache=cache)
    assert res.returncode == 0, res.stderr[-2000:]
    (path,) = tmp_path.glob("*-variants.json")
    rows = json.loads(path.read_text())["sections"]["variants"]["rows"]
    assert not [r for r in rows if str(r.get("status", "")).startswith("error")], rows
    pairs = {(r["group"], r["variant"]) for r in rows}
    assert {("sfap_columns", "tiled"), ("sfap_delay", "staged"), ("sparse_spmv", "sell"), ("sparse_cheb", "sell"),
            ("loops_heat", "cooperative"), ("loops_filter", "cooperative")} <= pairs
    loops = [r for r in rows if r["group"].startswith("loops")]
    assert {r["what"] for r in loops} == {"device-resident"}  # whole calls: the host's launch cost counts


def test_kernelrt_bench_gpu_delegates_to_the_probe(tmp_path, cache):
    res = run_probe("--backend", "cpu", "--budget", "0.001", "--section", "copies", "--out", str(tmp_path), cache=cache,
                    module=True)
    assert res.returncode == 0, res.stderr[-2000:]
    result = only_json(tmp_path)
    assert result["sections"]["copies"]["status"] == "ran" and result["sections"]["sfap"]["status"] == "not selected"
    for option in ("--budget", "--anchor-cap"):
        res = subprocess.run([sys.executable, "-m", "kernelrt.cli", "bench", "launch", option, "3"], capture_output=True,
                             text=True, cwd=ROOT)
        assert res.returncode != 0 and f"{option}: only for 'kernelrt bench gpu'" in res.stderr
    res = subprocess.run([sys.executable, "-m", "kernelrt.cli", "bench", "gpu", "sfap"], capture_output=True, text=True,
                         cwd=ROOT)
    assert res.returncode != 0 and "gpu runs alone (got gpu sfap)" in res.stderr


def test_markdown_report_of_the_h100_results():
    """``python bench/gpu_report.py`` on the committed H100 results: every row, % of limit = floor / time."""
    results = [ROOT / "bench" / "results" / f"2026-11-26-nvidia-h100-80gb-hbm3-{name}.json" for name in ("probe", "eigen")]
    out = subprocess.run([sys.executable, str(ROOT / "bench" / "gpu_report.py"), *map(str, results)],
                         capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stderr
    table = [line for line in out.stdout.splitlines() if line.startswith("| ")][1:]  # rows after the header
    rows = [r for p in results for s in json.loads(p.read_text())["sections"].values() for r in s.get("rows", [])]
    assert len(table) == len(rows)
    spmv = next(line for line in table if "| ico8 csr_matvec | kernel-only |" in line)
    row = next(r for r in rows if r["case"] == "ico8 csr_matvec")
    assert f"| {100 * row['floor_s'] / row['seconds']:.0f}% |" in spmv  # 61%: 2.05 TB/s of 3.35
    assert "| eigen | eigen-ico7-k50 | e2e | 916.77ms |" in out.stdout


def test_markdown_report_needs_a_file():
    out = subprocess.run([sys.executable, str(ROOT / "bench" / "gpu_report.py")], capture_output=True, text=True)
    assert out.returncode != 0 and "usage" in out.stderr
