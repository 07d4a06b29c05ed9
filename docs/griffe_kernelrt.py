"""Griffe extension for the docs build: show kernelrt's package layout as Python sees it.

Griffe reads the sources without importing them and finds packages by their directory
layout. Two things of kernelrt's layout escape it:

* ``kernelrt.kernels`` lives in the top-level directory ``kernels/``, mapped by
  ``[tool.setuptools.package-dir]`` in pyproject.toml. On its own Griffe loads
  ``kernelrt`` from ``kernelrt/`` with no ``kernels`` subpackage (the editable install
  does not help: Griffe reads only its top-level mapping), so
  ``::: kernelrt.kernels.sfap`` is "not found". This extension visits ``kernels/``
  (statically, subpackages included) and attaches it as ``kernelrt.kernels``. If the
  package already has ``kernels`` (an installed, non-editable copy), it does nothing.
* ``kernelrt`` exports its public names lazily (PEP 562 ``__getattr__`` over the
  ``_EXPORTS`` table, so that ``import kernelrt`` imports neither numba nor a GPU
  library). Griffe sees no such members. This extension reads the table from the source
  and adds each name as an exported alias of the object that defines it, in table order.

Enabled in mkdocs.yml under the Python handler's options:
``extensions: [docs/griffe_kernelrt.py]``.
"""

from __future__ import annotations

import ast
from pathlib import Path

import griffe

# dotted package name -> its directory, relative to the repository root
PACKAGE_DIRS = {"kernelrt.kernels": "kernels"}
# module -> name of its {public name: defining submodule} table
LAZY_EXPORTS = {"kernelrt": "_EXPORTS"}


class KernelrtLayout(griffe.Extension):
    """Attach mapped package directories and lazily exported names (see the module docstring)."""

    def on_package(self, *, pkg: griffe.Module, loader: griffe.GriffeLoader, **kwargs) -> None:
        if pkg.filepath is None or isinstance(pkg.filepath, list):
            return
        root = Path(pkg.filepath).resolve().parent.parent  # <root>/<package>/__init__.py
        for dotted, relative in PACKAGE_DIRS.items():
            parent_path, _, name = dotted.rpartition(".")
            if parent_path.split(".")[0] != pkg.path:
                continue
            parent = pkg if parent_path == pkg.path else pkg.get_member(parent_path.split(".", 1)[1])
            directory = root / relative
            if name in parent.members or not (directory / "__init__.py").is_file():
                continue
            module = _load_tree(loader, name, directory, parent)
            loader.expand_exports(module)
            loader.expand_wildcards(module, external=False)
        for path, table in LAZY_EXPORTS.items():
            if path == pkg.path or path.startswith(pkg.path + "."):
                module = pkg if path == pkg.path else pkg.get_member(path.split(".", 1)[1])
                _add_lazy_exports(module, table)


def _visit(loader: griffe.GriffeLoader, name: str, path: Path, parent: griffe.Module) -> griffe.Module:
    code = path.read_text(encoding="utf-8-sig")
    loader.lines_collection[path] = code.splitlines(keepends=False)
    module = griffe.visit(
        name,
        filepath=path,
        code=code,
        extensions=loader.extensions,
        parent=parent,
        docstring_parser=loader.docstring_parser,
        docstring_options=loader.docstring_options,
        lines_collection=loader.lines_collection,
        modules_collection=loader.modules_collection,
    )
    parent.set_member(name, module)
    return module


def _load_tree(loader: griffe.GriffeLoader, name: str, directory: Path, parent: griffe.Module) -> griffe.Module:
    package = _visit(loader, name, directory / "__init__.py", parent)
    for path in sorted(directory.iterdir()):
        if path.is_dir() and path.name.isidentifier() and (path / "__init__.py").is_file():
            _load_tree(loader, path.name, path, package)
        elif path.suffix == ".py" and path.name != "__init__.py" and path.stem.isidentifier():
            _visit(loader, path.stem, path, package)
    return package


def _add_lazy_exports(module: griffe.Module, table: str) -> None:
    if module.filepath is None or isinstance(module.filepath, list):
        return
    tree = ast.parse(Path(module.filepath).read_text(encoding="utf-8-sig"))
    entries = []
    for node in tree.body:
        target = node.targets[0] if isinstance(node, ast.Assign) and len(node.targets) == 1 else getattr(node, "target", None)
        if isinstance(target, ast.Name) and target.id == table and isinstance(node.value, ast.Dict):
            for key, value in zip(node.value.keys, node.value.values):
                if isinstance(key, ast.Constant) and isinstance(value, ast.Constant):
                    entries.append((str(key.value), str(value.value), key.lineno))
    names = []
    for name, submodule, lineno in entries:
        names.append(name)
        if name not in module.members:
            alias = griffe.Alias(name, f"{module.path}.{submodule}.{name}", lineno=lineno, endlineno=lineno, parent=module)
            module.set_member(name, alias)
    if names:
        known = [str(export) for export in module.exports or []]
        module.exports = names + [export for export in known if export not in names]
