"""Whether kernelrt may load code from a cache path: ownership, modes, and no unpickling.

The compiled-kernel cache holds code that kernelrt runs (pickled compile results, PTX).
Its SHA-256 framing catches damage, not an attacker, who can frame a payload of their
own; so trust comes from the filesystem alone. Another user must not be able to write
any file kernelrt reads, nor rename any directory on the way to it:

* the chain (:func:`chain_problem`): the cache root, resolved so that no symlink is
  left, is a directory this user owns that group and others cannot write; each ancestor
  up to ``/`` is owned by this user or root and not writable by group or others, unless
  it is sticky (``/tmp``) and the entry below it is this user's or root's ("group" here
  never counts the user's private group: umask 002 systems make ``~/.cache`` g+w);
* each item inside (:func:`item_problem`, :func:`open_private`): every file and directory
  kernelrt or diskcache opens is lstat-ed, or opened ``O_NOFOLLOW`` and fstat-ed: not a
  symlink, of the expected type, owned by this user or root, not writable by others;
* per connection (:class:`TrustedCache`): diskcache reopens SQLite by path in every new
  thread and process, so the database and its ``-wal``/``-shm``/``-journal`` sidecars
  are checked again before each new connection;
* no unpickling (:class:`TrustedDisk`): only bytes (and the counters' integers) are
  stored, as raw SQLite values or private files, and a row diskcache would unpickle
  (a pickled key, or a value in pickle or text mode) is refused, never read.
"""

from __future__ import annotations

import errno
import functools
import os
import re
import sqlite3
import stat
from pathlib import Path

import diskcache
from diskcache.core import MODE_BINARY, MODE_RAW, UNKNOWN

__all__ = ["UnsafeCacheError", "UnsafeDatabaseError", "chain_problem", "item_problem", "db_problem", "make_private_dirs",
           "private_subdir", "open_lock", "open_private", "TrustedDisk", "TrustedCache", "REFUSED_KEY"]

# diskcache names value files <2 hex>/<2 hex>/<28 hex>.val (Disk.filename); anything else
# in a row (an absolute path, "..") would read or delete a file outside the cache.
_VALUE_FILE = re.compile(r"[0-9a-f]{2}/[0-9a-f]{2}/[0-9a-f]{28}\.val")
_DB_FILES = ("cache.db", "cache.db-wal", "cache.db-shm", "cache.db-journal")


class UnsafeCacheError(Exception):
    """A cache file or row kernelrt refuses to trust (not an OSError: diskcache would
    swallow an OSError from ``Disk.fetch`` as a silent miss)."""


class UnsafeDatabaseError(UnsafeCacheError):
    """The database itself (or its directory) is unsafe: the whole cache is refused."""


class _RefusedKey:
    """What :meth:`TrustedDisk.get` returns for a pickled key: a key no lookup can match."""

    def __repr__(self) -> str:
        return "<refused pickled key>"


REFUSED_KEY = _RefusedKey()


def _uid() -> int:
    return os.geteuid()


def _trusted_owner(uid: int) -> bool:
    # root can replace our files anyway, so trusting it adds no exposure
    return uid in (_uid(), 0)


def _describe_owner(path, st) -> str:
    return f"{path} is owned by uid {st.st_uid}, not by this user (uid {_uid()}) or root"


def _open_to_others(st) -> bool:
    """Whether another user can write it: world-writable, or group-writable for a group
    that is not this user's private one (Debian/Fedora give each user a group of their
    own and umask 002, so ``~/.cache`` made by pip is group-writable and still private)."""
    return bool(st.st_mode & stat.S_IWOTH) or bool(st.st_mode & stat.S_IWGRP) and not _private_group(st.st_gid)


@functools.lru_cache(maxsize=8)
def _private_group(gid: int) -> bool:
    # The user-private-group convention: our primary group, named as we are, with no other
    # listed members. A gid with no name, or a shared group such as "users", is not private.
    try:
        import grp
        import pwd

        user = pwd.getpwuid(_uid())
        group = grp.getgrgid(gid)
    except (ImportError, KeyError):
        return False
    return gid == user.pw_gid == os.getegid() and group.gr_name == user.pw_name and set(group.gr_mem) <= {user.pw_name}


def _writable_by_others(path, st) -> str:
    return f"{path} is writable by other users (mode {stat.filemode(st.st_mode)})"


