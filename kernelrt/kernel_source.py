"""A kernel's source, read for the CPU translation only if it is the code this process imported."""

from __future__ import annotations

import ast

from .errors import CpuTranslationError

__all__ = ["parse_as_imported"]


def parse_as_imported(source: str, py_func, kernel_name: str) -> ast.Module:
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
