"""``kernelrt cohort``'s output directory: checked before any work, and held by one run at a time.

* ``check_writable``: ``--out`` is created and a probe file written and removed before any
  work, so an unwritable directory fails at once (exit 2), not after a subject is computed.
* ``hold``: an ``flock`` on ``<out>/.kernelrt-cohort.lock`` for the whole run; a second run
  into the same directory is refused with the holder's pid (``OutputInUse``). ``flock``
  is advisory and per host: runs on two hosts sharing ``--out`` over NFS are not kept apart
  on filesystems without lock support.
"""

from __future__ import annotations

import contextlib
import errno
import os
import socket
import uuid
import stat
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


@contextlib.contextmanager
def hold(out: Path):
    """Hold ``<out>/.kernelrt-cohort.lock`` (``flock``, not blocking) for the block.

    Raises:
        OutputInUse: another run holds it.
        UnsafeOutput: the lock file is a symlink, another user's, or writable by others.
    """
    import fcntl  # POSIX only, like the command's Dask and numba workers

    path = Path(out) / LOCK_NAME
    fd = _open_lock(path, out)
    try:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            holder = os.pread(fd, 200, 0).decode(errors="replace").split()
            who = f"pid {holder[0]} on {holder[1]}" if len(holder) >= 2 else "a process whose pid is not recorded"
            raise OutputInUse(
                f"--out {out} is in use by another kernelrt cohort run ({who}): wait for it to finish, "
                "or give another --out") from None
        os.ftruncate(fd, 0)
        os.pwrite(fd, f"{os.getpid()} {socket.gethostname()}\n".encode(), 0)
        try:
            yield path
        finally:
            with contextlib.suppress(OSError):
                os.ftruncate(fd, 0)  # the lock goes with the descriptor; the pid goes here
    finally:
        os.close(fd)


def _open_lock(path: Path, out) -> int:
    """The lock file, opened without following a symlink (the pid ``hold`` writes would
    truncate whatever a planted link names) and refused if another user owns it or can
    write it (they could hold it forever, or rewrite it)."""
    try:
        fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW | os.O_CLOEXEC, 0o644)
    except OSError as e:
        if e.errno != errno.ELOOP:  # what O_NOFOLLOW gives for a symlink
            raise
        raise UnsafeOutput(f"--out {out}: {path} is a symlink; remove it if no run is using {out}") from None
    st = os.fstat(fd)
    problem = ("is not a regular file" if not stat.S_ISREG(st.st_mode)
               else f"is owned by uid {st.st_uid}" if st.st_uid not in (os.geteuid(), 0)
               else "is writable by other users" if st.st_mode & (stat.S_IWGRP | stat.S_IWOTH) else None)
    if problem:
        os.close(fd)
        raise UnsafeOutput(f"--out {out}: {path} {problem}; remove it if no run is using {out}")
    return fd
