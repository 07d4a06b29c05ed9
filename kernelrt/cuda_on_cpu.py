"""Plain ``numba.cuda`` kernels on the CPU: the kernel's own source, translated to a parallel loop.

``cpu_twin(kernel)`` reads the Python source of a ``@cuda.jit``-style kernel and rewrites
its CUDA built-ins into values of a loop over the launch's index space (grid x block per
axis), which numba compiles with ``njit(parallel=True)`` like any CPU twin:

* ``cuda.grid(n)``, ``cuda.gridsize(n)``, ``cuda.threadIdx/blockIdx/blockDim/gridDim.x|y|z``,
  ``cuda.laneid`` and ``cuda.warpsize`` become integers computed from the global index;
* ``cuda.atomic.<op>`` becomes the matching real atomic (cpu_atomics.py), so threads
  running on different cores still update shared elements correctly;
* ``cuda.local.array(shape, dtype)`` becomes a per-thread ``np.empty``,
  ``cuda.const.array_like(a)`` becomes ``a``;
* ``@cuda.jit(device=True)`` functions it calls are translated the same way, recursively,
  and receive the thread's index; ``math``, ``cmath`` and ``@kernelrt.device`` functions
  need nothing.

What has no meaning when a block's threads run one after another (shared memory,
``syncthreads``, warp shuffles and votes, fences, cooperative groups) and any other CUDA
built-in is refused with ``CpuTranslationError``, naming the feature, the kernel and the
way out (an explicit CPU twin, ``@k.cpu``), before anything compiles or runs. Resolution
follows the kernel's globals and closure, so ``from numba import cuda``, ``import numba``
(``numba.cuda.grid``) and ``from numba.cuda import atomic`` all work. Nothing here needs a
CUDA toolkit, driver or the simulator.
"""

from __future__ import annotations

import ast
import hashlib
import inspect
import textwrap
from pathlib import Path

from . import codegen
from .cuda_names import (
    REFUSED,
    SUPPORTED,
    cuda_path,
    device_py_func,
    pure_callee,
    resolve,
)
from .errors import CpuTranslationError

__all__ = ["cpu_twin"]

_CTX = ("_kr_g0", "_kr_g1", "_kr_g2", "_kr_grid", "_kr_block")  # what every translated function receives
_AXES = {"x": 0, "y": 1, "z": 2}
# Rows (y * z) from which the loop runs in parallel over rows rather than along x: with
# fewer rows, each row's x range is split over the cores instead.
_MIN_PARALLEL_ROWS = 64

def _runtime_digest() -> str:
    """Digest of the translator and the atomics: part of every translated kernel's source,
    so the cache key of a translated kernel changes when either module does."""
    here = Path(__file__).resolve().parent
    data = b"".join((here / name).read_bytes() for name in ("cuda_on_cpu.py", "cpu_atomics.py"))
    return hashlib.sha256(data).hexdigest()[:16]


def _digest(text: str) -> str:
    return hashlib.sha256(text.encode()).hexdigest()[:12]


def cpu_twin(kernel, debug: bool = False):
    """A ``twin(grid, block, *args)`` function running CUDA kernel ``kernel`` on the CPU cores.

    ``debug``: the backend's debug mode; device functions and atomics check their indices too.
    """
    import numba  # lazy: importing kernelrt loads no numba

    translator = _Translator(kernel.name, kernel.options["fastmath"], debug)
    body = translator.function(kernel.py_func, as_kernel=True)
    args = ", ".join(f"a_{p}" for p in kernel.params)
    tail = f", {args}" if args else ""
    call = f"body(i, j, k, grid, block{tail})"
    src = (
        f"def {kernel.name}__cpu(grid, block{tail}):\n"
        # The docstring carries the translator's digest into the source the cache key hashes.
        f'    """CPU translation of the CUDA kernel {kernel.qualname} (runtime {_runtime_digest()})."""\n'
        "    nx = grid[0] * block[0]\n"
        "    ny = grid[1] * block[1]\n"
        "    nz = grid[2] * block[2]\n"
        "    rows = ny * nz\n"
        f"    if rows >= {_MIN_PARALLEL_ROWS}:\n"
        "        for r in prange(rows):\n"
        "            k = r // ny\n"
        "            j = r - k * ny\n"
        "            for i in range(nx):\n"
        f"                {call}\n"
        "    else:\n"
        "        for k in range(nz):\n"
        "            for j in range(ny):\n"
        "                for i in prange(nx):\n"
        f"                    {call}\n"
    )
    ns = {"prange": numba.prange, "body": body, "__name__": kernel.py_func.__module__}
    return codegen.materialize(src, f"{kernel.name}__cpu", ns, f"{kernel.qualname} cpu translation")


