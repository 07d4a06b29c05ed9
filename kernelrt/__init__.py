"""kernelrt: a custom-kernel compute runtime for scientific Python.

Write a kernel once, launch it on a CUDA GPU or, with the same result, on the CPU
cores; compiled kernels are cached on disk safely across processes.

    import kernelrt
    backend = kernelrt.get_backend("auto")          # CUDA if available, else CPU (and a
                                                    # CPUFallbackWarning, once, saying why)

    @kernelrt.kernel
    def axpy(i, out, x, y, a):
        if i < out.shape[0]:
            out[i] = a * x[i] + y[i]

    backend.launch_kernel(axpy, grid, block, out, x, y, 2.0)

Importing kernelrt loads neither numba nor any GPU library: the names below are
resolved on first use (PEP 562), so ``import kernelrt`` stays fast and touches no GPU.
Type checkers see every name with its type (the ``TYPE_CHECKING`` imports; the package
ships ``py.typed``).
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

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
    "njit": "host_jit",
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
    "CPUFallbackWarning": "errors",
}

if TYPE_CHECKING:  # what type checkers see (``X as X``: an explicit re-export); at run time,
    # __getattr__ imports each name's module on first use
    from .backend import Backend as Backend, CompiledKernel as CompiledKernel
    from .compiler import compile_ptx as compile_ptx
    from .cpu_backend import CPUBackend as CPUBackend
    from .cuda_backend import CUDABackend as CUDABackend
    from .discovery import (
        Availability as Availability,
        DeviceInfo as DeviceInfo,
        host_memory_info as host_memory_info,
    )
    from .disk_cache import cache_stats as cache_stats
    from .errors import (
        BackendMismatchError as BackendMismatchError,
        ComputeCapabilityError as ComputeCapabilityError,
        CPUFallbackWarning as CPUFallbackWarning,
        CpuTranslationError as CpuTranslationError,
        CudaUnavailableError as CudaUnavailableError,
        DeviceMemoryError as DeviceMemoryError,
        DeviceMismatchError as DeviceMismatchError,
        KernelArgumentError as KernelArgumentError,
        KernelrtError as KernelrtError,
        LaunchConfigError as LaunchConfigError,
    )
    from .host_jit import njit as njit
    from .kernel_def import cuda_kernel as cuda_kernel, device as device, Kernel as Kernel, kernel as kernel
    from .launch import DeviceLimits as DeviceLimits, LaunchConfig as LaunchConfig
    from .memory import (
        fit_batch as fit_batch,
        release_pool as release_pool,
        vram_guard as vram_guard,
        vram_monitor as vram_monitor,
        vram_status as vram_status,
        VRAMInfo as VRAMInfo,
    )
    from .prepared import LaunchSequence as LaunchSequence, PreparedLaunch as PreparedLaunch
    from .selection import get_backend as get_backend

__all__ = sorted(_EXPORTS) + ["__version__"]


if not TYPE_CHECKING:  # hidden from type checkers, so a misspelt name is an error there, not Any

    def __getattr__(name: str) -> Any:
        """Import an exported name's module on first use (PEP 562), then keep the name here."""
        module = _EXPORTS.get(name)
        if module is None:
            raise AttributeError(f"module 'kernelrt' has no attribute {name!r}")
        value = getattr(importlib.import_module(f"{__name__}.{module}"), name)
        globals()[name] = value
        return value


def __dir__() -> list[str]:
    return __all__
