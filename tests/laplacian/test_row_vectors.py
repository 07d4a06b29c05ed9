"""row_vectors.py: the supernodal solve's explicit-SIMD row kernels, against NumPy on every lane count."""

import numpy as np
import pytest
from numba import njit

from kernelrt.kernels.laplacian.row_vectors import LANES, copy_row, prefetch, sub_products


@njit(cache=False)
def _sub_products(out, o, ostep, A, a, sp, sq, inp, i, istep, P, Q, lanes, scale):
    sub_products(out, o, ostep, A, a, sp, sq, inp, i, istep, P, Q, lanes, scale)


@njit(cache=False)
def _copy_row(out, o, inp, i, lanes):
    copy_row(out, o, inp, i, lanes)


def _expected(out, o, ostep, A, a, sp, sq, inp, i, istep, P, Q, lanes, scale):
    out = out.copy()
    for p in range(P):
        for lane in range(lanes):
            total = sum(A[a + p * sp + q * sq] * inp[i + q * istep + lane] for q in range(Q))
            out[o + p * ostep + lane] = (out[o + p * ostep + lane] - total) * scale
    return out


@pytest.mark.parametrize("lanes", range(1, LANES + 1))
@pytest.mark.parametrize("P, Q", [(1, 0), (1, 1), (3, 5), (6, 13)])
def test_sub_products_matches_numpy_and_leaves_other_values(lanes, P, Q):
    rng = np.random.default_rng(lanes * 100 + P * 10 + Q)
    out, A, inp = rng.standard_normal(160), rng.standard_normal(200), rng.standard_normal(300)
    args = (5, 17, A, 3, 2, 7, inp, 4, 19, P, Q, lanes, 0.75)
    expected = _expected(out, *args)
    _sub_products(out, *args)
    # the same sums in another order (and fused multiply-adds where the CPU has FMA): a few
    # ulps of the largest term; the entries outside the P rows of `lanes` values are
    # untouched, bit for bit (masked stores write nothing beyond the lanes)
    touched = np.zeros(out.size, bool)
    for p in range(P):
        touched[5 + p * 17:5 + p * 17 + lanes] = True
    np.testing.assert_allclose(out[touched], expected[touched], rtol=0, atol=1e-13 * max(Q, 1))
    np.testing.assert_array_equal(out[~touched], expected[~touched])


def test_sub_products_on_rows_of_one_two_dimensional_array():
    # the solve's use: rows of one row-major block read and written in the same call
    rng = np.random.default_rng(1)
    X = rng.standard_normal((9, 11))
    A = rng.standard_normal(40)
    flat = X.ravel().copy()
    # rows 6..8, columns 2..9, minus combinations of rows 0..3 of the same columns
    expected = _expected(flat, 6 * 11 + 2, 11, A, 1, 4, 1, flat, 0 * 11 + 2, 11, 3, 4, 8, 1.0)
    _sub_products(X, 6 * 11 + 2, 11, A, 1, 4, 1, X, 2, 11, 3, 4, 8, 1.0)
    np.testing.assert_allclose(X.ravel(), expected, rtol=0, atol=1e-13)


def test_scale_one_is_exact_and_a_zero_sum_only_scales():
    rng = np.random.default_rng(2)
    out, A, inp = rng.standard_normal(16), np.zeros(4), rng.standard_normal(16)
    kept = out.copy()
    _sub_products(out, 0, 8, A, 0, 1, 1, inp, 0, 8, 2, 2, 8, 1.0)
    np.testing.assert_array_equal(out, kept)  # x - 0 * y, times 1.0: every bit kept
    _sub_products(out, 0, 8, A, 0, 1, 1, inp, 0, 8, 1, 0, 8, 0.5)
    np.testing.assert_array_equal(out[:8], kept[:8] * 0.5)


@pytest.mark.parametrize("lanes", range(1, LANES + 1))
def test_copy_row(lanes):
    rng = np.random.default_rng(lanes)
    out, inp = rng.standard_normal(20), rng.standard_normal(20)
    expected = out.copy()
    expected[3:3 + lanes] = inp[7:7 + lanes]
    _copy_row(out, 3, inp, 7, lanes)
    np.testing.assert_array_equal(out, expected)


@njit(cache=False)
def _prefetch_all(x):
    for i in range(0, x.size, 8):
        prefetch(x, i)


def test_prefetch_is_only_a_hint():
    x = np.random.default_rng(3).standard_normal(100)
    kept = x.copy()
    _prefetch_all(x)
    np.testing.assert_array_equal(x, kept)


def test_refuses_what_it_cannot_address():
    with pytest.raises(Exception, match="(?i)sub_products|typing|No implementation"):
        _sub_products(np.zeros(8, np.float32), 0, 0, np.zeros(8), 0, 0, 0, np.zeros(8), 0, 0, 1, 1, 8, 1.0)
