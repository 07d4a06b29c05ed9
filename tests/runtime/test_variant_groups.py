"""The probe's SFAP variant groups time each case at the batch compute_sfaps launches, too.

The 2026-11-27 H200 sitting saw the tiled columns kernel win kernel-only on a whole unit and
lose end to end, where the pipeline launches smaller batches; the groups now add a row at
``run.pipeline_batch(nf)`` fibres wherever that is smaller, and its setup holds that many.
"""

from __future__ import annotations

from pathlib import Path
from types import SimpleNamespace

ROOT = Path(__file__).resolve().parents[2]


def _groups(monkeypatch):
    monkeypatch.syspath_prepend(str(ROOT / "bench"))
    import gpu_variant_groups

    return gpu_variant_groups


def test_gpu_cases_add_the_drivers_batch(monkeypatch):
    groups = _groups(monkeypatch)
    from kernelrt.kernels.sfap.run import pipeline_batch

    cases = groups._sfap_cases(SimpleNamespace(kind="gpu", gpu=True, quick=False))
    batches = {name: batch for name, *_, batch in cases}
    assert batches["myogen-436x4-dz0.01"] is None
    assert batches[f"myogen-436x4-dz0.01 batch{pipeline_batch(436)}"] == pipeline_batch(436) == 109
    for name, nf, *_, batch in cases:  # a batch row only where the driver's batch is smaller
        assert batch is None or (batch == pipeline_batch(nf) < nf and name.endswith(f"batch{batch}"))
    assert batches["sfap-50x25-dz0.5 batch32"] == 32  # 50 fibres: batches of 32 and 18 (32 at least)
    on_cpu = groups._sfap_cases(SimpleNamespace(kind="cpu", gpu=False, quick=True))
    assert all(batch is None for *_, batch in on_cpu)  # the CPU runs its own batches: no extra rows


def test_a_batch_setup_holds_that_many_fibres(monkeypatch, cpu):
    groups = _groups(monkeypatch)
    probe = SimpleNamespace(backend=cpu, kind="cpu", gpu=False, quick=True)
    whole = groups._sfap_setup(probe, 8, 3, 0.5, 30.0, None)
    part = groups._sfap_setup(probe, 8, 3, 0.5, 30.0, 3)
    assert part.nf == 3 and whole.nf > 3
    assert part.nt == whole.nt  # the unit's time grid, whatever the batch
