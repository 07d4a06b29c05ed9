"""Numba compilation of kernelrt kernels for the CPU and CUDA targets, through the caches.

One numba dispatcher exists per (kernel, target, debug mode) per process; its overloads
are the in-memory cache. A missing overload is looked up in the disk cache by a key built
from the kernel's code and everything it reads (cache_key.py), the argument types, the
options, the target, numba's code-generation settings and the toolchain versions; otherwise it is compiled once under a
per-key lock (other processes wait, then load) and stored. The backends answer each
dispatcher's type miss themselves (``numba_internals.on_missing_overload``: numba's C
dispatcher calls it when no overload matches the arguments exactly), so numba never compiles behind the
cache's back and a new argument type is checked, with a clear error, before anything
compiles or runs.

What is stored is numba's own serialised form: ``CompileResult._reduce()`` on the CPU
(what numba's ``cache=True`` writes) and ``_Kernel._reduce_states()`` for CUDA (LLVM IR,
PTX and, when compiled on a device, the cubin). The driver version is not in the key,
so offline-built PTX serves every driver; a cubin linked by another driver is dropped
on load and the PTX linked again. That is why CUDA kernels are compiled without
link-time optimisation (``CUDA_JIT_OPTIONS``): an LTO kernel links from LTO-IR, which
is not stored.

CUDA kernels can also be compiled with no device present (``compile_cuda_offline``),
for ``kernelrt cache warm --cc 80,90`` and the PTX test layer: numba-cuda asks the
current device for its compute capability while compiling, and we answer for it.
"""

from __future__ import annotations

import pickle
import threading
import time
import weakref

from . import codegen, config, cuda_on_cpu
from .cache_key import (
    KeyBuilder,
    codegen_settings,
    cpu_target,
    function_fingerprint,
    toolchain_versions,
)
from .cpu_threads import prepare_threading_layer
from .discovery import probe, toolchain_problem
from .disk_cache import disk_cache_for
from .errors import ComputeCapabilityError, CudaUnavailableError
from .kernel_def import Kernel
from .ptxas import assemble, find_ptxas, ptxas_version
from .numba_internals import (
    add_cpu_overload,
    add_cuda_overload,
    compile_cuda_for_cc,
    cpu_overload_state,
    cuda_arch,
    cuda_overload_state,
    add_offline_cubin,
    link_cubin,
    load_or_relink,
    ptx_for_cc,
    serialize,
)

__all__ = [
    "cpu_dispatcher",
    "cpu_entry_types",
    "cuda_dispatcher",
    "ensure_cpu",
    "ensure_cuda",
    "compile_cuda_offline",
    "compile_ptx",
    "load_kernels", "through_cache",
]

_PAYLOAD_VERSION = 1
_dispatchers: "weakref.WeakKeyDictionary[Kernel, dict]" = weakref.WeakKeyDictionary()
_registry_lock = threading.RLock()
_key_locks: dict[str, threading.Lock] = {}


# -- dispatchers ------------------------------------------------------------------


def _entry_functions(kernel: Kernel, target: str, debug: bool = False):
    """The Python function numba compiles for ``target`` (``debug``: for the debug mode)."""
    if target == "cpu":
        import numba  # lazy: importing kernelrt loads no numba

        if kernel.kind == "cuda":  # its registered twin, else its own source translated
            return kernel.cpu_twin or cuda_on_cpu.cpu_twin(kernel, debug)
        # inline="always" inlines at numba-IR level; an LLVM call per element costs ~5x.
        body = numba.njit(inline="always", fastmath=kernel.options["fastmath"])(kernel.py_func)
        src = codegen.cpu_entry_source(kernel.name, kernel.ndim, kernel.params)
        ns = {"prange": numba.prange, "body": body, "__name__": kernel.py_func.__module__}
        return codegen.materialize(src, f"{kernel.name}__cpu", ns, f"{kernel.qualname} cpu")
    from numba import cuda  # lazy: importing kernelrt loads no numba

    if kernel.kind == "cuda":
        return kernel.py_func
    body = cuda.jit(device=True, fastmath=kernel.options["fastmath"])(kernel.py_func)
    src = codegen.cuda_entry_source(kernel.name, kernel.ndim, kernel.params)
    ns = {"cuda": cuda, "body": body, "__name__": kernel.py_func.__module__}
    return codegen.materialize(src, f"{kernel.name}__cuda", ns, f"{kernel.qualname} cuda")


def _dispatcher(kernel: Kernel, target_label: str, make):
    with _registry_lock:
        per_kernel = _dispatchers.setdefault(kernel, {})
        if target_label not in per_kernel:
            per_kernel[target_label] = make()
        return per_kernel[target_label]


