"""kernelrt on a Dask cluster: one backend per worker, for the worker's lifetime.

Past one machine kernelrt runs on Dask (``dask.distributed``; ``dask-cuda``'s
``LocalCUDACluster`` on multi-GPU nodes, ``dask-jobqueue`` on HPC), not on a scheduler of
its own. This module is the runtime's side of it:

* ``KernelrtPlugin``, a worker plugin. On each worker it makes the worker's backend (its
  GPU, which dask-cuda selects through ``CUDA_VISIBLE_DEVICES``, else the CPU) and loads
  the kernels from the disk cache before the first task, off the worker's event loop.
  Workers that share a cache directory compile each kernel once between them: the
  cache's per-key lock makes the others wait and load.
* ``worker_backend()``, the backend inside a task, with the task thread's numba thread
  count set.
* ``ensure_plugin`` and ``map_ordered``, which the kernel library's cohort functions use.

Importing this module imports ``distributed`` (``pip install 'kernelrt[distributed]'``);
importing ``kernelrt`` does not.
"""

from __future__ import annotations

import asyncio
import importlib
import os
import re
import socket
import time
from pathlib import Path

from . import config
from .backend import Backend
from .compiler import load_kernels
from .cpu_threads import prepare_threading_layer
from .cuda_backend import CUDABackend
from .disk_cache import resolve_cache_dir
from .selection import (
    KINDS,
    fallback_notice,
    fallback_reason,
    get_backend,
    notify_fallback,
    suppress_fallback_notice,
)

try:
    from distributed import WorkerPlugin, as_completed, default_client, get_worker
except ImportError as e:  # pragma: no cover - depends on the installation
    raise ImportError(
        "kernelrt.distributed needs Dask's distributed scheduler: pip install 'kernelrt[distributed]'"
    ) from e

__all__ = ["PLUGIN_NAME", "KernelrtPlugin", "ensure_plugin", "map_ordered", "worker_backend", "worker_info"]

PLUGIN_NAME = "kernelrt"
# The kernel families whose kernels a worker loads by default: named, not imported, so
# the runtime does not depend on the kernel library; each has a ``warm_specs()``.
DEFAULT_WARM = ("kernelrt.kernels.sfap", "kernelrt.kernels.laplacian")
# Filesystems on which SQLite's WAL journal (the cache's index) and flock are not
# coherent across hosts.
NETWORK_FILESYSTEMS = ("nfs", "nfs4", "cifs", "smb3", "smbfs", "lustre", "gpfs", "beegfs", "ceph",
                       "glusterfs", "fuse.glusterfs", "fuse.sshfs", "panfs", "afs", "9p", "afpfs", "webdav")


