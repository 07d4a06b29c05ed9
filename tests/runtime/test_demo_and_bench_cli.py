"""`kernelrt demo --small` runs and its checks pass; `kernelrt bench --quick` writes valid
JSON and PNGs; bad options get clear errors."""

import json
import subprocess
import sys

import pytest

from kernelrt.cli import main


def run_cli(*args, **kw):
    return subprocess.run([sys.executable, "-m", "kernelrt.cli", *args], capture_output=True, text=True, **kw)


def test_demo_small_passes_its_checks(cache_dir, capsys):
    assert main(["demo", "--small"]) == 0
    out = capsys.readouterr().out
    assert "kernelrt demo on the cpu backend" in out
    assert "SFAP: 20 fibres x 5 electrodes" in out and "Laplacian: icosphere level 4, 2,562 vertices" in out
    assert "all checks passed" in out


def test_demo_json_report(cache_dir, capsys):
    assert main(["demo", "--small", "--json", "--eigs", "16"]) == 0
    report = json.loads(capsys.readouterr().out)
    assert report["passed"] is True and report["backend"]["name"] == "cpu"
    names = [c["name"] for c in report["checks"]]
    assert any(n.startswith("sfap sfaps ") for n in names) and any("sphere spectrum" in n for n in names)
    assert all(c["value"] <= c["limit"] for c in report["checks"])
    assert report["sfap"]["reference_s"] > 0 and report["laplacian"]["eigenpairs_s"] > 0
    assert report["kernels"]["count"] > 0


@pytest.mark.parametrize(
    "args,message",
    [
        (["demo", "--fibres", "0"], "argument --fibres: expected a positive integer (got 0)"),
        (["demo", "--dz", "-0.1"], "argument --dz: expected a positive number (got -0.1)"),
        (["demo", "--dz", "fine"], "argument --dz: expected a positive number (got 'fine')"),
        (["demo", "--level", "9"], "icosphere level must be 0..8 (got 9"),
        (["demo", "--small", "--eigs", "5000"], "--eigs must be below 2561 for level 4 (got 5000)"),
        (["demo", "--backend", "gpu"], "argument --backend: invalid choice: 'gpu'"),
        (["bench", "everything"], "argument SUITE: invalid choice: 'everything'"),
        (["bench", "launch", "--attach", "oops"], "--attach takes NAME=PATH (got 'oops')"),
        (["bench", "launch", "--attach", "x=/no/such/file.json"], "--attach x: no file at /no/such/file.json"),
    ],
)
def test_bad_options(cache_dir, args, message):
    res = run_cli(*args)
    assert res.returncode != 0
    assert message in res.stderr


def test_demo_on_cuda_without_gpu_is_clear(cache_dir):
    import kernelrt

    if kernelrt.CUDABackend.check_available():
        pytest.skip("a GPU is available")
    res = run_cli("demo", "--small", "--backend", "cuda")
    assert res.returncode == 1
    assert "--backend cuda: no NVIDIA driver" in res.stderr or "--backend cuda:" in res.stderr


def test_bench_quick_writes_json_and_pngs(cache_dir, tmp_path):
    res = run_cli("bench", "laplacian", "--quick", "--plot", "--out", str(tmp_path))
    assert res.returncode == 0, res.stdout[-3000:] + res.stderr[-3000:]
    [path] = list(tmp_path.glob("*.json"))
    result = json.loads(path.read_text())
    assert result["schema"] == 1 and result["quick"] is True and result["suites"] == ["laplacian"]
    assert result["device"]["backend"] == "cpu" and "numba" in result["versions"]
    assert "commit" in result and result["benchmarks"]
    ratios = {r["group"]: r for r in result["ratios"]}
    assert any(g.startswith("spmv-") for g in ratios)
    assert all(r["ratio"] > 0 for r in result["ratios"])
    pngs = sorted(tmp_path.glob("*.png"))
    assert {p.name.rsplit("-", 1)[-1] for p in pngs} >= {"time.png", "speedup.png", "bandwidth.png"}
    assert all(p.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n" and p.stat().st_size > 10_000 for p in pngs)
