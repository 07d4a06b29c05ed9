"""Run a peer's own test suite without and with kernelrt's integration; compare per test.

The peers and where their tests come from:

* **spectralbrain**: its sdist on PyPI (the wheel ships none), for the version installed
  here: ``pip download --no-deps --no-binary :all: spectralbrain==<version>``, cached
  under ``$KERNELRT_PEER_CACHE`` (default ``~/.cache/kernelrt/peers``). Its ``tests/``
  and ``pyproject.toml`` are unpacked into a scratch folder, so pytest runs with
  SpectralBrain's own configuration (warnings are errors) against the installed package,
  not the sdist's sources.
* **myogen**: neither its wheel nor an sdist ships tests, so ``--tests PATH`` names a
  checkout of its repository (github.com/NsquaredLab/MyoGen; at least ``tests/`` and
  ``pyproject.toml``). Its main branch tests modules that 0.12 does not have
  (``myogen.kernel``); those files fail to collect in both runs, and the others run
  (``--continue-on-collection-errors``).

Two runs, each in its own process:

* **baseline**: the environment without the peer's ``KERNELRT_<PEER>`` variable;
* **kernelrt**: ``KERNELRT_<PEER>=1``, and this file as a pytest plugin (``-p
  peer_tests``) that calls ``kernelrt.integrations.<peer>.enable()`` before any test
  module imports the peer (the .pth start-up hook does the same where it is installed)
  and records, per test, how many calls kernelrt served (``calls``) and handed back to
  the peer (``fallbacks``) in the pytest process (work in worker processes is not
  counted there).

Both runs drop the peer's ``-x`` (every test runs) and record each test's outcome; the
report lists the tests that reach the swapped code, and every test whose outcome
differs. The exit status is 0 when no test that passes without the integration fails
with it, and every ``--require``d test passes with it.

    python tools/peer_tests.py [spectralbrain|myogen] [--tests PATH] [--select reach] [--json report.json]
                               [--require NODEID ...] [FILES ...]

``--select reach`` runs only the test files that reach the swapped code (found by a first
run with the integration on). The plugin hooks below are inert unless pytest loads this
file with ``-p``.
"""

from __future__ import annotations

import argparse
import importlib
import json
import os
import subprocess
import sys
import tarfile
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path


@dataclass(frozen=True)
class Peer:
    name: str  # distribution, import name and kernelrt.integrations module
    env_var: str
    swapped: str  # what the report calls the swapped code
    addopts: str  # pytest options replacing the peer's own addopts
    required: tuple[str, ...]  # tests that must pass with the integration
    from_sdist: bool  # tests from the PyPI sdist; else a checkout given with --tests


PEERS = {
    # SpectralBrain's addopts are "-ra --strict-markers --strict-config -x": all but -x, so
    # that one failure does not hide the others
    "spectralbrain": Peer("spectralbrain", "KERNELRT_SPECTRALBRAIN", "_cotangent_laplacian",
                          "-ra --strict-markers --strict-config",
                          ("tests/test_fix_core.py::test_degenerate_faces_do_not_corrupt_spectrum",), True),
    "myogen": Peer("myogen", "KERNELRT_MYOGEN", "MotorUnitSim.calc_sfaps/calc_muap",
                   "-ra --continue-on-collection-errors",
                   ("tests/test_determinism.py::test_intramuscular_muap_block_is_reproducible_under_seed",), False),
}

# -- the plugin side (pytest -p peer_tests) ---------------------------------------------------

_record: dict = {"outcomes": {}, "reach": {}}


def pytest_configure(config):
    peer = os.environ.get("KERNELRT_PEER_TESTS_ENABLE", "")
    if peer in PEERS:
        integration = importlib.import_module(f"kernelrt.integrations.{peer}")
        integration.enable()
        _record["integration"] = integration
    _record["start"] = time.perf_counter()


def _counters():
    integration = _record.get("integration")
    return (integration.INTEGRATION.calls, integration.INTEGRATION.fallbacks) if integration else (0, 0)


