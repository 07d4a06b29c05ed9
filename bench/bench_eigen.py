"""Eigenpair benchmarks: ``kernelrt.kernels.laplacian.eigenpairs`` against SpectralBrain 0.1.0.

The k smallest pairs of ``L v = λ M v`` (cotangent L, lumped m, from ``MeshTopology.assemble``),
every route of a case in one group so that ratios come from the same run. Each case is a mesh
and a k; the meshes:

* ``ico6``, ``ico7`` (40,962 and 163,842 vertices), k in (50, 100), every route:
  SpectralBrain's ``NumpyBackend.eigsh(L, M, k)`` (ARPACK shift-invert, σ = -0.01, SuperLU;
  peer), kernelrt ``method="cholesky"`` (kernelrt; its default factor), the same with ``factor="cholespy"``
  (variant "cholesky-cholespy") and with
  ``factor="superlu"`` (the fallback; role "variant"), ARPACK's same call with ``OPinv`` = a
  solve of L + 0.01 M by cholespy and by kernelrt's supernodal factor (ARPACK over the same
  factor; peers "arpack+cholespy" and "arpack+supernodal") and
  ``method="chebyshev"`` (variant; on a CPU backend on the first mesh only, being the GPU
  route; everywhere on a CUDA backend).
* ``ico8`` (655,362 vertices), k in (50, 100); ``noisy7`` (``noisy_icosphere(7, 0.1)``: no
  multiplets), k = 50; ``bunny`` (the Stanford Bunny shipped with pymeshfix, 50,000 vertices,
  a real scan with boundary and non-manifold edges), k in (50, 100): SpectralBrain, kernelrt
  and ARPACK over the same factor (plus Chebyshev on a CUDA backend). ``ico8`` is off with
  ``KERNELRT_BENCH_EIGEN_L8=0`` (SpectralBrain needs minutes and ~4 GB there); ``bunny`` is
  skipped without pymeshfix. ``KERNELRT_BENCH_EIGEN_MESHES=ico8`` (a comma-separated list
  of meshes, and ``cohort``) runs those cases only, e.g. the long ones in a run of their own.
* ``eigen-cohort-ico6x10``: 10 subjects ``noisy_icosphere(6, 0.1, seed=s)`` on one
  ``MeshTopology``, k = 50: SpectralBrain per subject vs ``topo.eigenpairs``.

Quick (``--quick``, ``KERNELRT_BENCH_QUICK=1``): ico4 and ico5, k = 20, a 3-subject cohort at
level 4 (k = 50). One round per entry (solves take seconds to minutes). Every entry times
the whole call, end to end. Its extra_info: ``peak_bytes`` (the solve's peak RSS above its
inputs, in a fresh process; ``KERNELRT_BENCH_EIGEN_RSS=0`` skips it, halving the run),
``eigen_max_rel_diff`` (max over λ_ref > 1e-10 of |λ - λ_ref| / λ_ref against the
SpectralBrain run of the same case), ``max_residual``, ``m_orthonormality``, ``products``;
for kernelrt's Cholesky route also ``phases`` (seconds: factor, solve, orthogonalise,
rayleigh_ritz, report) and its floor: ``floor_s`` = factor + solves, the time that no Krylov
method over this factor avoids at this column count, and ``x_floor`` = seconds / floor_s.
"variant" entries are plotted but left out of the peer/kernelrt ratios (one kernelrt per group).

Run: ``kernelrt bench eigen [--quick] [--plot]`` (or ``python -m pytest bench/bench_eigen.py
--benchmark-enable``); ``python bench/bench_eigen.py [--quick]`` prints ``run()``'s dict as
JSON. Never asserts on time.
"""

from __future__ import annotations

import functools
import importlib.util
import json
import os
import sys
import time

import numpy as np
import pytest

