"""Best-of-N CPU timings of the default paths, for a before/after comparison of two checkouts in one sitting.

Prints one JSON object {operation: seconds}. Run it once per checkout, alternating, each with
its own environment and kernel cache, and compare the best of each side (the VM's noise is
larger than most changes, so one pair of runs says little):

    for i in 1 2 3; do
        (cd ../base && ../base-venv/bin/python ../main/bench/cpu_ab.py > /tmp/base$i.json)
        (cd ../main && .venv/bin/python bench/cpu_ab.py > /tmp/new$i.json)
    done

The operations are the ones a change to the kernel library's dispatch could slow: reused
assembly, the vector and 50-column products and 200 heat steps at 163,842 vertices, 20
eigenpairs at 10,242, and compute_sfaps at 50 x 25 (dz 0.1) and 100 x 4 (dz 0.01).
"""

from __future__ import annotations

import json
import time

import numpy as np

from kernelrt.kernels.laplacian import LaplacianOperator, MeshTopology, eigenpairs, icosphere
from kernelrt.kernels.sfap import compute_sfaps
from kernelrt.kernels.sfap.reference import synthetic_motor_unit


def best(fn, n: int) -> float:
    """The least wall time of ``n`` calls after one warm-up call."""
    fn()
    times = []
    for _ in range(n):
        t0 = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t0)
    return min(times)


def main() -> dict:
    out = {}
    V, F = icosphere(7)
    topo = MeshTopology(F, V.shape[0])
    out["assemble_reused_ico7"] = best(lambda: topo.assemble(V, "cpu"), 15)
    L, m = topo.assemble(V, "cpu")
    op = LaplacianOperator(L, m, backend="cpu")
    x = np.random.default_rng(0).standard_normal(V.shape[0])
    X = np.random.default_rng(1).standard_normal((V.shape[0], 50))
    out["spmv_ico7"] = best(lambda: op.matvec(x), 40)
    out["spmm50_ico7"] = best(lambda: op.matvec(X), 15)
    out["heat200_ico7"] = best(lambda: op.heat_steps(x, 1e-7, 200), 5)
    V5, F5 = icosphere(5)
    L5, m5 = MeshTopology(F5, V5.shape[0]).assemble(V5, "cpu")
    out["eigen_ico5_k20"] = best(lambda: eigenpairs(L5, m5, k=20, backend="cpu"), 3)
    for nf, ne, dz, length, name in ((50, 25, 0.1, 120.0, "sfap_50x25_dz0.1"), (100, 4, 0.01, 30.0, "sfap_100x4_dz0.01")):
        case = synthetic_motor_unit(nf, ne, dz, length=length)
        out[name] = best(lambda: compute_sfaps(**case, backend="cpu"), 7)
    return out


if __name__ == "__main__":
    print(json.dumps(main()))
