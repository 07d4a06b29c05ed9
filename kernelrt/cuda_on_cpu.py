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
from .errors import CpuTranslationError

__all__ = ["cpu_twin"]

_CTX = ("_kr_g0", "_kr_g1", "_kr_g2", "_kr_grid", "_kr_block")  # what every translated function receives
_AXES = {"x": 0, "y": 1, "z": 2}
# Rows (y * z) from which the loop runs in parallel over rows rather than along x: with
# fewer rows, each row's x range is split over the cores instead.
_MIN_PARALLEL_ROWS = 64

# CUDA features with no CPU meaning, and the words that say why.
_REFUSED = {
    "shared": "shared memory", "syncthreads": "a block barrier", "syncthreads_count": "a block barrier",
    "syncthreads_and": "a block barrier", "syncthreads_or": "a block barrier",
    "syncwarp": "a warp barrier", "threadfence": "a memory fence", "threadfence_block": "a memory fence",
    "threadfence_system": "a memory fence", "cg": "cooperative groups", "activemask": "a warp intrinsic",
    "lanemask_lt": "a warp intrinsic", "all_sync": "a warp vote", "any_sync": "a warp vote",
    "eq_sync": "a warp vote", "ballot_sync": "a warp vote", "shfl_sync": "a warp shuffle",
    "shfl_up_sync": "a warp shuffle", "shfl_down_sync": "a warp shuffle", "shfl_xor_sync": "a warp shuffle",
    "match_any_sync": "a warp intrinsic", "match_all_sync": "a warp intrinsic", "nanosleep": "a thread sleep",
}
_SUPPORTED = ("grid, gridsize, threadIdx, blockIdx, blockDim, gridDim, laneid, warpsize, atomic.*, "
              "local.array, const.array_like, device functions")


def _runtime_digest() -> str:
    """Digest of the translator and the atomics: part of every translated kernel's source,
    so the cache key of a translated kernel changes when either module does."""
    here = Path(__file__).resolve().parent
    data = b"".join((here / name).read_bytes() for name in ("cuda_on_cpu.py", "cpu_atomics.py"))
    return hashlib.sha256(data).hexdigest()[:16]


def cpu_twin(kernel):
    """A ``twin(grid, block, *args)`` function running CUDA kernel ``kernel`` on the CPU cores."""
    import numba  # lazy: importing kernelrt loads no numba

    translator = _Translator(kernel.name, kernel.options["fastmath"])
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

    def __init__(self, kernel_name: str, fastmath: bool):
        self.kernel_name = kernel_name
        self.fastmath = fastmath
        self.done: dict[int, object] = {}

    def fail(self, what: str, why: str = ""):
        reason = f" ({why})" if why else ""
        raise CpuTranslationError(
            f"kernel {self.kernel_name!r} uses {what}{reason}, which the CPU backend cannot run: "
            f"there a block's threads run one after another. Give the kernel a CPU twin "
            f"(k = kernelrt.cuda_kernel({self.kernel_name}); @k.cpu def twin(grid, block, ...)) "
            f"or launch it on a CUDABackend. Supported on the CPU: cuda.{{{_SUPPORTED}}}"
        )

    def function(self, py_func, *, as_kernel: bool):
        """The njit-compiled translation of ``py_func`` (a kernel body or a device function)."""
        import numba  # lazy: importing kernelrt loads no numba

        if id(py_func) in self.done:
            return self.done[id(py_func)]
        try:
            source = textwrap.dedent(inspect.getsource(py_func))
        except (OSError, TypeError):
            raise CpuTranslationError(
                f"kernel {self.kernel_name!r}: the source of {py_func.__qualname__!r} cannot be read, so it "
                f"cannot be translated for the CPU; define it in a file, or give the kernel a CPU twin (@k.cpu)"
            ) from None
        tree = ast.parse(source)
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
        func = codegen.materialize(ast.unparse(tree) + "\n", fdef.name, ns, f"{py_func.__qualname__} cpu translation")
        # The kernel body is inlined into the loop (a call per element costs ~5x); device
        # functions are ordinary functions, as on the GPU.
        jitted = numba.njit(inline="always" if as_kernel else "never", fastmath=self.fastmath)(func)
        self.done[id(py_func)] = jitted
        return jitted