def pytest_runtest_protocol(item, nextitem):
    before = _counters()
    _record["current"] = (item.nodeid, before)


def pytest_runtest_logreport(report):
    outcomes = _record["outcomes"]
    if report.when == "call":
        if hasattr(report, "wasxfail"):
            outcomes[report.nodeid] = "xpassed" if report.passed else "xfailed"
        else:
            outcomes[report.nodeid] = report.outcome
    elif report.failed:  # setup or teardown
        outcomes[report.nodeid] = "error"
    elif report.skipped and report.when == "setup":
        outcomes[report.nodeid] = "skipped"
    if report.when == "teardown":
        nodeid, before = _record.get("current", (None, (0, 0)))
        calls, fallbacks = (a - b for a, b in zip(_counters(), before))
        if nodeid == report.nodeid and (calls or fallbacks):
            _record["reach"][nodeid] = {"calls": calls, "fallbacks": fallbacks}


def pytest_sessionfinish(session, exitstatus):
    out = os.environ.get("KERNELRT_PEER_TESTS_OUT")
    if not out:
        return
    integration = _record.get("integration")
    Path(out).write_text(json.dumps({
        "seconds": time.perf_counter() - _record.get("start", time.perf_counter()),
        "exitstatus": int(exitstatus),
        "outcomes": _record["outcomes"],
        "reach": _record["reach"],
        "stats": integration.stats() if integration else None,
    }, indent=1))


# -- the driver ------------------------------------------------------------------------------


def installed_version(peer: Peer) -> str:
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version(peer.name)
    except PackageNotFoundError:
        raise SystemExit(f"{peer.name} is not installed: pip install -e '.[{peer.name}]'") from None


def sdist(peer: Peer, version: str, cache: Path) -> Path:
    """The peer's sdist for ``version``, downloaded once into ``cache``."""
    path = cache / f"{peer.name}-{version}.tar.gz"
    if not path.is_file():
        cache.mkdir(parents=True, exist_ok=True)
        cmd = [sys.executable, "-m", "pip", "download", "--no-deps", "--no-binary", ":all:", "--quiet",
               f"{peer.name}=={version}", "-d", str(cache)]
        done = subprocess.run(cmd, capture_output=True, text=True, check=False)
        if done.returncode != 0 or not path.is_file():
            raise SystemExit(f"could not download the {peer.name} {version} sdist: {done.stderr.strip()[-500:]}")
    return path


def unpack(archive: Path, into: Path) -> Path:
    """The sdist's tests/ and pyproject.toml under ``into`` (never its sources)."""
    with tarfile.open(archive) as tar:
        root = tar.getnames()[0].split("/")[0]
        members = [m for m in tar.getmembers()
                   if m.name == f"{root}/pyproject.toml" or m.name.startswith(f"{root}/tests/")]
        tar.extractall(into, members=members, filter="data")
    return into / root


def run_suite(peer: Peer, root: Path, files: list[str], *, kernelrt: bool, extra: list[str]) -> dict:
    """One pytest process over ``files``; its record (outcomes, reach, seconds)."""
    fd, out = tempfile.mkstemp(suffix=".json")
    os.close(fd)
    env = {k: v for k, v in os.environ.items() if k != peer.env_var}
    env.update(KERNELRT_PEER_TESTS_OUT=out, KERNELRT_PEER_TESTS_ENABLE=peer.name if kernelrt else "",
               PYTHONPATH=os.pathsep.join([str(Path(__file__).resolve().parent), env.get("PYTHONPATH", "")]))
    if kernelrt:
        env[peer.env_var] = "1"
    cmd = [sys.executable, "-m", "pytest", "-q", "-p", "peer_tests", "-p", "no:cacheprovider",
           "-o", f"addopts={peer.addopts}", *extra, *files]
    t0 = time.perf_counter()
    done = subprocess.run(cmd, cwd=root, env=env, capture_output=True, text=True, check=False)
    wall = time.perf_counter() - t0
    try:
        record = json.loads(Path(out).read_text())
    except ValueError:
        raise SystemExit(f"pytest wrote no record (exit {done.returncode}):\n{done.stdout[-3000:]}{done.stderr[-3000:]}")
    finally:
        os.unlink(out)
    record.update(wall_s=wall, returncode=done.returncode, tail=done.stdout.strip().splitlines()[-1:])
    return record


