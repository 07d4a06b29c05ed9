"""The CPU driver of a kernel that synchronises: blocks in parallel, each a fissioned program.

cuda_fission.py lays out one block's program; the per-thread arrays it needs take the
types numba gives the kernel's variables, which depend on the launch's argument types. So
the block function is written per signature, inside numba's typing: the entry calls a
stub whose ``overload`` compiles the flat kernel (``_probe_source``) for those argument
types, reads the unified type of each stored variable from numba's type map, and returns
the block function with its arrays typed. The entry itself is the usual ``prange`` over
blocks, so the disk cache stores the whole thing like any translated kernel.
"""

from __future__ import annotations

import ast
import copy
import functools
import re

import numpy as np

from . import codegen
from .cuda_fission import BLOCK_CTX, THREAD_CTX, BlockProgram
from .fission_ast import DONE, Flatten, marker

__all__ = ["block_twin"]

_CHUNKS = 256  # parallel chunks of blocks at most: enough to balance the cores, few allocations


def block_twin(kernel, program: BlockProgram, ns: dict, digest: str, *, fastmath: bool, debug: bool):
    """``twin(grid, block, *args)`` running ``kernel``'s block program over every block."""
    import numba  # lazy: importing kernelrt loads no numba
    from numba.extending import overload

    from . import cuda_guard
    from .cpu_collectives import HELPERS

    program.source("_kr_layout")  # lays out the runs: which variables need per-thread arrays
    ns = dict(ns, _kr_np=np, _kr_dynamic=_jitted_dynamic_shared(), **cuda_guard.limit_functions(), **HELPERS)
    checks = {"boundscheck": True} if debug else {}
    name = f"_kr_blocks_{kernel.name}"

    made: dict = {}
    params = ", ".join(f"a_{p}" for p in kernel.params)
    tail = f", {params}" if params else ""
    doc = f'    """CPU translation (in blocks) of the CUDA kernel {kernel.qualname} ({digest})."""\n'
    if program.grid_mode:  # one call: the grid program runs its phases over the blocks itself
        def stub(grid, block, shared_mem, *args):  # replaced by the overload below inside numba
            raise NotImplementedError

        parallel = {"parallel": not debug}  # debug runs serially: numba drops errors raised in prange
        body = f"    {name}(grid, block, shared_mem{tail})\n"
    else:  # chunks of blocks in parallel, each block function call allocating its arrays once
        def stub(lo, hi, grid, block, shared_mem, *args):  # replaced by the overload below inside numba
            raise NotImplementedError

        parallel = {}
        body = (f"    nb = grid[0] * grid[1] * grid[2]\n    per = (nb + {_CHUNKS - 1}) // {_CHUNKS}\n"
                f"    for c in prange((nb + per - 1) // per):\n"
                f"        {name}(c * per, min(nb, (c + 1) * per), grid, block, shared_mem{tail})\n")
    stub.__name__ = name

    options = dict(fastmath=fastmath, error_model=codegen.error_model(fastmath), **checks, **parallel)

    @overload(stub, jit_options=options, strict=False)
    def _typed(*signature):
        args = signature[3:] if program.grid_mode else signature[5:]
        if args not in made:
            made[args] = _block_function(kernel, program, ns, args, fastmath, checks)
        return made[args]

    src = f"def {kernel.name}__cpu(grid, block, shared_mem{tail}):\n" + doc + body
    entry_ns = {"prange": numba.prange, name: stub, "__name__": kernel.py_func.__module__}
    return codegen.materialize(src, f"{kernel.name}__cpu", entry_ns, f"{kernel.qualname} cpu blocks {digest}")


