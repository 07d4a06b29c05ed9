"""The compiled-kernel cache never runs another user's code (issue 25, item 2 and part of 10).

Each test plants what a second local user could: a cache root inside their directory, a
writable ancestor, a database swapped in after the first open (read from a new thread,
as a Dask worker's task thread does), pickle rows that would run code if unpickled, a
writable counters database, foreign SQLite sidecars and lock files, symlinks; and the
size setting's bad values. Files are handed to the other user with ``os.chown``.
"""

import json
import os
import pickle
import sqlite3
import threading
import time
import warnings

import pytest

from kernelrt.cli import main
from kernelrt.disk_cache import DiskCache, resolve_cache_dir

KEY = "ab" * 32
PICKLE_MODE = 4  # diskcache.core.MODE_PICKLE: Disk.fetch would pickle.load the value


class Plant:
    """Unpickling it creates the directory ``marker``: proof that a pickle ran."""

    def __init__(self, marker):
        self.marker = str(marker)

    def __reduce__(self):
        return (os.mkdir, (self.marker,))


def _refused(cache, *words):
    assert not cache.enabled, "the cache must fall back to memory-only"
    for word in words:
        assert word in cache.disabled_reason, (word, cache.disabled_reason)


def _warned(fn):
    """``fn()`` and the messages of the warnings it raised (from any thread)."""
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        out = fn()
    return out, " ".join(str(w.message) for w in caught)


def _in_new_thread(fn):
    out = []
    thread = threading.Thread(target=lambda: out.append(fn()))
    thread.start()
    thread.join()
    return out[0]


def _sql(db, statement, args=()):
    with sqlite3.connect(db) as con:
        con.execute(statement, args)
    con.close()


def _plant_row(db, key, value, *, raw=1, mode=PICKLE_MODE, filename=None):
    now = time.time()
    _sql(db, "INSERT OR REPLACE INTO Cache (key, raw, store_time, expire_time, access_time, access_count,"
             " tag, size, mode, filename, value) VALUES (?, ?, ?, NULL, ?, 0, NULL, 0, ?, ?, ?)",
         (key, raw, now, now, mode, filename, value))


# -- the chain of directories --------------------------------------------------------------


def test_root_in_a_sticky_directory_of_another_user_is_refused(tmp_path, other_uid):
    # The attacker made /tmp/shared (1777) first: as its owner they may rename our entry in it.
    shared = tmp_path / "shared"
    shared.mkdir()
    os.chmod(shared, 0o1777)
    os.chown(shared, other_uid, other_uid)
    with pytest.warns(RuntimeWarning, match=f"owned by uid {other_uid}"):
        cache = DiskCache(shared)
    _refused(cache, str(shared), "KERNELRT_CACHE_DIR")
    cache.store(KEY, b"x", {})
    assert cache.load(KEY) is None


def test_root_in_a_root_owned_sticky_directory_is_accepted(tmp_path):
    # The control: /tmp itself (sticky, owned by root or us) is a fine place for our directory.
    sticky = tmp_path / "tmp"
    sticky.mkdir()
    os.chmod(sticky, 0o1777)
    cache = DiskCache(sticky)
    assert cache.enabled, cache.disabled_reason
    cache.store(KEY, b"x", {})
    assert cache.load(KEY)[0] == b"x"


def test_group_writable_ancestor_is_refused(tmp_path, other_uid):
    # Not the root, nor its parent: two levels up, where the old check never looked. The
    # group is another user's (krtother's own group), so its members can rename "mine".
    import pwd

    group = tmp_path / "group"
    group.mkdir()
    os.chown(group, -1, pwd.getpwuid(other_uid).pw_gid)
    os.chmod(group, 0o775)
    with pytest.warns(RuntimeWarning, match="writable by other users"):
        cache = DiskCache(group / "mine" / "cache")
    _refused(cache, str(group))


def test_an_ancestor_writable_by_the_users_private_group_is_accepted(tmp_path):
    # umask 002 with user-private groups (Debian, Fedora): pip leaves ~/.cache g+w for a
    # group that is this user alone; refusing it would turn the default cache off.
    import grp
    import pwd

    user = pwd.getpwuid(os.geteuid())
    group = grp.getgrgid(user.pw_gid)
    if group.gr_name != user.pw_name or set(group.gr_mem) - {user.pw_name}:
        pytest.skip(f"this user's primary group {group.gr_name!r} is not a private one")
    home = tmp_path / "home"
    (home / ".cache").mkdir(parents=True)
    os.chmod(home / ".cache", 0o775)
    os.chmod(home, 0o775)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        cache = DiskCache(home / ".cache" / "kernelrt")
    assert cache.enabled
    cache.store(KEY, b"x", {})
    assert cache.load(KEY)[0] == b"x"


