"""A CPU quick start against an installed kernelrt: tools/ci_install_check.sh runs it.

One kernel of the user's own, launched through ``get_backend("auto")`` (the CPU on a machine
without a GPU), and the kernel library's Laplacian and heat kernel signature on a small
icosphere. Exits non-zero, with the reason, if a result is wrong. Prints where kernelrt was
imported from, so the caller can check that it is the installed copy.
"""

from __future__ import annotations

import numpy as np

import kernelrt
from kernelrt.kernels import laplacian as lap

backend = kernelrt.get_backend("auto")
print(f"kernelrt {kernelrt.__version__} from {kernelrt.__file__} on {backend.name}: {backend.device_name}")


@kernelrt.kernel
def axpy(i, out, x, y, a):
    if i < out.shape[0]:
        out[i] = a * x[i] + y[i]


n = 10_000
rng = np.random.default_rng(0)
x, y = rng.random(n), rng.random(n)
out = backend.zeros(n, np.float64)
backend.launch_kernel(axpy, (n + 255) // 256, 256, out, backend.to_device(x), backend.to_device(y), 2.0)
# exact: one multiply and one add per element, in the same order as NumPy's (no FMA on the CPU)
np.testing.assert_array_equal(backend.to_host(out), 2.0 * x + y)

vertices, faces = lap.icosphere(2)  # 162 vertices
L, m = lap.cotan_laplacian(vertices, faces)
# L = D - W: every row sums to zero, up to the rounding of its cotangent weights
assert abs(L.sum(axis=1)).max() < 1e-12 * abs(L).max(), "Laplacian rows do not sum to zero"
# the lumped masses add up to the sphere's area, which the icosphere approaches from below
assert 0.95 * 4 * np.pi < m.sum() < 4 * np.pi, f"total mass {m.sum()}"
evals, evecs = lap.eigenpairs(L, m, k=10)
assert abs(evals[0]) < 1e-8 and evals[1] > 1.0, f"eigenvalues {evals[:3]}"  # one constant mode, then l = 1 (about 2)
hks = lap.hks(evals, evecs)
assert hks.shape[0] == len(vertices) and np.isfinite(hks).all()
print(f"quick start ok: axpy on {n} elements, Laplacian of {len(vertices)} vertices, eigenvalues {evals[:4].round(3)}")
