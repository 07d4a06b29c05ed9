"""A translated kernel's bounds guard (and grid-stride loop), moved into the range of its
loop over threads.

Most kernels open with a guard that sends the threads past the data home at once::

    i = cuda.grid(1)              # or cuda.threadIdx.x + cuda.blockIdx.x * cuda.blockDim.x
    if i >= x.shape[0]:           # or the rest of the body inside ``if 0 < i < n - 1:``
        return

On the CPU every thread is an iteration of one loop, and a guard tested in each iteration
costs the loop its vectorisation (Black-Scholes ran 1.7x slower than the loop a user would
write). When the guard compares a grid index with a bound no thread can change (the
kernel's parameters, their shapes, module constants, arithmetic of those) and nothing
before it has a side effect or reads an array, ``hoist_guard`` takes those comparisons out
of the body and returns them as a range per axis; the loop then runs only the threads the
guard lets through (codegen.cuda_translation_source). What does not fit stays in the body.

Bounds may be floats: ``i < 2.5`` runs i <= 2, and a NaN bound means what it means on
the GPU (a comparison with NaN is false), through ``upper``/``lower`` below. A kernel that
ends in a grid-stride loop whose iterations share nothing becomes a loop over the indices
in order (``collapse``); cuda_fission.py uses the same analysis for a block run's
``if t < s``.
"""

from __future__ import annotations

import ast
import functools

from .fission_ast import loose_jumps, written_first

__all__ = ["global_index_axis", "hoist_guard", "limit_functions", "lower", "thread_ranges", "upper"]

_AXES = {"x": 0, "y": 1, "z": 2}
_FLIP = {ast.Lt: ast.Gt, ast.LtE: ast.GtE, ast.Gt: ast.Lt, ast.GtE: ast.LtE, ast.Eq: ast.Eq}
_NEGATE = {ast.Lt: ast.GtE, ast.LtE: ast.Gt, ast.Gt: ast.LtE, ast.GtE: ast.Lt, ast.NotEq: ast.Eq}
GRID_INDEX = {"_kr_g0": 0, "_kr_g1": 1, "_kr_g2": 2}  # the translated cuda.grid(3)
_THREAD_INDEX = {"_kr_t0": 0, "_kr_t1": 1, "_kr_t2": 2}  # the thread's place in its block
_POSITION = {f"_kr_{p}{d}" for p in "gtb" for d in range(3)} | {"_kr_lane"}  # what differs between threads
_ARITHMETIC = (ast.Add, ast.Sub, ast.Mult, ast.FloorDiv, ast.Div)


def global_index_axis(node: ast.BinOp, path_of) -> int | None:
    """The axis of ``threadIdx.a + blockIdx.a * blockDim.a`` (any order), else None:
    the thread's grid index, which the CPU loop has without dividing."""
    if not isinstance(node.op, ast.Add):
        return None
    for thread, product in ((node.left, node.right), (node.right, node.left)):
        head, _, axis = (path_of(thread) or "").partition(".")
        if head == "threadIdx" and isinstance(product, ast.BinOp) and isinstance(product.op, ast.Mult):
            factors = {path_of(product.left), path_of(product.right)}
            if factors == {f"blockIdx.{axis}", f"blockDim.{axis}"}:
                return _AXES[axis]
    return None


