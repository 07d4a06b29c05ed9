"""The Dask layer on CUDA workers, under Numba's CUDA simulator (no GPU needed).

Worker processes inherit NUMBA_ENABLE_CUDASIM=1, so ``KernelrtPlugin("cuda")`` gives each
its (simulated) GPU backend, and the kernels run through the CUDA path: device arrays,
the CUDA launch sequence and the copies back that ``compute_sfaps`` and ``cohort_spectra``
make on a GPU worker. One worker, tiny sizes: the simulator runs every thread in Python.
"""

from __future__ import annotations

import logging

import numpy as np
import pytest
from kernelrt.kernels.laplacian import cohort_spectra, noisy_icosphere
from kernelrt.kernels.sfap import compute_many, compute_sfaps
from kernelrt.kernels.sfap.reference import channel_error

from tests.simulator.test_sfap_sim import TOL, tiny_case

distributed = pytest.importorskip("distributed", reason="the distributed extra is not installed")


@pytest.fixture(scope="module")
def cuda_client(tmp_path_factory):
    from kernelrt.distributed import KernelrtPlugin

    with distributed.LocalCluster(n_workers=1, threads_per_worker=1, processes=True, dashboard_address=None,
                                  silence_logs=logging.CRITICAL) as cluster, distributed.Client(cluster) as client:
        client.register_plugin(KernelrtPlugin("cuda", cache_dir=tmp_path_factory.mktemp("sim-cache")))
        yield client


def test_the_worker_backend_is_its_gpu(cuda_client):
    from kernelrt.distributed import worker_info

    (info,) = worker_info(cuda_client).values()
    assert info["backend"] == "cuda" and info["kernels"]["compiled"] + info["kernels"]["disk"] > 0


def test_motor_units_on_a_gpu_worker_match_the_cpu(cuda_client):
    units = [tiny_case(seed=s) for s in range(3)]
    got = compute_many(units, client=cuda_client)
    for unit, result in zip(units, got):
        want = compute_sfaps(backend="cpu", **unit)
        assert result.backend == "cuda" and isinstance(result.muap, np.ndarray)  # copied back to the host
        assert channel_error(result.sfaps, want.sfaps) <= TOL
        assert channel_error(result.muap, want.muap) <= TOL


def test_a_cohort_on_a_gpu_worker_matches_the_cpu(cuda_client):
    meshes = [noisy_icosphere(2, 0.1, seed=s) for s in range(2)]
    got = cohort_spectra(meshes, 6, client=cuda_client)
    want = cohort_spectra(meshes, 6, backend="cpu")
    for g, w in zip(got, want):
        assert g.backend == "cuda"
        # assembly on the simulated device agrees with the CPU kernels to rounding; the
        # eigensolve is the same host route (no CuPy here), so eigenvalues agree closely
        assert np.max(np.abs(g.evals - w.evals)) <= 1e-10 * w.evals[-1]
        assert np.max(np.abs(g.hks - w.hks)) <= 1e-8 * np.abs(w.hks).max()
