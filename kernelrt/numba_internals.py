"""Every use of numba's and numba-cuda's private APIs, in one module.

kernelrt needs five things that numba offers no public API for: to answer a dispatcher's
"no overload matches these arguments" itself (so new types are checked and go through
the disk cache), to serialise a compiled overload and add it back to a dispatcher in
another process, to compile CUDA code for a compute capability with no GPU present, to
launch an overload chosen once (prepared launches), and a few driver calls numba's public
device API lacks. A numba or numba-cuda upgrade means
auditing this file and running the PTX, simulator and GPU test layers; no other module
of kernelrt touches a private name.

Checked against numba 0.68.1 with llvmlite 0.50.0 (the CPU test layers) and numba-cuda
0.30.4 (the simulator and PTX layers, and on an H100 with numba 0.68.0, driver 580 and
CUDA 13.0). pyproject.toml pins numba to 0.68 and numba-cuda to 0.30 for this reason;
tests/runtime/test_numba_internals.py drives the CPU-side ones against what is installed.

=====================================================  ======================================
Private API                                             Used by
=====================================================  ======================================
``Dispatcher._compile_for_args`` (replaced)             ``on_missing_overload``
``CompileResult._reduce`` / ``._rebuild``               ``cpu_overload_state``, ``add_cpu_overload``
``BaseContext.refresh``, ``insert_user_function``       ``add_cpu_overload``
``Dispatcher.add_overload``                             ``add_cpu_overload``, ``add_cuda_overload``
``numba.core.serialize.dumps``                          ``serialize``
``numba.cuda.dispatcher._Kernel`` (+ ``_rebuild``,      ``compile_cuda_for_cc``, ``add_cuda_overload``,
``_reduce_states``)                                     ``cuda_overload_state``
``_Kernel._codelibrary`` (``get_cubin``,                ``link_cubin``, ``ptx_for_cc``,
``get_asm_str``, ``get_cufunc``, ``_cubin_cache``,      ``kernel_attributes``, ``add_cuda_overload``,
``_linkerinfo_cache``, ``_linking_files``,              ``allow_dynamic_shared_mem``,
``_max_registers``, ``needs_cudadevrt``,             ``add_offline_cubin``, ``load_or_relink``
``_cufunc_cache``)
``numba.cuda.dispatcher.get_current_device``,           ``pretend_device`` (patched, under
``numba.cuda.codegen.devices``, ``global_compiler_lock``  numba-cuda's compiler lock)
``cudadrv.driver``: ``driver``, ``binding``,            ``allow_dynamic_shared_mem``, ``memset_zero``,
``device_memset``, ``get_active_context``               ``current_device_ordinal``
``Context.memory_manager.deallocations``,               ``free_deferred``
``Context.deallocations``
``numba.cuda.typing.typeof.typeof``                     ``cuda_typeof``
``Dispatcher.overloads``, ``_Kernel.launch``,           ``prepared_overload``, ``launch_overload``,
``launch_config_sensitive``, ``driver._to_core_stream``   ``core_stream``
``_Intrinsic._defn``                                    ``intrinsic_generator``
=====================================================  ======================================

Nothing here is imported by ``import kernelrt``: every function imports numba when called.
"""

from __future__ import annotations

import contextlib
import threading
import types

__all__ = [
    "on_missing_overload",
    "serialize",
    "intrinsic_generator",
    "cpu_overload_state",
    "add_cpu_overload",
    "cuda_arch",
    "link_cubin",
    "cuda_overload_state",
    "add_cuda_overload",
    "add_offline_cubin",
    "load_or_relink",
    "compile_cuda_for_cc",
    "ptx_for_cc",
    "pretend_device",
    "prepared_overload",
    "core_stream",
    "launch_overload",
    "kernel_attributes",
    "allow_dynamic_shared_mem",
    "memset_zero",
    "free_deferred",
    "current_device_ordinal",
    "cuda_typeof",
]


# -- both targets ------------------------------------------------------------------------


def on_missing_overload(dispatcher, handler) -> None:
    """Answer ``dispatcher``'s type misses with ``handler(*args, **kws)``.

    The handler makes sure an overload exists and returns its key in
    ``dispatcher.overloads`` (the numba argument types). numba's C dispatcher calls
    ``_compile_for_args`` on a miss and launches what it returns: on the CPU the
    overload's ``entry_point``, on CUDA the overload (a ``_Kernel``) itself.
    """

    from numba.core.compiler import CompileResult  # lazy: importing kernelrt loads no numba

    def compile_for_args(*args, **kws):
        overload = dispatcher.overloads[handler(*args, **kws)]
        # (a CUDA _Kernel has an entry_point attribute too, always None)
        return overload.entry_point if isinstance(overload, CompileResult) else overload

    dispatcher._compile_for_args = compile_for_args


