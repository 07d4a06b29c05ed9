"""GPU probe sections ``laplacian`` and ``eigen``: the cotangent Laplacian's kernels, pipelines and eigensolver.

``laplacian``, per icosphere (ico5, ico7, ico8 on a GPU; tiny on the CPU and the
simulator): the assembly kernel alone (``row_values``) and ``MeshTopology.assemble``
end to end (L1, L2); a cohort in one launch, kernel-only and end to end (L4); SpMV and
SpMM with 50 columns kernel-only and end to end (L5, L6); one heat step kernel-only and
200 steps on device arrays and from the host (L7).

``eigen``: ``eigenpairs(method="chebyshev")`` at ico6/ico7 (k = 50, 100) and ico8
(k = 100), host arrays in and out, with the solver's phase timers when its result
carries them (``phases``); floor from the products and iterations the run made (L8, L9).
On CUDA, the CPU route (what ``eigenpairs`` picks on the CPU backend) on the same matrix up to
ico7, with its time and the largest eigenvalue difference from the GPU route.
"""

from __future__ import annotations

import time

import numpy as np
from gpu_floors import (assembly_e2e_floor, assembly_floor, chebyshev_floor, heat_floor, ico_counts, spmm_floor,
                        spmv_floor)
from gpu_report import error_row, make_row
from gpu_timing import e2e, kernel_only

__all__ = ["LaplacianSetup", "run_laplacian", "run_eigen", "mesh_levels", "eigen_cases"]

SPMM_K = 50
TAU = 1e-7


def mesh_levels(probe) -> list[int]:
    if probe.kind == "simulated":
        return [1]
    if probe.kind == "cpu":
        return [3] if probe.quick else [4, 5]
    return [5, 7] if probe.quick else [5, 7, 8]


def _cohort(probe) -> tuple[int, int]:
    """(level, subjects) of the cohort case."""
    if probe.kind == "simulated":
        return 1, 2
    if probe.kind == "cpu":
        return (3, 2) if probe.quick else (5, 8)
    return (7, 20) if probe.quick else (7, 100)


