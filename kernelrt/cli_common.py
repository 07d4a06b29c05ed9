"""What every ``kernelrt`` command shares: a reader that stops early ends the command quietly.

``kernelrt cache list | head -1``: ``head`` exits after one line, and the next write to the
pipe raises ``BrokenPipeError``; left alone, Python prints a traceback, and another one when
it flushes standard output at exit. ``run_quietly_on_closed_stdout`` follows the recipe of
the Python documentation (the ``signal`` module's note on SIGPIPE): point standard output at
the null device, so nothing more is written or reported, and exit with 141, the status a
shell reports for a command that SIGPIPE ended (128 + 13), as ``seq 100000 | head -1`` does.
``Parser`` lets help and ``--version`` text meet the same end: argparse itself would swallow
the error, so ``kernelrt --help | head -1`` exited 0 or 141 as Python buffered stdout or not.
"""

from __future__ import annotations

import argparse
import os
import sys
from typing import Callable

__all__ = ["CLOSED_STDOUT_STATUS", "Parser", "run_quietly_on_closed_stdout"]

CLOSED_STDOUT_STATUS = 141


class Parser(argparse.ArgumentParser):
    """An ``ArgumentParser`` (its subparsers too) whose help reaches ``run_quietly_on_closed_stdout``'s
    closed-pipe handling instead of argparse's silent ``except OSError``."""

    def _print_message(self, message, file=None):
        if not message:
            return
        try:
            (file or sys.stderr).write(message)
        except BrokenPipeError:
            raise
        except (AttributeError, OSError):  # no stream at all (pythonw): what argparse does
            pass


def run_quietly_on_closed_stdout(command: Callable[[], int]) -> int:
    """``command()``'s exit status, or ``CLOSED_STDOUT_STATUS`` when its reader closed standard output.

    Standard output is flushed before returning, so a closed pipe is found here and not at
    interpreter exit; ``SystemExit`` (argparse's ``--help`` and errors) passes through after
    that flush.
    """
    try:
        try:
            return command()
        finally:
            if sys.stdout is not None:
                sys.stdout.flush()  # raises BrokenPipeError now when the reader has gone
    except BrokenPipeError:
        _point_stdout_at_devnull()
        return CLOSED_STDOUT_STATUS


def _point_stdout_at_devnull() -> None:
    """What is still buffered, and the flush at exit, go nowhere instead of raising again."""
    devnull = os.open(os.devnull, os.O_WRONLY)
    try:
        os.dup2(devnull, sys.stdout.fileno())
    except (AttributeError, OSError, ValueError):  # a stream without a descriptor (a test's capture)
        sys.stdout = open(os.devnull, "w")  # noqa: SIM115 -- lives until the process exits
    finally:
        os.close(devnull)