QUICK = os.environ.get("KERNELRT_BENCH_QUICK", "") not in ("", "0")
LEVEL8 = os.environ.get("KERNELRT_BENCH_EIGEN_L8", "1") not in ("", "0")
RSS = os.environ.get("KERNELRT_BENCH_EIGEN_RSS", "1") not in ("", "0")
SIGMA = -0.01  # SpectralBrain's shift, also for the arpack+cholespy reference
COHORT_K = 50
ROUTES = ("spectralbrain", "cholesky", "cholesky-cholespy", "cholesky-superlu", "arpack+cholespy",
          "arpack+supernodal", "chebyshev")
# the peer first in every case: its eigenvalues are the reference of the others
REFERENCE: dict = {}


def _have(module: str) -> bool:
    try:
        return importlib.util.find_spec(module) is not None
    except ImportError:  # a parent package that fails to import
        return False


MAIN_ROUTES = ("spectralbrain", "cholesky", "cholesky-cholespy", "arpack+cholespy", "arpack+supernodal", "chebyshev")


def _all_meshes(quick: bool) -> list[tuple[str, tuple[int, ...], tuple[str, ...]]]:
    # the first mesh is the one Chebyshev runs on, on a CPU
    if quick:
        return [("ico4", (20,), ROUTES), ("ico5", (20,), ROUTES)]
    return [("ico6", (50, 100), ROUTES), ("ico7", (50, 100), ROUTES), ("noisy7", (50,), MAIN_ROUTES),
            ("bunny", (50, 100), MAIN_ROUTES), ("ico8", (50, 100), MAIN_ROUTES)]


def _only(quick: bool) -> set[str] | None:
    """The meshes (and "cohort") named by KERNELRT_BENCH_EIGEN_MESHES, or None for all."""
    names = {x.strip() for x in os.environ.get("KERNELRT_BENCH_EIGEN_MESHES", "").split(",") if x.strip()}
    known = [m for m, _, _ in _all_meshes(quick)] + ["cohort"]
    unknown = names - set(known)
    if unknown:
        raise ValueError(f"KERNELRT_BENCH_EIGEN_MESHES must name some of {', '.join(known)}, comma-separated "
                         f"(got {', '.join(sorted(unknown))})")
    return names or None


def meshes_and_ks(quick: bool = QUICK) -> list[tuple[str, tuple[int, ...], tuple[str, ...]]]:
    """(mesh, ks, routes) in run order: every mesh, or those KERNELRT_BENCH_EIGEN_MESHES names."""
    only = _only(quick)
    if only is not None:
        return [case for case in _all_meshes(quick) if case[0] in only]
    return [case for case in _all_meshes(quick) if case[0] != "ico8" or LEVEL8]


def cases(quick: bool = QUICK) -> list[tuple[str, int, str]]:
    """(mesh, k, route) in run order: by mesh, then k, the peer first."""
    return [(mesh, k, r) for mesh, ks, routes in meshes_and_ks(quick) for k in ks for r in routes]


def label(route: str, backend_name: str = "cpu") -> tuple[str, str | None]:
    """(role, peer name) of a route."""
    return {"spectralbrain": ("peer", "spectralbrain 0.1.0 eigsh (ARPACK + SuperLU)"),
            "cholesky": ("kernelrt", None),
            "cholesky-cholespy": ("variant", "kernelrt cholesky (cholespy factor)"),
            "cholesky-superlu": ("variant", "kernelrt cholesky (superlu fallback)"),
            "arpack+cholespy": ("peer", "arpack+cholespy"),
            "arpack+supernodal": ("peer", "arpack+supernodal (ARPACK over the supernodal factor)"),
            "chebyshev": ("variant", f"kernelrt chebyshev ({backend_name})")}[route]


def unavailable(route: str, mesh: str, backend_name: str, quick: bool = QUICK) -> str | None:
    """Why a route does not run in this case here, or None."""
    needs = {"spectralbrain": "spectralbrain", "arpack+cholespy": "cholespy", "cholesky-cholespy": "cholespy",
             "arpack+supernodal": "pymetis", "chebyshev": "kernelrt.kernels.laplacian.chebyshev"}
    if route in needs and not _have(needs[route]):
        return f"{needs[route]} is not installed"
    if mesh == "bunny" and _bunny_path() is None:
        return "the Stanford Bunny comes with pymeshfix, which is not installed"
    if route == "chebyshev" and backend_name != "cuda" and mesh != _all_meshes(quick)[0][0]:
        return "chebyshev on the CPU backend runs on the first mesh only (it is the GPU route)"
    return None