class _Translator:
    """Translates one kernel and the device functions it calls (each once)."""

    def __init__(self, kernel_name: str, fastmath: bool, debug: bool = False):
        self.kernel_name = kernel_name
        self.fastmath = fastmath
        self.debug = debug
        self.done: dict[int, object] = {}
        self.names: dict[int, str] = {}  # device function -> helper name, numbered in first-seen order
        self.in_progress: set[int] = set()

    def helper_name(self, target) -> str:
        """A name for a translated device function, the same in every process (cache keys)."""
        if id(target) not in self.names:
            self.names[id(target)] = f"_kr_dev{len(self.names)}_{target.__name__}"
        return self.names[id(target)]

    def fail(self, what: str, why: str = ""):
        reason = f" ({why})" if why else ""
        raise CpuTranslationError(
            f"kernel {self.kernel_name!r} uses {what}{reason}, which the CPU backend cannot run: "
            f"there a block's threads run one after another. Give the kernel a CPU twin "
            f"(k = kernelrt.cuda_kernel({self.kernel_name}); @k.cpu def twin(grid, block, ...)) "
            f"or launch it on a CUDABackend. Supported on the CPU: cuda.{{{SUPPORTED}}}"
        )

    def function(self, py_func, *, as_kernel: bool):
        """The njit-compiled translation of ``py_func`` (a kernel body or a device function)."""
        import numba  # lazy: importing kernelrt loads no numba

        if id(py_func) in self.done:
            return self.done[id(py_func)]
        if id(py_func) in self.in_progress:
            self.fail(f"the recursive device function {py_func.__qualname__!r}", "recursion is not translated")
        self.in_progress.add(id(py_func))
        try:
            source = textwrap.dedent(inspect.getsource(py_func))
        except (OSError, TypeError):
            raise CpuTranslationError(
                f"kernel {self.kernel_name!r}: the source of {py_func.__qualname__!r} cannot be read, so it "
                f"cannot be translated for the CPU; define it in a file, or give the kernel a CPU twin (@k.cpu)"
            ) from None
        tree = _parse_as_imported(source, py_func, self.kernel_name)
        fdef = tree.body[0]
        if not isinstance(fdef, ast.FunctionDef):
            self.fail(f"{py_func.__qualname__!r} defined as a lambda", "only def functions are translated")
        ns = dict(py_func.__globals__)
        for name, cell in zip(py_func.__code__.co_freevars, py_func.__closure__ or ()):
            ns[name] = cell.cell_contents
        rewriter = _Rewriter(self, ns, set(py_func.__code__.co_varnames))
        fdef.body = [rewriter.visit(stmt) for stmt in fdef.body]
        fdef.decorator_list = []
        fdef.name = f"{py_func.__name__}__cpu_body" if as_kernel else f"{py_func.__name__}__cpu_device"
        ctx_args = [ast.arg(arg=a) for a in _CTX]
        fdef.args.posonlyargs, fdef.args.args = [], ctx_args + fdef.args.posonlyargs + fdef.args.args
        fdef.body = rewriter.prologue() + fdef.body
        tree.body = [ast.fix_missing_locations(fdef)]
        ns.update(rewriter.helpers)
        ns["__name__"] = py_func.__module__
        text = ast.unparse(tree) + "\n"
        # Named by module, name and content: two functions of one name never share an entry
        # in linecache, whose text the cache key hashes.
        origin = f"{py_func.__module__}.{py_func.__qualname__} cpu translation {_digest(text)}"
        func = codegen.materialize(text, fdef.name, ns, origin)
        # The kernel body is inlined into the loop (a call per element costs ~5x), unless it
        # calls something that may write an array (an atomic, a device function): numba's
        # parfor pass would then hoist reads of that array out of the loop as invariant (it
        # sees only direct stores), and a read after an atomic would see the old value.
        inline = "always" if as_kernel and not rewriter.writes_through_calls else "never"
        checks = {"boundscheck": True} if self.debug else {}
        jitted = numba.njit(inline=inline, fastmath=self.fastmath, **checks)(func)
        self.done[id(py_func)] = jitted
        self.in_progress.discard(id(py_func))
        return jitted


