"""The SELL-32 kernels (kernels/laplacian/sell.py) compile to PTX for sm_80 and sm_90 (no GPU), coalesced as designed."""

import re

import pytest

import kernelrt
from tests.support.layers import requires_nvrtc
from kernelrt.kernels.laplacian import chebyshev, sell, spmv

SPECS = sell.sell_variant_kernels("int32") + sell.sell_variant_kernels("int64")


def _index(signature):
    return re.search(r"uint\d+", signature).group()


CSR = {(k.name, _index(s)): (k, s) for it in ("int32", "int64")
       for k, s in spmv.spmv_kernels(it) + chebyshev.chebyshev_kernels(it)[:1]}
CCS = pytest.mark.parametrize("cc", [(8, 0), (9, 0)], ids=["sm80", "sm90"])


@pytest.mark.ptx
@requires_nvrtc
@CCS
@pytest.mark.parametrize("kernel, signature", SPECS, ids=[f"{k.name}[{_index(s)}]" for k, s in SPECS])
def test_compiles_inlined_and_contracted_as_csr(kernel, signature, cc, cache_dir):
    ptx = kernelrt.compile_ptx(kernel, signature, cc=cc)
    assert f".target sm_{cc[0]}{cc[1]}" in ptx
    assert "\tcall" not in ptx  # sell_row_dot and the row-start helper are inlined
    csr_name = next((name for name, k in sell.SELL_OF.items() if k is kernel), None)
    if csr_name is not None:
        # The simulator proves the same bits without FMA; on a GPU NVVM contracts a * b + c into
        # fma.rn.f64. Both layouts must be contracted alike (the same expression tree, so the
        # same count), else a GPU would round them differently
        csr = kernelrt.compile_ptx(*CSR[csr_name, _index(signature)], cc=cc)
        assert ptx.count("fma.rn.f64") == csr.count("fma.rn.f64") > 0


@pytest.mark.ptx
@requires_nvrtc
@CCS
def test_sell_matvec_reads_a_slice_slot_by_slot(cc, cache_dir):
    # What makes a warp's loads coalesced, read off the PTX: thread r starts at
    # slice_ptr[r / 32] + (r & 31), so the 32 lanes of a warp (one slice) read adjacent entries;
    # and each next entry of its row is 32 entries on: +256 B in sdata (float64), +128 B in scol
    # (uint32), either as a constant offset of the (unrolled) loads or as the pointer's step.
    # The CSR kernel's rows are ~56 B apart per lane instead (7 entries x 8 B).
    ptx = kernelrt.compile_ptx(sell.sell_matvec, sell.sell_variant_kernels("int32")[0][1], cc=cc)
    assert re.search(r"and\.b64\s+%rd\d+, %rd\d+, 31;", ptx)  # the lane

    def strides(kind):
        offsets = re.findall(rf"ld\.global\.{kind}\s+%\w+, \[%rd\d+\+(\d+)\]", ptx)
        steps = re.findall(r"add\.s64\s+(%rd\d+), \1, (\d+);", ptx)
        return {int(o) for o in offsets}, {int(s) for _, s in steps}

    (data_offsets, steps), (col_offsets, _) = strides("f64"), strides("u32")
    assert 256 in data_offsets | steps and 128 in col_offsets | steps
    # every constant offset is whole slots: no load reaches the row's next entry 8 B on
    assert data_offsets and all(o % 256 == 0 for o in data_offsets)
    assert col_offsets and all(o % 128 == 0 for o in col_offsets)
