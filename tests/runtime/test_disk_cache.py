"""DiskCache and cache keys: framing, damaged entries, security, degradation, eviction."""

import os
import pickle
import sqlite3
import struct
import warnings

import numpy as np
import pytest
from tests.support.kernels import axpy, shifted_sqrt
from tests.support.layers import ROOT

import kernelrt
from kernelrt.cache_key import KeyBuilder, function_fingerprint
from kernelrt.disk_cache import FORMAT_VERSION, DiskCache, resolve_cache_dir

KEY = "ab" * 32
OTHER = "cd" * 32


def test_directory_resolution(tmp_path, monkeypatch):
    monkeypatch.setenv("KERNELRT_CACHE_DIR", str(tmp_path / "env"))
    explicit = resolve_cache_dir(tmp_path / "explicit")
    assert explicit.parent == tmp_path / "explicit"
    assert resolve_cache_dir().parent == tmp_path / "env"
    monkeypatch.delenv("KERNELRT_CACHE_DIR")
    assert "kernelrt" in str(resolve_cache_dir())
    name = explicit.name
    assert kernelrt.__version__ in name and "schema" in name


def test_roundtrip_and_private_directory(tmp_path):
    cache = DiskCache(tmp_path / "c")
    cache.store(KEY, b"payload", {"kernel": "k", "target": "cpu:x"})
    payload, meta = cache.load(KEY)
    assert payload == b"payload" and meta["kernel"] == "k" and meta["key"] == KEY
    assert cache.load(OTHER) is None
    assert (cache.directory.stat().st_mode & 0o777) == 0o700
    [entry] = cache.entries()
    assert entry.kernel == "k" and entry.target == "cpu:x" and entry.size > len(b"payload")


def _raw(cache, key):
    return cache._store.get(key)


@pytest.mark.parametrize(
    "damage,why",
    [
        (lambda blob: blob[:10], "truncated"),
        (lambda blob: blob[: len(blob) - 3], "truncated payload"),
        (lambda blob: b"XXXX" + blob[4:], "foreign magic"),
        (lambda blob: blob[:4] + struct.pack("<H", FORMAT_VERSION + 1) + blob[6:], "old or new format"),
        (lambda blob: blob[:-1] + bytes([blob[-1] ^ 0xFF]), "flipped bit"),
        (lambda blob: b"", "empty"),
    ],
)
def test_damaged_entries_are_misses_and_removed(tmp_path, damage, why):
    cache = DiskCache(tmp_path / "c")
    cache.store(KEY, b"payload-bytes", {"kernel": "k"})
    cache._store.set(KEY, damage(_raw(cache, KEY)))
    assert cache.load(KEY) is None, why
    assert cache.stats.rejected == 1
    assert cache.totals().rejected == 1  # what `kernelrt cache stats` shows, across processes
    assert KEY not in cache._store  # replaced on the next compile


def test_entry_stored_under_another_key_is_rejected(tmp_path):
    # A cross-wired index (numba/numba#10128) must never hand out another kernel's code.
    cache = DiskCache(tmp_path / "c")
    cache.store(OTHER, b"other kernel", {"kernel": "other"})
    cache._store.set(KEY, _raw(cache, OTHER))
    assert cache.load(KEY) is None
    assert cache.load(OTHER)[0] == b"other kernel"


def test_large_entries_are_files_and_checked(tmp_path):
    cache = DiskCache(tmp_path / "c")
    big = os.urandom(200_000)  # above diskcache's in-database size
    cache.store(KEY, big, {"kernel": "big"})
    assert cache.load(KEY)[0] == big
    files = [os.path.join(d, f) for d, _, fs in os.walk(cache.directory / "entries") for f in fs if f.endswith(".val")]
    assert files
    os.chmod(files[0], 0o666)
    assert cache.load(KEY) is None  # writable by others: refused, not loaded
    assert cache.stats.rejected == 1


def test_directory_writable_by_others_is_refused(tmp_path):
    root = tmp_path / "shared"
    target = resolve_cache_dir(root)
    target.mkdir(parents=True)
    os.chmod(target, 0o777)
    with pytest.warns(RuntimeWarning, match="writable by other users"):
        cache = DiskCache(root)
    assert not cache.enabled and "writable by other users" in cache.disabled_reason
    cache.store(KEY, b"x", {})
    assert cache.load(KEY) is None


@pytest.mark.skipif(not hasattr(os, "geteuid") or os.geteuid() != 0, reason="needs root to chown")
def test_directory_owned_by_another_user_is_refused(tmp_path):
    root = tmp_path / "foreign"
    target = resolve_cache_dir(root)
    target.mkdir(parents=True, mode=0o700)
    os.chown(target, 65534, 65534)
    with pytest.warns(RuntimeWarning, match="owned by uid 65534"):
        cache = DiskCache(root)
    assert not cache.enabled


