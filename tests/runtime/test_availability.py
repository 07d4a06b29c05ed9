"""CUDA availability: every reason, from facts, without hardware; and this machine's answer."""

import pickle

import pytest

import kernelrt
from kernelrt.discovery import REASONS, CudaFacts, DeviceInfo, classify, pip_install_command

H100 = DeviceInfo(0, "NVIDIA H100 80GB HBM3", (9, 0), 80 * 2**30, "GPU-1", None)
P100 = DeviceInfo(1, "Tesla P100", (6, 0), 16 * 2**30, "GPU-2", None)
K80 = DeviceInfo(1, "Tesla K80", (3, 7), 12 * 2**30, "GPU-3", None)
GOOD = dict(driver_version=(12, 4), runtime_version=(12, 9), devices=(H100,), supported_ccs=((5, 0), (9, 0)))


@pytest.mark.parametrize(
    "facts,device_id,code,text",
    [
        (CudaFacts(**GOOD), 0, "ok", "device 0: NVIDIA H100"),
        (CudaFacts(simulator=True, devices=(H100,)), 0, "simulator", "simulator"),
        (CudaFacts(driver_error="CUDA driver library cannot be found."), 0, "no_driver", "no NVIDIA driver"),
        (CudaFacts(driver_error="CUDA_ERROR_INSUFFICIENT_DRIVER (35)"), 0, "driver_too_old", "too old"),
        (CudaFacts(driver_error="CUDA_ERROR_NO_DEVICE (100)"), 0, "no_device", "no CUDA device"),
        (CudaFacts(driver_error="CUDA_ERROR_UNKNOWN (999)"), 0, "driver_error", "failed to initialise"),
        (CudaFacts(driver_version=(12, 4), devices=()), 0, "no_device", "no CUDA device"),
        (CudaFacts(**GOOD), 2, "device_out_of_range", r"device_id must be in [0, 0] (got 2); devices: device 0: NVIDIA H100"),
        (CudaFacts(**dict(GOOD, devices=(H100, P100))), -1, "device_out_of_range", "[0, 1] (got -1)"),
        (CudaFacts(**dict(GOOD, driver_version=(11, 8))), 0, "driver_too_old", "driver supports CUDA 11.8, toolkit is CUDA 12.9"),
        (CudaFacts(**dict(GOOD, nvvm_error="libNVVM cannot be found")), 0, "no_nvvm", "libNVVM"),
        (CudaFacts(**dict(GOOD, nvrtc_error="NVRTC missing")), 0, "no_nvrtc", "NVRTC"),
        # numba-cuda 0.30 under NumPy 2.5, as a GPU machine's image had it
        (CudaFacts(**dict(GOOD, compiler_error="AttributeError: module 'numpy' has no attribute 'row_stack'")),
         0, "no_compiler", "compiler does not load in this environment: AttributeError"),
        (CudaFacts(**dict(GOOD, devices=(H100, K80))), 1, "cc_too_low", "requires compute capability >= 5.0 (got 3.7 on device 1: Tesla K80)"),
    ],
)
def test_classify_every_reason(facts, device_id, code, text):
    avail = classify(facts, device_id)
    assert avail.code == code
    assert text in avail.reason
    assert bool(avail) == (code in ("ok", "simulator"))


def test_this_machine_answers_with_a_reason_not_a_traceback():
    avail = kernelrt.CUDABackend.availability()
    assert isinstance(avail.reason, str) and avail.reason
    assert kernelrt.CUDABackend.check_available() == avail.ok
    if not avail.ok:
        with pytest.raises(kernelrt.CudaUnavailableError) as info:
            kernelrt.CUDABackend()
        assert info.value.reason == avail.code
        assert isinstance(info.value, ImportError)  # the one error the CPU fallback catches


def test_auto_falls_back_to_cpu_with_one_notice(monkeypatch):
    if kernelrt.CUDABackend.check_available():
        pytest.skip("CUDA is available here")
    from kernelrt import selection

    monkeypatch.setattr(selection, "_defaults", {})
    monkeypatch.setattr(selection, "_notice_given", False)
    monkeypatch.delenv("KERNELRT_FALLBACK_NOTICE", raising=False)
    with pytest.warns(kernelrt.CPUFallbackWarning) as record:
        assert kernelrt.get_backend("auto").name == "cpu"
        assert kernelrt.get_backend("auto", enable_caching=False).name == "cpu"
    notices = [w for w in record if issubclass(w.category, kernelrt.CPUFallbackWarning)]
    assert len(notices) == 1  # this machine's reason; tests/runtime/test_fallback_notice.py has the rest
    with pytest.raises(kernelrt.CudaUnavailableError):
        kernelrt.get_backend("cuda")


@pytest.mark.parametrize(
    "error",
    [
        kernelrt.CudaUnavailableError("no driver", "no_driver"),
        kernelrt.LaunchConfigError("grid.x must be >= 1 (got 0)"),
        kernelrt.DeviceMemoryError("needs 2 GiB", 2 * 2**30, 2**30),
        kernelrt.ComputeCapabilityError("requires 6.0"),
        kernelrt.KernelArgumentError("bad"),
    ],
)
def test_errors_pickle(error):
    again = pickle.loads(pickle.dumps(error))
    assert type(again) is type(error) and str(again) == str(error)
    assert getattr(again, "reason", None) == getattr(error, "reason", None)
    assert getattr(again, "needed_bytes", None) == getattr(error, "needed_bytes", None)


# -- every reason ends with its fix ---------------------------------------------------------

