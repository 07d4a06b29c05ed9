"""Pipelining on the host side: planning per batch and across units, results unchanged.

The device paths themselves run under the CUDA simulator (tests/simulator/
test_sfap_pipeline_sim.py); here the same code runs on the CPU backend, which is enough
to check the order of the steps, the failures and that the results are bitwise those of
``compute_sfaps`` unit by unit.
"""

from __future__ import annotations

import numpy as np
import pytest
from kernelrt.kernels.sfap import compute_many, compute_sfaps
from kernelrt.kernels.sfap import many as sfap_many
from kernelrt.kernels.sfap import prep as sfap_prep
from kernelrt.kernels.sfap import run as sfap_run
from kernelrt.kernels.sfap.inputs import check_inputs
from kernelrt.kernels.tasks import TaskFailure

from tests.support.sfap_cases import make_case

UNITS = [make_case(nf=3 + u, ne=2, dz=0.1, length=12.0, seed=u) for u in range(3)]


def _same(got, want, muap_only=False):
    # exact: each output sample is one sum in a fixed order whatever the batch (docs/sfap.md)
    assert np.array_equal(got.t, want.t) and np.array_equal(got.muap, want.muap)
    if muap_only:
        assert got.sfaps is None and got.sfaps_raw is None
    else:
        assert np.array_equal(got.sfaps, want.sfaps) and np.array_equal(got.sfaps_raw, want.sfaps_raw)


def test_pipeline_batch_splits_a_call_for_overlap():
    assert sfap_run.pipeline_batch(10) == sfap_run.PIPELINE_MIN_FIBRES
    assert sfap_run.pipeline_batch(4357) == -(-4357 // sfap_run.PIPELINE_BATCHES)


def test_planned_ahead_tables_are_sliced_or_extended(cpu):
    """A call given its first batch's tables (as compute_many plans them) equals one without."""
    kwargs = make_case(nf=5, ne=2, dz=0.1, length=12.0, seed=8)
    inputs = check_inputs(**kwargs, min_radial_dist=None)
    unit, ze = sfap_prep.plan_unit(**inputs), inputs["electrodes"][:, 2].copy()
    whole = sfap_run.run_plan(cpu, unit, ze)
    for planned in ((0, sfap_prep.plan_tables(unit, 0, 2)), (0, sfap_prep.plan_tables(unit))):
        got = sfap_run.run_plan(cpu, unit, ze, planned=planned)
        for a, b in zip(got, whole):
            assert np.array_equal(a, b)  # exact: the tables are the same bytes, the kernels the same


def test_units_are_planned_while_the_one_before_runs(cpu, monkeypatch):
    events = []
    for name in ("plan_call", "start_call", "finish_call"):
        real = getattr(sfap_many, name)

        def spy(*args, _real=real, _name=name, **kwargs):
            events.append(_name)
            return _real(*args, **kwargs)

        monkeypatch.setattr(sfap_many, name, spy)
    calls = [sfap_many._call(u, {}, i) for i, u in enumerate(UNITS)]
    results = sfap_many.pipelined(calls, cpu)
    # unit u+1 is planned before unit u is finished (copied back), and queued after it
    assert events == ["plan_call", "start_call", "plan_call", "finish_call", "start_call", "plan_call",
                      "finish_call", "start_call", "finish_call"]
    for got, unit in zip(results, UNITS):
        _same(got, compute_sfaps(**unit, backend=cpu))


def test_a_failing_unit_fails_alone_in_the_pipeline(cpu, monkeypatch):
    real = sfap_many.start_call

    def failing_on_the_second(backend, unit, *args, **kwargs):
        if unit.vt.shape[0] == 4:
            raise MemoryError("no room")
        return real(backend, unit, *args, **kwargs)

    monkeypatch.setattr(sfap_many, "start_call", failing_on_the_second)
    done = []
    calls = [sfap_many._call(u, {}, i) for i, u in enumerate(UNITS)]
    results = sfap_many.pipelined(calls, cpu, muap_only=True, done=done.append)
    assert isinstance(results[1], TaskFailure) and results[1].message == "units[1]: MemoryError: no room"
    assert done == [0, 1, 2]
    for i in (0, 2):
        _same(results[i], compute_sfaps(**UNITS[i], backend=cpu), muap_only=True)


def test_a_unit_that_fails_to_plan_fails_alone(cpu, monkeypatch):
    real = sfap_many.plan_call

    def failing(**kwargs):
        if kwargs["fibre_xy"] is UNITS[0]["fibre_xy"]:
            raise RuntimeError("internal error: planning")
        return real(**kwargs)

    monkeypatch.setattr(sfap_many, "plan_call", failing)
    results = sfap_many.pipelined([sfap_many._call(u, {}, i) for i, u in enumerate(UNITS[:2])], cpu)
    assert isinstance(results[0], TaskFailure) and "planning" in results[0].message
    _same(results[1], compute_sfaps(**UNITS[1], backend=cpu))


def test_keep_on_device_needs_no_client():
    with pytest.raises(ValueError, match="keep_on_device applies to a run without a client"):
        compute_many(UNITS[:1], client=_FakeClient(), keep_on_device=True)


class _FakeClient:
    """Passes check_client (the refusal comes before any task is submitted)."""

    def map(self, *a, **k):
        raise AssertionError("no task may be submitted")

    run_on_scheduler = register_plugin = map


def test_upload_batch_takes_a_whole_plan_or_a_range_of_tables(cpu):
    inputs = check_inputs(**UNITS[2], min_radial_dist=None)
    unit = sfap_prep.plan_unit(**inputs)
    old_style = sfap_run.upload_batch(cpu, sfap_prep.plan_fibres(**inputs), 1, 4)
    new_style = sfap_run.upload_batch(cpu, unit, 1, 4, sfap_prep.plan_tables(unit, 1, 4))
    assert old_style.keys() == new_style.keys()
    for key, value in old_style.items():
        assert np.array_equal(value, new_style[key]), key  # exact: the same rows of the same tables
