"""Compiled-kernel cache: cold compile against warm load, per kernel, and the warm start.

For each kernel (the test kernels and every built-in kernel the demo uses, with the
signatures it uses): the cold compile into an empty cache and the warm load from a filled
one, both of a fresh definition (``Kernel.copy()``: nothing in memory, as in a new
process). Target: warm load at most 10% of the cold compile. Then the total warm start of
the demo's kernels in a fresh process (target under 0.5 s on the 2-core VM), beside the
cold start of the same process.
"""

import json
import os
import subprocess
import sys

import pytest
from benchlib import QUICK, tag

from kernelrt.compiler import ensure_cpu
from kernelrt.disk_cache import DiskCache

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.dirname(HERE))  # the repository, for tests.support.kernels


def _kernels():
    from tests.support.kernels import axpy, block_sums, index_grid_2d, shifted_sqrt

    specs = [
        (axpy, "float64[::1], float64[::1], float64[::1], float64"),
        (shifted_sqrt, shifted_sqrt.raw_signature),
        (index_grid_2d, "float64[:, ::1], float64[:, ::1]"),
        (block_sums, "float64[::1], float64[::1]"),
    ]
    try:
        from kernelrt.kernels import warm_specs

        specs += warm_specs()["cpu"]
    except ImportError:  # the kernel library is not installed
        pass
    return specs


KERNELS = _kernels()
IDS = [f"{k.name}-{i}" for i, (k, _) in enumerate(KERNELS)]


@pytest.fixture(scope="module")
def warm_cache(tmp_path_factory):
    cache = DiskCache(tmp_path_factory.mktemp("warm"))
    for kernel, sig in KERNELS:
        ensure_cpu(kernel.copy(), kernel.parse_signature(sig), cache)
    return cache


@pytest.mark.parametrize("kernel,sig", KERNELS, ids=IDS)
def test_cold_compile(benchmark, kernel, sig, tmp_path_factory):
    def setup():
        return (kernel.copy(), DiskCache(tmp_path_factory.mktemp("cold"))), {}

    def compile_cold(k, cache):
        assert ensure_cpu(k, k.parse_signature(sig), cache) == "compiled"

    tag(benchmark, f"cache-{kernel.name}", "peer", peer="cold compile", kernel=kernel.qualname, signature=sig)
    benchmark.pedantic(compile_cold, setup=setup, rounds=1 if QUICK else 3)


@pytest.mark.parametrize("kernel,sig", KERNELS, ids=IDS)
def test_warm_load(benchmark, kernel, sig, warm_cache):
    def setup():
        return (kernel.copy(),), {}

    def load_warm(k):
        assert ensure_cpu(k, k.parse_signature(sig), warm_cache) == "disk"

    tag(benchmark, f"cache-{kernel.name}", "kernelrt", kernel=kernel.qualname, signature=sig)
    benchmark.pedantic(load_warm, setup=setup, rounds=3 if QUICK else 10)


STARTUP = r"""
import json, sys, time
t0 = time.perf_counter()
from kernelrt.kernels import warm_specs
from kernelrt.compiler import ensure_cpu
from kernelrt.disk_cache import disk_cache_for
specs = warm_specs()["cpu"]
cache = disk_cache_for()
t1 = time.perf_counter()
statuses = [ensure_cpu(k, k.parse_signature(s), cache) for k, s in specs]
t2 = time.perf_counter()
print(json.dumps({"import_s": t1 - t0, "kernels_s": t2 - t1, "statuses": statuses}))
"""


def _start(cache_dir):
    env = dict(os.environ, KERNELRT_CACHE_DIR=str(cache_dir))
    res = subprocess.run([sys.executable, "-c", STARTUP], capture_output=True, text=True, env=env)
    assert res.returncode == 0, res.stderr
    return json.loads(res.stdout.strip().splitlines()[-1])


def test_demo_kernels_start(benchmark, tmp_path):
    try:
        from kernelrt.kernels import warm_specs

        warm_specs()
    except ImportError:
        pytest.skip("the kernel library is not installed")
    cold = _start(tmp_path)  # fills the cache
    assert set(cold["statuses"]) == {"compiled"}
    runs = []

    def warm_start():
        runs.append(_start(tmp_path))

    tag(benchmark, "cache-demo-start", "kernelrt")  # before the run: pytest-benchmark reads the group then
    benchmark.pedantic(warm_start, rounds=1 if QUICK else 3)
    best = min(runs, key=lambda r: r["kernels_s"])
    assert set(best["statuses"]) == {"disk"}
    benchmark.extra_info.update(cold_kernels_s=cold["kernels_s"], warm_kernels_s=best["kernels_s"],
                                import_s=best["import_s"], n_kernels=len(best["statuses"]))
