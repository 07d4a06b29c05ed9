"""The Stanford Bunny shipped with pymeshfix, and SpectralBrain's L and m for it.

A real scan with 353 boundary and 132 non-manifold edges (three faces each). SpectralBrain's
reference is stored compactly in tests/data/laplacian/ref_bunny.npz (made by
tools/regen_bunny_golden.py): the SHA-256 of its L values on kernelrt's pattern and of its
m, plus its values where kernelrt sums in another order (the entries of non-manifold edges
and the diagonals of their rows). Where kernelrt's deterministic assembly agrees bit for
bit, that is the reference itself; the digests prove it.
"""

from __future__ import annotations

import hashlib
from pathlib import Path

import numpy as np
import scipy.sparse as sp

from tests.support.layers import DATA

GOLDEN = DATA / "laplacian" / "ref_bunny.npz"


def bunny_path() -> Path | None:
    """pymeshfix's StanfordBunny.ply, found by path (importing pymeshfix.examples imports pyvista)."""
    try:
        import pymeshfix
    except ImportError:
        return None
    path = Path(pymeshfix.__file__).parent / "examples" / "StanfordBunny.ply"
    return path if path.is_file() else None


def read_binary_ply(path: Path) -> tuple[np.ndarray, np.ndarray]:
    """(V float64, F int64) of a little-endian PLY with float32 x, y, z and triangles only."""
    data = path.read_bytes()
    end = data.index(b"end_header\n") + len(b"end_header\n")
    header = data[:end].decode("ascii").splitlines()
    assert header[1] == "format binary_little_endian 1.0", header[:3]
    nv = int(next(line for line in header if line.startswith("element vertex")).split()[-1])
    nf = int(next(line for line in header if line.startswith("element face")).split()[-1])
    V = np.frombuffer(data, "<f4", 3 * nv, end).reshape(nv, 3).astype(np.float64)
    faces = np.frombuffer(data, [("n", "u1"), ("v", "<i4", 3)], nf, end + 12 * nv)
    assert (faces["n"] == 3).all() and end + 12 * nv + 13 * nf == len(data)
    return V, faces["v"].astype(np.int64)


def edge_face_counts(F: np.ndarray, n: int) -> tuple[np.ndarray, np.ndarray]:
    """(sorted undirected edge keys i * n + j with i < j, faces per edge)."""
    e = np.sort(F[:, [0, 1, 1, 2, 2, 0]].reshape(-1, 2), axis=1)
    return np.unique(e[:, 0] * n + e[:, 1], return_counts=True)


def reordered_positions(L: sp.csr_matrix, F: np.ndarray) -> np.ndarray:
    """Indices, in L's COO order, of the entries summed in another order than SciPy's:
    off-diagonals of non-manifold edges and the diagonals of rows that touch one."""
    n = L.shape[0]
    keys, counts = edge_face_counts(F, n)
    nm = keys[counts > 2]
    touches = np.zeros(n, bool)
    touches[nm // n] = touches[nm % n] = True
    coo = L.tocoo()
    i, j = coo.row.astype(np.int64), coo.col.astype(np.int64)
    key = np.minimum(i, j) * n + np.maximum(i, j)
    return np.flatnonzero(((i != j) & np.isin(key, nm)) | ((i == j) & touches[i]))


def digest(a: np.ndarray) -> str:
    return hashlib.sha256(np.ascontiguousarray(a, dtype="<f8").tobytes()).hexdigest()


def stored_reference(V, F, assemble) -> tuple[sp.csr_matrix, np.ndarray]:
    """SpectralBrain's (L, m) rebuilt from the stored digests and values.

    ``assemble`` is kernelrt's deterministic assembly; its values stand in for
    SpectralBrain's wherever the stored digests confirm they are the same bits.
    """
    g = np.load(GOLDEN)
    L, m = assemble(V, F)
    coo = L.tocoo()
    pos = reordered_positions(L, F)
    assert np.array_equal(pos, g["positions"]), "kernelrt's pattern of the bunny changed"
    ref = coo.data.copy()
    ref[pos] = g["values"]
    assert digest(ref) == str(g["digest_L"]), "L differs from SpectralBrain's outside the non-manifold rows"
    assert digest(m) == str(g["digest_m"]), "m differs from SpectralBrain's"
    L_sb = sp.csr_matrix((ref, (coo.row, coo.col)), shape=L.shape)
    L_sb.eliminate_zeros()  # SpectralBrain stores no entry where kernelrt's pattern holds a zero
    assert L_sb.nnz == int(g["nnz"])
    return L_sb, m.copy()
