"""Device discovery: what CUDA hardware and toolchain this process can use, and why not.

``probe()`` gathers raw facts once per process (driver, devices, toolkit, NVVM, NVRTC)
and turns every failure into text, never a traceback: without a GPU, numba's
``detect()`` raises ``CudaSupportError``, CuPy's ``getDeviceCount()`` raises
``cudaErrorInsufficientDriver`` and ``nvmlInit`` raises ``NVMLError_LibraryNotFound``.
``classify(facts, device_id)`` is a pure function from those facts to an
``Availability`` with a reason code, so each reason is testable without hardware.
Every reason that is not ok ends with its fix (``Availability.fix``): the pip extra that
brings CuPy, NVRTC and NVVM for the CUDA version the driver supports, or what to install
or change on the system. Probing never creates a CUDA context.
"""

from __future__ import annotations

import functools
import platform
import sys
from dataclasses import dataclass, field
from importlib import metadata, util

from . import __version__, config

__all__ = [
    "DeviceInfo",
    "CudaFacts",
    "Availability",
    "probe",
    "classify",
    "cpu_name",
    "host_memory_info",
    "package_versions",
    "pip_install_command",
    "device_range_problem",
    "toolchain_problem",
    "REASONS",
]

NUMBA_CUDA_MISSING = "numba-cuda could not be imported"  # how probe() words a broken install
NUMBA_CUDA_ABSENT = "numba-cuda is not installed"  # ... and one without it (numba's own numba.cuda then answers)
# numba-cuda's wheels (pyproject.toml installs it on these only): elsewhere, macOS, there is no CUDA
NUMBA_CUDA_PLATFORMS = ("linux", "win32")

# Reason codes, in the order classify() checks them.
REASONS = {
    "ok": "CUDA is available",
    "simulator": "running in Numba's CUDA simulator (NUMBA_ENABLE_CUDASIM=1)",
    "no_driver": "no NVIDIA driver (libcuda) was found",
    "driver_too_old": "the NVIDIA driver is too old for the CUDA toolkit",
    "driver_error": "the NVIDIA driver failed to initialise",
    "no_device": "the driver reports no CUDA device",
    "device_out_of_range": "the requested device id does not exist",
    "no_nvvm": "libNVVM (the CUDA compiler) was not found",
    "no_nvrtc": "NVRTC (the CUDA runtime compiler) was not found",
    "no_compiler": "numba-cuda's compiler does not load in this environment",
    "cc_too_low": "the device is older than the CUDA toolkit supports",
}


@dataclass(frozen=True)
class DeviceInfo:
    """One CUDA device as the driver reports it."""

    id: int
    name: str
    compute_capability: tuple[int, int]
    total_memory: int | None = None
    uuid: str | None = None
    pci_bus_id: str | None = None

    def describe(self) -> str:
        """One line for people: ``device 0: NVIDIA H100 80GB HBM3 (cc 9.0, 79.1 GiB)``."""
        mem = f", {self.total_memory / 2**30:.1f} GiB" if self.total_memory else ""
        cc = ".".join(map(str, self.compute_capability))
        return f"device {self.id}: {self.name} (cc {cc}{mem})"


@dataclass(frozen=True)
class CudaFacts:
    """Everything probe() learned; plain data so tests can build their own."""

    simulator: bool = False
    driver_error: str | None = None
    driver_version: tuple[int, int] | None = None
    runtime_version: tuple[int, int] | None = None
    devices: tuple[DeviceInfo, ...] = ()
    nvvm_error: str | None = None
    nvvm_version: tuple[int, ...] | None = None
    nvrtc_error: str | None = None
    compiler_error: str | None = None
    supported_ccs: tuple[tuple[int, int], ...] = ()

    @property
    def min_cc(self) -> tuple[int, int] | None:
        return min(self.supported_ccs) if self.supported_ccs else None


@dataclass(frozen=True)
class Availability:
    """Whether CUDA device ``device_id`` can run kernelrt kernels, and if not, why.

    Truthy when usable. ``code`` is one of ``REASONS``; ``reason`` is a sentence
    for people that ends with ``fix``, what to install or change (empty when usable);
    ``devices`` lists what the driver sees.
    """

    code: str
    reason: str
    device_id: int = 0
    devices: tuple[DeviceInfo, ...] = ()
    facts: CudaFacts = field(default_factory=CudaFacts, repr=False)
    fix: str = ""

    @property
    def install_command(self) -> str:
        """The pip command for kernelrt's CUDA extra (CuPy, NVRTC, NVVM) on this driver."""
        return pip_install_command(self.facts)

    @property
    def ok(self) -> bool:
        """Whether the device can run kernels (``code`` "ok", or "simulator")."""
        return self.code in ("ok", "simulator")

    def __bool__(self) -> bool:
        return self.ok

    def __str__(self) -> str:
        return self.reason


