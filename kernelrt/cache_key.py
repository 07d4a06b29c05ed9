"""The cache key: a labelled digest of everything that changes a compiled kernel.

``KeyBuilder`` hashes ``label | len | bytes`` per field, starting with
``KEY_SCHEMA_VERSION``, so two different field sequences can never collide by
concatenation. ``function_fingerprint`` walks a kernel's bytecode for the globals and
closure cells it reads and follows every jitted callee, in any module, recursively:
an edit to a device function in another file, or to a global constant, changes the key
(numba's own cache misses both: numba/numba#9483). Content is hashed, never mtimes.

Each function is keyed by its code object, the very input numba compiles, never by its
source text: ``inspect.getsource`` reads the file as it is now, so a file edited after
its import would store the old machine code under the new source's key, for every later
process to load (issue 25). Line numbers and file names are left out: moving a function
keeps its key, as the source-text key did; they reach a binary only as debug info and
as the line numbers of exceptions raised in compiled code, never its results.
"""

from __future__ import annotations

import builtins
import dis
import functools
import hashlib
import inspect
import platform
import sys
import types
from importlib import metadata

import numpy as np

from . import __version__
from .discovery import probe
from .numba_internals import intrinsic_generator

__all__ = [
    "KEY_SCHEMA_VERSION", "KeyBuilder", "function_fingerprint", "toolchain_versions", "cpu_target",
    "codegen_settings",
]

KEY_SCHEMA_VERSION = 2  # 2: functions keyed by their code objects, not their source

_SCALARS = (int, float, complex, bool, str, bytes, type(None))


class KeyBuilder:
    """Accumulates labelled fields; ``digest()`` is the cache key."""

    def __init__(self):
        self._hash = hashlib.sha256()
        self.add("schema", str(KEY_SCHEMA_VERSION))

    def add(self, label: str, value) -> "KeyBuilder":
        data = value if isinstance(value, bytes) else str(value).encode()
        for part in (label.encode(), len(data).to_bytes(8, "little"), data):
            self._hash.update(part)
        return self

    def digest(self) -> str:
        return self._hash.hexdigest()


def function_fingerprint(func) -> bytes:
    """Digest of ``func``'s code and of everything it reads, recursively."""
    out = hashlib.sha256()
    _Walker(out).function(func, "root")
    return out.digest()


class _Walker:
    def __init__(self, out):
        self.out = out
        self.seen: set[int] = set()

    def emit(self, *parts):
        for p in parts:
            data = p if isinstance(p, bytes) else str(p).encode()
            self.out.update(len(data).to_bytes(8, "little") + data)

    def function(self, func, label):
        func = inspect.unwrap(func)
        code = getattr(func, "__code__", None)
        if code is None:
            self.emit("opaque", label, _qualname(func))
            return
        if id(code) in self.seen:
            self.emit("seen", _qualname(func))
            return
        self.seen.add(id(code))
        self.emit("function", label, _qualname(func))
        self.code(code)
        self.value(func.__defaults__, "defaults")  # numba compiles omitted arguments' defaults in
        for name, value in sorted((func.__kwdefaults__ or {}).items()):
            self.value(value, f"kwdefault {name}")
        for name in sorted(_global_names(code)):
            chain = name.split(".")
            value = _resolve(func.__globals__, chain)
            self.value(value, f"global {name}")
        for name, cell in zip(code.co_freevars, func.__closure__ or ()):
            try:
                value = cell.cell_contents
            except ValueError:  # empty cell
                value = None
            self.value(value, f"closure {name}")

    def code(self, code):
        """The compiler's input: bytecode, constants (nested code recursively), names, flags."""
        self.emit("code", getattr(code, "co_qualname", code.co_name), code.co_code,
                  getattr(code, "co_exceptiontable", b""))
        self.emit(*(repr(getattr(code, field)) for field in _CODE_FIELDS))
        self.emit("consts", len(code.co_consts))
        for const in code.co_consts:
            if isinstance(const, types.CodeType):  # a nested function, lambda or comprehension
                self.code(const)
            else:
                self.emit("const", _const_text(const))

    def value(self, value, label):
        target = _jitted_python_function(value)
        if target is not None:
            self.emit(label, "jitted", _options(value))
            self.function(target, label)
        elif isinstance(value, types.FunctionType):
            self.function(value, label)
        elif isinstance(value, types.ModuleType):
            self.emit(label, "module", value.__name__)
        elif isinstance(value, _SCALARS):
            self.emit(label, type(value).__name__, repr(value))
        elif isinstance(value, (tuple, list, frozenset)):
            self.emit(label, type(value).__name__, len(value))
            for i, item in enumerate(value):
                self.value(item, f"{label}[{i}]")
        elif type(value).__module__ == "numpy" and hasattr(value, "dtype"):
            self._numpy(value, label)
        elif value is _MISSING:
            self.emit(label, "unresolved")
        else:
            # Classes, builtins, numba types, enums: their identity is their name and repr
            # (numba freezes only the values above into compiled code).
            self.emit(label, type(value).__qualname__, _stable_repr(value))

    def _numpy(self, value, label):
        arr = np.asarray(value)
        self.emit(label, "ndarray", arr.dtype.str, arr.shape, hashlib.sha256(arr.tobytes()).hexdigest())


