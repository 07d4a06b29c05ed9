"""Chebyshev-filtered subspace iteration on a simulated CUDA backend (no CuPy: host dense algebra).

Covers the CUDA side the CPU layer cannot: the fused ``cheb_step`` and ``csr_matmat`` as CUDA
kernels (with the grid-stride row loop, since the solver launches one block row in the
simulator), the block copied to the device and back around each dense step.
"""

from __future__ import annotations

import numpy as np
from kernelrt.kernels import laplacian as lap
from kernelrt.kernels.laplacian.chebyshev import chebyshev_eigenpairs
from kernelrt.kernels.laplacian.eigen_report import report
from kernelrt.kernels.laplacian.reference import reference_laplacian


def test_matches_the_cpu_backend(gpu):
    L, m = reference_laplacian(*lap.icosphere(2))  # NumPy: spares compiling the assembly (7 s here)
    ev, vec, info = chebyshev_eigenpairs(L, m, 9, backend=gpu)
    ref_ev, ref_vec, ref_info = chebyshev_eigenpairs(L, m, 9, backend="cpu")
    # 1e-9 relative (to λ_1 for the null pair), as tests/laplacian/test_chebyshev.py. In fact
    # equal: the simulator does the CPU twin's IEEE double arithmetic in the same order (no FMA),
    # the dense steps are the same NumPy calls, so the iteration takes the very same path
    np.testing.assert_array_less(np.abs(ev - ref_ev) / np.maximum(ref_ev, ref_ev[1]), 1e-9)
    assert info["iterations"] == ref_info["iterations"] and info["products"] == ref_info["products"]
    # vectors up to sign; k = 9 ends with the l = 2 multiplet, so each pair is a whole eigenspace's
    # basis chosen by the same arithmetic
    signs = np.sign(np.sum(vec * ref_vec, axis=0))
    np.testing.assert_allclose(vec * signs, ref_vec, rtol=0, atol=1e-9)
    assert np.abs(vec.T @ (m[:, None] * vec) - np.eye(9)).max() < 1e-10
    np.testing.assert_array_less(report(L, m, ev, vec)[0], 1e-9)