def _block_function(kernel, program: BlockProgram, ns: dict, argtypes, fastmath: bool, checks: dict):
    """The block function (or grid program), its per-thread arrays typed for ``argtypes``."""
    import numba  # lazy: importing kernelrt loads no numba
    from numba.core import types
    from numba.np.numpy_support import as_dtype

    argtypes = tuple(types.unliteral(t) for t in argtypes)
    probe_ns = dict(ns)
    probe_src = _probe_source(program, f"_kr_probe_{kernel.name}")
    probe = codegen.materialize(probe_src, f"_kr_probe_{kernel.name}", probe_ns, f"{kernel.qualname} cpu probe")
    ctx_count = probe.__code__.co_argcount - len(kernel.params) - 1
    dims = types.UniTuple(types.int64, 3)
    names = probe.__code__.co_varnames[:ctx_count]
    ctx_types = tuple(dims if n in ("_kr_grid", "_kr_block") else types.int64 for n in names)
    sig = ctx_types + (types.boolean[::1],) + argtypes
    dispatcher = numba.njit(fastmath=fastmath)(probe)
    try:
        dispatcher.compile(sig)
    except numba.core.errors.TypingError as e:
        program.fail("code numba cannot type for the CPU", str(e).splitlines()[0])
    result = dispatcher.overloads[sig]
    typemap, typing = result.type_annotation.typemap, result.typing_context
    storage = {}
    for var in sorted(program.stored):
        found = [types.unliteral(t) for k, t in typemap.items() if re.fullmatch(re.escape(var) + r"(\.\d+)?", k)]
        if not found:
            storage[var] = ("scalar", "float64")  # never assigned: read only as garbage, as on a GPU
            continue
        unified = typing.unify_types(*found) if len(found) > 1 else found[0]
        if isinstance(unified, types.Boolean | types.Integer | types.Float | types.Complex):
            storage[var] = ("scalar", as_dtype(unified).name)
            continue
        spec = _local_array_spec(program, var) if isinstance(unified, types.Array) else None
        if spec is None:
            program.fail(f"the variable {var!r} ({unified}) across a barrier",
                         "only numbers and cuda.local arrays keep a value per thread there")
        storage[var] = ("local", *spec)
    fn_name = f"_kr_block_{kernel.name}"
    src = program.source(fn_name, storage)
    ns = dict(ns, prange=numba.prange)
    function = codegen.materialize(src, fn_name, ns, f"{kernel.qualname} cpu block")
    if program.grid_mode:  # the phase function, called per block from the grid program's prange
        phase = ns[f"{fn_name}_phase"]
        ns[f"{fn_name}_phase"] = numba.njit(fastmath=fastmath, error_model=codegen.error_model(fastmath), **checks)(phase)
    return function


@functools.cache
def _jitted_dynamic_shared():
    import numba  # lazy: importing kernelrt loads no numba

    return numba.njit(dynamic_shared)


def dynamic_shared(memory, dtype):
    """``cuda.shared.array(0, dtype)``: the launch's dynamic shared memory (bytes) seen as
    ``dtype``, as many whole elements as fit; every such array of a block aliases it, as on
    the GPU."""
    itemsize = np.empty(0, dtype).itemsize
    return memory[: memory.size // itemsize * itemsize].view(dtype)


def _local_array_spec(program: BlockProgram, var: str):
    """(shape source, dtype source) of ``var = cuda.local.array(shape, dtype)``, or None."""
    for node in ast.walk(ast.Module(body=program.body, type_ignores=[])):
        if isinstance(node, ast.Assign) and any(isinstance(t, ast.Name) and t.id == var for t in node.targets):
            if marker(node.value) == "_kr_np_empty" and len(node.value.args) == 2:
                shape = node.value.args[0]
                dims = shape.elts if isinstance(shape, ast.Tuple) else [shape]
                return ", ".join(ast.unparse(d) for d in dims), ast.unparse(node.value.args[1])
    return None


def _probe_source(program: BlockProgram, name: str) -> str:
    """The kernel as one thread's function, barriers removed: numba types its variables."""
    ctx = sorted(BLOCK_CTX | THREAD_CTX)
    head = [f"def {name}({', '.join(ctx + [DONE] + list(program.params))}):"]
    head += [f"    {v} = _kr_np.zeros({ast.unparse(shape)}, {ast.unparse(dtype)})" for v, shape, dtype in program.shared]
    body = copy.deepcopy(program.body)
    flat = Flatten(program.forced_store).visit(ast.Module(body=body, type_ignores=[]))
    ast.fix_missing_locations(flat)
    lines = [("    " + line) for line in ast.unparse(flat).splitlines()]
    return "\n".join(head + (lines or ["    pass"]) + ["    return None"]) + "\n"
