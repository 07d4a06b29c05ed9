"""A worker killed mid-cohort loses no in-memory subject (issue 25, item 3).

In-memory meshes used to reach the workers by ``client.scatter``: data without lineage, so
when one worker of two was killed, the subjects whose arrays it held ended in
``FutureCancelledError`` (3-4 of 8). They now travel inside tasks that return them, which
the scheduler can run again, so every subject completes and equals the run without a
client. Subjects: eight jittered level-3 icospheres (642 vertices, the dense route) sharing
one face array, k = 16 (a spectral gap of the sphere: see tests/distributed/test_cohort.py).

Tolerance: eigenvalues to 1e-10 of λ_max, HKS/WKS to 1e-8 of their largest entry, as
tests/distributed/test_cohort.py: the workers run one BLAS/LAPACK and numba thread and this
process several, so the dense ``eigh`` rounds in another order (measured here: eigenvalues
within ~1e-14 relative); the assembly itself is bitwise (docs/laplacian.md).
"""

from __future__ import annotations

import logging
import os
import signal
import threading
import time
from types import SimpleNamespace

import numpy as np
import pytest
from kernelrt.kernels.laplacian import SubjectSpectrum, cohort_spectra, noisy_icosphere
from kernelrt.kernels.laplacian import cohort as cohort_module

distributed = pytest.importorskip("distributed", reason="the distributed extra is not installed")

K = 16


def _meshes() -> dict:
    faces = noisy_icosphere(3, 0.1, seed=0)[1]
    return {f"sub-{s}": (noisy_icosphere(3, 0.1, seed=s)[0], faces) for s in range(8)}


MESHES = _meshes()


@pytest.fixture(scope="module")
def cluster(tmp_path_factory):
    """Two worker processes under nannies (a killed one is restarted), as tests/distributed's,
    but warming no kernels: each worker compiles the few a subject needs when it first runs one."""
    from kernelrt.distributed import KernelrtPlugin

    cache = tmp_path_factory.mktemp("fault-kernel-cache")
    with distributed.LocalCluster(n_workers=2, threads_per_worker=1, processes=True, dashboard_address=None,
                                  silence_logs=logging.CRITICAL) as local, distributed.Client(local) as client:
        client.register_plugin(KernelrtPlugin(cache_dir=cache, warm=None))
        yield SimpleNamespace(client=client)


def _kill_a_worker_running_a_subject(client, pids: dict, deadline_s: float = 120.0) -> list:
    """SIGKILL the first worker seen running a subject task; the subject keys it held."""
    deadline = time.monotonic() + deadline_s
    while time.monotonic() < deadline:
        for address, keys in client.processing().items():
            subjects = [k for k in keys if "subjects" in str(k)]
            if subjects and address in pids:
                os.kill(pids[address], signal.SIGKILL)
                return subjects
        time.sleep(0.02)
    pytest.fail(f"no subject task started within {deadline_s:.0f} s")


@pytest.mark.slow
def test_a_worker_killed_mid_cohort_loses_no_in_memory_subject(cluster):
    here = cohort_spectra(MESHES, K)  # the run without a client
    client = cluster.client
    client.wait_for_workers(2, timeout=120)
    pids = client.run(os.getpid)
    outcome = {}

    def run():
        try:
            outcome["results"] = cohort_spectra(MESHES, K, client=client, errors="keep")
        except BaseException as e:  # noqa: BLE001 - reported below, in the test's thread
            outcome["error"] = e

    runner = threading.Thread(target=run)
    runner.start()
    in_flight = _kill_a_worker_running_a_subject(client, pids)
    runner.join(timeout=300)
    assert not runner.is_alive()
    assert "error" not in outcome, outcome.get("error")
    results = outcome["results"]
    failed = [r.message for r in results if not isinstance(r, SubjectSpectrum)]
    assert failed == []  # before the fix: FutureCancelledError for the killed worker's subjects
    assert in_flight
    for got, want in zip(results, here):
        assert got.name == want.name and got.route == want.route == "dense"
        assert np.max(np.abs(got.evals - want.evals)) <= 1e-10 * want.evals[-1]
        assert np.max(np.abs(got.hks - want.hks)) <= 1e-8 * np.abs(want.hks).max()
        assert np.max(np.abs(got.wks - want.wks)) <= 1e-8 * np.abs(want.wks).max()
    client.wait_for_workers(2, timeout=120)  # the nanny restarts the killed worker


class _RecordingClient:
    """Just enough of a client for ``_send_arrays``: records what it is asked to submit."""

    def __init__(self):
        self.submitted = []

    def submit(self, fn, *args, key=None, pure=True):
        self.submitted.append((fn, args, key, pure))
        return SimpleNamespace(key=key)


def test_in_memory_arrays_travel_as_tasks_a_shared_face_array_once():
    v, f = noisy_icosphere(1, 0.1, seed=0)
    jobs = [{"name": "a", "vertices": v, "faces": f}, {"name": "b", "vertices": v + 1, "faces": f.copy()},
            {"name": "c", "path": "/data/c.ply"}]
    client = _RecordingClient()  # no scatter: data without lineage is not an option
    sent = cohort_module._send_arrays(client, jobs)
    kinds = sorted(key.split("-")[1] for _, _, key, _ in client.submitted)
    assert kinds == ["faces", "vertices", "vertices"]  # equal face arrays (by content) sent once
    assert all(fn is cohort_module._array and not pure for fn, _, _, pure in client.submitted)
    assert sent[0]["faces"] is sent[1]["faces"] and sent[2] == {"name": "c", "path": "/data/c.ply"}
    assert sent[0]["vertices"].key != sent[1]["vertices"].key
