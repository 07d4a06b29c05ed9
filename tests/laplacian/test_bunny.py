"""L and m against SpectralBrain 0.1.0 on a real scan with non-manifold edges (CPU backend).

The Stanford Bunny shipped with pymeshfix: 50,000 vertices, 99,785 faces, 353 boundary
edges and 132 non-manifold edges (three faces each); no degenerate face. Skipped unless
pymeshfix is installed (the ``test`` extra brings it). SpectralBrain's result comes from
SpectralBrain itself when it is installed (the ``bench`` extra), else from the compact
reference in tests/data/laplacian/ref_bunny.npz (tests/support/bunny.py says how).

Both assemblies are deterministic on every x86 CPU: they use only + - * / and sqrt (IEEE
correctly rounded) in fixed orders, with no BLAS, libm call or SIMD-width dependent
reduction (SpectralBrain: NumPy element-wise ops and 3-term reductions, SciPy's sparse
duplicate sum and mat-vec, ``np.add.at``; kernelrt: numba without fastmath, so LLVM neither
contracts into FMA nor reassociates). So the relation below is exact and the same on every
machine; it was also checked with numba, NumPy and OpenBLAS targeting Zen 3, Skylake-X and
Ice Lake.

* An off-diagonal entry is minus half the sum of one cotangent per incident face. With one
  or two terms the order cannot matter (a + b == b + a), so it is bitwise SpectralBrain's.
  With three (a non-manifold edge) SciPy's duplicate sum and kernelrt's corner-major order
  round differently: up to an ulp (26 of the 132 edges differ, each by 1 ulp).
* The diagonal sums its row in column order, as SpectralBrain does: bitwise equal where
  every off-diagonal of the row is, within 2 ulp in rows that touch a non-manifold edge.
* m is summed in SpectralBrain's order (corner 0, 1, 2 faces, each in face order): bitwise.
* The atomic variant sums the diagonal and the mass per face instead: a few ulp.
"""

import numpy as np
import pytest
import scipy.sparse as sp
from kernelrt.kernels import laplacian as lap

from tests.support.bunny import bunny_path, edge_face_counts, read_binary_ply, stored_reference

pytest.importorskip("pymeshfix")


@pytest.fixture(scope="module", params=["spectralbrain", "stored"])
def bunny(request):
    path = bunny_path()
    if path is None:
        pytest.skip("this pymeshfix ships no StanfordBunny.ply")
    V, F = read_binary_ply(path)
    if request.param == "spectralbrain":
        meshes = pytest.importorskip("spectralbrain.core.meshes")
        L_sb, M_sb = meshes._cotangent_laplacian(V, F.astype(np.intp))
        L_sb, m_sb = sp.csr_matrix(L_sb), M_sb.diagonal()
    else:
        L_sb, m_sb = stored_reference(V, F, lambda V, F: lap.cotan_laplacian(V, F, "cpu"))
    keys, counts = edge_face_counts(F, len(V))
    return V, F, L_sb, m_sb, keys, counts


def _split(L, bunny):
    """SpectralBrain's values on L's pattern and the masks of entries by kind."""
    V, _, L_sb, _, keys, counts = bunny
    n = len(V)
    coo = L.tocoo()
    i, j = coo.row.astype(np.int64), coo.col.astype(np.int64)
    ref = np.asarray(L_sb[i, j]).ravel()  # 0.0 where SpectralBrain stores nothing
    assert np.count_nonzero(ref) == L_sb.nnz  # no SpectralBrain entry outside our pattern
    off = i != j
    faces = np.zeros(len(i), np.int64)
    faces[off] = counts[np.searchsorted(keys, np.minimum(i, j)[off] * n + np.maximum(i, j)[off])]
    touches = np.zeros(n, bool)  # vertices of a non-manifold edge
    touches[keys[counts > 2] // n] = touches[keys[counts > 2] % n] = True
    return coo.data, ref, off & (faces <= 2), off & (faces > 2), ~off & touches[i], ~off & ~touches[i]


def test_bunny_has_boundary_and_nonmanifold_edges(bunny):
    V, F, _, _, _, counts = bunny
    assert (len(V), len(F)) == (50_000, 99_785)
    assert [(counts == c).sum() for c in (1, 2, 3)] == [353, 149_303, 132] and counts.max() == 3


def test_deterministic_variant_against_spectralbrain(bunny):
    L, m = lap.cotan_laplacian(bunny[0], bunny[1], "cpu")
    ours, ref, manifold, nonmanifold, diag_nm, diag_rest = _split(L, bunny)
    # exact: one or two cotangents per entry, each the same correctly rounded expression
    np.testing.assert_array_equal(ours[manifold], ref[manifold])
    np.testing.assert_array_equal(ours[diag_rest], ref[diag_rest])
    np.testing.assert_array_equal(m, bunny[3])
    # three cotangents summed in another order: measured 1 ulp (off-diagonal), 2 ulp (diagonal)
    ulp = np.spacing(np.abs(ref))
    assert np.all(np.abs(ours - ref)[nonmanifold] <= 2 * ulp[nonmanifold])
    assert np.all(np.abs(ours - ref)[diag_nm] <= 4 * ulp[diag_nm])
    assert np.count_nonzero(ours[nonmanifold] != ref[nonmanifold]) > 0  # the order really differs here


def test_atomic_variant_against_spectralbrain(bunny):
    L, m = lap.cotan_laplacian(bunny[0], bunny[1], "cpu", variant="atomic")
    ours, ref, manifold, nonmanifold, diag_nm, diag_rest = _split(L, bunny)
    np.testing.assert_array_equal(ours[manifold], ref[manifold])  # exact, as above
    ulp = np.spacing(np.abs(ref))
    assert np.all(np.abs(ours - ref)[nonmanifold] <= 2 * ulp[nonmanifold])
    # the diagonal as a per-face sum of w1 + w2 and the mass in face order: measured 4 and 2 ulp
    diag = diag_nm | diag_rest
    assert np.all(np.abs(ours - ref)[diag] <= 8 * ulp[diag])
    assert np.all(np.abs(m - bunny[3]) <= 4 * np.spacing(bunny[3]))
