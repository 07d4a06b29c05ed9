"""The disk cache across processes: hits, edits in other modules, globals, races."""

import json
import multiprocessing as mp
import os
import subprocess
import sys
import textwrap

import numpy as np
import pytest

HELPERS = """
import kernelrt

@kernelrt.device
def scale(v):
    return v * {factor}
"""

KERNEL_MODULE = """
import kernelrt
import helpers_mod
from helpers_mod import scale

OFFSET = {offset}

@kernelrt.kernel
def transform(i, out, x):
    if i < out.shape[0]:
        out[i] = scale(x[i]) + OFFSET

@kernelrt.kernel
def via_attribute(i, out, x):
    if i < out.shape[0]:
        out[i] = helpers_mod.scale(x[i])
"""

RUNNER = """
import json, sys
import numpy as np
sys.path.insert(0, sys.argv[1])
import kernelrt, kernel_mod
b = kernelrt.CPUBackend()
x = np.arange(8.0)
out = np.zeros(8); b.launch_kernel(kernel_mod.transform, 1, 8, out, x)
out2 = np.zeros(8); b.launch_kernel(kernel_mod.via_attribute, 1, 8, out2, x)
print(json.dumps({"out": out.tolist(), "out2": out2.tolist(), "stats": b.cache.stats.as_dict()}))
"""


def _write_modules(path, factor, offset):
    (path / "helpers_mod.py").write_text(HELPERS.format(factor=factor))
    (path / "kernel_mod.py").write_text(KERNEL_MODULE.format(offset=offset))


def _run(path, cache_dir):
    env = dict(os.environ, KERNELRT_CACHE_DIR=str(cache_dir))
    res = subprocess.run([sys.executable, "-c", RUNNER, str(path)], capture_output=True, text=True, env=env)
    assert res.returncode == 0, res.stderr
    return json.loads(res.stdout.strip().splitlines()[-1])


def test_hit_in_second_process_and_recompile_on_edits(tmp_path, cache_dir):
    src = tmp_path / "src"
    src.mkdir()
    x = np.arange(8.0)
    _write_modules(src, factor=2.0, offset=1.0)

    first = _run(src, cache_dir)
    assert first["stats"]["misses"] == 2 and first["stats"]["hits"] == 0
    assert first["out"] == (2 * x + 1).tolist()  # exact here and below: small integers, JSON keeps repr

    second = _run(src, cache_dir)
    assert second["stats"]["misses"] == 0 and second["stats"]["hits"] == 2
    assert second["out"] == first["out"] and second["out2"] == first["out2"]

    # Edit the device function in the other module: both kernels recompile.
    _write_modules(src, factor=3.0, offset=1.0)
    third = _run(src, cache_dir)
    assert third["stats"]["misses"] == 2 and third["stats"]["hits"] == 0
    assert third["out"] == (3 * x + 1).tolist() and third["out2"] == (3 * x).tolist()

    # Change a global constant the kernel reads: that kernel recompiles, the other hits.
    _write_modules(src, factor=3.0, offset=5.0)
    fourth = _run(src, cache_dir)
    assert fourth["stats"]["misses"] == 1 and fourth["stats"]["hits"] == 1
    assert fourth["out"] == (3 * x + 5).tolist()


RACE_KERNELS = """
import kernelrt

@kernelrt.kernel
def plus_one(i, out, x):
    if i < out.shape[0]:
        out[i] = x[i] + 1.0

@kernelrt.kernel
def times_three(i, out, x):
    if i < out.shape[0]:
        out[i] = x[i] * 3.0
"""


def _race_worker(src, root, rounds, barrier, queue):
    # Each round uses a fresh cache directory and fresh Kernel objects (so the in-memory
    # cache cannot answer): all workers miss together and must compile each kernel once.
    sys.path.insert(0, src)
    import importlib

    import kernelrt

    mod = importlib.import_module("race_kernels")
    x = np.arange(64.0)
    for r in range(rounds):
        backend = kernelrt.CPUBackend(cache_dir=os.path.join(root, f"round{r}"))
        kernels = [kernelrt.kernel(k.py_func) for k in (mod.plus_one, mod.times_three)]
        barrier.wait()
        statuses, correct = [], True
        for k, expect in zip(kernels, (x + 1.0, x * 3.0)):
            statuses.append(backend.compile_kernel(k, "float64[::1], float64[::1]").status)
            out = np.zeros(64)
            backend.launch_kernel(k, 1, 64, out, x)
            correct &= bool(np.array_equal(out, expect))  # exact: small integers
        queue.put((r, statuses, correct))


@pytest.mark.slow
def test_eight_processes_race_on_an_empty_cache(tmp_path):
    src = tmp_path / "src"
    src.mkdir()
    (src / "race_kernels.py").write_text(textwrap.dedent(RACE_KERNELS))
    workers, rounds = 8, 50
    ctx = mp.get_context("spawn")
    barrier, queue = ctx.Barrier(workers), ctx.Queue()
    procs = [
        ctx.Process(target=_race_worker, args=(str(src), str(tmp_path / "cache"), rounds, barrier, queue))
        for _ in range(workers)
    ]
    for p in procs:
        p.start()
    results = [queue.get(timeout=600) for _ in range(workers * rounds)]
    for p in procs:
        p.join(timeout=60)
        assert p.exitcode == 0
    assert all(correct for _, _, correct in results), "a process ran the wrong kernel"
    for r in range(rounds):
        statuses = [s for rr, s, _ in results if rr == r]
        for k in range(2):
            compiled = [s[k] for s in statuses].count("compiled")
            loaded = [s[k] for s in statuses].count("disk")
            assert compiled == 1 and loaded == workers - 1, (r, k, statuses)
