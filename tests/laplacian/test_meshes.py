"""Icospheres reproduce the golden meshes exactly."""

import numpy as np
import pytest

from kernelrt.kernels import laplacian as lap
from tests.support.laplacian_cases import edge_case, load_golden


def test_ico4_and_noisy_ico4_are_the_golden_meshes():
    ico4, noisy = load_golden("ico4"), load_golden("noisy_ico4")
    V, F = lap.icosphere(4)
    # bit for bit, not 1e-15, on every x86: midpoints, squares, sums, sqrt and quotients are
    # correctly rounded, NumPy's norm sums 3 terms in a fixed order; no libm, BLAS or SIMD width
    np.testing.assert_array_equal(V, ico4["V"])
    np.testing.assert_array_equal(F, ico4["F"])
    assert F.dtype == np.int32
    Vn, Fn = lap.noisy_icosphere(4, 0.1, int(noisy["noise_seed"]))
    # exact: default_rng's ziggurat normals are table values times integer bits (libm only
    # decides rare rejections and, via glibc's log1p, which is not CPU-dispatched, the rare
    # tail), then one * and one +
    np.testing.assert_array_equal(Vn, noisy["V"])
    assert lap.mean_edge_length(V, F) == pytest.approx(0.075499, abs=1e-6)  # the literal has 6 decimals


def test_ico2_is_the_edge_case_base_mesh():
    V, F, _, _ = edge_case("closed")
    V2, F2 = lap.icosphere(2, face_dtype=np.int64)
    np.testing.assert_array_equal(V2, V)  # exact, as for ico4 above
    np.testing.assert_array_equal(F2, F)


@pytest.mark.parametrize("level", range(6))
def test_counts_and_radius(level):
    V, F = lap.icosphere(level)
    assert V.shape == (10 * 4**level + 2, 3) and F.shape == (20 * 4**level, 3)
    # |v / |v|| = 1 up to the normalisation's rounding and a 3-term norm in a fixed order (no
    # BLAS): ~2 eps; 1e-15 ≈ 4.5 eps (measured <= 1 eps; the same bits on every x86)
    np.testing.assert_allclose(np.linalg.norm(V, axis=1), 1.0, rtol=1e-15)
    assert len(np.unique(np.sort(F, axis=1), axis=0)) == len(F)


def test_bad_levels():
    for bad in (-1, 11, 2.0, True):
        with pytest.raises(ValueError, match="level must be an int in"):
            lap.icosphere(bad)
    with pytest.raises(ValueError, match="amplitude must be"):
        lap.noisy_icosphere(1, -0.1)