def test_read_only_or_full_disk_degrades_once(tmp_path, monkeypatch):
    cache = DiskCache(tmp_path / "c")

    def fail(*a, **k):
        raise sqlite3.OperationalError("attempt to write a readonly database")

    monkeypatch.setattr(cache._store, "set", fail)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        cache.store(KEY, b"x", {})
        cache.store(OTHER, b"y", {})
    ours = [w for w in caught if "compiled-kernel cache disabled" in str(w.message)]
    assert len(ours) == 1 and "read-only or full disk" in str(ours[0].message)
    assert not cache.enabled


@pytest.mark.skipif(hasattr(os, "geteuid") and os.geteuid() == 0, reason="root ignores file modes")
def test_real_read_only_directory(tmp_path):
    root = tmp_path / "ro"
    DiskCache(root)  # create it
    os.chmod(resolve_cache_dir(root) / "entries", 0o500)
    try:
        with pytest.warns(RuntimeWarning):
            cache = DiskCache(root)
            cache.store(KEY, b"x", {})
    finally:
        os.chmod(resolve_cache_dir(root) / "entries", 0o700)


def test_kernels_still_run_without_a_disk_cache(tmp_path):
    backend = kernelrt.CPUBackend(enable_caching=False)
    assert not backend.cache.enabled
    out = np.zeros(4)
    backend.launch_kernel(axpy, 1, 4, out, np.ones(4), np.ones(4), 1.0)
    assert (out == 2.0).all()  # exact: small integers


def test_lru_eviction_under_the_size_limit(tmp_path):
    limit = 600_000
    cache = DiskCache(tmp_path / "c", size_limit=limit)
    keys = [f"{i:064x}" for i in range(10)]
    for k in keys:
        cache.store(k, os.urandom(100_000), {"kernel": k[-1]})
        assert cache.load(keys[0]) is not None  # keep entry 0 the most recently used
    assert cache.volume() <= limit + 2 * 100_000
    assert cache.load(keys[0]) is not None  # recently used survived
    assert cache.load(keys[1]) is None  # least recently used went first
    assert cache.load(keys[-1]) is not None


def test_clear_all_and_by_kernel(tmp_path):
    cache = DiskCache(tmp_path / "c")
    cache.store(KEY, b"1", {"kernel": "mod.a"})
    cache.store(OTHER, b"2", {"kernel": "mod.b"})
    assert cache.clear("mod.a") == 1
    assert [e.kernel for e in cache.entries()] == ["mod.b"]
    assert cache.clear() == 1 and cache.entries() == []


def test_counters_persist_across_instances(tmp_path):
    a = DiskCache(tmp_path / "c")
    a.record(hits=2, misses=1, compile_seconds=1.5, seconds_saved=0.25)
    b = DiskCache(tmp_path / "c")
    assert b.stats.hits == 0  # per process
    totals = b.totals()
    assert (totals.hits, totals.misses) == (2, 1)
    # the totals persist whole microseconds (int(seconds * 1e6)): 1e-6 absolute is their
    # resolution (1.5 and 0.25 happen to round-trip exactly)
    assert totals.compile_seconds == pytest.approx(1.5, abs=1e-6) and totals.seconds_saved == pytest.approx(0.25, abs=1e-6)


def test_unloadable_payload_is_recompiled(cpu):
    ck = cpu.compile_kernel(shifted_sqrt.copy())  # a copy: nothing compiled in memory yet
    assert ck.status == "compiled"
    [entry] = [e for e in cpu.cache.entries() if e.kernel.endswith("shifted_sqrt")]
    cpu.cache.store(entry.key, pickle.dumps((1, ("not", "a", "compile result"))), {"kernel": entry.kernel})
    fresh = shifted_sqrt.copy()
    assert cpu.compile_kernel(fresh).status == "compiled"
    out = np.zeros(4)
    cpu.launch_kernel(fresh, 1, 4, out, np.arange(4.0))
    np.testing.assert_allclose(out, np.sqrt(np.arange(4.0)) + 10.0)  # default rtol: checks it runs (equal in fact)


# -- the key -----------------------------------------------------------------------------


def test_key_is_labelled_and_length_prefixed():
    a = KeyBuilder().add("x", "ab").add("y", "c").digest()
    b = KeyBuilder().add("x", "a").add("y", "bc").digest()
    c = KeyBuilder().add("y", "ab").add("x", "c").digest()
    assert len({a, b, c}) == 3
    assert KeyBuilder().add("x", "ab").add("y", "c").digest() == a


def _fingerprint_of(source, **globs):
    ns = dict(globs)
    exec(source, ns)
    return function_fingerprint(ns["f"])