# at most this many single-test runs per side when an outcome changed: a test the peer
# fails 5% of the time shows up in 60 runs with 95% probability
RECHECK_RUNS = 60


def recheck(peer: Peer, root: Path, tests: list[str], extra: list[str]) -> dict:
    """Run each test whose outcome changed again, alone, without and with the integration.

    A test that fails without kernelrt too, in any of up to ``RECHECK_RUNS`` runs, is flaky
    in the peer itself (SpectralBrain's ARPACK calls start from a random vector under
    SciPy >= 1.15, so a test comparing two solves inside a degenerate eigenspace fails now
    and then). One that passes every run on both sides did not reproduce: a failure rarer
    than the runs can show, not counted against the integration but reported. Returns
    ``{test: {"baseline_failures": a, "kernelrt_failures": b, "runs": n}}``.
    """
    out = {}
    for test in tests:
        fails = {"baseline": 0, "kernelrt": 0}
        runs = 0
        while runs < RECHECK_RUNS and fails["baseline"] == 0:
            runs += 1
            for side in fails:
                outcome = run_suite(peer, root, [test], kernelrt=side == "kernelrt", extra=extra)["outcomes"]
                fails[side] += outcome.get(test) != "passed"
        out[test] = {"baseline_failures": fails["baseline"], "kernelrt_failures": fails["kernelrt"], "runs": runs}
    return out


def compare(base: dict, ours: dict, required: list[str], rechecked: dict | None = None) -> dict:
    """Per test id: what changed, what broke, what reached the swapped code."""
    ids = sorted(set(base["outcomes"]) | set(ours["outcomes"]))
    changed = {i: [base["outcomes"].get(i), ours["outcomes"].get(i)] for i in ids
               if base["outcomes"].get(i) != ours["outcomes"].get(i)}
    rechecked = rechecked or {}
    flaky = {i: r for i, r in rechecked.items() if r["baseline_failures"]}
    # failed once in the suite, then passed every rerun alone, with kernelrt and without
    unreproduced = {i: r for i, r in rechecked.items()
                    if not r["baseline_failures"] and not r["kernelrt_failures"]}
    excused = flaky | unreproduced
    broken = [i for i, (b, o) in changed.items() if b == "passed" and i not in excused]
    ran = set(base["outcomes"]) | set(ours["outcomes"])
    missing = [i for i in required if i in ran and ours["outcomes"].get(i) != "passed" and i not in excused]
    counts = {}
    for name, rec in (("baseline", base), ("kernelrt", ours)):
        tally: dict[str, int] = {}
        for outcome in rec["outcomes"].values():
            tally[outcome] = tally.get(outcome, 0) + 1
        counts[name] = tally
    reach = ours["reach"]
    return {
        "tests": len(ids),
        "outcomes": counts,
        "seconds": {"baseline": round(base["wall_s"], 1), "kernelrt": round(ours["wall_s"], 1)},
        "reach": {"tests": len(reach), "files": sorted({i.split("::")[0] for i in reach}),
                  "calls": sum(r["calls"] for r in reach.values()),
                  "fallbacks": sum(r["fallbacks"] for r in reach.values()), "per_test": reach},
        "changed": changed,
        "flaky_in_peer": flaky,
        "not_reproduced": unreproduced,
        "broken": broken,
        "required_not_passing": missing,
        "required_not_run": [i for i in required if i not in ran],
        "stats": ours.get("stats"),
        "ok": not broken and not missing,
    }