def hoist_guard(body: list[ast.stmt], uniform: dict, constants: dict, index=GRID_INDEX, *, returns=True,
                collapse=False):
    """``(body without its guard, bounds)``: bounds[axis] lists ``("upper" | "lower", source)``,
    the first index past the threads that run / the first that runs, or ``("count", source)``
    where a grid-stride loop was collapsed (``collapse``, below).

    ``uniform``: the names that are the same for every thread, each to the expression that
    reads it where the bounds are computed; ``constants``: module globals a bound may read;
    ``index``: the names of the thread's position per axis; ``returns``: whether an
    ``if <T>: return`` guard may go too (not where a returned thread must be remembered).

    ``collapse``: a kernel that ends in a grid-stride loop, ``for i in range(cuda.grid(1), n,
    cuda.gridsize(1))``, whose iterations share nothing (no value carried from one to the
    next, nothing of the thread's position but ``i``, no jump out, no device function that
    could read the position) is the loop body once for each i below n: the threads' loops
    together visit each i once. The entry then runs i over range(n) in order, where the
    grid-stride order read memory with the GPU's stride (thread t: t, t + 16384, ...).
    """
    env = dict(uniform)
    index = dict(index)
    sizes = {f"_kr_n{d}": d for d in range(3)}  # the translated cuda.gridsize, per axis
    bounds: list[list] = [[], [], []]
    out = list(body)
    at = 0
    while at < len(out):
        stmt = out[at]
        if isinstance(stmt, ast.Expr) and isinstance(stmt.value, ast.Constant):  # a docstring
            at += 1
        elif isinstance(stmt, ast.Assign) and _assign(stmt, env, index, constants, sizes):
            at += 1
        elif collapse and isinstance(stmt, ast.For) and at == len(out) - 1:
            axis_count = _grid_stride(stmt, out, env, index, sizes, constants)
            if axis_count is not None and not any(bounds):
                axis, count = axis_count
                first = ast.Assign([stmt.target], ast.Name(f"_kr_g{axis}", ast.Load()), lineno=0)
                out[at:] = [first, *stmt.body]
                bounds[axis].append(("count", count))
            return out, bounds
        elif isinstance(stmt, ast.If) and not stmt.orelse and _is_return(stmt.body) and returns:
            # if <T>: return  -- the threads that stay satisfy not A and not B for T = A or B
            terms = stmt.test.values if _is(stmt.test, ast.BoolOp, ast.Or) else [stmt.test]
            kept = [t for t in terms if not _bound(t, env, index, constants, bounds, negate=True)]
            if kept:
                stmt.test = kept[0] if len(kept) == 1 else ast.BoolOp(ast.Or(), kept)
                return out, bounds
            del out[at]
        elif isinstance(stmt, ast.If) and not stmt.orelse and at == len(out) - 1:
            terms = stmt.test.values if _is(stmt.test, ast.BoolOp, ast.And) else [stmt.test]
            kept = [t for t in terms if not _bound(t, env, index, constants, bounds, negate=False)]
            if kept:
                stmt.test = kept[0] if len(kept) == 1 else ast.BoolOp(ast.And(), kept)
            else:
                out[at:] = stmt.body
            return out, bounds
        else:
            break
    return out, bounds


def thread_ranges(remat: list, stmts: list, uniform: set):
    """A block run (cuda_fission.py) that is ``if <thread index within uniform bounds>: ...``
    (a tree reduction's ``if t < s``): ``(range source per axis, stmts without the if)``,
    else None. ``remat``: the assignments the run recomputes first (``t = _kr_t0``)."""
    names = {n: ast.Name(n, ast.Load()) for n in uniform}
    body, bounds = hoist_guard(remat + stmts, names, {}, _THREAD_INDEX, returns=False)
    if not any(bounds):
        return None
    ranges = []
    for d in range(3):
        lows = [v for kind, v in bounds[d] if kind == "lower"]
        highs = [v for kind, v in bounds[d] if kind == "upper"]
        end = f"min(_kr_bd{d}, {', '.join(highs)})" if highs else f"_kr_bd{d}"
        ranges.append(f"range(max(0, {', '.join(lows)}), {end})" if lows else f"range({end})")
    return ranges, body[len(remat):]


def _is(node, kind, op) -> bool:
    return isinstance(node, kind) and isinstance(node.op, op)


def _is_return(body) -> bool:
    return len(body) == 1 and isinstance(body[0], ast.Return) and body[0].value is None


