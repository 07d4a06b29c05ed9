"""Cubins made offline by ptxas: what `kernelrt cache warm --cc 90` stores so a GPU loads machine code.

Without a GPU, what can be checked is the entry (a cubin for the entry's target next to its
PTX, an ELF that ptxas made, a "cubin" note in the entry's metadata), that another offline
process keeps it, and the decision a device makes: the offline cubin is kept and loaded at once,
a refusal by the driver drops it and links the PTX. The driver boundary is the one seam
faked here (``compiler._driver_version`` and ``load_or_relink``'s ``get_cufunc``); the GPU
layer (tests/gpu, ``demo`` of tools/gpu_check.sh) runs the real load.
"""

from __future__ import annotations

import pytest

import kernelrt
from kernelrt import compiler
from kernelrt.disk_cache import disk_cache_for
from kernelrt.numba_internals import cuda_arch, load_or_relink
from kernelrt.ptxas import find_ptxas
from tests.support.layers import requires_nvrtc

SIG = "float64[::1], float64[::1], float64[::1], float64"


def axpy(i, out, x, y, a):
    if i < out.shape[0]:
        out[i] = a * x[i] + y[i]


needs_ptxas = pytest.mark.skipif(find_ptxas() is None, reason="ptxas not found (pip install nvidia-cuda-nvcc-cu12)")


def _warm(cc=(9, 0)):
    kernel = kernelrt.kernel(axpy)
    argtypes = tuple(kernel.parse_signature(SIG))
    status, ptx = compiler.compile_cuda_offline(kernel, argtypes, cc, disk_cache_for())
    return kernel, argtypes, status, ptx


@pytest.mark.ptx
@requires_nvrtc
@needs_ptxas
def test_warm_stores_a_cubin_for_the_target(cache_dir):
    kernel, argtypes, status, ptx = _warm()
    assert status == "compiled" and ".target sm_90a" in ptx
    lib = compiler.cuda_dispatcher(kernel, (9, 0)).overloads[argtypes]._codelibrary
    cubin = lib._cubin_cache[cuda_arch((9, 0))]
    assert cubin[:4] == b"\x7fELF" and len(cubin) > 1000  # an ELF object, as ptxas writes it
    (entry,) = [e for e in disk_cache_for().entries() if e.target == "cuda:sm_90a"]
    assert entry.meta["cubin"].startswith("ptxas ")

    fresh = kernelrt.kernel(axpy)  # another offline process: loads the entry, keeps the cubin
    assert compiler.compile_cuda_offline(fresh, argtypes, (9, 0), disk_cache_for())[0] == "disk"
    again = compiler.cuda_dispatcher(fresh, (9, 0)).overloads[argtypes]._codelibrary
    assert again._cubin_cache[cuda_arch((9, 0))] == cubin


@pytest.mark.ptx
@requires_nvrtc
@needs_ptxas
@pytest.mark.parametrize("driver_accepts", [True, False])
def test_a_device_keeps_the_offline_cubin_or_links_the_ptx(cache_dir, monkeypatch, driver_accepts):
    kernel, argtypes, _, _ = _warm()
    (entry,) = [e for e in disk_cache_for().entries() if e.target == "cuda:sm_90a"]
    state = compiler.cuda_dispatcher(kernel, (9, 0)).overloads[argtypes]._reduce_states()
    monkeypatch.setattr(compiler, "_driver_version", lambda: [13, 0])  # a device's driver, not the warm's (none)
    loaded = []

    def fake_load(kern):  # the driver's module load, faked: accept, or refuse as load_or_relink handles it
        loaded.append(kern)
        if driver_accepts:
            return True
        lib = kern._codelibrary
        lib._cubin_cache.clear()
        lib._linkerinfo_cache.clear()
        return False

    monkeypatch.setattr(compiler, "load_or_relink", fake_load)
    target = kernelrt.kernel(axpy)
    disp = compiler.cuda_dispatcher(target, (9, 0))
    compiler._loader_cuda(disp, argtypes, on_device=True)(state, entry.meta)
    assert len(loaded) == 1
    assert bool(disp.overloads[argtypes]._codelibrary._cubin_cache) is driver_accepts


def test_load_or_relink_drops_a_refused_cubin():
    class Library:
        def __init__(self):
            self._cubin_cache, self._linkerinfo_cache, self._cufunc_cache = {(9, 0, "a"): b"x"}, {(9, 0, "a"): ""}, {}

        def get_cufunc(self):
            raise RuntimeError("CUDA_ERROR_NO_BINARY_FOR_GPU")  # as numba's driver wrapper raises it

    class Kern:
        _codelibrary = Library()

    assert load_or_relink(Kern) is False
    assert Kern._codelibrary._cubin_cache == {} and Kern._codelibrary._linkerinfo_cache == {}
