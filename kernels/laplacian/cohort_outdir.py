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
import os
import socket
import uuid
from pathlib import Path

__all__ = ["LOCK_NAME", "OutputInUse", "check_writable", "hold"]

LOCK_NAME = ".kernelrt-cohort.lock"


class OutputInUse(RuntimeError):
    """Another run holds the output directory's lock."""


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
    """Hold ``<out>/.kernelrt-cohort.lock`` (``flock``, not blocking) for the block; OutputInUse if held."""
    import fcntl  # POSIX only, like the command's Dask and numba workers

    path = Path(out) / LOCK_NAME
    fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o666)
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
