"""The in-repo NumPy reference (kernels/laplacian/reference.py) against SpectralBrain's
golden data and against the kernels, so the demo's check means something."""

import numpy as np
import pytest
from kernelrt.kernels import laplacian as lap
from kernelrt.kernels.laplacian.reference import (
    reference_hks,
    reference_laplacian,
    surface_area,
)
from tests.support.laplacian_cases import assert_matches_reference, edge_case, golden_L, load_golden


@pytest.mark.parametrize("name", ["ico4", "noisy_ico4"])
def test_reference_matches_golden(name):
    g = load_golden(name)
    L, m = reference_laplacian(g["V"], g["F"])
    assert_matches_reference(L, m, golden_L(g), g["m"])
    k = int(g["hks_k"])
    # element-wise 1e-12, the golden descriptors' tolerance (docs/laplacian.md ("Descriptor
    # parity")): SpectralBrain's expressions, but NumPy's SIMD exp and the host BLAS's GEMM order
    # differ per machine. HKS is positive and far from 0, so relative works. Measured 1.0e-15
    np.testing.assert_allclose(reference_hks(g["evals"][:k], g["evecs"][:, :k], g["hks_t"]), g["hks"], rtol=1e-12, atol=0)


@pytest.mark.parametrize("name", ["closed", "open_boundary", "degenerate_collinear", "degenerate_repeated_index", "nonmanifold_fin", "unreferenced_vertex"])
def test_reference_matches_golden_edge_cases(name):
    V, F, L_ref, m_ref = edge_case(name)
    L, m = reference_laplacian(V, F)
    assert_matches_reference(L, m, L_ref, m_ref)


def test_kernels_match_reference_on_a_noisy_ico5(cpu):
    V, F = lap.noisy_icosphere(5, 0.3, 7)
    L, m = lap.cotan_laplacian(V, F, backend=cpu)
    L_ref, m_ref = reference_laplacian(V, F)
    assert_matches_reference(L, m, L_ref, m_ref)
    # 20480 face areas summed in two groupings (per-vertex thirds, then NumPy's pairwise sum):
    # ~(6 + log2 F) eps = 5e-15 at worst (measured: equal); 1e-12 is the golden mass tolerance
    assert m.sum() == pytest.approx(surface_area(V, F), rel=1e-12)
