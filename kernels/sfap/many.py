"""Pools of motor units: ``compute_sfaps`` for many units, here or on a Dask cluster.

A muscle has tens to hundreds of motor units, each an independent ``compute_sfaps``
call; a study repeats them for many muscles and electrode configurations. ``compute_many``
runs them through kernels/tasks.py: in this process one after another (each on all cores),
or with ``client=`` as Dask tasks on the workers' own backends. On a device in this
process the units are pipelined instead: the host checks and plans unit u+1 while the
device runs unit u, then copies unit u's results back (or keeps them there, with
``keep_on_device``) and queues unit u+1. The results are bitwise those of calling
``compute_sfaps`` unit by unit: each output sample is one sum in a fixed order, whatever
the thread count or batch size (docs/sfap.md).
"""

from __future__ import annotations

import collections.abc
import dataclasses
import functools

import kernelrt

from ..conventions import progress_callback
from ..tasks import TaskFailure, check_client, check_errors, raise_failures, run_tasks
from .compute import compute_sfaps, finish_call, plan_call, start_call
from .inputs import check_inputs
from .run import plan_ahead

__all__ = ["UNIT_ARGUMENTS", "compute_many"]


# compute_sfaps' keyword arguments but those that place the results (a test checks the list).
UNIT_ARGUMENTS = ("fibre_xy", "fibre_diameter", "fibre_cv", "nmj_z", "fibre_ends", "nerve_paths", "branch_cv",
                  "electrodes", "dt", "dz", "min_radial_dist", "keep_raw")


def compute_many(units, *, client=None, backend=None, units_per_task: int = 1, muap_only: bool = False,
                 keep_on_device: bool = False, errors: str = "raise", progress=False, **common) -> list:
    """``compute_sfaps(**common, **unit)`` for every unit, in input order.

    Args:
        units: a sequence of mappings of ``compute_sfaps`` arguments, one per motor unit
            (typically its fibres: fibre_xy, fibre_diameter, fibre_cv, nmj_z, fibre_ends,
            nerve_paths); a unit's entries override ``common``.
        client: a ``distributed.Client``: the units become Dask tasks on its workers, each
            on its worker's backend (``kernelrt.distributed``); None runs them here.
        backend: the backend of a run without a client (None: "auto").
        units_per_task: consecutive units per task: more amortise Dask's per-task cost for
            small units.
        muap_only: return only ``t`` and ``muap`` (``sfaps`` and ``sfaps_raw`` None): the
            SFAPs are not sent back from the workers, nor copied from a device.
        keep_on_device: without a client on a CUDA backend, return device arrays: every
            unit's results stay on the device and no unit waits for the one before.
        errors: "raise" raises ``FailedTasks`` once every unit has run if any failed (its
            ``results`` hold the others); "keep" returns ``TaskFailure`` in their place.
        progress: True draws a bar over tasks (on a terminal or in Jupyter); a callable gets 1 per task.
        **common: ``compute_sfaps`` arguments shared by all units (electrodes, dt, dz,
            branch_cv, min_radial_dist, keep_raw).

    Returns:
        A list of ``SfapResult`` (host arrays unless ``keep_on_device``), one per unit.

    Raises:
        TypeError, ValueError: an argument or a unit is malformed, raised before any unit
            runs; the message names the unit (``units[3]: ...``).
        FailedTasks: with ``errors="raise"``, after the others completed, if a unit failed.
    """
    check_client(client, backend)
    check_errors(errors)
    if isinstance(units_per_task, bool) or not isinstance(units_per_task, int) or units_per_task < 1:
        raise ValueError(f"units_per_task must be a positive int (got {units_per_task!r})")
    if isinstance(units, collections.abc.Mapping) or not isinstance(units, collections.abc.Iterable):
        raise TypeError(f"units must be a sequence of mappings, one per motor unit (got {type(units).__name__})")
    if client is not None and keep_on_device:
        raise ValueError("keep_on_device applies to a run without a client: workers send their results back "
                         f"(got keep_on_device={keep_on_device!r} with a client)")
    calls = [_call(unit, common, i) for i, unit in enumerate(units)]
    if not calls:
        return []
    batches = [list(range(i, min(i + units_per_task, len(calls)))) for i in range(0, len(calls), units_per_task)]
    if client is None:
        be = kernelrt.get_backend(backend)
        if be.name != "cpu":
            with progress_callback(progress, len(batches), "kernelrt motor units", "motor unit") as tick:
                results = pipelined(calls, be, muap_only=muap_only, keep_on_device=keep_on_device,
                                    done=_ticks(batches, tick))
            return raise_failures(results, errors, what="motor units")
        backend = be
    names = [f"units[{b[0]}]" if len(b) == 1 else f"units[{b[0]}:{b[-1] + 1}]" for b in batches]
    done = run_tasks(functools.partial(_batch, muap_only), [[(i, calls[i]) for i in b] for b in batches], names,
                     backend=backend, client=client, progress=progress, what="motor units")
    results = []
    for batch, outcome in zip(batches, done):
        if isinstance(outcome, TaskFailure):  # the task itself failed (e.g. its workers died): each unit
            outcome = [TaskFailure(f"units[{i}]", outcome.error) for i in batch]
        results.extend(outcome)
    return raise_failures(results, errors, what="motor units")