_MISSING = object()

# What the compiler sees besides co_code and co_consts. Not co_firstlineno, co_linetable
# or co_filename (see the module docstring); co_nlocals and co_stacksize follow from these.
_CODE_FIELDS = (
    "co_argcount", "co_posonlyargcount", "co_kwonlyargcount", "co_flags",
    "co_names", "co_varnames", "co_freevars", "co_cellvars",
)


def _const_text(value) -> str:
    """A constant's type and value; a frozenset's items sorted (their order follows the hash seed)."""
    if isinstance(value, (tuple, frozenset)):
        items = [_const_text(item) for item in value]
        return f"{type(value).__name__}({', '.join(sorted(items) if isinstance(value, frozenset) else items)})"
    return f"{type(value).__qualname__}:{value!r}"


def _resolve(namespace, chain):
    value = namespace.get(chain[0], getattr(builtins, chain[0], _MISSING))
    for attr in chain[1:]:
        if value is _MISSING:
            break
        value = getattr(value, attr, _MISSING)
    return value


def _global_names(code) -> set[str]:
    """Globals a code object reads, with module attribute chains (``np.pi``, ``mod.f``)."""
    names: set[str] = set()
    for co in _code_objects(code):
        chain: list[str] = []
        for ins in dis.get_instructions(co):
            if ins.opname in ("LOAD_GLOBAL", "LOAD_NAME"):
                if chain:
                    names.add(".".join(chain))
                chain = [ins.argval]
            elif ins.opname in ("LOAD_ATTR", "LOAD_METHOD") and chain:
                chain.append(ins.argval)
            else:
                if chain:
                    names.add(".".join(chain))
                chain = []
        if chain:
            names.add(".".join(chain))
    return names


def _code_objects(code):
    yield code
    for const in code.co_consts:
        if isinstance(const, types.CodeType):
            yield from _code_objects(const)


def _jitted_python_function(value):
    """The Python function behind a numba dispatcher, intrinsic or kernelrt Kernel, else None."""
    if type(value).__name__ == "Kernel" and hasattr(value, "py_func") and hasattr(value, "cpu_twin"):
        return value.py_func
    py_func = getattr(value, "py_func", None)
    if py_func is not None and hasattr(value, "targetoptions"):
        return py_func
    return intrinsic_generator(value)  # numba @intrinsic: its code generator is the source


def _options(dispatcher) -> str:
    opts = getattr(dispatcher, "targetoptions", None) or getattr(dispatcher, "options", {})
    return repr(sorted((k, _canonical(v)) for k, v in dict(opts).items()))


def _canonical(value) -> str:
    """repr with sets and dicts in sorted order (set order changes with PYTHONHASHSEED)."""
    if isinstance(value, (set, frozenset)):
        return repr(sorted(map(_canonical, value)))
    if isinstance(value, dict):
        return repr(sorted((_canonical(k), _canonical(v)) for k, v in value.items()))
    return repr(value)


def _qualname(obj) -> str:
    return f"{getattr(obj, '__module__', '?')}.{getattr(obj, '__qualname__', type(obj).__name__)}"


def _stable_repr(value) -> str:
    text = repr(value)
    return text if " at 0x" not in text else type(value).__qualname__


@functools.lru_cache(maxsize=None)
def toolchain_versions(target: str) -> str:
    """Versions of everything between the source and the binary for ``target``."""
    import llvmlite  # lazy: importing kernelrt loads no numba
    import numba  # lazy: importing kernelrt loads no numba

    parts = [
        f"python={sys.version_info[0]}.{sys.version_info[1]}.{sys.version_info[2]}",
        f"numba={numba.__version__}",
        f"llvmlite={llvmlite.__version__}",
        f"numpy={np.__version__}",
        f"kernelrt={__version__}",
    ]
    if target == "cuda":
        parts += _cuda_versions()
    return ";".join(parts)


def _cuda_versions() -> list[str]:
    parts = []
    try:
        parts.append(f"numba-cuda={metadata.version('numba-cuda')}")
    except metadata.PackageNotFoundError:
        parts.append("numba-cuda=?")
    facts = probe()
    parts.append(f"cuda-runtime={facts.runtime_version}")
    parts.append(f"nvvm={facts.nvvm_version}")
    return parts