CUDA12 = 'pip install "kernelrt[cuda12]"'
CUDA13 = 'pip install "kernelrt[cuda13]"'
NO_MODULE = "numba-cuda could not be imported: No module named 'numba.cuda'"
FIXES = [  # (facts, device_id, code, words of the fix)
    (CudaFacts(driver_error="\nCUDA driver library cannot be found.\n"), 0, "no_driver", "install the NVIDIA driver"),
    # a CUDA 13 toolkit the driver refuses: the CUDA 12 toolkit fits the driver
    (CudaFacts(driver_error="CUDA_ERROR_INSUFFICIENT_DRIVER (35)", runtime_version=(13, 0)), 0, "driver_too_old", CUDA12),
    (CudaFacts(**dict(GOOD, driver_version=(12, 4), runtime_version=(13, 0))), 0, "driver_too_old", CUDA12),
    (CudaFacts(**dict(GOOD, driver_version=(11, 8))), 0, "driver_too_old", "update the NVIDIA driver to one that supports CUDA 12"),
    (CudaFacts(driver_error="CUDA_ERROR_UNKNOWN (999)"), 0, "driver_error", "run nvidia-smi"),
    (CudaFacts(driver_version=(12, 4), devices=()), 0, "no_device", "CUDA_VISIBLE_DEVICES does not hide it"),
    (CudaFacts(**GOOD), 3, "device_out_of_range", "pass one of the device ids listed"),
    (CudaFacts(simulator=True, devices=(H100,)), 1, "device_out_of_range", "pass device_id=0"),
    (CudaFacts(**dict(GOOD, driver_version=(13, 0), runtime_version=(13, 0), nvvm_error="libNVVM cannot be found")),
     0, "no_nvvm", CUDA13),
    (CudaFacts(**dict(GOOD, nvrtc_error="NVRTC missing")), 0, "no_nvrtc", CUDA12),
    # the driver's CUDA version unknown: both extras, and how to tell which
    (CudaFacts(**dict(GOOD, driver_version=None, nvrtc_error="NVRTC missing")), 0, "no_nvrtc",
     '"kernelrt[cuda12]" for a CUDA 12 driver or "kernelrt[cuda13]" for a CUDA 13 one (nvidia-smi'),
    (CudaFacts(**dict(GOOD, compiler_error="AttributeError: module 'numpy' has no attribute 'row_stack'")),
     0, "no_compiler", "reinstall the numba-cuda and NumPy versions kernelrt supports: " + CUDA12),
    (CudaFacts(driver_error=NO_MODULE), 0, "no_compiler", 'reinstall numba-cuda: pip install "kernelrt[cuda12]" for'),
    (CudaFacts(**dict(GOOD, devices=(H100, K80))), 1, "cc_too_low", "pass device_id=0, or run on the CPU backend"),
    (CudaFacts(**dict(GOOD, devices=(K80,))), 0, "cc_too_low", "use a newer GPU, or run on the CPU backend"),
]


@pytest.mark.parametrize("facts,device_id,code,fix", FIXES)
def test_every_reason_ends_with_its_fix(facts, device_id, code, fix):
    avail = classify(facts, device_id)
    assert avail.code == code
    assert fix in avail.fix
    assert avail.reason.endswith("; " + avail.fix)
    assert ".;" not in avail.reason  # numba's full stop trimmed before the fix


def test_the_fixes_cover_every_reason_and_usable_cuda_has_none():
    assert {code for _, _, code, _ in FIXES} == set(REASONS) - {"ok", "simulator"}
    assert classify(CudaFacts(**GOOD)).fix == ""
    assert classify(CudaFacts(simulator=True, devices=(H100,))).fix == ""


@pytest.mark.parametrize(
    "driver,command",
    [((12, 8), CUDA12), ((13, 0), CUDA13), ((14, 1), CUDA13), (None, "nvidia-smi shows"), ((11, 8), "nvidia-smi shows")],
)
def test_the_extra_follows_the_drivers_cuda_version(driver, command):
    facts = CudaFacts(driver_version=driver)
    assert command in pip_install_command(facts)
    assert classify(facts).install_command == pip_install_command(facts)


@pytest.mark.parametrize("facts,device_id,code,fix", FIXES)
def test_the_constructor_raises_a_runtime_error_with_the_fix(monkeypatch, facts, device_id, code, fix):
    from kernelrt import cuda_backend

    monkeypatch.setattr(cuda_backend, "probe", lambda: facts)
    with pytest.raises(RuntimeError) as info:
        kernelrt.CUDABackend(device_id)
    assert isinstance(info.value, kernelrt.CudaUnavailableError) and info.value.reason == code
    assert str(info.value) == classify(facts, device_id).reason and fix in str(info.value)


def test_compile_ptx_without_nvrtc_names_the_install(monkeypatch):
    from tests.support.kernels import axpy

    from kernelrt import compiler

    facts = CudaFacts(driver_error="CUDA driver library cannot be found.", nvrtc_error="NVRTC cannot be found")
    monkeypatch.setattr(compiler, "probe", lambda: facts)
    monkeypatch.setattr(compiler, "cuda_dispatcher", None)  # fails the test if reached: refused first
    with pytest.raises(kernelrt.CudaUnavailableError, match="compiling PTX needs NVVM and NVRTC: NVRTC") as info:
        kernelrt.compile_ptx(axpy, "float64[::1], float64[::1], float64[::1], float64", cc=(9, 0))
    assert info.value.reason == "no_nvrtc"
    assert 'pip install "kernelrt[cuda12]" for a CUDA 12 driver' in str(info.value)
