"""Test and benchmark meshes: icospheres and jittered icospheres.

Owns the exact construction the golden files were made with, so ``icosphere(4)``
reproduces ``ref_ico4.npz``'s V and F bit for bit:

* level 0 is the icosahedron ``(±1, ±φ, 0)`` cyclic, normalised, in trimesh's order;
* each level adds one midpoint ``(a + b) * 0.5`` per unique edge, edges ordered
  lexicographically by (min, max) vertex index, and projects only the *new* vertices
  onto the sphere (``p / sqrt(x² + y² + z²)``); old vertices are kept bit for bit;
* each face (a, b, c) becomes four, in blocks: all ``(a, m_ab, m_ca)``, then all
  ``(b, m_bc, m_ab)``, all ``(c, m_ca, m_bc)``, then all ``(m_ab, m_bc, m_ca)``.

Level l has 10·4^l + 2 vertices: ico5 10242, ico7 163842, ico8 655362.
"""

from __future__ import annotations

import numpy as np

__all__ = ["icosphere", "noisy_icosphere", "mean_edge_length"]

_ICOSAHEDRON_FACES = np.array(
    [
        [0, 11, 5], [0, 5, 1], [0, 1, 7], [0, 7, 10], [0, 10, 11],
        [1, 5, 9], [5, 11, 4], [11, 10, 2], [10, 7, 6], [7, 1, 8],
        [3, 9, 4], [3, 4, 2], [3, 2, 6], [3, 6, 8], [3, 8, 9],
        [4, 9, 5], [2, 4, 11], [6, 2, 10], [8, 6, 7], [9, 8, 1],
    ],
    dtype=np.int64,
)


def _icosahedron_vertices() -> np.ndarray:
    phi = (1.0 + np.sqrt(5.0)) / 2.0
    raw = np.array(
        [
            [-1, phi, 0], [1, phi, 0], [-1, -phi, 0], [1, -phi, 0],
            [0, -1, phi], [0, 1, phi], [0, -1, -phi], [0, 1, -phi],
            [phi, 0, -1], [phi, 0, 1], [-phi, 0, -1], [-phi, 0, 1],
        ],
        dtype=np.float64,
    )
    return raw / np.linalg.norm(raw, axis=1, keepdims=True)


def _subdivide(vertices: np.ndarray, faces: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    n = vertices.shape[0]
    edges = np.sort(faces[:, [0, 1, 1, 2, 2, 0]].reshape(-1, 2), axis=1)
    key = edges[:, 0] * np.int64(n) + edges[:, 1]
    _, first, inverse = np.unique(key, return_index=True, return_inverse=True)
    ends = edges[first]
    mid = (vertices[ends[:, 0]] + vertices[ends[:, 1]]) * 0.5
    mid /= np.sqrt(mid[:, 0] ** 2 + mid[:, 1] ** 2 + mid[:, 2] ** 2)[:, None]
    m = inverse.reshape(-1, 3) + n  # m[:, 0] = m_ab, m[:, 1] = m_bc, m[:, 2] = m_ca
    a, b, c = faces[:, 0], faces[:, 1], faces[:, 2]
    new_faces = np.concatenate(
        [
            np.stack([a, m[:, 0], m[:, 2]], axis=1),
            np.stack([b, m[:, 1], m[:, 0]], axis=1),
            np.stack([c, m[:, 2], m[:, 1]], axis=1),
            m,
        ]
    )
    return np.concatenate([vertices, mid]), new_faces


def icosphere(level: int, *, face_dtype=np.int32) -> tuple[np.ndarray, np.ndarray]:
    """Unit icosphere with ``level`` 1-to-4 subdivisions.

    Args:
        level: number of subdivisions, 0 (icosahedron) to 10.
        face_dtype: integer dtype of the returned faces.

    Returns:
        ``(V, F)``: float64 (10·4^level + 2, 3) vertices on the unit sphere and
        (20·4^level, 3) outward-oriented triangles.
    """
    if isinstance(level, bool) or not isinstance(level, (int, np.integer)) or not 0 <= level <= 10:
        raise ValueError(f"level must be an int in [0, 10] (got {level!r})")
    vertices, faces = _icosahedron_vertices(), _ICOSAHEDRON_FACES
    for _ in range(int(level)):
        vertices, faces = _subdivide(vertices, faces)
    return vertices, faces.astype(face_dtype)


def mean_edge_length(vertices: np.ndarray, faces: np.ndarray) -> float:
    """Mean length over the unique edges of a mesh."""
    edges = np.sort(np.asarray(faces, np.int64)[:, [0, 1, 1, 2, 2, 0]].reshape(-1, 2), axis=1)
    edges = np.unique(edges, axis=0)
    return float(np.linalg.norm(vertices[edges[:, 0]] - vertices[edges[:, 1]], axis=1).mean())


def noisy_icosphere(
    level: int, amplitude: float = 0.1, seed: int = 20240611, *, face_dtype=np.int32
) -> tuple[np.ndarray, np.ndarray]:
    """Icosphere with i.i.d. Gaussian jitter, not re-projected (the golden noisy mesh).

    ``V = V_ico + amplitude * h * Z`` with h the clean mesh's mean edge length and
    ``Z = numpy.random.default_rng(seed).standard_normal((N, 3))``; level 4 with the
    defaults is ``ref_noisy_ico4.npz``. The jitter makes obtuse triangles and a few
    positive off-diagonal entries in L.
    """
    if not np.isfinite(amplitude) or amplitude < 0:
        raise ValueError(f"amplitude must be a finite number >= 0 (got {amplitude!r})")
    vertices, faces = icosphere(level, face_dtype=face_dtype)
    h = mean_edge_length(vertices, faces)
    z = np.random.default_rng(seed).standard_normal(vertices.shape)
    return vertices + amplitude * h * z, faces
