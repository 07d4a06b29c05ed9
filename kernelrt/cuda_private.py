"""Private copies for arrays a translated kernel only adds into atomically (a histogram).

``cuda.atomic.add(hist, bin, 1)`` from every thread is what a GPU histogram does; on a
CPU each add is a locked instruction on a cache line the cores take from each other, and
the kernel ran 24x slower than ``numpy.bincount``. The way a CPU programmer writes it is
a histogram per worker, summed at the end. When a kernel touches an array parameter only
as the target of ``cuda.atomic.add`` calls whose result it drops, nothing can observe the
order of the adds, so the CPU entry (codegen.cuda_translation_source) runs the kernel's
threads in chunks, each adding into its own zeroed copy without atomics, and then adds
the copies into the array, chunk by chunk. Integer counts come out exactly as the atomics
give them; float sums are rounded in another order, which a GPU's atomics do not fix
either. The copies are made only while they fit in ``PRIVATE_BYTES`` together; otherwise,
and in debug mode, the atomics run as written.
"""

from __future__ import annotations

import ast
import functools

__all__ = ["CHUNKS", "PRIVATE_BYTES", "add_copy", "only_in_atomics", "plain_add", "private_add", "private_arrays"]

# Chunks of threads, each with its copy: a constant, not the core count, so that float sums
# come out the same on every machine (and numba can cache code that reads no thread count).
CHUNKS = 32
PRIVATE_BYTES = 1 << 26  # the private copies of one launch, all chunks together
_ADD = "_kr_atomic_add"  # the rewritten cuda.atomic.add (cuda_on_cpu.py)


def private_arrays(body: list[ast.stmt], params: list[str]) -> list[str]:
    """The parameters ``body`` (rewritten) uses only as ``_kr_atomic_add(p, index, value)``
    statements, never assigned and never passed anywhere else."""
    return [p for p in params if _only_atomic_uses(body, p, dropped_adds=True)]


def only_in_atomics(body: list[ast.stmt], arrays) -> bool:
    """Whether ``body`` touches each of ``arrays`` only as the target of atomics: then no read
    of one can be hoisted out of a parallel loop past an atomic that wrote it, and the body
    may be inlined into the loop (cuda_on_cpu.py)."""
    return all(a is not None and _only_atomic_uses(body, a, dropped_adds=False) for a in arrays)


def _only_atomic_uses(body, name: str, *, dropped_adds: bool) -> bool:
    module = ast.Module(body=body, type_ignores=[])
    if dropped_adds:  # the call is a statement of its own and an add
        calls = [n.value for n in ast.walk(module) if isinstance(n, ast.Expr) and isinstance(n.value, ast.Call)
                 and isinstance(n.value.func, ast.Name) and n.value.func.id == _ADD]
    else:
        calls = [n for n in ast.walk(module) if isinstance(n, ast.Call) and isinstance(n.func, ast.Name)
                 and n.func.id.startswith("_kr_atomic_")]
    allowed = {id(c.args[0]) for c in calls if c.args and isinstance(c.args[0], ast.Name)}
    uses = [n for n in ast.walk(module) if isinstance(n, ast.Name) and n.id == name]
    return bool(uses) and all(id(n) in allowed for n in uses)


def private_add(ary, idx, val):
    """``cuda.atomic.add`` on a chunk's own copy: no other thread writes it."""
    old = ary[idx]
    ary[idx] = old + val
    return old


@functools.cache
def plain_add():
    """``private_add`` compiled by numba (inlined where called), once per process."""
    from numba import njit  # lazy: importing kernelrt loads no numba

    return njit(inline="always")(private_add)


@functools.cache
def add_copy():
    """``add(target, copy)``: ``target += copy`` for numba, refusing a read-only target as
    ``cuda.atomic.add`` does (the same message, whichever the launch takes)."""
    from numba import njit  # lazy: importing kernelrt loads no numba
    from numba.core import types
    from numba.core.errors import TypingError
    from numba.extending import overload

    def add(target, copy):
        raise NotImplementedError  # numba compiles the overload below

    @overload(add)
    def _add(target, copy):
        if isinstance(target, types.Array) and not target.mutable:
            raise TypingError(f"cuda.atomic.add on a read-only array (got {target}); pass a writeable array")

        def impl(target, copy):
            target += copy
        return impl

    return njit(lambda target, copy: add(target, copy))
