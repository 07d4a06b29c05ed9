"""Chebyshev-filtered subspace iteration (ChFSI) for the k smallest eigenpairs of L v = λ M v.

Owns kernelrt's sparse eigensolver for meshes too big for the dense route. It needs only
products with L (no factorisation, no host step on a GPU), so it is written over the Backend
contract and runs on the CPU backend, under Numba's CUDA simulator and on a real GPU (Zhou &
Saad 2007; Zhou, Saad, Tiago & Chelikowsky 2006; the ChASE library).

It iterates on A = S L S, S = diag(1/√m), so blocks use plain orthonormality (v = S y is
M-orthonormal). Each outer iteration filters the block with p(A), p a Chebyshev polynomial
damping [a, λ_max] (a: the cut, the block's largest Ritz value) as ONE fused kernel per
degree (``cheb_step``: Z = α(A Y − c Y) + β X), then runs QR and Rayleigh–Ritz. Choices:

* λ_max is a Gershgorin bound (the smaller of A's and M⁻¹L's): an estimate that fell below
  λ_max would let the filter amplify the top of the spectrum without bound.
* Pair i has converged when ‖A y_i − θ_i y_i‖ ≤ tol · θ_k (θ_k: the largest wanted Ritz
  value). One scale for all pairs covers the null pair and stays above the products'
  rounding floor (~ε λ_max) as meshes grow; a per-pair scale θ_i would not.
* ``degree=None``: per iteration, the degree the slowest unconverged wanted pair needs
  (ChASE's rule), within DEGREE_RANGE, never with a gain over the active block above MAX_GAIN.
* Leading converged pairs are locked softly: no longer filtered, still in Rayleigh–Ritz.
* The default block grows once, to twice its guards, when a cluster straddles its edge
  (icospheres' multiplets at k = 50); an explicit ``block`` is kept as given.
* The start block is drawn where the block lives, by a seeded kernel (subspace.py): the same
  bits on every backend, nothing drawn on the host, nothing uploaded. ``v0`` replaces its
  leading columns. By default L is renumbered by reverse Cuthill–McKee (the block with it) so
  the filter's gathers stay in cache; the vectors come back in L's order.
* The block's GEMMs run with CuPy on the device on a real GPU, else with NumPy on the host
  (the simulator copies the block around each dense step). QR is CholeskyQR2 with a
  Householder fallback (subspace.py); the b x b problems (Cholesky, the projected ``eigh``)
  run on the host: at b <= ~200 a GPU would spend them on launch latency.
* ``info["phases"]`` times start, filter, QR, Rayleigh–Ritz and eigh (seconds). On a real GPU
  the device is synchronised at each phase's end, so the times are the device's; the next
  step would wait there anyway (QR and eigh read b x b results on the host).
"""

import math
import time

import numba
import numpy as np
import scipy.sparse as sp
from numba import cuda
from threadpoolctl import threadpool_limits

import kernelrt

from ..variants import variant
from .csr_rows import _geometry, csr_row_dot, csr_row_into
from .csr_scans import scaled_rows
from .eigen_report import EigenConvergenceError
from .loops import chebyshev_filter_cooperative
from .placement import cupy_or_none
from .sell import check_order, rcm_renumber
from .spmv import LaplacianOperator, _csr_parts, _to_host, csr_matmat
from .subspace import orthonormalize, start_block, subspace_kernels

__all__ = ["cheb_step", "chebyshev_eigenpairs", "chebyshev_kernels", "default_block"]

# A top of 200 with a block of 1.5 k: 655,362 vertices, k = 100 on an H200 in 9 iterations, 3.8-3.9 s, where (60,
# k + 0.2 k) took 79, 8.4 s (bench/chebyshev_sweep.py): each iteration is a QR and a Rayleigh–Ritz; products favour 60.
DEGREE_RANGE = (4, 200)
GROW_DEGREE = 240  # filter degree of a grown block's new random columns (then capped by MAX_GAIN)
MAX_GAIN = 1e10  # filter gain across the active block: QR keeps ~6 digits of the weakest column
NULL_FLOOR = 1e-12  # Ritz values below this x λ_max are null (rounding of A y is ~1e-15 λ_max)
GAP_FRACTION = 0.25  # grow when the cut gap is below this x the mean spacing of b - k values
CUT_SLACK = 1.2  # cut cap over the linear extrapolation θ_k b / k (> 1 keeps it above λ_k)
LOCK_MARGIN = 0.1  # lock below 0.1 x target: locked pairs improve through Rayleigh–Ritz only


