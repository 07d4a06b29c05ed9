"""The adversarial layer: bad input, faults and a second local user.

Each test here reproduces one defect an adversarial review found (issue 25) and failed
before its fix: stale cache entries, another user's files in the cache's path, workers
killed mid-cohort, degenerate or non-finite operators, truncated or lying mesh files,
unwritable or shared outputs, a broken start-up hook. Tests that need a second local user
create one where they can (root with ``useradd``) and skip with the reason where not.
"""

import os
import pwd
import shutil
import subprocess

import pytest

OTHER_USER = "krtother"


@pytest.fixture(scope="session")
def other_uid() -> int:
    """The uid of a second local user, ``krtother``, made once where possible (root with
    ``useradd``); tests give it files with ``os.chown`` rather than run as it."""
    if not hasattr(os, "geteuid") or os.geteuid() != 0:
        pytest.skip("a second local user needs root (to create it and to chown files to it)")
    try:
        return pwd.getpwnam(OTHER_USER).pw_uid
    except KeyError:
        pass
    if not shutil.which("useradd"):
        pytest.skip(f"no useradd to create the local user {OTHER_USER}")
    made = subprocess.run(["useradd", "--no-create-home", "--shell", "/usr/sbin/nologin", OTHER_USER],
                          capture_output=True, text=True)
    if made.returncode not in (0, 9):  # 9: it already exists (made meanwhile by another test process)
        pytest.skip(f"cannot create the local user {OTHER_USER}: {made.stderr.strip() or made.returncode}")
    return pwd.getpwnam(OTHER_USER).pw_uid