class KernelrtPlugin(WorkerPlugin):
    """Gives each Dask worker one kernelrt backend for its lifetime.

    Register it once per cluster (``client.register_plugin(KernelrtPlugin())``; the kernel
    library's ``cohort_spectra`` and ``compute_many`` register one with the defaults when
    the cluster has none). Workers that join later get it too. Workers issue no
    ``CPUFallbackWarning``: ``worker_info(client)`` shows each one's backend, and
    ``ensure_plugin`` says once in the client when they fell back to the CPU.

    Args:
        backend: "auto" (the worker's GPU if CUDA is available, else the CPU), "cuda" or
            "cpu". Under dask-cuda each worker sees one GPU, as device 0.
        threads_per_task: numba threads each task's CPU kernels use. Dask's convention is
            one core per worker thread (its nanny also sets BLAS to one thread), hence 1;
            a worker with ``nthreads=1`` on an N-core host may use N.
        cache_dir: the kernel cache directory of every backend on the worker; None keeps
            the worker's own (``KERNELRT_CACHE_DIR``, else the user cache). ``~`` and
            ``$VARS`` are expanded on the worker (``"$TMPDIR/kernelrt"``: the job's own
            scratch). Keep it on a disk local to the host (on a network filesystem the
            cache's SQLite index and locks are not safe across hosts: the plugin logs a
            warning there) and never in a directory other users can write (the cache
            refuses one and compiles in memory).
        warm: the kernels to load (or compile) at start-up: module names whose
            ``warm_specs()`` lists them, callables returning such a dict, or None.

    Raises:
        TypeError, ValueError: an argument is malformed (before anything is sent).
    """

    name = PLUGIN_NAME  # Dask keys plugins by name: worker_backend() finds it under this one
    idempotent = False  # registering a new plugin replaces the old one (new settings)

    def __init__(self, backend: str = "auto", *, threads_per_task: int = 1, cache_dir=None,
                 warm=DEFAULT_WARM):
        if isinstance(backend, Backend) or not isinstance(backend, str) or backend not in KINDS:
            error = ValueError if isinstance(backend, str) else TypeError
            raise error(
                f"backend must be one of {', '.join(map(repr, KINDS))}: each worker makes its own "
                f"(got {backend!r})"
            )
        if isinstance(threads_per_task, bool) or not isinstance(threads_per_task, int) or threads_per_task < 1:
            raise ValueError(f"threads_per_task must be a positive int (got {threads_per_task!r})")
        if cache_dir is not None and not isinstance(cache_dir, (str, os.PathLike)):
            raise TypeError(f"cache_dir must be a path or None (got {type(cache_dir).__name__})")
        warm = () if warm is None else (warm,) if isinstance(warm, str) or callable(warm) else tuple(warm)
        for source in warm:
            if not (isinstance(source, str) or callable(source)):
                raise TypeError(f"warm entries must be module names or callables (got {source!r})")
        self.kind = backend
        self.threads_per_task = threads_per_task
        self.cache_dir = None if cache_dir is None else os.fspath(cache_dir)
        self.warm = warm
        self.backend: Backend | None = None
        self.error: Exception | None = None
        self.info: dict = {}

    def __repr__(self):
        return (f"KernelrtPlugin(backend={self.kind!r}, threads_per_task={self.threads_per_task}, "
                f"cache_dir={self.cache_dir!r})")

    async def setup(self, worker) -> None:
        """Dask's hook on each worker: ``start`` in a thread, then a check of the threads.

        The worker issues no ``CPUFallbackWarning`` (one per worker process would flood the
        logs): ``ensure_plugin`` says once in the client which backend the workers use, and
        ``worker_info`` reports each one's (``"cpu_fallback"``: why it is on the CPU). A
        worker in the client's own process (``LocalCluster(processes=False)``) is the
        client's: its process gives the notice once, as any other.
        """
        if not _client_in_this_process():
            suppress_fallback_notice()
        # Loading (or compiling) kernels takes seconds: off the event loop, so the worker
        # keeps answering the scheduler's heartbeats meanwhile.
        address = getattr(worker, "address", None)
        await asyncio.get_running_loop().run_in_executor(None, self.start, address)
        nthreads = getattr(getattr(worker, "state", None), "nthreads", 1)
        if self.backend.name == "cuda" and nthreads > 1:
            config.logger.warning(
                "kernelrt worker %s: %d threads share one GPU backend, so their tasks run on the GPU at once; "
                "give GPU workers one thread (dask-cuda's default)", address, nthreads,
            )

    def start(self, address=None) -> dict:
        """Make the backend and load the kernels (what ``setup`` runs, in a thread).

        A failure is kept (``error``, and in ``info``) as well as raised: Dask only logs a
        plugin's failure on a worker that joins later, and ``worker_backend()`` then
        raises it in every task instead of saying the plugin is missing.
        """
        self.error = None
        where = {"address": address, "host": socket.gethostname(), "pid": os.getpid()}
        try:
            self.info = {**where, **self._start()}
        except Exception as e:
            self.error = e
            self.info = {**where, "error": f"{type(e).__name__}: {e}"}
            raise
        config.logger.info("kernelrt worker %s: %s", address, self.info)
        return self.info

    def _start(self) -> dict:
        t0 = time.perf_counter()
        prepare_threading_layer()  # before numba picks one (worker_backend's set_num_threads would)
        if self.cache_dir is not None:
            config.use_cache_dir(_worker_path(self.cache_dir))
        cache_dir = resolve_cache_dir()
        network = network_filesystem(cache_dir)
        if network:
            config.logger.warning(
                "kernelrt: the kernel cache %s is on a %s filesystem, where its SQLite index and locks are "
                "not safe across hosts; give each host a local one (KernelrtPlugin(cache_dir=...))",
                cache_dir, network,
            )
        self.backend = get_backend(self.kind)
        host = get_backend("cpu")  # host-side kernels (mesh patterns) run here whatever the backend
        counts = {"compiled": 0, "disk": 0, "memory": 0}
        for source in self.warm:
            specs = _specs(source)
            for be in (host,) if self.backend.name == "cpu" else (host, self.backend):
                for _, status, _ in load_kernels(specs.get(be.name, []),
                                                 lambda kernel, sig, be=be: be.compile_kernel(kernel, sig).status):
                    counts[status] = counts.get(status, 0) + 1
        fell_back = self.kind == "auto" and self.backend.name == "cpu"
        return {
            "backend": self.backend.name,
            "cpu_fallback": fallback_reason(CUDABackend.availability()) if fell_back else None,
            "device": self.backend.device_name,
            "device_id": self.backend.device_id,
            "cuda_visible_devices": config.visible_cuda_devices(),
            "threads_per_task": self.threads_per_task,
            "cache_dir": str(cache_dir),
            "cache_filesystem_warning": network,
            "kernels": counts,
            "start_seconds": time.perf_counter() - t0,
        }

    def teardown(self, worker) -> None:
        """Dask's hook when the worker closes: the backend is released."""
        self.backend = None