def chain_problem(root: os.PathLike | str) -> str | None:
    """Why code must not be loaded from under ``root`` (a resolved path), or None.

    ``root`` itself must be a real directory of this user that group and others cannot
    write (no sticky exemption: whoever writes it can swap our files). Every ancestor up
    to ``/`` must be this user's or root's and closed to writers, because whoever can
    write an ancestor can rename the directory below it and put another in its place;
    a sticky ancestor (``/tmp``) is fine when the entry below it is ours or root's,
    since the sticky bit lets only that entry's owner rename it.
    """
    path = Path(root)
    try:
        st = os.lstat(path)
    except OSError as e:
        return f"cannot stat {path}: {e.strerror}"
    if st.st_uid != _uid():  # not even root's: the cache is this user's own
        return f"{path} is owned by uid {st.st_uid}, not by this user (uid {_uid()})"
    return stat_problem(path, st, directory=True) or _ancestors_problem(path, st)


def _ancestors_problem(path: Path, st) -> str | None:
    child, child_st = path, st
    for parent in path.parents:
        try:
            pst = os.lstat(parent)
        except OSError as e:
            return f"cannot stat {parent}: {e.strerror}"
        if not stat.S_ISDIR(pst.st_mode):
            return f"{parent} is not a directory (a symlink?): resolve the cache path"
        if not _trusted_owner(pst.st_uid):
            return _describe_owner(parent, pst) + f", so it can replace {child}"
        if _open_to_others(pst):
            sticky = pst.st_mode & stat.S_ISVTX
            if not (sticky and _trusted_owner(child_st.st_uid)):
                return _writable_by_others(parent, pst) + f" and not sticky, so they can replace {child}"
        child, child_st = parent, pst
    return None


def item_problem(path: os.PathLike | str, *, directory: bool = False, missing_ok: bool = False) -> str | None:
    """Why a file (or directory) inside a checked cache root is unsafe, or None.

    lstat, so a symlink is refused rather than followed; ``missing_ok`` for SQLite's
    sidecar files, which exist only while a connection is open.
    """
    try:
        st = os.lstat(path)
    except FileNotFoundError:
        return None if missing_ok else f"{path} does not exist"
    except OSError as e:
        return f"cannot stat {path}: {e.strerror}"
    return stat_problem(path, st, directory=directory)


def stat_problem(path, st, *, directory: bool = False) -> str | None:
    """Why an lstat/fstat result makes ``path`` unsafe: its type, owner or mode; or None."""
    kind_ok = stat.S_ISDIR(st.st_mode) if directory else stat.S_ISREG(st.st_mode)
    if not kind_ok:
        return f"{path} is not a {'directory' if directory else 'regular file'} (a symlink?)"
    if not _trusted_owner(st.st_uid):
        return _describe_owner(path, st)
    if _open_to_others(st):
        return _writable_by_others(path, st)
    return None


def db_problem(directory: os.PathLike | str) -> str | None:
    """Why the SQLite database of a diskcache directory is unsafe to open, or None."""
    problem = item_problem(directory, directory=True)
    for name in _DB_FILES:
        # all may be missing: SQLite creates them as this user, in a directory just checked
        problem = problem or item_problem(os.path.join(directory, name), missing_ok=True)
    return problem


def make_private_dirs(path: Path) -> None:
    """``mkdir -p`` whose new directories are 0700 whatever the umask (a umask of 002
    would otherwise leave them group-writable, and then refused)."""
    missing = []
    while not path.exists() and path != path.parent:
        missing.append(path)
        path = path.parent
    for p in reversed(missing):
        try:
            os.mkdir(p, 0o700)
        except FileExistsError:
            continue  # another process made it first; the checks decide if it is safe


def private_subdir(path: Path) -> None:
    """Create (0700) or check a directory inside a checked cache root.

    Raises:
        UnsafeDatabaseError: it is a symlink, foreign, or writable by others.
    """
    make_private_dirs(path)
    problem = item_problem(path, directory=True)
    if problem:
        raise UnsafeDatabaseError(problem)


def open_lock(path: Path) -> int:
    """Open (creating it 0600) the lock file ``path``, checking it and its directory.

    O_CREAT through a planted symlink would create a file wherever it points, and a
    foreign lock file could be held forever by its owner: both are refused.
    """
    problem = item_problem(path.parent, directory=True)
    if problem:
        raise UnsafeCacheError(problem)
    return open_private(path, os.O_RDWR | os.O_CREAT)


