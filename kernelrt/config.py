"""kernelrt's settings, read from the environment when asked for (``KERNELRT_DEBUG`` once,
at import, to set up logging).

Every knob of the package lives here, typed and documented, so no other module of
kernelrt reads ``os.environ``. The benchmarks (bench/, not installed) read two of their
own: ``KERNELRT_BENCH_QUICK`` (small sizes, set by ``kernelrt bench --quick``) and
``KERNELRT_MYOGEN_PYTHON`` (a Python 3.12 with MyoGen, the SFAP peer).

============================  ============================================================
``KERNELRT_CACHE_DIR``        root of the compiled-kernel cache (``disk_cache.resolve_cache_dir``)
``KERNELRT_CACHE``            ``0`` disables the disk cache (memory cache only)
``KERNELRT_CACHE_SIZE_GB``    disk cache size limit before LRU eviction (default 2; at least
                              1 MiB = 0.000977, finite)
``KERNELRT_DEBUG``            ``1`` logs cache and compile decisions at DEBUG level
``KERNELRT_DEBUG_KERNELS``    ``1`` makes backends built without ``debug=`` compile
                              debug kernels (CPU: bounds-checked; CUDA: ``debug=True``)
``KERNELRT_FALLBACK_NOTICE``  ``0`` silences the ``CPUFallbackWarning`` that
                              ``get_backend("auto")`` issues once per process when it
                              falls back to the CPU (default: on)
``KERNELRT_SIMULATOR_CC``     compute capability the CUDA simulator pretends to have,
                              e.g. ``9.0`` (Numba's simulator reports 5.2)
``KERNELRT_REPO``             the checkout whose ``bench/`` ``kernelrt bench`` runs
                              (default: the working directory, then the source tree)
``KERNELRT_MYOGEN``           ``1`` swaps MyoGen's SFAP code for kernelrt's in every process
                              (``kernelrt.integrations``; ``enable()`` sets it for children)
``KERNELRT_SPECTRALBRAIN``    the same for SpectralBrain's cotangent Laplacian
``CUDA_VISIBLE_DEVICES``      CUDA's own: the GPUs a process sees (dask-cuda sets one per
                              worker; ``kernelrt.distributed`` reports it)
``SUBJECTS_DIR``              FreeSurfer's own: its subjects directory, the default of
                              ``kernelrt cohort --subjects-dir``
``MYOGEN_DISABLE_GPU``        MyoGen's own: ``1`` makes ``use_gpu=None`` mean the CPU
``NUMBA_ENABLE_CUDASIM``      Numba's own switch: run CUDA kernels in the simulator
``NUMBA_THREADING_LAYER``     Numba's own: when set, kernelrt does not preload TBB
============================  ============================================================
"""

from __future__ import annotations

import logging
import math
import os

__all__ = [
    "cache_dir_override",
    "disk_cache_enabled",
    "cache_size_limit_bytes",
    "debug_enabled",
    "debug_kernels",
    "simulator_enabled",
    "simulator_cc",
    "bench_repo_override",
    "numba_threading_layer",
    "integration_requested",
    "request_integration",
    "myogen_gpu_disabled",
    "use_cache_dir",
    "visible_cuda_devices",
    "fallback_notice_enabled",
    "freesurfer_subjects_dir",
    "logger",
]

logger = logging.getLogger("kernelrt")


def _flag(name: str, default: bool) -> bool:
    value = os.environ.get(name)
    if value is None or value == "":
        return default
    return value.strip().lower() not in ("0", "false", "no", "off")


def cache_dir_override() -> str | None:
    """``KERNELRT_CACHE_DIR``: the kernel cache's root, or None (unset or empty: the default)."""
    return os.environ.get("KERNELRT_CACHE_DIR") or None


def disk_cache_enabled() -> bool:
    """``KERNELRT_CACHE``: False when set to 0/false/no/off (memory cache only)."""
    return _flag("KERNELRT_CACHE", True)


# The smallest disk cache worth having: a compiled kernel's entry is 30-50 KB for a small
# kernel and a few hundred KB for a large one, and SQLite's own pages count toward the
# limit too; under 1 MiB each store would evict the entries before it, so the cache would
# be silently off. Below it the setting is an error that points at KERNELRT_CACHE=0.
MIN_CACHE_SIZE_GB = 2**-10


