"""End to end: MyoGen's ``simulate_muaps`` as its users run it, with and without kernelrt.

The case is MyoGen's documented intramuscular set-up: a default ``Muscle`` (radius
6.91 mm, 30 mm long, 350 fibres/mm², 100 motor units; built once, ~2 min, and cached
under ``$KERNELRT_PEER_CACHE``, default ~/.cache/kernelrt/peers), every 10th unit
simulated (10 units of 13-1,658 fibres, 5,000 fibres in all), a 4-contact needle at
mid-muscle, fs = 10,240 Hz and MyoGen's default dz = 0.01 mm; ``n_jobs`` = this machine's
cores. Two groups, each with its own MyoGen run, so each ratio comes from one run:

* ``myogen-e2e-workers``: MyoGen 0.12 ``IntramuscularEMG.simulate_muaps(n_jobs=cores)``
  (peer) against the same call after ``kernelrt.integrations.myogen.enable()``, where
  MyoGen's joblib workers compute with kernelrt (the one-line swap);
* ``myogen-e2e-one-call``: the peer again against
  ``kernelrt.integrations.myogen.simulate_muaps(emg)``: every unit in one process, all
  cores (the GPU where there is one).

Every entry runs in a fresh MyoGen interpreter (bench/myogen_peer.py; ``KERNELRT_MYOGEN_PYTHON``,
else /tmp/myogen312/bin/python; setup in tools/peer_tests.sh), after an untimed dz = 0.5
run of one unit that loads kernelrt's kernels from the disk cache. extra_info:
``peak_bytes`` (the process's peak RSS above its start plus each worker process's peak
RSS, read from /proc after the run; ``worker_peak_bytes`` the workers' part), ``muap_max_rel_err`` (channel-relative error of every MUAP against
the peer run of the group), ``calls``/``fallbacks`` (units kernelrt computed, and handed back to MyoGen's own
code, in the main process) and ``worker_calls``/``worker_fallbacks`` (the same in the
workers: the proof that the swap reached them), ``fibres``.

Quick (``--quick``): every 25th unit (4 units) at dz = 0.1.
Run: ``kernelrt bench myogen [--quick] [--plot]``. Skips (with the reason) where no
MyoGen interpreter is found. Never asserts on time.
"""

from __future__ import annotations

import os
from pathlib import Path

import numpy as np
import pytest
from bench_sfap import MyoGenPeer, _myogen_python
from benchlib import QUICK, tag

N_UNITS = 100
EVERY, DZ = (25, 0.1) if QUICK else (10, 0.01)
CACHE = os.environ.get("KERNELRT_PEER_CACHE", str(Path("~/.cache/kernelrt/peers").expanduser()))
CORES = os.cpu_count() or 1
ENTRIES = [  # (group, mode, role)
    ("myogen-e2e-workers", "myogen", "peer"),
    ("myogen-e2e-workers", "myogen+kernelrt", "kernelrt"),
    ("myogen-e2e-one-call", "myogen", "peer"),
    ("myogen-e2e-one-call", "kernelrt", "kernelrt"),
]
PEER_NAME = f"myogen 0.12.0 simulate_muaps(n_jobs={CORES})"
_peer_muaps: dict[str, list] = {}


class EmgPeer(MyoGenPeer):
    """bench/myogen_peer.py holding one IntramuscularEMG; MyoGen picks its own device (use_gpu=None)."""

    def __init__(self, python: str):
        super().__init__(python, gpu=True)  # gpu=True: MYOGEN_DISABLE_GPU is not set, as for users
        self.fibres = self._ask(emg={"n_units": N_UNITS, "every": EVERY, "dz": DZ, "cache": CACHE})["fibres"]

    def warm(self, mode: str) -> None:
        """Load kernelrt's kernels (disk cache) with a tiny run, so the timed run is a user's second one."""
        if mode != "myogen":
            self._ask(warm=True)

    def simulate(self, mode: str) -> dict:
        self.last = self._ask(simulate=mode, n_jobs=CORES)
        return self.last

    def muaps(self) -> list:
        path = os.path.join(self._tmp.name, "muaps.npz")
        self._ask(save=path)
        saved = np.load(path)
        return [saved[f"muap_{i}"] for i in range(len(saved.files))]


def _max_rel_err(ref: list, got: list) -> float:
    errs = [float(np.abs(a - b).max() / np.abs(a).max()) for a, b in zip(ref, got, strict=True) if np.abs(a).max() > 0]
    return max(errs, default=0.0)


@pytest.fixture(scope="module")
def python():
    found = _myogen_python("import myogen, kernelrt.integrations.myogen, psutil")
    if found is None:
        pytest.skip("no Python 3.12 with myogen==0.12.0 and kernelrt (set KERNELRT_MYOGEN_PYTHON; tools/peer_tests.sh)")
    return found


@pytest.mark.parametrize("group, mode, role", ENTRIES, ids=[f"{g}-{m}" for g, m, _ in ENTRIES])
def test_simulate_muaps(benchmark, python, group, mode, role):
    peer = EmgPeer(python)
    # the group first: pytest-benchmark files the run under the group set before it
    tag(benchmark, group, role, PEER_NAME, figure=group, x=sum(peer.fibres), mode=mode,
        x_label=f"fibres in {len(peer.fibres)} motor units, dz {DZ:g} mm", fibres=peer.fibres)
    try:
        peer.warm(mode)
        benchmark.pedantic(lambda: peer.simulate(mode)["seconds"], rounds=1, iterations=1)
        muaps = peer.muaps()
        if mode == "myogen+kernelrt":
            workers = peer._ask(worker_stats=CORES)
            peer.last.update(worker_calls=workers["worker_calls"], worker_fallbacks=workers["worker_fallbacks"])
    finally:
        peer.close()
    if role == "peer":
        _peer_muaps[group] = muaps
    info = benchmark.extra_info
    info.update(peak_bytes=peer.last["peak_bytes"], worker_peak_bytes=peer.last["worker_peak_bytes"],
                seconds=peer.last["seconds"])
    for key in ("calls", "fallbacks", "worker_calls", "worker_fallbacks"):
        if key in peer.last and mode != "myogen":
            info[key] = peer.last[key]
    if role != "peer" and group in _peer_muaps:
        info["muap_max_rel_err"] = _max_rel_err(_peer_muaps[group], muaps)
