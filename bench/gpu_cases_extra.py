"""GPU probe sections ``integrations``, ``dask`` and ``anchors``: kernelrt inside its peers, on a cluster, and the peers' own GPU routes.

``integrations``: SpectralBrain's ``BrainMesh.decompose`` with ``KernelrtBackend`` and
MyoGen's ``MotorUnitSim.calc_sfaps`` after ``kernelrt.integrations.myogen.enable()``,
where the peers import (else skipped, with the reason).

``dask``: a 2-worker ``LocalCluster`` with ``KernelrtPlugin`` (worker processes on a
CUDA backend: two contexts on one device; threads on the CPU, to stay quick), running
``compute_many`` and ``cohort_spectra`` beside the same calls without a client; the row
says whether the results are bitwise the same.

``anchors``, on the same matrices: SciPy's ``csr @ x`` on the host; cuSPARSE through
cupyx (``csr @ x``, ``csr @ X``); ``torch.lobpcg`` and cupyx ``eigsh(which='SA')`` run to
kernelrt's accuracy or ``--anchor-cap`` seconds (bench/eigen_anchors.py), beside kernelrt's
own eigenpairs on the same matrix (163,842 vertices, k = 50); MyoGen's own CuPy path
(``calc_sfaps(use_gpu=True)``). Each where installed, else skipped with the reason.
"""

from __future__ import annotations

import importlib.util
import logging
import time

import numpy as np
from gpu_floors import ico_counts, spmm_floor, spmv_floor
from gpu_report import error_row, make_row
from gpu_timing import e2e, host_time, kernel_only

__all__ = ["run_integrations", "run_dask", "run_anchors"]


def _have(module: str) -> bool:
    try:
        return importlib.util.find_spec(module) is not None
    except (ImportError, ValueError):
        return False


def _level(probe) -> int:
    return {"simulated": 1, "cpu": 3}.get(probe.kind, 7)


def _wall(probe, seconds: float) -> dict:
    return {"seconds": seconds, "timing": "simulated" if probe.kind == "simulated" else "wall"}


# -- integrations -------------------------------------------------------------------------------------


def run_integrations(probe, budget) -> list[dict]:
    rows = []
    if not _have("spectralbrain"):
        budget.skip("spectralbrain decompose", "spectralbrain is not installed")
    elif budget.allows("spectralbrain decompose", 10.0):
        try:
            import spectralbrain as sb
            from kernelrt.integrations.spectralbrain import KernelrtBackend
            from kernelrt.kernels.laplacian import icosphere

            V, F = icosphere(_level(probe))
            k = 50 if probe.gpu else 10
            ours = KernelrtBackend(probe.backend)
            sb.BrainMesh(V, F).decompose(k=min(k, 8), backend=ours)  # warm
            t = host_time(lambda: sb.BrainMesh(V, F).decompose(k=k, backend=ours), 1)
            rows.append(make_row(probe, "integrations", f"spectralbrain decompose ico{_level(probe)} k{k}", "e2e",
                                 _wall(probe, t), None))
        except Exception as error:  # noqa: BLE001  (a peer's API may differ: record, go on)
            rows.append(error_row("integrations", "spectralbrain decompose", "e2e", error))
    if not _have("myogen"):
        budget.skip("myogen calc_sfaps", "myogen is not installed (MyoGen 0.12 needs Python >= 3.12)")
    elif budget.allows("myogen calc_sfaps", 10.0):
        try:
            rows.append(_myogen_row(probe))
        except Exception as error:  # noqa: BLE001
            rows.append(error_row("integrations", "myogen calc_sfaps", "e2e", error))
    return rows


