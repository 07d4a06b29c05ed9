"""SFAP host/device pipelining on the CUDA path, under Numba's CUDA simulator.

The order of the steps is what can be checked without a GPU: batch b+1 is planned after
batch b's kernels are queued and before its own copies, nothing is copied after the last
kernel is queued (so a call returns without waiting), and ``compute_many`` queues unit
after unit with the results bitwise those of ``compute_sfaps`` unit by unit. Whether the
host work really overlaps the device's needs a GPU (bench/gpu_probe.py).
"""

from __future__ import annotations

import numpy as np
from kernelrt.kernels.sfap import compute_many, compute_sfaps
from kernelrt.kernels.sfap import run as sfap_run

from kernelrt.arguments import is_device_array
from tests.simulator.test_sfap_sim import tiny_case

KEYS = ("sfaps_raw", "sfaps", "muap")


def test_batch_b_plus_1_is_planned_while_batch_b_runs(gpu, monkeypatch):
    kwargs = tiny_case(nmj=(1.0, 4.7, 2.2))
    whole = compute_sfaps(**kwargs, backend=gpu)  # 3 fibres: one batch (PIPELINE_MIN_FIBRES)
    events = []
    real_plan, real_launch, real_copy = sfap_run.plan_tables, gpu.launch_kernel, gpu.to_device
    monkeypatch.setattr(sfap_run, "plan_tables", lambda unit, f0, f1: (events.append(("plan", f0, f1)),
                                                                     real_plan(unit, f0, f1))[1])
    monkeypatch.setattr(gpu, "launch_kernel", lambda k, *a, **kw: (events.append((k.name,)), real_launch(k, *a, **kw)))
    monkeypatch.setattr(gpu, "to_device", lambda a, *r, **kw: (events.append(("copy",)), real_copy(a, *r, **kw))[1])
    monkeypatch.setattr(sfap_run, "PIPELINE_MIN_FIBRES", 1)
    monkeypatch.setattr(sfap_run, "PIPELINE_BATCHES", 3)
    batched = compute_sfaps(**kwargs, backend=gpu)
    steps = [e for e in events if e[0] != "copy"]
    assert steps == [("plan", 0, 1), ("sfap_response",), ("sfap_columns",), ("plan", 1, 2), ("sfap_response",),
                     ("sfap_columns",), ("plan", 2, 3), ("sfap_response",), ("sfap_columns",), ("sfap_delay_staged",),
                     ("sfap_muap",)]
    last_columns = max(i for i, e in enumerate(events) if e == ("sfap_columns",))
    assert ("copy",) not in events[last_columns:]  # the delay's tables went first: nothing waits
    for key in KEYS:
        # exact: every output element is one thread's sum in ascending j, whatever the batch
        assert np.array_equal(getattr(batched, key), getattr(whole, key)), key


def test_compute_many_pipelines_units_on_the_device(gpu):
    units = [tiny_case(seed=s) for s in range(2)]
    serial = [compute_sfaps(**u, backend=gpu) for u in units]
    piped = compute_many(units, backend=gpu)
    kept = compute_many(units, backend=gpu, keep_on_device=True, muap_only=True)
    for got, on_device, want in zip(piped, kept, serial):
        assert got.backend == "cuda" and isinstance(got.sfaps, np.ndarray)
        assert is_device_array(on_device.muap) and on_device.sfaps is None
        for key in KEYS:  # exact: the same kernels on the same tables
            assert np.array_equal(getattr(got, key), getattr(want, key)), key
        assert np.array_equal(gpu.to_host(on_device.muap), want.muap)
