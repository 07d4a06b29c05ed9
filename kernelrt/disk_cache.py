"""The on-disk store of compiled kernels, shared by every process of one user.

Storage is diskcache (SQLite in WAL mode plus value files): writes are transactional,
so concurrent readers see either no entry or a whole one, and the least recently used
entries are evicted past the size limit. On top of it kernelrt adds:

* framing: every entry carries a magic, a format version, its own key and a SHA-256 of
  its body; a corrupt, truncated, foreign or old-format entry is a miss (deleted and
  recompiled), never a crash and never another kernel's code;
* a per-key lock (``flock``, ``LockFileEx`` on Windows), so N processes that miss at once
  compile once while the others wait and then load (the OS frees it if its holder dies);
* security: entries are executable code, so the directory is created mode 0700, and
  nothing is loaded unless no other user can write it or rename a directory above it,
  and nothing is ever unpickled inside diskcache (``cache_trust``); otherwise kernelrt
  warns once, naming the path and the fix, and compiles without the disk cache (also on
  Windows, whose ACLs these POSIX checks cannot read: ``POSIX_TRUST``);
* degradation: a read-only or full disk turns the cache memory-only with one warning;
* counters (hits, misses, compile seconds saved), per process and persisted.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import sqlite3
import struct
import threading
import time
import warnings
from dataclasses import asdict, dataclass, field
from pathlib import Path

import platformdirs

from . import __version__, config
from .cache_key import KEY_SCHEMA_VERSION
from .cache_trust import (
    TrustedCache,
    UnsafeCacheError,
    UnsafeDatabaseError,
    chain_problem,
    make_private_dirs,
    open_lock,
    private_subdir,
)

__all__ = ["DiskCache", "CacheStats", "EntryInfo", "resolve_cache_dir", "disk_cache_for", "cache_stats"]

MAGIC = b"KRTC"
FORMAT_VERSION = 1
_HEADER = struct.Struct("<4sH64s32sI")  # magic, format, key, sha256(meta+payload), len(meta)
# cache_trust's checks are POSIX owners, modes and O_NOFOLLOW; where they cannot be made
# (Windows: ACLs, no geteuid) nothing is loaded from disk rather than load unchecked code.
POSIX_TRUST = hasattr(os, "geteuid") and hasattr(os, "O_NOFOLLOW")


def resolve_cache_dir(explicit: str | os.PathLike | None = None) -> Path:
    """Explicit argument, then KERNELRT_CACHE_DIR, then the user cache dir; versioned."""
    if explicit is not None:
        root = Path(explicit)
    elif config.cache_dir_override():
        root = Path(config.cache_dir_override())
    else:
        root = Path(platformdirs.user_cache_dir("kernelrt", appauthor=False))
    return root.expanduser() / f"kernelrt-{__version__}-schema{KEY_SCHEMA_VERSION}"


@dataclass
class CacheStats:
    """Counters of one process (``DiskCache.stats``) or of all processes (``totals()``)."""

    hits: int = 0
    misses: int = 0
    memory_hits: int = 0
    rejected: int = 0
    compile_seconds: float = 0.0
    seconds_saved: float = 0.0

    def as_dict(self) -> dict:
        return asdict(self)


@dataclass(frozen=True)
class EntryInfo:
    key: str
    kernel: str
    target: str
    size: int
    created: float
    compile_seconds: float
    meta: dict = field(default_factory=dict, repr=False)

    @property
    def age_seconds(self) -> float:
        return max(0.0, time.time() - self.created)


class DiskCache:
    """Framed, locked, private key -> bytes store; see the module docstring."""

    def __init__(self, directory=None, *, size_limit: int | None = None, enabled: bool | None = None):
        self.directory = resolve_cache_dir(directory)
        self.size_limit = size_limit or config.cache_size_limit_bytes()
        self.stats = CacheStats()
        self.disabled_reason: str | None = None
        self._store = None
        self._counters = None
        self._lock = threading.Lock()
        if enabled is None:
            enabled = config.disk_cache_enabled()
        if not enabled:
            self.disabled_reason = "disabled by KERNELRT_CACHE=0"
        elif not POSIX_TRUST:
            self._degrade("its safety checks (file owners and modes) are POSIX-only, so on this platform "
                          "kernels are compiled in memory in each process; set KERNELRT_CACHE=0 to silence this")
        else:
            self._open()

    # -- opening and degrading -------------------------------------------------

    def _open(self) -> None:
        try:
            make_private_dirs(self.directory)
            # from here on the resolved path, checked whole: a symlink on the way that
            # someone else controls cannot redirect later opens
            self.directory = Path(os.path.realpath(self.directory))
        except OSError as e:
            self._degrade(f"cannot create {self.directory}: {e.strerror}")
            return
        problem = chain_problem(self.directory)
        if problem:
            self._refuse(problem)
            return
        try:
            for sub in ("entries", "counters", "locks"):
                private_subdir(self.directory / sub)
            self._store = TrustedCache(
                str(self.directory / "entries"),
                size_limit=self.size_limit,
                eviction_policy="least-recently-used",
                cull_limit=2,  # evict a couple of entries per write, not diskcache's batch of 10
                disk_min_file_size=2**16,
            )
            self._counters = TrustedCache(str(self.directory / "counters"), eviction_policy="none")
        except UnsafeCacheError as e:
            self._refuse(str(e))
        except (sqlite3.Error, OSError) as e:
            self._degrade(f"cannot open the cache in {self.directory}: {e}")

    def _refuse(self, problem: str) -> None:
        self._degrade(
            f"refusing to load kernels: {problem}; make the cache directory and every directory above it "
            "writable only by you or root (chown, chmod 700), or set KERNELRT_CACHE_DIR to a private directory"
        )

    @contextlib.contextmanager
    def _checked(self):
        """Turn an unsafe database, found on a new connection, into memory-only mode."""
        try:
            yield
        except UnsafeDatabaseError as e:
            self._refuse(str(e))

    def _degrade(self, reason: str) -> None:
        with self._lock:
            first = self.disabled_reason is None
            self.disabled_reason = reason
            self._store = None
            self._counters = None
        if first:
            warnings.warn(
                f"kernelrt: compiled-kernel cache disabled, kernels are compiled in memory only: {reason}",
                RuntimeWarning,
                stacklevel=3,
            )
        config.logger.debug("disk cache disabled: %s", reason)

    @property
    def enabled(self) -> bool:
        return self._store is not None

    # -- entries -----------------------------------------------------------------

    def load(self, key: str) -> tuple[bytes, dict] | None:
        """The payload and metadata stored under ``key``, or None (a miss)."""
        store = self._store
        if store is None:
            return None
        try:
            handle = store.get(key, read=True)
            if handle is None:
                return None
            if isinstance(handle, bytes):  # small values live in the (checked) database
                blob = handle
            else:  # large values are files of their own, opened and checked by TrustedDisk
                with handle:
                    blob = handle.read()
        except UnsafeDatabaseError as e:
            self._refuse(str(e))
            return None
        except UnsafeCacheError as e:  # a row in a pickle mode, a foreign file: never read
            return self.reject(key, f"unsafe entry: {e}", delete=False)
        except (sqlite3.Error, OSError) as e:
            self._degrade(f"cannot read the cache: {e}")
            return None
        return self._decode(key, blob)

    def _decode(self, key: str, blob: bytes):
        if len(blob) < _HEADER.size:
            return self.reject(key, "truncated entry")
        magic, version, stored_key, checksum, meta_len = _HEADER.unpack_from(blob)
        if magic != MAGIC:
            return self.reject(key, "foreign entry (bad magic)")
        if version != FORMAT_VERSION:
            return self.reject(key, f"old-format entry (format {version})")
        if stored_key.decode(errors="replace") != key:
            return self.reject(key, "entry stored under another key")
        body = blob[_HEADER.size :]
        if hashlib.sha256(body).digest() != checksum or len(body) < meta_len:
            return self.reject(key, "corrupt entry (checksum mismatch)")
        try:
            meta = json.loads(body[:meta_len])
        except ValueError:
            return self.reject(key, "corrupt entry metadata")
        return body[meta_len:], meta

    def reject(self, key: str, why: str, delete: bool = True):
        """Count an unusable entry (a miss), log why, and delete it unless told not to."""
        self.record(rejected=1)  # also in the totals that `kernelrt cache stats` shows
        config.logger.debug("cache entry %s rejected: %s", key[:12], why)
        if delete:
            self.discard(key)
        return None

    def discard(self, key: str) -> None:
        if self._store is not None:
            with contextlib.suppress(sqlite3.Error, OSError, UnsafeCacheError):
                self._store.delete(key)

    def store(self, key: str, payload: bytes, meta: dict) -> None:
        """Write an entry atomically (a failure degrades to memory-only, once)."""
        store = self._store
        if store is None:
            return
        meta = dict(meta, created=time.time(), key=key)
        meta_bytes = json.dumps(meta, sort_keys=True).encode()
        body = meta_bytes + payload
        header = _HEADER.pack(MAGIC, FORMAT_VERSION, key.encode(), hashlib.sha256(body).digest(), len(meta_bytes))
        try:
            with self._checked():
                store.set(key, header + body, tag=meta.get("kernel"))
        except (sqlite3.Error, OSError) as e:
            self._degrade(f"cannot write the cache (read-only or full disk?): {e}")

    @contextlib.contextmanager
    def lock(self, key: str):
        """Exclusive per-key lock across processes (a no-op when memory-only), on the
        descriptor ``open_lock`` checked (``filelock.FileLock`` would reopen the path)."""
        fd = self._open_lock(key) if self._store is not None else None
        if fd is None:
            yield
            return
        try:
            from filelock import lock_descriptor  # lazy: 50 ms, paid by the first compile or load

            try:
                lock_descriptor(fd, poll_interval=0.01)
            except OSError as e:  # no lock support (some network filesystems): compiles may repeat
                config.logger.debug("cache lock %s not taken: %s", key[:12], e)
            yield
        finally:
            os.close(fd)  # closing releases the lock

    def _open_lock(self, key: str) -> int | None:
        path = self.directory / "locks" / f"{key[:32]}.lock"
        try:
            return open_lock(path)
        except UnsafeCacheError as e:  # a symlink or a foreign lock: memory-only from then on
            self._refuse(str(e))
        except OSError as e:
            self._degrade(f"cannot create lock file {path}: {e.strerror}")
        return None

    # -- counters ------------------------------------------------------------------

    def record(self, **deltas) -> None:
        """Add to this process's counters and to the persisted totals."""
        for name, delta in deltas.items():
            setattr(self.stats, name, getattr(self.stats, name) + delta)
        counters = self._counters
        if counters is None:
            return
        try:
            with self._checked():
                for name, delta in deltas.items():
                    if isinstance(delta, float):
                        counters.incr(name + "_us", int(delta * 1e6))
                    else:
                        counters.incr(name, delta)
        except (sqlite3.Error, OSError, TypeError) as e:  # TypeError: a counter row not an int
            self._degrade(f"cannot update cache counters: {e}")

    def totals(self) -> CacheStats:
        """Counters summed over every process that used this cache directory."""
        out = CacheStats()
        counters = self._counters
        if counters is None:
            return out
        with self._checked():
            for name, value in asdict(out).items():
                stored = counters.get_trusted(name + "_us" if isinstance(value, float) else name, 0)
                stored = stored if type(stored) is int else 0  # kernelrt only ever stores ints here
                setattr(out, name, stored / 1e6 if isinstance(value, float) else stored)
        return out

    # -- management (CLI) -------------------------------------------------------------

    def entries(self) -> list[EntryInfo]:
        out = []
        if self._store is None:
            return out
        with self._checked():
            out = self._entry_infos(self._store)
        return sorted(out, key=lambda e: (e.kernel, e.target, e.created))

    def _entry_infos(self, store) -> list[EntryInfo]:
        out = []
        for key in store.str_keys():
            blob = store.get_trusted(key)
            if not isinstance(blob, bytes):
                continue
            decoded = self._decode(key, blob)
            if decoded is None:
                continue
            payload, meta = decoded
            out.append(
                EntryInfo(
                    key=key,
                    kernel=meta.get("kernel", "?"),
                    target=meta.get("target", "?"),
                    size=len(blob),
                    created=float(meta.get("created", 0.0)),
                    compile_seconds=float(meta.get("compile_seconds", 0.0)),
                    meta=meta,
                )
            )
        return out

    def clear(self, kernel: str | None = None) -> int:
        """Remove every entry, or those of one kernel (by name); returns the count."""
        store, counters, n = self._store, self._counters, 0
        if store is None:
            return 0
        with self._checked():
            if kernel is not None:
                return store.evict(kernel)
            n = store.clear()
            if counters is not None:
                counters.clear()
        return n

    def volume(self) -> int:
        store = self._store
        with self._checked():
            return store.volume() if store is not None else 0
        return 0


_shared: dict = {}
_shared_lock = threading.Lock()


def disk_cache_for(directory=None, enabled: bool = True) -> DiskCache:
    """The process-wide DiskCache of a directory (default: the resolved one).

    Backends of one process share it, so its counters cover all of their compilations.
    ``enabled=False`` gives a memory-only stand-in.
    """
    if not enabled:
        return DiskCache(directory, enabled=False)
    path = resolve_cache_dir(directory)
    with _shared_lock:
        if path not in _shared:
            _shared[path] = DiskCache(directory)
        return _shared[path]


def cache_stats(directory=None) -> dict:
    """This process's cache counters and the totals over all processes, as a dict."""
    cache = disk_cache_for(directory)
    return {
        "directory": str(cache.directory),
        "enabled": cache.enabled,
        "disabled_reason": cache.disabled_reason,
        "process": cache.stats.as_dict(),
        "all_processes": cache.totals().as_dict(),
        "entries_bytes": cache.volume(),
    }
