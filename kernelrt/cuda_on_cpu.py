"""Plain ``numba.cuda`` kernels on the CPU: the kernel's own source, translated to a parallel loop.

``cpu_twin(kernel)`` reads the Python source of a ``@cuda.jit`` kernel and rewrites its CUDA
built-ins into values of the thread's position in the launch (grid x block per axis):
``cuda.grid``, ``threadIdx``... become integers; atomics real atomics (cpu_atomics.py);
intrinsics, ``fp16`` and ``libdevice`` their CPU versions (cpu_intrinsics.py); casts through
``numba.cuda.types`` numba's types; ``cuda.local.array`` a per-thread array; device functions
and kernels it calls are translated the same way. A kernel without barriers becomes one
``njit(parallel=True)`` loop over its threads; one with barriers, shared memory or warp
collectives runs in blocks, each block's threads as loops split at the barriers, blocks in
parallel (cuda_fission.py, cuda_blocks.py); a grid-wide barrier cuts it into phases, each a
parallel loop over the blocks (fission_grid.py). What has no CPU meaning (``declare_device``,
a barrier in a loop whose trip count differs between threads)
is refused with ``CpuTranslationError`` (the feature, the reason, the way out) before
anything runs. Names resolve through the kernel's globals and closure, however
``numba.cuda`` was imported. Nothing here needs a CUDA toolkit, driver or simulator.
"""

from __future__ import annotations

import ast
import inspect
import math
import textwrap

from . import codegen, cuda_blocks, cuda_guard, cuda_private
from .cuda_fission import BlockProgram
from .cuda_names import (
    BLOCK_CALLS,
    REFUSED,
    SUPPORTED,
    cuda_path,
    device_py_func,
    is_bit_count,
    np_empty,
    numba_copy_of,
    numba_literal_unroll,
    pure_callee,
    resolve,
)
from .cuda_inline import inline_synchronising_calls
from .errors import CpuTranslationError
from .kernel_source import parse_as_imported, text_digest, translator_digest

__all__ = ["cpu_twin"]

_CTX = ("_kr_g0", "_kr_g1", "_kr_g2", "_kr_grid", "_kr_block")  # what every translated function receives
_AXES = {"x": 0, "y": 1, "z": 2}
# Rows (y * z) from which the loop runs in parallel over rows rather than along x: with
# fewer rows, each row's x range is split over the cores instead.
_MIN_PARALLEL_ROWS = 64

def cpu_twin(kernel, debug: bool = False):
    """A ``twin(grid, block, *args)`` function running CUDA kernel ``kernel`` on the CPU cores.

    ``debug``: the backend's debug mode; device functions and atomics check their indices too.
    """
    import numba  # lazy: importing kernelrt loads no numba
    import numpy as np

    translator = _Translator(kernel.name, kernel.options["fastmath"], debug)
    body = translator.function(kernel.py_func, as_kernel=True)
    if translator.block is not None:
        program, ns = translator.block
        digest = f"runtime {translator_digest()}, code {text_digest(''.join(translator.texts))}"
        return cuda_blocks.block_twin(kernel, program, ns, digest, fastmath=kernel.options["fastmath"], debug=debug)
    # The docstring carries the translator's digest into the source the cache key hashes.
    about = f"CPU translation of the CUDA kernel {kernel.qualname} (runtime {translator_digest()})."
    src = codegen.cuda_translation_source(kernel.name, about, kernel.params, translator.bounds, _MIN_PARALLEL_ROWS,
                                          translator.private, cuda_private.CHUNKS, cuda_private.PRIVATE_BYTES)
    ns = {"prange": numba.prange, "body": body, "__name__": kernel.py_func.__module__, "_kr_np": np,
          "body_private": translator.private_body, "_kr_add_copy": cuda_private.add_copy(),
          **cuda_guard.limit_functions()}
    return codegen.materialize(src, f"{kernel.name}__cpu", ns, f"{kernel.qualname} cpu translation{' debug' * debug}")


