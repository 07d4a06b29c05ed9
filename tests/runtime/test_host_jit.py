"""``kernelrt.njit``: numba functions whose machine code goes through kernelrt's checked disk cache.

The eigensolver's CPU helpers (supernodal Cholesky, basis products, pre-solve scans) were
compiled with numba's own ``cache=True``, which keeps unpickled files beside the source or in
``NUMBA_CACHE_DIR`` without kernelrt's owner, mode and SHA-256 checks, and whose key misses
an edit to a callee's constant in another module. Each test runs the functions in fresh
processes, as a user's next session would.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap

import pytest

import kernelrt
from kernelrt.disk_cache import DiskCache

CALLER = """
import numba
import kernelrt
from scaling import twice

@kernelrt.njit(parallel=True)
def total(a):
    s = 0.0
    for i in numba.prange(a.shape[0]):
        s += twice(a[i])
    return s
"""

CALLEE = """
import kernelrt

SCALE = {scale}

@kernelrt.njit
def twice(x):
    return x * SCALE
"""

RUNNER = textwrap.dedent("""
    import json, pathlib, sys
    import numpy as np
    sys.path.insert(0, sys.argv[1])
    import kernelrt, summing
    value = summing.total(np.arange(4.0))
    numba_dir = pathlib.Path(sys.argv[2])
    print(json.dumps({"value": value, "stats": kernelrt.cache_stats()["process"],
                      "numba_files": sorted(p.name for p in numba_dir.rglob("*") if p.is_file())}))
""")


def _modules(folder, scale):
    folder.mkdir(exist_ok=True)
    (folder / "summing.py").write_text(CALLER)
    (folder / "scaling.py").write_text(CALLEE.format(scale=scale))


def _run(folder, cache_dir, **env):
    numba_dir = folder.parent / "numba-cache"
    env = dict(os.environ, KERNELRT_CACHE_DIR=str(cache_dir), NUMBA_CACHE_DIR=str(numba_dir), **env)
    res = subprocess.run([sys.executable, "-c", RUNNER, str(folder), str(numba_dir)], capture_output=True,
                         text=True, env=env, timeout=300)
    assert res.returncode == 0, res.stderr
    return json.loads(res.stdout.strip().splitlines()[-1])


def test_compiled_once_then_loaded_by_the_next_process(tmp_path, cache_dir):
    _modules(tmp_path / "src", scale=2.0)
    first = _run(tmp_path / "src", cache_dir)
    again = _run(tmp_path / "src", cache_dir)
    assert first["value"] == again["value"] == 12.0
    assert (first["stats"]["misses"], first["stats"]["hits"]) == (1, 0)  # the callee compiles into it
    assert (again["stats"]["misses"], again["stats"]["hits"]) == (0, 1)
    assert first["numba_files"] == again["numba_files"] == []  # nothing in numba's own cache
    [entry] = DiskCache(cache_dir).entries()
    assert entry.kernel == "summing.total" and entry.target.startswith("cpu:")


def test_an_edit_to_a_callees_constant_in_another_module_recompiles(tmp_path, cache_dir):
    # numba's cache=True keys a function by its own file: it would load the old machine code
    _modules(tmp_path / "src", scale=2.0)
    assert _run(tmp_path / "src", cache_dir)["value"] == 12.0
    (tmp_path / "src" / "scaling.py").write_text(CALLEE.format(scale=3.0))
    edited = _run(tmp_path / "src", cache_dir)
    assert edited["value"] == 18.0 and edited["stats"]["misses"] == 1


def test_a_damaged_entry_is_compiled_again_not_loaded(tmp_path, cache_dir):
    _modules(tmp_path / "src", scale=2.0)
    _run(tmp_path / "src", cache_dir)
    cache = DiskCache(cache_dir)
    [key] = list(cache._store)
    blob = cache._store.get(key)
    cache._store.set(key, blob[:-1] + bytes([blob[-1] ^ 0xFF]))  # one flipped bit in the machine code
    again = _run(tmp_path / "src", cache_dir)
    assert again["value"] == 12.0
    assert (again["stats"]["rejected"], again["stats"]["misses"], again["stats"]["hits"]) == (1, 1, 0)


def test_with_the_disk_cache_off_nothing_is_stored(tmp_path, cache_dir):
    _modules(tmp_path / "src", scale=2.0)
    off = _run(tmp_path / "src", cache_dir, KERNELRT_CACHE="0")
    assert off["value"] == 12.0 and off["numba_files"] == []
    assert not DiskCache(cache_dir).entries()


def test_bad_uses_are_refused():
    with pytest.raises(TypeError, match="do not pass cache="):
        kernelrt.njit(cache=True)
    with pytest.raises(TypeError, match="decorates a Python function"):
        kernelrt.njit(len)



def test_keywords_and_callers_in_compiled_code(cache_dir):
    @kernelrt.njit
    def add(a, b):
        return a + b

    @kernelrt.njit(nogil=True)
    def add_twice(a, b):
        return add(a, b) + add(a, b)

    assert add(1.0, b=2.0) == 3.0  # the first call, by keyword, compiles through the cache
    assert add_twice(1.0, 2.0) == 6.0
    assert kernelrt.cache_stats()["process"]["misses"] == 2


def test_the_eigensolver_helpers_are_in_kernelrts_cache_not_numbas(tmp_path, cache_dir):
    # One small solve by the Cholesky route runs every helper module: scans, analysis,
    # numeric factor, block solves, basis products. Nothing may reach numba's own cache.
    numba_dir = tmp_path / "numba-cache"
    code = textwrap.dedent("""
        import kernelrt.kernels.laplacian as lap
        V, F = lap.icosphere(3)
        L, m = lap.cotan_laplacian(V, F, "cpu")
        assert lap.eigenpairs(L, m, 5, backend="cpu", method="cholesky", factor="supernodal").residuals.max() < 1e-10
    """)
    env = dict(os.environ, KERNELRT_CACHE_DIR=str(cache_dir), NUMBA_CACHE_DIR=str(numba_dir))
    res = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, timeout=600)
    assert res.returncode == 0, res.stderr
    assert not numba_dir.exists() or not any(p.is_file() for p in numba_dir.rglob("*"))
    names = {e.kernel for e in DiskCache(cache_dir).entries()}
    for module in ("csr_scans", "supernodal_symbolic", "supernodal", "basis_products"):
        assert any(n.startswith(f"kernels.laplacian.{module}.") or f".laplacian.{module}." in n for n in names), module


def test_cache_warm_compiles_then_loads_the_host_functions(cache_dir, monkeypatch, capsys):
    from kernelrt.cli import main

    @kernelrt.njit
    def step(x):
        return x + 1.0

    monkeypatch.setattr("kernelrt.cli.warm_specs", lambda: {"cpu": [], "cuda": []})
    monkeypatch.setattr("kernelrt.cli.CUDABackend.check_available", staticmethod(lambda *a, **k: False))
    monkeypatch.setattr("kernelrt.cli.host_warmups", lambda: [("a step", lambda: step(1.0))])
    for expected in ("compiled", "memory"):  # the second time this process has it already
        assert main(["cache", "warm", "--json"]) == 0
        hosts = json.loads(capsys.readouterr().out)["host_functions"]
        assert [(h["name"], h["status"]) for h in hosts] == [("a step", expected)]
    assert main(["cache", "warm"]) == 0
    assert "a step [cpu host functions]" in capsys.readouterr().out


def test_the_built_in_warmup_lists_the_eigensolver():
    from kernelrt.kernels import host_warmups

    assert [name for name, _ in host_warmups()] == ["eigenpairs, Cholesky route"]
