"""A kernel with a grid-wide barrier on the CPU: phases between barriers, blocks in parallel.

``cuda.cg.this_grid().sync()`` orders every thread of the grid. The kernel's body is cut at
each such barrier into phases; the grid program runs each phase as a ``prange`` over the
blocks, so the parallel loop's end is the barrier. Loops and ``if`` around a grid barrier
run once for the grid and may read only arguments, constants, the launch's sizes and the
targets of enclosing such loops (which each phase receives). Inside a phase a block runs
its own program (cuda_fission.py: block barriers, collectives). What lives across a grid
barrier lives for the whole launch: per-thread arrays over every thread of the grid,
shared arrays one per block, the returned threads' flags; a block-wide variable set in one
phase cannot be read in another (refused).
"""

from __future__ import annotations

import ast

from .fission_ast import DONE, is_split, marker, names, stored_names

__all__ = ["grid_source", "has_grid_split"]

_GRID_UNIFORM = {f"_kr_{p}{d}" for p in ("bd", "gd", "n") for d in range(3)} | {"_kr_grid", "_kr_block", "_kr_nt"}


def _is_grid_split(stmt) -> bool:
    return is_split(stmt) and stmt.value.args[0].value == "grid"


def has_grid_split(stmt) -> bool:
    return any(_is_grid_split(s) for s in ast.walk(stmt) if isinstance(s, ast.stmt))


def grid_source(program, name: str, storage: dict | None) -> str:
    """Two functions: the grid program ``name(_kr_grid, _kr_block, _kr_shared_mem, *params)`` and the phase
    function it calls for every block (``name`` + ``_phase``)."""
    loop_vars = sorted(_grid_vars(program))
    stored = sorted(getattr(program, "stored", ()))  # not known yet while the runs are laid out
    shared = [v for v, _, _ in program.shared]
    arrays = [f"_kr_gs_{v}" for v in stored] + [f"_kr_gsh_{v}" for v in shared] + ["_kr_gs_done"]
    args = ", ".join(["_kr_grid", "_kr_block", *program.params, *loop_vars, *arrays])
    phases: list[tuple[list, bool]] = []
    lines: list[str] = []
    _grid_emit(program, program.body, 1, lines, phases, set(loop_vars), f"{name}_phase({{k}}, _kr_bid, {args})")
    phase_lines: list[list[str]] = []
    for stmts, in_loop in phases:
        out: list[str] = []
        program._emit(stmts, 2, [], in_loop, out)
        phase_lines.append(out)
    if storage is None:
        return ""
    _check_block_vars(program, phases)
    phase = [f"def {name}_phase(_kr_phase, _kr_bid, {args}):", *_sizes(),
             "    _kr_b0 = _kr_bid % _kr_gd0", "    _kr_b1 = (_kr_bid // _kr_gd0) % _kr_gd1",
             "    _kr_b2 = _kr_bid // (_kr_gd0 * _kr_gd1)", "    _kr_off = _kr_bid * _kr_nt",
             f"    {DONE} = _kr_gs_done[_kr_off:_kr_off + _kr_nt]"]
    phase += [f"    _kr_s_{v} = _kr_gs_{v}[_kr_off:_kr_off + _kr_nt]" for v in sorted(program.stored)]
    phase += [f"    {v} = _kr_gsh_{v}[_kr_bid]" for v in shared]
    for k, body in enumerate(phase_lines):
        phase += [f"    {'if' if k == 0 else 'elif'} _kr_phase == {k}:", "        pass", *body]
    phase.append("    return None")
    grid = [f"def {name}(_kr_grid, _kr_block, _kr_shared_mem{''.join(', ' + p for p in program.params)}):", *_sizes(),
            "    _kr_nb = _kr_gd0 * _kr_gd1 * _kr_gd2", "    _kr_all = _kr_nb * _kr_nt",
            "    _kr_gs_done = _kr_np.zeros(_kr_all, _kr_np.bool_)"]
    grid += [f"    {v} = 0" for v in loop_vars]  # every phase receives them, even before their loop
    for v in sorted(program.stored):
        kind, *rest = storage[v]
        grid.append(f"    _kr_gs_{v} = _kr_np.empty(_kr_all, _kr_np.{rest[0]})" if kind == "scalar" else
                    f"    _kr_gs_{v} = _kr_np.zeros((_kr_all, {rest[0]}), {rest[1]})")
    for v, shape, dtype in program.shared:
        dims = shape.elts if isinstance(shape, ast.Tuple) else [shape]
        grid.append(f"    _kr_gsh_{v} = _kr_np.zeros((_kr_nb, {', '.join(ast.unparse(d) for d in dims)}), "
                    f"{ast.unparse(dtype)})")
    grid += lines + ["    return None"]
    return "\n".join(phase) + "\n\n\n" + "\n".join(grid) + "\n"


