"""The cooperative loop kernels (kernels/laplacian/loops.py) compile to PTX for sm_80 and sm_90 (no GPU).

numba-cuda lowers ``cuda.cg.this_grid()`` and ``.sync()`` to calls of the CUDA device runtime
(``cudaCGGetIntrinsicHandle``, ``cudaCGSynchronize``), declared ``.extern`` in the PTX and
resolved when the driver links the kernel with cudadevrt; a kernel using them is flagged
for a cooperative launch. The barrier must be there, called, or the steps would race.
"""

import re

import pytest

import kernelrt
from kernelrt.kernels.laplacian import chebyshev, loops, spmv
from tests.support.layers import requires_nvrtc

SPECS = loops.loop_variant_kernels("int32") + loops.loop_variant_kernels("int64")
I1, F1, F2 = "uint32[::1]", "float64[::1]", "float64[:, ::1]"
# the launch-per-step kernel each cooperative one loops over
PER_STEP = {"heat_steps_coop": (spmv.heat_step, f"{F1}, {I1}, {I1}, {F1}, float64, {F1}, {F1}"),
            "heat_steps_block_coop": (spmv.heat_step_block, f"{F1}, {I1}, {I1}, {F1}, float64, {F2}, {F2}"),
            "cheb_filter_coop": (chebyshev.cheb_step, f"{F1}, {I1}, {I1}, float64, float64, float64, {F2}, {F2}, {F2}")}


def _f64_ops(ptx):
    """The distinct fp64 arithmetic opcodes (fma.rn.f64, div.rn.f64, mul.f64, ...)."""
    return set(re.findall(r"^\s*((?:fma|add|sub|mul|div|neg|abs)(?:\.\w+)?\.f64)\s", ptx, re.M))


@pytest.mark.ptx
@requires_nvrtc
@pytest.mark.parametrize("cc", [(8, 0), (9, 0)], ids=["sm80", "sm90"])
@pytest.mark.parametrize("kernel, signature", SPECS, ids=[f"{k.name}[{s[:24]}]" for k, s in SPECS])
def test_compiles_with_a_grid_barrier(kernel, signature, cc, cache_dir):
    ptx = kernelrt.compile_ptx(kernel, signature, cc=cc)
    assert re.search(rf"^\.target sm_{cc[0]}{cc[1]}a?$", ptx, re.M)
    # the device runtime's grid barrier, declared and called (inside the step loop: once in the code)
    assert re.search(r"^\.extern \.func .*\bcudaCGSynchronize\b", ptx, re.M)
    assert re.search(r"^\.extern \.func .*\bcudaCGGetIntrinsicHandle\b", ptx, re.M)
    assert len(re.findall(r"call\.uni[^;]*?\bcudaCGSynchronize\b", ptx, re.S)) == 1
    assert "bar.sync" not in ptx and "membar" not in ptx  # no block barrier standing in for it


@pytest.mark.ptx
@requires_nvrtc
@pytest.mark.parametrize("name", sorted(PER_STEP))
def test_the_same_fp64_operations_as_the_per_step_kernel(name, cache_dir):
    # The bitwise argument on a GPU: each element is the per-step kernel's expression, so NVVM emits
    # the same operations (the row sum as a chain of fma.rn, then div.rn / mul / sub, the update
    # not contracted into an fma in either); the loops around them may unroll differently.
    kernel = getattr(loops, name)
    ptx = kernelrt.compile_ptx(kernel, dict(loops.loop_variant_kernels("int32"))[kernel], cc=(9, 0))
    ref = kernelrt.compile_ptx(*PER_STEP[name], cc=(9, 0))
    assert _f64_ops(ptx) == _f64_ops(ref) and "fma.rn.f64" in _f64_ops(ref)