def serialize(obj) -> bytes:
    """numba's pickler (cloudpickle), which serialises generated functions by value."""
    from numba.core.serialize import dumps  # lazy: importing kernelrt loads no numba

    return dumps(obj)


def intrinsic_generator(value):
    """The Python code generator of a numba ``@intrinsic``, else None (for the cache key)."""
    defn = getattr(value, "_defn", None)
    return defn if isinstance(defn, types.FunctionType) else None


# -- CPU -------------------------------------------------------------------------------------


def cpu_overload_state(cres):
    """The picklable state of a CPU overload; TypeError if numba cannot cache it."""
    if cres.library.has_dynamic_globals or any(not x.can_cache for x in cres.lifted):
        raise TypeError("uses dynamic globals or lifted loops")
    return cres._reduce()


def add_cpu_overload(dispatcher, state) -> None:
    """Rebuild a CPU overload from ``cpu_overload_state`` and add it to ``dispatcher``."""
    from numba.core import compiler  # lazy: importing kernelrt loads no numba

    dispatcher.targetctx.refresh()  # as numba's own cache does before rebuilding
    cres = compiler.CompileResult._rebuild(dispatcher.targetctx, *state)
    dispatcher.targetctx.insert_user_function(cres.entry_point, cres.fndesc, [cres.library])
    dispatcher.add_overload(cres)


# -- CUDA compilation ------------------------------------------------------------------------


def cuda_arch(cc) -> tuple:
    """numba-cuda's arch tuple for a device: sm_90 and newer use the 'a' variant."""
    major, minor = cc[:2]
    return (major, minor, "a" if (major, minor) >= (9, 0) else "")


def link_cubin(kern) -> None:
    """Link a CUDA overload now, so that its cached state carries the cubin too."""
    kern._codelibrary.get_cubin()


def cuda_overload_state(kern) -> dict:
    """The picklable state of a CUDA overload (PTX and, once linked, the cubin)."""
    return kern._reduce_states()


def add_cuda_overload(dispatcher, argtypes: tuple, state: dict, relink: bool) -> None:
    """Rebuild a CUDA overload and add it; ``relink`` drops its cubin to link the PTX again."""
    from numba.cuda.dispatcher import _Kernel  # lazy: importing kernelrt loads no numba

    kern = _Kernel._rebuild(**state)
    kern.objectmode = False  # _rebuild omits it; numba's dispatch reads it (nopython_signatures)
    if relink:
        kern._codelibrary._cubin_cache.clear()
        kern._codelibrary._linkerinfo_cache.clear()
    dispatcher.add_overload(kern, argtypes)


def compile_cuda_for_cc(dispatcher, argtypes: tuple, cc):
    """Compile an overload for compute capability ``cc`` with no GPU, add it, return it."""
    # dispatcher.compile() would also bind (load) the kernel, which needs a device.
    from numba.cuda.dispatcher import _Kernel  # lazy: importing kernelrt loads no numba

    with pretend_device(cc):
        kern = _Kernel(dispatcher.py_func, argtypes, **dispatcher.targetoptions)
    dispatcher.add_overload(kern, argtypes)
    return kern


def add_offline_cubin(kern, cc, assemble) -> bool:
    """Give an overload compiled with no GPU the cubin ``assemble(ptx)`` makes (ptxas); False if it cannot.

    Only a kernel whose link step is its PTX alone qualifies: one that links other files
    (cudadevrt for grid sync, user libraries) or caps registers is left to the driver's linker.
    """
    lib = kern._codelibrary
    if lib._linking_files or lib.needs_cudadevrt or lib._max_registers:
        return False
    cubin, log = assemble(ptx_for_cc(kern, cc))
    lib._cubin_cache[cuda_arch(cc)] = cubin
    lib._linkerinfo_cache[cuda_arch(cc)] = log
    return True


def load_or_relink(kern) -> bool:
    """Load a stored cubin on the current device now; if the driver refuses it, drop it (the PTX is linked).

    Returns True when the stored cubin loaded. Call inside the device's context.
    """
    lib = kern._codelibrary
    try:
        lib.get_cufunc()
        return True
    except Exception:  # noqa: BLE001 - any refusal (CUDA_ERROR_INVALID_SOURCE, NO_BINARY_FOR_GPU, ...)
        lib._cubin_cache.clear()
        lib._linkerinfo_cache.clear()
        lib._cufunc_cache.clear()
        return False


