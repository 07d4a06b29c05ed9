"""The NMJ delay's variants on the CPU backend: ``launch_delay``'s choice and the staged kernel's twin.

``sfap_delay_staged``'s CPU twin runs ``sfap_delay``'s own per-sample sum, so the two
variants must agree bit for bit here; the simulator layer proves the staged CUDA kernel
itself (tests/simulator/test_delay_variants_sim.py). Inputs are built as run.py builds
them: delay q = n + φ samples, ``delay_int`` = n, the table D(d - φ) from ``dirichlet_table``.
"""

from __future__ import annotations

import numpy as np
import pytest
from kernelrt.kernels.sfap import variant_specs, warm_specs
from kernelrt.kernels.sfap.delay import (
    DELAY_SIGNATURE, STAGED_CHUNK, delay_fft, dirichlet_table, launch_delay, sfap_delay, sfap_delay_staged,
)
from kernelrt.kernels.variants import use_variants


def delay_case(nt: int, ne: int, q, seed: int = 0):
    """raw (Nt, Ne, Nf), table, delay_int and delay_frac for delays of ``q[f]`` samples (prep.plan_unit's split)."""
    q = np.asarray(q, dtype=np.float64)
    n = np.floor(q)
    raw = np.random.default_rng(seed).standard_normal((nt, ne, q.size))
    frac = q - n
    return raw, dirichlet_table(nt, frac), n.astype(np.int64), frac


def run_variant(backend, raw, table, shifts, variant):
    out = backend.to_device(np.full(raw.shape, np.nan))  # NaN: every sample must be written
    launch_delay(backend, backend.to_device(raw), backend.to_device(table), backend.to_device(shifts), out,
                 variant=variant)
    return backend.to_host(out)


CASES = [
    (9, 3, [0.0, 2.25, 8.7]),  # Nt odd; shift 0, fractional, n = Nt - 1 (one source)
    (10, 6, [0.5, 9.0, 10.0, 12.3]),  # Nt even, two electrode groups; n = Nt (all zero) and n > Nt
    (2 * STAGED_CHUNK + 7, 5, [0.0, 3.4, STAGED_CHUNK + 0.5, 2 * STAGED_CHUNK + 6.9]),  # three chunks
    (STAGED_CHUNK + 2, 25, [1.0, 0.25, 7.75]),  # Nt even past one chunk, 25 electrodes as on the H100
]


@pytest.mark.parametrize("nt, ne, q", CASES, ids=["odd", "even-n-past-nt", "three-chunks", "even-25e"])
def test_staged_and_direct_give_the_same_bits(cpu, nt, ne, q):
    raw, table, shifts, frac = delay_case(nt, ne, q)
    direct = run_variant(cpu, raw, table, shifts, "direct")
    staged = run_variant(cpu, raw, table, shifts, "staged")
    assert np.array_equal(staged, direct)
    # and both are the delay itself: the host FFT's. White noise is no SFAP (docs/sfap.md's
    # 5e-15): the FFT's rounding here reaches 1.6e-13 of the largest sample at Nt = 519.
    reference = delay_fft(raw, shifts, frac)
    assert np.allclose(direct, reference, rtol=0, atol=1e-12 * np.abs(raw).max())


def test_launch_delay_follows_the_setting(cpu, monkeypatch):
    launched = []
    real = cpu.launch_kernel
    monkeypatch.setattr(cpu, "launch_kernel", lambda k, *a, **kw: (launched.append(k), real(k, *a, **kw))[1])
    raw, table, shifts, _ = delay_case(9, 2, [1.5])
    run_variant(cpu, raw, table, shifts, None)  # the default
    with use_variants(sfap_delay="direct"):
        run_variant(cpu, raw, table, shifts, None)
        run_variant(cpu, raw, table, shifts, "staged")  # the keyword wins over the setting
    assert launched == [sfap_delay_staged, sfap_delay, sfap_delay_staged]


def test_a_bad_variant_is_refused_by_name(cpu):
    raw, table, shifts, _ = delay_case(9, 2, [1.5])
    with pytest.raises(ValueError, match=r"sfap_delay variant must be one of \['staged', 'direct'\].*'tiled'"):
        run_variant(cpu, raw, table, shifts, "tiled")


def test_the_default_is_warmed_and_the_other_listed_as_a_variant():
    # The staged kernel won on the H200 (2026-11-27): it is what `kernelrt cache warm` builds,
    # and the direct one, launched with the same argument types, is the alternative.
    assert (sfap_delay_staged, DELAY_SIGNATURE) in warm_specs()["cuda"]
    assert (sfap_delay, DELAY_SIGNATURE) in variant_specs()
    with use_variants(sfap_delay="direct"):
        assert (sfap_delay, DELAY_SIGNATURE) in warm_specs()["cuda"]
        assert (sfap_delay_staged, DELAY_SIGNATURE) in variant_specs()
