"""Issue 26's CLI papercuts, each as a user met it: `kernelrt bench` on Python 3.11, `kernelrt`
alone, `cache list` names that `cache clear --kernel` refused, `cache list | head -1`, the silent
first demo run, and --json that let other output onto stdout."""

import argparse
import hashlib
import json
import os
import subprocess
import sys
from types import SimpleNamespace

import pytest
from tests.support.kernels import shifted_sqrt

from kernelrt import CPUBackend, bench_cli
from kernelrt.cli import build_parser, main
from kernelrt.cli_common import CLOSED_STDOUT_STATUS
from kernelrt.disk_cache import DiskCache
from kernelrt.kernels import warm_specs
from kernelrt.kernels.demo import DemoConfig, Report, _load_kernels, compile_notice

KERNELRT = [sys.executable, "-m", "kernelrt"]


def run_cli(*args):
    return subprocess.run([*KERNELRT, *args], capture_output=True, text=True, check=False)


# -- kernelrt bench: its documented default on Python 3.11 ----------------------------------------


@pytest.mark.parametrize("argv", [["bench"], ["bench", "--quick"], ["bench", "all", "--quick"]])
def test_bench_default_suites_parse(argv):
    # 3.11's argparse checked the default list against `choices` whole: invalid choice: ['all']
    assert build_parser().parse_args(argv).suites == ["all"]


def test_bench_quick_runs_every_suite_by_default(monkeypatch, tmp_path, capsys):
    asked = {}

    def fake_run_bench(suites, *, quick, out_dir, attachments, log):
        asked.update(suites=suites, quick=quick, log=log)
        return {"ratios": [], "pytest_exit_code": 0}, tmp_path / "r.json"

    monkeypatch.setattr(bench_cli, "run_bench", fake_run_bench)
    assert main(["bench", "--quick"]) == 0
    assert asked == {"suites": list(bench_cli.SUITES), "quick": True, "log": None}
    assert capsys.readouterr().out == f"wrote {tmp_path / 'r.json'}\n"


def test_bench_unknown_suite_is_named(capsys):
    with pytest.raises(SystemExit) as e:
        build_parser().parse_args(["bench", "launch", "everything"])
    assert e.value.code == 2
    assert "argument SUITE: invalid choice: 'everything' (choose from launch, cache," in capsys.readouterr().err


def test_bench_json_is_the_only_stdout(cache_dir, tmp_path):
    # pytest's own output (dots, "Wrote benchmark data") used to precede the JSON on stdout
    res = run_cli("bench", "launch", "--quick", "--json", "--out", str(tmp_path))
    assert res.returncode == 0, res.stderr[-3000:]
    result = json.loads(res.stdout)
    assert result["suites"] == ["launch"] and result["quick"] is True and result["benchmarks"]
    assert "$ -m pytest" in res.stderr and "Wrote benchmark data" in res.stderr


# -- help ----------------------------------------------------------------------------------------


@pytest.mark.parametrize("argv,first", [([], "usage: kernelrt [-h] [--version] COMMAND ..."),
                                        (["cache"], "usage: kernelrt cache [-h]")])
def test_no_command_prints_help(argv, first):
    res = run_cli(*argv)
    assert res.returncode == 0 and res.stderr == ""
    assert res.stdout.startswith(first)
    if not argv:
        assert "examples:" in res.stdout and "  kernelrt demo --small" in res.stdout
        assert all(c in res.stdout for c in ("info", "cache", "demo", "cohort", "bench"))
    else:
        assert all(f"  {a} " in res.stdout for a in ("list", "stats", "clear", "warm"))


def _walk(parser, path=("kernelrt",)):
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            helps = {a.dest: a.help for a in action._choices_actions}
            for name, sub in action.choices.items():
                yield (*path, name), helps.get(name)
                yield from _walk(sub, (*path, name))
        else:
            yield (*path, "/".join(action.option_strings) or action.dest), action.help


def test_every_command_and_option_has_help():
    seen = list(_walk(build_parser()))
    assert len(seen) > 40  # the walk reached every subcommand's options
    missing = [" ".join(where) for where, text in seen if not text or text == argparse.SUPPRESS]
    assert missing == []


def test_version_is_kept():
    res = run_cli("--version")
    assert res.returncode == 0 and res.stdout.startswith("kernelrt ")


