"""Every public name has a docstring: what ``help()`` and the API pages show a user.

Public means: each name in the ``__all__`` of kernelrt, of the kernel families and of the
optional modules (``kernelrt.distributed``, ``kernelrt.integrations.*``), and for a class
each method and property whose name does not start with ``_``, unless the class inherits it
from ``object`` or a built-in type (``Exception.add_note``, ``tuple.count``). Constants and
other plain values have no docstring of their own and are not counted; a ``__slots__``
attribute counts as documented when its class's ``Attributes:`` section describes it.
"""

from __future__ import annotations

import builtins
import importlib
import inspect
import re
import sys

import pytest

MODULES = [
    "kernelrt",
    "kernelrt.kernels",
    "kernelrt.kernels.sfap",
    "kernelrt.kernels.laplacian",
    "kernelrt.distributed",
    "kernelrt.integrations",
    "kernelrt.integrations.myogen",
    "kernelrt.integrations.spectralbrain",
    "kernelrt.integrations.hooks",
]

_SLOT = type(inspect.getattr_static(type("_Slotted", (), {"__slots__": ("x",)}), "x"))  # member_descriptor
_BUILTIN_TYPES = {obj for obj in vars(builtins).values() if isinstance(obj, type)}


def _module(name: str):
    if name == "kernelrt.distributed":
        pytest.importorskip("distributed", reason="the distributed extra is not installed")
    return importlib.import_module(name)


def _exports(module) -> list[str]:
    # kernelrt.kernels has no __all__: its public names are those not starting with "_"
    names = getattr(module, "__all__", None)
    if names is None:
        names = [n for n, v in vars(module).items() if not n.startswith("_") and not inspect.ismodule(v)]
    return [n for n in names if not n.startswith("__")]


def _documentable(value) -> bool:
    return inspect.isclass(value) or inspect.isroutine(value) or isinstance(value, property)


def _members(cls):
    """(name, value) of each public member that ``cls`` or a kernelrt base defines."""
    for name in dir(cls):
        if name.startswith("_"):
            continue
        owner = next((base for base in cls.__mro__ if name in vars(base)), None)
        if owner is None or owner is object or owner in _BUILTIN_TYPES:
            continue
        value = inspect.getattr_static(owner, name)
        if isinstance(value, (staticmethod, classmethod)):
            value = value.__func__
        if _documentable(value) or isinstance(value, _SLOT):
            yield f"{owner.__module__}.{owner.__qualname__}.{name}", value


def _undocumented() -> tuple[list[str], int]:
    missing, seen = [], {}
    for module_name in MODULES:
        module = _module(module_name)
        for name in _exports(module):
            value = getattr(module, name)
            if not _documentable(value):
                continue
            seen[f"{module_name}.{name}"] = value
            if inspect.isclass(value):
                seen.update(_members(value))
    missing = [qualified for qualified, value in seen.items()
               if not (_in_attributes(qualified) if isinstance(value, _SLOT) else _own_doc(value))]
    return sorted(missing), len(seen)


def _in_attributes(qualified: str) -> bool:
    """Whether a ``__slots__`` attribute is described in its class's ``Attributes:`` section
    (a slot has no docstring of its own; help() and the API pages show the class's)."""
    owner_path, name = qualified.rsplit(".", 1)
    module_name, _, class_name = owner_path.rpartition(".")
    while module_name not in sys.modules:  # a nested qualname: Outer.Inner
        module_name, _, outer = module_name.rpartition(".")
        class_name = f"{outer}.{class_name}"
    owner = sys.modules[module_name]
    for part in class_name.split("."):
        owner = getattr(owner, part)
    doc = inspect.cleandoc(owner.__doc__ or "")
    section = doc.partition("\nAttributes:\n")[2]
    return re.search(rf"^\s+{re.escape(name)}( \(.*?\))?:", section, re.MULTILINE) is not None


def _own_doc(value) -> str:
    """The docstring ``help(value)`` shows, if the code wrote one.

    A class's own ``__doc__`` only: ``inspect.getdoc`` would give an undocumented exception
    ``Exception``'s text, and a dataclass or NamedTuple without one gets its signature
    (``DeviceInfo(id: int, ...)``). A method overriding a documented one inherits its text
    (``inspect.getdoc``), as ``help()`` shows it.
    """
    if inspect.isclass(value):
        doc = value.__doc__ or ""
        return "" if doc.startswith(f"{value.__name__}(") else doc.strip()
    if isinstance(value, property):
        return (value.__doc__ or "").strip()
    return (inspect.getdoc(value) or "").strip()


def test_every_public_name_has_a_docstring():
    missing, counted = _undocumented()
    assert counted > 150  # the walk found the API (it is not vacuously empty)
    assert not missing, f"{len(missing)} of {counted} public names lack a docstring:\n  " + "\n  ".join(missing)


def test_the_walk_counts_a_member_once_under_the_class_that_defines_it():
    from kernelrt import CPUBackend

    members = dict(_members(CPUBackend))
    assert "kernelrt.backend.Backend.check_available" in members  # inherited from Backend
    assert "kernelrt.cpu_backend.CPUBackend.check_available" not in members
    assert "kernelrt.cpu_backend.CPUBackend.launch_kernel" in members  # its own override
    assert not any(name.endswith((".__init__", ".add_note", ".with_traceback")) for name in members)


def test_a_dataclass_signature_or_a_base_class_text_is_not_a_docstring():
    import dataclasses

    @dataclasses.dataclass
    class Plain:
        x: int

    class Quiet(ValueError):
        pass

    def documented():
        """Said."""

    assert _own_doc(Plain) == "" and _own_doc(Quiet) == "" and _own_doc(documented) == "Said."


def test_the_kernel_decorators_example_runs(cache_dir):
    import doctest
    import warnings

    import kernelrt
    from kernelrt import kernel_def

    with warnings.catch_warnings():
        warnings.simplefilter("ignore", kernelrt.CPUFallbackWarning)  # "auto" on a machine without a GPU
        finder = doctest.DocTestFinder()
        (test,) = [t for t in finder.find(kernel_def.kernel, "kernel") if t.examples]
        runner = doctest.DocTestRunner(optionflags=doctest.NORMALIZE_WHITESPACE)
        runner.run(test)
    assert runner.summarize(verbose=False) == doctest.TestResults(failed=0, attempted=len(test.examples))
    assert len(test.examples) >= 6
