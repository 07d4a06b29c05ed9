"""Every code block of README.md and docs/ runs, as printed (tests/support/doc_blocks.py).

A block that cannot run on a CPU machine without a network says why on the line above its
fence; the few that do are listed by ``test_blocks_that_do_not_run_say_why``.
"""

from __future__ import annotations

import os

import pytest
from tests.support import doc_blocks

BLOCKS = doc_blocks.blocks()
RUNNABLE = [b for b in BLOCKS if b.mark is None]


@pytest.fixture(scope="module")
def shared_cache(tmp_path_factory):
    # one cache for every block: a kernel compiles once per session, as it would for a user
    return tmp_path_factory.mktemp("doc-blocks-cache")


@pytest.mark.parametrize("block", RUNNABLE, ids=[b.id for b in RUNNABLE])
def test_block_runs(block, shared_cache, tmp_path):
    env = {**os.environ, "KERNELRT_CACHE_DIR": str(shared_cache), "HOME": os.environ.get("HOME", str(tmp_path))}
    env.pop("NUMBA_ENABLE_CUDASIM", None)
    doc_blocks.run(block, tmp_path, env)


def test_blocks_that_do_not_run_say_why():
    marked = [b for b in BLOCKS if b.mark is not None]
    for b in marked:
        assert b.mark == "gpu" or b.mark.removeprefix("not run:").strip(), f"{b.id}: <!-- not run: --> needs a reason"
    listing = "\n".join(f"{b.id}: {b.mark}" for b in marked)
    # The Python examples are what users copy: nearly all of them must run. Shell blocks are
    # more often installs, the test suite itself or cluster commands, which cannot run here.
    python = [b for b in BLOCKS if b.kind == "python"]
    assert sum(b.mark is not None for b in python) <= len(python) // 4, listing
    assert len(marked) <= len(BLOCKS) // 2, listing


def test_the_collector_finds_blocks_and_marks():
    """The collector itself: a fence, a marked fence, an output block, a shell block."""
    assert BLOCKS, "no code blocks found in README.md and docs/"
    text = (
        "```python\nprint(1)\n```\n"
        "<!-- not run: needs the network -->\n```bash\npip install x\n```\n"
        "```text\nout\n```\n"
        "```bash\n$ kernelrt info \\\n   --json\npip install y\n```\n"
    )
    import pathlib
    import tempfile

    with tempfile.TemporaryDirectory(dir=doc_blocks.ROOT / "tests" / "docs") as d:
        page = pathlib.Path(d) / "page.md"
        page.write_text(text)
        found = doc_blocks.blocks([page])
    assert [(b.kind, b.mark) for b in found] == [("python", None), ("shell", "not run: needs the network"), ("shell", None)]
    assert doc_blocks.shell_commands(found[2].text) == ["kernelrt info     --json"]
