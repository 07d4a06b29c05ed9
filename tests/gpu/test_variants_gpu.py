"""The kernel variants against their defaults on a real GPU, bit for bit.

The simulator tests (tests/simulator/test_*variants_sim.py, test_sell_sim.py,
test_loops_sim.py) prove each variant gives its default's bits under IEEE doubles with no
FMA; the PTX tests check both are contracted alike. This file runs the same cases on the
device itself, where the compiler's real FMA contraction and the hardware's grid barrier
apply: a variant that passes there and fails here is not a candidate default.
"""

from __future__ import annotations

import numpy as np
import pytest
from tests.simulator.test_assembly_variants_sim import test_nodiv_gives_row_values_bits  # noqa: F401
from tests.simulator.test_delay_variants_sim import test_staged_delay_gives_the_direct_bits  # noqa: F401
from tests.simulator.test_sell_sim import (  # noqa: F401
    sphere,
    test_each_kernel_gives_the_csr_bits,
    test_the_chebyshev_products_and_filter,
    test_the_operator_with_the_sell_variant,
)
from tests.simulator.test_sfap_variants_sim import (  # noqa: F401
    test_tiled_columns_give_the_same_bits,
    test_tiled_rows_span_several_chunks,
)

from kernelrt.kernels import laplacian as lap
from kernelrt.kernels.laplacian import loops
from kernelrt.kernels.laplacian.chebyshev import _Block
from kernelrt.kernels.laplacian.reference import reference_laplacian
from kernelrt.kernels.laplacian.spmv import LaplacianOperator


@pytest.fixture
def gpu60(gpu):
    """Every device that runs the GPU layer has fp64 atomics (cc >= 6.0 is the runtime's floor)."""
    return gpu


@pytest.fixture(scope="module")
def mesh4():
    return reference_laplacian(*lap.icosphere(4))  # 2,562 rows: several blocks, so the grid barrier is real


def test_cooperative_heat_steps_on_the_device(gpu, mesh4):
    op = LaplacianOperator(*mesh4, backend=gpu)
    assert loops.cooperative_blocks(gpu) > 1
    u = np.random.default_rng(0).standard_normal((op.shape[0], 3))
    for n_steps in (1, 5, 200):
        np.testing.assert_array_equal(loops.heat_steps_cooperative(op, u, 1e-3, n_steps),
                                      op.heat_steps(u, 1e-3, n_steps))


def test_cooperative_chebyshev_filter_on_the_device(gpu, mesh4):
    op = LaplacianOperator(*mesh4, backend=gpu)
    blk = _Block(op, None)
    x = np.random.default_rng(1).standard_normal((op.shape[0], 4))
    x_dev = gpu.to_device(x)
    for degree in (1, 5, 20):
        got = loops.chebyshev_filter_cooperative(op, x_dev, degree, 1.0, 12.0)
        np.testing.assert_array_equal(gpu.to_host(got), blk.filter(x, degree, 1.0, 12.0))
