"""numba-cuda's own kernels: CPUBackend against Numba's CUDA simulator (the conformance suite).

The cases of tests/support/conformance_kernels.py run in the simulator
(``kernel[grid, block](...)``, thread by thread in Python) and on ``CPUBackend`` with equal
fresh arguments; where the target is to run, the outputs must agree (exactly, or within
the case's stated tolerance), and where it is to refuse, ``CPUBackend`` raises
``CpuTranslationError`` in its own words. The simulator is also checked against each case's
numpy reference, so a wrong reference shows here. Kernels the simulator cannot run (warp
operations, a grid sync across blocks, ``declare_device``) are skipped with the reason;
tests/runtime/test_conformance.py checks them against their references.
"""

from __future__ import annotations

from typing import Any

import pytest

import kernelrt
from kernelrt import CpuTranslationError, KernelArgumentError
from tests.support import conformance_kernels as ck
from tests.support.conformance_case import REFUSE, RUN, Case, arguments, assert_outputs, launch_in_simulator

RAW_NUMBA = ("Failed in nopython mode pipeline", "numba.core.errors", "TypingError", "Untyped global name",
             "NumbaError", "LoweringError")


@pytest.fixture(scope="module")
def cpu(tmp_path_factory: pytest.TempPathFactory) -> kernelrt.CPUBackend:
    return kernelrt.CPUBackend(cache_dir=tmp_path_factory.mktemp("conformance-sim") / "cache")


def _simulate(case: Case, seed: int) -> tuple[Any, ...]:
    """The case's fresh arguments after a simulated launch (which raises where the case says)."""
    args = arguments(case, seed)
    expected = case.sim_raises or case.raises
    if expected is not None:
        with pytest.raises(expected):
            launch_in_simulator(case, args)
    else:
        launch_in_simulator(case, args)
    return args


def _simulable(cases: list[Case]) -> list[Any]:
    return [pytest.param(c, marks=pytest.mark.skip(reason=c.sim)) if c.sim else c for c in cases]


@pytest.mark.parametrize("case", _simulable([c for c in ck.CASES if c.expect == RUN]), ids=lambda c: c.name)
def test_cpu_backend_matches_the_simulator(cpu: kernelrt.CPUBackend, case: Case) -> None:
    simulated = _simulate(case, seed=3)
    on_cpu = arguments(case, seed=3)
    if case.raises is not None:
        with pytest.raises(case.raises):
            cpu.launch_kernel(case.kernel, case.grid, case.block, *on_cpu, shared_mem=case.shared_mem)
    else:
        cpu.launch_kernel(case.kernel, case.grid, case.block, *on_cpu, shared_mem=case.shared_mem)
    assert_outputs(case, on_cpu, tuple(simulated[i] for i in case.outputs), "the simulator's")


@pytest.mark.parametrize("case", _simulable([c for c in ck.CASES if c.reference is not None]), ids=lambda c: c.name)
def test_the_simulator_matches_the_reference(case: Case) -> None:
    # the references of tests/runtime/test_conformance.py, checked on an independent implementation
    simulated = _simulate(case, seed=5)
    assert_outputs(case, simulated, case.reference(*arguments(case, seed=5)), "the reference")


@pytest.mark.parametrize("case", _simulable([c for c in ck.CASES if c.expect == REFUSE]), ids=lambda c: c.name)
def test_cpu_backend_refuses_in_its_own_words(cpu: kernelrt.CPUBackend, case: Case) -> None:
    with pytest.raises((CpuTranslationError, KernelArgumentError)) as info:  # the kernel, or an argument
        cpu.launch_kernel(case.kernel, case.grid, case.block, *arguments(case), shared_mem=case.shared_mem)
    message = str(info.value)
    assert not any(s in message for s in RAW_NUMBA), message