def device_range_problem(devices, device_id: int) -> str | None:
    """What is wrong with ``device_id`` for this device list (listing them), or None."""
    if 0 <= device_id < len(devices):
        return None
    listing = "; ".join(d.describe() for d in devices)
    return f"device_id must be in [0, {len(devices) - 1}] (got {device_id}); devices: {listing}"


def classify(facts: CudaFacts, device_id: int = 0) -> Availability:
    """Turn probe facts into the first reason device ``device_id`` is unusable."""
    result = functools.partial(_result, facts, device_id)

    if facts.simulator:
        if device_id != 0:
            return result("device_out_of_range", f"the simulator has one device, 0 (got {device_id})")
        return result("simulator")
    if facts.driver_error is not None:
        err = facts.driver_error
        if err.startswith((NUMBA_CUDA_MISSING, NUMBA_CUDA_ABSENT)):  # the install, not the driver
            return result("no_compiler", _first_line(err))
        if "cannot be found" in err or "not found" in err.lower():
            return result("no_driver", _first_line(err))
        if "INSUFFICIENT_DRIVER" in err:
            return result("driver_too_old", _first_line(err))
        if "NO_DEVICE" in err:
            return result("no_device", _first_line(err))
        return result("driver_error", _first_line(err))
    if not facts.devices:
        return result("no_device")
    out_of_range = device_range_problem(facts.devices, device_id)
    if out_of_range is not None:
        return result("device_out_of_range", out_of_range)
    if (
        facts.driver_version is not None
        and facts.runtime_version is not None
        and facts.driver_version[0] < facts.runtime_version[0]
    ):
        return result(
            "driver_too_old",
            f"driver supports CUDA {_ver(facts.driver_version)}, toolkit is CUDA "
            f"{_ver(facts.runtime_version)}",
        )
    missing = toolchain_problem(facts, device_id)
    if missing is not None:
        return missing
    dev = facts.devices[device_id]
    if facts.min_cc is not None and dev.compute_capability < facts.min_cc:
        return result(
            "cc_too_low",
            f"requires compute capability >= {_ver(facts.min_cc)} "
            f"(got {_ver(dev.compute_capability)} on device {dev.id}: {dev.name})",
        )
    return result("ok", dev.describe())


def toolchain_problem(facts: CudaFacts, device_id: int = 0) -> Availability | None:
    """Why CUDA kernels cannot be compiled here (NVVM, NVRTC or numba-cuda's compiler
    missing), or None. Compiling PTX for a compute capability needs these, not a driver."""
    for code, error in (("no_nvvm", facts.nvvm_error), ("no_nvrtc", facts.nvrtc_error),
                        ("no_compiler", facts.compiler_error)):
        if error is not None:
            return _result(facts, device_id, code, _first_line(error))
    return None


def _result(facts: CudaFacts, device_id: int, code: str, detail: str = "") -> Availability:
    detail = detail.rstrip(". ")  # numba's messages end with a full stop; the fix follows
    fix = _fix(code, facts, detail)
    if not detail or (code, detail.lower()) in _RESTATED:  # said once, not twice
        what = REASONS[code]
    elif detail.startswith(NUMBA_CUDA_ABSENT):  # says more than "the compiler does not load"
        what = detail
    else:
        what = f"{REASONS[code]}: {detail}"
    return Availability(code, what + (f"; {fix}" if fix else ""), device_id, facts.devices, facts, fix)


# numba's words for a missing driver restate the reason ("no NVIDIA driver (libcuda) was found")
_RESTATED = {("no_driver", "cuda driver library cannot be found"), ("no_driver", "cuda driver library not found")}