def _client_in_this_process() -> bool:
    try:
        default_client()
    except ValueError:  # "No clients found": a worker process of its own
        return False
    return True


def _worker_path(path: str) -> str:
    """``path`` with ``~`` and ``$VARS`` expanded in this (the worker's) environment.

    A variable the worker lacks would leave a literal ``$TMPDIR`` directory in the working
    directory, so it is an error naming the variable instead.
    """
    expanded = os.path.expanduser(os.path.expandvars(path))
    unset = re.search(r"\$\{?(\w+)", expanded)
    if unset:
        raise ValueError(
            f"KernelrtPlugin(cache_dir={path!r}): the environment variable {unset.group(1)} is not set "
            f"on this worker; set it there or give a literal path"
        )
    return expanded


def _specs(source) -> dict:
    if callable(source):
        return source()
    return importlib.import_module(source).warm_specs()


def network_filesystem(path, mounts=None) -> str | None:
    """The type of the network filesystem ``path`` is on, or None (local, or unknown).

    ``mounts``: the mount table, by default psutil's (Linux, macOS, Windows), or the path
    of a file in ``/proc/self/mounts`` format.
    """
    path = Path(path).resolve()
    best, kind, remote = "", None, False
    for point, fstype, opts in _mount_table(mounts):
        if (path == Path(point) or Path(point) in path.parents) and len(point) > len(best):
            best, kind, remote = point, fstype, "remote" in opts.split(",")
    if kind in NETWORK_FILESYSTEMS:
        return kind
    # Windows: a mapped network drive reports the server's filesystem (NTFS) and "remote"
    return f"network drive ({kind})" if remote else None


def _mount_table(mounts) -> list[tuple[str, str, str]]:
    """(mount point, filesystem type, options) of every mount; empty when unknown."""
    if mounts is not None:
        try:
            lines = Path(mounts).read_text().splitlines()
        except OSError:
            return []
        fields = [line.split() for line in lines]
        return [(f[1].replace("\\040", " "), f[2], f[3] if len(f) > 3 else "") for f in fields if len(f) >= 3]
    import psutil  # lazy: 30 ms, for a worker's start only

    try:
        return [(p.mountpoint, p.fstype, p.opts) for p in psutil.disk_partitions(all=True)]
    except (OSError, RuntimeError):  # a mount table psutil cannot read: say nothing
        return []


