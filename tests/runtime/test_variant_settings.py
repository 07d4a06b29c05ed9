"""``kernelrt.kernels.variants``: the run-time choice of GPU kernel variants, checked before it changes anything."""

from __future__ import annotations

import threading

import pytest

from kernelrt.kernels import variant_specs
from kernelrt.kernels import variants as kv


def test_defaults_are_the_measured_kernels():
    assert kv.current_variants() == kv.DEFAULTS
    # The H200 sitting of 2026-11-27 (bench/results/2026-11-27-nvidia-h200-variants*.json) made the
    # staged delay the default (4-7x kernel-only, no loss end to end); the tiled columns won kernel-only
    # but lost end to end at MyoGen's muscle, and the others lost or tied.
    assert kv.DEFAULTS == {"sfap_columns": "rows", "sfap_delay": "staged", "row_values": "branchy",
                           "sparse": "csr", "loops": "launches"}


def test_use_variants_holds_for_the_block_only_even_when_it_raises():
    with pytest.raises(RuntimeError, match="inside"):
        with kv.use_variants(sparse="sell", loops="cooperative") as chosen:
            assert chosen["sparse"] == "sell" and kv.variant("loops") == "cooperative"
            with kv.use_variants(sparse="csr"):  # nested: the inner choice wins, then the outer returns
                assert kv.variant("sparse") == "csr" and kv.variant("loops") == "cooperative"
            assert kv.variant("sparse") == "sell"
            raise RuntimeError("inside")
    assert kv.current_variants() == kv.DEFAULTS


def test_a_drivers_keyword_wins_over_the_setting():
    with kv.use_variants(sfap_columns="tiled"):
        assert kv.variant("sfap_columns", "rows") == "rows"
        assert kv.variant("sfap_columns") == "tiled"


@pytest.mark.parametrize("choices, message", [
    ({"spmv": "sell"}, r"kernel family must be one of \[.*'sparse'.*\] \(got 'spmv'\)"),
    ({"sparse": "ell"}, r"sparse variant must be one of \['csr', 'sell'\] \(got 'ell'\)"),
    ({"loops": None}, r"loops variant must be one of \['launches', 'cooperative'\] \(got None\)"),
])
def test_bad_choices_are_refused_and_change_nothing(choices, message):
    with pytest.raises(ValueError, match=message):
        kv.set_variants(sfap_delay="staged", **choices)  # the good one before the bad one is not kept
    assert kv.current_variants() == kv.DEFAULTS
    with pytest.raises(ValueError, match=message):
        with kv.use_variants(**choices):
            pass
    assert kv.current_variants() == kv.DEFAULTS
    with pytest.raises(ValueError, match="kernel family"):
        kv.variant("nonesuch")


def test_a_new_thread_starts_from_the_defaults():
    seen = {}
    with kv.use_variants(sparse="sell"):
        t = threading.Thread(target=lambda: seen.update(kv.current_variants()))
        t.start()
        t.join()
    assert seen == kv.DEFAULTS


def test_every_alternative_has_its_kernels_listed():
    # each non-default variant names GPU kernels that the PTX layer and the resource table cover
    names = {k.name for k, _ in variant_specs()}
    expected = {"sfap_columns": {"sfap_columns_tiled"}, "sfap_delay": {"sfap_delay"},  # the first default
                "row_values": {"row_values_nodiv"},
                "sparse": {"sell_matvec", "sell_matmat", "sell_heat_step", "sell_heat_step_block", "sell_cheb_step"},
                "loops": {"heat_steps_coop", "heat_steps_block_coop", "cheb_filter_coop"}}
    assert set(expected) == set(kv.FAMILIES)
    for family, kernels in expected.items():
        assert kernels <= names, family