def _bunny_path():
    from pathlib import Path

    if not _have("pymeshfix"):
        return None
    import pymeshfix  # its examples folder, by path: importing pymeshfix.examples imports pyvista

    path = Path(pymeshfix.__file__).parent / "examples" / "StanfordBunny.ply"
    return path if path.exists() else None


@functools.cache
def inputs(mesh: str):
    """(L, m) of a bench mesh, assembled by kernelrt on the CPU (the same for every route)."""
    from kernelrt.kernels.laplacian import MeshTopology, icosphere, noisy_icosphere, read_mesh

    if mesh == "bunny":
        V, F = read_mesh(_bunny_path())
    elif mesh.startswith("noisy"):
        V, F = noisy_icosphere(int(mesh[5:]), 0.1)
    else:
        V, F = icosphere(int(mesh[3:]))
    return MeshTopology(F, len(V)).assemble(V, "cpu")


def _peer_eigsh(L, m, k):
    from scipy.sparse import diags
    from spectralbrain.core.backends import NumpyBackend

    return NumpyBackend.eigsh(L, diags(m, format="csc"), k=k)  # sorts ascending, clips at 0


def _arpack_over(library, L, m, k):
    """ARPACK's shift-invert with (L - σM)⁻¹ from ``library`` ("cholespy" or kernelrt's "supernodal")."""
    import scipy.sparse as sp
    from scipy.sparse.linalg import LinearOperator, eigsh

    from kernelrt.kernels.laplacian.factor import ShiftedFactor, ShiftPattern, with_full_diagonal

    n = L.shape[0]
    Lf = with_full_diagonal(L)
    pattern = ShiftPattern(Lf)
    fac = ShiftedFactor(pattern, pattern.shifted_values(Lf, m, SIGMA), library)  # SPD for σ < 0

    def solve(b):
        return fac.solve(np.reshape(b, n))

    # ARPACK's call as SpectralBrain makes it (tol = 0, its own v0), only (L - σM)⁻¹ differs
    w, v = eigsh(sp.csc_matrix(L), k=k, M=sp.diags(m, format="csc"), sigma=SIGMA, which="LM", tol=0.0,
                 OPinv=LinearOperator((n, n), matvec=solve, dtype=np.float64))
    order = np.argsort(w)
    return np.clip(w[order], 0.0, None), v[:, order]


def solve(route: str, L, m, k: int, backend="cpu"):
    """Run one route: an ``Eigenpairs`` for kernelrt's routes, ``(evals, evecs)`` for the peers."""
    from kernelrt.kernels.laplacian import eigenpairs

    if route == "spectralbrain":
        return _peer_eigsh(L, m, k)
    if route.startswith("arpack+"):
        return _arpack_over(route.split("+")[1], L, m, k)
    if route == "chebyshev":
        return eigenpairs(L, m, k, backend=backend, method="chebyshev")
    return eigenpairs(L, m, k, backend="cpu", method="cholesky",
                      factor=route.split("-")[1] if "-" in route else "auto")


@functools.cache
def warm(route: str, backend_name: str = "cpu") -> None:
    """A tiny solve first: imports and kernel compilation stay out of the timed one."""
    solve(route, *inputs("ico2"), 10, backend_name)