@kernelrt.cuda_kernel
def cheb_step(data, indices, indptr, alpha, c, beta, Y, X, Z):
    # One Chebyshev degree, fused: spmv's product (columns on x, grid-stride rows on y),
    # with the shift, scale and three-term update applied while the row is in registers.
    q, r0 = cuda.grid(2)
    if q < Z.shape[1]:
        for r in range(r0, Z.shape[0], cuda.gridDim.y * cuda.blockDim.y):
            Z[r, q] = alpha * (csr_row_dot(data, indices, indptr, Y, r, q) - c * Y[r, q]) + beta * X[r, q]


@cheb_step.cpu
def _cheb_step_cpu(grid, block, data, indices, indptr, alpha, c, beta, Y, X, Z):
    k = Z.shape[1]
    for r in numba.prange(Z.shape[0]):
        csr_row_into(Z, r, data, indices, indptr, Y)
        for q in range(k):
            Z[r, q] = alpha * (Z[r, q] - c * Y[r, q]) + beta * X[r, q]


def chebyshev_kernels(itype: str = "int32") -> list:
    """(kernel, signature) of every launch here, for ``warm_specs``."""
    i1, f2 = ("uint64[::1]" if itype == "int64" else "uint32[::1]"), "float64[:, ::1]"
    return [(cheb_step, f"float64[::1], {i1}, {i1}, float64, float64, float64, {f2}, {f2}, {f2}"),
            (csr_matmat, f"float64[::1], {i1}, {i1}, {f2}, {f2}"), *subspace_kernels()]


def default_block(k: int, n: int) -> int:
    """The block width without ``block=``: k and max(8, ⌈k / 2⌉) guard vectors, at most n (it may grow once)."""
    return min(n, k + max(8, math.ceil(0.5 * k)))


def _int_arg(name, value, lo, hi=None):
    if isinstance(value, bool) or not isinstance(value, (int, np.integer)):
        raise TypeError(f"{name} must be an int (got {type(value).__name__} {value!r})")
    if value < lo or (hi is not None and value > hi):
        span = f"in [{lo}, {hi}]" if hi is not None else f">= {lo}"
        raise ValueError(f"{name} must be an int {span} (got {value})")
    return int(value)


def _host_array(a, name):
    try:
        return np.asarray(_to_host(a), dtype=np.float64)
    except (TypeError, ValueError) as exc:
        raise TypeError(f"{name} must be a numeric array (got {type(a).__name__})") from exc


def _validate(shape, m, k, tol, block, degree, maxiter, v0, progress):
    if len(shape) != 2 or shape[0] != shape[1] or shape[0] < 2:
        raise ValueError(f"L must be a square matrix of size >= 2 (got shape {tuple(shape)})")
    n, m = int(shape[0]), _host_array(m, "m")
    if m.shape != (n,):
        raise ValueError(f"m must have shape ({n},) to match L (got {m.shape})")
    if not (np.isfinite(m).all() and (m > 0).all()):
        raise ValueError("m must be finite and positive everywhere (got a zero, negative or non-finite entry)")
    k = _int_arg("k", k, 1, n - 1)
    if isinstance(tol, bool) or not isinstance(tol, (int, float, np.floating, np.integer)):
        raise TypeError(f"tol must be a float (got {type(tol).__name__} {tol!r})")
    if not (math.isfinite(tol) and tol > 0):
        raise ValueError(f"tol must be a finite float > 0 (got {tol!r})")
    b = default_block(k, n) if block is None else _int_arg("block", block, k + 1, n)
    degree = None if degree is None else _int_arg("degree", degree, 1)
    maxiter = _int_arg("maxiter", maxiter, 1)
    if v0 is not None:
        v0 = _host_array(v0, "v0")
        if v0.ndim != 2 or v0.shape[0] != n or not 1 <= v0.shape[1] <= b:
            raise ValueError(f"v0 must have shape ({n}, j) with 1 <= j <= block = {b} (got {v0.shape})")
        if not np.isfinite(v0).all():
            raise ValueError("v0 must be finite (got NaN or inf)")
    if progress is not None and not callable(progress):
        raise TypeError(f"progress must be callable or None (got {type(progress).__name__})")
    return n, m, k, float(tol), b, degree, maxiter, v0