def cache_size_limit_bytes() -> int:
    """``KERNELRT_CACHE_SIZE_GB`` (default 2) in bytes.

    Raises:
        ValueError: not a finite number, or below ``MIN_CACHE_SIZE_GB`` (1 MiB); the
            message names the variable, the expected form and the value given.
    """
    value = os.environ.get("KERNELRT_CACHE_SIZE_GB") or "2"  # set but empty: the default
    expected = f"a finite number of gigabytes >= {MIN_CACHE_SIZE_GB:.4g} (1 MiB), e.g. 2"
    try:
        gb = float(value)
    except ValueError:
        gb = math.nan
    if not math.isfinite(gb) or gb <= 0:
        raise ValueError(f"KERNELRT_CACHE_SIZE_GB must be {expected} (got {value!r})")
    if gb < MIN_CACHE_SIZE_GB:
        raise ValueError(
            f"KERNELRT_CACHE_SIZE_GB must be {expected}: a smaller cache cannot hold a compiled kernel "
            f"(got {value!r}); to turn the disk cache off set KERNELRT_CACHE=0"
        )
    return int(gb * 2**30)


def debug_enabled() -> bool:
    """``KERNELRT_DEBUG``: whether cache and compile decisions are logged at DEBUG level."""
    return _flag("KERNELRT_DEBUG", False)


def debug_kernels(debug: bool | None = None) -> bool:
    """A backend's debug mode: ``debug`` when given, else ``KERNELRT_DEBUG_KERNELS``.

    Args:
        debug: the backend's ``debug=`` argument: True, False or None.

    Returns:
        Whether the backend compiles debug (CPU: bounds-checked) kernels.

    Raises:
        TypeError: ``debug`` is not True, False or None.
    """
    if debug is None:
        return _flag("KERNELRT_DEBUG_KERNELS", False)
    if not isinstance(debug, bool):
        raise TypeError(f"debug must be True, False or None (got {type(debug).__name__}: {debug!r})")
    return debug


def simulator_enabled() -> bool:
    """Numba's ``NUMBA_ENABLE_CUDASIM``: whether CUDA kernels run in its simulator."""
    return _flag("NUMBA_ENABLE_CUDASIM", False)


def simulator_cc() -> tuple[int, int]:
    """``KERNELRT_SIMULATOR_CC``: the compute capability the simulator reports (default 5.2).

    Raises:
        ValueError: not of the form ``major.minor``.
    """
    value = os.environ.get("KERNELRT_SIMULATOR_CC")
    if not value:
        return (5, 2)
    try:
        major, minor = value.replace(",", ".").split(".")
        return (int(major), int(minor))
    except ValueError:
        raise ValueError(
            f"KERNELRT_SIMULATOR_CC must look like '9.0' (got {value!r})"
        ) from None


def bench_repo_override() -> str | None:
    """``KERNELRT_REPO``: the checkout whose ``bench/`` ``kernelrt bench`` runs, or None."""
    return os.environ.get("KERNELRT_REPO") or None


def numba_threading_layer() -> str | None:
    """Numba's ``NUMBA_THREADING_LAYER``, or None: when set, kernelrt does not preload TBB."""
    return os.environ.get("NUMBA_THREADING_LAYER") or None


def integration_requested(variable: str) -> bool:
    """Whether ``variable`` (``KERNELRT_MYOGEN``, ...) asks for an integration: set, not 0/false/no/off."""
    return _flag(variable, False)


def request_integration(variable: str, on: bool) -> None:
    """Set (or remove) an integration's variable, so that child processes inherit the switch."""
    if on:
        os.environ[variable] = "1"
    else:
        os.environ.pop(variable, None)


def myogen_gpu_disabled() -> bool:
    """MyoGen's own ``MYOGEN_DISABLE_GPU``: its ``use_gpu=None`` then means the CPU."""
    return os.environ.get("MYOGEN_DISABLE_GPU", "").lower() in ("1", "true", "yes")


def use_cache_dir(path) -> None:
    """Point this process (and its children) at another kernel cache directory.

    ``kernelrt.distributed.KernelrtPlugin(cache_dir=...)`` calls it on each worker, so that
    every backend the worker makes, the defaults of ``get_backend`` included, shares it.
    """
    os.environ["KERNELRT_CACHE_DIR"] = os.fspath(path)


def visible_cuda_devices() -> str | None:
    """CUDA's ``CUDA_VISIBLE_DEVICES`` (None when unset): the GPUs this process sees."""
    return os.environ.get("CUDA_VISIBLE_DEVICES")


def fallback_notice_enabled() -> bool:
    """``KERNELRT_FALLBACK_NOTICE``: False when set to 0/false/no/off.

    When True (the default), ``get_backend("auto")`` issues one ``CPUFallbackWarning`` per
    process when it falls back to the CPU.
    """
    return _flag("KERNELRT_FALLBACK_NOTICE", True)


def freesurfer_subjects_dir() -> str | None:
    """FreeSurfer's ``SUBJECTS_DIR`` (None when unset or empty): its subjects directory."""
    return os.environ.get("SUBJECTS_DIR") or None


if debug_enabled():
    logging.basicConfig()
    logger.setLevel(logging.DEBUG)
