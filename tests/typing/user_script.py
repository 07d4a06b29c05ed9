"""A user's script, written against kernelrt's public API as its documentation shows it.

tests/runtime/test_typing.py type-checks it with ``mypy --strict`` (as a user's CI would,
with kernelrt installed): every call must reach a typed signature, and ``assert_type``
pins what the API returns. It also runs (small sizes, the CPU backend unless CUDA is
there): ``python tests/typing/user_script.py``.
"""

from __future__ import annotations

import warnings
from typing import assert_type

import numpy as np
import numpy.typing as npt

import kernelrt
from kernelrt.kernels import laplacian as lap
from kernelrt.kernels.sfap import SfapResult, compute_sfaps

F64 = npt.NDArray[np.float64]


@kernelrt.kernel
def axpy(i: int, out: F64, x: F64, y: F64, a: float) -> None:  # numba compiles it; annotations are for mypy
    if i < out.shape[0]:
        out[i] = a * x[i] + y[i]


@kernelrt.kernel(ndim=2, signature="float64[:, ::1], float64")
def fill(i: int, j: int, out: F64, value: float) -> None:
    if i < out.shape[0] and j < out.shape[1]:
        out[i, j] = value


def choose_backend() -> kernelrt.Backend:
    if kernelrt.CUDABackend.check_available():
        return kernelrt.CUDABackend(device_id=0)
    warnings.filterwarnings("ignore", category=kernelrt.CPUFallbackWarning)
    return kernelrt.get_backend("auto")


def run_axpy(backend: kernelrt.Backend, n: int = 1000) -> F64:
    x = np.arange(n, dtype=np.float64)
    y = np.ones(n)
    out = backend.zeros(n, dtype=np.float64)
    block = 256
    grid = (n + block - 1) // block
    backend.launch_kernel(axpy, grid, block, out, backend.to_device(x), backend.to_device(y), 2.0)
    host = backend.to_host(out)
    assert_type(host, np.ndarray)
    return host


def run_prepared(backend: kernelrt.Backend) -> F64:
    out = backend.zeros((4, 8), dtype=np.float64)
    compiled = backend.compile_kernel(fill)
    assert_type(compiled, kernelrt.CompiledKernel)
    assert compiled.status in ("compiled", "disk", "memory", "simulator")
    step = backend.prepare(fill, (1, 1), (4, 8), out, 3.0)
    assert_type(step, kernelrt.PreparedLaunch)
    step()
    backend.synchronize()
    return backend.to_host(out)


def sfaps(backend: kernelrt.Backend) -> SfapResult:
    n = 4
    result = compute_sfaps(
        fibre_xy=np.zeros((n, 2)) + [[0.1, 0.0]],
        fibre_diameter=np.full(n, 0.05),
        fibre_cv=np.full(n, 4000.0),
        nmj_z=np.full(n, 0.0),
        fibre_ends=np.tile([-20.0, 20.0], (n, 1)),
        nerve_paths=np.zeros((n, 2)),
        branch_cv=np.array([5000.0, 2000.0]),
        electrodes=np.array([[0.0, 1.0, 5.0]]),
        dt=1 / 4096,
        dz=0.5,
        backend=backend,
    )
    assert_type(result, SfapResult)
    assert result.muap.shape == (result.t.shape[0], 1)
    return result


def spectra(backend: kernelrt.Backend) -> F64:
    vertices, faces = lap.icosphere(2)
    L, m = lap.cotan_laplacian(vertices, faces, backend)
    pairs = lap.eigenpairs(L, m, k=8, backend=backend)
    assert_type(pairs, lap.Eigenpairs)
    evals, evecs = pairs
    print(pairs.summary())
    signature = lap.hks(evals, evecs, n_times=5, backend=backend)
    assert_type(signature, np.ndarray)
    return signature


def dask_plugin() -> str:
    try:
        from kernelrt.distributed import KernelrtPlugin
    except ImportError:  # pip install "kernelrt[distributed]"
        return "no Dask"
    plugin = KernelrtPlugin("auto", threads_per_task=1, cache_dir="$TMPDIR/kernelrt")
    assert plugin.backend is None  # made on each worker, by client.register_plugin(plugin)
    return repr(plugin)


def main() -> None:
    backend = choose_backend()
    print(backend.name, backend.device_name)
    free, total = backend.get_memory_info()
    assert 0 <= free <= total
    np.testing.assert_allclose(run_axpy(backend), 2.0 * np.arange(1000) + 1.0)
    assert (run_prepared(backend) == 3.0).all()
    print(sfaps(backend).muap.shape, spectra(backend).shape, dask_plugin())


if __name__ == "__main__":
    main()
