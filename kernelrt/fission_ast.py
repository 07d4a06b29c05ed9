"""AST helpers of the loop fission (cuda_fission.py): markers, names, returns, flattening."""

from __future__ import annotations

import ast
import copy

from .errors import CpuTranslationError

SPLIT, SHARED = "_kr_split", "_kr_shared"
DONE = "_kr_s__kr_done"  # the block's per-thread "has returned" flags


def marker(node) -> str | None:
    """The helper name a rewritten call calls (``_kr_split``...), or None."""
    if isinstance(node, ast.Call) and isinstance(node.func, ast.Name):
        return node.func.id
    return None


def is_split(stmt) -> bool:
    return isinstance(stmt, ast.Expr) and marker(stmt.value) == SPLIT


def has_split(stmt) -> bool:
    return any(is_split(s) for s in ast.walk(stmt) if isinstance(s, ast.stmt))


def names(node) -> set[str]:
    return {n.id for n in ast.walk(node) if isinstance(n, ast.Name)}


def stored_names(stmt) -> set[str]:
    return {n.id for n in ast.walk(stmt) if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Store)}


def own_exprs(stmt) -> list:
    """The expressions a statement evaluates itself (not those of the statements it holds)."""
    if isinstance(stmt, ast.If | ast.While):
        return [stmt.test]
    if isinstance(stmt, ast.For):
        return [stmt.target, stmt.iter]
    if isinstance(stmt, ast.With | ast.Try | ast.FunctionDef):
        return []
    return [stmt]


class Flatten(ast.NodeTransformer):
    """Barriers to ``pass``; a collective's stored operand becomes a 1-element array."""

    def __init__(self, temps):
        self.temps = temps

    def visit_Expr(self, node):
        return ast.Pass() if is_split(node) else self.generic_visit(node)

    def visit_Assign(self, node):
        if len(node.targets) == 1 and isinstance(node.targets[0], ast.Name) and node.targets[0].id in self.temps:
            v = node.targets[0].id
            return [node, ast.parse(f"_kr_s_{v} = _kr_np.full(1, {v})").body[0]]
        return self.generic_visit(node)


def replace(root, old, new) -> None:
    for node in ast.walk(root):
        for name, value in ast.iter_fields(node):
            if value is old:
                setattr(node, name, new)
            elif isinstance(value, list):
                for i, item in enumerate(value):
                    if item is old:
                        value[i] = new


def top_targets(s) -> list:
    """The Name targets a simple statement assigns itself."""
    if isinstance(s, ast.Assign):
        targets = s.targets
    elif isinstance(s, ast.AugAssign | ast.AnnAssign):
        targets = [s.target]
    else:
        return []
    return [n for t in targets for n in ast.walk(t) if isinstance(n, ast.Name)]


def loose_jumps(stmt):
    """break/continue statements in ``stmt`` not inside a loop of their own there."""
    if isinstance(stmt, ast.Break | ast.Continue):
        yield stmt
        return
    if isinstance(stmt, ast.For | ast.While):
        for s in stmt.orelse:
            yield from loose_jumps(s)
        return
    for name in ("body", "orelse", "finalbody", "handlers"):
        for s in getattr(stmt, name, None) or []:
            yield from loose_jumps(s)


def without_returns(stmts, in_loop):
    """``return`` marks the thread done (and leaves the loops it is in); what follows is guarded."""
    out = []
    for i, s in enumerate(stmts):
        if isinstance(s, ast.Return):
            out += ast.parse(f"{DONE}[_kr_tid] = True").body
            if in_loop:
                out.append(ast.Break())
            return out, True
        returns = False
        if isinstance(s, ast.If):
            s.body, r1 = without_returns(s.body, in_loop)
            s.orelse, r2 = without_returns(s.orelse, in_loop)
            returns = r1 or r2
        elif isinstance(s, ast.For | ast.While):
            s.body, returns = without_returns(s.body, True)
        elif any(isinstance(n, ast.Return) for n in ast.walk(s)):
            raise CpuTranslationError(f"a return inside a '{type(s).__name__.lower()}' statement of a kernel "
                                      "that synchronises cannot run on the CPU backend")
        out.append(s)
        if returns:
            rest, _ = without_returns(stmts[i + 1:], in_loop)
            if in_loop and isinstance(s, ast.For | ast.While):
                out += ast.parse(f"if {DONE}[_kr_tid]:\n    break").body
            if rest:
                out.append(ast.If(test=ast.parse(f"not {DONE}[_kr_tid]", mode="eval").body, body=rest, orelse=[]))
            return out, True
    return out, False


