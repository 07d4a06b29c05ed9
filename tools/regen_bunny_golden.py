"""Regenerate tests/data/laplacian/ref_bunny.npz: SpectralBrain's L and m of the Stanford Bunny.

Needs pymeshfix (the mesh) and SpectralBrain 0.1.0 (``pip install -e ".[bench]"``); run from
the repository root:

    python tools/regen_bunny_golden.py [--check]

The file holds what tests/support/bunny.py needs to rebuild SpectralBrain's result from
kernelrt's deterministic assembly: SpectralBrain's values at the entries kernelrt sums in
another order (non-manifold edges, the diagonals of their rows), the SHA-256 of all its L
values on kernelrt's pattern and of its m, and its nnz. SpectralBrain's assembly uses only
+ - * / and sqrt in a fixed order, so the file is the same on every x86 machine.
``--check`` compares a fresh computation with the stored file instead of writing it.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import numpy as np
import scipy.sparse as sp

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # the repository, for tests.support

from kernelrt.kernels import laplacian as lap  # noqa: E402

from tests.support.bunny import GOLDEN, bunny_path, digest, read_binary_ply, reordered_positions  # noqa: E402


def reference() -> dict:
    import spectralbrain
    from spectralbrain.core.meshes import _cotangent_laplacian

    path = bunny_path()
    if path is None:
        raise SystemExit("pymeshfix with its StanfordBunny.ply is needed: pip install pymeshfix")
    V, F = read_binary_ply(path)
    L_sb, M_sb = _cotangent_laplacian(V, F.astype(np.intp))
    L_sb = sp.csr_matrix(L_sb)
    L, _ = lap.cotan_laplacian(V, F, "cpu")
    coo = L.tocoo()
    ref = np.asarray(L_sb[coo.row, coo.col]).ravel()  # SpectralBrain's values on kernelrt's pattern
    if np.count_nonzero(ref) != L_sb.nnz:
        raise SystemExit("SpectralBrain stores entries outside kernelrt's pattern")
    pos = reordered_positions(L, F)
    return {"positions": pos, "values": ref[pos], "digest_L": digest(ref),
            "digest_m": digest(M_sb.diagonal()), "nnz": L_sb.nnz,
            "made_with": f"spectralbrain {spectralbrain.__version__}, numpy {np.__version__}"}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--check", action="store_true", help="compare with the stored file")
    args = parser.parse_args()
    fresh = reference()
    if args.check:
        stored = np.load(GOLDEN)
        same = all(np.array_equal(stored[k], v) for k, v in fresh.items() if k != "made_with")
        print("identical" if same else "DIFFERENT")
        return 0 if same else 1
    np.savez_compressed(GOLDEN, **fresh)
    print(f"wrote {GOLDEN} ({GOLDEN.stat().st_size} bytes, {len(fresh['positions'])} stored values)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
