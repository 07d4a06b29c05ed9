"""Barriers on the CPU: a block's threads run as loops split at each barrier (loop fission).

cuda_on_cpu.py rewrites a kernel's CUDA built-ins first; in a kernel that synchronises, it
leaves markers: ``_kr_split(level)`` for ``syncthreads``/``syncwarp`` (level "block" or
"warp"), ``_kr_shared(shape, dtype)`` for ``cuda.shared.array`` and ``_kr_coll_<op>(...)``
for the collectives (``syncthreads_count/and/or``, shuffles, votes, ``match_*``). This
module turns that body into the program of one block:

* statements between barriers run as one loop over the block's threads (a *run*);
* a loop or ``if`` that contains a barrier runs at block level, once; its condition must
  then be the same for every thread (uniform: built from arguments, block indices, block
  variables and constants). A thread-dependent ``if`` becomes a per-thread predicate that
  guards the runs inside it (the threads that skip it skip its barriers, as on a GPU when
  the whole block agrees); a thread-dependent loop around a barrier is refused by name
  (CUDA leaves it undefined);
* a collective's operand is stored for every thread before the split and read after it;
* a thread variable used by more than one run, or inside a block-level loop, lives in a
  per-thread array (its type comes from compiling the flat kernel: cuda_blocks.py);
* ``return`` marks the thread done: later runs skip it;
* shared arrays are allocated once per block.

The block program runs with blocks in parallel (cuda_on_cpu.py's driver). Fission at a
point with no barrier is legal too: CUDA promises no order between threads there.
"""

from __future__ import annotations

import ast
import copy
from dataclasses import dataclass, field

from .fission_ast import (
    DONE,
    SHARED,
    SPLIT,
    Flatten,
    constants_in,
    has_split,
    is_split,
    loose_jumps,
    marker,
    rematerializable,
    names,
    own_exprs,
    replace,
    stored_names,
    top_targets,
    user_name,
    without_returns,
    written_first,
)
from .cuda_guard import thread_ranges
from .fission_grid import grid_source, has_grid_split

__all__ = ["BLOCK_CTX", "BlockProgram", "COLLECTIVES", "THREAD_CTX"]

# collective marker -> (level, computed once per block rather than per thread)
COLLECTIVES = {
    "_kr_coll_count": ("block", True), "_kr_coll_and": ("block", True), "_kr_coll_or": ("block", True),
    "_kr_coll_shfl_idx": ("warp", False), "_kr_coll_shfl_up": ("warp", False),
    "_kr_coll_shfl_down": ("warp", False), "_kr_coll_shfl_xor": ("warp", False),
    "_kr_coll_all": ("warp", False), "_kr_coll_any": ("warp", False), "_kr_coll_eq": ("warp", False),
    "_kr_coll_ballot": ("warp", False), "_kr_coll_match_any": ("warp", False),
    "_kr_coll_match_all": ("warp", False), "_kr_coll_active": ("warp", False),
}
ACTIVE = "_kr_active"  # activemask's operand: whether the thread runs this point (the guards)
BLOCK_CTX = {f"_kr_{p}{d}" for p in ("b", "bd", "gd", "n") for d in range(3)} | {"_kr_grid", "_kr_block", "_kr_nt"}
THREAD_CTX = {f"_kr_{p}{d}" for p in ("t", "g") for d in range(3)} | {"_kr_lane", "_kr_tid"}
_TID = "_kr_tid"


