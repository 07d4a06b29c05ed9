"""bench/bench_eigen.py's case list: every mesh by default, a chosen subset, a clear error for a wrong name."""

import importlib.util
from pathlib import Path

import pytest

BENCH = Path(__file__).resolve().parents[2] / "bench" / "bench_eigen.py"


@pytest.fixture
def bench_eigen():
    spec = importlib.util.spec_from_file_location("bench_eigen_cases_under_test", BENCH)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_every_mesh_by_default_and_the_chosen_ones_otherwise(bench_eigen, monkeypatch):
    monkeypatch.delenv("KERNELRT_BENCH_EIGEN_MESHES", raising=False)
    everything = [m for m, _, _ in bench_eigen.meshes_and_ks(quick=False)]
    assert everything[:4] == ["ico6", "ico7", "noisy7", "bunny"]
    monkeypatch.setenv("KERNELRT_BENCH_EIGEN_MESHES", " ico8, cohort")
    assert [m for m, _, _ in bench_eigen.meshes_and_ks(quick=False)] == ["ico8"]
    # Chebyshev on a CPU stays on the first mesh of the whole list, not of the subset
    assert bench_eigen.unavailable("chebyshev", "ico8", "cpu", quick=False) is not None


def test_a_wrong_mesh_name_is_refused_with_the_names_it_takes(bench_eigen, monkeypatch):
    monkeypatch.setenv("KERNELRT_BENCH_EIGEN_MESHES", "ico7,ico9")
    with pytest.raises(ValueError, match=r"KERNELRT_BENCH_EIGEN_MESHES must name some of .*ico6.*cohort.*\(got ico9\)"):
        bench_eigen.meshes_and_ks(quick=False)