def _assign(stmt: ast.Assign, env: dict, index: dict, constants: dict, sizes: dict) -> bool:
    """Record a leading assignment; False where it may have an effect (then the scan stops)."""
    if any(isinstance(n, (ast.Call, ast.Subscript, ast.NamedExpr, ast.Starred, ast.Lambda))
           and not _uniform(n, env, constants) for n in ast.walk(stmt.value)):
        return False
    targets = [t for target in stmt.targets for t in (target.elts if isinstance(target, ast.Tuple) else [target])]
    if not all(isinstance(t, ast.Name) for t in targets):
        return False
    values = stmt.value.elts if isinstance(stmt.value, ast.Tuple) and len(stmt.targets) == 1 else None
    # every value is read before any target is bound, as Python does (``a, b = b, a``)
    found = [(target.id, _classify(values[pos] if values is not None and len(values) == len(targets) else (
        stmt.value if len(targets) == 1 else None), env, index, sizes, constants)) for pos, target in enumerate(targets)]
    for name, (kind, what) in found:
        for known in (env, index, sizes):
            known.pop(name, None)
        if kind is not None:
            {"index": index, "size": sizes, "uniform": env}[kind][name] = what
    return True


def _classify(value, env: dict, index: dict, sizes: dict, constants: dict):
    """``(kind, what)`` of an assigned value: a grid index (its axis), a grid size (its axis),
    a uniform value (its expression at the entry), or ``(None, None)``."""
    if isinstance(value, ast.Name) and value.id not in env and value.id in index:
        return "index", index[value.id]
    if isinstance(value, ast.Name) and value.id in sizes:
        return "size", sizes[value.id]
    if value is not None and _uniform(value, env, constants):
        return "uniform", _substitute(value, env, constants)
    return None, None


def _grid_stride(loop: ast.For, body, env: dict, index: dict, sizes: dict, constants: dict):
    """``(axis, source of n)`` of a collapsible grid-stride loop (see hoist_guard), else None."""
    it = loop.iter
    if (loop.orelse or not isinstance(loop.target, ast.Name) or not isinstance(it, ast.Call)
            or not isinstance(it.func, ast.Name) or it.func.id != "range" or it.keywords or len(it.args) != 3
            or any(not isinstance(a, ast.Name) for a in (it.args[0], it.args[2]))):
        return None
    axis = index.get(it.args[0].id)
    if axis is None or sizes.get(it.args[2].id) != axis or not _uniform(it.args[1], env, constants):
        return None
    module = ast.Module(body=loop.body, type_ignores=[])
    if any(isinstance(n, ast.Return) for n in ast.walk(module)) or any(j for s in loop.body for j in loose_jumps(s)):
        return None
    stored = {n.id for n in ast.walk(module) if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Store)}
    local = {n.id for s in body for n in ast.walk(s) if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Store)}
    for node in ast.walk(module):
        if not isinstance(node, ast.Name) or isinstance(node.ctx, ast.Store) or node.id == loop.target.id:
            continue
        name = node.id
        if name in _POSITION or name.startswith("_kr_dev"):  # the thread's position, or a callee given it
            return None
        if name in stored and not written_first(loop.body, name):
            return None  # carried from one iteration to the next
        if name not in stored and name in local and name not in env:
            return None  # a value of the thread's from before the loop
    return axis, ast.unparse(_substitute(it.args[1], env, constants))


def _uniform(node, env: dict, constants: dict) -> bool:
    """Whether ``node`` has one value for every thread and can be read before the loop."""
    if isinstance(node, ast.Constant):
        return isinstance(node.value, (int, float)) and not isinstance(node.value, bool)
    if isinstance(node, ast.Name):
        return node.id in env or _constant(node.id, constants) is not None
    if isinstance(node, ast.Attribute):
        return node.attr in ("shape", "size", "ndim") and _uniform(node.value, env, constants)
    if isinstance(node, ast.Subscript):
        return (isinstance(node.value, ast.Attribute) and node.value.attr == "shape"
                and isinstance(node.slice, ast.Constant) and _uniform(node.value, env, constants))
    if isinstance(node, ast.BinOp):
        return isinstance(node.op, _ARITHMETIC) and all(_uniform(n, env, constants) for n in (node.left, node.right))
    if isinstance(node, ast.UnaryOp):
        return isinstance(node.op, ast.USub) and _uniform(node.operand, env, constants)
    if isinstance(node, ast.Call):
        return (isinstance(node.func, ast.Name) and node.func.id in ("len", "min", "max") and not node.keywords
                and node.func.id not in env and node.args and all(_uniform(a, env, constants) for a in node.args))
    return False


