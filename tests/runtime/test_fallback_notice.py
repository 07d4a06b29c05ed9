"""The CPU-fallback notice: one ``CPUFallbackWarning`` per process, the reason said once,
advice for the platform, and two documented ways to silence it.

The fallback is simulated (a probe that found no driver), so the tests run the same on a
machine with a GPU.
"""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
import warnings

import pytest

import kernelrt
from kernelrt import discovery, selection
from kernelrt.discovery import CudaFacts, classify

NO_DRIVER = CudaFacts(driver_error="\nCUDA driver library cannot be found.\nIf you are sure ... NUMBA_CUDA_DRIVER\n")
NO_NUMBA_CUDA = CudaFacts(driver_error=discovery.NUMBA_CUDA_ABSENT, compiler_error=discovery.NUMBA_CUDA_ABSENT)
NO_NUMBA_CUDA_MAC = CudaFacts(driver_error=discovery.NUMBA_CUDA_ABSENT + " (it has no build for this platform)",
                              compiler_error=discovery.NUMBA_CUDA_ABSENT)


@pytest.fixture
def fallback(monkeypatch, cache_dir):
    """A process that has not given the notice yet, whose probe finds no NVIDIA driver."""
    monkeypatch.setattr(selection, "_defaults", {})
    monkeypatch.setattr(selection, "_notice_given", False)
    monkeypatch.delenv("KERNELRT_FALLBACK_NOTICE", raising=False)
    monkeypatch.setattr("kernelrt.cuda_backend.probe", lambda: NO_DRIVER)


def _notices(record) -> list[str]:
    return [str(w.message) for w in record if issubclass(w.category, kernelrt.CPUFallbackWarning)]


def test_the_notice_is_given_once_per_process(fallback):
    with warnings.catch_warnings(record=True) as record:
        warnings.simplefilter("always")  # no help from the warnings registry: kernelrt dedupes
        assert kernelrt.get_backend("auto").name == "cpu"
        assert kernelrt.get_backend("auto", enable_caching=False).name == "cpu"  # a new backend, made again
    (notice,) = _notices(record)
    assert notice.startswith("kernelrt is running on the CPU backend: no NVIDIA driver (libcuda) was found.")
    assert issubclass(kernelrt.CPUFallbackWarning, UserWarning)


def test_the_notice_points_at_the_callers_line(fallback):
    with warnings.catch_warnings(record=True) as record:
        warnings.simplefilter("always")
        kernelrt.get_backend("auto")
    (warning,) = [w for w in record if issubclass(w.category, kernelrt.CPUFallbackWarning)]
    assert warning.filename == __file__  # not selection.py: the user's line is what the warning shows


def test_the_reason_is_said_once_and_ends_with_how_to_silence_it(fallback, monkeypatch):
    monkeypatch.setattr(sys, "platform", "linux")
    with pytest.warns(kernelrt.CPUFallbackWarning) as record:
        kernelrt.get_backend("auto")
    (notice,) = _notices(record)
    assert notice.count("cannot be found") + notice.count("was found") == 1  # numba's restatement dropped
    assert notice.count("CPU backend") == 1
    assert "To use an NVIDIA GPU, install the NVIDIA driver" in notice
    assert "KERNELRT_FALLBACK_NOTICE=0" in notice
    assert 'warnings.filterwarnings("ignore", category=kernelrt.CPUFallbackWarning)' in notice


def test_the_environment_variable_silences_it(fallback, monkeypatch):
    monkeypatch.setenv("KERNELRT_FALLBACK_NOTICE", "0")
    with warnings.catch_warnings(record=True) as record:
        warnings.simplefilter("always")
        assert kernelrt.get_backend("auto").name == "cpu"
    assert _notices(record) == []
    assert selection._notice_given is False  # silenced, not spent: unset, the notice comes once


def test_a_warnings_filter_silences_it(fallback):
    with warnings.catch_warnings(record=True) as record:
        warnings.simplefilter("always")
        warnings.filterwarnings("ignore", category=kernelrt.CPUFallbackWarning)
        assert kernelrt.get_backend("auto").name == "cpu"
    assert _notices(record) == []


def test_asking_for_the_cpu_gives_no_notice(fallback):
    with warnings.catch_warnings(record=True) as record:
        warnings.simplefilter("always")
        assert kernelrt.get_backend("cpu").name == "cpu"
    assert _notices(record) == []


