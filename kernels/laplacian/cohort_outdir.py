"""``kernelrt cohort``'s output directory: checked before any work, and held by one run at a time.

* ``check_writable``: ``--out`` is created and a probe file written and removed before any
  work, so an unwritable directory fails at once (exit 2), not after a subject is computed.
* ``hold``: a lock on ``<out>/.kernelrt-cohort.lock`` for the whole run (``flock``, or
  ``LockFileEx`` on Windows, through ``filelock``); a second run into the same directory is
  refused with the holder's pid and host (``OutputInUse``). The lock is per host: runs on
  two hosts sharing ``--out`` over NFS are not kept apart on filesystems without lock support.
"""

from __future__ import annotations

import contextlib
import errno
import os
import socket
import stat
import sys
import uuid
from pathlib import Path

__all__ = ["LOCK_NAME", "OutputInUse", "UnsafeOutput", "check_writable", "hold"]

LOCK_NAME = ".kernelrt-cohort.lock"


class OutputInUse(RuntimeError):
    """Another run holds the output directory's lock."""


class UnsafeOutput(RuntimeError):
    """The output directory's lock file is a symlink, or another user's."""


def check_writable(out: Path) -> None:
    """Create ``out`` (and its parents) and write, then remove, a probe file in it; OSError if not."""
    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    probe = out / f".kernelrt-probe-{os.getpid()}-{uuid.uuid4().hex[:8]}"
    fd = os.open(probe, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    try:
        os.write(fd, b"kernelrt\n")
        os.fsync(fd)
    finally:
        os.close(fd)
        with contextlib.suppress(OSError):
            os.unlink(probe)


# Windows has no O_NOFOLLOW, O_CLOEXEC (its descriptors are not inherited anyway) or POSIX
# owners; O_BINARY keeps its C runtime from translating newlines.
_FLAGS = os.O_RDWR | os.O_CREAT | getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_CLOEXEC", 0) | getattr(os, "O_BINARY", 0)
_WINDOWS = sys.platform == "win32"
# Windows locks byte 0 (filelock's one-byte LockFileEx range) against reads by others too, so
# the holder's "pid host" starts after a pad byte there; a POSIX flock locks no bytes.
_RECORD_AT = 1 if _WINDOWS else 0


@contextlib.contextmanager
def hold(out: Path):
    """Hold ``<out>/.kernelrt-cohort.lock`` (not blocking) for the block.

    Raises:
        OutputInUse: another run holds it.
        UnsafeOutput: the lock file is a symlink, another user's, or writable by others.
    """
    from filelock import lock_descriptor  # only when the command runs

    path = Path(out) / LOCK_NAME
    fd = _open_lock(path, out)
    try:
        if not lock_descriptor(fd, blocking=False):
            holder = _read_at(fd, _RECORD_AT).split()
            who = f"pid {holder[0]} on {holder[1]}" if len(holder) >= 2 else "a process whose pid is not recorded"
            raise OutputInUse(
                f"--out {out} is in use by another kernelrt cohort run ({who}): wait for it to finish, "
                "or give another --out")
        os.ftruncate(fd, 0)
        _write_at(fd, 0, f" {os.getpid()} {socket.gethostname()}\n".encode())  # " ": the pad byte
        try:
            yield path
        finally:
            with contextlib.suppress(OSError):
                os.ftruncate(fd, 0)  # the lock goes with the descriptor; the pid goes here
    finally:
        os.close(fd)


def _read_at(fd: int, offset: int) -> str:
    # os.pread is POSIX-only; this descriptor is this process's own, so seeking is safe
    os.lseek(fd, offset, os.SEEK_SET)
    return os.read(fd, 200).decode(errors="replace")


def _write_at(fd: int, offset: int, data: bytes) -> None:
    os.lseek(fd, offset, os.SEEK_SET)
    os.write(fd, data)


def _open_lock(path: Path, out) -> int:
    """The lock file, opened without following a symlink (the pid ``hold`` writes would
    truncate whatever a planted link names) and refused if another user owns it or can
    write it (they could hold it forever, or rewrite it)."""
    if _WINDOWS and os.path.islink(path):  # no O_NOFOLLOW there; making a link needs privilege
        raise UnsafeOutput(f"--out {out}: {path} is a symlink; remove it if no run is using {out}")
    try:
        fd = os.open(path, _FLAGS, 0o644)
    except OSError as e:
        if e.errno != errno.ELOOP:  # what O_NOFOLLOW gives for a symlink
            raise
        raise UnsafeOutput(f"--out {out}: {path} is a symlink; remove it if no run is using {out}") from None
    problem = _problem(os.fstat(fd))
    if problem:
        os.close(fd)
        raise UnsafeOutput(f"--out {out}: {path} {problem}; remove it if no run is using {out}")
    return fd


def _problem(st) -> str | None:
    if not stat.S_ISREG(st.st_mode):
        return "is not a regular file"
    if _WINDOWS:  # ACLs, not POSIX owners and modes: Windows reports every file as uid 0, mode 666
        return None
    if st.st_uid not in (os.geteuid(), 0):
        return f"is owned by uid {st.st_uid}"
    return "is writable by other users" if st.st_mode & (stat.S_IWGRP | stat.S_IWOTH) else None