def test_fingerprint_sees_globals_callees_and_closures():
    src = "def f(x):\n    return helper(x) + K\n"

    def helper_a(x):
        return x

    def helper_b(x):
        return x + 1

    base = _fingerprint_of(src, helper=helper_a, K=1.0)
    assert _fingerprint_of(src, helper=helper_a, K=1.0) == base
    assert _fingerprint_of(src, helper=helper_a, K=2.0) != base
    assert _fingerprint_of(src, helper=helper_b, K=1.0) != base
    arr = np.arange(3.0)
    assert _fingerprint_of(src, helper=helper_a, K=arr) != _fingerprint_of(src, helper=helper_a, K=arr + 1)

    def outer(v):
        def f(x):
            return x + v

        return f

    assert function_fingerprint(outer(1)) != function_fingerprint(outer(2))


def test_fingerprint_handles_recursion():
    ns = {}
    exec("def f(n):\n    return g(n)\ndef g(n):\n    return f(n - 1) if n else 0\n", ns)
    assert len(function_fingerprint(ns["f"])) == 32


def test_cuda_offline_entries_are_cached_and_reload(tmp_path, cache_dir):
    from tests.support.layers import nvrtc_available

    if not nvrtc_available():
        pytest.skip("needs NVRTC")
    sig = "float64[::1], float64[::1], float64[::1], float64"
    ptx = kernelrt.compile_ptx(axpy, sig, cc=(8, 0))
    cache = kernelrt.CPUBackend().cache
    targets = sorted(e.target for e in cache.entries())
    assert "cuda:sm_80" in targets
    # A fresh process (another machine with that GPU, say) loads it instead of compiling.
    code = (
        "import kernelrt;"
        "from tests.support.kernels import axpy;"
        f"p = kernelrt.compile_ptx(axpy, {sig!r}, cc=(8, 0));"
        "c = kernelrt.CPUBackend().cache; print(c.stats.hits, c.stats.misses, len(p))"
    )
    import subprocess
    import sys

    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT)
    assert out.returncode == 0, out.stderr
    hits, misses, n = out.stdout.split()
    assert (hits, misses) == ("1", "0") and int(n) == len(ptx)


def test_key_ignores_set_order_and_sees_intrinsics():
    import subprocess
    import sys

    code = (
        "from kernelrt.cache_key import _options;"
        "class D: targetoptions = {'fastmath': {'reassoc', 'contract', 'nsz', 'arcp'}};"
        "print(_options(D))"
    )
    outs = {
        subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                       env=dict(os.environ, PYTHONHASHSEED=str(seed))).stdout
        for seed in (1, 2, 3)
    }
    assert len(outs) == 1

    from numba.extending import intrinsic

    def make(scale):
        @intrinsic
        def scaled(typingctx, x):
            def codegen(context, builder, sig, args):
                return builder.fmul(args[0], context.get_constant(sig.return_type, scale))

            return x(x), codegen

        return scaled

    src = "def f(x):\n    return op(x)\n"
    assert _fingerprint_of(src, op=make(2.0)) != _fingerprint_of(src, op=make(3.0))


def test_cubin_from_another_driver_is_dropped_on_load(cache_dir):
    from tests.support.layers import nvrtc_available

    if not nvrtc_available():
        pytest.skip("needs NVRTC")
    from kernelrt import compiler

    kernel = axpy.copy()
    sig = kernel.parse_signature("float64[::1], float64[::1], float64[::1], float64")
    kernelrt.compile_ptx(kernel, "float64[::1], float64[::1], float64[::1], float64", cc=(8, 0))
    state = compiler.cuda_dispatcher(kernel, (8, 0)).overloads[sig]._reduce_states()
    state["codelibrary"]._cubin_cache[(8, 0, "")] = b"cubin linked by another driver"
    target = kernel.copy()
    disp = compiler.cuda_dispatcher(target, (8, 0))
    compiler._loader_cuda(disp, sig)(state, {"driver": [999, 0]})
    assert disp.overloads[sig]._codelibrary._cubin_cache == {}
    state["codelibrary"]._cubin_cache[(8, 0, "")] = b"cubin linked by this driver"
    again = kernel.copy()
    disp2 = compiler.cuda_dispatcher(again, (8, 0))
    compiler._loader_cuda(disp2, sig)(state, {"driver": compiler._driver_version()})
    assert disp2.overloads[sig]._codelibrary._cubin_cache


def test_threads_compiling_one_kernel_at_once_add_one_overload(cpu):
    import threading

    kernel = axpy.copy()
    sig = "float64[::1], float64[::1], float64[::1], float64"
    barrier, statuses = threading.Barrier(6), []

    def worker():
        barrier.wait()
        statuses.append(cpu.compile_kernel(kernel, sig).status)

    threads = [threading.Thread(target=worker) for _ in range(6)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert sorted(statuses) == ["compiled"] + ["memory"] * 5
    assert len(cpu._dispatchers[kernel].overloads) == 1
    out = np.zeros(4)
    cpu.launch_kernel(kernel, 1, 4, out, np.ones(4), np.ones(4), 2.0)  # dispatch is not ambiguous
    assert (out == 3.0).all()  # exact: small integers