def metrics(L, m, result, ref=None) -> dict:
    """Residual, M-orthonormality, products and the eigenvalue difference to ``ref``."""
    evals, evecs = result
    out = {"products": getattr(result, "products", None)}
    if hasattr(result, "route"):
        out.update(route=result.route, solve_s=result.seconds, reported_max_residual=float(np.max(result.residuals)))
    phases = getattr(result, "phases", None)
    if phases and "factor" in phases:
        out["phases"] = dict(phases)
        out["floor_s"] = phases["factor"] + phases["solve"]
        out["floor"] = "factor + solves (no Krylov method over this factor avoids them at this column count)"
        out["x_floor"] = result.seconds / out["floor_s"]
    from kernelrt.kernels.laplacian.eigen_report import report

    # the peers' pairs measured as kernelrt measures its own
    residuals, out["m_orthonormality"] = report(L, m, evals, evecs)
    out["max_residual"] = float(residuals.max())
    if ref is not None:
        keep = ref > 1e-10
        out["eigen_max_rel_diff"] = float(np.max(np.abs(evals[keep] - ref[keep]) / ref[keep]))
    return out


def blas_threads() -> str | None:
    """BLAS pools and their thread counts: the Lanczos GEMMs are sensitive to them on small machines."""
    try:
        from threadpoolctl import threadpool_info
    except ImportError:
        return None
    return ", ".join(f"{p['internal_api']}:{p['num_threads']}" for p in threadpool_info())


def _child_peak(mesh: str, k: int, route: str, backend_name: str) -> dict:
    """In a fresh process: the solve's peak RSS above the RSS with its inputs built."""
    from benchlib import peak_rss

    warm(route, backend_name)
    L, m = inputs(mesh)
    return peak_rss(lambda: solve(route, L, m, k, backend_name))


def peak_bytes(mesh: str, k: int, route: str, backend_name: str = "cpu") -> dict:
    from benchlib import fresh_process

    return fresh_process(__file__, mesh, k, route, backend_name)


# -- plain runner ----------------------------------------------------------------------------


def run(quick: bool = QUICK, backend_name: str = "cpu") -> dict:
    """Every case once, every available route; a plain dict for a CLI (no pytest, no RSS)."""
    rows = {}
    for mesh, k, route in cases(quick):
        if unavailable(route, mesh, backend_name, quick):
            continue
        L, m = inputs(mesh)
        warm(route, backend_name)
        t0 = time.perf_counter()
        result = solve(route, L, m, k, backend_name)
        seconds = time.perf_counter() - t0
        if route == "spectralbrain":
            REFERENCE[(mesh, k)] = result[0]
        ref = None if route == "spectralbrain" else REFERENCE.get((mesh, k))
        row = rows.setdefault(f"eigen-k{k}-{mesh}", {"vertices": L.shape[0], "k": k, "routes": {}})
        row["routes"][route] = {"seconds": seconds, **metrics(L, m, result, ref)}
    for row in rows.values():
        ours = row["routes"].get("cholesky", {}).get("seconds")
        row["ratio_vs_cholesky"] = {r: v["seconds"] / ours for r, v in row["routes"].items() if ours and r != "cholesky"}
    return {"backend": backend_name, "cases": rows}


# -- pytest-benchmark suite ------------------------------------------------------------------


@pytest.fixture(scope="module")
def backend():
    import kernelrt

    return kernelrt.get_backend("auto")


@pytest.mark.parametrize("mesh,k,route", [pytest.param(*c, id=f"k{c[1]}-{c[0]}-{c[2]}") for c in cases()])
def test_eigen(benchmark, backend, mesh, k, route):
    from benchlib import tag

    reason = unavailable(route, mesh, backend.name)
    if reason:
        pytest.skip(reason)
    L, m = inputs(mesh)
    warm(route, backend.name)
    role, peer = label(route, backend.name)
    where = {"backend": backend.name, "device": backend.device_name} if route == "chebyshev" else {"backend": "cpu"}
    # figure "eigen-k<k>": one panel per k, time against mesh size (bench_cli.plot_results);
    # icospheres only, the other meshes are their own figure (one point per route)
    figure = f"eigen-k{k}" if mesh.startswith("ico") else f"eigen-{mesh}-k{k}"
    tag(benchmark, f"eigen-k{k}-{mesh}", role, peer=peer, figure=figure, x=L.shape[0],
        x_label="vertices", k=k, mesh=mesh, blas=blas_threads(), timed="end to end", **where)
    out = []
    benchmark.pedantic(lambda: out.append(solve(route, L, m, k, backend)), rounds=1, iterations=1)
    if route == "spectralbrain":
        REFERENCE[(mesh, k)] = out[0][0]
    ref = None if route == "spectralbrain" else REFERENCE.get((mesh, k))
    benchmark.extra_info.update(metrics(L, m, out[0], ref))
    del out[:]  # ico8 eigenvectors are 0.5 GB: free them before the child runs
    if RSS:
        benchmark.extra_info.update(peak_bytes(mesh, k, route, backend.name))