def open_private(path: os.PathLike | str, flags: int, mode: int = 0o600) -> int:
    """``os.open`` without following a symlink, then check the file itself by fstat.

    Raises:
        UnsafeCacheError: the file is not a regular file of ours (or root's) closed to writers.
        OSError: it cannot be opened.
    """
    try:
        fd = os.open(path, flags | os.O_NOFOLLOW | os.O_CLOEXEC, mode)
    except OSError as e:
        if e.errno == errno.ELOOP:  # what O_NOFOLLOW gives for a symlink
            raise UnsafeCacheError(f"{path} is a symlink") from None
        raise
    problem = stat_problem(path, os.fstat(fd))
    if problem:
        os.close(fd)
        raise UnsafeCacheError(problem)
    return fd


class TrustedDisk(diskcache.Disk):
    """diskcache's serialiser, restricted so that it never calls ``pickle``.

    Keys are str (stored raw); values are bytes (raw in SQLite, or a 0600 file) or the
    counters' ints (raw). Rows in any other mode are refused on read.
    """

    def put(self, key):
        if type(key) is not str:
            raise TypeError(f"cache keys must be str (got {type(key).__name__})")
        return key, True

    def get(self, key, raw):
        # a non-raw key is a pickle, which only another writer could have put there
        return key if raw and type(key) is str else REFUSED_KEY

    def store(self, value, read, key=UNKNOWN):
        if type(value) is int:  # the counters: a raw SQLite integer
            return 0, MODE_RAW, None, value
        if type(value) is not bytes:
            raise TypeError(f"kernelrt's cache stores bytes only (got {type(value).__name__})")
        if len(value) < self.min_file_size:
            return 0, MODE_RAW, None, sqlite3.Binary(value)
        filename, full_path = self.filename(key, value)
        self._write_private(full_path, value)
        return len(value), MODE_BINARY, filename, None

    def _write_private(self, full_path: str, value: bytes) -> None:
        make_private_dirs(Path(full_path).parent)
        fd = os.open(full_path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC, 0o600)
        with open(fd, "wb") as f:
            f.write(value)

    def fetch(self, mode, filename, value, read):
        if mode == MODE_RAW and type(value) in (bytes, sqlite3.Binary, int):
            return bytes(value) if type(value) is not int else value
        if mode == MODE_BINARY and filename is not None:
            handle = self._open_value_file(filename)
            if read:
                return handle
            with handle:
                return handle.read()
        raise UnsafeCacheError(f"refusing a cache row in diskcache mode {mode} (it would be unpickled or decoded)")

    def _open_value_file(self, filename: str):
        if not _VALUE_FILE.fullmatch(filename):
            raise UnsafeCacheError(f"refusing a cache row naming the file {filename!r}")
        shard = os.path.join(self._directory, filename[:2])
        problem = item_problem(shard, directory=True) or item_problem(os.path.join(shard, filename[3:5]), directory=True)
        if problem:
            raise UnsafeCacheError(problem)
        fd = open_private(os.path.join(self._directory, filename), os.O_RDONLY)
        return open(fd, "rb")

    def remove(self, file_path):
        # a forged row could name any file for eviction to delete: only our own names
        if isinstance(file_path, str) and _VALUE_FILE.fullmatch(file_path):
            super().remove(file_path)


class TrustedCache(diskcache.Cache):
    """A diskcache.Cache that serialises with :class:`TrustedDisk` and checks its
    database files before every new SQLite connection (one per thread and process)."""

    def __init__(self, directory: str, timeout: float = 60, **settings):
        super().__init__(directory, timeout, disk=TrustedDisk, **settings)

    def __getstate__(self):
        return (self.directory, self.timeout)

    def get_trusted(self, key: str, default=None):
        """``get``, with a row TrustedDisk refuses read as ``default`` (never unpickled)."""
        try:
            return self.get(key, default)
        except UnsafeDatabaseError:
            raise
        except UnsafeCacheError:
            return default

    def str_keys(self) -> list[str]:
        """Every key, less the pickled ones (which only another writer could have made)."""
        return [key for key in self.iterkeys() if type(key) is str]

    @property
    def _con(self):
        local = self._local
        if getattr(local, "con", None) is None or getattr(local, "pid", None) != os.getpid():
            problem = db_problem(self._directory)
            if problem:
                raise UnsafeDatabaseError(problem)
        return super()._con
