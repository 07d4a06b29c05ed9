"""``eigenpairs`` end to end, as a user calls it, a few times per case (GPU sittings).

    python bench/eigen_e2e.py [--backend auto|cuda|cpu] [--out FILE] [--quick]

The probe's ``eigen`` section times each case once; this repeats them in one process, after a
warm-up solve, so a first call's costs (CuPy's handles, a fresh host page for the N x k result)
show as what they are. Each row: wall seconds of ``eigenpairs(L, m, k, backend=...)`` (host L and
m in, host results out: the route's own checks, the solve, the device report and the download),
its route, phases and largest relative residual. Cases: 163,842 vertices at k = 50 (x3) and
k = 100 (x2), 655,362 vertices at k = 100 (x3); ``--quick``: 642 vertices, k = 10 (a dry run).
Run by ``tools/gpu_check.sh e2e``; the 2026-11-28 H200 figures are in
bench/results/2026-11-28-nvidia-h200-eigen-e2e.json.
"""

from __future__ import annotations

import argparse
import json
import time

CASES = [(7, 50, 3), (7, 100, 2), (8, 100, 3)]  # (icosphere level, k, repeats)
QUICK = [(3, 10, 2)]


def main() -> None:
    import kernelrt
    from kernelrt.kernels.laplacian import MeshTopology, eigenpairs, icosphere

    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--backend", choices=["auto", "cuda", "cpu"], default="auto")
    p.add_argument("--out", default=None, help="JSON file to write")
    p.add_argument("--quick", action="store_true", help="642 vertices, k = 10: a dry run")
    args = p.parse_args()
    be = kernelrt.get_backend(args.backend)
    V, F = icosphere(2)  # load the route's kernels (and CuPy's) outside the timings
    eigenpairs(*MeshTopology(F, len(V)).assemble(V, "cpu"), 4, backend=be, method="chebyshev")
    rows = []
    for level, k, repeats in QUICK if args.quick else CASES:
        V, F = icosphere(level)
        L, m = MeshTopology(F, len(V)).assemble(V, "cpu")
        for _ in range(repeats):
            t0 = time.perf_counter()
            result = eigenpairs(L, m, k, backend=be)
            seconds = time.perf_counter() - t0
            row = {"level": level, "vertices": len(V), "k": k, "seconds": seconds, "route": result.route,
                   "max_residual": float(result.residuals.max()), "products": result.products,
                   "phases": result.phases, "solver_seconds": result.seconds}
            rows.append(row)
            phases = {name: round(s, 3) for name, s in (result.phases or {}).items()}
            print(level, k, result.route, f"{seconds:.3f} s res {row['max_residual']:.1e}", phases, flush=True)
    if args.out:
        with open(args.out, "w") as fh:
            json.dump({"device": str(be), "backend": be.name, "rows": rows}, fh, indent=1)


if __name__ == "__main__":
    main()
