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

__all__ = ["cuda_entry_source", "cpu_entry_source", "cpu_index_arity", "cuda_translation_source", "error_model",
           "materialize", "thread_prologue"]

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


def cuda_translation_source(name: str, about: str, params, bounds, min_rows: int, private=(),
                            chunks: int = 1, private_bytes: int = 0) -> str:
    """The CPU entry ``<name>__cpu(grid, block, shared_mem, *args)`` of a translated numba.cuda
    kernel (without shared arrays: ``shared_mem`` is not read).

    Runs the grid's threads (those its hoisted guard lets through: ``bounds[axis]``, limits
    from cuda_guard.hoist_guard) as in ``cpu_entry_source``: rows in parallel when there are
    ``min_rows`` of them, else x in parallel row by row. ``about`` becomes the docstring,
    which the cache key hashes. ``private``: the parameters ``body_private`` adds into, each
    given a copy per each of ``chunks`` chunks of threads while they fit in ``private_bytes``.
    """
    args = ", ".join(f"a_{p}" for p in params)
    tail = f", {args}" if args else ""
    lines = [f"def {name}__cpu(grid, block, shared_mem{tail}):", f'    """{about}"""']
    first = []  # per axis: where its loop starts; "" for 0, where prange's index is unsigned (no wraparound checks)
    for d in range(3):
        lines.append(f"    n{d} = grid[{d}] * block[{d}]")
        lows = []
        for kind, value in bounds[d]:
            if kind == "count":  # a collapsed grid-stride loop: every index below the count, once
                lines.append(f"    n{d} = {value}")
            elif kind == "upper":
                lines.append(f"    n{d} = min(n{d}, {value})")
            else:
                lows.append(value)
        first.append(f"lo{d}" if lows else "")
        if lows:
            # a literal start reaches the loop as a constant: LLVM then drops the wraparound
            # checks of u[i - 1] (measured: a start passed as a variable made a stencil 1.5x slower)
            start = str(max(0, *map(int, lows))) if all(v.lstrip("-").isdigit() for v in lows) else f"max(0, {', '.join(lows)})"
            lines += [f"    lo{d} = {start}", f"    n{d} = max(n{d} - lo{d}, 0)"]
        elif bounds[d]:
            lines.append(f"    n{d} = max(n{d}, 0)")  # rows = n1 * n2 of two negatives is not empty
    x, y, z = (f"{lo} + " if lo else "" for lo in first)
    if private:  # arrays only added into atomically: a zeroed copy per chunk of threads (cuda_private.py)
        copies = " + ".join(f"a_{p}.nbytes" for p in private)
        ptail = "".join(f", _kr_mine_{p}" if p in private else f", a_{p}" for p in params)
        lines += [
            f"    chunks = min({chunks}, n0 * n1 * n2)",
            f"    if chunks > 1 and ({copies}) * chunks <= {private_bytes}:",
            *[f"        _kr_v_{p} = _kr_np.zeros((chunks,) + a_{p}.shape, a_{p}.dtype)" for p in private],
            "        per = (n0 * n1 * n2 + chunks - 1) // chunks",
            "        for c in prange(chunks):",
            *[f"            _kr_mine_{p} = _kr_v_{p}[c]" for p in private],
            "            for t in range(c * per, min(n0 * n1 * n2, (c + 1) * per)):",
            "                i, j, k = t, 0, 0",
            "                if n1 * n2 > 1:  # no division per thread in 1-D",
            "                    i, j, k = t % n0, (t // n0) % n1, t // (n0 * n1)",
            f"                body_private({x}i, {y}j, {z}k, grid, block{ptail})",
            *[f"        for c in range(chunks):\n            _kr_add_copy(a_{p}, _kr_v_{p}[c])" for p in private],
            "        return",
        ]
    call = f"body({x}i, {y}j, {z}k, grid, block{tail})"
    lines += [
        "    rows = n1 * n2",
        f"    if rows >= {min_rows}:",
        "        for r in prange(rows):",
        "            k = r // n1",
        "            j = r - k * n1",
        "            for i in range(n0):",
        f"                {call}",
        "    else:",
        "        for k in range(n2):",
        "            for j in range(n1):",
        "                for i in prange(n0):",
        f"                    {call}",
    ]
    return "\n".join(lines) + "\n"


def thread_prologue(used: set) -> str:
    """Assignments of the thread quantities a translated function reads (``used``), from its
    global index ``_kr_g<d>`` and the launch's ``_kr_grid``/``_kr_block``."""
    lines = []
    for d in range(3):
        if f"_kr_n{d}" in used:
            lines.append(f"_kr_n{d} = _kr_grid[{d}] * _kr_block[{d}]")
        if f"_kr_bd{d}" in used:
            lines.append(f"_kr_bd{d} = _kr_block[{d}]")
        if f"_kr_gd{d}" in used:
            lines.append(f"_kr_gd{d} = _kr_grid[{d}]")
        if f"_kr_b{d}" in used:
            lines.append(f"_kr_b{d} = _kr_g{d} // _kr_block[{d}]")
        if used & {f"_kr_t{d}", "_kr_lane"}:
            lines.append(f"_kr_t{d} = _kr_g{d} % _kr_block[{d}]")
    if "_kr_lane" in used:
        lines.append("_kr_lane = (_kr_t0 + _kr_block[0] * (_kr_t1 + _kr_block[1] * _kr_t2)) % 32")
    return "\n".join(lines)


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