class _Rewriter(ast.NodeTransformer):
    """Rewrites the CUDA built-ins of one function (see the module docstring)."""

    def __init__(self, translator: _Translator, ns: dict, local_names: set[str]):
        self.t = translator
        self.ns = ns
        self.local_names = local_names  # parameters and locals shadow globals of the same name
        self.used: set[str] = set()
        self.helpers: dict[str, object] = {}
        self.writes_through_calls = False  # an atomic, device function or other jitted callee

    # -- resolving names ----------------------------------------------------------------------

    def cuda_path(self, node) -> str | None:
        return cuda_path(node, self.ns, self.local_names)

    def device_function(self, node):
        """The Python function of a ``cuda.jit(device=True)`` function ``node`` names, or None."""
        return device_py_func(resolve(node, self.ns, self.local_names))

    # -- rewriting ---------------------------------------------------------------------------

    def name(self, ident: str) -> ast.Name:
        self.used.add(ident)
        return ast.Name(id=ident, ctx=ast.Load())

    def visit_Call(self, node: ast.Call):
        path = self.cuda_path(node.func)
        if path in ("grid", "gridsize"):
            return self.index_tuple(node, "_kr_g" if path == "grid" else "_kr_n")
        if path is not None and path.startswith("atomic."):
            return self.atomic(node, path.split(".", 1)[1])
        if path == "local.array":
            node.func = self.helper("_kr_np_empty", _np_empty())
            return self.generic_visit(node)
        if path == "const.array_like":
            return self.visit(node.args[0])
        if path is not None:
            return self.refuse(path)
        target = self.device_function(node.func)
        if target is not None:
            self.writes_through_calls = True
            node.func = self.helper(self.t.helper_name(target), self.t.function(target, as_kernel=False))
            node.args = [self.name(a) for a in _CTX] + [self.visit(a) for a in node.args]
            node.keywords = [self.visit(k) for k in node.keywords]
            return node
        if not pure_callee(resolve(node.func, self.ns, self.local_names)):
            self.writes_through_calls = True
        return self.generic_visit(node)

    def visit_Attribute(self, node: ast.Attribute):
        path = self.cuda_path(node)
        return self.generic_visit(node) if path is None else self.value_of(path)

    def visit_Name(self, node: ast.Name):
        path = self.cuda_path(node)
        return node if path is None or path == "" else self.value_of(path)

    def value_of(self, path: str):
        """The translation of a CUDA built-in read as a value (``threadIdx.x``, ``warpsize``)."""
        head, _, axis = path.partition(".")
        short = {"threadIdx": "_kr_t", "blockIdx": "_kr_b", "blockDim": "_kr_bd", "gridDim": "_kr_gd"}
        if head in short and axis in _AXES:
            return self.name(f"{short[head]}{_AXES[axis]}")
        if path == "warpsize":
            return ast.Constant(32)
        if path == "laneid":
            return self.name("_kr_lane")
        return self.refuse(path)

    def index_tuple(self, node: ast.Call, prefix: str):
        what = "cuda.grid" if prefix == "_kr_g" else "cuda.gridsize"
        if len(node.args) != 1 or not isinstance(node.args[0], ast.Constant) or node.args[0].value not in (1, 2, 3):
            self.t.fail(f"{what}() with an argument other than the literal 1, 2 or 3")
        n = node.args[0].value
        names = [self.name(f"{prefix}{d}") for d in range(n)]
        return names[0] if n == 1 else ast.Tuple(elts=names, ctx=ast.Load())

    def atomic(self, node: ast.Call, op: str):
        from .cpu_atomics import (  # lazy: importing kernelrt loads no numba
            CHECKED_OPERATIONS,
            OPERATIONS,
        )

        operations = CHECKED_OPERATIONS if self.t.debug else OPERATIONS
        if op not in operations:
            return self.refuse(f"atomic.{op}")
        self.writes_through_calls = True
        node.func = self.helper(f"_kr_atomic_{op}", operations[op])
        node.args = [self.visit(a) for a in node.args]
        return node

    def refuse(self, path: str):
        head = path.split(".")[0]
        if head in REFUSED:
            self.t.fail(f"cuda.{path}", REFUSED[head])
        self.t.fail(f"cuda.{path}", "not supported on the CPU backend")

    def helper(self, name: str, value) -> ast.Name:
        self.helpers[name] = value
        return ast.Name(id=name, ctx=ast.Load())

    # -- the values the rewritten code reads -----------------------------------------------------

    def prologue(self) -> list[ast.stmt]:
        """Assignments of the thread quantities this function uses, from the global index."""
        lines = []
        for d in range(3):
            if self.used & {f"_kr_n{d}"}:
                lines.append(f"_kr_n{d} = _kr_grid[{d}] * _kr_block[{d}]")
            if self.used & {f"_kr_bd{d}"}:
                lines.append(f"_kr_bd{d} = _kr_block[{d}]")
            if self.used & {f"_kr_gd{d}"}:
                lines.append(f"_kr_gd{d} = _kr_grid[{d}]")
            if self.used & {f"_kr_b{d}"}:
                lines.append(f"_kr_b{d} = _kr_g{d} // _kr_block[{d}]")
            if self.used & {f"_kr_t{d}", "_kr_lane"}:
                lines.append(f"_kr_t{d} = _kr_g{d} % _kr_block[{d}]")
        if "_kr_lane" in self.used:
            lines.append("_kr_lane = (_kr_t0 + _kr_block[0] * (_kr_t1 + _kr_block[1] * _kr_t2)) % 32")
        return ast.parse("\n".join(lines)).body


