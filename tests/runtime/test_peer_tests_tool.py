"""tools/peer_tests.py's verdict: a changed outcome is the integration's fault only if the
peer never fails that test on its own (its own flaky tests are reported, not counted)."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

spec = importlib.util.spec_from_file_location("peer_tests", Path(__file__).resolve().parents[2] / "tools" / "peer_tests.py")
peer_tests = importlib.util.module_from_spec(spec)
sys.modules.setdefault("peer_tests", peer_tests)  # its dataclass looks its module up there
spec.loader.exec_module(peer_tests)


def _run(outcomes: dict) -> dict:
    return {"outcomes": outcomes, "reach": {}, "wall_s": 1.0}


def _b_fails_with_the_integration() -> tuple[dict, dict]:
    return _run({"t::a": "passed", "t::b": "passed"}), _run({"t::a": "passed", "t::b": "failed"})


def test_a_test_broken_only_with_the_integration_fails_the_verdict():
    base, ours = _b_fails_with_the_integration()
    verdict = peer_tests.compare(base, ours, [], {"t::b": {"baseline_failures": 0, "kernelrt_failures": 3, "runs": 30}})
    assert verdict["broken"] == ["t::b"] and not verdict["ok"]


def test_a_test_that_also_fails_without_the_integration_is_flaky_not_broken():
    base, ours = _b_fails_with_the_integration()
    rechecked = {"t::b": {"baseline_failures": 1, "kernelrt_failures": 0, "runs": 7}}
    verdict = peer_tests.compare(base, ours, ["t::b"], rechecked)
    assert verdict["ok"] and verdict["broken"] == [] and verdict["required_not_passing"] == []
    assert verdict["flaky_in_peer"] == rechecked and verdict["changed"] == {"t::b": ["passed", "failed"]}


def test_a_failure_no_rerun_reproduces_is_reported_not_counted():
    # failed once in the suite with the integration, then passed every rerun alone on both
    # sides: rarer than the reruns can show, so not the integration's fault, but listed
    base, ours = _b_fails_with_the_integration()
    rechecked = {"t::b": {"baseline_failures": 0, "kernelrt_failures": 0, "runs": 60}}
    verdict = peer_tests.compare(base, ours, ["t::b"], rechecked)
    assert verdict["ok"] and verdict["broken"] == [] and verdict["required_not_passing"] == []
    assert verdict["not_reproduced"] == rechecked and verdict["flaky_in_peer"] == {}


def test_required_tests_must_pass_with_the_integration():
    base = _run({"t::req": "passed"})
    ours = _run({"t::req": "skipped"})
    assert peer_tests.compare(base, ours, ["t::req"])["required_not_passing"] == ["t::req"]
    assert peer_tests.compare(base, ours, ["t::other"])["required_not_run"] == ["t::other"]
