"""Every CUDA kernel of the Laplacian library compiles to PTX for sm_80 and sm_90 (no GPU)."""

import pytest

import kernelrt
from tests.support.layers import requires_nvrtc
from kernelrt.kernels import laplacian as lap

SPECS = lap.warm_specs(("int32", "int64"))["cuda"]


@pytest.mark.ptx
@requires_nvrtc
@pytest.mark.parametrize("cc", [(8, 0), (9, 0)], ids=["sm80", "sm90"])
@pytest.mark.parametrize("kernel, signature", SPECS, ids=[f"{k.name}[{s[:40]}]" for k, s in SPECS])
def test_compiles(kernel, signature, cc, cache_dir):
    ptx = kernelrt.compile_ptx(kernel, signature, cc=cc)
    assert f".target sm_{cc[0]}{cc[1]}" in ptx
    if kernel.name == "face_values_atomic":
        # native fp64 atomics (sm_60+), not a compare-and-swap loop
        assert "atom.global.add.f64" in ptx or "red.global.add.f64" in ptx
        assert "atom.global.cas" not in ptx
    if kernel.name in ("row_values", "finish_mass"):
        # the fused flag count: one barrier vote, the block sum in shared memory, and the
        # counter's ticket and reset: four global atomics in the code, none a CAS loop
        assert "bar.red.or.pred" in ptx and "atom.shared.add.u64" in ptx
        assert ptx.count("atom.global.") == 4 and "atom.global.exch.b64" in ptx
        assert "\tcall" not in ptx  # the device functions are inlined
