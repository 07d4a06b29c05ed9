"""The SFAP column kernel's tiled variant compiles for sm_80 and sm_90 with its design intact (no GPU)."""

import pytest
from tests.support.layers import requires_nvrtc

import kernelrt
from kernelrt.kernels import sfap


@pytest.mark.ptx
@requires_nvrtc
@pytest.mark.parametrize("cc", [(8, 0), (9, 0)], ids=["sm80", "sm90"])
def test_tiled_columns_compile_with_registers_and_dynamic_shared_memory(cc, cache_dir):
    (kernel, signature), = [s for s in sfap.variant_specs() if s[0].name == "sfap_columns_tiled"]
    ptx = kernelrt.compile_ptx(kernel, signature, cc=cc)
    assert f".target sm_{cc[0]}{cc[1]}" in ptx
    # the chunk buffers are the launch's dynamic shared memory, sized by columns_tiling
    assert ".extern .shared" in ptx and "ld.shared.f64" in ptx
    # the 4 x 2 sums stay in registers: a local array NVVM could not promote would leave a local depot
    assert "__local_depot" not in ptx and "ld.local" not in ptx
    assert ptx.count("bar.sync") == 3  # three barriers per chunk, as sfap_columns
    assert "\tcall" not in ptx  # fibre_params is inlined
