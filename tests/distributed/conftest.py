"""A Dask ``LocalCluster`` of two worker processes on the CPU, shared by the layer's tests.

The workers get a ``KernelrtPlugin`` with a fresh kernel cache directory, so the cache's
counters right after start-up say how many kernels were compiled and how many loaded
across the two processes (``test_plugin.py``).
"""

from __future__ import annotations

import logging
from types import SimpleNamespace

import pytest

distributed = pytest.importorskip("distributed", reason="the distributed extra is not installed")


@pytest.fixture(scope="session")
def cluster(tmp_path_factory):
    from kernelrt.disk_cache import DiskCache
    from kernelrt.distributed import KernelrtPlugin, worker_info

    cache = tmp_path_factory.mktemp("cluster-kernel-cache")
    with distributed.LocalCluster(n_workers=2, threads_per_worker=1, processes=True, dashboard_address=None,
                                  silence_logs=logging.CRITICAL) as local, distributed.Client(local) as client:
        client.register_plugin(KernelrtPlugin(cache_dir=cache))
        started = SimpleNamespace(totals=DiskCache(cache).totals(), info=worker_info(client))
        yield SimpleNamespace(client=client, cache=cache, started=started)
