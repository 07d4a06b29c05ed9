"""The launch case of the numba-cuda conformance kernels (tests/support/conformance_kernels.py).

Each kernel in the ``conformance_kernels*`` modules is copied verbatim from numba-cuda's own
test suite or documentation examples, as the installed wheel ships them under
``numba_cuda/numba/cuda/tests/``; ``source`` names the file (relative to
``numba_cuda/numba/cuda/``) and the test. A case builds fresh arguments from a seed, says which
arguments the kernel writes, and what kernelrt's ``CPUBackend`` should do with it once
shared memory, warp operations and the CUDA intrinsics are translated (``expect``).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np

RUN = "run"
REFUSE = "refuse"

# One float32 / float64 ulp at 1.0: tolerances below are a few of these.
F32_ULP = 2.0**-23
F64_ULP = 2.0**-52


@dataclass(frozen=True)
class Case:
    name: str
    source: str  # "cudapy/test_x.py::TestClass.test_y": the numba-cuda file and test it is copied from
    kernel: Any
    grid: tuple[int, ...]
    block: tuple[int, ...]
    make: Callable[[np.random.Generator], tuple[Any, ...]]  # seed's generator -> fresh arguments
    outputs: tuple[int, ...] = ()  # indices of the arguments the kernel writes
    expect: str = RUN  # the target behaviour on CPUBackend: RUN or REFUSE
    reference: Callable[..., tuple[Any, ...]] | None = None  # fresh arguments -> expected outputs
    rtol: float = 0.0  # rtol = atol = 0: outputs compared exactly; otherwise ``tolerance`` says why
    atol: float = 0.0
    tolerance: str = ""
    shared_mem: int = 0  # dynamic shared memory per block, bytes
    raises: type[BaseException] | None = None  # what a CPU launch raises (debug=True kernels)
    sim_raises: type[BaseException] | None = None  # what the simulator raises instead, if other
    sim: str = ""  # why Numba's CUDA simulator cannot run the kernel ("" when it can)


def arguments(case: Case, seed: int = 0) -> tuple[Any, ...]:
    """Fresh arguments for ``case``: the same seed gives equal (but separate) arrays."""
    return case.make(np.random.default_rng(seed))


def launch_in_simulator(case: Case, args: tuple[Any, ...]) -> None:
    """``kernel[grid, block](*args)`` (with the dynamic shared memory) in Numba's simulator."""
    if case.shared_mem:
        case.kernel[case.grid, case.block, 0, case.shared_mem](*args)
    else:
        case.kernel[case.grid, case.block](*args)


def ulps(n: float, dtype: type) -> float:
    """``n`` ulps of ``dtype`` (float32 or float64) at 1.0, as an rtol."""
    return n * (F32_ULP if np.dtype(dtype) == np.float32 else F64_ULP)


def assert_outputs(case: Case, got: tuple[Any, ...], expected: tuple[Any, ...], what: str) -> None:
    """``got``'s output arguments equal ``expected`` (one per output): exactly (NaN equal to
    NaN), or within the case's rtol/atol where its ``tolerance`` says why."""
    assert len(expected) == len(case.outputs), f"{case.name}: the reference gives {len(expected)} outputs"
    for index, want in zip(case.outputs, expected):
        message = f"{case.name}: argument {index} differs from {what}"
        if (case.rtol or case.atol) and np.asarray(want).dtype.names is None:  # records (RNG states): exact
            np.testing.assert_allclose(got[index], want, rtol=case.rtol, atol=case.atol, equal_nan=True,
                                       err_msg=message)
        else:
            np.testing.assert_array_equal(got[index], want, err_msg=message, strict=False)
