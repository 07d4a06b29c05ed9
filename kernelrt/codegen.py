"""Generates the launchable Python functions for a per-thread kernel.

For a ``@kernel(ndim=N)`` body ``f(i[, j[, k]], *args)`` this module writes:

* a CUDA entry point ``f__cuda(*args)`` that reads ``cuda.grid(N)`` and calls the
  body compiled as a device function;
* a CPU entry point ``f__cpu(nx, *args)`` (1-D) or ``f__cpu(nx, ny, nz, min_rows, *args)``
  that runs the same index space with ``prange``. In 2-D/3-D it parallelises over the
  rows (y, z) and runs x innermost, which keeps C-ordered arrays indexed ``[.., j, i]``
  streaming; when there are too few rows to keep every core busy it runs the rows in
  turn and parallelises over x within each.

The sources are registered with ``linecache`` under a readable pseudo-filename, so
tracebacks, ``inspect.getsource`` and the cache key (which hashes source) all see them.
"""

from __future__ import annotations

import linecache

__all__ = ["cuda_entry_source", "cpu_entry_source", "cpu_index_arity", "error_model", "materialize"]

_INDEX = ("i", "j", "k")


def _arglist(params) -> str:
    # Prefixed names cannot clash with the body's own names or with our locals.
    return ", ".join(f"a_{p}" for p in params)


def cuda_entry_source(name: str, ndim: int, params) -> str:
    args = _arglist(params)
    index = ", ".join(_INDEX[:ndim])
    call = ", ".join(filter(None, [index, args]))
    return (
        f"def {name}__cuda({args}):\n"
        f"    {index} = cuda.grid({ndim})\n"
        f"    body({call})\n"
    )


def cpu_index_arity(ndim: int) -> int:
    """Leading integer arguments of the CPU entry: nx in 1-D; nx, ny, nz, min_rows else.

    1-D launches dominate and numba's dispatch cost grows with the argument count.
    """
    return 1 if ndim == 1 else 4


def cpu_entry_source(name: str, ndim: int, params) -> str:
    args = _arglist(params)
    tail_args = f", {args}" if args else ""
    if ndim == 1:
        return f"def {name}__cpu(nx{tail_args}):\n    for i in prange(nx):\n        body(i{tail_args})\n"
    head = f"def {name}__cpu(nx, ny, nz, min_rows{tail_args}):\n"
    if ndim == 2:
        # Enough rows: one parallel loop over rows. Few rows (a single subject, say):
        # a parallel loop over x per row. No integer division per element either way.
        return head + (
            "    if ny >= min_rows:\n"
            "        for j in prange(ny):\n"
            "            for i in range(nx):\n"
            f"                body(i, j{tail_args})\n"
            "    else:\n"
            "        for j in range(ny):\n"
            "            for i in prange(nx):\n"
            f"                body(i, j{tail_args})\n"
        )
    return head + (
        "    rows = ny * nz\n"
        "    if rows >= min_rows:\n"
        "        for r in prange(rows):\n"
        "            k = r // ny\n"
        "            j = r - k * ny\n"
        "            for i in range(nx):\n"
        f"                body(i, j, k{tail_args})\n"
        "    else:\n"
        "        for k in range(nz):\n"
        "            for j in range(ny):\n"
        "                for i in prange(nx):\n"
        f"                    body(i, j, k{tail_args})\n"
    )


def materialize(source: str, func_name: str, namespace: dict, origin: str):
    """Exec ``source`` in ``namespace`` and return ``func_name``, with source lookup."""
    filename = f"<kernelrt-generated {origin}>"
    linecache.cache[filename] = (len(source), None, source.splitlines(True), filename)
    code = compile(source, filename, "exec")
    exec(code, namespace)
    return namespace[func_name]


def error_model(fastmath: bool) -> str:
    """numba's error model for a CUDA kernel's CPU code: a fast-math float division by zero
    gives inf on the GPU even in debug mode, an exact one raises there (debug=True)."""
    return "numpy" if fastmath else "python"