def _constant(name: str, constants: dict):
    value = constants.get(name)
    return value if isinstance(value, (int, float)) and not isinstance(value, bool) else None


def _substitute(node, env: dict, constants: dict):
    """``node`` over the entry's names: parameters as ``a_<p>``, module constants as literals."""

    class _Names(ast.NodeTransformer):
        def visit_Name(self, name: ast.Name):
            if name.id in env:
                return env[name.id]
            if name.id in ("len", "min", "max"):
                return name
            return ast.Constant(_constant(name.id, constants))

    return _Names().visit(ast.parse(ast.unparse(node), mode="eval").body)


def _bound(term, env: dict, index: dict, constants: dict, bounds: list, *, negate: bool) -> bool:
    """Add the bounds that comparison ``term`` puts on a grid index; False if it is not one."""
    if not isinstance(term, ast.Compare):
        return False
    operands = [term.left, *term.comparators]
    if negate and len(term.ops) != 1:
        return False  # not (a < i < b) is a disjunction
    found = []
    for left, op, right in zip(operands, term.ops, operands[1:]):
        kind = _NEGATE.get(type(op)) if negate else type(op)
        if kind is None:
            return False
        for var, other, rel in ((left, right, kind), (right, left, _FLIP[kind])):
            axis = index.get(var.id) if isinstance(var, ast.Name) else None
            if axis is not None and _uniform(other, env, constants):
                bound = _substitute(other, env, constants)
                # i == e: from e to e; NaN: a kept comparison is false (no thread runs), a negated
                # one never returns (all run), except != (true: all return)
                for one in ((ast.GtE, ast.LtE) if rel is ast.Eq else (rel,)):
                    found.append((axis, _limit(one, bound, nan_runs_all=negate and kind is not ast.Eq)))
                break
        else:
            return False
    for axis, item in found:
        bounds[axis].append(item)
    return True


def _limit(rel, bound, *, nan_runs_all: bool) -> tuple[str, str]:
    """``("upper" | "lower", source of the index limit)``, folded where the bound is a literal
    (so that LLVM sees, say, a loop from 1 and drops the wraparound check of ``u[i - 1]``)."""
    upper_bound = rel in (ast.Lt, ast.LtE)
    inclusive = rel in (ast.LtE, ast.GtE)
    if isinstance(bound, ast.Constant):
        limit = (upper if upper_bound else lower)(bound.value, inclusive, nan_runs_all)
        return ("upper" if upper_bound else "lower"), str(limit)
    call = f"{'_kr_upper' if upper_bound else '_kr_lower'}({ast.unparse(bound)}, {inclusive}, {nan_runs_all})"
    return ("upper" if upper_bound else "lower"), call


@functools.cache
def limit_functions() -> dict:
    """``upper`` and ``lower`` compiled by numba once per process, under the names the
    generated bounds call them by."""
    from numba import njit  # lazy: importing kernelrt loads no numba

    return {"_kr_upper": njit(upper), "_kr_lower": njit(lower)}


def upper(e, inclusive: bool, nan_runs_all: bool) -> int:
    """The first index past ``i < e`` (``i <= e`` if inclusive); numba compiles it per type."""
    big = 1 << 62
    if e != e:
        return big if nan_runs_all else -big
    if e >= big:
        return big
    if e <= -big:
        return -big
    f = int(e // 1)  # floor, for ints and floats alike
    return f + 1 if inclusive or f != e else f


def lower(e, inclusive: bool, nan_runs_all: bool) -> int:
    """The first index with ``i > e`` (``i >= e`` if inclusive)."""
    big = 1 << 62
    if e != e:
        return -big if nan_runs_all else big
    if e >= big:
        return big
    if e <= -big:
        return -big
    f = int(e // 1)
    return f if inclusive and f == e else f + 1