class _Steps:
    """Launches of one kernel with per-step arguments (after ``fixed``) through one prepared launch,
    re-bound each step; prepared again when the arguments' kinds change (the caller's block)."""

    def __init__(self, be, kernel, grid, block, *fixed):
        self.be, self.kernel, self.grid, self.block, self.fixed, self.p = be, kernel, grid, block, fixed, None

    def __call__(self, *args):
        args, p = self.fixed + args, self.p
        if p is not None:
            try:
                p.bind(*args)
            except kernelrt.KernelArgumentError:  # other kinds (the caller's read-only block): prepare anew
                p = None
        if p is None:
            p = self.p = self.be.prepare(self.kernel, self.grid, self.block, *args)
        p()


class _Block:
    """Where the block lives (numpy, simulator device array or CuPy) and where its dense algebra runs.

    ``op`` keeps L's row order (built without ``order=``), so its kernels run on the block as is."""

    PHASES = ("setup", "start", "filter", "qr", "rayleigh_ritz", "eigh")

    def __init__(self, op, cp):
        self.op, self.be, self.cp = op, op.backend, cp
        self.xp, self.products = (np if cp is None else cp), 0
        self.qr = {"cholesky": 0, "householder": 0}
        self.phases, self._t = dict.fromkeys(self.PHASES, 0.0), time.perf_counter()

    def mark(self, phase):
        """Add the time since the last mark to ``phase`` (on a real GPU, once the device is done)."""
        if self.cp is not None:
            self.be.synchronize()
        now = time.perf_counter()
        self.phases[phase] += now - self._t
        self._t = now

    def random(self, n, width, col0=0):
        """Columns ``col0 .. col0 + width`` of the seeded start block (subspace.start_block), dense."""
        y = self.empty((n, width))
        start_block(self.be, y, col0)
        return self.to_dense(y)

    def geometry(self, shape):
        # The simulator runs each thread as a Python thread: one block row (the kernels' grid-stride
        # loop covers every row, with the same sums) makes its launches ~10x faster.
        grid, block = _geometry(*shape)
        return ((grid[0], 1), block) if self.be.is_simulator else (grid, block)

    def to_kernel(self, y):
        y = np.ascontiguousarray(y) if self.cp is None else self.cp.ascontiguousarray(y)
        return self.be.to_device(y) if self.cp is None and self.be.name != "cpu" else y

    def to_dense(self, y):
        return y if self.cp is not None or self.be.name == "cpu" else self.be.to_host(y)

    def host(self, a):
        return np.asarray(a) if self.cp is None else self.cp.asnumpy(a)

    def empty(self, shape):
        return self.be.allocate(shape, np.float64) if self.cp is None else self.cp.empty(shape, np.float64)

    def product(self, y):
        """A @ y (one SpMM)."""
        x = self.to_kernel(y)
        out, (grid, blk) = self.empty(x.shape), self.geometry(x.shape)
        self.be.launch_kernel(self.op.kernel_for(csr_matmat), grid, blk, *self.op.sparse, x, out)
        self.products += x.shape[1]
        return self.to_dense(out)

    def filter(self, y, degree, a, b):
        """p(A) y, p of degree ``degree`` damping [a, b], scaled so that p(0) = 1 (Zhou & Saad's recurrence).

        One ``cheb_step`` per degree through one prepared launch re-bound per step (``_Steps``):
        the checks, overload and views are resolved once, not per degree; same launches, same bits.
        """
        if variant("loops") == "cooperative":  # every degree in one persistent launch (loops.py)
            self.products += degree * y.shape[1]
            return chebyshev_filter_cooperative(self, y, degree, a, b)
        e, c = (b - a) / 2.0, (b + a) / 2.0
        sigma = sigma1 = e / (0.0 - c)
        x = self.to_kernel(y)  # may be the caller's array: read, never written
        yk, zk, (grid, blk) = self.empty(x.shape), self.empty(x.shape), self.geometry(x.shape)
        step = _Steps(self.be, self.op.kernel_for(cheb_step), grid, blk, *self.op.sparse)
        step(sigma1 / e, c, 0.0, x, x, yk)
        for i in range(degree - 1):
            s_new = 1.0 / (2.0 / sigma1 - sigma)
            step(2.0 * s_new / e, c, -sigma * s_new, yk, x, zk)
            x, yk, zk, sigma = yk, zk, (x if i else self.empty(x.shape)), s_new
        self.products += degree * x.shape[1]
        return self.to_dense(yk)

    def rayleigh_ritz(self, f, ql, wl):
        """(θ ascending, Ritz vectors Y, A Y, residual norms) of span(ql, f); ``wl`` = A ql.

        The locked vectors ``ql`` take part unfiltered (soft locking): held fixed, their errors would
        stay, through orthogonality, in the other pairs' residuals.
        """
        xp = self.xp
        for _ in range(2 if ql.shape[1] else 0):  # twice: one classical Gram–Schmidt pass loses digits
            f = f - ql @ (ql.T @ f)
        qa, how = orthonormalize(f, xp, self.host)
        self.qr[how] += 1
        self.mark("qr")
        q, w = xp.concatenate([ql, qa], axis=1), xp.concatenate([wl, self.product(qa)], axis=1)
        h = self.host(q.T @ w)
        self.mark("rayleigh_ritz")
        theta, g = np.linalg.eigh(0.5 * (h + h.T))  # b x b on the host (module docstring)
        g = xp.asarray(g)
        self.mark("eigh")
        y, w = q @ g, w @ g
        res = self.host(xp.linalg.norm(w - y * xp.asarray(theta)[None, :], axis=0))
        self.mark("rayleigh_ritz")
        return theta, y, w, res