def worker_backend() -> Backend:
    """The backend of the worker running the current task (its ``KernelrtPlugin``'s).

    Also sets the calling thread's numba thread count to the plugin's ``threads_per_task``.

    Raises:
        RuntimeError: not inside a task on a Dask worker, or the worker has no KernelrtPlugin.
    """
    try:
        worker = get_worker()
    except ValueError:
        raise RuntimeError("worker_backend() must be called inside a task running on a Dask worker") from None
    plugin = worker.plugins.get(PLUGIN_NAME)
    if isinstance(plugin, KernelrtPlugin) and plugin.error is not None:
        raise RuntimeError(f"KernelrtPlugin failed to start on worker {worker.address}: {plugin.info['error']}") \
            from plugin.error
    if not isinstance(plugin, KernelrtPlugin) or plugin.backend is None:
        raise RuntimeError(
            f"worker {worker.address} has no KernelrtPlugin: client.register_plugin(KernelrtPlugin()) first"
        )
    prepare_threading_layer()
    import numba  # lazy: importing kernelrt loads no numba

    numba.set_num_threads(min(plugin.threads_per_task, numba.config.NUMBA_NUM_THREADS))
    return plugin.backend


def ensure_plugin(client, **options) -> bool:
    """Register ``KernelrtPlugin(**options)`` unless the cluster already has one.

    When it registers one and workers fell back to the CPU (``backend="auto"`` without a
    usable GPU), the client issues the ``CPUFallbackWarning`` the workers keep to themselves:
    once per process, with how many workers and why.

    Returns:
        True if it registered one (and every current worker has set it up), False if the
        cluster's own plugin was kept.
    """
    registered = client.run_on_scheduler(_has_plugin)
    if registered:
        return False
    client.register_plugin(KernelrtPlugin(**options), name=PLUGIN_NAME)
    workers = worker_info(client)
    reasons = [w["cpu_fallback"] for w in workers.values() if w.get("cpu_fallback")]
    if reasons:  # the workers keep quiet: the client says it, once per process
        notify_fallback(fallback_notice(reasons[0], f"{len(reasons)} of {len(workers)} Dask workers are"))
    return True


def _has_plugin(dask_scheduler=None) -> bool:
    return PLUGIN_NAME in dask_scheduler.worker_plugins


def worker_info(client) -> dict:
    """``{worker address: what its plugin set up}`` (backend, device, cache, kernels loaded)."""
    return client.run(_describe)


def _describe(dask_worker=None) -> dict:
    plugin = dask_worker.plugins.get(PLUGIN_NAME)
    return dict(plugin.info) if isinstance(plugin, KernelrtPlugin) else {}


def map_ordered(client, fn, items: list, *, keys, on_done) -> None:
    """Run ``fn(item)`` for each item on ``client``; call ``on_done(i, value, error)`` as each ends.

    ``items`` is emptied once the tasks are submitted: an item (and the data scattered for
    it) is then held only by its task, and released when that completes.

    ``error`` is the task's exception (its own type), or None. Results are fetched one at a
    time as tasks complete and then released, so the caller holds only those it keeps. A
    task whose worker dies is run again elsewhere by Dask; one that kills every worker it
    lands on (``distributed.scheduler.allowed-failures``) ends with ``KilledWorker``. On an
    exception in ``on_done`` (or Ctrl-C) the remaining tasks are cancelled.
    """
    futures = client.map(fn, items, key=list(keys), pure=False)
    items.clear()  # the futures hold what the tasks need, and release it as each completes
    position = {f.key: i for i, f in enumerate(futures)}
    pending = {f.key: f for f in futures}
    del futures
    try:
        for future in as_completed(list(pending.values())):
            pending.pop(future.key)
            try:
                value, error = future.result(), None
            except Exception as e:  # noqa: BLE001 - the task's own exception, or KilledWorker
                value, error = None, e
            future.release()  # the scheduler may forget it; the worker frees it
            on_done(position[future.key], value, error)
            del value
    finally:
        if pending:
            client.cancel(list(pending.values()))