def pip_install_command(facts: CudaFacts | None = None) -> str:
    """The pip command for kernelrt's CUDA extra: CuPy, NVRTC and NVVM for one CUDA major.

    ``kernelrt[cuda13]`` for a driver that supports CUDA 13 or newer, ``kernelrt[cuda12]``
    for a CUDA 12 driver (pyproject.toml's extras); both, with how to tell, when the
    driver's version is unknown or older than either.
    """
    major = facts.driver_version[0] if facts is not None and facts.driver_version else None
    if major is not None and major >= 13:
        return 'pip install "kernelrt[cuda13]"'
    if major == 12:
        return 'pip install "kernelrt[cuda12]"'
    return ('pip install "kernelrt[cuda12]" for a CUDA 12 driver or "kernelrt[cuda13]" for a '
            "CUDA 13 one (nvidia-smi shows the driver's CUDA version)")


def _fix(code: str, facts: CudaFacts, detail: str) -> str:
    """What to install or change for reason ``code``, in words a user can act on."""
    pip = pip_install_command(facts)
    if code == "no_driver":
        return ("install the NVIDIA driver for your GPU (your distribution's nvidia-driver "
                "package, or https://www.nvidia.com/drivers), then check that nvidia-smi lists the GPU")
    if code == "driver_too_old":
        toolkit = facts.runtime_version[0] if facts.runtime_version else None
        driver = facts.driver_version[0] if facts.driver_version else None
        if driver == 12 or (driver is None and toolkit is not None and toolkit >= 13):
            # the toolkit is CUDA 13, too new for this driver: the CUDA 12 toolkit fits it
            return 'update the NVIDIA driver, or install the CUDA 12 toolkit: pip install "kernelrt[cuda12]"'
        return ("update the NVIDIA driver to one that supports CUDA 12 or newer (nvidia-smi "
                f"shows its CUDA version), then {pip}")
    if code == "driver_error":
        return ("run nvidia-smi: if it fails too, reinstall the NVIDIA driver or reboot (a driver "
                "upgraded without a reboot, or a resume from suspend, leaves it in this state)")
    if code == "no_device":
        return "check that nvidia-smi lists a GPU and that CUDA_VISIBLE_DEVICES does not hide it"
    if code == "device_out_of_range":
        return "pass device_id=0, the simulator's only device" if facts.simulator else "pass one of the device ids listed"
    if code in ("no_nvvm", "no_nvrtc"):  # both extras bring NVVM and NVRTC as wheels
        return f"install it with {pip}, or install the CUDA toolkit from NVIDIA"
    if code == "no_compiler" and detail.startswith(NUMBA_CUDA_ABSENT):
        if sys.platform not in NUMBA_CUDA_PLATFORMS:
            return "kernelrt runs on the CPU backend here; CUDA needs Linux or Windows, where numba-cuda installs"
        return f"install it: {pip}"
    if code == "no_compiler":
        what = "numba-cuda" if detail.startswith(NUMBA_CUDA_MISSING) else "the numba-cuda and NumPy versions kernelrt supports"
        return f"reinstall {what}: {pip}"
    if code == "cc_too_low":
        usable = [d.id for d in facts.devices if facts.min_cc is None or d.compute_capability >= facts.min_cc]
        other = f"pass device_id={usable[0]}, " if usable else "use a newer GPU, "
        return f"{other}or run on the CPU backend: kernelrt.get_backend('cpu')"
    return ""


def _ver(t) -> str:
    return ".".join(str(x) for x in t)


def _first_line(text: str) -> str:
    lines = [ln.strip() for ln in str(text).splitlines() if ln.strip() and ln.strip() != ":"]
    return lines[0] if lines else str(text)


@functools.lru_cache(maxsize=1)
def probe() -> CudaFacts:
    """Probe the CUDA stack once per process; never raises, never makes a context."""
    if config.simulator_enabled():
        cc = config.simulator_cc()
        sim = DeviceInfo(0, "Numba CUDA simulator", cc, None, None, None)
        return CudaFacts(simulator=True, devices=(sim,), supported_ccs=(cc,))
    if util.find_spec("numba_cuda") is None:  # numba's deprecated built-in numba.cuda would answer
        absent = NUMBA_CUDA_ABSENT + ("" if sys.platform in NUMBA_CUDA_PLATFORMS else
                                      " (it has no build for this platform)")
        return CudaFacts(driver_error=absent, compiler_error=absent)
    facts = {}
    facts.update(_probe_driver())
    facts.update(_probe_toolchain())
    return CudaFacts(**facts)