def test_symlinked_ancestor_is_resolved_then_checked(tmp_path):
    real = tmp_path / "real"
    real.mkdir(mode=0o700)
    (tmp_path / "link").symlink_to(real)
    cache = DiskCache(tmp_path / "link")
    assert cache.enabled and cache.directory == resolve_cache_dir(real)  # opened by its real path


# -- the database, per connection ------------------------------------------------------------


def _attacker_database(tmp_path, payload):
    """A well-framed entry under KEY in a database of another directory, closed (no WAL)."""
    forged = DiskCache(tmp_path / "attacker")
    forged.store(KEY, payload, {"kernel": "k"})
    forged._store.close()
    return forged.directory / "entries" / "cache.db"


def test_database_swapped_after_the_first_open_is_refused_in_a_new_thread(tmp_path, other_uid):
    cache = DiskCache(tmp_path / "victim")
    cache.store(KEY, b"genuine kernel", {"kernel": "k"})
    assert cache.load(KEY)[0] == b"genuine kernel"
    entries = cache.directory / "entries"
    forged = _attacker_database(tmp_path, b"attacker's kernel")
    os.chown(forged, other_uid, other_uid)
    for sidecar in ("cache.db-wal", "cache.db-shm"):
        if (entries / sidecar).exists():
            os.replace(entries / sidecar, tmp_path / sidecar)  # the old connection keeps its inodes
    os.replace(forged, entries / "cache.db")
    loaded, warned = _warned(lambda: _in_new_thread(lambda: cache.load(KEY)))  # a new thread: a new connection
    assert loaded is None, f"loaded the swapped-in database: {loaded}"
    assert "cache.db" in warned
    _refused(cache, str(entries / "cache.db"), f"uid {other_uid}")


def test_a_private_cache_still_loads_in_new_threads(tmp_path):
    cache = DiskCache(tmp_path / "c")
    cache.store(KEY, b"kernel", {"kernel": "k"})
    assert _in_new_thread(lambda: cache.load(KEY))[0] == b"kernel"
    assert cache.enabled


@pytest.mark.parametrize("sidecar", ["cache.db-wal", "cache.db-shm"])
def test_foreign_sqlite_sidecar_is_refused(tmp_path, other_uid, sidecar):
    first = DiskCache(tmp_path / "c")
    first.store(KEY, b"kernel", {})  # its open connection keeps the -wal and -shm files
    path = first.directory / "entries" / sidecar
    assert path.exists()
    os.chown(path, other_uid, other_uid)
    with pytest.warns(RuntimeWarning, match=sidecar):
        second = DiskCache(tmp_path / "c")
    _refused(second, str(path))


# -- nothing is unpickled ------------------------------------------------------------------------


@pytest.mark.parametrize("where", ["database", "file"])
def test_pickle_mode_entry_is_never_unpickled(tmp_path, where):
    cache = DiskCache(tmp_path / "c")
    marker = tmp_path / "pickle-ran"
    payload = pickle.dumps(Plant(marker))
    db = cache.directory / "entries" / "cache.db"
    if where == "database":
        _plant_row(db, KEY, payload)
    else:  # a value file of diskcache's own naming, in pickle mode
        name = "ab/cd/" + "0" * 28 + ".val"
        (cache.directory / "entries" / "ab" / "cd").mkdir(parents=True, mode=0o700)
        (cache.directory / "entries" / name).write_bytes(payload)
        _plant_row(db, KEY, None, filename=name)
    assert cache.load(KEY) is None
    assert cache.entries() == []
    assert not marker.exists(), "diskcache unpickled a planted row"
    assert cache.stats.rejected == 1  # counted, as a refused entry
    cache.store(KEY, b"recompiled", {"kernel": "k"})  # the next compile replaces it
    assert cache.load(KEY)[0] == b"recompiled"