def cpu_dispatcher(kernel: Kernel, debug: bool = False):
    """The process's ``njit(parallel=True)`` dispatcher of ``kernel``'s CPU entry.

    With ``debug``, a separate dispatcher whose code checks every array index (IndexError)
    and runs serially: numba drops exceptions raised inside a prange loop (numba/numba#9380).
    """
    def make():
        import numba  # lazy: importing kernelrt loads no numba

        prepare_threading_layer()
        entry = _entry_functions(kernel, "cpu", debug)
        # A twin is parallel only if it asks for it (prange); generated loops always do.
        # Debug code runs serially: numba drops an IndexError raised inside a prange loop.
        parallel = (kernel.kind == "thread" or "prange" in entry.__code__.co_names) and not debug
        checks = {"boundscheck": True} if debug else {}  # unset otherwise: NUMBA_DEBUGINFO may set it
        if kernel.kind == "cuda":  # a fast-math division by zero gives inf, as on a GPU
            checks["error_model"] = codegen.error_model(kernel.options["fastmath"])
        return numba.njit(parallel=parallel, nogil=True, fastmath=kernel.options["fastmath"], **checks)(entry)

    return _dispatcher(kernel, "cpu:debug" if debug else "cpu", make)


# numba-cuda turns link-time optimisation on wherever nvJitLink is installed. An LTO
# kernel is linked from LTO-IR, which numba-cuda neither pickles nor makes offline, so a
# cache entry without a cubin (`kernelrt cache warm --cc` on a machine with no GPU, or a
# cubin from another driver) went back through NVVM at its first launch: seen on an H100,
# where the simulator and PTX layers, which never link, could not see it. kernelrt's
# kernels are one module each (device functions are compiled into it), so LTO has nothing
# to optimise across; without it an entry's PTX is all the driver needs to link.
CUDA_JIT_OPTIONS = {"lto": False}


def cuda_dispatcher(kernel: Kernel, cc, debug: bool = False):
    """The process's ``cuda.jit`` dispatcher of ``kernel`` for compute capability ``cc``.

    With ``debug``, a separate dispatcher compiled ``debug=True, opt=False``: exceptions
    raised in the kernel reach the host, with debug info. numba-cuda cannot check array
    bounds on the device (``boundscheck=True`` raises NotImplementedError).
    """

    def make():
        from numba import cuda  # lazy: importing kernelrt loads no numba

        options = {} if config.simulator_enabled() else dict(CUDA_JIT_OPTIONS)  # the simulator takes no lto
        if debug:
            options.update(debug=True, opt=False)  # numba-cuda warns that debug with opt may crash
        return cuda.jit(_entry_functions(kernel, "cuda"), fastmath=kernel.options["fastmath"], **options)

    return _dispatcher(kernel, f"cuda:{cc[0]}.{cc[1]}" + (":debug" if debug else ""), make)


# -- keys ---------------------------------------------------------------------------


def _key(kernel: Kernel, entry, argtypes, target_label: str, versions: str, debug: bool = False) -> str:
    """The disk-cache key; ``target_label`` starts with ``cpu:`` or ``cuda:``."""
    kb = KeyBuilder()
    kb.add("kernel", kernel.qualname).add("kind", kernel.kind).add("ndim", str(kernel.ndim))
    kb.add("code", function_fingerprint(entry))
    if kernel.kind == "thread":
        kb.add("body", function_fingerprint(kernel.py_func))
    kb.add("signature", ", ".join(str(t) for t in argtypes))
    kb.add("options", repr(sorted(kernel.options.items())))
    kb.add("target", target_label)
    kb.add("codegen", codegen_settings(target_label.split(":")[0], debug))  # NUMBA_OPT, debug mode...
    kb.add("versions", versions)
    return kb.digest()


# -- the shared miss path -------------------------------------------------------------------


def through_cache(disk, key: str, meta: dict, compile_fn, dump, load, present) -> str:
    """Load ``key`` from disk or compile it once across processes and threads.

    Returns 'disk', 'compiled', or 'memory' when another thread of this process added
    the overload while this one waited for the key (adding it twice would make numba's
    dispatch ambiguous).
    """
    with _registry_lock:
        key_lock = _key_locks.setdefault(key, threading.Lock())
    with key_lock:
        if present():
            return "memory"
        if _try_load(disk, key, load):
            return "disk"
        with disk.lock(key):
            if _try_load(disk, key, load):  # another process compiled it while we waited
                return "disk"
            t0 = time.perf_counter()
            obj = compile_fn()
            seconds = time.perf_counter() - t0
            disk.record(misses=1, compile_seconds=seconds)
            config.logger.debug("compiled %s for %s in %.2fs", meta["kernel"], meta["target"], seconds)
            try:
                payload = serialize((_PAYLOAD_VERSION, dump(obj)))
            except Exception as e:  # uncachable (e.g. dynamic globals): keep it in memory only
                _warn_uncachable(meta["kernel"], e)
                return "compiled"
            disk.store(key, payload, dict(meta, compile_seconds=seconds))
            return "compiled"


