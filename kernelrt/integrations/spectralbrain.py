"""SpectralBrain 0.1 on kernelrt: ``_cotangent_laplacian`` swapped, SpectralBrain's types kept, and a backend.

After ``enable()`` (or with ``KERNELRT_SPECTRALBRAIN=1`` in the environment) SpectralBrain's
own API assembles its cotangent Laplacian with kernelrt: ``spectralbrain.core.meshes.
_cotangent_laplacian`` is replaced, and every caller reaches the replacement, because
SpectralBrain looks it up at call time (``BrainMesh.compute_laplacian``,
``mean_curvature`` and its geodesics in ``core.meshes`` itself; the anisotropic LBO,
``collections`` and the Steklov operator import it inside their functions). It returns
exactly SpectralBrain's types: L as ``csc_matrix`` with SpectralBrain's pruned pattern
(``as_spectralbrain``), M as a diagonal ``csc_matrix``, with the same values (bit-equal
on manifold meshes; within an ulp or two on non-manifold edges, docs/laplacian.md), and
it reports degenerate faces and isolated vertices as SpectralBrain does, with
``logger.warning`` on SpectralBrain's own logger (``spectralbrain.core.meshes``), not with
a warning, so suites that run with warnings as errors pass. The assembly runs on the
CPU backend: the result is wanted on the host, and the CPU path is the bit-exact one.

Inputs SpectralBrain accepts and kernelrt computes differently or refuses (vertices that
are not a float64 array, such as float32, which SpectralBrain computes in float32; faces
that are floats, negative or out of range; an empty face array) are handed back to
SpectralBrain's own function, so the user gets SpectralBrain's result or its own error;
each is counted in ``stats()["fallbacks"]`` and logged. ``calls`` counts the Laplacians
(and ``KernelrtBackend`` eigensolves) kernelrt computed in this process. Worker
processes that SpectralBrain starts inherit the switch (hooks.py). The patches apply to
SpectralBrain 0.1.x only, and only when every name they replace exists; otherwise one
``RuntimeWarning``, and SpectralBrain runs its own code (``stats()["refused"]`` says why).

``KernelrtBackend`` is a SpectralBrain compute backend whose ``eigsh`` is kernelrt's
``eigenpairs``: pass it wherever SpectralBrain takes a backend
(``mesh.decompose(k, backend=KernelrtBackend())``, the operators' ``backend=``), or ask
SpectralBrain's factory for it with the integration on: ``get_gpu_backend("kernelrt")``.

Importing this module imports neither SpectralBrain nor numba nor the kernel library: the
start-up hook imports it when a process where the variable is set first imports
SpectralBrain.
"""

from __future__ import annotations

import logging
from typing import Any

import numpy as np

import kernelrt

from .hooks import Integration, Patch

__all__ = ["INTEGRATION", "KernelrtBackend", "disable", "enable", "stats"]

MESHES = "spectralbrain.core.meshes"
BACKENDS = "spectralbrain.core.backends"
SPECTRALBRAIN_SIGMA = -0.01  # the shift SpectralBrain's eigsh defaults to
log = logging.getLogger("kernelrt.integrations.spectralbrain")
def _fallback(attribute: str, reason, *args, **kwargs):
    INTEGRATION.record("fallbacks")
    log.info("kernelrt refused the input (%s); SpectralBrain's own %s runs", reason, attribute)
    return INTEGRATION.original(attribute)(*args, **kwargs)