def ptx_for_cc(kern, cc) -> str:
    """The PTX of a compiled overload for compute capability ``cc`` (no GPU needed)."""
    with pretend_device(cc):
        return kern._codelibrary.get_asm_str(cc=cuda_arch(cc))


_pretend_lock = threading.RLock()


@contextlib.contextmanager
def pretend_device(cc):
    """Answer numba-cuda's 'which device is current?' with a device of capability ``cc``."""
    from numba.cuda import codegen as cuda_codegen  # lazy: importing kernelrt loads no numba
    from numba.cuda import dispatcher as cuda_dispatch_mod  # lazy: importing kernelrt loads no numba
    from numba.cuda.core.compiler_lock import global_compiler_lock  # lazy: importing kernelrt loads no numba

    device = types.SimpleNamespace(compute_capability=tuple(cc[:2]), id=-1)
    context = types.SimpleNamespace(device=device)
    fake_devices = types.SimpleNamespace(get_context=lambda devnum=None: context)
    # Under numba-cuda's compiler lock: no compilation in another thread sees the patch.
    with _pretend_lock, global_compiler_lock:
        saved = cuda_dispatch_mod.get_current_device, cuda_codegen.devices
        cuda_dispatch_mod.get_current_device = lambda: device
        cuda_codegen.devices = fake_devices
        try:
            yield
        finally:
            cuda_dispatch_mod.get_current_device, cuda_codegen.devices = saved


# -- CUDA driver -----------------------------------------------------------------------------


def kernel_attributes(kern) -> tuple[int, int]:
    """(static shared memory bytes, max threads per block) of a loaded overload."""
    attrs = kern._codelibrary.get_cufunc().attrs
    return attrs.shared, attrs.maxthreads


def allow_dynamic_shared_mem(kern, nbytes: int, device_id: int) -> None:
    """Let a loaded overload take ``nbytes`` of dynamic shared memory on ``device_id``."""
    from numba.cuda.cudadrv.driver import binding, driver  # lazy: importing kernelrt loads no numba

    attr = binding.CUfunction_attribute.CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES
    # numba-cuda loads kernels as CUkernel handles: the attribute is set per device.
    driver.cuKernelSetAttribute(attr, nbytes, kern._codelibrary.get_cufunc().handle, device_id)


def memset_zero(device_array) -> None:
    """Fill a numba device array with zero bytes (one driver call, no host buffer)."""
    from numba.cuda.cudadrv.driver import device_memset  # lazy: importing kernelrt loads no numba

    device_memset(device_array, 0, device_array.nbytes)


def free_deferred(context) -> None:
    """Free now what a numba context holds for deferred deallocation."""
    context.memory_manager.deallocations.clear()  # device and pinned memory
    context.deallocations.clear()  # streams, events, modules


def current_device_ordinal() -> int | None:
    """The device of the calling thread's current CUDA context, or None (one driver query)."""
    from numba.cuda.cudadrv.driver import driver  # lazy: importing kernelrt loads no numba

    with driver.get_active_context() as active:
        return active.devnum


def cuda_typeof(value):
    """numba-cuda's type of a kernel argument (device arrays, CuPy arrays, scalars)."""
    from numba.cuda.typing.typeof import typeof  # lazy: importing kernelrt loads no numba

    return typeof(value)


def prepared_overload(dispatcher, argtypes: tuple):
    """The loaded overload of a CUDA dispatcher for ``argtypes``, or None where a prepared launch
    must go through the dispatcher (not loaded, or compiled per launch configuration)."""
    if getattr(dispatcher, "_launch_config_sensitive", False):
        return None
    kern = dispatcher.overloads.get(tuple(argtypes))
    if kern is None or getattr(kern, "launch_config_sensitive", False):
        return None
    return kern


def core_stream(stream):
    """The launch-stream object ``launch_overload`` takes, for a numba stream or 0: what numba's
    launch configuration converts a stream to (``driver._to_core_stream``), made once per bind."""
    from numba.cuda.cudadrv import driver  # lazy: importing kernelrt loads no numba

    return driver._to_core_stream(stream)


def launch_overload(kern, args, grid, block, stream, shared_mem: int) -> None:
    """Launch a loaded overload directly: what the dispatcher's call does once it has chosen it
    (argument marshalling, debug-kernel exception checks), without choosing it again.
    ``stream`` comes from ``core_stream``; ``grid`` and ``block`` are 3-tuples."""
    kern.launch(args, grid, block, stream, shared_mem)
