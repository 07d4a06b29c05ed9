"""The CPU twin's SIMD helpers (exp, dot products) and the CUDA kernels' PTX."""

from __future__ import annotations

import math

import numpy as np
import pytest
from kernelrt.kernels.sfap import warm_specs

from tests.support.layers import requires_nvrtc


def test_simd_exp_within_one_ulp():
    from kernelrt.kernels.sfap.cpu_math import EXP_NEG_MAX, exp_neg
    from numba import njit

    @njit
    def both(xs, ours, libm):
        for i in range(xs.shape[0]):
            ours[i] = exp_neg(xs[i])
            libm[i] = math.exp(-xs[i])

    rng = np.random.default_rng(1)
    xs = np.concatenate([np.linspace(0.0, 2.0, 200_001), rng.uniform(0, 40, 200_000),
                         rng.uniform(0, EXP_NEG_MAX, 200_000), [0.0, EXP_NEG_MAX]])
    ours, libm = np.empty_like(xs), np.empty_like(xs)
    both(xs, ours, libm)
    # 1 ulp: exp_neg's design bound (Cody-Waite reduction, degree-13 Taylor, truncation < 4e-18;
    # docs/sfap.md ("Exactness: what must be done how")), against libm's exp, which is almost
    # always correctly rounded whichever of its FMA/non-FMA variants the CPU selects. exp_neg is
    # plain + - * compiled without fastmath (no contraction): its own bits are the same on every x86
    assert np.max(np.abs(ours - libm) / np.spacing(libm)) <= 1.0


def test_simd_dot_products():
    from kernelrt.kernels.sfap.cpu_math import dot8, dot8x2

    rng = np.random.default_rng(2)
    cur, h_a, h_b = rng.standard_normal((8, 301)), rng.standard_normal(320), rng.standard_normal(320)
    lo, n = 7, 297
    want_a, want_b = cur[:, :n] @ h_a[lo : lo + n], cur[:, :n] @ h_b[lo : lo + n]
    got_a, got_b = dot8x2(h_a, h_b, cur, lo, 0, n)
    # two summation orders of n = 297 products of N(0, 1) numbers: dot8/dot8x2 are compiled with
    # reassociation and contraction (vector partial sums and FMA, so their order follows the
    # host's vector width) and NumPy's matmul runs the host BLAS's own kernel. Rounding grows
    # like eps times the partial sums (|sum| <= 14 here): ~eps n / sqrt(2) = 5e-14 in practice,
    # measured 1.1e-14; 1e-13 absolute plus 1e-13 relative leaves room for either side's width
    np.testing.assert_allclose(got_a, want_a, rtol=1e-13, atol=1e-13)
    np.testing.assert_allclose(got_b, want_b, rtol=1e-13, atol=1e-13)
    np.testing.assert_allclose(dot8(h_a, cur, lo, 0, n), want_a, rtol=1e-13, atol=1e-13)


@pytest.mark.ptx
@requires_nvrtc
@pytest.mark.parametrize("cc", [(8, 0), (9, 0)], ids=["sm80", "sm90"])
def test_cuda_kernels_compile_to_ptx(cache_dir, cc):
    import re

    import kernelrt

    for kernel, signature in warm_specs()["cuda"]:
        ptx = kernelrt.compile_ptx(kernel, signature, cc=cc)
        assert re.search(rf"\.target sm_{cc[0]}{cc[1]}a?\b", ptx), kernel.name
        assert ".entry" in ptx
        shared = sum(int(n) for n in re.findall(r"\.shared \.align \d+ \.b8 \w+\[(\d+)\]", ptx))
        assert shared <= 48 * 1024, f"{kernel.name} uses {shared} bytes of static shared memory"
        assert not re.search(r"\b(div|sqrt)\.approx\.f64", ptx), f"{kernel.name}: approximate fp64 division"
