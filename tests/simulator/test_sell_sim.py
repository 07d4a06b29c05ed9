"""SELL-32 kernels (kernels/laplacian/sell.py) as CUDA kernels under the simulator: the CSR kernels' bits.

Each SELL kernel against its CSR kernel, bitwise, on an icosphere's L and on a matrix whose
rows differ wildly (an empty row, a 40-entry row, unsorted columns, 45 rows: a partial slice),
with inf and NaN in x, for k = 1, 3 and 33 columns; then the operator's products and heat
steps (natural and RCM order) and the Chebyshev route's products and filter, chosen with
``use_variants(sparse="sell")``. The simulator runs the kernels' Python with IEEE doubles and
no FMA; that the GPU contracts both layouts' sums alike is checked on their PTX
(tests/laplacian/test_ptx_sell.py).
"""

from __future__ import annotations

import numpy as np
import pytest
from tests.laplacian.test_sell import assert_same_bits, csr_args, irregular_csr, launch_pairs, with_inf_nan

from kernelrt.kernels import laplacian as lap
from kernelrt.kernels.laplacian.chebyshev import _Block, chebyshev_eigenpairs
from kernelrt.kernels.laplacian.reference import reference_laplacian
from kernelrt.kernels.laplacian.sell import SellMatrix
from kernelrt.kernels.laplacian.spmv import LaplacianOperator
from kernelrt.kernels.variants import use_variants


@pytest.fixture(scope="module")
def sphere():
    return reference_laplacian(*lap.icosphere(1))  # NumPy: spares compiling the assembly; 42 rows


@pytest.mark.filterwarnings("ignore:invalid value encountered:RuntimeWarning")  # inf - inf: on purpose
@pytest.mark.parametrize("k", [1, 3, 33])
@pytest.mark.parametrize("matrix", ["icosphere", "irregular"])
def test_each_kernel_gives_the_csr_bits(gpu, sphere, matrix, k):
    parts = (sphere[0].data, sphere[0].indices, sphere[0].indptr) if matrix == "icosphere" else irregular_csr()
    n = parts[2].size - 1
    csr = tuple(gpu.to_device(a) for a in csr_args(*parts))
    for name, (a, b) in launch_pairs(gpu, csr, SellMatrix.from_csr(*parts).to_backend(gpu).args, n, k):
        assert_same_bits(a, b, name)


def test_the_operator_with_the_sell_variant(gpu, sphere):
    L, m = sphere
    rng = np.random.default_rng(5)
    x, X = with_inf_nan(rng.standard_normal(L.shape[0])), rng.standard_normal((L.shape[0], 3))
    csr = LaplacianOperator(L, m, backend=gpu, layout="csr")
    with use_variants(sparse="sell"):
        ops = (LaplacianOperator(L, m, backend=gpu), LaplacianOperator(L, m, backend=gpu, order="rcm"))
    for op in ops:
        assert op.layout == "sell" and op.sell is not None
        for a in (x, X):
            assert_same_bits(op.matvec(a), csr.matvec(a))
            y = op.matvec(gpu.to_device(a))  # device in, device out, in the caller's row order
            assert gpu.is_device_array(y)
            assert_same_bits(gpu.to_host(y), csr.matvec(a))
        for a in (rng.standard_normal(L.shape[0]), X):
            assert_same_bits(op.heat_steps(a, 1e-3, 3), csr.heat_steps(a, 1e-3, 3))
    assert ops[1].sell.perm is not None and ops[0].sell.perm is None


def test_the_chebyshev_products_and_filter(gpu, sphere):
    L, m = sphere
    y = np.random.default_rng(6).standard_normal((L.shape[0], 5))
    blocks = [_Block(LaplacianOperator(L, backend=gpu, layout="csr"), None)]
    with use_variants(sparse="sell"):
        blocks.append(_Block(LaplacianOperator(L, backend=gpu), None))
    assert blocks[1].op.sell is not None
    (p_csr, f_csr), (p_sell, f_sell) = [(b.product(y), b.filter(y, 4, 0.5, 8.0)) for b in blocks]
    assert_same_bits(p_sell, p_csr)
    assert_same_bits(f_sell, f_csr)


def test_a_solve_with_the_sell_variant(gpu):
    L, m = reference_laplacian(*lap.icosphere(2))
    with use_variants(sparse="sell"):
        ev, vec, info = chebyshev_eigenpairs(L, m, 9, backend=gpu)
    ref_ev, ref_vec, ref_info = chebyshev_eigenpairs(L, m, 9, backend="cpu")
    # the very same path as the CPU backend's (tests/simulator/test_chebyshev_sim.py): every product
    # and filter step gives CSR's bits, so the iteration takes the same steps to the same numbers
    assert info["iterations"] == ref_info["iterations"] and info["products"] == ref_info["products"]
    assert_same_bits(ev, ref_ev)
    assert_same_bits(vec, ref_vec)
