"""A kernel's source, read for the CPU translation only if it is the code this process imported."""

from __future__ import annotations

import ast
import hashlib
from pathlib import Path

from .errors import CpuTranslationError

__all__ = ["parse_as_imported", "text_digest", "translator_digest"]


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
    consts = tuple(_fingerprint(c) if hasattr(c, "co_code") else (type(c).__name__, repr(_unindented(c)))
                   for c in code.co_consts)
    return (code.co_argcount, code.co_kwonlyargcount, code.co_varnames,
            frozenset(code.co_names) | frozenset(code.co_freevars), consts)


def _unindented(const):
    """A string constant without its lines' indentation: dedenting a nested kernel's source
    changes the indentation inside its docstring, not the code."""
    if isinstance(const, str) and "\n" in const:
        return "\n".join(line.strip() for line in const.splitlines())
    return const


# Every module the CUDA-to-CPU translator imports (tests/runtime/test_cuda_kernels_on_cpu.py
# checks the list against cuda_on_cpu.py's imports; errors.py only words the refusals)
TRANSLATOR_MODULES = ("cuda_on_cpu.py", "cpu_atomics.py", "cuda_fission.py", "fission_ast.py", "cuda_blocks.py",
                      "cpu_collectives.py", "cuda_inline.py", "cpu_intrinsics.py", "cpu_libdevice.py",
                      "fission_grid.py", "cuda_guard.py", "cuda_private.py", "codegen.py", "cuda_names.py",
                      "kernel_source.py")


def translator_digest() -> str:
    """Digest of the translator's modules: part of every translated kernel's source,
    so the cache key of a translated kernel changes when any of them does."""
    here = Path(__file__).resolve().parent
    data = b"".join((here / name).read_bytes() for name in TRANSLATOR_MODULES)
    return hashlib.sha256(data).hexdigest()[:16]


def text_digest(text: str) -> str:
    """A short digest of ``text`` (a translated function's source)."""
    return hashlib.sha256(text.encode()).hexdigest()[:12]