def _myogen_row(probe) -> dict:
    """One MyoGen motor unit (MyoGen's default 4-contact needle, dz 0.01) through the swapped ``calc_sfaps``."""
    from myogen.simulator.core.emg.intramuscular.motor_unit_sim import MotorUnitSim

    import kernelrt.integrations.myogen as kmyogen
    from kernelrt.kernels.sfap.reference import synthetic_motor_unit

    nf, dz = (436, 0.01) if probe.gpu else (16, 0.5)
    case = synthetic_motor_unit(nf, 4, dz, length=30.0)
    mu = MotorUnitSim(muscle_fiber_centers__mm=case["fibre_xy"], muscle_length__mm=30.0,
                      muscle_fiber_diameters__mm=case["fibre_diameter"],
                      muscle_fiber_conduction_velocity__mm_per_s=case["fibre_cv"],
                      nominal_center__mm=case["fibre_xy"].mean(axis=0))
    mu._neuromuscular_z_coordinates__mm = case["nmj_z"][:, None]
    mu.nerve_paths = case["nerve_paths"]
    kmyogen.enable()
    try:
        call = lambda: mu.calc_sfaps(0, case["dt"], dz, case["electrodes"], verbose=False, use_gpu=probe.gpu)  # noqa: E731
        call()
        t = host_time(call, 2)
    finally:
        kmyogen.disable()
    return make_row(probe, "integrations", f"myogen calc_sfaps {nf}x4 dz{dz:g}", "e2e", _wall(probe, t), None)


# -- dask ----------------------------------------------------------------------------------------------


def _dask_sizes(probe):
    """(units, fibres, electrodes, dz, length), (subjects, level, k)."""
    if probe.kind == "simulated":
        return (2, 2, 2, 1.0, 10.0), (2, 1, 4)
    if probe.kind == "cpu":
        return (2, 8, 4, 0.5, 30.0), (2, 2, 6)
    return (8, 100, 16, 0.1, 120.0), (4, 5, 50)


def run_dask(probe, budget) -> list[dict]:
    """``compute_many`` and ``cohort_spectra`` through a two-worker cluster, against the calls without one.

    Each case's first call is timed on its own (``first_call_s``: the workers load CuPy and the
    kernels), the second as the row's time, with the workers' per-task compute times from the
    task stream (``task_compute_median_s``, ``task_compute_max_s``)."""
    if not _have("distributed"):
        budget.skip("dask", "dask.distributed is not installed (the distributed extra)")
        return []
    if not budget.allows("dask cluster", 30.0 if probe.gpu else 15.0):
        return []
    import distributed

    from kernelrt.distributed import KernelrtPlugin
    from kernelrt.kernels.laplacian import cohort_spectra, noisy_icosphere
    from kernelrt.kernels.sfap import compute_many
    from kernelrt.kernels.sfap.reference import synthetic_motor_unit

    # worker processes on a CUDA backend (two contexts on one GPU; the simulator is not thread-safe), threads on the CPU
    rows, processes = [], probe.backend.name == "cuda"
    (nu, nf, ne, dz, length), (ns, level, k) = _dask_sizes(probe)
    units = [synthetic_motor_unit(nf, ne, dz, seed=u, length=length) for u in range(nu)]
    meshes = [noisy_icosphere(level, 0.1, seed=s) for s in range(ns)]
    t0 = time.perf_counter()
    try:
        with distributed.LocalCluster(n_workers=2, threads_per_worker=1, processes=processes, dashboard_address=None,
                                      silence_logs=logging.CRITICAL) as cluster, distributed.Client(cluster) as client:
            client.register_plugin(KernelrtPlugin(probe.backend.name))
            start = time.perf_counter() - t0
            info = {"workers": 2, "processes": processes, "cluster_start_s": start}
            for label, fn, ref in (
                (f"compute_many {nu} units", lambda c: compute_many(units, client=c, muap_only=True),
                 lambda r: [u.muap for u in r]),
                (f"cohort_spectra {ns} subjects", lambda c: cohort_spectra(meshes, k, client=c),
                 lambda r: [s.evals for s in r]),
            ):
                if not budget.allows(label, 10.0):
                    continue
                try:
                    here = fn(None) if "cohort" not in label else cohort_spectra(meshes, k, backend=probe.backend)
                    t0 = time.perf_counter()
                    first = fn(client)  # the workers' first call loads CuPy and the kernels there
                    first_s = time.perf_counter() - t0
                    with distributed.get_task_stream(client) as stream:
                        timing = e2e(probe, lambda: fn(client), 1)
                    same = all(np.array_equal(a, b) for a, b in zip(ref(first), ref(here)))
                    rows.append(make_row(probe, "dask", f"2 workers: {label}", "e2e", timing, None,
                                         matches_no_client_bitwise=same, units=(nu, nf, ne, dz),
                                         subjects=(ns, level, k), first_call_s=first_s,
                                         **_task_seconds(stream.data), **info))
                except Exception as error:  # noqa: BLE001
                    rows.append(error_row("dask", label, "e2e", error))
    except Exception as error:  # noqa: BLE001  (the cluster itself failed to start)
        rows.append(error_row("dask", "LocalCluster with KernelrtPlugin", "e2e", error))
    return rows


