"""Type checkers see kernelrt's API: ``py.typed``, every export visible, typed signatures.

``tests/typing/user_script.py`` is a user's script against the public API; mypy checks it
as a user's CI would, with ``--strict``: a call to a function without annotations
(``--disallow-untyped-calls``), an ``Any`` returned where a type is declared
(``--warn-return-any``) or an ``assert_type`` that does not hold is an error. kernelrt's
own modules are analysed for their signatures but not reported on
(``--follow-imports=silent``, as for an installed package), so the check is about what
users see. mypy finds kernelrt in a copy of the installed layout (kernels/ at
kernelrt/kernels/), since it cannot follow the editable install's import hook.
"""

from __future__ import annotations

import ast
import inspect
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

import kernelrt

ROOT = Path(__file__).resolve().parents[2]
SCRIPT = ROOT / "tests" / "typing" / "user_script.py"


@pytest.fixture(scope="module")
def installed_layout(tmp_path_factory) -> Path:
    """kernelrt as a wheel lays it out (kernelrt/kernels/ inside the package), in a folder."""
    site = tmp_path_factory.mktemp("site")
    skip = shutil.ignore_patterns("__pycache__", "*.pyc")
    shutil.copytree(ROOT / "kernelrt", site / "kernelrt", ignore=skip)
    shutil.copytree(ROOT / "kernels", site / "kernelrt" / "kernels", ignore=skip)
    return site


def _mypy(site: Path, script: Path, cwd: Path) -> subprocess.CompletedProcess:
    pytest.importorskip("mypy", reason="mypy is not installed (pip install -e '.[test]')")
    env = {**os.environ, "MYPYPATH": str(site)}
    return subprocess.run(
        [sys.executable, "-m", "mypy", "--strict", "--follow-imports=silent", "--no-error-summary",
         "--cache-dir", str(cwd / ".mypy_cache"), "--python-version", f"{sys.version_info[0]}.{sys.version_info[1]}",
         str(script)],
        cwd=cwd, env=env, capture_output=True, text=True,
    )


def test_both_packages_ship_a_py_typed_marker():
    assert (ROOT / "kernelrt" / "py.typed").is_file()
    assert (ROOT / "kernels" / "py.typed").is_file()  # kernelrt.kernels


@pytest.mark.slow
def test_a_user_script_passes_mypy_strict(installed_layout, tmp_path):
    result = _mypy(installed_layout, SCRIPT, tmp_path)
    assert result.returncode == 0, result.stdout + result.stderr


@pytest.mark.slow
def test_mypy_catches_a_users_mistakes(installed_layout, tmp_path):
    # The same check on wrong code: it must fail, naming each mistake (not an all-Any API).
    wrong = tmp_path / "wrong.py"
    wrong.write_text(
        "import kernelrt\n"
        "from kernelrt.kernels import laplacian as lap\n"
        "backend = kernelrt.get_backend(3)\n"
        "kernelrt.kernal\n"
        "pairs = lap.eigenpairs(None, None, k='8')\n"
        "route: int = pairs.route\n"
    )
    result = _mypy(installed_layout, wrong, tmp_path)
    out = result.stdout
    assert result.returncode == 1, out + result.stderr
    assert 'Argument 1 to "get_backend" has incompatible type "int"' in out
    assert 'Module has no attribute "kernal"' in out
    assert 'Argument "k" to "eigenpairs" has incompatible type "str"; expected "int"' in out
    assert 'Incompatible types in assignment (expression has type "str", variable has type "int")' in out


@pytest.mark.slow
def test_the_user_script_runs(tmp_path):
    env = {**os.environ, "KERNELRT_CACHE_DIR": str(tmp_path / "kcache")}
    result = subprocess.run([sys.executable, str(SCRIPT)], env=env, capture_output=True, text=True, timeout=600)
    assert result.returncode == 0, result.stderr[-3000:]


def test_type_checkers_see_every_lazy_export():
    # kernelrt/__init__.py resolves names on first use; its TYPE_CHECKING block must import
    # each one, from the module __getattr__ would, as an explicit re-export ("X as X").
    tree = ast.parse((ROOT / "kernelrt" / "__init__.py").read_text())
    block = next(node for node in tree.body if isinstance(node, ast.If) and ast.unparse(node.test) == "TYPE_CHECKING")
    seen = {}
    for node in ast.walk(block):
        if isinstance(node, ast.ImportFrom):
            for alias in node.names:
                assert alias.asname == alias.name, f"{alias.name} is not re-exported ('{alias.name} as {alias.name}')"
                seen[alias.name] = node.module
    assert seen == kernelrt._EXPORTS
    assert sorted(seen) + ["__version__"] == kernelrt.__all__


def _public_routines():
    from tests.runtime.test_docstrings import MODULES, _documentable, _exports, _members, _module

    for module_name in MODULES:
        module = _module(module_name)
        for name in _exports(module):
            value = getattr(module, name)
            if not _documentable(value):
                continue
            if inspect.isclass(value):
                if "__init__" in vars(value):
                    yield f"{module_name}.{name}.__init__", value.__init__
                for qualified, member in _members(value):
                    yield qualified, member.fget if isinstance(member, property) else member
            else:
                yield f"{module_name}.{name}", value


# SpectralBrain calls these NumPy look-alikes (its backend protocol); users do not.
_PROTOCOL = "kernelrt.integrations.spectralbrain.KernelrtBackend."
_NUMPY_MIRRORS = {"array", "zeros", "ones", "eye", "matmul", "exp", "log", "sqrt", "sum", "mean", "clip", "norm",
                  "argsort", "concatenate", "stack", "linspace", "logspace", "sparse_matrix"}


def test_every_public_function_declares_its_return_type():
    # mypy --strict refuses a call to a function without annotations, and a missing return
    # type makes every result Any: each public function and method declares one (Any where
    # it is a device array of whichever library the backend uses).
    missing = []
    for qualified, routine in _public_routines():
        if not inspect.isfunction(routine):
            continue  # slot descriptors, builtins
        if qualified.startswith(_PROTOCOL) and qualified.rsplit(".", 1)[1] in _NUMPY_MIRRORS:
            continue
        # mypy counts an __init__ with annotated parameters as typed (its "-> None" implied)
        typed = routine.__annotations__ if qualified.endswith(".__init__") else "return" in routine.__annotations__
        if not typed:
            missing.append(qualified)
    assert not missing, "no return annotation:\n  " + "\n  ".join(sorted(missing))