def _cohort(quick: bool = QUICK):
    """One topology and the (L, m) of each subject (assembly is not what is timed here)."""
    from kernelrt.kernels.laplacian import MeshTopology, noisy_icosphere

    level, subjects = (4, 3) if quick else (6, 10)
    meshes = [noisy_icosphere(level, 0.1, seed=s) for s in range(subjects)]
    F = meshes[0][1]
    assert all(np.array_equal(F, f) for _, f in meshes), "subjects must share faces"
    topo = MeshTopology(F, len(meshes[0][0]))
    return topo, [topo.assemble(V, "cpu") for V, _ in meshes], f"eigen-cohort-ico{level}x{subjects}"


def _time_cohort(benchmark, fn, subjects, ref_key):
    per, results = [], []

    def loop():
        for L, m in subjects:
            t0 = time.perf_counter()
            results.append(fn(L, m))
            per.append(time.perf_counter() - t0)

    benchmark.pedantic(loop, rounds=1, iterations=1)
    diffs = []
    for s, ((L, m), r) in enumerate(zip(subjects, results)):
        if ref_key == "store":
            REFERENCE[("cohort", s)] = r[0]
        elif ("cohort", s) in REFERENCE:
            diffs.append(metrics(L, m, r, REFERENCE[("cohort", s)])["eigen_max_rel_diff"])
    benchmark.extra_info.update(subjects=len(subjects), vertices=subjects[0][0].shape[0], k=COHORT_K,
                                per_subject_s=per, per_subject_mean_s=float(np.mean(per)), total_s=float(sum(per)))
    if diffs:
        benchmark.extra_info["eigen_max_rel_diff"] = max(diffs)
    if hasattr(results[0], "route"):
        benchmark.extra_info["route"] = results[0].route


def _cohort_selected() -> None:
    only = _only(QUICK)
    if only is not None and "cohort" not in only:
        pytest.skip("KERNELRT_BENCH_EIGEN_MESHES leaves the cohort out")


def test_cohort_spectralbrain(benchmark):
    from benchlib import tag

    _cohort_selected()
    if not _have("spectralbrain"):
        pytest.skip("spectralbrain is not installed")
    _, subjects, group = _cohort()
    warm("spectralbrain")
    tag(benchmark, group, "peer", peer=label("spectralbrain")[1] + " per subject", blas=blas_threads())
    _time_cohort(benchmark, lambda L, m: _peer_eigsh(L, m, COHORT_K), subjects, "store")


def test_cohort_kernelrt(benchmark):
    from benchlib import tag

    _cohort_selected()
    topo, subjects, group = _cohort()
    warm("cholesky")  # on another mesh: the topology's own pattern work stays in the timed loop
    tag(benchmark, group, "kernelrt", blas=blas_threads())
    _time_cohort(benchmark, lambda L, m: topo.eigenpairs(L, m, COHORT_K, backend="cpu"), subjects, "compare")


if __name__ == "__main__":
    if sys.argv[1:2] == ["--rss"]:  # the child of peak_bytes()
        mesh, k, route, backend_name = sys.argv[2:6]
        print(json.dumps(_child_peak(mesh, int(k), route, backend_name)))
    else:
        print(json.dumps(run(quick="--quick" in sys.argv), indent=2))
