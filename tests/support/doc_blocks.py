"""The fenced code blocks of README.md and docs/*.md, and how each one is run.

The convention (also in docs/contributing.md): a ```python block runs as a script in a
fresh directory; in a ```bash/```sh/```console block each line that starts with
``kernelrt `` or ``python `` runs; a block that cannot run here carries, on the line
directly above its fence, ``<!-- not run: reason -->`` or ``<!-- gpu -->`` (run by
tests/gpu where a GPU is present); ```text/json/toml/yaml/csv blocks and fences without a
language are output or data and never run.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

from tests.support.layers import ROOT

PAGES = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
CODE = {"python": "python", "py": "python", "bash": "shell", "sh": "shell", "console": "shell", "shell": "shell"}
_FENCE = re.compile(r"^(\s*)```\s*([\w+-]*)\s*$")
_MARK = re.compile(r"^\s*<!--\s*(not run:\s*(?P<reason>.*?)|(?P<gpu>gpu))\s*-->\s*$")
# What a shell line runs: the kernelrt command or a Python; installs and the like are not run.
_RUNS = re.compile(r"^(kernelrt|python)(\s|$)")
# Checkout folders a shell example may name (tools/replot.py, bench/results/...), linked
# into the block's working directory so what it writes lands there, not in the checkout.
_LINKED = ("tools", "bench", "tests", "docs")


@dataclass(frozen=True)
class Block:
    page: Path
    line: int  # 1-based line of the opening fence
    kind: str  # "python" or "shell"
    text: str
    mark: str | None  # None (runs), "gpu", or "not run: reason"

    @property
    def id(self) -> str:
        return f"{self.page.relative_to(ROOT).as_posix()}:{self.line}"


def blocks(pages=PAGES) -> list[Block]:
    """Every python and shell block of ``pages``, in order."""
    found = []
    for page in pages:
        lines = page.read_text(encoding="utf-8").splitlines()
        i = 0
        while i < len(lines):
            m = _FENCE.match(lines[i])
            if not m:
                i += 1
                continue
            indent, lang, start = m.group(1), m.group(2).lower(), i
            i += 1
            body = []
            while i < len(lines) and lines[i].strip() != "```":
                body.append(lines[i][len(indent):] if lines[i].startswith(indent) else lines[i])
                i += 1
            i += 1
            if lang not in CODE:
                continue
            above = _MARK.match(lines[start - 1]) if start else None
            mark = None
            if above:
                mark = "gpu" if above.group("gpu") else f"not run: {above.group('reason')}"
            found.append(Block(page, start + 1, CODE[lang], "\n".join(body) + "\n", mark))
    return found


def shell_commands(text: str) -> list[str]:
    """The lines of a shell block that run: ``kernelrt ...`` and ``python ...`` (prompts stripped)."""
    joined, pending = [], ""
    for raw in text.splitlines():
        line = raw.rstrip()
        if line.endswith("\\"):
            pending += line[:-1] + " "
            continue
        joined.append((pending + line).strip())
        pending = ""
    commands = []
    for line in joined:
        line = line.removeprefix("$ ").strip()
        if _RUNS.match(line):
            commands.append(line)
    return commands


def run(block: Block, workdir: Path, env: dict, timeout: float = 600) -> None:
    """Runs ``block`` in ``workdir``; raises AssertionError with its output if it fails."""
    for name in _LINKED:
        if not (workdir / name).exists():
            (workdir / name).symlink_to(ROOT / name, target_is_directory=True)
    env = {**env, "PYTHONPATH": os.pathsep.join(filter(None, [str(ROOT), env.get("PYTHONPATH")])),
           "MPLBACKEND": "Agg"}
    if block.kind == "python":
        script = workdir / "block.py"
        script.write_text(block.text, encoding="utf-8")
        _check(block, block.text, [sys.executable, str(script)], workdir, env, timeout)
        return
    commands = shell_commands(block.text)
    assert commands, f"{block.id}: a shell block with nothing to run needs <!-- not run: reason -->"
    python = f'"{sys.executable}"'
    for command in commands:
        # the kernelrt and python of this test run, whatever PATH holds
        line = re.sub(r"^kernelrt\b", f"{python} -m kernelrt", command)
        line = re.sub(r"^python\b", python, line)
        line = re.sub(r"\|\s*python\b", f"| {python}", line)
        _check(block, command, ["bash", "-o", "pipefail", "-c", line], workdir, env, timeout)


def _check(block: Block, what: str, argv: list, cwd: Path, env: dict, timeout: float) -> None:
    done = subprocess.run(argv, cwd=cwd, env=env, capture_output=True, text=True, timeout=timeout, check=False)
    assert done.returncode == 0, (
        f"{block.id} failed (exit {done.returncode}):\n{what}\n--- stdout\n{done.stdout[-3000:]}"
        f"\n--- stderr\n{done.stderr[-3000:]}"
    )
