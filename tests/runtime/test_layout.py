"""The code's shape, checked: what docs/architecture.md promises a maintainer.

No import cycle (function-level imports included), the kernel library on kernelrt's
public API only, numba's private names in one module, the environment read in one
module, and no module longer than a reader takes in at once.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

import kernelrt

ROOT = Path(__file__).resolve().parents[2]
PACKAGES = {"kernelrt": ROOT / "kernelrt", "kernelrt.kernels": ROOT / "kernels"}
MAX_LINES = 400
# Private numba / numba-cuda names kernelrt needs; numba_internals.py lists each one.
NUMBA_PRIVATE = {"_compile_for_args", "_codelibrary", "_reduce", "_rebuild", "_reduce_states",
                 "_cubin_cache", "_linkerinfo_cache", "_Kernel", "_defn",
                 "_linking_files", "_max_registers", "_cufunc_cache"}


def _modules() -> dict[str, Path]:
    found = {}
    for package, directory in PACKAGES.items():
        for path in directory.rglob("*.py"):
            parts = [package, *path.relative_to(directory).with_suffix("").parts]
            if parts[-1] == "__init__":
                parts.pop()
            found[".".join(parts)] = path
    return found


MODULES = _modules()


def _imported(module: str, path: Path) -> set[str]:
    """The project modules ``module`` imports anywhere in its body (functions included;
    ``if TYPE_CHECKING:`` blocks excluded)."""
    is_package = path.name == "__init__.py"
    out = set()
    tree = ast.parse(path.read_text())
    for block in [n for n in ast.walk(tree) if isinstance(n, ast.If) and ast.unparse(n.test) == "TYPE_CHECKING"]:
        block.body = []  # imports for type checkers only: never run, so no cycle
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            names = [a.name for a in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = module.split(".")
            if node.level:
                base = base[: len(base) - node.level + is_package]
                prefix = ".".join(base + ([node.module] if node.module else []))
            else:
                prefix = node.module
            names = [f"{prefix}.{a.name}" for a in node.names]
        else:
            continue
        for name in names:
            while name not in MODULES and "." in name:  # `from pkg import name`: the package
                name = name.rsplit(".", 1)[0]
            if name in MODULES and name != module:
                out.add(name)
    return out


def test_the_import_graph_has_no_cycle():
    graph = {m: _imported(m, p) for m, p in MODULES.items()}
    state: dict[str, int] = {}  # 1: on the current path, 2: done

    def visit(m, path):
        state[m] = 1
        for n in sorted(graph[m]):
            if state.get(n) == 1:
                pytest.fail("import cycle: " + " -> ".join(path[path.index(n):] + [n]))
            if n not in state:
                visit(n, path + [n])
        state[m] = 2

    for m in sorted(graph):
        if m not in state:
            visit(m, [m])
    assert len(graph) > 40  # the walk saw the whole project


def test_the_runtime_never_imports_the_kernel_library_but_for_the_cli():
    for m, p in MODULES.items():
        # the CLI and the integrations are front ends over both (docs/architecture.md)
        if m.startswith(("kernelrt.kernels", "kernelrt.integrations")) or m in ("kernelrt.cli",):
            continue
        assert not {n for n in _imported(m, p) if n.startswith("kernelrt.kernels")}, m


# kernelrt's public modules beside the package itself: the optional Dask layer (it imports
# dask, so ``import kernelrt`` cannot re-export it).
PUBLIC_MODULES = {"kernelrt", "kernelrt.distributed"}


def test_the_kernel_library_uses_only_kernelrts_public_api():
    public = set(kernelrt.__all__)
    for m, p in MODULES.items():
        if not m.startswith("kernelrt.kernels"):
            continue
        runtime = {n for n in _imported(m, p) if not n.startswith("kernelrt.kernels") and n not in PUBLIC_MODULES}
        assert not runtime, f"{m} imports kernelrt's internals {sorted(runtime)}"
        for node in ast.walk(ast.parse(p.read_text())):
            if isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name) and node.value.id == "kernelrt":
                assert node.attr in public | {"kernels"}, f"{m} uses kernelrt.{node.attr}, which is not public"


def test_numbas_private_names_appear_only_in_numba_internals():
    for m, p in MODULES.items():
        if m == "kernelrt.numba_internals":
            continue
        for node in ast.walk(ast.parse(p.read_text())):
            name = node.attr if isinstance(node, ast.Attribute) else getattr(node, "name", None)
            if isinstance(node, ast.Call) and getattr(node.func, "id", None) in ("getattr", "setattr", "hasattr"):
                name = getattr(node.args[1], "value", None) if len(node.args) > 1 else None
            if isinstance(node, (ast.Attribute, ast.alias, ast.Call)) and name in NUMBA_PRIVATE:
                pytest.fail(f"{m}:{node.lineno} uses numba's private {name}; go through numba_internals")


def test_only_config_reads_the_environment():
    for m, p in MODULES.items():
        if m == "kernelrt.config":
            continue
        for node in ast.walk(ast.parse(p.read_text())):
            if isinstance(node, ast.Attribute) and node.attr in ("environ", "getenv") and \
                    isinstance(node.value, ast.Name) and node.value.id == "os":
                # handing the environment to a child process is not reading a setting
                line = p.read_text().splitlines()[node.lineno - 1]
                assert "dict(os.environ" in line, f"{m}:{node.lineno} reads the environment; add a setting to config.py"


def test_no_comment_points_outside_the_repository():
    # the documents the code was first written from are not shipped; docs/ is
    outside = ("specs/", "DESIGN.md", "STYLE.md", "§")
    for m, p in MODULES.items():
        for n, line in enumerate(p.read_text().splitlines(), 1):
            assert not any(s in line for s in outside), f"{m}:{n} points outside the repository: {line.strip()}"


@pytest.mark.parametrize("module", sorted(MODULES))
def test_modules_stay_small(module):
    n = len(MODULES[module].read_text().splitlines())
    assert n <= MAX_LINES, f"{module} has {n} lines; split it by concern"
