"""Many independent jobs (subjects, motor units), here or on a Dask cluster.

``run_tasks`` is what ``cohort_spectra`` and ``compute_many`` share: one call of a
task function per item, results handed over in input order, a failing item recorded as a
``TaskFailure`` without stopping the others. Without a client the items run one after
another in this process, each on all cores (or the GPU) through the given backend; with
a ``distributed.Client`` each is a Dask task, run on the backend its worker's
``KernelrtPlugin`` made (``kernelrt.distributed``, imported only then), so a script moves
from a laptop to a cluster by passing a client.
"""

from __future__ import annotations

import functools
import traceback
import uuid
from dataclasses import dataclass

import kernelrt

from .conventions import progress_callback

__all__ = ["ERRORS", "FailedTasks", "TaskFailure", "check_client", "check_errors", "run_tasks"]

ERRORS = ("raise", "keep")


@dataclass(frozen=True)
class TaskFailure:
    """An item whose task raised; it stands in the item's place among the results.

    Attributes:
        name: the item's name (a subject's, or ``units[i]``).
        error: the exception the task raised (its own type, traceback attached on a client).
    """

    name: str
    error: BaseException

    @property
    def message(self) -> str:
        """One line: the item's name, the exception's type and its message."""
        return f"{self.name}: {type(self.error).__name__}: {self.error}"

    def traceback(self) -> str:
        """The task's traceback as text (where it raised, on the worker), for a log or a report."""
        return "".join(traceback.format_exception(self.error))

    def __repr__(self):
        return f"<TaskFailure {self.message}>"


class FailedTasks(RuntimeError):
    """Some items failed; the others completed.

    Attributes:
        results: every item's result in input order, a ``TaskFailure`` for each that failed.
        failures: the ``TaskFailure`` objects alone.
    """

    def __init__(self, results: list, what: str = "items"):
        self.results = results
        self.failures = [r for r in results if isinstance(r, TaskFailure)]
        lines = "\n".join(f"  {f.message}" for f in self.failures)
        super().__init__(f"{len(self.failures)} of {len(results)} {what} failed:\n{lines}")


def check_errors(errors: str) -> None:
    if errors not in ERRORS:
        raise ValueError(f"errors must be one of {', '.join(map(repr, ERRORS))} (got {errors!r})")


def check_client(client, backend=None) -> None:
    """Refuse, before any work, a ``client`` that is not a ``distributed.Client``, or one
    given with a ``backend`` (each worker uses its own: ``KernelrtPlugin(backend=...)``)."""
    if client is None:
        return
    if not all(hasattr(client, a) for a in ("map", "run_on_scheduler", "register_plugin")):
        raise TypeError(f"client must be a distributed.Client or None (got {type(client).__name__})")
    if backend is not None:
        raise ValueError(
            "backend applies to a run without a client: on a cluster each worker uses the backend its "
            f"KernelrtPlugin made (register KernelrtPlugin(backend=...) to choose it) (got backend={backend!r})"
        )


def raise_failures(results: list, errors: str, failed=None, what: str = "items") -> list:
    """``results`` as they are with ``errors="keep"``; with "raise", ``failed`` if any item failed."""
    if errors == "raise" and any(isinstance(r, TaskFailure) for r in results):
        raise (failed or FailedTasks)(results, what)
    return results


def run_tasks(task, items: list, names, *, backend=None, client=None, on_done=None, progress=False,
              what: str = "items") -> list:
    """``task(item, backend)`` for every item; the results, or ``TaskFailure``, in input order.

    Args:
        task: a module-level function (workers import it by name), ``task(item, backend)``.
        items: the items, each sent to one task. With a client the list is emptied once the
            tasks are submitted, so that each item (and data scattered for it) is released
            when its task completes.
        names: one name per item, for failures.
        backend: the backend of a local run (None: "auto"); on a client each worker's own.
        client: a ``distributed.Client``, or None to run here.
        on_done: ``on_done(i, value)`` is called as item i completes, and its return value
            is kept in place of ``value`` (to write a result to disk and keep a summary).
        progress: True draws a bar (on a terminal or in Jupyter); a callable is called with 1 per item.
        what: what the items are, for the bar and the dashboard's task names.
    """
    results: list = [None] * len(items)
    with progress_callback(progress, len(items), f"kernelrt {what}", what.rstrip("s")) as tick:
        def done(i, value, error):
            if error is None:
                results[i] = on_done(i, value) if on_done is not None else value
            else:
                results[i] = TaskFailure(names[i], error)
            if tick is not None:
                tick(1)

        if client is None:
            be = kernelrt.get_backend(backend)
            for i, item in enumerate(items):
                try:
                    value, error = task(item, be), None
                except Exception as e:  # noqa: BLE001 - one bad item fails alone, as on a cluster
                    value, error = None, e
                done(i, value, error)
        else:
            from kernelrt.distributed import (  # needs dask: only with a client
                ensure_plugin,
                map_ordered,
            )

            ensure_plugin(client)
            # One task group on the dashboard per call ("kernelrt-subjects"): Dask groups keys
            # by their words, dropping the hex run id and the index.
            prefix = f"kernelrt-{what.replace(' ', '-')}-{uuid.uuid4().hex[:8]}"
            keys = [f"{prefix}-{i}" for i in range(len(items))]
            map_ordered(client, functools.partial(_on_worker, task), items, keys=keys, on_done=done)
    return results


def _on_worker(task, item):
    from kernelrt.distributed import worker_backend

    return task(item, worker_backend())