def _probe_driver() -> dict:
    try:
        from numba.cuda.cudadrv.driver import driver  # lazy: importing kernelrt loads no numba
    except Exception as e:  # numba-cuda itself missing or broken
        return {"driver_error": f"{NUMBA_CUDA_MISSING}: {e}"}
    try:
        if not driver.is_available:
            return {"driver_error": str(driver.initialization_error)}
        version = driver.get_version()
        count = driver.get_device_count()
        devices = tuple(_device_info(driver, i) for i in range(count))
    except Exception as e:
        return {"driver_error": str(e)}
    return {"driver_version": tuple(version), "devices": devices}


def _device_info(driver, ordinal: int) -> DeviceInfo:
    dev = driver.get_device(ordinal)
    name = dev.name.decode() if isinstance(dev.name, bytes) else str(dev.name)
    uuid = getattr(dev, "uuid", None)
    pci = None
    try:
        pci = f"{dev.PCI_DOMAIN_ID:04x}:{dev.PCI_BUS_ID:02x}:{dev.PCI_DEVICE_ID:02x}.0"
    except Exception:
        pass
    return DeviceInfo(ordinal, name, tuple(dev.compute_capability), nvml_memory(uuid)[1], uuid, pci)


def nvml_memory(uuid: str | None) -> tuple[int | None, int | None]:
    """(free, total) bytes from NVML, matched by UUID (NVML and CUDA may order devices
    differently); (None, None) without NVML. Opens no CUDA context."""
    if uuid is None:
        return None, None
    try:
        import pynvml  # NVML is opened only when asked; import kernelrt touches no GPU library

        pynvml.nvmlInit()
        info = pynvml.nvmlDeviceGetMemoryInfo(pynvml.nvmlDeviceGetHandleByUUID(uuid))
        return int(info.free), int(info.total)
    except Exception:
        return None, None


def _probe_toolchain() -> dict:
    out: dict = {}
    try:
        from numba.cuda import runtime  # lazy: importing kernelrt loads no numba

        out["runtime_version"] = tuple(runtime.get_version())
    except Exception:
        pass
    try:
        from numba.cuda.cudadrv import nvvm  # lazy: importing kernelrt loads no numba

        out["nvvm_version"] = tuple(nvvm.NVVM().get_version())
    except Exception as e:
        out["nvvm_error"] = str(e) or type(e).__name__
    try:
        from numba.cuda.cudadrv import nvrtc  # lazy: importing kernelrt loads no numba

        out["supported_ccs"] = tuple(tuple(cc) for cc in nvrtc.get_supported_ccs())
    except Exception as e:
        out["nvrtc_error"] = str(e) or type(e).__name__
    try:
        # The CUDA target's typing and lowering registries load at the first compile; a
        # NumPy newer than numba-cuda knows breaks them there (numba-cuda 0.30 with NumPy
        # 2.5: "module 'numpy' has no attribute 'row_stack'", seen on a GPU machine).
        # Loading them here (about 15 ms) turns that crash into a reason to fall back.
        import numba.cuda.cudaimpl  # noqa: F401
    except Exception as e:
        out["compiler_error"] = f"{type(e).__name__}: {e}"
    return out


@functools.lru_cache(maxsize=1)
def cpu_name() -> str:
    """The CPU model, for CPUBackend.device_name and the cache target."""
    if sys.platform.startswith("linux"):  # platform.processor() is often empty or "x86_64" there
        try:
            with open("/proc/cpuinfo") as f:
                for line in f:
                    if line.startswith("model name"):
                        return line.split(":", 1)[1].strip()
        except OSError:
            pass
    # "Intel64 Family 6 Model 85 Stepping 7, GenuineIntel" on Windows, "arm" or "i386" on macOS
    return platform.processor() or platform.machine() or "cpu"


def host_memory_info() -> tuple[int, int]:
    """(available, total) bytes of host RAM."""
    import psutil  # lazy: 30 ms, and only the memory planners ask

    memory = psutil.virtual_memory()
    return int(memory.available), int(memory.total)


def package_versions() -> dict:
    """Versions of Python, kernelrt and the libraries it runs on (those installed)."""
    # A copy of the source tree on sys.path (tools/gpu_check.sh) has no distribution metadata.
    out = {"python": sys.version.split()[0], "kernelrt": __version__}
    for dist in ("kernelrt", "numpy", "scipy", "numba", "numba-cuda", "llvmlite", "cupy-cuda12x", "cupy-cuda13x", "nvidia-ml-py", "diskcache"):
        try:
            out[dist] = metadata.version(dist)
        except metadata.PackageNotFoundError:
            pass
    return out
