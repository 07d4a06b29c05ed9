"""The NMJ delay's staged kernel against ``sfap_delay``, bit for bit, on the CUDA simulator.

``sfap_delay_staged`` stages raw columns and table columns in shared memory in chunks of
``STAGED_CHUNK`` sources and sums each output over them in ascending source order; it
must give ``sfap_delay``'s every bit (its docstring says why). The cases cover Nt odd
and even, below and above one chunk (the last chunk cut short), a partial electrode
group, and per-fibre delays of 0, fractional, integer, Nt - 1 (one source), Nt and past
Nt (no source: zeros). The simulator runs each thread in Python: the sizes are tiny.
"""

from __future__ import annotations

import numpy as np
import pytest
from kernelrt.kernels.sfap.delay import STAGED_CHUNK, STAGED_EB
from tests.sfap.test_delay_variants import delay_case, run_variant

CASES = [
    (9, 3, [0.0, 2.25, 8.7]),  # Nt odd; delay 0, fractional, n = Nt - 1
    (10, STAGED_EB + 2, [0.5, 9.0, 10.0, 12.3]),  # Nt even; two electrode groups; n = Nt - 1, Nt, > Nt
    (STAGED_CHUNK + 5, 1, [0.0, 3.4, STAGED_CHUNK + 3.5]),  # Nt odd: two chunks, then one chunk of 2 sources
    (STAGED_CHUNK + 2, 1, [1.0, 0.75]),  # Nt even: a second chunk of 1 source
]


@pytest.mark.parametrize("nt, ne, q", CASES, ids=["odd", "even-groups-n-past-nt", "odd-two-chunks", "even-two-chunks"])
def test_staged_delay_gives_the_direct_bits(gpu, nt, ne, q):
    raw, table, shifts, _ = delay_case(nt, ne, q)
    direct = run_variant(gpu, raw, table, shifts, "direct")
    staged = run_variant(gpu, raw, table, shifts, "staged")
    assert not np.isnan(direct).any() and np.abs(direct).max() > 0
    # exact: the same products summed in the same order (signed zeros compare alike)
    assert np.array_equal(staged, direct)