class _Rewriter(ast.NodeTransformer):
    """Rewrites the CUDA built-ins of one function (see the module docstring)."""

    def __init__(self, translator: _Translator, ns: dict, local_names: set[str]):
        self.t = translator
        self.ns = ns
        self.local_names = local_names  # parameters and locals shadow globals of the same name
        self.used: set[str] = set()
        self.helpers: dict[str, object] = {}
        self.cuda_names = _cuda_names()

    # -- resolving names to CUDA built-ins ------------------------------------------------------

    def cuda_path(self, node) -> str | None:
        """``"grid"``, ``"threadIdx.x"``, ``"atomic.add"``... if ``node`` names a CUDA built-in."""
        chain = []
        while isinstance(node, ast.Attribute):
            chain.append(node.attr)
            node = node.value
        if not isinstance(node, ast.Name):
            return None
        if node.id in self.local_names:
            return None
        chain.append(node.id)
        chain.reverse()
        value = self.ns.get(chain[0], _MISSING)
        for i, attr in enumerate(chain):
            if i:
                value = getattr(value, attr, _MISSING)
            path = self.cuda_names.get(id(value))
            if path is not None:
                return ".".join(filter(None, [path, *chain[i + 1 :]]))
            if value is _MISSING:
                return None
        return None

    def device_function(self, node):
        """The Python function of a ``cuda.jit(device=True)`` function ``node`` names, or None."""
        if not isinstance(node, (ast.Name, ast.Attribute)):
            return None
        chain = []
        while isinstance(node, ast.Attribute):
            chain.append(node.attr)
            node = node.value
        if not isinstance(node, ast.Name) or node.id in self.local_names:
            return None
        value = self.ns.get(node.id, _MISSING)
        for attr in reversed(chain):
            value = getattr(value, attr, _MISSING)
        return _device_py_func(value)

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
            node.func = self.helper(f"_kr_dev_{target.__name__}_{id(target):x}",
                                    self.t.function(target, as_kernel=False))
            node.args = [self.name(a) for a in _CTX] + [self.visit(a) for a in node.args]
            node.keywords = [self.visit(k) for k in node.keywords]
            return node
        return self.generic_visit(node)

    def visit_Attribute(self, node: ast.Attribute):
        path = self.cuda_path(node)
        if path is None:
            return self.generic_visit(node)
        head, _, axis = path.partition(".")
        short = {"threadIdx": "_kr_t", "blockIdx": "_kr_b", "blockDim": "_kr_bd", "gridDim": "_kr_gd"}
        if head in short and axis in _AXES:
            return self.name(f"{short[head]}{_AXES[axis]}")
        if path == "warpsize":
            return ast.Constant(32)
        if path == "laneid":
            return self.name("_kr_lane")
        return self.refuse(path)

    def visit_Name(self, node: ast.Name):
        path = self.cuda_path(node)
        if path is None or path == "":
            return node
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
        from .cpu_atomics import OPERATIONS  # lazy: importing kernelrt loads no numba

        if op not in OPERATIONS:
            return self.refuse(f"atomic.{op}")
        node.func = self.helper(f"_kr_atomic_{op}", OPERATIONS[op])
        node.args = [self.visit(a) for a in node.args]
        return node

    def refuse(self, path: str):
        head = path.split(".")[0]
        if head in _REFUSED:
            self.t.fail(f"cuda.{path}", _REFUSED[head])
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


_MISSING = object()


def _device_py_func(value):
    """The Python function of a CUDA device function (numba-cuda's or the simulator's)."""
    options = getattr(value, "targetoptions", None)
    if isinstance(options, dict) and options.get("device") and hasattr(value, "py_func"):
        return value.py_func
    if getattr(value, "_device", False) is True and hasattr(value, "fn"):  # the CUDA simulator
        return value.fn
    return None


def _cuda_names() -> dict[int, str]:
    """id -> path of the ``numba.cuda`` objects a kernel can name (module, built-ins, atomics)."""
    from numba import cuda  # lazy: importing kernelrt loads no numba

    names = {id(cuda): ""}
    for attr in ("grid", "gridsize", "threadIdx", "blockIdx", "blockDim", "gridDim", "laneid", "warpsize",
                 "atomic", "local", "const", "shared", *_REFUSED):
        value = getattr(cuda, attr, None)  # the simulator's module has fewer (it swaps them in at launch)
        if value is not None:
            names[id(value)] = attr
    atomic = getattr(cuda, "atomic", None)
    for op in dir(atomic) if atomic is not None else ():
        if not op.startswith("_"):
            names[id(getattr(atomic, op))] = f"atomic.{op}"
    return names


def _np_empty():
    import numpy as np

    return np.empty