def _call(unit, common: dict, i: int) -> dict:
    """One unit's ``compute_sfaps`` keyword arguments, checked (errors name the unit)."""
    if not isinstance(unit, collections.abc.Mapping):
        raise TypeError(f"units[{i}] must be a mapping of compute_sfaps arguments (got {type(unit).__name__})")
    kwargs = {**common, **unit}
    unknown = sorted(set(kwargs) - set(UNIT_ARGUMENTS))
    if unknown:
        raise TypeError(f"units[{i}]: unexpected arguments {unknown}; compute_many takes {UNIT_ARGUMENTS}")
    checked = {name: kwargs.get(name) for name in UNIT_ARGUMENTS if name != "keep_raw"}
    try:
        check_inputs(**checked)
    except (TypeError, ValueError) as e:
        raise type(e)(f"units[{i}]: {e}") from None
    return kwargs


def _ticks(batches: list, tick):
    """``done(i)`` for ``pipelined``: ``tick(1)`` once the last unit of a task's batch is done."""
    last = {b[-1] for b in batches}
    return None if tick is None else (lambda i: tick(1) if i in last else None)


def pipelined(calls: list, backend, *, muap_only: bool = False, keep_on_device: bool = False, done=None) -> list:
    """Each ``calls[i]``'s ``SfapResult`` (or ``TaskFailure``), with unit i+1 planned on the
    host while unit i runs on ``backend``'s device.

    Per unit: plan it (checks, ``plan_unit`` and its first batch's tables), copy back the
    unit before it (waiting for it; not with ``keep_on_device``), queue it. The copy is the
    only wait, so the device goes from one unit to the next with the host's planning
    already done. ``done(i)`` is called as unit i completes.
    """
    results: list = [None] * len(calls)
    running = None  # (i, started) of the unit queued on the device

    def settle(i, result):
        results[i] = result
        if done is not None:
            done(i)

    def finish(i, started):
        try:
            result = finish_call(backend, started, keep_on_device=keep_on_device, muap_only=muap_only)
        except Exception as e:  # noqa: BLE001 - an error the device reports at the copy is this unit's
            result = TaskFailure(f"units[{i}]", e)
        settle(i, result)

    for i, kwargs in enumerate(calls):
        keep_raw = False if muap_only else kwargs.get("keep_raw", True)
        try:  # host work, overlapping the device's work on the unit before
            unit, ze = plan_call(**{name: kwargs.get(name) for name in UNIT_ARGUMENTS if name != "keep_raw"})
            planned = plan_ahead(unit)
        except Exception as e:  # noqa: BLE001 - reported for this unit, the others go on
            unit, error = None, e
        if running is not None:
            finish(*running)
            running = None
        if unit is None:
            settle(i, TaskFailure(f"units[{i}]", error))
            continue
        try:
            running = (i, start_call(backend, unit, ze, keep_raw=keep_raw, planned=planned))
        except Exception as e:  # noqa: BLE001
            settle(i, TaskFailure(f"units[{i}]", e))
    if running is not None:
        finish(*running)
    return results


def _batch(muap_only: bool, calls: list, backend) -> list:
    """Each ``(i, kwargs)``'s ``SfapResult``, or its ``TaskFailure``: one unit fails alone."""
    out = []
    for i, kwargs in calls:
        if muap_only:
            kwargs = dict(kwargs, keep_raw=False)
        try:
            result = compute_sfaps(backend=backend, **kwargs)
        except Exception as e:  # noqa: BLE001 - reported for this unit, the batch goes on
            out.append(TaskFailure(f"units[{i}]", e))
            continue
        out.append(dataclasses.replace(result, sfaps=None, sfaps_raw=None) if muap_only else result)
    return out