def _sizes() -> list[str]:
    lines = [f"    _kr_bd{d} = _kr_block[{d}]" for d in range(3)] + [f"    _kr_gd{d} = _kr_grid[{d}]" for d in range(3)]
    return lines + ["    _kr_nt = _kr_bd0 * _kr_bd1 * _kr_bd2"] + [f"    _kr_n{d} = _kr_gd{d} * _kr_bd{d}" for d in range(3)]


def _grid_vars(program) -> set[str]:
    """Locals the grid program needs: loop targets around grid barriers and what their
    bounds and conditions read, each assigned only at grid level from grid-wide values."""
    module = ast.Module(body=program.body, type_ignores=[])
    controls = [s for s in ast.walk(module) if isinstance(s, ast.For | ast.If) and has_grid_split(s)]
    top = _grid_level_statements(program.body)
    params = set(program.params)
    wanted = set().union(*[names(c.iter if isinstance(c, ast.For) else c.test) for c in controls]) & program.locals - params
    found = set().union(*[stored_names(c.target) for c in controls if isinstance(c, ast.For)])
    while wanted - found:
        found |= wanted
        for s in top:
            if stored_names(s) & found:
                wanted |= names(s) & program.locals - params
    return found


def _grid_level_statements(stmts) -> list:
    out = []
    for s in stmts:
        if isinstance(s, ast.For | ast.If) and has_grid_split(s):
            out += _grid_level_statements(s.body) + _grid_level_statements(s.orelse)
        elif isinstance(s, ast.Assign | ast.AugAssign):
            out.append(s)
    return out


def _grid_emit(program, stmts, indent, lines, phases, grid_vars, call):
    pad = "    " * indent
    phase: list = []

    def close():
        if phase:
            phases.append((list(phase), indent > 1))
            lines.extend([f"{pad}for _kr_bid in prange(_kr_nb):", f"{pad}    {call.format(k=len(phases) - 1)}"])
            phase.clear()

    for s in stmts:
        if _is_grid_split(s):
            close()
            continue
        if stored_names(s) and stored_names(s) <= grid_vars and isinstance(s, ast.Assign | ast.AugAssign):
            _check_uniform(program, s, grid_vars, "a value the grid program needs")
            close()
            lines.append(pad + ast.unparse(s))
            continue
        if not has_grid_split(s):
            phase.append(s)
            continue
        close()
        if not isinstance(s, ast.For | ast.If) or (isinstance(s, ast.For) and s.orelse):
            program.fail(f"a grid-wide barrier inside a '{type(s).__name__.lower()}' statement",
                         "only for loops and if statements may hold one")
        _check_uniform(program, s.iter if isinstance(s, ast.For) else s.test, grid_vars,
                       "a grid-wide barrier under a condition or loop")
        if isinstance(s, ast.For):
            lines.append(f"{pad}for {ast.unparse(s.target)} in {ast.unparse(s.iter)}:")
        else:
            lines.append(f"{pad}if {ast.unparse(s.test)}:")
        lines.append(pad + "    pass")
        _grid_emit(program, s.body, indent + 1, lines, phases, grid_vars, call)
        if isinstance(s, ast.If) and s.orelse:
            lines += [pad + "else:", pad + "    pass"]
            _grid_emit(program, s.orelse, indent + 1, lines, phases, grid_vars, call)
    close()


def _check_uniform(program, node, grid_vars, what: str) -> None:
    """Refuse ``node`` unless it reads only arguments, constants, launch sizes, grid values."""
    allowed = set(program.params) | _GRID_UNIFORM | grid_vars
    read = names(node) - stored_names(node) if isinstance(node, ast.stmt) else names(node)
    local = {n for n in read if n in program.locals or n.startswith("_kr_")} - allowed
    if local or any((marker(n) or "").startswith("_kr_") for n in ast.walk(node)):
        program.fail(f"{what} that is not the same for the whole grid",
                     f"it reads {', '.join(sorted(local)) or 'a per-thread value'}; "
                     "use only arguments, constants and the launch's sizes there")


def _check_block_vars(program, phases) -> None:
    """A block-wide variable lives in one phase: refuse one read in a phase that never sets it."""
    loop_targets = _grid_vars(program)
    shared = {v for v, _, _ in program.shared}
    for stmts, _ in phases:
        module = ast.Module(body=stmts, type_ignores=[])
        used = names(module) & program.block_vars - loop_targets - shared
        for v in used - stored_names(module):
            program.fail(f"the block-wide variable {v!r} across a grid-wide barrier",
                         "set it again after the barrier")
