"""PTX compilation of the test kernels for sm_80 and sm_90, with no GPU present."""

import pytest
from tests.support.layers import forbid_nvvm, requires_nvrtc
from tests.support.kernels import (
    axpy,
    block_sums,
    gpu_only_scale,
    index_grid_2d,
    index_grid_3d,
    plain_double,
    shifted_sqrt,
)

import kernelrt

pytestmark = [pytest.mark.ptx, requires_nvrtc]

KERNELS = [
    (axpy, "float64[::1], float64[::1], float64[::1], float64"),
    (shifted_sqrt, None),  # declares its own signature
    (index_grid_2d, "float64[:, ::1], float64[:, ::1]"),
    (index_grid_3d, "float64[:, :, ::1]"),
    (block_sums, "float64[::1], float64[::1]"),
    (gpu_only_scale, "float32[::1], float32"),
    (plain_double, "float64[::1]"),
]


@pytest.mark.parametrize("cc", [(8, 0), (9, 0)], ids=["sm_80", "sm_90"])
@pytest.mark.parametrize("kernel,signature", KERNELS, ids=lambda k: getattr(k, "__name__", ""))
def test_compiles_to_ptx(cache_dir, kernel, signature, cc):
    sig = signature if signature is not None else kernel.raw_signature
    ptx = kernelrt.compile_ptx(kernel, sig, cc=cc)
    arch = f"sm_{cc[0]}{cc[1]}" + ("a" if cc >= (9, 0) else "")
    assert f".target {arch}" in ptx
    assert ".entry" in ptx


def test_fp64_atomics_are_native(cache_dir):
    ptx = kernelrt.compile_ptx(block_sums, "float64[::1], float64[::1]", cc=(9, 0))
    assert "atom.global.add.f64" in ptx


def test_generated_kernel_reads_the_thread_index(cache_dir):
    ptx = kernelrt.compile_ptx(index_grid_2d, "float64[:, ::1], float64[:, ::1]", cc=(8, 0))
    assert "%ctaid.x" in ptx and "%ctaid.y" in ptx and "%tid.x" in ptx


def test_bad_cc_and_signature(cache_dir):
    with pytest.raises(ValueError, match=r"cc must be a \(major, minor\) tuple"):
        kernelrt.compile_ptx(axpy, "float64[::1], float64[::1], float64[::1], float64", cc=90)
    with pytest.raises(TypeError, match="signature has 1 argument types but the kernel takes 4"):
        kernelrt.compile_ptx(axpy, "float64[::1]", cc=(9, 0))


def test_an_offline_entry_links_without_nvvm(cache_dir, monkeypatch):
    """What `kernelrt cache warm --cc 90` stores is all a GPU machine's link step needs.

    On an H100 such an entry went back through NVVM at its first launch: numba-cuda had
    compiled it for link-time optimisation, and LTO links from LTO-IR, which it neither
    makes offline nor pickles. kernelrt compiles without LTO, so the stored PTX is linked.
    """
    from kernelrt.compiler import compile_cuda_offline, cuda_dispatcher
    from kernelrt.numba_internals import cuda_arch
    from kernelrt.disk_cache import disk_cache_for

    sig = "float64[::1], float64[::1], float64[::1], float64"
    kernelrt.compile_ptx(kernelrt.kernel(axpy.py_func), sig, cc=(9, 0))  # the warm, into this test's cache
    fresh = kernelrt.kernel(axpy.py_func)  # same source, no overload yet: as another process loads it
    argtypes = tuple(fresh.parse_signature(sig))
    assert compile_cuda_offline(fresh, argtypes, (9, 0), disk_cache_for())[0] == "disk"
    library = cuda_dispatcher(fresh, (9, 0)).overloads[argtypes]._codelibrary

    class Linker:  # what numba-cuda's get_cubin hands _link_all, minus the driver
        lto = library._lto

        def __init__(self):
            self.ptx = []

        def add_ptx(self, ptx):
            self.ptx.append(ptx)

    forbid_nvvm(monkeypatch)
    linker = Linker()
    library._link_all(linker, cuda_arch((9, 0)))  # the cc an H100's get_cubin asks for
    assert library._lto is False
    assert len(linker.ptx) == 1 and b".target sm_90a" in linker.ptx[0]