class _Translator:
    """Translates one kernel and the device functions it calls (each once)."""

    def __init__(self, kernel_name: str, fastmath: bool, debug: bool = False):
        self.kernel_name = kernel_name
        self.fastmath = fastmath
        self.debug = debug
        self.done: dict[int, object] = {}
        self.names: dict[int, str] = {}  # device function -> helper name, numbered in first-seen order
        self.in_progress: set[int] = set()
        self.recursive: set[int] = set()  # device functions that call themselves, directly or not
        self.pending: list[tuple[dict, str, int]] = []  # (namespace, name, function) bound when compiled
        self.texts: list[str] = []  # every translated function, for the block driver's digest
        self.opaque: dict[int, bool] = {}  # function -> whether it calls something that may write
        self.block = None  # (BlockProgram, namespace) of a kernel that synchronises
        self.bounds: list[list] = [[], [], []]  # the kernel's guard as loop bounds (cuda_guard.py)
        self.private, self.private_body = [], None  # arrays only added into, and the body adding without atomics

    def helper_name(self, target) -> str:
        """A name for a translated device function, the same in every process (cache keys)."""
        if id(target) not in self.names:
            self.names[id(target)] = f"_kr_dev{len(self.names)}_{target.__name__}"
        return self.names[id(target)]

    def fail(self, what: str, why: str = "", fix: str = ""):
        """Refuse the kernel: what it uses, why the CPU cannot run that, and the way out."""
        reason = f": {why}" if why else ""
        fix = fix or "Give the kernel a CPU twin"
        raise CpuTranslationError(
            f"kernel {self.kernel_name!r} uses {what}, which the CPU backend cannot run{reason}. {fix} "
            f"(k = kernelrt.cuda_kernel({self.kernel_name}); @k.cpu def twin(grid, block, ...)) "
            f"or launch it on a CUDABackend. Supported on the CPU: cuda.{{{SUPPORTED}}}"
        )

    def function(self, py_func, *, as_kernel: bool):
        """The njit-compiled translation of ``py_func`` (a kernel body or a device function)."""
        import numba  # lazy: importing kernelrt loads no numba

        if id(py_func) in self.done:
            return self.done[id(py_func)]
        if id(py_func) in self.in_progress:  # recursion: the caller's name is bound once this is compiled
            self.recursive.add(id(py_func))
            return None
        self.in_progress.add(id(py_func))
        try:
            source = textwrap.dedent(inspect.getsource(py_func))
        except (OSError, TypeError):
            raise CpuTranslationError(
                f"kernel {self.kernel_name!r}: the source of {py_func.__qualname__!r} cannot be read, so it "
                f"cannot be translated for the CPU; define it in a file, or give the kernel a CPU twin (@k.cpu)"
            ) from None
        tree = parse_as_imported(source, py_func, self.kernel_name)
        fdef = tree.body[0]
        if not isinstance(fdef, ast.FunctionDef):
            self.fail(f"{py_func.__qualname__!r} defined as a lambda", "only def functions are translated")
        ns = dict(py_func.__globals__)
        for name, cell in zip(py_func.__code__.co_freevars, py_func.__closure__ or ()):
            ns[name] = cell.cell_contents
        local_names = set(py_func.__code__.co_varnames)
        if as_kernel:  # device functions that synchronise become part of the kernel's body
            fdef.body, inlined = inline_synchronising_calls(fdef.body, ns, local_names, self.fail, self.kernel_name)
            local_names |= inlined
        rewriter = _Rewriter(self, ns, local_names)
        fdef.body = [rewriter.visit(stmt) for stmt in fdef.body]
        if rewriter.block_features:  # barriers: the block program (cuda_fission.py), kernels only
            if not as_kernel:
                self.fail(f"a barrier, shared array or warp collective inside the device function "
                          f"{py_func.__qualname__!r}", "on the CPU only the kernel's own body may hold one")
            params = [a.arg for a in fdef.args.posonlyargs + fdef.args.args]
            program = BlockProgram(fdef.body, params, local_names, self.fail)
            self.texts.append(ast.unparse(fdef))
            self.block = (program, dict(ns, **rewriter.helpers, __name__=py_func.__module__))
            self.in_progress.discard(id(py_func))
            return None
        if as_kernel:
            params = [a.arg for a in fdef.args.posonlyargs + fdef.args.args]
            constants = {k: v for k, v in ns.items() if k not in local_names}  # a local shadows a global
            entry_args = {p: ast.Name(f"a_{p}", ast.Load()) for p in params}  # the entry's names
            fdef.body, self.bounds = cuda_guard.hoist_guard(fdef.body, entry_args, constants, collapse=True)
            self.private = [] if self.debug else cuda_private.private_arrays(fdef.body, params)
        fdef.decorator_list = []
        fdef.name = f"{py_func.__name__}__cpu_body" if as_kernel else f"{py_func.__name__}__cpu_device"
        ctx_args = [ast.arg(arg=a) for a in _CTX]
        fdef.args.posonlyargs, fdef.args.args = [], ctx_args + fdef.args.posonlyargs + fdef.args.args
        fdef.body = ast.parse(codegen.thread_prologue(rewriter.used)).body + fdef.body
        tree.body = [ast.fix_missing_locations(fdef)]
        ns.update(rewriter.helpers)
        self.pending += [(ns, n, t) for n, t in rewriter.recursive_calls]
        ns["__name__"] = py_func.__module__
        text = ast.unparse(tree) + "\n"
        self.texts.append(text)
        # Named by module, name and content: two functions of one name never share an entry
        # in linecache, whose text the cache key hashes.
        origin = f"{py_func.__module__}.{py_func.__qualname__} cpu translation {text_digest(text)}"
        func = codegen.materialize(text, fdef.name, ns, origin)
        # The kernel body and its device functions are inlined into the loop at numba-IR level
        # (a call per element costs ~5x; a device function's stores become the loop's) unless
        # one calls something opaque that may write an array (an atomic): numba's parfor pass
        # would hoist reads of that array out of the loop, and see the old value.
        self.opaque[id(py_func)] = rewriter.writes_through_calls
        # ...which cannot happen where the arrays atomics write are touched by atomics only
        safe = not rewriter.other_writes and cuda_private.only_in_atomics(fdef.body, {a for _, a in rewriter.atomics})
        inline = "always" if safe and id(py_func) not in self.recursive else "never"
        checks = {"boundscheck": True} if self.debug else {}
        jitted = numba.njit(inline=inline, fastmath=self.fastmath, error_model=codegen.error_model(self.fastmath),
                            **checks)(func)
        if as_kernel and self.private:  # the same text with cuda.atomic.add as a plain add
            plain = dict(ns, _kr_atomic_add=cuda_private.plain_add())
            self.private_body = numba.njit(inline=inline, fastmath=self.fastmath, error_model=codegen.error_model(
                self.fastmath))(codegen.materialize(text, fdef.name, plain, origin + " private"))
        self.done[id(py_func)] = jitted
        for namespace, name, target in self.pending:  # numba reads globals when it compiles: bound in time
            if target == id(py_func):
                namespace[name] = jitted
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
        self.atomics: list[tuple[str, str | None]] = []  # (operation, array name) of each atomic call
        self.other_writes = False  # a call that may write other than a direct atomic
        self.recursive_calls: list[tuple[str, int]] = []  # (helper name, function) of calls still in translation
        self.block_features = False  # a barrier, shared array or collective: cuda_fission.py
        self.grid_groups: set[str] = set()  # names bound to cuda.cg.this_grid()

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

    def visit_Assign(self, node: ast.Assign):
        if isinstance(node.value, ast.Call) and self.cuda_path(node.value.func) == "cg.this_grid":
            self.grid_groups |= {t.id for t in node.targets if isinstance(t, ast.Name)}
            node.value = ast.Constant(0)  # the group object: only its sync() means anything here
            return node
        return self.generic_visit(node)

    def visit_Call(self, node: ast.Call):
        func = node.func
        if isinstance(func, ast.Attribute) and func.attr == "sync" and not node.args and (
                isinstance(func.value, ast.Name) and func.value.id in self.grid_groups
                or isinstance(func.value, ast.Call) and self.cuda_path(func.value.func) == "cg.this_grid"):
            self.block_features = True  # a grid-wide barrier (fission_grid.py)
            return ast.Call(ast.Name("_kr_split", ast.Load()), [ast.Constant("grid")], [])
        path = self.cuda_path(node.func)
        if path in ("grid", "gridsize"):
            return self.index_tuple(node, "_kr_g" if path == "grid" else "_kr_n")
        if path is not None and path.startswith("atomic."):
            return self.atomic(node, path.split(".", 1)[1])
        if path == "local.array":
            node.func = self.helper("_kr_np_empty", np_empty())
            return self.generic_visit(node)
        if path == "const.array_like":
            return self.visit(node.args[0])
        if path in BLOCK_CALLS:
            return self.block_call(node, path)
        if path is not None:  # a cast through numba.cuda.types, literal_unroll, an atomic as a value...
            node.func = self.value_of(path)
            return self.generic_visit(node)
        target = self.device_function(node.func)
        if target is not None:
            name, translated = self.t.helper_name(target), self.t.function(target, as_kernel=False)
            node.func = self.helper(name, translated)
            if translated is None:  # a recursive call: bound once the callee is compiled
                self.recursive_calls.append((name, id(target)))
            opaque = self.t.opaque.get(id(target), True)  # not known yet for a recursive call
            self.writes_through_calls |= opaque
            self.other_writes |= opaque
            node.args = [self.name(a) for a in _CTX] + [self.visit(a) for a in node.args]
            node.keywords = [self.visit(k) for k in node.keywords]
            return node
        callee = resolve(node.func, self.ns, self.local_names)
        if callee is numba_literal_unroll() or numba_copy_of(callee, "literal_unroll"):  # numba types it by plain name
            node.func = self.numba_value("literal_unroll")
            return self.generic_visit(node)
        if callee in (math.modf, math.fmod) or is_bit_count(node):  # missing from numba's CPU target
            from .cpu_intrinsics import INTRINSICS, bit_count, modf  # lazy: loads numba

            if callee is math.modf:
                node.func = self.helper("_kr_modf", modf)
            elif callee is math.fmod:
                node.func = self.helper("_kr_fmod", INTRINSICS["libdevice.fmod"])
            else:
                node.func, node.args = self.helper("_kr_bit_count", bit_count), [node.func.value]
            return self.generic_visit(node)
        if type(callee).__module__.startswith("numba.cuda"):  # e.g. a cuda.declare_device function
            self.t.fail(f"{ast.unparse(node.func)!r}, a {type(callee).__name__} from numba.cuda",
                        "it is CUDA C/C++, PTX or LTO-IR code with no Python source to run on a CPU",
                        fix="Give the kernel a CPU twin that does its work in Python")
        if not pure_callee(callee):
            self.writes_through_calls = self.other_writes = True
        return self.generic_visit(node)

    def visit_BinOp(self, node: ast.BinOp):
        axis = cuda_guard.global_index_axis(node, self.cuda_path)  # the grid index, without a division
        return self.generic_visit(node) if axis is None else self.name(f"_kr_g{axis}")

    def visit_Attribute(self, node: ast.Attribute):
        if isinstance(node.value, ast.Name) and node.value.id in self.grid_groups:  # not g.sync()
            self.t.fail(f"the grid group's {node.attr!r}", REFUSED["cg"])
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
        return self.numba_value(path)

    def numba_value(self, path: str):
        """What numba's CPU target knows by another name: a numba type reached through
        ``numba.cuda.types``, ``literal_unroll``, an atomic or intrinsic passed as a value."""
        import numba  # lazy: importing kernelrt loads no numba

        from .cpu_intrinsics import INTRINSICS  # lazy: loads numba

        if path in INTRINSICS:  # popc, fma, selp, fp16.*, libdevice.*...
            return self.helper(f"_kr_{path.replace('.', '_')}", INTRINSICS[path])
        head, _, rest = path.partition(".")
        if head == "types" and isinstance(getattr(numba.types, rest, None), numba.types.Type):
            return self.helper(f"_kr_type_{rest}", getattr(numba.types, rest))
        if path == "literal_unroll":
            return self.helper("_kr_literal_unroll", numba.literal_unroll)
        if head == "atomic":
            from .cpu_atomics import CHECKED_OPERATIONS, OPERATIONS  # lazy: loads numba

            operations = CHECKED_OPERATIONS if self.t.debug else OPERATIONS
            if rest in operations:
                self.writes_through_calls = self.other_writes = True
                return self.helper(f"_kr_atomic_{rest}", operations[rest])
        if path == "declare_device":
            self.t.fail("cuda.declare_device", "it links CUDA C/C++ or PTX, which has no CPU meaning",
                        fix="Give the kernel a CPU twin that does its work in Python")
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
        self.atomics.append((op, node.args[0].id if node.args and isinstance(node.args[0], ast.Name) else None))
        node.func = self.helper(f"_kr_atomic_{op}", operations[op])
        node.args = [self.visit(a) for a in node.args]
        return node

    def block_call(self, node: ast.Call, path: str):
        """A barrier, shared array or collective: a marker for cuda_fission.py."""
        marker = BLOCK_CALLS[path]
        args = [self.visit(a) for a in node.args]
        keywords = {k.arg: self.visit(k.value) for k in node.keywords}
        if path == "shared.array":
            args = args + [keywords.pop(k) for k in ("shape", "dtype")[len(args):] if k in keywords]
            if len(args) != 2:
                self.t.fail("cuda.shared.array without a shape and a dtype")
        elif keywords:
            self.t.fail(f"cuda.{path} with keyword arguments")
        if marker.startswith("_kr_split"):
            self.block_features = True
            return ast.Call(ast.Name("_kr_split", ast.Load()), [ast.Constant(marker.split(":")[1])], [])
        from .cpu_collectives import HELPERS  # lazy: importing kernelrt loads no numba

        if marker == "_kr_coll_active":  # a ballot of "this thread runs here"
            args = [ast.Constant(0xFFFFFFFF), ast.Call(self.helper("_kr_active", HELPERS["_kr_active"]), [], [])]
        elif marker == "_kr_lanemask_lt":
            args = [self.name("_kr_lane")]
        if marker not in ("_kr_lanemask_lt", "_kr_fence", "_kr_nanosleep"):
            self.block_features = True  # runs only in blocks
        func = self.helper(marker, HELPERS[marker]) if marker in HELPERS else ast.Name(marker, ast.Load())
        return ast.Call(func, args, [])

    def refuse(self, path: str):
        head = path.split(".")[0]
        if head in REFUSED:
            self.t.fail(f"cuda.{path}", REFUSED[head])
        self.t.fail(f"cuda.{path}", "not supported on the CPU backend")

    def helper(self, name: str, value) -> ast.Name:
        self.helpers[name] = value
        return ast.Name(id=name, ctx=ast.Load())
