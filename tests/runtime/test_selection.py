"""get_backend: the one resolver of ``backend=`` arguments (kinds, None, backends)."""

from __future__ import annotations

import pytest

import kernelrt
from kernelrt import selection


def test_kinds_none_and_backends_resolve(cache_dir):
    cpu = kernelrt.get_backend("cpu")
    assert cpu.name == "cpu" and kernelrt.get_backend("cpu") is cpu  # one default per kind
    assert kernelrt.get_backend(cpu) is cpu  # a backend is returned as is
    assert kernelrt.get_backend(None) is kernelrt.get_backend("auto")
    other = kernelrt.CPUBackend()
    assert kernelrt.get_backend(other) is other


def test_options_make_a_new_backend(cache_dir, tmp_path):
    default = kernelrt.get_backend("cpu")
    private = kernelrt.get_backend("cpu", cache_dir=tmp_path / "elsewhere")
    assert private is not default and private.cache.directory.parent == tmp_path / "elsewhere"
    with pytest.raises(TypeError, match="cannot be applied to an existing backend"):
        kernelrt.get_backend(default, enable_caching=False)


def test_the_default_follows_the_cache_directory(tmp_path, monkeypatch):
    monkeypatch.setenv("KERNELRT_CACHE_DIR", str(tmp_path / "a"))
    a = kernelrt.get_backend("cpu")
    monkeypatch.setenv("KERNELRT_CACHE_DIR", str(tmp_path / "b"))
    b = kernelrt.get_backend("cpu")
    assert a is not b and b.cache.directory.parent == tmp_path / "b"
    monkeypatch.setenv("KERNELRT_CACHE_DIR", str(tmp_path / "a"))
    assert kernelrt.get_backend("cpu") is a


@pytest.mark.parametrize(
    "bad, error, match",
    [("gpu", ValueError, r"backend must be 'auto', 'cuda' or 'cpu', a kernelrt backend, or None \(got 'gpu'\)"),
     (["cpu"], TypeError, r"\(got list\)"),
     (0, TypeError, r"\(got int\)")],
)
def test_bad_kinds_name_what_was_given(bad, error, match):
    with pytest.raises(error, match=match):
        kernelrt.get_backend(bad)


def test_vram_guard_uses_the_default_backend(cache_dir):
    with kernelrt.vram_guard(min_free_gb=0.0) as backend:
        assert backend is kernelrt.get_backend("auto")


def test_library_functions_take_every_form(cache_dir):
    from kernelrt.kernels import laplacian as lap

    V, F = lap.icosphere(1)
    L_kind, _ = lap.cotan_laplacian(V, F, "cpu")
    L_obj, _ = lap.cotan_laplacian(V, F, kernelrt.get_backend("cpu"))
    assert (L_kind != L_obj).nnz == 0  # exact: the same backend kind runs the same code
    with pytest.raises(ValueError, match="backend must be"):
        lap.cotan_laplacian(V, F, "gpu")
    assert selection.KINDS == ("auto", "cuda", "cpu")


def test_auto_passes_each_backend_only_its_own_options(cache_dir):
    # No GPU here: "auto" falls back to the CPU, which takes gpu_limits but not arrays=.
    backend = kernelrt.get_backend("auto", arrays="numba", gpu_limits=False)
    assert backend.name == "cpu" and backend.gpu_limits is False
    with pytest.raises(TypeError, match="arrays"):
        kernelrt.get_backend("cpu", arrays="numba")  # asked for the CPU by name: a CUDA option is an error
