"""Meshes and reference helpers shared by the Laplacian tests (CPU, simulator, GPU layers).

Tiny named meshes in the libigl test style, each with explicit dtypes, plus loaders
for the SpectralBrain golden files in tests/data/laplacian/.
"""

from __future__ import annotations

import warnings

import numpy as np
import scipy.sparse as sp

from tests.support.layers import DATA

GOLDEN = DATA / "laplacian"
EDGE_CASES = (
    "closed",
    "open_boundary",
    "degenerate_collinear",
    "degenerate_repeated_index",
    "nonmanifold_fin",
    "unreferenced_vertex",
)
# edge cases whose assembly must warn (DegenerateMeshWarning), and why
WARNS = {
    "degenerate_collinear": ("dropped 1 degenerate", "1 vertex"),
    "degenerate_repeated_index": ("dropped 1 degenerate",),
    "unreferenced_vertex": ("1 vertex",),
}


def single_triangle():
    """Right isosceles triangle: cot = 0 at the right angle (an explicit zero), 1 elsewhere."""
    V = np.array([[0.0, 0.0, 0.0], [1.0, 0.0, 0.0], [0.0, 1.0, 0.0]], dtype=np.float64)
    F = np.array([[0, 1, 2]], dtype=np.int32)
    return V, F


def triangulated_square():
    """Unit square split along its diagonal (0, 2): four boundary edges, one interior edge."""
    V = np.array([[0.0, 0.0, 0.0], [1.0, 0.0, 0.0], [1.0, 1.0, 0.0], [0.0, 1.0, 0.0]], dtype=np.float64)
    F = np.array([[0, 1, 2], [0, 2, 3]], dtype=np.int64)
    return V, F


def single_tet():
    """Regular tetrahedron (edge 2√2), outward faces: every angle 60°, closed and manifold."""
    V = np.array([[1.0, 1.0, 1.0], [1.0, -1.0, -1.0], [-1.0, 1.0, -1.0], [-1.0, -1.0, 1.0]], dtype=np.float64)
    F = np.array([[0, 1, 2], [0, 3, 1], [0, 2, 3], [1, 3, 2]], dtype=np.int32)
    return V, F


def book_of_three():
    """Three triangles sharing edge (0, 1): a non-manifold 'book' with pages at 0°, 90°, 180°."""
    V = np.array(
        [[0.0, 0.0, 0.0], [1.0, 0.0, 0.0], [0.5, 1.0, 0.0], [0.5, 0.0, 1.0], [0.5, -1.0, 0.0]], dtype=np.float64
    )
    F = np.array([[0, 1, 2], [0, 1, 3], [0, 1, 4]], dtype=np.int32)
    return V, F


def load_golden(name: str) -> dict:
    with np.load(GOLDEN / f"ref_{name}.npz") as z:
        return {k: z[k] for k in z.files}


def golden_L(g: dict, prefix: str = "") -> sp.csr_matrix:
    n = g[f"{prefix}L_indptr"].shape[0] - 1
    return sp.csr_matrix((g[f"{prefix}L_data"], g[f"{prefix}L_indices"], g[f"{prefix}L_indptr"]), shape=(n, n))


def edge_case(name: str) -> tuple[np.ndarray, np.ndarray, sp.csr_matrix, np.ndarray]:
    """(V, F, L_ref, m_ref) of one mesh of ref_edgecases.npz."""
    with np.load(GOLDEN / "ref_edgecases.npz") as z:
        g = {k[len(name) + 1 :]: z[k] for k in z.files if k.startswith(name + "_") and k[len(name) + 1 :][:1] in "VFLm"}
    return g["V"], g["F"], golden_L(g), g["m"]


def assert_matches_reference(L, m, L_ref, m_ref, rtol: float = 1e-12) -> None:
    """Values within rtol·max|L| and rtol·max m; a stored entry absent from L_ref must be 0."""
    L = sp.csr_matrix(L)
    # rtol 1e-12 of the largest entry: the golden data's stated tolerance (tests/data/laplacian/
    # README.md, "Accuracy expectations"; docs/laplacian.md ("Accuracy and oracles")). It covers
    # what legitimately differs: the atomic variant's per-face diagonal and mass order, another
    # order for a non-manifold edge's 3 cotangents, the GPU's FMA contraction and the NumPy
    # reference's own expressions. Measured on the CPU: 0 (deterministic, manifold) to
    # 3.7e-16 (L) and 3.5e-16 (m) on the golden meshes, 1.6e-15 (L) on a noisy ico5
    scale = abs(L_ref).max()
    diff = abs(L - L_ref).max()
    assert diff <= rtol * scale, f"max|L - L_ref| = {diff:.3e} > {rtol:.0e} * {scale:.3e}"
    assert np.abs(m - m_ref).max() <= rtol * m_ref.max()
    # pattern: a superset of the reference's, extra entries explicit zeros only
    ours = L.tocoo()
    ref = set(zip(*sp.csr_matrix(L_ref).nonzero()))
    extra = [v for i, j, v in zip(ours.row, ours.col, ours.data) if (i, j) not in ref]
    # exact: entries outside SpectralBrain's pattern receive no cotangent at all (a dropped
    # face's slots, an isolated vertex's diagonal): structural zeros on every backend, FMA or not
    assert all(v == 0.0 for v in extra), f"entries outside the reference pattern: {extra[:5]}"
    assert ref <= set(zip(ours.row, ours.col))


def assemble_expecting_warnings(name: str, assemble):
    """Run ``assemble()`` for edge case ``name``; check its DegenerateMeshWarnings (WARNS)."""
    from kernelrt.kernels.laplacian import DegenerateMeshWarning

    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        result = assemble()
    messages = sorted(str(w.message) for w in caught if w.category is DegenerateMeshWarning)
    expected = sorted(WARNS.get(name, ()))
    assert len(messages) == len(expected), messages
    for start, msg in zip(expected, messages):
        assert msg.startswith(start), (start, msg)
    return result


def blas_pool() -> int:
    """The BLAS pool's size now (threadpoolctl; 1 where no BLAS is found)."""
    from threadpoolctl import threadpool_info

    return max((i["num_threads"] for i in threadpool_info() if i["user_api"] == "blas"), default=1)


def blas_threads_during_eigh(monkeypatch) -> list[int]:
    """Record the BLAS pool's size at every ``np.linalg.eigh`` call from now on (for the Chebyshev route).

    The route's projected b x b eigh must run on one BLAS thread on every backend: on the 16-core
    H100 machine OpenBLAS's default pool made each call 40-130 ms (bench/results/2026-11-26-*).
    """
    seen, eigh = [], np.linalg.eigh

    def recording(a, *args, **kwargs):
        seen.append(blas_pool())
        return eigh(a, *args, **kwargs)

    monkeypatch.setattr(np.linalg, "eigh", recording)
    return seen