def _degree(fixed, theta, res, target, a, b, pending):
    """The filter degree: ``fixed``, or enough for the slowest pending pair, capped by MAX_GAIN."""
    e, c = (b - a) / 2.0, (b + a) / 2.0
    # Pair i gains C_d(|t_i|) = cosh(d r_i) over [a, b]: exponential in d only once d r_i >> 1, so
    # the degree inverts the cosh (inverting exp(d r_i) gave degrees ~6x too low near convergence).
    rates = np.arccosh(np.maximum(np.abs(theta - c) / e, 1.0 + 1e-15))
    need = [math.acosh(res[i] / target) / rates[i] for i in pending if res[i] > target]
    d = fixed or min(max(math.ceil(max(need, default=1.0)), DEGREE_RANGE[0]), DEGREE_RANGE[1])
    return max(1, min(d, int(math.acosh(MAX_GAIN) / rates[0])))


def chebyshev_eigenpairs(
    L, m, k, *, backend=None, tol=1e-10, block=None, degree=None, maxiter=200, v0=None, progress=None,
    keep_on_device=False, order="rcm",
):
    """The k smallest eigenpairs of ``L v = λ M v``, M = diag(m), by Chebyshev-filtered subspace iteration.

    Args:
        L: (N, N) symmetric positive semi-definite matrix (scipy sparse, cupyx CSR or DeviceCSR).
        m: (N,) positive lumped mass.
        k: number of pairs, in [1, N - 1].
        backend: kernelrt backend, kind string, or None (auto).
        tol: pair i has converged when ‖A y − θ_i y‖ ≤ tol · θ_k, A = S L S, S = diag(1/√m), ‖y‖ = 1.
        block: block width in [k + 1, N]; default k + max(8, ⌈k / 2⌉) (guard vectors: a multiplet cut
            by k does not stall convergence, and the filter damps against a wider gap λ_k / λ_b),
            which may double its guards (module docstring).
        degree: fixed filter degree (>= 1), or None to choose it per iteration (module docstring).
        maxiter: outer iterations (filter + Rayleigh–Ritz) before giving up.
        v0: optional (N, j) start vectors (j <= block), e.g. a similar mesh's eigenvectors;
            seeded random columns fill the rest of the block.
        progress: optional ``progress(n_converged, k)``, called after each outer iteration.
        keep_on_device: on a CUDA backend, return evecs as a device array (CuPy's where the
            solve ran; under the simulator, one upload of the host result) for ``hks``/``wks``.
        order: "rcm" (default): iterate on L renumbered by reverse Cuthill–McKee (sell.rcm_renumber),
            so a row's gathers from the block fall near each other, in cache (H200, 655,362 vertices,
            k = 100: filter 3.1-3.3 -> 2.6 s); the start block is drawn in L's order and permuted,
            the result un-permuted. None: L's own order.

    Returns:
        (evals (k,) ascending and clipped at 0, evecs (N, k) M-orthonormal, info): evals host
        NumPy, evecs host NumPy unless ``keep_on_device``. info: "iterations", "products"
        (SpMM columns applied), "lambda_max" (the bound used), "degree" (the largest used),
        "degrees" (per iteration), "block" (final width), "converged", "qr" (how many QRs ran
        as "cholesky" and as "householder") and "phases" (seconds: "start", "filter", "qr",
        "rayleigh_ritz", "eigh", and "setup": checks, scaling and the operator's upload).

    Raises:
        EigenConvergenceError: ``maxiter`` iterations did not converge every pair.
        ValueError, TypeError: a bad argument (before any work).
    """
    t0, be = time.perf_counter(), kernelrt.get_backend(backend)
    check_order(order)
    data, indices, indptr, shape = _csr_parts(L)
    n, m, k, tol, b, degree, maxiter, v0 = _validate(shape, m, k, tol, block, degree, maxiter, v0, progress)
    data, indices, indptr = (_to_host(a) for a in (data, indices, indptr))
    data_s, lam_max, finite = scaled_rows(np.asarray(data, dtype=np.float64), indices, indptr, m)  # one pass
    if not finite:
        raise ValueError("L must have finite entries (got NaN or inf)")
    sr, lam_max = 1.0 / np.sqrt(m), float(lam_max)
    if lam_max <= 0:
        raise ValueError("L must have a nonzero entry (got an all-zero matrix)")
    perm = None
    if order == "rcm" and indices.shape[0] < 2**31:  # SciPy's RCM takes 32-bit indices
        perm, inverse, data_s, indices, indptr = rcm_renumber(data_s, indices, indptr)
    A = sp.csr_matrix((data_s, indices, indptr), shape=(n, n))
    # One BLAS thread for the host's share, on every backend. On the CPU the GEMMs are tall and
    # thin (memory-bound) and OpenBLAS's spinning threads took the cores from the filter's numba
    # threads (~1.5x slower on 2 cores at ico5, k = 50). On a GPU the host keeps only the b x b
    # Cholesky and eigh, far too small for threads: on the 16-core H100 machine the default pool
    # made each projected eigh 40-130 ms (7.1 s of 17.4 s at 655,362 vertices, k = 100;
    # bench/results/2026-11-26-nvidia-h100-80gb-hbm3.md). CuPy runs on the backend's device.
    with be.activated(), threadpool_limits(limits=1, user_api="blas"):
        blk = _Block(LaplacianOperator(A, backend=be), cupy_or_none(be))
        xp, blk.phases["setup"] = blk.xp, blk._t - t0  # checks, scaling, λ_max, the operator's upload
        y0 = blk.random(n, b)
        if v0 is not None:
            y0[:, : v0.shape[1]] = xp.asarray(v0 / sr[:, None])
        if perm is not None:  # drawn in L's order (the same start as without order), then renumbered
            perm, inverse = xp.asarray(perm), xp.asarray(inverse)
            y0 = y0[perm]
        blk.mark("start")
        theta, y, w, res = blk.rayleigh_ritz(y0, xp.zeros((n, 0)), xp.zeros((n, 0)))
        iterations, degrees = 0, []
        b_cap = min(n, 2 * b - k) if block is None else b  # the default block may double its guards, once
        while True:
            floor = next(iter(theta[theta > NULL_FLOOR * lam_max]), lam_max)  # λ₁: the first positive θ
            target = tol * max(theta[k - 1], floor)
            conv = res[:k] <= target
            if iterations and progress is not None:
                progress(int(conv.sum()), k)
            if conv.all():
                break
            if iterations == maxiter:
                raise EigenConvergenceError(
                    f"Chebyshev filtered subspace iteration: {int(conv.sum())} of {k} eigenpairs converged after "
                    f"{maxiter} iterations ({blk.products} products); worst residual ‖A y − θ y‖ / θ_k = "
                    f"{res[:k].max() * tol / target:.2e} > tol = {tol:g} (raise maxiter or block, or pass v0)",
                    evals=np.maximum(theta[:k], 0.0), residuals=res[:k] * tol / target, n_converged=int(conv.sum()),
                )
            # Leading pairs converged LOCK_MARGIN below the target are no longer filtered.
            nl = int(np.argmin(np.append(res[:k] <= LOCK_MARGIN * target, False)))
            # The cut: the block's largest Ritz value, capped at CUT_SLACK x a linear (Weyl-like) growth
            # from θ_k (so above λ_k) while top columns are still random (v0's fill, a grown block).
            # Never from a null pair still converging (its θ ~ 1e-4 would put the cut near 0).
            ref = max(k - 1, int(np.argmax(theta > 1e-3 * theta[-1])))
            cap = CUT_SLACK * b / (ref + 1) * theta[ref] if theta[ref] > NULL_FLOOR * lam_max else lam_max
            a = max(min(theta[-1], cap, 0.95 * lam_max), 10 * NULL_FLOOR * lam_max)
            d = _degree(degree, theta[nl:], res[nl:], target, a, lam_max, np.flatnonzero(~conv[nl:]))
            f = y[:, nl:]
            extra = min(b - k, b_cap - b)
            if extra > 0 and iterations >= 2 and theta[-1] - theta[k - 1] < GAP_FRACTION * extra / k * theta[k - 1]:
                # A cluster straddles the block's edge (a gap far below the mean spacing's), so pair k
                # converges at the cluster's splitting: double the guards. New random columns are filtered
                # first (GROW_DEGREE): unfiltered, they would hold the cut near λ_max for iterations.
                a_new = min(cap * (b + extra) / b, 0.95 * lam_max)
                d_new = _degree(GROW_DEGREE, np.zeros(1), None, None, a_new, lam_max, ())
                grow = blk.random(n, extra, col0=b)
                grow = grow if perm is None else grow[perm]
                blk.mark("start")
                grow = blk.filter(grow, d_new, a_new, lam_max)
                f, b = xp.concatenate([f, grow], axis=1), b + extra
            f = blk.filter(f, d, a, lam_max)
            blk.mark("filter")
            theta, y, w, res = blk.rayleigh_ritz(f, y[:, :nl], w[:, :nl])
            iterations, degrees = iterations + 1, [*degrees, d]
        y = y[:, :k] if perm is None else y[inverse, :k]  # back to L's order
        evecs = xp.asarray(sr)[:, None] * y  # where the block is: no N x k download for a report
        if not keep_on_device:
            evecs = blk.host(evecs)
        elif be.name == "cuda" and blk.cp is None:  # simulator, or no CuPy: the block was on the host
            evecs = be.to_device(np.ascontiguousarray(evecs))
    # the residuals in L v = λ M v are eigen_report.report's (eigenpairs reports them): a
    # product here would repeat it
    info = {"iterations": iterations, "products": blk.products, "lambda_max": lam_max,
            "degree": max(degrees, default=degree or 0), "degrees": degrees, "block": b, "converged": True,
            "qr": dict(blk.qr), "phases": dict(blk.phases)}
    return np.maximum(theta[:k], 0.0), evecs, info
