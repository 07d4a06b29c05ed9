"""Cotangent Laplacian (SpectralBrain 0.1.0 conventions) as kernelrt kernels.

This ``__init__`` is the family's public API; the modules:

- ``inputs``: validation (NaN and inf refused: ``check_finite``), dtypes,
  ``DegenerateMeshWarning``, the accepted forms of a mass.
- ``interop``: SpectralBrain's types out (``as_spectralbrain``) and its decompositions in.
- ``pattern``: topology-only CSR pattern and tables (numba, host).
- ``assembly``: value kernels, deterministic per-row and atomic per-face.
- ``topology``: ``MeshTopology`` (build once, assemble many), ``cotan_laplacian``.
- ``batching``: cohorts on a GPU within free memory.
- ``buffers``: recycling of large host outputs across assemblies.
- ``placement``: the host backend, CuPy on a CUDA device, launch geometry.
- ``spmv``: ``L @ x`` and fused explicit heat steps.
- ``eigen``: ``eigenpairs``, the smallest eigenpairs: their routes, checks and report.
- ``factor``: the sparse factor of L - σM (cholespy, or SuperLU).
- ``lanczos``: block Lanczos with thick restarts, on the shift-inverted operator.
- ``chebyshev``: Chebyshev-filtered subspace iteration, on any backend (the GPU route).
- ``subspace``: its seeded start-block kernel and CholeskyQR2 (with a Householder fallback).
- ``eigen_report``: the residual report and ``EigenConvergenceError``.
- ``spectral``: HKS, WKS and their default grids.
- ``meshes``: icospheres (golden-exact) and jittered icospheres.
- ``reference``: a plain NumPy/SciPy reference, for tests and the demo.
- ``cohort``: ``cohort_spectra``, many subjects here or on a Dask cluster.
- ``cohort_store``: ``SubjectSpectrum``, its ``.npz`` file and what ``resume`` checks
  (the mesh digest, every array whole and finite).
- ``cohort_outdir``: ``kernelrt cohort``'s ``--out``, probed writable and locked per run.
- ``mesh_io``: reading surface files (meshio, nibabel), for cohorts and ``kernelrt cohort``
  (whose front end is kernels/cohort_cli.py, outside this package: importing the package
  loads numba, and ``kernelrt --help`` must not).
- ``mesh_sizes``: a mesh file's header counts checked against its size before reading.

Conventions: L is positive semi-definite (``L = D - W``, off-diagonals
``-½(cot α + cot β)``, rows sum to 0; ``igl.cotmatrix`` is ``-L``); m is the lumped
barycentric mass clamped at 1e-20 (with a warning when a vertex area falls below it);
degenerate faces are dropped with a warning, or a log line with ``report="log"``
(docs/laplacian.md); an eigensolve needs one connected component of L's non-zero weights.
"""

from __future__ import annotations

from .assembly import assembly_kernels
from .assembly_nodiv import assembly_variant_kernels  # also registers row_values's "nodiv" variant
from .chebyshev import chebyshev_kernels
from ..tasks import TaskFailure
from .cohort import CohortError, SubjectSpectrum, cohort_spectra
from .inputs import DegenerateMeshWarning
from .interop import as_spectralbrain
from .mesh_io import find_meshes, read_mesh, subject_names
from .meshes import icosphere, mean_edge_length, noisy_icosphere
from .pattern import pattern_kernels
from .eigen_report import EigenConvergenceError
from .eigen import DisconnectedMeshError, Eigenpairs, eigenpairs
from .spectral import hks, hks_batch, hks_times, shared_hks_times, wks, wks_params
from .loops import loop_variant_kernels
from .sell import sell_variant_kernels
from .spmv import LaplacianOperator, heat_steps, laplacian_matvec, spmv_kernels
from .topology import DeviceCSR, MeshTopology, cotan_laplacian

__all__ = [
    "MeshTopology",
    "DeviceCSR",
    "cotan_laplacian",
    "DegenerateMeshWarning",
    "as_spectralbrain",
    "LaplacianOperator",
    "laplacian_matvec",
    "heat_steps",
    "eigenpairs",
    "Eigenpairs",
    "EigenConvergenceError",
    "DisconnectedMeshError",
    "hks",
    "wks",
    "hks_times",
    "wks_params",
    "shared_hks_times",
    "hks_batch",
    "cohort_spectra",
    "CohortError",
    "SubjectSpectrum",
    "TaskFailure",
    "read_mesh",
    "find_meshes",
    "subject_names",
    "icosphere",
    "noisy_icosphere",
    "mean_edge_length",
    "variant_specs",
    "warm_specs",
    "host_warmups",
]


def warm_specs(index_dtypes=("int32",)) -> dict:
    """Every kernel the Laplacian drivers launch, with the signatures they launch it with.

    Args:
        index_dtypes: index widths to include: "int32" (all meshes with N + 6F < 2³¹)
            and/or "int64" (larger ones).

    Returns:
        ``{"cpu": [(kernel, signature), ...], "cuda": [...]}`` for ``kernelrt cache warm``.
    """
    specs: dict[str, list] = {"cpu": [], "cuda": []}
    for itype in index_dtypes:
        if itype not in ("int32", "int64"):
            raise ValueError(f"index_dtypes entries must be 'int32' or 'int64' (got {itype!r})")
        assembly = assembly_kernels(itype)
        specs["cpu"] += pattern_kernels(itype) + assembly["cpu"] + spmv_kernels(itype) + chebyshev_kernels(itype)
        specs["cuda"] += assembly["cuda"] + spmv_kernels(itype) + chebyshev_kernels(itype)
    # kernels whose signature does not depend on the index width appear once
    return {target: list(dict.fromkeys(entries)) for target, entries in specs.items()}


def variant_specs(index_dtypes=("int32",)) -> list:
    """(kernel, signature) of each GPU kernel variant (``kernelrt.kernels.variants``): the branch-free
    assembly, the SELL-32 products and the cooperative loops. Not in ``warm_specs``: compiled where
    chosen, by the PTX layer and by tools/kernel_resources.py."""
    out: list = []
    for itype in index_dtypes:
        out += assembly_variant_kernels(itype) + sell_variant_kernels(itype) + loop_variant_kernels(itype)
    return list(dict.fromkeys(out))


def host_warmups() -> list:
    """(name, function) of each run that compiles (or loads) the family's ``kernelrt.njit`` host functions.

    ``kernelrt cache warm`` runs them after the kernels: a Cholesky-route solve on a 642-vertex
    icosphere compiles the supernodal analysis, factor and solves, the basis products and the
    pre-solve scans with the argument types every solve passes them (int32 indices).
    """
    return [("eigenpairs, Cholesky route", _warm_cholesky_route)]


def _warm_cholesky_route() -> None:
    vertices, faces = icosphere(3)
    L, m = cotan_laplacian(vertices, faces, "cpu")
    eigenpairs(L, m, 5, backend="cpu", method="cholesky")