def main(argv=None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    name = argv.pop(0) if argv[:1] and argv[0] in PEERS else "spectralbrain"
    peer = PEERS[name]
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("files", nargs="*", help="test files or ids inside the peer's tests/ (default: all)")
    p.add_argument("--select", choices=("all", "reach"), default="all",
                   help=f"reach: only the files whose tests call {peer.swapped} (one extra run to find them)")
    p.add_argument("--sdist", type=Path, help="an sdist to take the tests from (default: download; spectralbrain)")
    p.add_argument("--tests", type=Path, help="a checkout of the peer's repository holding tests/ (myogen)")
    p.add_argument("--require", action="append", default=list(peer.required), metavar="NODEID",
                   help=f"a test that must pass with the integration (default: {', '.join(peer.required)})")
    p.add_argument("--json", type=Path, help="write the full comparison here")
    p.add_argument("--pytest", action="append", default=[], metavar="ARG", help="an extra pytest argument")
    args = p.parse_args(argv)
    version = installed_version(peer)
    if not peer.from_sdist and (args.tests is None or not (args.tests / "tests").is_dir()):
        p.error(f"{name} ships no tests: --tests must name a checkout of its repository with tests/ "
                f"(got {args.tests})")
    with tempfile.TemporaryDirectory(prefix="peer-tests-") as tmp:
        if peer.from_sdist:
            cache = Path(os.environ.get("KERNELRT_PEER_CACHE", "~/.cache/kernelrt/peers")).expanduser()
            root = unpack(args.sdist or sdist(peer, version, cache), Path(tmp))
        else:
            root = args.tests.resolve()
        files = args.files or ["tests"]
        if args.select == "reach":
            probe = run_suite(peer, root, files, kernelrt=True, extra=args.pytest)
            files = sorted({i.split("::")[0] for i in probe["reach"]})
            print(f"files reaching {peer.swapped}: {', '.join(files)}", flush=True)
        base = run_suite(peer, root, files, kernelrt=False, extra=args.pytest)
        ours = run_suite(peer, root, files, kernelrt=True, extra=args.pytest)
        first = compare(base, ours, args.require)
        suspects = sorted(set(first["broken"]) | set(first["required_not_passing"]))
        rechecked = recheck(peer, root, suspects, args.pytest) if suspects else {}
    result = compare(base, ours, args.require, rechecked)
    result[name] = version
    result["files"] = files
    if args.json:
        args.json.write_text(json.dumps(result, indent=1) + "\n")
    r = result["reach"]
    print(f"{name} {version}: {result['tests']} tests in {', '.join(files)}")
    for run in ("baseline", "kernelrt"):
        tally = ", ".join(f"{n} {k}" for k, n in sorted(result["outcomes"][run].items()))
        print(f"  {run:9} {tally} ({result['seconds'][run]} s)")
    print(f"  {r['tests']} tests in {len(r['files'])} files reach {peer.swapped}: "
          f"{r['calls']} kernelrt calls, {r['fallbacks']} fallbacks ({', '.join(r['files'])})")
    for test, (b, o) in result["changed"].items():
        print(f"  changed: {test}: {b} -> {o}")
    for test, r in result["flaky_in_peer"].items():
        print(f"  flaky in {name} itself (not counted): {test}: failed {r['baseline_failures']} of {r['runs']} "
              f"runs without kernelrt, {r['kernelrt_failures']} of {r['runs']} with")
    for test, r in result["not_reproduced"].items():
        print(f"  not reproduced (not counted): {test}: passed all {r['runs']} reruns alone, with kernelrt "
              "and without")
    for test in result["broken"]:
        print(f"  broken by the integration: {test}")
    for test in result["required_not_passing"]:
        print(f"  required test not passing with kernelrt: {test}")
    for test in result["required_not_run"]:
        print(f"  required test not in the selection: {test}")
    print("ok" if result["ok"] else "FAILED")
    return 0 if result["ok"] else 1


if __name__ == "__main__":
    sys.exit(main())