def test_macos_is_told_the_cpu_backend_is_the_intended_path(monkeypatch):
    monkeypatch.setattr(sys, "platform", "darwin")
    reason = selection.fallback_reason(classify(NO_NUMBA_CUDA_MAC))
    assert "CUDA does not exist on macOS: the CPU backend is the intended path here" in reason
    assert "NVIDIA driver" not in reason and "pip install" not in reason
    assert reason.count("numba-cuda is not installed") == 1
    # whatever the probe said: a Mac has no NVIDIA driver to install
    assert "install the NVIDIA driver" not in selection.fallback_reason(classify(NO_DRIVER))


@pytest.mark.parametrize("platform", ["linux", "win32"])
def test_without_numba_cuda_the_advice_is_the_cuda_extra(monkeypatch, platform):
    monkeypatch.setattr(sys, "platform", platform)
    reason = selection.fallback_reason(classify(NO_NUMBA_CUDA))
    assert reason.startswith("numba-cuda is not installed. To use an NVIDIA GPU: pip install \"kernelrt[cuda12]\"")
    assert "driver (libcuda)" not in reason and reason.count("numba-cuda") == 1


def test_the_availability_reason_says_numbas_words_only_when_they_add_something():
    assert classify(NO_DRIVER).reason.startswith("no NVIDIA driver (libcuda) was found; install the NVIDIA driver")
    # a detail that says more is kept
    assert "CUDA_ERROR_UNKNOWN (999)" in classify(CudaFacts(driver_error="CUDA_ERROR_UNKNOWN (999)")).reason


def test_a_new_process_gives_it_once_on_stderr_and_the_variable_silences_it(tmp_path):
    script = textwrap.dedent("""
        import kernelrt
        from kernelrt import cuda_backend
        from kernelrt.discovery import CudaFacts
        cuda_backend.probe = lambda: CudaFacts(driver_error="CUDA driver library cannot be found.")
        for options in ({}, {"enable_caching": False}, {"enable_caching": False}):
            assert kernelrt.get_backend("auto", **options).name == "cpu"
    """)
    env = {k: v for k, v in os.environ.items() if k != "KERNELRT_FALLBACK_NOTICE"}
    env["KERNELRT_CACHE_DIR"] = str(tmp_path / "kcache")
    loud = subprocess.run([sys.executable, "-c", script], env=env, capture_output=True, text=True, check=True)
    assert loud.stderr.count("CPUFallbackWarning: kernelrt is running on the CPU backend") == 1
    quiet = subprocess.run([sys.executable, "-c", script], env={**env, "KERNELRT_FALLBACK_NOTICE": "0"},
                           capture_output=True, text=True, check=True)
    assert "CPUFallbackWarning" not in quiet.stderr


# -- Dask: the workers keep quiet, the client says it once ---------------------------------


def test_a_worker_process_keeps_quiet_and_reports_why_it_is_on_the_cpu(fallback, monkeypatch):
    pytest.importorskip("distributed", reason="the distributed extra is not installed")
    import asyncio
    from types import SimpleNamespace

    from kernelrt import distributed
    from kernelrt.distributed import KernelrtPlugin

    # a worker process of its own: no Client here (an earlier test's client may still be
    # this process's default one, which would make this the client's own process)
    monkeypatch.setattr(distributed, "_client_in_this_process", lambda: False)

    plugin = KernelrtPlugin("auto", warm=None)
    worker = SimpleNamespace(address="tcp://worker:1", state=SimpleNamespace(nthreads=1))
    with warnings.catch_warnings(record=True) as record:
        warnings.simplefilter("always")
        asyncio.run(plugin.setup(worker))  # no Client in this process: a worker process of its own
    assert _notices(record) == [] and plugin.backend.name == "cpu"
    assert plugin.info["cpu_fallback"].startswith("no NVIDIA driver (libcuda) was found. To use an NVIDIA GPU")
    assert KernelrtPlugin("cpu", warm=None).start()["cpu_fallback"] is None  # asked for: no fallback


def test_the_client_says_once_how_many_workers_fell_back(fallback):
    pytest.importorskip("distributed", reason="the distributed extra is not installed")
    from kernelrt.distributed import ensure_plugin

    reason = "no NVIDIA driver (libcuda) was found. To use an NVIDIA GPU, install the NVIDIA driver"

    class Client:  # what ensure_plugin asks of a distributed.Client
        def run_on_scheduler(self, fn):
            return False  # no plugin yet

        def register_plugin(self, plugin, name):
            pass

        def run(self, fn):
            return {"tcp://a:1": {"backend": "cpu", "cpu_fallback": reason},
                    "tcp://b:1": {"backend": "cuda", "cpu_fallback": None}}

    with warnings.catch_warnings(record=True) as record:
        warnings.simplefilter("always")
        assert ensure_plugin(Client()) and ensure_plugin(Client())
    (notice,) = _notices(record)
    assert notice.startswith(f"1 of 2 Dask workers are running on the CPU backend: {reason}.")
