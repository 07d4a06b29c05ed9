"""The kernelrt command (and python -m kernelrt): info, cache list/stats/clear, --version, clear errors for bad
options. The papercuts of issue 26 (help, pipes, --json, names, the first-run line): test_cli_papercuts.py."""

import json
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from tests.support.kernels import shifted_sqrt

import kernelrt
from kernelrt.cli import main


def run_cli(*args):
    return subprocess.run([sys.executable, "-m", "kernelrt.cli", *args], capture_output=True, text=True)


def test_info_human_and_json(cache_dir, capsys):
    assert main(["info"]) == 0
    text = capsys.readouterr().out
    assert "cpu backend:  available" in text and "cuda backend:" in text and str(cache_dir) in text
    assert main(["info", "--json"]) == 0
    report = json.loads(capsys.readouterr().out)
    assert report["backends"]["cpu"]["available"] is True
    assert report["backends"]["cpu"]["threading_layer"] == "tbb"
    assert "reason" in report["backends"]["cuda"]
    assert "numba" in report["versions"] and report["cache"]["directory"].startswith(str(cache_dir))


def test_cache_list_stats_clear(cache_dir, cpu, capsys):
    kernel = shifted_sqrt.copy()  # a copy: nothing compiled in memory yet
    cpu.compile_kernel(kernel)
    out = np.zeros(4)
    cpu.launch_kernel(kernel, 1, 4, out, np.arange(4.0))
    assert main(["cache", "list", "--json"]) == 0
    rows = json.loads(capsys.readouterr().out)
    assert [r["kernel"] for r in rows] == ["tests.support.kernels.shifted_sqrt"]
    assert rows[0]["target"].startswith("cpu:") and rows[0]["size"] > 0
    assert main(["cache", "list"]) == 0
    assert "tests.support.kernels.shifted_sqrt" in capsys.readouterr().out
    assert main(["cache", "stats", "--json"]) == 0
    stats = json.loads(capsys.readouterr().out)
    assert stats["entries"] == 1 and stats["totals"]["misses"] >= 1
    assert main(["cache", "clear", "--kernel", "tests.support.kernels.shifted_sqrt"]) == 0
    assert "removed 1 entries of tests.support.kernels.shifted_sqrt" in capsys.readouterr().out
    assert main(["cache", "list", "--json"]) == 0
    assert json.loads(capsys.readouterr().out) == []


@pytest.mark.parametrize(
    "args,message",
    [
        (["cache", "frob"], "invalid choice: 'frob'"),
        (["cache", "list", "--cc", "80"], "--cc applies to 'cache warm' only"),
        (["cache", "warm", "--cc", "9x"], "--cc takes compute capabilities like 80,90 (got '9x')"),
        (["cache", "stats", "--kernel", "k"], "--kernel applies to 'cache clear' only"),
        (["nonsense"], "invalid choice: 'nonsense'"),
    ],
)
def test_bad_options_are_clear(cache_dir, args, message):
    res = run_cli(*args)
    assert res.returncode == 2
    assert message in res.stderr
    assert "usage: kernelrt" in res.stderr


def test_version_from_the_script_and_from_python_m(cache_dir):
    script = Path(sys.executable).with_name("kernelrt")  # the console script of this environment
    if not script.exists():
        pytest.skip("kernelrt is not installed in this environment (pip install -e .)")
    for command in ([str(script), "--version"], [sys.executable, "-m", "kernelrt", "--version"]):
        res = subprocess.run(command, capture_output=True, text=True, check=False)
        assert res.returncode == 0, res.stderr
        assert res.stdout == f"kernelrt {kernelrt.__version__}\n"


def test_python_m_kernelrt_info_is_the_command(cache_dir):
    res = subprocess.run([sys.executable, "-m", "kernelrt", "info", "--json"], capture_output=True, text=True, check=False)
    assert res.returncode == 0, res.stderr
    cuda = json.loads(res.stdout)["backends"]["cuda"]
    avail = kernelrt.CUDABackend.availability()
    assert cuda["code"] == avail.code and cuda["fix"] == avail.fix
    res = subprocess.run([sys.executable, "-m", "kernelrt", "info"], capture_output=True, text=True, check=False)
    assert res.returncode == 0, res.stderr
    assert "cpu backend:  available" in res.stdout and str(cache_dir) in res.stdout
    assert f"cuda backend: {'available' if avail.ok else 'unavailable'}: {avail.reason}\n" in res.stdout
    res = subprocess.run([sys.executable, "-m", "kernelrt"], capture_output=True, text=True, check=False)
    assert res.returncode == 0 and res.stdout.startswith("usage: kernelrt [-h] [--version]") and not res.stderr