@dataclass
class BlockProgram:
    """The block program of one kernel body; ``fail(what, why)`` raises its refusal."""

    body: list
    params: list
    locals: set
    fail: object
    n_temps: int = 0
    block_vars: set = field(default_factory=set)
    shared: list = field(default_factory=list)  # (name, shape AST, dtype AST)
    predicated: set = field(default_factory=set)  # ids of If nodes run under a predicate
    forced_store: set = field(default_factory=set)

    def __post_init__(self):
        self.body = self._hoist_shared(self._normalize(self.body))
        self.grid_mode = any(has_grid_split(s) for s in self.body)
        if self.grid_mode and any(_dynamic(shape) for _, shape, _ in self.shared):
            self.fail("dynamic shared memory (cuda.shared.array(0, ...)) with a grid-wide barrier",
                      "give the shared array a constant size")
        self._analyse()
        self.remat = rematerializable(self.body, self.thread_vars - self.forced_store, self.params,
                                      THREAD_CTX | BLOCK_CTX, [v for v, _, _ in self.shared])
        self.returns = any(isinstance(n, ast.Return) for s in self.body for n in ast.walk(s))
        assigned = set().union(*(stored_names(s) for s in self.body))  # a parameter a thread reassigns is its own
        self.uniform_params = set(self.params) - assigned
        self.runs: list[list] = []  # filled by source(): each run's statements
        self._loop_depth_runs: list[bool] = []

    # -- normalising: collectives become stored operands, a split, and a read -----------------

    def _normalize(self, stmts):
        out = []
        for s in stmts:
            for name in ("body", "orelse", "finalbody"):
                if isinstance(getattr(s, name, None), list):
                    setattr(s, name, self._normalize(getattr(s, name)))
            for expr in own_exprs(s):
                for node in ast.walk(expr):
                    if marker(node) not in COLLECTIVES:
                        continue
                    if isinstance(s, ast.While | ast.For):
                        self.fail(f"a collective ({node.func.id[len('_kr_coll_'):]}) in a loop's condition",
                                  "write it into a variable before the loop and at its end")
                    op = node.func.id
                    level, once = COLLECTIVES[op]
                    value = node.args[1] if level == "warp" else node.args[0]
                    if any(marker(n) in COLLECTIVES for n in ast.walk(value)):
                        self.fail("a collective inside another's operand", "assign the inner one first")
                    k = self.n_temps
                    self.n_temps += 1
                    temp = f"_kr_c{k}"
                    self.forced_store.add(temp)
                    out.append(ast.Assign(targets=[ast.Name(temp, ast.Store())], value=value, lineno=0))
                    out.append(ast.Expr(ast.Call(ast.Name(SPLIT, ast.Load()), [ast.Constant(level)], [])))
                    store = ast.Name(f"_kr_s_{temp}", ast.Load())
                    if once:  # the same for every thread: computed once, right after the barrier
                        result = f"_kr_r{k}"
                        self.block_vars.add(result)
                        call = ast.Call(ast.Name(op, ast.Load()), [store, ast.Name(DONE, ast.Load())], [])
                        out.append(ast.Assign(targets=[ast.Name(result, ast.Store())], value=call, lineno=0))
                        replacement = ast.Name(result, ast.Load())
                    else:
                        extra = [node.args[0]] + node.args[2:]
                        replacement = ast.Call(ast.Name(op, ast.Load()),
                                               [store, ast.Name(_TID, ast.Load()), ast.Name("_kr_nt", ast.Load()),
                                                ast.Name(DONE, ast.Load())] + extra, [])
                    replace(s, node, replacement)
            out.append(s)
        return out

    def _hoist_shared(self, stmts):
        """``x = _kr_shared(shape, dtype)`` anywhere becomes a per-block allocation."""
        out = []
        for s in stmts:
            if isinstance(s, ast.Assign) and marker(s.value) == SHARED:
                if len(s.targets) != 1 or not isinstance(s.targets[0], ast.Name):
                    self.fail("cuda.shared.array assigned to something other than a name")
                shape, dtype = (constants_in(a, self.body, self.locals) for a in s.value.args[:2])
                self.shared.append((s.targets[0].id, shape, dtype))
                self.block_vars.add(s.targets[0].id)
                continue
            for name in ("body", "orelse", "finalbody"):
                if isinstance(getattr(s, name, None), list):
                    setattr(s, name, self._hoist_shared(getattr(s, name)))
            for node in ast.walk(s):
                if marker(node) == SHARED:
                    self.fail("cuda.shared.array outside a plain assignment (x = cuda.shared.array(...))")
            out.append(s)
        return out

    # -- which variables are the block's (uniform) and which are each thread's -------------------

    def _walk(self, stmts, sites, controls, block_stmts, position="block"):
        """Record assignment sites (var -> positions), block-level controls and statements."""
        for s in stmts:
            split = has_split(s) and position == "block"
            if split and isinstance(s, ast.If | ast.For | ast.While):
                controls.append(s)
                if isinstance(s, ast.For):
                    for name in stored_names(s.target):
                        sites.setdefault(name, set()).add("for")
                self._walk(s.body, sites, controls, block_stmts)
                self._walk(s.orelse, sites, controls, block_stmts)
                continue
            if split and not is_split(s):
                self.fail(f"a barrier inside a '{type(s).__name__.lower()}' statement",
                          "only for, while and if may hold one")
            here = position if not isinstance(s, ast.If | ast.For | ast.While | ast.With | ast.Try) else "thread"
            if here == "block":
                block_stmts.append(s)
            for node in ast.walk(s):
                if isinstance(node, ast.Name) and isinstance(node.ctx, ast.Store):
                    sites.setdefault(node.id, set()).add(here if node in top_targets(s) else "thread")

    def _uniform(self, expr, valid: set) -> bool:
        for node in ast.walk(expr):
            if isinstance(node, ast.Name):
                n = node.id
                if n in THREAD_CTX or n.startswith("_kr_atomic"):
                    return False
                if n in COLLECTIVES and not COLLECTIVES[n][1]:  # a warp collective differs by warp
                    return False
                if n in self.locals and n not in valid and n not in self.params:
                    return False
        return True

    def _analyse(self):
        self.locals = set(self.locals) | {f"_kr_c{k}" for k in range(self.n_temps)}
        while True:
            sites, controls, block_stmts = {}, [], []
            self._walk(self.body, sites, controls, block_stmts)
            required = set(self.block_vars)
            for c in controls:
                if isinstance(c, ast.For):
                    required |= stored_names(c.target) | (names(c.iter) & self.locals)
                elif id(c) not in self.predicated:
                    required |= names(c.test) & self.locals
            required -= set(self.params)
            grown = True
            while grown:  # a block variable's block-level assignments read block variables only
                before = len(required)
                for s in block_stmts:
                    if stored_names(s) & required:
                        required |= (names(s) & self.locals) - set(self.params)
                grown = len(required) != before
            invalid = {v for v in required if not sites.get(v, {"block"}) <= {"block", "for"}}
            changed = True
            while changed:
                changed = False
                for s in block_stmts:
                    if stored_names(s) & (required - invalid) and not self._uniform(s, required - invalid):
                        invalid |= stored_names(s) & required
                        changed = True
            valid = required - invalid
            newly = set()
            for c in controls:
                expr = c.iter if isinstance(c, ast.For) else c.test
                if self._uniform(expr, valid):
                    continue
                if isinstance(c, ast.If):
                    newly.add(id(c))
                    continue
                culprits = sorted((names(expr) & (self.locals | THREAD_CTX)) - valid)
                shown = ", ".join(user_name(n) for n in culprits) or "the thread's position"
                self.fail("a barrier inside a loop whose trip count differs between threads "
                          f"(it depends on {shown})", "CUDA leaves that undefined; loop the same "
                          "number of times in every thread")
            if not newly - self.predicated:
                break
            self.predicated |= newly
        for s in block_stmts:
            if stored_names(s) & valid and stored_names(s) - valid:
                self.fail("one assignment of both a block-wide and a per-thread variable",
                          "assign them separately")
        self.block_vars = valid | self.block_vars
        self.thread_vars = self.locals - self.block_vars - set(self.params)

    # -- the program -------------------------------------------------------------------------

    def source(self, name: str, storage: dict | None = None) -> str:
        """The block function ``name(_kr_lo, _kr_hi, _kr_grid, _kr_block, *params)``: blocks
        ``_kr_lo`` to ``_kr_hi`` (linear indices) in turn, its arrays allocated once for them.

        ``storage``: stored variable -> ("scalar", dtype name) or ("local", shape, dtype
        source); None lays the program out only (``self.stored`` is then known).
        """
        self._storage = storage or {}
        self._layout_only = storage is None
        self._run_refs: list[tuple[set, bool, list]] = []
        self._n_pred = 0
        lines: list[str] = []
        if self.grid_mode:
            text = grid_source(self, name, storage)
        else:
            self._emit(self.body, 2, [], False, lines)
        if storage is None:
            counts: dict[str, int] = {}
            for refs, in_loop, run in self._run_refs:
                for v in refs & self.thread_vars - self.remat.keys():  # a run in a loop carries what it reads first
                    counts[v] = counts.get(v, 0) + (2 if in_loop and not written_first(run, v) else 1)
            self.stored = {v for v, c in counts.items() if c > 1} | self.forced_store | \
                {f"_kr_p{k}" for k in range(self._n_pred)}
            self.thread_vars |= {f"_kr_p{k}" for k in range(self._n_pred)}
            return ""
        if self.grid_mode:
            return text
        head = [f"def {name}(_kr_lo, _kr_hi, _kr_grid, _kr_block, _kr_shared_mem{''.join(', ' + p for p in self.params)}):"]
        head += [f"    _kr_bd{d} = _kr_block[{d}]" for d in range(3)] + [f"    _kr_gd{d} = _kr_grid[{d}]" for d in range(3)]
        head += ["    _kr_nt = _kr_bd0 * _kr_bd1 * _kr_bd2"] + [f"    _kr_n{d} = _kr_gd{d} * _kr_bd{d}" for d in range(3)]
        head += ["    _kr_dyn = _kr_np.zeros(_kr_shared_mem, _kr_np.uint8)"] * any(_dynamic(s) for _, s, _ in self.shared)
        head += [f"    {v} = _kr_dynamic(_kr_dyn, {ast.unparse(dtype)})" if _dynamic(shape) else
                 f"    {v} = _kr_np.zeros({ast.unparse(shape)}, {ast.unparse(dtype)})" for v, shape, dtype in self.shared]
        head += [f"    {DONE} = _kr_np.zeros(_kr_nt, _kr_np.bool_)"]
        for v in sorted(self.stored):
            kind, *rest = storage[v]
            if kind == "scalar":
                head.append(f"    _kr_s_{v} = _kr_np.empty(_kr_nt, _kr_np.{rest[0]})")
            else:
                shape, dtype = rest
                head.append(f"    _kr_s_{v} = _kr_np.zeros((_kr_nt, {shape}), {dtype})")
        head += ["    for _kr_bid in range(_kr_lo, _kr_hi):", "        _kr_b0 = _kr_bid % _kr_gd0",
                 "        _kr_b1 = (_kr_bid // _kr_gd0) % _kr_gd1", "        _kr_b2 = _kr_bid // (_kr_gd0 * _kr_gd1)",
                 f"        {DONE}[:] = False"]  # shared memory keeps the last block's values, as a GPU may
        return "\n".join(head + lines + ["    return None"]) + "\n"

    def _emit(self, stmts, indent, guards, in_loop, lines):
        run: list = []
        pad = "    " * indent
        for s in stmts:
            if is_split(s):
                self._flush(run, indent, guards, in_loop, lines)
                run = []
                continue
            is_control = isinstance(s, ast.If | ast.For | ast.While) and has_split(s)
            at_block = not is_control and stored_names(s) and stored_names(s) <= self.block_vars
            at_block = at_block or isinstance(s, ast.Break | ast.Continue) and in_loop
            if not is_control and not at_block:
                run.append(s)
                continue
            self._flush(run, indent, guards, in_loop, lines)
            run = []
            if at_block:
                if guards and isinstance(s, ast.Break | ast.Continue):
                    self.fail(f"'{ast.unparse(s)}' under a thread-dependent if around a barrier")
                lines.append(pad + ast.unparse(s))
            elif isinstance(s, ast.If) and id(s) in self.predicated:
                p = f"_kr_p{self._n_pred}"
                self._n_pred += 1
                test = ast.Assign(targets=[ast.Name(p, ast.Store())],
                                  value=ast.Call(ast.Name("bool", ast.Load()), [s.test], []), lineno=0)
                self._flush([test], indent, guards, in_loop, lines)
                self._emit(s.body, indent, guards + [p], in_loop, lines)
                self._emit(s.orelse, indent, guards + [f"not {p}"], in_loop, lines)
            else:
                if s.orelse and not isinstance(s, ast.If):
                    self.fail("an else clause on a loop that holds a barrier")
                if isinstance(s, ast.For):
                    lines.append(f"{pad}for {ast.unparse(s.target)} in {ast.unparse(s.iter)}:")
                else:
                    lines.append(f"{pad}{'if' if isinstance(s, ast.If) else 'while'} {ast.unparse(s.test)}:")
                lines.append(pad + "    pass")
                self._emit(s.body, indent + 1, guards, in_loop or not isinstance(s, ast.If), lines)
                if s.orelse:
                    lines.append(pad + "else:")
                    lines.append(pad + "    pass")
                    self._emit(s.orelse, indent + 1, guards, in_loop, lines)
        self._flush(run, indent, guards, in_loop, lines)

    def _flush(self, run, indent, guards, in_loop, lines):
        if not run:
            return
        for s in run:
            for node in loose_jumps(s):
                self.fail(f"'{ast.unparse(node)}' out of a loop that holds a barrier, in thread-dependent code")
        refs = set().union(*(names(s) for s in run)) | set().union(*(names(ast.parse(g)) for g in guards))
        self._run_refs.append((refs, in_loop, run))
        if self._layout_only:
            return
        pad = "    " * indent
        inner = pad + "    " * 3
        stored = refs & self.stored
        remat = [ast.parse(f"{v} = {self.remat[v]}").body[0] for v in sorted(refs & self.remat.keys())]
        active = [s for s in run if isinstance(s, ast.Assign) and marker(s.value) == ACTIVE]
        stmts = [self._local_array_view(copy.deepcopy(s)) for s in run if s not in active]
        loops = self._thread_ranges(remat, stmts) if not active else None
        if loops is not None:
            loops, stmts = loops
        # the block's threads, x fastest as CUDA numbers them, without a division per thread
        ranges = loops or [f"range(_kr_bd{d})" for d in range(3)]
        body = [f"{pad}for _kr_t2 in {ranges[2]}:", f"{pad}    for _kr_t1 in {ranges[1]}:",
                f"{pad}        for _kr_t0 in {ranges[0]}:", f"{inner}_kr_tid = _kr_t0 + _kr_bd0 * (_kr_t1 + _kr_bd1 * _kr_t2)"]
        if self.returns:
            body += [f"{inner}if {DONE}[_kr_tid]:", f"{inner}    continue"]
        body += [f"{inner}_kr_lane = _kr_tid & 31"] + [f"{inner}_kr_g{d} = _kr_b{d} * _kr_bd{d} + _kr_t{d}" for d in range(3)]
        body += [f"{inner}{v} = _kr_s_{v}[_kr_tid]" for v in sorted(stored)]
        body += [inner + ast.unparse(s) for s in remat]
        for s in active:  # stored before the guards: a skipping thread records that it skipped
            body.append(f"{inner}_kr_s_{s.targets[0].id}[_kr_tid] = {' and '.join(guards) or 'True'}")
        if guards:
            body += [f"{inner}if not ({' and '.join(guards)}):", f"{inner}    continue"]
        stmts, _ = without_returns(stmts, False)
        body += [inner + line for s in stmts for line in ast.unparse(s).splitlines()]
        written = set().union(*(stored_names(s) for s in run if s not in active)) & stored
        body += [f"{inner}_kr_s_{v}[_kr_tid] = {v}" for v in sorted(written)
                 if self._storage[v][0] == "scalar"]
        lines.extend(body)

    def _thread_ranges(self, remat, stmts):
        """``(ranges per axis, stmts)`` where the run is ``if <thread index within uniform bounds>:
        ...`` (a tree's ``if t < s``): the loops then run those threads only; else None."""
        if any(stored_names(s) & self.stored for s in stmts[:-1]):
            return None  # a thread outside the range would miss a store of its own
        return thread_ranges(remat, stmts, self.block_vars | BLOCK_CTX | self.uniform_params)

    def _local_array_view(self, s):
        """``x = cuda.local.array(...)`` of a stored array: the thread's slice of its storage."""
        for node in ast.walk(s):
            if isinstance(node, ast.Assign) and len(node.targets) == 1 and isinstance(node.targets[0], ast.Name):
                v = node.targets[0].id
                if v in self.stored and self._storage[v][0] == "local":
                    node.value = ast.parse(f"_kr_s_{v}[_kr_tid]", mode="eval").body
        return s


def _dynamic(shape) -> bool:
    """``cuda.shared.array(0, ...)``: sized by the launch's dynamic shared memory."""
    return isinstance(shape, ast.Constant) and shape.value == 0