def test_pickled_key_is_never_unpickled(tmp_path, capsys):
    # diskcache stores a non-str key pickled (raw=0) and unpickles it while listing keys.
    cache = DiskCache(tmp_path / "c")
    cache.store(KEY, b"kernel", {"kernel": "k"})
    marker = tmp_path / "pickle-ran"
    _plant_row(cache.directory / "entries" / "cache.db", pickle.dumps(Plant(marker)), b"x", raw=0, mode=1)
    assert [e.key for e in cache.entries()] == [KEY]
    assert not marker.exists(), "diskcache unpickled a planted key"


def test_writable_counters_database_is_refused_by_cache_stats(tmp_path, monkeypatch, capsys):
    # Another user who can write counters/cache.db plants a pickle under "hits"; before the
    # fix `kernelrt cache stats` unpickled it.
    root = tmp_path / "c"
    cache = DiskCache(root)
    cache.record(hits=1)
    marker = tmp_path / "pickle-ran"
    counters = cache.directory / "counters" / "cache.db"
    _sql(counters, "UPDATE Cache SET mode = ?, value = ? WHERE key = 'hits'", (PICKLE_MODE, pickle.dumps(Plant(marker))))
    os.chmod(counters, 0o666)
    monkeypatch.setenv("KERNELRT_CACHE_DIR", str(root))
    capsys.readouterr()
    status, warned = _warned(lambda: main(["cache", "stats", "--json"]))
    out = json.loads(capsys.readouterr().out)
    assert not marker.exists(), "`kernelrt cache stats` unpickled the counters"
    assert status == 0 and "counters/cache.db is writable by other users" in warned
    assert out["enabled"] is False and "counters/cache.db" in out["disabled_reason"]


def test_pickle_counter_row_is_read_as_zero(tmp_path):
    cache = DiskCache(tmp_path / "c")
    cache.record(hits=3, misses=1)
    marker = tmp_path / "pickle-ran"
    _sql(cache.directory / "counters" / "cache.db", "UPDATE Cache SET mode = ?, value = ? WHERE key = 'hits'",
         (PICKLE_MODE, pickle.dumps(Plant(marker))))
    totals = cache.totals()
    assert not marker.exists() and (totals.hits, totals.misses) == (0, 1)


# -- locks -------------------------------------------------------------------------------------


def _lock_once(cache):
    with cache.lock(KEY):
        pass


def test_lock_directory_symlink_is_refused(tmp_path):
    cache = DiskCache(tmp_path / "c")
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    locks = cache.directory / "locks"
    locks.rmdir()
    locks.symlink_to(elsewhere)
    _, warned = _warned(lambda: _lock_once(cache))
    assert list(elsewhere.iterdir()) == [], "created a lock file through the symlink"
    assert "locks" in warned
    _refused(cache, str(locks))


def test_lock_file_symlink_is_refused(tmp_path):
    cache = DiskCache(tmp_path / "c")
    target = tmp_path / "created-through-the-link"
    (cache.directory / "locks" / f"{KEY[:32]}.lock").symlink_to(target)
    _, warned = _warned(lambda: _lock_once(cache))
    assert not target.exists(), "O_CREAT followed the symlink"
    assert "is a symlink" in warned
    assert not cache.enabled


def test_foreign_lock_file_is_refused(tmp_path, other_uid):
    cache = DiskCache(tmp_path / "c")
    path = cache.directory / "locks" / f"{KEY[:32]}.lock"
    path.touch(mode=0o600)
    os.chown(path, other_uid, other_uid)
    with pytest.warns(RuntimeWarning, match=f"owned by uid {other_uid}"):
        _lock_once(cache)
    _refused(cache, str(path))


# -- KERNELRT_CACHE_SIZE_GB ---------------------------------------------------------------------


@pytest.mark.parametrize("value", ["inf", "-inf", "nan", "-1", "0", "two", "1e-7"])
def test_bad_cache_size_is_an_error_naming_the_variable(tmp_path, monkeypatch, value):
    monkeypatch.setenv("KERNELRT_CACHE_SIZE_GB", value)
    with pytest.raises(ValueError, match=r"KERNELRT_CACHE_SIZE_GB must be a finite number of gigabytes") as err:
        DiskCache(tmp_path / "c")
    assert repr(value) in str(err.value)


def test_small_but_sufficient_cache_size_is_accepted(tmp_path, monkeypatch):
    monkeypatch.setenv("KERNELRT_CACHE_SIZE_GB", "0.001")
    cache = DiskCache(tmp_path / "c")
    assert cache.size_limit == int(0.001 * 2**30) and cache.enabled
