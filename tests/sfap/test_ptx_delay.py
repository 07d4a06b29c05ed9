"""Both NMJ delay kernels compile to PTX for sm_80 and sm_90 (no GPU), the staged one through shared memory."""

import pytest

import kernelrt
from kernelrt.kernels.sfap.delay import DELAY_SIGNATURE, sfap_delay, sfap_delay_staged
from tests.support.layers import requires_nvrtc

SPECS = [(sfap_delay, DELAY_SIGNATURE), (sfap_delay_staged, DELAY_SIGNATURE)]


@pytest.mark.ptx
@requires_nvrtc
@pytest.mark.parametrize("cc", [(8, 0), (9, 0)], ids=["sm80", "sm90"])
@pytest.mark.parametrize("kernel, signature", SPECS, ids=[k.name for k, _ in SPECS])
def test_compiles(kernel, signature, cc, cache_dir):
    ptx = kernelrt.compile_ptx(kernel, signature, cc=cc)
    assert f".target sm_{cc[0]}{cc[1]}" in ptx
    assert "\tcall" not in ptx  # nothing left out of line
    # acc += a * b contracted to one rounding in both kernels, so both round alike: the bits match
    assert "fma.rn.f64" in ptx and "mul.rn.f64" not in ptx and "mul.f64" not in ptx
    if kernel is sfap_delay:
        assert "ld.shared" not in ptx
    else:
        assert "ld.shared.f64" in ptx and "st.shared.f64" in ptx and "bar.sync" in ptx
        assert ".local" not in ptx  # the electrodes' accumulators live in registers