@functools.lru_cache(maxsize=1)
def cpu_target() -> str:
    """The LLVM CPU name and feature string numba compiles for on this host."""
    import llvmlite.binding as ll  # lazy: importing kernelrt loads no numba
    from numba.core import config  # lazy: importing kernelrt loads no numba

    name = config.CPU_NAME or ll.get_host_cpu_name()
    features = config.CPU_FEATURES if config.CPU_FEATURES is not None else ll.get_host_cpu_features().flatten()
    return f"{platform.machine()}-{name}-{hashlib.sha256(str(features).encode()).hexdigest()[:12]}"


def codegen_settings(target: str, debug: bool = False) -> str:
    """numba's process-wide settings that change the code compiled for ``target``.

    numba reads them from ``NUMBA_*`` variables when it is imported, so two processes
    that differ only in their environment compile different binaries from the same
    source: a ``NUMBA_BOUNDSCHECK=1`` or ``NUMBA_OPT=0`` process must not load what
    another process stored. Each value is the one that reaches the compiler (a setting
    that another one overrides, or that the target ignores, is left out), so settings
    that change nothing do not change the key. Not here: the CPU name and features
    (``cpu_target``), and ``NUMBA_CUDA_DEFAULT_PTX_CC``, which only serves compilations
    given no compute capability (kernelrt always gives one). numba has no process-wide
    fastmath or lineinfo setting.

    Args:
        target: ``"cpu"`` or ``"cuda"``.
        debug: the backend's debug mode (``CPUBackend(debug=True)``: bounds-checked,
            serial loops; ``CUDABackend(debug=True)``: ``debug=True, opt=False``).

    Returns:
        ``name=value`` pairs joined by ``;``, in a fixed order.

    Raises:
        ValueError: ``target`` is neither ``"cpu"`` nor ``"cuda"``.
    """
    from numba.core import config  # lazy: importing kernelrt loads no numba

    if target == "cpu":
        settings = _cpu_codegen(config, bool(debug))
    elif target == "cuda":
        settings = _cuda_codegen(config, bool(debug))
    else:
        raise ValueError(f"target must be 'cpu' or 'cuda' (got {target!r})")
    return ";".join(f"{name}={value}" for name, value in settings)


def _cpu_codegen(cfg, debug: bool) -> list[tuple[str, object]]:
    # numba/core/cpu.py (CPUTargetOptions.finalize): a function compiled without an explicit
    # debug or boundscheck option takes NUMBA_DEBUGINFO, which also turns on bounds checks
    # and extended variable lifetimes; NUMBA_BOUNDSCHECK, when set, overrides every function.
    debuginfo = bool(cfg.DEBUGINFO_DEFAULT)
    boundscheck = bool(cfg.BOUNDSCHECK) if cfg.BOUNDSCHECK is not None else (debug or debuginfo)
    return [
        ("debug", debug),
        ("boundscheck", boundscheck),
        ("opt", "max" if getattr(cfg.OPT, "is_opt_max", False) else int(cfg.OPT)),  # NUMBA_OPT=max
        ("loop_vectorize", bool(cfg.LOOP_VECTORIZE)),
        ("slp_vectorize", bool(cfg.SLP_VECTORIZE)),
        # NUMBA_ENABLE_AVX edits the host's feature list; NUMBA_CPU_FEATURES replaces it.
        ("avx", bool(cfg.ENABLE_AVX) if cfg.CPU_FEATURES is None else "n/a"),
        # Set at numba's import: SVML installed and not disabled by NUMBA_DISABLE_INTEL_SVML.
        ("svml", bool(getattr(cfg, "USING_SVML", False))),
        ("debuginfo", debuginfo),
        ("extend_lifetimes", debuginfo or bool(cfg.EXTEND_VARIABLE_LIFETIMES)),
        ("refprune", cfg.LLVM_REFPRUNE_FLAGS if cfg.LLVM_REFPRUNE_PASS else "off"),
        ("debug_nrt", bool(cfg.DEBUG_NRT)),  # the "safe" allocator calls
        ("parfor_debug_prints", bool(cfg.DEBUG_ARRAY_OPT_RUNTIME)),
    ]


def _cuda_codegen(cfg, debug: bool) -> list[tuple[str, object]]:
    # numba-cuda (decorators.jit, compiler.compile_cuda): debug defaults to
    # NUMBA_CUDA_DEBUGINFO and opt to NUMBA_OPT != 0, which NVVM gets as -opt=3 or -opt=0;
    # kernelrt's debug mode passes both. The CUDA target never checks bounds.
    return [
        ("debug", debug),
        ("debuginfo", True if debug else bool(cfg.CUDA_DEBUGINFO_DEFAULT)),
        ("opt", False if debug else cfg.OPT != 0),
        ("force_cc", cfg.FORCE_CUDA_CC),  # NUMBA_FORCE_CUDA_CC replaces the device's arch
        ("nrt", bool(getattr(cfg, "CUDA_ENABLE_NRT", False))),  # set by numba.cuda's import
    ]