def _cotangent_laplacian(vertices, faces):
    """kernelrt's ``spectralbrain.core.meshes._cotangent_laplacian(vertices, faces)``.

    Returns:
        ``(L, M)`` in SpectralBrain's types: ``csc_matrix`` L (pruned pattern) and the
        diagonal ``csc_matrix`` mass, as SpectralBrain's own function returns them.
    """
    if not INTEGRATION.enabled:  # a reference taken while enabled, called after disable()
        return INTEGRATION.original("_cotangent_laplacian")(vertices, faces)
    # Lazy: keeps numba out of interpreter start-up, where the .pth hook imports this module.
    from kernelrt.kernels.laplacian import MeshTopology, as_spectralbrain
    from kernelrt.kernels.laplacian.inputs import check_faces, check_vertices

    try:
        if not isinstance(vertices, np.ndarray):
            raise TypeError(f"vertices are a {type(vertices).__name__}, not a NumPy array")
        if vertices.dtype != np.float64:
            raise TypeError(f"vertices are {vertices.dtype}: SpectralBrain computes in that dtype, kernelrt in float64")
        v = check_vertices(vertices)
        f = check_faces(faces, v.shape[0])
    except (TypeError, ValueError) as e:
        return _fallback("_cotangent_laplacian", e, vertices, faces)
    # SpectralBrain's convention: logger.warning on its own module's logger, not a warning
    topology = MeshTopology(f, v.shape[0], report=logging.getLogger(MESHES))
    L, M = as_spectralbrain(*topology.assemble(v, "cpu"))
    INTEGRATION.record("calls")
    log.debug("_cotangent_laplacian on kernelrt: N=%d, F=%d, nnz=%d", v.shape[0], f.shape[0], L.nnz)
    return L, M


def _get_gpu_backend(name="cupy", **kwargs):
    """SpectralBrain's ``get_gpu_backend``, which also makes ``"kernelrt"``: a ``KernelrtBackend``."""
    if name == "kernelrt" and INTEGRATION.enabled:
        return KernelrtBackend(**kwargs)
    return INTEGRATION.original("get_gpu_backend")(name, **kwargs)