_uncachable_warned: set[str] = set()


def _warn_uncachable(kernel: str, why) -> None:
    """Once per kernel: it compiles in every process because numba cannot serialise it."""
    if kernel not in _uncachable_warned:
        _uncachable_warned.add(kernel)
        config.logger.warning(
            "kernelrt: %s cannot be stored in the disk cache (%s), so every process compiles it; "
            "this happens when the kernel reads runtime state such as numba.get_num_threads()",
            kernel, why,
        )


def _try_load(disk, key: str, load) -> bool:
    entry = disk.load(key)
    if entry is None:
        return False
    payload, meta = entry
    t0 = time.perf_counter()
    try:
        version, state = pickle.loads(payload)
        if version != _PAYLOAD_VERSION:
            raise ValueError(f"payload version {version}")
        load(state, meta)
    except Exception as e:  # written by an incompatible numba, or damaged: recompile
        config.logger.debug("cache entry %s unusable (%s); recompiling", key[:12], e)
        disk.reject(key, f"unloadable: {e}")
        return False
    seconds = time.perf_counter() - t0
    disk.record(hits=1, seconds_saved=max(0.0, float(meta.get("compile_seconds", 0.0)) - seconds))
    config.logger.debug("loaded %s from the disk cache in %.3fs", meta.get("kernel"), seconds)
    return True


# -- CPU ------------------------------------------------------------------------------------


def ensure_cpu(kernel: Kernel, argtypes: tuple, disk, debug: bool = False) -> str:
    """Make sure the CPU dispatcher (``debug``: the bounds-checked one) has an overload for ``argtypes``."""
    disp = cpu_dispatcher(kernel, debug)
    full = cpu_entry_types(kernel, argtypes)
    if full in disp.overloads:
        disk.record(memory_hits=1)
        return "memory"
    target = f"cpu:{cpu_target()}"
    key = _key(kernel, disp.py_func, full, target, toolchain_versions("cpu"), debug)

    def compile_fn():
        disp.compile(full)
        return disp.overloads[full]

    def load(state, meta):
        add_cpu_overload(disp, state)

    meta = {"kernel": kernel.qualname, "target": target, "signature": str(full)}
    return through_cache(disk, key, meta, compile_fn, cpu_overload_state, load, lambda: full in disp.overloads)


def cpu_entry_types(kernel: Kernel, argtypes) -> tuple:
    """The CPU entry's numba types: the leading index (or grid, block) arguments + ``argtypes``."""
    from numba.core import types as nbtypes  # lazy: importing kernelrt loads no numba

    if kernel.kind == "thread":
        return (nbtypes.int64,) * codegen.cpu_index_arity(kernel.ndim) + tuple(argtypes)
    dims = nbtypes.UniTuple(nbtypes.int64, 3)  # a twin's grid and block
    if kernel.cpu_twin is None:  # a translated kernel also takes the launch's dynamic shared memory
        return (dims, dims, nbtypes.int64) + tuple(argtypes)
    return (dims, dims) + tuple(argtypes)


# -- CUDA -----------------------------------------------------------------------------------


def ensure_cuda(kernel: Kernel, argtypes: tuple, cc, disk, debug: bool = False) -> str:
    """Make sure the dispatcher for ``cc`` (and ``debug``) has an overload; call inside the device's context."""
    disp = cuda_dispatcher(kernel, cc, debug)
    if config.simulator_enabled():
        return "simulator"
    argtypes = tuple(argtypes)
    if argtypes in disp.overloads:
        disk.record(memory_hits=1)
        return "memory"

    def compile_fn():
        disp.compile(argtypes)
        kern = disp.overloads[argtypes]
        link_cubin(kern)  # link now, so the entry carries the cubin too
        return kern

    return _through_cache_cuda(kernel, disp, argtypes, cc, disk, compile_fn, debug)