def _task_seconds(tasks) -> dict:
    """Per-task compute time on the workers (Dask's task stream): what one task costs a GPU worker."""
    spans = [ss["stop"] - ss["start"] for t in tasks for ss in t.get("startstops", ()) if ss.get("action") == "compute"]
    if not spans:
        return {"tasks": 0}
    return {"tasks": len(spans), "task_compute_median_s": float(np.median(spans)), "task_compute_max_s": max(spans)}


# -- anchors -------------------------------------------------------------------------------------------


def run_anchors(probe, budget) -> list[dict]:
    from gpu_cases_laplacian import ico_matrices

    rows = []
    level = 8 if (probe.gpu and not probe.quick) else _level(probe)
    if not budget.allows(f"anchors ico{level}", 5.0):
        return rows
    L, m = ico_matrices(level)
    c = ico_counts(level)
    x, X = np.ones(c["n"]), np.ones((c["n"], 50))
    info = {"vertices": c["n"], "anchor": True}
    rows.append(make_row(probe, "anchors", f"ico{level} scipy csr @ x (host)", "host",
                         {"seconds": host_time(lambda: L @ x, 5), "timing": "wall"}, spmv_floor(c["n"], c["nnz"], probe.peaks), **info))
    if not probe.gpu:
        budget.skip("cupyx / torch / MyoGen CuPy anchors", f"no GPU ({probe.kind})")
        return rows
    if _have("cupy"):
        rows += _cupy_anchors(probe, budget, L, m, x, X, c, info)
    else:
        budget.skip("cupyx anchors", "cupy is not installed")
    rows += _eigen_anchors(probe, budget)
    rows += _myogen_cupy_anchor(probe, budget)
    return rows


def _cupy_anchors(probe, budget, L, m, x, X, c, info) -> list[dict]:
    import cupy as cp
    import cupyx.scipy.sparse as csp

    rows = []
    with probe.backend.activated():
        A, xd, Xd = csp.csr_matrix(L), cp.asarray(x), cp.asarray(X)
        for label, fn, floor in (("cupyx csr @ x (cuSPARSE)", lambda: A @ xd,
                                  spmv_floor(c["n"], c["nnz"], probe.peaks)),
                                 ("cupyx csr @ X k50 (cuSPARSE)", lambda: A @ Xd, spmm_floor(c["n"], c["nnz"], 50, probe.peaks))):
            try:
                rows.append(make_row(probe, "anchors", label, "kernel-only", kernel_only(probe, fn, 50), floor, **info))
            except Exception as error:  # noqa: BLE001
                rows.append(error_row("anchors", label, "kernel-only", error))
    return rows


# The eigensolver anchors' case: the issue's 163,842 vertices, k = 50 (--quick: 10,242 vertices)
ANCHOR_EIGEN = {"level": 7, "quick_level": 5, "k": 50}