class LaplacianSetup:
    """One icosphere's topology, L and m, and device inputs with a launcher per kernel (probe, ``--ncu``, variants)."""

    def __init__(self, backend, level: int, subjects: int = 1):
        from kernelrt.kernels.laplacian import LaplacianOperator, MeshTopology, icosphere

        self.be, self.level = backend, level
        V, F = icosphere(level)
        self.V, self.F, self.n = V, F, V.shape[0]
        self.topo = MeshTopology(F, self.n)
        self.L, self.m = self.topo.assemble(V, "cpu")
        self.nnz = self.topo.nnz
        rng = np.random.default_rng(0)
        cohort = V[None] * (1.0 + 0.05 * rng.standard_normal((subjects, 1, 1)))
        self.cohort = np.ascontiguousarray(cohort + 1e-3 * rng.standard_normal(cohort.shape))
        self.subjects = subjects
        self.op = LaplacianOperator(self.L, self.m, backend=backend)
        self.x = backend.to_device(rng.standard_normal(self.n))
        self.y = backend.allocate(self.n, np.float64)
        self.X = backend.to_device(rng.standard_normal((self.n, SPMM_K)))
        self.Y = backend.allocate((self.n, SPMM_K), np.float64)
        self._assembly: dict = {}

    def assembly_buffers(self, variant: str, subjects: int = 1):
        """(tables, V3, vals, mass, flags) on the backend for ``subjects`` subjects (cached)."""
        key = (variant, subjects)
        if key not in self._assembly:
            be = self.be
            tables = self.topo._tables(be, variant)  # the topology's device tables (bench code: a private helper)
            V3 = be.to_device(self.cohort[:subjects] if subjects > 1 else self.V[None])
            self._assembly[key] = (tables, V3, be.zeros((subjects, self.nnz), np.float64),
                                   be.zeros((subjects, self.n), np.float64), be.zeros((subjects, self.n), np.int64))
        return self._assembly[key]

    def assembly_launcher(self, variant: str = "deterministic", subjects: int = 1):
        """(label, launch()) of one value-kernel launch: ``row_values`` (with its fused flag count), its branch-free
        variant ``row_values_nodiv`` (``variant="nodiv"``) or ``face_values_atomic``."""
        from kernelrt.kernels.laplacian import assembly
        from kernelrt.kernels.laplacian.assembly_nodiv import row_values_nodiv
        from kernelrt.kernels.laplacian.placement import BLOCK, blocks

        tables, V3, vals, mass, flags = self.assembly_buffers("atomic" if variant == "atomic" else "deterministic",
                                                              subjects)
        be = self.be
        if variant in ("deterministic", "nodiv"):  # nodiv: row_values_nodiv, the same arguments
            kernel = assembly.row_values if variant == "deterministic" else row_values_nodiv
            if ("counter", subjects) not in self._assembly:
                self._assembly["counter", subjects] = assembly.new_counter(be)
            counter = self._assembly["counter", subjects]
            args = (V3, tables["inc_nbr"], tables["indptr"], tables["inc_ptr"], tables["inc"], tables["inc_slot"],
                    tables["diag_slot"], vals, mass, flags, counter)
            return kernel.name, lambda: be.launch_kernel(kernel, (blocks(self.n), subjects), (BLOCK, 1), *args)
        args = (V3, tables["faces"], tables["face_slots"], vals, mass, flags)
        n_faces = self.F.shape[0]
        return "face_values_atomic", lambda: be.launch_kernel(assembly.face_values_atomic, (blocks(n_faces), subjects),
                                                              (BLOCK, 1), *args)

    def assemble_values_launcher(self, variant: str = "deterministic", subjects: int = 1):
        """The library's whole device sequence (allocations, kernels, flag count), a fallback when a kernel's signature moved."""
        from kernelrt.kernels.laplacian.assembly import assemble_values

        tables, V3, *_ = self.assembly_buffers(variant, subjects)
        return "assemble_values", lambda: assemble_values(self.be, tables, V3, variant)

    def spmv(self):
        from kernelrt.kernels.laplacian.placement import BLOCK, blocks
        from kernelrt.kernels.laplacian.spmv import csr_matvec

        op = self.op
        self.be.launch_kernel(csr_matvec, blocks(self.n), BLOCK, op.data, op.indices, op.indptr, self.x, self.y)

    def spmm(self):
        from kernelrt.kernels.laplacian.spmv import _geometry, csr_matmat

        op = self.op
        grid, block = _geometry(self.n, SPMM_K)
        self.be.launch_kernel(csr_matmat, grid, block, op.data, op.indices, op.indptr, self.X, self.Y)

    def heat(self):
        from kernelrt.kernels.laplacian.placement import BLOCK, blocks
        from kernelrt.kernels.laplacian.spmv import heat_step

        op = self.op
        self.be.launch_kernel(heat_step, blocks(self.n), BLOCK, op.data, op.indices, op.indptr, op.mass, TAU, self.x,
                              self.y)

    def cheb(self):
        from kernelrt.kernels.laplacian.chebyshev import cheb_step
        from kernelrt.kernels.laplacian.spmv import _geometry

        op = self.op
        grid, block = _geometry(self.n, SPMM_K)
        self.be.launch_kernel(cheb_step, grid, block, op.data, op.indices, op.indptr, 1e-3, 1.0, 0.5, self.X, self.X,
                              self.Y)


def _kernel_row(probe, rows, case, launch, floor, n, **info):
    try:
        rows.append(make_row(probe, "laplacian", case, "kernel-only", kernel_only(probe, launch, n), floor, **info))
    except Exception as error:  # noqa: BLE001  (one failing case must not end the probe)
        rows.append(error_row("laplacian", case, "kernel-only", error))


def _e2e_row(probe, rows, case, fn, floor, rounds=3, what="e2e", profile=False, **info):
    try:
        rows.append(make_row(probe, "laplacian", case, what, e2e(probe, fn, rounds, profile), floor, **info))
    except Exception as error:  # noqa: BLE001
        rows.append(error_row("laplacian", case, what, error))


def _assembly_rows(probe, rows, s: LaplacianSetup, name: str, subjects: int, info: dict):
    c = ico_counts(s.level)
    floor = assembly_floor(c["n"], c["faces"], c["nnz"], probe.peaks, subjects)
    try:
        label, launch = s.assembly_launcher("deterministic", subjects)
        launch()
    except Exception as error:  # noqa: BLE001  (the kernel's arguments changed: time the library's sequence)
        label, launch = s.assemble_values_launcher("deterministic", subjects)
        info = {**info, "note": f"row_values alone failed ({type(error).__name__}); timed assemble_values"}
    _kernel_row(probe, rows, f"{name} {label}", launch, floor, 20, **info)


