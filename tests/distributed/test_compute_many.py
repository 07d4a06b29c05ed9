"""compute_many: motor units here and on a Dask cluster are bitwise compute_sfaps unit by unit.

Bitwise, not to a tolerance: every SFAP sample is one sum in a fixed order whatever the
thread count or fibre batch (docs/sfap.md), and the workers run one numba thread per task
where this process runs two, so equality here is that claim checked across processes.
"""

from __future__ import annotations

import inspect
import os
import signal
import threading
import time

import numpy as np
import pytest
from kernelrt.kernels.sfap import compute_many, compute_sfaps
from kernelrt.kernels.sfap.many import UNIT_ARGUMENTS
from kernelrt.kernels.sfap.reference import synthetic_motor_unit
from kernelrt.kernels.tasks import FailedTasks, TaskFailure

from kernelrt.distributed import worker_info

COMMON_NAMES = ("electrodes", "dt", "dz", "branch_cv")


def _pool(n: int, fibres: int = 40, dz: float = 0.1):
    units = [synthetic_motor_unit(fibres + 15 * s, 6, dz, seed=s) for s in range(n)]
    common = {k: units[0][k] for k in COMMON_NAMES}
    return [{k: v for k, v in u.items() if k not in common} for u in units], common


UNITS, COMMON = _pool(7)


@pytest.fixture(scope="module")
def serial():
    return [compute_sfaps(**COMMON, **u) for u in UNITS]


def _assert_bitwise(results, serial, muap_only=False):
    assert len(results) == len(serial)
    for got, want in zip(results, serial):
        np.testing.assert_array_equal(got.t, want.t)
        np.testing.assert_array_equal(got.muap, want.muap)
        if muap_only:
            assert got.sfaps is None and got.sfaps_raw is None
        else:
            np.testing.assert_array_equal(got.sfaps, want.sfaps)
            np.testing.assert_array_equal(got.sfaps_raw, want.sfaps_raw)


def test_a_local_pool_is_compute_sfaps_unit_by_unit(serial):
    _assert_bitwise(compute_many(UNITS, **COMMON), serial)


@pytest.mark.parametrize("units_per_task", [1, 3])  # 3: batches of 3, 3 and 1 units
def test_a_pool_on_the_cluster_is_bitwise_the_serial_loop(cluster, serial, units_per_task):
    _assert_bitwise(compute_many(UNITS, client=cluster.client, units_per_task=units_per_task, **COMMON), serial)


def test_muap_only_sends_back_the_muaps_alone(cluster, serial):
    _assert_bitwise(compute_many(UNITS, client=cluster.client, muap_only=True, **COMMON), serial, muap_only=True)


def test_a_units_own_entries_override_the_common_ones(serial):
    units = [dict(UNITS[0]), dict(UNITS[1], dz=0.2)]
    got = compute_many(units, **COMMON)
    _assert_bitwise(got[:1], serial[:1])
    assert got[1].sfaps.shape[0] != serial[1].sfaps.shape[0] or not np.array_equal(got[1].muap, serial[1].muap)
    np.testing.assert_array_equal(got[1].muap, compute_sfaps(**dict(COMMON, dz=0.2), **UNITS[1]).muap)


@pytest.mark.parametrize("units, words", [
    (UNITS[:2] + [dict(UNITS[2], fibre_cv=-UNITS[2]["fibre_cv"])], r"units\[2\]: fibre_cv must be > 0"),
    (UNITS[:1] + [dict(UNITS[1], colour="red")], r"units\[1\]: unexpected arguments \['colour'\]"),
    (UNITS[:1] + [3], r"units\[1\] must be a mapping"),
    ({"fibre_xy": 1}, "units must be a sequence of mappings"),
    ([{k: v for k, v in UNITS[0].items() if k != "nmj_z"}], r"units\[0\]: nmj_z is required"),
])
def test_a_bad_unit_is_refused_before_any_unit_runs(units, words, monkeypatch):
    ran = []
    monkeypatch.setattr("kernelrt.kernels.sfap.many.compute_sfaps", lambda **kw: ran.append(1))
    with pytest.raises((TypeError, ValueError), match=words):
        compute_many(units, **COMMON)
    assert ran == []


