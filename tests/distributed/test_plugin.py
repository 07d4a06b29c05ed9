"""kernelrt.distributed: one backend per worker, kernels compiled once per cluster."""

from __future__ import annotations

import pytest

pytest.importorskip("distributed", reason="the distributed extra is not installed")

from kernelrt.kernels import warm_specs

from kernelrt.distributed import (
    DEFAULT_WARM,
    KernelrtPlugin,
    ensure_plugin,
    map_ordered,
    network_filesystem,
    worker_backend,
    worker_info,
)


def _distinct_cpu_kernels() -> int:
    return len({(kernel, sig) for kernel, sig in warm_specs()["cpu"]})


def test_the_default_warm_list_is_every_kernel_family():
    import importlib

    from kernelrt import kernels

    specs = [importlib.import_module(m).warm_specs()["cpu"] for m in DEFAULT_WARM]
    assert sum(len(s) for s in specs) == len(kernels.warm_specs()["cpu"])


@pytest.mark.parametrize("kwargs, error, words", [
    ({"backend": "gpu"}, ValueError, "backend must be one of"),
    ({"threads_per_task": 0}, ValueError, "threads_per_task"),
    ({"threads_per_task": True}, ValueError, "threads_per_task"),
    ({"cache_dir": 3}, TypeError, "cache_dir"),
    ({"warm": [3]}, TypeError, "warm entries"),
])
def test_bad_plugin_arguments_are_refused_before_anything_is_sent(kwargs, error, words):
    with pytest.raises(error, match=words):
        KernelrtPlugin(**kwargs)


def test_a_backend_object_is_refused_each_worker_makes_its_own():
    from kernelrt import CPUBackend

    with pytest.raises(TypeError, match="each worker makes its own"):
        KernelrtPlugin(CPUBackend())


def test_each_worker_has_its_own_backend_and_the_shared_cache(cluster):
    info = cluster.started.info
    assert len(info) == 2
    assert len({w["pid"] for w in info.values()}) == 2  # two processes
    for w in info.values():
        assert w["backend"] == "cpu" and w["threads_per_task"] == 1
        assert w["cache_dir"].startswith(str(cluster.cache))
        assert w["cache_filesystem_warning"] is None


def test_each_kernel_is_compiled_once_across_the_workers(cluster):
    # Two workers loaded the same kernels at start-up from one fresh cache directory:
    # the per-key lock makes one compile each kernel while the other waits and loads it.
    n = _distinct_cpu_kernels()
    totals = cluster.started.totals
    assert (totals.misses, totals.hits) == (n, n)
    counts = [w["kernels"] for w in cluster.started.info.values()]
    assert sum(c["compiled"] for c in counts) == n
    assert all(c["compiled"] + c["disk"] == n for c in counts)


def _task_view():
    import numba

    return worker_backend().name, numba.get_num_threads()


def test_worker_backend_inside_a_task_sets_the_task_threads(cluster):
    assert cluster.client.submit(_task_view, pure=False).result() == ("cpu", 1)


def test_worker_backend_outside_a_worker_says_where_it_works():
    with pytest.raises(RuntimeError, match="inside a task running on a Dask worker"):
        worker_backend()


def test_the_clusters_own_plugin_is_kept(cluster):
    assert ensure_plugin(cluster.client) is False
    assert all(w["cache_dir"].startswith(str(cluster.cache))
               for w in cluster.client.run(lambda dask_worker: dask_worker.plugins["kernelrt"].info).values())


def _fail_on_two(x):
    if x == 2:
        raise KeyError("two")
    return x * 10


def test_map_ordered_hands_over_every_result_and_the_tasks_own_errors(cluster):
    seen = {}
    map_ordered(cluster.client, _fail_on_two, [0, 1, 2, 3], keys=[f"t-{i}-{id(seen)}" for i in range(4)],
                on_done=lambda i, value, error: seen.__setitem__(i, (value, error)))
    assert sorted(seen) == [0, 1, 2, 3]
    assert [seen[i][0] for i in (0, 1, 3)] == [0, 10, 30]
    assert isinstance(seen[2][1], KeyError) and seen[2][0] is None


def test_a_cache_on_a_network_filesystem_is_recognised(tmp_path):
    mounts = tmp_path / "mounts"
    mounts.write_text(
        "/dev/sda1 / ext4 rw 0 0\n"
        f"server:/export {tmp_path / 'shared'} nfs4 rw 0 0\n"
        f"/dev/sdb1 {tmp_path / 'shared' / 'local'} xfs rw 0 0\n"
    )
    assert network_filesystem(tmp_path / "shared" / "kcache", mounts) == "nfs4"
    assert network_filesystem(tmp_path / "shared" / "local" / "kcache", mounts) is None  # the deeper mount
    assert network_filesystem(tmp_path / "elsewhere", mounts) is None
    assert network_filesystem(tmp_path, tmp_path / "no-such-file") is None


def test_a_plugin_that_failed_to_start_says_why_in_every_task():
    # A worker that joins after registration (a Slurm job that starts late) sets the plugin up
    # alone, and Dask only logs its failure; the tasks must not say the plugin is missing.
    import distributed

    with distributed.LocalCluster(n_workers=0, processes=False, dashboard_address=":0") as local, \
            distributed.Client(local) as client:
        client.register_plugin(KernelrtPlugin("cuda"))  # no GPU here: CudaUnavailableError on start
        local.scale(1)
        client.wait_for_workers(1, timeout=60)
        with pytest.raises(RuntimeError, match="KernelrtPlugin failed to start on worker .*CudaUnavailableError"):
            client.submit(_task_view, pure=False).result()
        (info,) = worker_info(client).values()
        assert info["error"].startswith("CudaUnavailableError")


def test_the_cache_dir_is_expanded_on_the_worker(tmp_path, monkeypatch):
    # "$TMPDIR/kernelrt" names the job's own scratch on each node: the worker's value, not
    # the client's, and an unset variable is an error, not a literal "$TMPDIR" directory.
    monkeypatch.setenv("KERNELRT_CACHE_DIR", str(tmp_path / "before"))
    monkeypatch.setenv("KRT_TEST_SCRATCH", str(tmp_path / "scratch"))
    plugin = KernelrtPlugin("cpu", cache_dir="$KRT_TEST_SCRATCH/kernelrt", warm=None)
    info = plugin.start()
    assert info["cache_dir"].startswith(str(tmp_path / "scratch" / "kernelrt"))

    monkeypatch.delenv("KRT_TEST_SCRATCH")
    with pytest.raises(ValueError, match="KRT_TEST_SCRATCH is not set on this worker"):
        plugin.start()
    assert "error" in plugin.info