def run_laplacian(probe, budget) -> list[dict]:
    rows = []
    heat_steps = 4 if probe.kind == "simulated" else 200
    for level in mesh_levels(probe):
        name = f"ico{level}"
        if not budget.allows(name, 3.0 if level < 8 else 8.0):
            continue
        try:
            s = LaplacianSetup(probe.backend, level)
        except Exception as error:  # noqa: BLE001
            rows.append(error_row("laplacian", name, "setup", error))
            continue
        c, pk, info = ico_counts(level), probe.peaks, {"vertices": s.n, "nnz": s.nnz}
        n, nnz = c["n"], c["nnz"]
        _assembly_rows(probe, rows, s, name, 1, info)
        # the rows far above their targets (docs/results.md) say where their host time goes
        _e2e_row(probe, rows, f"{name} assemble", lambda: s.topo.assemble(s.V, probe.backend),
                 assembly_e2e_floor(n, c["faces"], nnz, pk), profile=True, **info)
        _kernel_row(probe, rows, f"{name} csr_matvec", s.spmv, spmv_floor(n, nnz, pk), 50, **info)
        xh, Xh = np.ones(n), np.ones((n, SPMM_K))
        pcie = pk.pcie[0]
        _e2e_row(probe, rows, f"{name} matvec", lambda: s.op.matvec(xh),
                 _plus(spmv_floor(n, nnz, pk), 16 * n / pcie), **info)
        _kernel_row(probe, rows, f"{name} csr_matmat k{SPMM_K}", s.spmm, spmm_floor(n, nnz, SPMM_K, pk), 20, **info)
        _e2e_row(probe, rows, f"{name} matmat k{SPMM_K}", lambda: s.op.matvec(Xh),
                 _plus(spmm_floor(n, nnz, SPMM_K, pk), 16 * n * SPMM_K / pcie), **info)
        _kernel_row(probe, rows, f"{name} heat_step", s.heat, heat_floor(n, nnz, 1, pk), 50, **info)
        heat = heat_floor(n, nnz, heat_steps, pk)
        _e2e_row(probe, rows, f"{name} heat{heat_steps} device arrays", lambda: s.op.heat_steps(s.x, TAU, heat_steps),
                 heat, what="loop", profile=True, **info)
        _e2e_row(probe, rows, f"{name} heat{heat_steps}", lambda: s.op.heat_steps(xh, TAU, heat_steps),
                 _plus(heat, 16 * n / pcie), **info)
        del s
    level, subjects = _cohort(probe)
    name = f"cohort-ico{level}x{subjects}"
    if budget.allows(name, 10.0 if probe.gpu else 5.0):
        try:
            s = LaplacianSetup(probe.backend, level, subjects)
            c = ico_counts(level)
            info = {"vertices": s.n, "subjects": subjects}
            _assembly_rows(probe, rows, s, name, subjects, info)
            _e2e_row(probe, rows, f"{name} assemble_batch", lambda: s.topo.assemble_batch(s.cohort, probe.backend),
                     assembly_e2e_floor(c["n"], c["faces"], c["nnz"], probe.peaks, subjects), rounds=2, profile=True,
                     **info)
        except Exception as error:  # noqa: BLE001
            rows.append(error_row("laplacian", name, "setup", error))
    return rows


def _plus(floor: dict, pcie_s: float) -> dict:
    """``floor`` with a PCIe term added (host operands in and results out)."""
    parts = {**floor["parts_s"], "pcie": pcie_s}
    return {**floor, "floor_s": sum(parts.values()), "parts_s": parts, "formula": floor["formula"] + " + PCIe in/out",
            "floor_high_s": None}


# -- eigen -------------------------------------------------------------------------------------------


def eigen_cases(probe) -> list[tuple[int, int]]:
    """(level, k) of the Chebyshev cases."""
    if probe.kind == "simulated":
        return [(1, 4)]
    if probe.kind == "cpu":
        return [(3, 10)] if probe.quick else [(4, 20), (5, 50)]
    return [(6, 50), (7, 50)] if probe.quick else [(6, 50), (6, 100), (7, 50), (7, 100), (8, 100)]


_EIGEN_ESTIMATE = {6: 4.0, 7: 12.0, 8: 45.0}  # GPU seconds, generous: host-side costs may dominate a first run