def _through_cache_cuda(kernel, disp, argtypes: tuple, cc, disk, compile_fn, debug: bool = False,
                        meta: dict | None = None, on_device: bool = True) -> str:
    """``through_cache`` for a CUDA overload of ``disp`` for ``cc``; ``compile_fn`` may add to ``meta``."""
    arch = cuda_arch(cc)
    target = f"cuda:sm_{arch[0]}{arch[1]}{arch[2]}"
    key = _key(kernel, disp.py_func, argtypes, target, f"{toolchain_versions('cuda')}; jit {CUDA_JIT_OPTIONS}", debug)
    meta = meta if meta is not None else {}
    meta.update({"kernel": kernel.qualname, "target": target, "signature": str(argtypes),
                 "driver": _driver_version()})  # the driver that linked the cubin, if any
    return through_cache(disk, key, meta, compile_fn, cuda_overload_state, _loader_cuda(disp, argtypes, on_device),
                          lambda: argtypes in disp.overloads)


def _loader_cuda(disp, argtypes, on_device: bool = True):
    def load(state, meta):
        # A cubin linked by another driver's PTX JIT is not trusted: link the PTX again. One
        # ptxas made offline ("cubin" in the meta) is kept and loaded at once on a device, so a
        # driver that refuses it (older than that ptxas) links the PTX here, not at a launch.
        own = meta.get("driver") == _driver_version()
        offline = bool(meta.get("cubin"))
        add_cuda_overload(disp, argtypes, state, relink=not own and not offline)
        if offline and not own and on_device and not load_or_relink(disp.overloads[argtypes]):
            config.logger.debug("the driver refused the offline cubin of %s: linking its PTX", meta.get("kernel"))

    return load


def _driver_version():
    version = probe().driver_version
    return list(version) if version else None


def compile_cuda_offline(kernel: Kernel, argtypes: tuple, cc, disk) -> tuple[str, str]:
    """Compile for compute capability ``cc`` with no GPU; returns (status, PTX)."""
    if config.simulator_enabled():
        raise RuntimeError("offline CUDA compilation is not available under the CUDA simulator")
    missing = toolchain_problem(probe())
    if missing is not None:  # say what to install, before numba fails deep in a compile
        raise CudaUnavailableError(f"compiling PTX needs NVVM and NVRTC: {missing.reason}", missing.code)
    disp = cuda_dispatcher(kernel, cc)
    argtypes = tuple(argtypes)
    meta: dict = {}

    def compile_fn():
        kern = compile_cuda_for_cc(disp, argtypes, cc)
        if find_ptxas() is not None:  # a cubin beside the PTX: the device loads it without a JIT
            try:
                if add_offline_cubin(kern, cc, assemble):
                    meta["cubin"] = f"ptxas {ptxas_version()}"
            except RuntimeError as e:  # ptxas refused or failed: the entry keeps its PTX only
                config.logger.debug("no offline cubin for %s: %s", kernel.qualname, e)
        return kern

    if argtypes in disp.overloads:
        status = "memory"
    else:
        status = _through_cache_cuda(kernel, disp, argtypes, cc, disk, compile_fn, meta=meta, on_device=False)
    return status, ptx_for_cc(disp.overloads[argtypes], cc)


def compile_ptx(kernel, signature, cc=(9, 0), *, cache=None) -> str:
    """PTX of ``kernel`` for compute capability ``cc``; needs no GPU (only NVVM and NVRTC).

    ``kernel`` is a kernelrt Kernel or a numba.cuda-style function; ``signature`` names
    its argument types (``"float64[::1], float64"``). The result goes through the disk
    cache like any compilation, so a machine with that GPU later loads it.
    """
    if not isinstance(kernel, Kernel):
        kernel = Kernel(getattr(kernel, "py_func", kernel), kind="cuda")
    if not (isinstance(cc, tuple) and len(cc) == 2 and all(isinstance(x, int) for x in cc)):
        raise ValueError(f"cc must be a (major, minor) tuple such as (9, 0) (got {cc!r})")
    argtypes = kernel.parse_signature(signature)
    _, ptx = compile_cuda_offline(kernel, argtypes, cc, cache if cache is not None else disk_cache_for())
    return ptx


def load_kernels(entries, compile_one):
    """Load or compile each ``(kernel, signature)`` of a family's ``warm_specs()`` list.

    What ``kernelrt cache warm`` and ``kernelrt.distributed.KernelrtPlugin`` both do:
    ``compile_one(kernel, signature)`` returns its status ("compiled", "disk", "memory"),
    and a kernel the device cannot run (``ComputeCapabilityError``: fp64 atomics below
    cc 6.0, never launched there) is "unsupported" instead of an error.

    Yields:
        ``(kernel, status, seconds)`` after each kernel.
    """
    for kernel, signature in entries:
        t0 = time.perf_counter()
        try:
            status = compile_one(kernel, signature)
        except ComputeCapabilityError:
            status = "unsupported"
        yield kernel, status, time.perf_counter() - t0
