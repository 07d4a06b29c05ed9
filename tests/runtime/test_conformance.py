"""numba-cuda's own kernels on ``CPUBackend``: the conformance suite.

The kernels are copied verbatim from numba-cuda's test suite and documentation examples
(tests/support/conformance_kernels.py and the modules it gathers); each case says what
kernelrt should do with its kernel once shared memory, barriers, warp operations and the
CUDA intrinsics are translated: run it (and match the numba-cuda test's expected result,
here a numpy reference), or refuse it with a ``CpuTranslationError`` (``cuda.declare_device``,
a kernel whose source cannot be read). The simulator layer
(tests/simulator/test_conformance_sim.py) runs the same cases in Numba's CUDA simulator.
"""

from __future__ import annotations

import ast
import inspect
import textwrap
from pathlib import Path
from typing import Any

import numba.cuda
import pytest

# numba-cuda's own kernels, as its tests import them (numba's deprecated built-in numba.cuda,
# what macOS gets, lacks some of those names)
pytest.importorskip("numba_cuda", reason="numba-cuda is not installed")

import kernelrt
from kernelrt import CpuTranslationError, KernelArgumentError
from tests.support import conformance_kernels as ck
from tests.support.conformance_case import REFUSE, RUN, Case, arguments, assert_outputs

RUNS = [c for c in ck.CASES if c.expect == RUN]
REFUSALS = [c for c in ck.CASES if c.expect == REFUSE]
# what numba itself says when it fails, not a refusal in kernelrt's words
RAW_NUMBA = ("Failed in nopython mode pipeline", "numba.core.errors", "TypingError", "Untyped global name",
             "NumbaError", "LoweringError")


@pytest.fixture(scope="module")
def cpu(tmp_path_factory: pytest.TempPathFactory) -> kernelrt.CPUBackend:
    return kernelrt.CPUBackend(cache_dir=tmp_path_factory.mktemp("conformance") / "cache")


def _launch(cpu: kernelrt.CPUBackend, case: Case, args: tuple[Any, ...]) -> None:
    cpu.launch_kernel(case.kernel, case.grid, case.block, *args, shared_mem=case.shared_mem)


@pytest.mark.parametrize("case", RUNS, ids=lambda c: c.name)
def test_kernel_runs_and_matches_the_reference(cpu: kernelrt.CPUBackend, case: Case) -> None:
    args = arguments(case)
    if case.raises is not None:  # debug=True: the Python error model, as on the GPU
        with pytest.raises(case.raises):
            _launch(cpu, case, args)
    else:
        _launch(cpu, case, args)
    if case.reference is not None:
        assert_outputs(case, args, case.reference(*arguments(case)), "the reference")


@pytest.mark.parametrize("case", REFUSALS, ids=lambda c: c.name)
def test_kernel_is_refused_in_kernelrts_words(cpu: kernelrt.CPUBackend, case: Case) -> None:
    with pytest.raises((CpuTranslationError, KernelArgumentError)) as info:  # the kernel, or an argument
        _launch(cpu, case, arguments(case))
    message = str(info.value)
    assert case.kernel.py_func.__name__ in message, message
    assert not any(s in message for s in RAW_NUMBA), message


def test_the_suite_is_broad_and_mostly_runnable() -> None:
    assert len(ck.CASES) >= 60
    assert len(RUNS) >= 0.9 * len(ck.CASES), [c.name for c in REFUSALS]
    assert len({c.name for c in ck.CASES}) == len(ck.CASES), "case names are unique"
    assert all(c.expect in (RUN, REFUSE) for c in ck.CASES)
    assert all(c.reference is not None for c in RUNS if c.outputs)  # every output is checked
    assert all(c.tolerance for c in ck.CASES if c.rtol or c.atol), "each tolerance says why"


# -- the copies are verbatim ---------------------------------------------------------------------

TESTS = Path(numba.cuda.__file__).parent / "tests"


def _function_text(source: str, node: ast.FunctionDef) -> str:
    """The def (without decorators) as written, dedented; a line naming a link is left out
    (the one copy that drops it: fast_matmul's docstring)."""
    lines = source.splitlines()[node.lineno - 1 : node.end_lineno]
    return "\n".join(line for line in textwrap.dedent("\n".join(lines)).splitlines() if "http" not in line)


def _original_texts(path: Path, name: str) -> list[str]:
    source = path.read_text()
    return [_function_text(source, n) for n in ast.walk(ast.parse(source))
            if isinstance(n, ast.FunctionDef) and n.name == name]


@pytest.mark.skipif(not TESTS.is_dir(), reason="this numba-cuda wheel ships no tests/")
@pytest.mark.parametrize("case", [c for c in ck.CASES if c.expect == RUN], ids=lambda c: c.name)
def test_each_kernel_is_copied_verbatim(case: Case) -> None:
    py_func = case.kernel.py_func
    source = textwrap.dedent(inspect.getsource(py_func))
    copy = _function_text(source, ast.parse(source).body[0])
    path = TESTS / case.source.split("::")[0]
    assert path.is_file(), f"{case.name}: {case.source} names no file of numba-cuda's tests"
    originals = _original_texts(path, py_func.__name__)
    assert originals, f"{case.name}: no function {py_func.__name__!r} in {path.name}"
    assert copy in originals, f"{case.name}: {py_func.__name__} differs from every one in {path.name}"