def run_eigen(probe, budget) -> list[dict]:
    from kernelrt.kernels.laplacian import eigenpairs
    from kernelrt.kernels.laplacian.chebyshev import default_block

    rows, warmed = [], False
    for level, k in eigen_cases(probe):
        name = f"eigen-ico{level}-k{k}"
        estimate = _EIGEN_ESTIMATE.get(level, 2.0) if probe.gpu else (30.0 if probe.kind == "simulated" else 5.0)
        if not budget.allows(name, estimate):
            continue
        try:
            L, m = ico_matrices(level)
            if not warmed:  # load the kernels (and CuPy's) outside the timed solve
                eigenpairs(*ico_matrices(min(2, level)), 4, backend=probe.backend, method="chebyshev")
                warmed = True
            iterations = []
            t0 = time.perf_counter()
            result = eigenpairs(L, m, k, backend=probe.backend, method="chebyshev",
                                progress=lambda done, total: iterations.append(done))
            seconds = time.perf_counter() - t0
        except Exception as error:  # noqa: BLE001
            rows.append(error_row("eigen", name, "e2e", error))
            continue
        block = default_block(k, len(m))  # the width it starts with: eigenpairs does not report a grown one
        info = getattr(result, "info", None) or {}
        phases = getattr(result, "phases", None) or info.get("phases")
        c = ico_counts(level)
        floor = chebyshev_floor(c["n"], c["nnz"], int(result.products or 0), block, max(1, len(iterations)), probe.peaks)
        timing = {"seconds": seconds, "timing": "simulated" if probe.kind == "simulated" else "wall", "rounds": 1}
        rows.append(make_row(probe, "eigen", name, "e2e", timing, floor, vertices=c["n"], k=k, route=result.route,
                             products=result.products, iterations=len(iterations), block=block,
                             max_residual=float(np.max(result.residuals)), phases=phases,
                             solver_seconds=getattr(result, "seconds", None)))
        if probe.backend.name == "cuda":
            rows += _cpu_route(probe, budget, name, level, (L, m), k, result, seconds)
    return rows


# The CPU route on the GPU machine's cores, seconds (H100 machine, 16 cores, 2026-11-26: ico7 k = 50
# took 16 s); at ico8 it took minutes, more than a sitting can spend.
_CPU_ESTIMATE = {1: 2.0, 2: 2.0, 6: 8.0, 7: 30.0}


def _cpu_route(probe, budget, name, level, Lm, k, gpu_result, gpu_seconds) -> list[dict]:
    """What ``eigenpairs`` does on the CPU backend, on the same matrix in the same run, and how far apart."""
    from kernelrt.kernels.laplacian import eigenpairs

    label = f"{name} cpu route"
    if level not in _CPU_ESTIMATE:
        budget.skip(label, "the CPU route takes minutes at this size")
        return []
    if not budget.allows(label, _CPU_ESTIMATE[level]):
        return []
    try:
        # load the CPU route's kernels outside the timing: a small mesh would take the dense route,
        # and the Cholesky route's first solve compiles for 10-16 s where numba's cache is cold
        eigenpairs(*ico_matrices(min(3, level)), 4, backend="cpu", method="cholesky" if level >= 3 else "auto")
        t0 = time.perf_counter()
        ref = eigenpairs(*Lm, k, backend="cpu")
        seconds = time.perf_counter() - t0
    except Exception as error:  # noqa: BLE001
        return [error_row("eigen", label, "e2e", error)]
    diff = np.abs(np.asarray(gpu_result.evals) - np.asarray(ref.evals))
    nz = ref.evals > 1e-10 * ref.evals.max()  # the zero eigenvalue has no relative error
    return [make_row(probe, "eigen", label, "e2e", {"seconds": seconds, "timing": "wall", "rounds": 1}, None,
                     vertices=Lm[0].shape[0], k=k, route=ref.route, max_residual=float(np.max(ref.residuals)),
                     max_abs_eval_diff=float(diff.max()),
                     max_rel_eval_diff=float((diff[nz] / ref.evals[nz]).max()) if nz.any() else 0.0,
                     gpu_speedup=seconds / gpu_seconds)]


def ico_matrices(level: int) -> tuple:
    """(L, m) of an icosphere, assembled on the host (small ones warm the eigen routes' kernels)."""
    from kernelrt.kernels.laplacian import MeshTopology, icosphere

    V, F = icosphere(level)
    return MeshTopology(F, len(V)).assemble(V, "cpu")