def _np_empty():
    import numpy as np

    return np.empty


def _parse_as_imported(source: str, py_func, kernel_name: str) -> ast.Module:
    """``source`` parsed, if it is the code this process imported as ``py_func``.

    The text comes from the file as it is now (``inspect.getsource``), while the process
    imported it earlier: an edit since would translate code that never ran here, and lines
    shifted above it would make ``getsource`` read the wrong lines. Compiled on its own,
    the text must give the imported function's arguments, locals, names and constants.
    """
    stale = CpuTranslationError(
        f"kernel {kernel_name!r}: the file of {py_func.__qualname__!r} changed after it was imported, so "
        f"the CPU translation would not be the code this process runs; restart the process")
    if py_func.__name__ == "<lambda>":
        return ast.parse(source)  # refused as a lambda by the caller
    try:
        tree = ast.parse(source)
        module = compile(source, py_func.__code__.co_filename, "exec", dont_inherit=True)
    except SyntaxError:
        raise stale from None
    code = next((c for c in module.co_consts if getattr(c, "co_name", None) == py_func.__name__), None)
    alone = len(tree.body) == 1 and getattr(tree.body[0], "name", None) == py_func.__name__
    if not alone or code is None or _fingerprint(code) != _fingerprint(py_func.__code__):
        raise stale
    return tree


def _fingerprint(code) -> tuple:
    # Not co_code: compiled alone, a closure's free variables become globals (other opcodes).
    consts = tuple(_fingerprint(c) if hasattr(c, "co_code") else (type(c).__name__, repr(c))
                   for c in code.co_consts)
    return (code.co_argcount, code.co_kwonlyargcount, code.co_varnames,
            frozenset(code.co_names) | frozenset(code.co_freevars), consts)