def _eigen_anchors(probe, budget) -> list[dict]:
    """torch.lobpcg and cupyx eigsh to kernelrt's accuracy (bench/eigen_anchors.py) beside kernelrt's own solve."""
    from eigen_anchors import eigsh_run, lobpcg_run, smallest_positive
    from gpu_cases_laplacian import ico_matrices

    from kernelrt.kernels.laplacian import eigenpairs

    level, k, cap = ANCHOR_EIGEN["quick_level" if probe.quick else "level"], ANCHOR_EIGEN["k"], probe.anchor_cap
    name = f"ico{level} k{k}"
    if not budget.allows(f"{name} kernelrt eigenpairs", 3.0):
        return []
    L, m = ico_matrices(level)
    small = ico_matrices(2)  # warm-ups: the solvers' kernels and libraries load outside the timed calls
    try:
        eigenpairs(*small, 4, backend=probe.backend)
        t0 = time.perf_counter()
        ref = eigenpairs(L, m, k, backend=probe.backend)
        ref_s = time.perf_counter() - t0
    except Exception as error:  # noqa: BLE001
        return [error_row("anchors", f"{name} kernelrt eigenpairs", "e2e", error)]
    info = {"vertices": len(m), "k": k, "anchor": True}
    rows = [make_row(probe, "anchors", f"{name} kernelrt eigenpairs", "e2e", {"seconds": ref_s, "timing": "wall"}, None,
                     route=ref.route, max_residual=float(np.max(ref.residuals)), **info)]
    lam1 = smallest_positive(ref.evals)

    def row(label, run, warm=lambda: None) -> None:  # eigsh_run warms itself (its timing passes)
        if not budget.allows(label, cap + 5.0):
            return
        try:
            warm()
            out = run()
        except Exception as error:  # noqa: BLE001
            rows.append(error_row("anchors", label, "e2e", error))
            return
        # an anchor stopped unconverged at the cap: kernelrt's lead is at least this ratio
        out.update(kernelrt_s=ref_s, kernelrt_speedup=out["seconds"] / ref_s, speedup_is_lower_bound=not out["met"])
        rows.append(make_row(probe, "anchors", label, "e2e", {"seconds": out.pop("seconds"), "timing": "wall"}, None,
                             cap_s=cap, **out, **info))

    if _have("torch"):
        import torch

        if torch.cuda.is_available():
            dev = torch.device("cuda", probe.backend.device_id)
            row(f"{name} torch.lobpcg to 1e-10",
                lambda: lobpcg_run(torch, L, m, k, cap_s=cap, lam1=lam1, device=dev, reference=ref.evals),
                warm=lambda: lobpcg_run(torch, *small, 4, cap_s=5.0, lam1=1.0, device=dev))
        else:
            budget.skip("torch.lobpcg", "torch sees no CUDA device")
    else:
        budget.skip("torch.lobpcg", "torch is not installed")
    if _have("cupy"):
        import cupy as cp
        import cupyx.scipy.sparse as csp
        import scipy.sparse as sp
        from cupyx.scipy.sparse.linalg import eigsh

        def to_device(a):
            return csp.csr_matrix(a) if sp.issparse(a) else cp.asarray(a)

        with probe.backend.activated():
            row(f"{name} cupyx eigsh('SA') to 1e-10",
                lambda: eigsh_run(eigsh, to_device, cp.asnumpy, L, m, k, cap_s=cap, lam1=lam1,
                                  sync=cp.cuda.Device().synchronize, reseed=cp.random.seed, reference=ref.evals))
    else:
        budget.skip("cupyx eigsh", "cupy is not installed")
    return rows


def _myogen_cupy_anchor(probe, budget) -> list[dict]:
    label = "myogen calc_sfaps(use_gpu=True) 200x25 dz0.1"
    try:
        from bench_sfap import make_case, open_gpu_peer

        peer = open_gpu_peer()
    except Exception as error:  # noqa: BLE001
        budget.skip(label, f"MyoGen's CuPy path could not be opened ({type(error).__name__})")
        return []
    if peer is None:
        budget.skip(label, "no MyoGen interpreter with CuPy that sees a GPU")
        return []
    try:
        if not budget.allows(label, 20.0):
            return []
        peer.load(make_case(200, 25, 0.1))
        seconds = min(peer.run() for _ in range(2))
        return [make_row(probe, "anchors", label, "e2e", {"seconds": seconds, "timing": "wall"}, None, anchor=True)]
    except Exception as error:  # noqa: BLE001
        return [error_row("anchors", label, "e2e", error)]
    finally:
        peer.close()
