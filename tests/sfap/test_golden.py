"""MyoGen 0.12 golden files, end to end and table by table (CPU backend).

Accuracy is the channel-relative error of docs/sfap.md ("Accuracy metric").
"""

from __future__ import annotations

import numpy as np
import pytest
from kernelrt.kernels.sfap import SfapResult, compute_sfaps
from kernelrt.kernels.sfap import delay as sfap_delay_module
from kernelrt.kernels.sfap import prep as sfap_prep
from kernelrt.kernels.sfap.delay import (
    delay_fft,
    dirichlet_table,
    jitter_muap,
    sfap_delay,
    sfap_muap,
)
from kernelrt.kernels.sfap.inputs import check_inputs
from kernelrt.kernels.sfap.reference import (
    channel_error,
)

from tests.support.sfap_cases import (
    GOLDEN,
    assert_matches,
    golden_inputs,
)

# -- golden parity -----------------------------------------------------------------


@pytest.mark.parametrize("path", GOLDEN, ids=lambda p: p.stem)
def test_golden(cpu, path):
    kwargs, g = golden_inputs(path)
    result = compute_sfaps(**kwargs, backend=cpu)
    assert isinstance(result, SfapResult) and result.backend == "cpu"
    assert_matches(result, g)


def test_golden_files_present():
    assert [p.stem for p in GOLDEN] == ["sfap_a", "sfap_b", "sfap_c", "sfap_d"]


@pytest.mark.parametrize("path", GOLDEN, ids=lambda p: p.stem)
def test_host_preparation_matches_golden_tables(path):
    kwargs, g = golden_inputs(path)
    plan = sfap_prep.plan_fibres(**check_inputs(**kwargs, min_radial_dist=float(g["min_radial_dist"])))
    # exact on every x86: the host plan is NumPy element-wise + - * / and a pairwise-summed mean
    # in C (fixed order whatever the SIMD width), no libm; the golden tables are the same ops
    assert np.array_equal(plan.t, g["t"])
    assert np.array_equal(plan.ipar[:, sfap_prep.I_NZ], g["nz"])
    assert np.array_equal(plan.fpar[:, sfap_prep.F_DELTA], g["dz_eff"])  # bitwise: pairwise mean
    assert np.array_equal(plan.ipar[:, sfap_prep.I_SIGMA], g["sigma"])
    iv = g["row_intervals"]
    assert np.array_equal(plan.ipar[:, [sfap_prep.I_ALO, sfap_prep.I_AHI]], iv[:, [1, 2]])
    assert np.array_equal(plan.ipar[:, [sfap_prep.I_ELO, sfap_prep.I_EHI]], iv[:, [5, 6]])
    # 1e-15 ≈ 4.5 eps: n + φ re-adds what floor() split off (φ = q - n is exact), and
    # q = (p1/c1 + p2/c2)/dt equals MyoGen's delay_s / dt up to how it groups that sum; only
    # + and / (correctly rounded, no libm), so the same on every x86. Measured: bitwise equal
    np.testing.assert_allclose(plan.delay_int + plan.delay_frac, g["delay_s"] / g["dt"], rtol=1e-15)


def test_delay_of_golden_raw(cpu):
    """Both delay forms reproduce MyoGen's delay of the stored raw SFAPs
    (docs/sfap.md ("Raw SFAP, NMJ delay, MUAP"))."""
    for path in GOLDEN:
        kwargs, g = golden_inputs(path)
        plan = sfap_prep.plan_fibres(**check_inputs(**kwargs, min_radial_dist=None))
        raw = np.ascontiguousarray(g["sfaps_raw"])
        fft = delay_fft(raw, plan.delay_int, plan.delay_frac)
        # NumPy's FFT of MyoGen's length N', but a batched rfft/irfft instead of MyoGen's full
        # complex FFT with mirrored bins: FFT rounding order, a few ulp of the channel peak
        # (docs/sfap.md ("Raw SFAP, NMJ delay, MUAP")). Measured <= 4.8e-16; 1e-14 leaves 20x
        assert channel_error(fft, g["sfaps"]) <= 1e-14
        nt, ne, nf = raw.shape
        out = np.empty_like(raw)
        table = dirichlet_table(nt, plan.delay_frac)
        cpu.launch_kernel(sfap_delay, (nt, ne, nf), (1, 1, 1), raw, table, plan.delay_int, out)
        # the Dirichlet matrix instead of the FFT: a direct sum of Nt (<= 625) products against a
        # table built with np.sin (an ulp between CPUs), rounding growing like sqrt(Nt) eps.
        # docs/sfap.md ("Exactness: what must be done how"): ~5e-15; measured <= 2.9e-15 here
        # and for the MUAP below; 1e-13 leaves 30x
        assert channel_error(out, g["sfaps"]) <= 1e-13
        muap = np.empty((nt, ne))
        cpu.launch_kernel(sfap_muap, (ne, nt), (1, 1), out, muap)
        assert channel_error(muap, g["muap"]) <= 1e-13  # as above, plus an ascending sum over fibres


def _hr_shift_template(x: np.ndarray, delay: float) -> np.ndarray:
    """MyoGen's hr_shift_template, written from docs/sfap.md: full complex FFT, mirrored bins."""
    n = x.shape[0]
    padded = np.append(x, 0.0) if n % 2 == 0 else x
    big_n = padded.shape[0]
    spec = np.fft.fft(padded)
    k = np.arange(1, (big_n - 1) // 2 + 1)
    turned = spec[1 : len(k) + 1] * np.exp(1j * (2 * np.pi * delay) * k / big_n)
    return np.fft.ifft(np.concatenate([[spec[0]], turned, np.conj(turned[::-1])])).real[:n]


def test_jitter_muap_is_the_sum_of_shifted_templates():
    """calc_muap(jitter_std > 0): every channel advanced by its fibre's shift, then summed."""
    rng = np.random.default_rng(3)
    for nt in (40, 41):  # even lengths get one zero appended, odd ones not
        sfaps = rng.standard_normal((nt, 3, 5))
        shifts = rng.normal(0.0, 1.5, 5)
        expected = sum(
            np.stack([_hr_shift_template(sfaps[:, e, f], shifts[f]) for e in range(3)], axis=1) for f in range(5)
        )
        # rfft/irfft instead of the full complex FFT with mirrored bins: FFT rounding order only
        np.testing.assert_allclose(jitter_muap(sfaps, shifts), expected, rtol=0, atol=1e-14 * np.abs(expected).max())


def test_delay_in_chunks_and_in_place(monkeypatch):
    """Chunking the host delay over fibres (and doing it in place) changes no result."""
    rng = np.random.default_rng(4)
    raw = rng.standard_normal((33, 2, 7))
    n, frac = rng.integers(0, 40, 7), rng.uniform(0, 1, 7)
    whole = delay_fft(raw, n, frac)
    monkeypatch.setattr(sfap_delay_module, "CHUNK_BYTES", 1)  # one fibre per chunk
    chunked = delay_fft(raw, n, frac)
    # a chunk's FFT is the same per-column transform; allow for SIMD lane differences only
    np.testing.assert_allclose(chunked, whole, rtol=0, atol=1e-15 * np.abs(whole).max())
    in_place = raw.copy()
    assert delay_fft(in_place, n, frac, out=in_place) is in_place
    np.testing.assert_array_equal(in_place, chunked)