# -- cache list names and cache clear --kernel --------------------------------------------------


def test_every_name_cache_list_prints_is_accepted_by_clear(cache_dir, capsys):
    # Real kernels whose qualified names are longer than the old 48-character column.
    specs = dict((k.qualname, (k, s)) for k, s in warm_specs()["cpu"])
    long = ["kernelrt.kernels.laplacian.pattern.scatter_face_slots", "kernelrt.kernels.laplacian.spmv.csr_matvec"]
    backend = CPUBackend()
    for name in long:
        kernel, sig = specs[name]
        assert backend.compile_kernel(kernel.copy(), sig).status == "compiled"  # a copy: nothing in memory yet
    capsys.readouterr()
    assert main(["cache", "list"]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert lines[0].split() == ["kernel", "target", "size", "age"]
    printed = [line.split()[0] for line in lines[1:]]
    assert sorted(printed) == sorted(long)
    for name in printed:
        assert main(["cache", "clear", "--kernel", name]) == 0
        assert capsys.readouterr().out.startswith(f"removed 1 entries of {name} from ")
    assert main(["cache", "list", "--json"]) == 0 and json.loads(capsys.readouterr().out) == []


def test_clear_of_a_name_cut_short_says_which_was_meant(cache_dir, cpu, capsys):
    cpu.compile_kernel(shifted_sqrt.copy())
    capsys.readouterr()
    assert main(["cache", "clear", "--kernel", "support.kernels.shifted_sqrt"]) == 1
    captured = capsys.readouterr()
    assert "removed 0 entries of support.kernels.shifted_sqrt" in captured.out
    assert ("no cached kernel is named 'support.kernels.shifted_sqrt'; "
            "did you mean tests.support.kernels.shifted_sqrt?") in captured.err


# -- a reader that closes stdout early -------------------------------------------------------------


# Python buffers stdout into a pipe unless PYTHONUNBUFFERED is set: then a write fails at once
# (inside argparse, for help), else at a flush. Both end the same way.
BUFFERING = pytest.mark.parametrize("unbuffered", ["", "1"], ids=["buffered", "unbuffered"])


def _popen(argv, unbuffered):
    env = dict(os.environ, PYTHONUNBUFFERED=unbuffered)
    return subprocess.Popen([*KERNELRT, *argv], stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=env)


@BUFFERING
def test_cache_list_into_head_ends_quietly(cache_dir, unbuffered):
    # More than a pipe's 64 KiB of rows, so the command is still writing when the reader leaves.
    cache = DiskCache(cache_dir)
    for i in range(2000):
        cache.store(hashlib.sha256(str(i).encode()).hexdigest(), b"x",
                    {"kernel": f"tests.fake.a_kernel_with_a_long_name_{i:04d}", "target": "cpu:fake"})
    proc = _popen(["cache", "list"], unbuffered)
    assert proc.stdout.readline().split() == [b"kernel", b"target", b"size", b"age"]  # `head -1`
    proc.stdout.close()
    err = proc.stderr.read().decode()
    proc.stderr.close()
    assert proc.wait() == CLOSED_STDOUT_STATUS and err == ""


@BUFFERING
@pytest.mark.parametrize("argv", [[], ["--help"], ["--version"], ["cache"], ["info"], ["cache", "stats", "--json"]])
def test_any_command_into_a_closed_pipe_ends_quietly(cache_dir, argv, unbuffered):
    proc = _popen(argv, unbuffered)
    proc.stdout.close()  # the reader is gone before the first write (Python starts in far longer)
    err = proc.stderr.read().decode()
    proc.stderr.close()
    assert proc.wait() == CLOSED_STDOUT_STATUS and err == ""


# -- the first run's line ----------------------------------------------------------------------------


class _Compiles:
    """A backend whose every kernel compiles (no numba: the step's messages are under test)."""

    name = "cpu"

    def __init__(self, cache):
        self.cache = cache

    def compile_kernel(self, kernel, sig):
        return SimpleNamespace(status="compiled")


def test_loading_into_an_empty_cache_says_so_on_stderr(cache_dir, capsys):
    backend, specs = _Compiles(DiskCache(cache_dir)), warm_specs()["cpu"]
    _load_kernels(backend, DemoConfig.small(), rep := Report(), as_json=False)
    out, err = capsys.readouterr()
    assert err.startswith(f"kernelrt: compiling {len(specs)} kernels once (about {len(specs)} s, an estimate); "
                          f"later runs load them from the disk cache ({backend.cache.directory})\n")
    assert out.startswith(f"kernels: {len(specs)} compiled in ") and out.count("\n") == 1
    assert rep.kernels["statuses"] == {"compiled": len(specs)}
    _load_kernels(backend, DemoConfig.small(), Report(), as_json=True)
    out, err = capsys.readouterr()
    assert out == "" and "kernelrt: compiling" in err


def test_kernels_the_cache_names_but_that_compile_still_get_the_line(cache_dir, capsys):
    # An entry another version of the code left: counted as cached, then compiled after all.
    cache, specs = DiskCache(cache_dir), warm_specs()["cpu"]
    for i, (kernel, _) in enumerate(specs):
        cache.store(hashlib.sha256(str(i).encode()).hexdigest(), b"x", {"kernel": kernel.qualname, "target": "cpu:x"})
    _load_kernels(_Compiles(cache), DemoConfig.small(), Report(), as_json=False)
    assert capsys.readouterr().err.count(f"kernelrt: compiling {len(specs)} kernels once") == 1


def test_notice_says_when_the_disk_cache_is_off():
    off = SimpleNamespace(enabled=False, disabled_reason="disabled by KERNELRT_CACHE=0")
    assert compile_notice(1, off) == ("kernelrt: compiling 1 kernel (about 1 s, an estimate); the disk cache is off "
                                      "(disabled by KERNELRT_CACHE=0), so every run compiles it")


def test_first_demo_run_says_it_compiles_and_json_stays_alone(cache_dir):
    n = len(warm_specs()["cpu"])
    first = run_cli("demo", "--small", "--json", "--no-reference")
    assert first.returncode == 0, first.stderr[-3000:]
    assert f"kernelrt: compiling {n} kernels once (about {n} s, an estimate)" in first.stderr
    report = json.loads(first.stdout)
    assert report["passed"] is True and report["kernels"]["statuses"] == {"compiled": n}
    again = run_cli("demo", "--small", "--json", "--no-reference")
    assert again.returncode == 0 and "compiling" not in again.stderr
    assert json.loads(again.stdout)["kernels"]["statuses"] == {"disk": n}
    warm = run_cli("cache", "warm", "--json")  # every kernel cached: no line, stdout the JSON alone
    assert warm.returncode == 0 and "compiling" not in warm.stderr
    assert {k["status"] for k in json.loads(warm.stdout)["kernels"]} == {"disk"}
    # the demo's eigensolve compiled the eigensolver's host functions (kernelrt.njit) into the cache
    assert [h["status"] for h in json.loads(warm.stdout)["host_functions"]] == ["disk"]


def test_cache_warm_says_it_compiles(cache_dir, monkeypatch, capsys):
    monkeypatch.setattr("kernelrt.cli.warm_specs", lambda: {"cpu": [(shifted_sqrt.copy(), None)], "cuda": []})
    monkeypatch.setattr("kernelrt.cli.host_warmups", lambda: [])
    monkeypatch.setattr("kernelrt.cli.CUDABackend.check_available", staticmethod(lambda *a, **k: False))
    assert main(["cache", "warm", "--json"]) == 0
    out, err = capsys.readouterr()
    assert err.startswith("kernelrt: compiling 1 kernel once (about 1 s, an estimate)")
    report = json.loads(out)
    assert [(k["kernel"], k["target"], k["status"]) for k in report["kernels"]] == \
        [("tests.support.kernels.shifted_sqrt", "cpu", "compiled")]
    assert (report["compiled"], report["cached"], report["unsupported"]) == (1, 0, 0)


# -- --json: stdout is one JSON document --------------------------------------------------------------


def test_info_json_is_the_only_stdout(cache_dir):
    res = run_cli("info", "--json")
    assert res.returncode == 0 and json.loads(res.stdout)["cache"]["directory"].startswith(str(cache_dir))


def test_cache_json_is_the_only_stdout(cache_dir):
    docs = {}
    for action in ("list", "stats", "clear"):
        res = run_cli("cache", action, "--json")
        assert res.returncode == 0, res.stderr
        docs[action] = json.loads(res.stdout)
    assert docs["list"] == [] and docs["stats"]["entries"] == 0 and docs["clear"]["removed"] == 0
