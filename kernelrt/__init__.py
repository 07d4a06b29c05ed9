"""kernelrt: a custom-kernel compute runtime for scientific Python.

Write a kernel once, launch it on a CUDA GPU or, with the same result, on the CPU
cores; compiled kernels are cached on disk safely across processes.

    import kernelrt
    backend = kernelrt.get_backend("auto")          # CUDA if available, else CPU

    @kernelrt.kernel
    def axpy(i, out, x, y, a):
        if i < out.shape[0]:
            out[i] = a * x[i] + y[i]

    backend.launch_kernel(axpy, grid, block, out, x, y, 2.0)

Importing kernelrt loads neither numba nor any GPU library: the names below are
resolved on first use (PEP 562), so ``import kernelrt`` stays fast and touches no GPU.
"""

from __future__ import annotations

import importlib

__version__ = "0.1.0"

# public name -> module that defines it
_EXPORTS = {
    "Backend": "backend",
    "CompiledKernel": "backend",
    "PreparedLaunch": "prepared",
    "LaunchSequence": "prepared",
    "get_backend": "selection",
    "CUDABackend": "cuda_backend",
    "CPUBackend": "cpu_backend",
    "Kernel": "kernel_def",
    "kernel": "kernel_def",
    "cuda_kernel": "kernel_def",
    "device": "kernel_def",
    "LaunchConfig": "launch",
    "DeviceLimits": "launch",
    "Availability": "discovery",
    "DeviceInfo": "discovery",
    "VRAMInfo": "memory",
    "vram_status": "memory",
    "vram_guard": "memory",
    "vram_monitor": "memory",
    "release_pool": "memory",
    "fit_batch": "memory",
    "host_memory_info": "discovery",
    "compile_ptx": "compiler",
    "cache_stats": "disk_cache",
    "KernelrtError": "errors",
    "CudaUnavailableError": "errors",
    "LaunchConfigError": "errors",
    "ComputeCapabilityError": "errors",
    "DeviceMismatchError": "errors",
    "BackendMismatchError": "errors",
    "KernelArgumentError": "errors",
    "DeviceMemoryError": "errors",
    "CpuTranslationError": "errors",
}

__all__ = sorted(_EXPORTS) + ["__version__"]


def __getattr__(name: str):
    module = _EXPORTS.get(name)
    if module is None:
        raise AttributeError(f"module 'kernelrt' has no attribute {name!r}")
    value = getattr(importlib.import_module(f"{__name__}.{module}"), name)
    globals()[name] = value
    return value


def __dir__():
    return __all__
