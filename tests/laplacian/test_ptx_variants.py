"""``row_values_nodiv`` compiles to PTX for sm_80 and sm_90 (no GPU), branch-free where it promises.

Checked against ``row_values``' PTX for the same signature: the fused flag count as
tests/laplacian/test_ptx.py checks it, no calls, the face maths once instead of three
times, and the corner selection and face maths in one basic block.
"""

import re

import pytest
from tests.support.layers import requires_nvrtc

import kernelrt
from kernelrt.kernels.laplacian.assembly import row_values
from kernelrt.kernels.laplacian.assembly_nodiv import assembly_variant_kernels

LABEL = re.compile(r"^\$L__BB\d+_\d+:", re.M)


@pytest.mark.ptx
@requires_nvrtc
@pytest.mark.parametrize("itype", ["int32", "int64"])
@pytest.mark.parametrize("cc", [(8, 0), (9, 0)], ids=["sm80", "sm90"])
def test_nodiv_compiles_branch_free(itype, cc, cache_dir):
    (kernel, signature), = assembly_variant_kernels(itype)
    ptx = kernelrt.compile_ptx(kernel, signature, cc=cc)
    branchy = kernelrt.compile_ptx(row_values, signature, cc=cc)
    assert f".target sm_{cc[0]}{cc[1]}" in ptx
    # the fused flag count, as row_values has it (test_ptx.py)
    assert "bar.red.or.pred" in ptx and "atom.shared.add.u64" in ptx
    assert ptx.count("atom.global.") == 4 and "atom.global.exch.b64" in ptx
    assert "\tcall" not in ptx  # the device functions are inlined
    # face_terms is inlined once, not three times: its two square roots (degeneracy test
    # and area) and its contracted multiply-adds appear a third as often. Equal fma counts
    # per copy also say NVVM contracted the one copy as it contracts each of the three:
    # a different contraction would change last bits on a GPU, which the simulator's
    # bitwise check cannot see.
    assert ptx.count("sqrt.rn.f64") == 2 and 3 * ptx.count("sqrt.rn.f64") == branchy.count("sqrt.rn.f64")
    assert 3 * ptx.count("fma.rn.f64") == branchy.count("fma.rn.f64") > 0
    # No branch around the face maths: from the last label before the first square root
    # to the second one, a single basic block (no label, no branch) runs from the top of
    # the corner loop (the incidence's corner and its two neighbour ids loaded) through
    # the id selects and the face's nine coordinate loads to both square roots. In
    # row_values the loads come before the corner branch and each arm is a block of its
    # own; a select NVVM left as a branch would start a block after the id loads.
    first = ptx.index("sqrt.rn.f64")
    second = ptx.index("sqrt.rn.f64", first + 1)
    start = [m.start() for m in LABEL.finditer(ptx, 0, first)][-1]
    block = ptx[start:second]
    assert "bra" not in block
    assert len(re.findall(r"ld\.global\.u(32|64)", block)) == 3
    assert block.count("ld.global.f64") == 9
    assert block.count("selp.b64") >= 6  # three vertex ids, two selects each
