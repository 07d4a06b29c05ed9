"""Device functions that synchronise, inlined into the kernel before its translation.

On a GPU a device function may declare shared memory and call ``cuda.syncthreads``; on the
CPU a barrier splits the kernel's own loops over a block's threads (cuda_fission.py), so
such a function is spliced into the kernel's body at the source level, where it is called
as a statement (``f(...)``) or as ``x = f(...)``: its locals renamed ``_kr_in<k>_<name>``,
each parameter replaced by its argument when that is a constant, a name or an attribute
chain (types, sizes and functions passed as arguments, as numba-cuda's own tests do) and
the parameter is never reassigned, otherwise bound once to a renamed local. Its globals
must mean the same in the kernel's module. Device functions without barriers are not
inlined here: they are translated and called (cuda_on_cpu.py).
"""

from __future__ import annotations

import ast
import copy
import inspect
import textwrap

from .cuda_names import BLOCK_CALLS, cuda_path, device_py_func, resolve
from .kernel_source import parse_as_imported

__all__ = ["inline_synchronising_calls"]

_MAX_DEPTH = 8


def inline_synchronising_calls(body: list, ns: dict, local_names: set, fail, kernel_name: str) -> tuple[list, set]:
    """``body`` with calls of synchronising device functions spliced in; the new local names."""
    inliner = _Inliner(ns, local_names, fail, kernel_name)
    return inliner.statements(body, 0), inliner.new_locals


class _Inliner:
    def __init__(self, ns, local_names, fail, kernel_name):
        self.ns, self.local_names, self.fail, self.kernel_name = ns, local_names, fail, kernel_name
        self.new_locals: set[str] = set()
        self.count = 0

    def statements(self, stmts: list, depth: int) -> list:
        out = []
        for s in stmts:
            for name in ("body", "orelse", "finalbody"):
                if isinstance(getattr(s, name, None), list):
                    setattr(s, name, self.statements(getattr(s, name), depth))
            call, target = _call_of(s)
            py_func = self._synchronising(call) if call is not None else None
            if py_func is None:
                out.append(s)
                continue
            if depth >= _MAX_DEPTH:
                self.fail(f"device functions that synchronise nested more than {_MAX_DEPTH} deep",
                          "recursion cannot be inlined")
            out += self.statements(self._splice(py_func, call, target), depth + 1)
        return out

    def _synchronising(self, call: ast.Call):
        py_func = device_py_func(resolve(call.func, self.ns, self.local_names))
        if py_func is None:
            return None
        ns = dict(py_func.__globals__)
        tree = self._parse(py_func)
        for node in ast.walk(tree):
            if isinstance(node, ast.Attribute | ast.Name) and cuda_path(node, ns, set()) in BLOCK_CALLS:
                return py_func
        return None

    def _parse(self, py_func) -> ast.FunctionDef:
        try:
            source = textwrap.dedent(inspect.getsource(py_func))
        except (OSError, TypeError):
            self.fail(f"the device function {py_func.__qualname__!r} without readable source")
        return parse_as_imported(source, py_func, self.kernel_name).body[0]

    def _splice(self, py_func, call: ast.Call, target) -> list:
        fdef = self._parse(py_func)
        what = f"the device function {py_func.__qualname__!r}, which synchronises,"
        if call.keywords or any(isinstance(a, ast.Starred) for a in call.args):
            self.fail(f"{what} called with keyword or starred arguments", "pass them by position")
        params = [a.arg for a in fdef.args.posonlyargs + fdef.args.args]
        if len(call.args) != len(params) or fdef.args.vararg or fdef.args.kwonlyargs:
            self.fail(f"{what} called with {len(call.args)} arguments for its {len(params)} parameters")
        k, self.count = self.count, self.count + 1
        body, value = fdef.body, None
        if body and isinstance(body[-1], ast.Return):
            body, value = body[:-1], body[-1].value
        if target is not None and value is None:
            self.fail(f"{what} used as a value without a final return")
        if any(isinstance(n, ast.Return) for s in body for n in ast.walk(s)):
            self.fail(f"{what} returning before its end", "a barrier's threads must all reach the return")
        module = ast.Module(body=body, type_ignores=[])
        assigned = {n.id for n in ast.walk(module) if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Store)}
        rename, bind, substitute = {}, [], {}
        for p, arg in zip(params, call.args):
            if _simple(arg) and p not in assigned:
                substitute[p] = arg
            else:
                rename[p] = f"_kr_in{k}_{p}"
                bind.append(ast.Assign(targets=[ast.Name(rename[p], ast.Store())], value=arg, lineno=0))
        for name in set(py_func.__code__.co_varnames) - set(params):
            rename[name] = f"_kr_in{k}_{name}"
        self.new_locals |= set(rename.values())
        dev_ns = dict(py_func.__globals__)
        for node in ast.walk(module):
            if isinstance(node, ast.Name) and node.id not in rename and node.id not in substitute \
                    and node.id in dev_ns:
                mine = self.ns.setdefault(node.id, dev_ns[node.id])
                if mine is not dev_ns[node.id]:
                    self.fail(f"{what} whose global {node.id!r} means something else in the kernel's module",
                              "define it beside the kernel")
        renamer = _Renamer(rename, substitute)
        module = renamer.visit(module)
        if target is not None:  # the kernel's own target, not renamed
            module.body.append(ast.Assign(targets=[target], value=renamer.visit(value), lineno=0))
        return bind + ast.fix_missing_locations(module).body


def _call_of(stmt):
    """(call, target) of ``f(...)`` or ``x = f(...)``, else (None, None)."""
    if isinstance(stmt, ast.Expr) and isinstance(stmt.value, ast.Call):
        return stmt.value, None
    if isinstance(stmt, ast.Assign) and len(stmt.targets) == 1 and isinstance(stmt.value, ast.Call):
        return stmt.value, stmt.targets[0]
    return None, None


def _simple(node) -> bool:
    if isinstance(node, ast.Constant | ast.Name):
        return True
    if isinstance(node, ast.Attribute):
        return _simple(node.value)
    if isinstance(node, ast.Tuple):
        return all(isinstance(e, ast.Constant) for e in node.elts)
    if isinstance(node, ast.UnaryOp) and isinstance(node.operand, ast.Constant):
        return True
    return False


class _Renamer(ast.NodeTransformer):
    def __init__(self, rename, substitute):
        self.rename, self.substitute = rename, substitute

    def visit_Name(self, node):
        if node.id in self.substitute and isinstance(node.ctx, ast.Load):
            return copy.deepcopy(self.substitute[node.id])
        if node.id in self.rename:
            return ast.copy_location(ast.Name(self.rename[node.id], node.ctx), node)
        return node