class KernelrtBackend:
    """A SpectralBrain compute backend whose eigensolver is kernelrt's ``eigenpairs``.

    Mirrors SpectralBrain's ``NumpyBackend``/``CupyBackend`` interface: ``eigsh(L, M, k,
    sigma=..., which=..., tol=..., maxiter=..., dense_max=...)`` returns host NumPy
    ``(evals, evecs)``, ascending and clipped at 0, M-orthonormal; the dense array methods
    (``array``, ``zeros``, ``exp``, ``matmul``, ``to_numpy``, ...) run on NumPy, or on CuPy
    when kernelrt's backend is CUDA and CuPy is installed (as ``CupyBackend``'s do).
    ``sparse_matrix`` builds host SciPy matrices, which ``eigsh`` reads.

    Args:
        backend: the kernelrt backend (or kind) the eigensolver runs on; None is "auto".
        method: ``eigenpairs``' route: "auto" (dense for small meshes, Cholesky on the
            CPU, Chebyshev on a GPU beyond ``dense_max``), "cholesky", "shift-invert"
            (SpectralBrain's own ARPACK call), "dense" or "chebyshev".
        **options: further ``eigenpairs`` keywords (``factor``, ``progress``, ...).

    Attributes:
        name: "kernelrt" (SpectralBrain records it in the decomposition's metadata).
        last: the ``Eigenpairs`` of the last solve (route, residuals, seconds), or None.
    """

    name = "kernelrt"

    def __init__(self, backend: str | kernelrt.Backend | None = None, method: str = "auto", **options: Any) -> None:
        self.backend = kernelrt.get_backend(backend)
        self.method, self.options, self.last = method, options, None
        self._xp = np
        if self.backend.name == "cuda":
            # on use: the kernel family loads numba (see _cotangent_laplacian)
            from kernelrt.kernels.laplacian.placement import cupy_or_none

            self._xp = cupy_or_none(self.backend) or np

    def __repr__(self):
        return f"<KernelrtBackend on {self.backend.name} ({self.backend.device_name}), method={self.method!r}>"

    # -- the eigensolver -------------------------------------------------------------------

    def eigsh(self, L, M=None, k: int = 100, *, sigma: float = SPECTRALBRAIN_SIGMA, which: str = "LM",
              tol: float = 0.0, maxiter: int | None = None, dense_max: int = 20000) -> tuple[np.ndarray, np.ndarray]:
        """Smallest-k generalised eigenpairs ``L v = λ M v`` with kernelrt, SpectralBrain's signature.

        SpectralBrain's defaults map to kernelrt's: ``sigma=-0.01`` lets the Cholesky route
        scale the shift with the area (another value is passed on), ``tol=0`` is each
        route's own default (another value is passed on), ``which`` other than "LM" takes
        SpectralBrain's own ARPACK route ("shift-invert"), ``maxiter`` and ``dense_max``
        are passed on. ``M=None`` solves the standard problem.

        A mass matrix that is not diagonal, or a mesh in several connected components
        (kernelrt refuses both: any basis of several zero modes is as good), is solved
        as SpectralBrain's GPU backends do then: by SciPy's ARPACK shift-invert on the
        host, with a logged warning, counted in ``stats()["fallbacks"]``.

        Returns:
            ``(evals (k,), evecs (N, k))``: host NumPy, ascending, clipped at 0.
        """
        # Lazy: the kernel family loads numba (see _cotangent_laplacian).
        from kernelrt.kernels.laplacian import DisconnectedMeshError, eigenpairs
        from kernelrt.kernels.laplacian.inputs import mass_vector

        n = L.shape[0]
        try:
            m = np.ones(n) if M is None else mass_vector(M, n, "M")
        except ValueError as e:
            return self._arpack(L, M, k, sigma, which, tol, maxiter, e)
        method = self.method if which == "LM" else "shift-invert"
        options = dict(self.options, method=method, dense_max=dense_max, maxiter=maxiter, which=which)
        if sigma != SPECTRALBRAIN_SIGMA or method == "shift-invert":
            options["sigma"] = sigma
        if tol:
            options["tol"] = tol
        try:
            result = eigenpairs(L, m, k, backend=self.backend, **options)
        except DisconnectedMeshError as e:
            return self._arpack(L, M, k, sigma, which, tol, maxiter, e)
        self.last = result
        INTEGRATION.record("calls")
        return np.asarray(result.evals), np.asarray(result.evecs)

    @staticmethod
    def _arpack(L, M, k, sigma, which, tol, maxiter, reason):
        """SpectralBrain's CPU route (its GPU backends' fallback): SciPy ARPACK shift-invert."""
        # SciPy on use, not at interpreter start-up (where the .pth hook imports this module)
        import scipy.sparse as sp
        from scipy.sparse.linalg import eigsh

        INTEGRATION.record("fallbacks")
        log.warning("KernelrtBackend.eigsh: %s -- solving with SciPy's ARPACK shift-invert on the host instead",
                    reason)
        evals, evecs = eigsh(sp.csc_matrix(L, dtype=np.float64),
                             M=None if M is None else sp.csc_matrix(M, dtype=np.float64),
                             k=k, sigma=sigma, which=which, tol=tol, maxiter=maxiter)
        order = np.argsort(evals)
        return np.clip(evals[order], 0.0, None), evecs[:, order]

    # -- sparse and dense arrays, as SpectralBrain's NumpyBackend (CuPy on a CUDA backend) ----

    @staticmethod
    def sparse_matrix(data, row, col, shape, *, format: str = "csc"):
        """A host SciPy sparse matrix from COO triplets (``"csc"``, ``"csr"`` or ``"coo"``)."""
        import scipy.sparse as sp  # on use (see _arpack)

        coo = sp.coo_matrix((np.asarray(data, dtype=np.float64),
                             (np.asarray(row, dtype=np.int64), np.asarray(col, dtype=np.int64))), shape=shape)
        return coo.asformat(format) if format in ("csc", "csr") else coo

    def array(self, data, dtype=np.float64):
        """``asarray(data, dtype)``: a NumPy array, or a CuPy one on a CUDA backend."""
        return self._xp.asarray(data, dtype=dtype)

    def zeros(self, shape, dtype=np.float64):
        """A zero-filled array (NumPy, or CuPy on a CUDA backend)."""
        return self._xp.zeros(shape, dtype=dtype)

    def ones(self, shape, dtype=np.float64):
        """An array of ones (NumPy, or CuPy on a CUDA backend)."""
        return self._xp.ones(shape, dtype=dtype)

    def eye(self, n, dtype=np.float64):
        """The n x n identity (NumPy, or CuPy on a CUDA backend)."""
        return self._xp.eye(n, dtype=dtype)

    def matmul(self, a, b):
        """Matrix product; sparse operands use their own ``@``."""
        if hasattr(a, "tocsr") or hasattr(b, "tocsr"):
            return a @ b
        return self._xp.matmul(a, b)

    def exp(self, x):
        """Elementwise exponential."""
        return self._xp.exp(x)

    def log(self, x):
        """Logarithm, clamped at 1e-300 as SpectralBrain's."""
        return self._xp.log(self._xp.clip(x, 1e-300, None))

    def sqrt(self, x):
        """Square root, clamped at 0 as SpectralBrain's."""
        return self._xp.sqrt(self._xp.clip(x, 0.0, None))

    def sum(self, x, axis=None):
        """Sum over ``axis`` (None: all entries)."""
        return self._xp.sum(x, axis=axis)

    def mean(self, x, axis=None):
        """Mean over ``axis`` (None: all entries)."""
        return self._xp.mean(x, axis=axis)

    def clip(self, x, a_min, a_max):
        """``x`` limited to ``[a_min, a_max]`` (None: no limit on that side)."""
        return self._xp.clip(x, a_min, a_max)

    def norm(self, x, axis=None, ord=None):
        """Vector or matrix norm, as ``numpy.linalg.norm``."""
        return self._xp.linalg.norm(x, axis=axis, ord=ord)

    def argsort(self, x, axis=-1):
        """The indices that sort ``x`` along ``axis``."""
        return self._xp.argsort(x, axis=axis)

    def concatenate(self, arrays, axis=0):
        """``arrays`` joined along an existing axis."""
        return self._xp.concatenate(arrays, axis=axis)

    def stack(self, arrays, axis=0):
        """``arrays`` joined along a new axis."""
        return self._xp.stack(arrays, axis=axis)

    def linspace(self, start, stop, num):
        """``num`` evenly spaced float64 values from ``start`` to ``stop``, both included."""
        return self._xp.linspace(start, stop, num, dtype=np.float64)

    def logspace(self, start, stop, num):
        """``num`` float64 values from 10**start to 10**stop, evenly spaced in log."""
        return self._xp.logspace(start, stop, num, dtype=np.float64)

    @staticmethod
    def to_numpy(x) -> np.ndarray:
        """A host NumPy array from a NumPy or CuPy array, a sparse matrix or anything array-like."""
        if isinstance(x, np.ndarray):
            return x
        if hasattr(x, "toarray"):  # sparse
            x = x.toarray()
        if hasattr(x, "get"):  # CuPy
            return x.get()
        return np.asarray(x)


INTEGRATION = Integration(
    "spectralbrain",
    "KERNELRT_SPECTRALBRAIN",
    patches=(Patch(MESHES, "_cotangent_laplacian", _cotangent_laplacian),
             Patch(BACKENDS, "get_gpu_backend", _get_gpu_backend)),
)


def enable() -> None:
    """Swap SpectralBrain's ``_cotangent_laplacian`` for kernelrt's, here and in processes started from now on.

    Also lets SpectralBrain's ``get_gpu_backend("kernelrt")`` make a ``KernelrtBackend``.
    """
    INTEGRATION.enable()


def disable() -> None:
    """Restore SpectralBrain's own ``_cotangent_laplacian`` and ``get_gpu_backend``."""
    INTEGRATION.disable()


def stats() -> dict:
    """This process's counters: ``enabled``, ``applied``, ``calls``, ``fallbacks``, ``pid``."""
    return INTEGRATION.stats()
