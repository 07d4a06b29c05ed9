"""The Chebyshev eigen route under other block widths, degree caps and tolerances, one process (GPU A/B).

    python bench/chebyshev_sweep.py [--budget SECONDS] [--out FILE] [--backend cuda|auto|cpu] [--quick]

At 655,362 vertices, k = 100, the route's old default (block 120, degree <= 60, tol 1e-10) took
79 iterations and 8.4-9.1 s on an H200/H100, 5.5-6.1 s of it in the filter, against a target of
4 s with relative residuals <= 1e-10 (issue 29). This sweep chose today's default on an H200
(block 1.5 k, degree <= 200: 9 iterations, 3.8-3.9 s, residual 9.7e-11;
bench/results/2026-11-28-nvidia-h200-chebyshev-sweep*.json). The levers are the block (a wider one
widens the gap λ_k / λ_b each filter damps against, for more columns per product), the
degree cap (fewer Rayleigh–Ritz steps for more products) and the tolerance (the residual
target). Each setting runs once on the same matrix, in the order given, after a warm-up
solve; each row records the wall time, iterations, SpMM columns, the final block, the
phases and the largest relative residual ``‖L v − λ M v‖ / ‖λ M v‖`` (eigen_report), and
the eigenvalues' largest distance from the default setting's. A setting that would run
past ``--budget`` is skipped and named. ``--quick``: ico3/ico4 (a CPU or simulator dry run).
Run by ``tools/gpu_check.sh sweep``.
"""

from __future__ import annotations

import argparse
import json
import time

import numpy as np

# (level, k): [(label, block, degree cap, tol[, order])]; block None is the route's default (k + max(8, k / 2)),
# cap None its DEGREE_RANGE top (200), no order its default ("rcm"). "b1.2k-cap60" is the default
# before 2026-11-28 (then allowed to grow, and in L's order).
FULL = {
    (7, 50): [("default", None, None, 1e-10), ("natural-order", None, None, 1e-10, None), ("b100", 100, None, 1e-10),
              ("cap300", None, 300, 1e-10), ("tol3e-11", None, None, 3e-11)],
    (8, 100): [("default", None, None, 1e-10), ("natural-order", None, None, 1e-10, None),
               ("b1.2k-cap60", 120, 60, 1e-10, None), ("b120", 120, None, 1e-10),
               ("b175", 175, None, 1e-10), ("cap300", None, 300, 1e-10), ("tol3e-11", None, None, 3e-11)],
}
QUICK = {(3, 10): [("default", None, None, 1e-10), ("natural-order", None, None, 1e-10, None),
                   ("cap120", None, 120, 1e-10)],
         (4, 20): [("default", None, None, 1e-10), ("b40", 40, None, 1e-10), ("tol3e-11", None, None, 3e-11)]}


def run_setting(L, m, k, be, block, cap, tol, *order) -> dict:
    """One solve; ``order`` (optional: None or "rcm") overrides the route's default row order."""
    from kernelrt.kernels.laplacian import chebyshev
    from kernelrt.kernels.laplacian.eigen_report import report

    saved = chebyshev.DEGREE_RANGE
    chebyshev.DEGREE_RANGE = (saved[0], cap or saved[1])  # the module constant the degree rule reads
    try:
        t0 = time.perf_counter()
        evals, evecs, info = chebyshev.chebyshev_eigenpairs(L, m, k, backend=be, block=block, tol=tol,
                                                            **({"order": order[0]} if order else {}))
        seconds = time.perf_counter() - t0
    finally:
        chebyshev.DEGREE_RANGE = saved
    residuals, orth = report(L, m, evals, evecs)
    return {"seconds": seconds, "iterations": info["iterations"], "products": info["products"],
            "block": info["block"], "degree_max": info["degree"], "qr": info["qr"], "phases": info["phases"],
            "max_residual": float(residuals.max()), "orthogonality": orth, "evals": evals.tolist()}


def main() -> None:
    import kernelrt
    from kernelrt.kernels.laplacian import MeshTopology, icosphere

    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--budget", type=float, default=150.0, help="seconds for all settings (default 150)")
    p.add_argument("--out", default=None, help="JSON file to write")
    p.add_argument("--backend", choices=["cuda", "auto", "cpu"], default="cuda")
    p.add_argument("--quick", action="store_true", help="ico3/ico4: a dry run on a CPU or the simulator")
    p.add_argument("--settings", default=None,
                   help="JSON list of [level, k, label, block|null, degree cap|null, tol(, order)] instead of the built-in table")
    args = p.parse_args()
    table = QUICK if args.quick else FULL
    if args.settings:
        table = {}
        for level, k, label, *setting in json.loads(args.settings):
            table.setdefault((level, k), []).append((label, *setting))
    be = kernelrt.get_backend(args.backend)
    report = {"device": str(be), "backend": be.name, "budget_s": args.budget, "cases": {}, "skipped": []}
    t_start, last = time.perf_counter(), {}
    for (level, k), settings in table.items():
        V, F = icosphere(level)
        L, m = MeshTopology(F, len(V)).assemble(V, "cpu")
        if not report["cases"]:  # load the kernels (and CuPy's) outside the timed solves
            run_setting(*_small(), 4, be, None, None, 1e-10)
        rows, ref = {}, None
        for label, block, cap, tol, *order in settings:
            name = f"ico{level}-k{k} {label}"
            estimate = last.get((level, k), 1.0)
            if time.perf_counter() - t_start + estimate > args.budget:
                report["skipped"].append(name)
                print(f"{name}: skipped (budget)", flush=True)
                continue
            try:
                row = run_setting(L, m, k, be, block, cap, tol, *order)
            except Exception as error:  # noqa: BLE001 (a setting that fails is a result too)
                rows[label] = {"error": f"{type(error).__name__}: {error}"}
                print(f"{name}: {rows[label]['error']}", flush=True)
                continue
            last[(level, k)] = max(estimate, row["seconds"])
            ref = row["evals"] if ref is None else ref
            row["evals_vs_default"] = float(np.max(np.abs(np.asarray(row["evals"]) - np.asarray(ref))))
            row.update(block_asked=block, degree_cap=cap or _default_cap(), tol=tol,
                       order=order[0] if order else _default("order"))
            rows[label] = row
            ph = " ".join(f"{p} {s:.2f}" for p, s in row["phases"].items())
            print(f"{name}: {row['seconds']:.3f} s, {row['iterations']} it, {row['products']} cols, block "
                  f"{row['block']}, res {row['max_residual']:.1e}, Δλ {row['evals_vs_default']:.1e} | {ph}", flush=True)
        report["cases"][f"ico{level}-k{k}"] = {"vertices": len(V), "settings": rows}
    if args.out:
        with open(args.out, "w") as fh:
            json.dump(report, fh, indent=1)


def _default_cap() -> int:
    from kernelrt.kernels.laplacian import chebyshev

    return chebyshev.DEGREE_RANGE[1]


def _default(name: str):
    """The route's default for keyword ``name``."""
    import inspect

    from kernelrt.kernels.laplacian import chebyshev

    return inspect.signature(chebyshev.chebyshev_eigenpairs).parameters[name].default


def _small():
    from kernelrt.kernels.laplacian import MeshTopology, icosphere

    V, F = icosphere(2)
    return MeshTopology(F, len(V)).assemble(V, "cpu")


if __name__ == "__main__":
    main()