@pytest.mark.parametrize("kwargs, words", [
    ({"units_per_task": 0}, "units_per_task must be a positive int"),
    ({"client": "tcp://127.0.0.1:8786"}, "client must be a distributed.Client"),
    ({"errors": "skip"}, "errors must be one of"),
])
def test_bad_options_are_refused(kwargs, words):
    with pytest.raises((TypeError, ValueError), match=words):
        compute_many(UNITS[:1], **COMMON, **kwargs)


def test_a_unit_that_fails_while_running_fails_alone(monkeypatch, serial):
    real = compute_sfaps

    def failing_on_the_second(**kw):
        if kw["fibre_xy"] is UNITS[1]["fibre_xy"]:
            raise MemoryError("no room")
        return real(**kw)

    monkeypatch.setattr("kernelrt.kernels.sfap.many.compute_sfaps", failing_on_the_second)
    kept = compute_many(UNITS[:3], errors="keep", **COMMON)
    assert isinstance(kept[1], TaskFailure) and kept[1].message == "units[1]: MemoryError: no room"
    _assert_bitwise([kept[0], kept[2]], [serial[0], serial[2]])
    with pytest.raises(FailedTasks, match=r"1 of 3 motor units failed:\n  units\[1\]: MemoryError"):
        compute_many(UNITS[:3], **COMMON)
    # in batches too: one entry per unit, and the unit beside it in its batch completes
    batched = compute_many(UNITS[:5], units_per_task=2, errors="keep", **COMMON)
    assert len(batched) == 5 and isinstance(batched[1], TaskFailure) and batched[1].name == "units[1]"
    _assert_bitwise([batched[i] for i in (0, 2, 3, 4)], [serial[i] for i in (0, 2, 3, 4)])
    with pytest.raises(FailedTasks, match=r"^1 of 5 motor units failed") as caught:
        compute_many(UNITS[:5], units_per_task=2, **COMMON)
    assert len(caught.value.results) == 5


def test_unit_arguments_are_compute_sfaps_own():
    placing = {"backend", "keep_on_device", "progress"}
    assert set(UNIT_ARGUMENTS) == set(inspect.signature(compute_sfaps).parameters) - placing


@pytest.mark.slow
def test_a_worker_killed_mid_run_loses_nothing(cluster):
    """SIGKILL one worker process while it runs a unit: Dask reruns its tasks elsewhere."""
    units, common = _pool(6, fibres=150, dz=0.02)  # ~1 s per unit on one thread
    serial = [compute_sfaps(**common, **u) for u in units]
    client = cluster.client
    pids = client.run(os.getpid)
    outcome = {}
    run = threading.Thread(target=lambda: outcome.setdefault("results", compute_many(units, client=client,
                                                                                     **common)))
    run.start()
    victim, in_flight = None, []
    deadline = time.monotonic() + 60
    while victim is None and time.monotonic() < deadline:
        for address, keys in client.processing().items():
            if keys and address in pids:
                victim, in_flight = address, list(keys)
                break
        time.sleep(0.05)
    assert victim is not None, "no task started within 60 s"
    os.kill(pids[victim], signal.SIGKILL)
    run.join(timeout=300)
    assert not run.is_alive()
    _assert_bitwise(outcome["results"], serial)
    assert in_flight  # the killed worker held these when it died; they completed elsewhere
    client.wait_for_workers(2, timeout=120)  # the nanny restarts it, with the plugin
    info = worker_info(client)
    assert len(info) == 2 and all(w.get("backend") == "cpu" for w in info.values())
    assert pids[victim] not in {w["pid"] for w in info.values()}  # a new process took its place
