"""The probe's eigensolver anchors on the device, small: cupyx eigsh and torch.lobpcg as the probe calls them.

The probe runs them at 163,842 vertices for a minute each (bench/eigen_anchors.py); here a
noisy 642-vertex icosphere (no exactly multiple eigenvalues) checks the plumbing on a real
GPU first: device matrices, the scaling back to ``v = S y``, the tracker, the judging.
"""

from __future__ import annotations

import importlib.util
from pathlib import Path

import numpy as np
import pytest

from kernelrt.kernels.laplacian import MeshTopology, eigenpairs, noisy_icosphere

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture
def case(monkeypatch):
    monkeypatch.syspath_prepend(str(ROOT / "bench"))
    import eigen_anchors

    V, F = noisy_icosphere(3, 0.1, seed=3)
    L, m = MeshTopology(F, len(V)).assemble(V, "cpu")
    ref = eigenpairs(L, m, 10, backend="cpu")
    return eigen_anchors, L, m, ref, eigen_anchors.smallest_positive(ref.evals)


@pytest.mark.skipif(importlib.util.find_spec("cupy") is None, reason="cupy is not installed")
def test_cupyx_eigsh_on_the_device_reaches_kernelrts_measure(case, gpu):
    import cupy as cp
    import cupyx.scipy.sparse as csp
    import scipy.sparse as sp
    from cupyx.scipy.sparse.linalg import eigsh

    anchors, L, m, ref, lam1 = case
    with gpu.activated():
        out = anchors.eigsh_run(eigsh, lambda a: csp.csr_matrix(a) if sp.issparse(a) else cp.asarray(a), cp.asnumpy,
                                L, m, 10, cap_s=20.0, lam1=lam1, sync=cp.cuda.Device().synchronize,
                                reseed=cp.random.seed, reference=ref.evals)
    assert out["same_eigenvalues"] and out["max_abs_eval_diff"] < 1e-9, out
    assert out["max_residual"] < 1e-9 and out["max_products"] >= out["ncv"]


def test_torch_lobpcg_on_the_device_reaches_kernelrts_measure(case):
    torch = pytest.importorskip("torch")
    if not torch.cuda.is_available():
        pytest.skip("torch sees no CUDA device")
    anchors, L, m, ref, lam1 = case
    out = anchors.lobpcg_run(torch, L, m, 10, cap_s=30.0, lam1=lam1, device=torch.device("cuda", 0),
                             reference=ref.evals)
    assert out["met"] and out["stopped_by"] == "target" and out["steps"] > 1, out
    assert np.isfinite(out["tracker_worst"]) and out["tracker_worst"] <= anchors.TARGET