def user_name(name: str) -> str:
    shown = {"_kr_t": "cuda.threadIdx", "_kr_g": "cuda.grid", "_kr_lane": "cuda.laneid"}
    for prefix, text in shown.items():
        if name.startswith(prefix):
            return text
    return repr(name)


def written_first(stmts, var: str) -> bool:
    """Whether every path through ``stmts`` assigns ``var`` before reading it (so a run in a
    loop need not carry it from one iteration to the next)."""
    for s in stmts:
        if var not in names(s):
            continue
        if isinstance(s, ast.Assign):  # x = ..., or x, y = ... (names only: no x[i] = ...)
            plain = all(isinstance(n, ast.Name | ast.Tuple | ast.List | ast.expr_context)
                        for t in s.targets for n in ast.walk(t))
            return plain and var not in names(s.value)
        if isinstance(s, ast.If) and var not in names(s.test):
            return written_first(s.body, var) and written_first(s.orelse, var)
        return False
    return False


def constants_in(expr, body, local_names):
    """``expr`` with each kernel local it reads replaced by the constant it is assigned once
    (``N = 100; cuda.shared.array(N, int32)``: CUDA sizes shared memory when compiling)."""
    values: dict[str, list] = {}
    for node in ast.walk(ast.Module(body=body, type_ignores=[])):
        for target, value in _assignments(node):
            values.setdefault(target, []).append(value)
    holder = ast.Expr(copy.deepcopy(expr))
    for node in list(ast.walk(holder)):
        if isinstance(node, ast.Name) and node.id in local_names:
            found = values.get(node.id, [])
            if len(found) == 1 and found[0] is not None and all(
                    isinstance(n, ast.Constant | ast.Tuple | ast.expr_context) for n in ast.walk(found[0])):
                replace(holder, node, copy.deepcopy(found[0]))
    return holder.value


def _assignments(node):
    if isinstance(node, ast.Assign):
        return [(t.id, node.value) for t in node.targets if isinstance(t, ast.Name)]
    if isinstance(node, ast.AugAssign | ast.AnnAssign | ast.For) and isinstance(node.target, ast.Name):
        return [(node.target.id, None)]
    return []


def rematerializable(body, thread_vars, params, context, arrays=()) -> dict[str, str]:
    """Thread variables a run can recompute instead of storing: assigned once, at the top of
    the kernel, from the thread's position, parameters never assigned, constants and slices
    of ``arrays`` (the shared ones) or parameters (``t = cuda.threadIdx.x``, ``sm1 = dyn[0:n]``:
    a view, which a per-thread array could not hold). Recomputed, ``t`` is the loop index to
    LLVM, and a run's ``if t < s`` can become the loop's range (cuda_guard.hoist_guard)."""
    module = ast.Module(body=body, type_ignores=[])
    counts: dict[str, int] = {}
    for node in ast.walk(module):
        if isinstance(node, ast.Name) and isinstance(node.ctx, ast.Store):
            counts[node.id] = counts.get(node.id, 0) + 1
    readable = set(context) | {p for p in params if p not in counts} | set(arrays)
    found = {}
    for s in body:
        if not (isinstance(s, ast.Assign) and len(s.targets) == 1 and isinstance(s.targets[0], ast.Name)):
            continue
        var = s.targets[0].id
        if var in thread_vars and counts[var] == 1 and _pure(s.value) and names(s.value) <= readable:
            found[var] = ast.unparse(s.value)
    return found


def _pure(expr) -> bool:
    """Arithmetic of names and constants, or a slice (a view: no element is read)."""
    for n in ast.walk(expr):
        if isinstance(n, ast.Subscript):
            parts = n.slice.elts if isinstance(n.slice, ast.Tuple) else [n.slice]
            if not all(isinstance(p, ast.Slice) for p in parts) or not isinstance(n.value, ast.Name):
                return False
        elif not isinstance(n, ast.Name | ast.Constant | ast.BinOp | ast.UnaryOp | ast.operator | ast.unaryop
                            | ast.Load | ast.Slice | ast.Tuple):
            return False
    return True
