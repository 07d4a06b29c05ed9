"""Block Lanczos with thick restarts (Krylov–Schur) for the largest eigenpairs of an SPD operator.

Owns the Krylov iteration of the Cholesky route (eigen.py): shift-invert hands it
``S = M^½ (L - σM)⁻¹ M^½``, whose largest eigenvalues θ = 1/(λ - σ) are the smallest λ.

Why not ARPACK (what SciPy's ``eigsh`` and SpectralBrain use): ARPACK applies the operator
one vector at a time and reorthogonalises with matrix-vector products, ~10 s of 20 s at
163,842 vertices and k = 100 (docs/laplacian.md). Here the operator takes a block of
``b`` vectors, which a sparse Cholesky solves ~2.3x faster per column than one at a
time, and every orthogonalisation is a matrix-matrix product (BLAS 3). A block also
finds whole multiplets (spheres have eigenvalues of multiplicity 2l + 1) instead of one
member at a time.

The iteration keeps ``S V = V H + Q B`` exact (full reorthogonalisation, twice: classical
Gram–Schmidt is stable only when repeated). At a restart the best ``keep`` Ritz vectors
stay, with the last residual block; the residual norm of Ritz pair i is ``‖B y_i‖``.

Reading the basis is the iteration's cost beside the solves, and it is memory-bound, so
the basis is column-major (a block of vectors is one contiguous piece) and every product
with it is a GEMM in BLAS's good shape (a column-major result; NumPy's ``@`` returns a
row-major one through a GEMM with a tiny row count, which OpenBLAS runs ~3x slower, 55 ms
against 18 ms for a 163,842 x 120 basis times 120 x 4): at 163,842 vertices, k = 50, the
iteration's own time went from 8.0 s to 3.1-3.4 s (Intel Xeon, 2 vCPU, one BLAS thread).
Then to 2.5-3.0 s by making no new n-row arrays: the block's Q goes straight into the
basis, a restart rotates the basis in place (``rotate_columns``), the column norms come
from the Gram matrix the Cholesky QR needs anyway, and a block of the basis goes to the
solve as it is (each new array of n rows costs its page faults, ~2 ms per MB on a fresh
VM, and a copy). The products split the basis' rows between two threads
(basis_products.py), which a multithreaded BLAS does not do for these shapes.

Not done, measured: skipping the whole-basis pass on every other block (partial
reorthogonalisation) left ~1e-13 of lost orthogonality in H, and the residual estimates
stalled at 3e-13, above the 1e-13 asked for (40,962 vertices, k = 50).
"""

from __future__ import annotations

import numpy as np
from scipy.linalg import cholesky, eigh, solve_triangular

from .basis_products import inner as _inner
from .basis_products import product_into
from .basis_products import rotate_columns
from .basis_products import subtract_product as _subtract_product
from .basis_products import subtract_then_inner
from .eigen_report import EigenConvergenceError

__all__ = ["basis_workspace", "block_lanczos", "map_pages"]

# Largest κ(R) of a block whose Cholesky QR needs no second pass (κ² ε ≈ 1e-14)
CHOLQR_ONE_PASS = 10.0
# A block whose R has a diagonal entry below this fraction of its largest has nearly dependent
# columns: Cholesky QR is not trusted there, Householder QR is
DEPENDENT_BLOCK = 1e-6
# Either QR's Q R equals W to ~ε‖W‖, so a column that the block's own cancellation left at a
# fraction r of the block's largest (R_jj / max R_ii) is off by ~ε / r in any direction, the
# basis' included. Below r = REPROJECT (ε / r > 1e-13) Q takes one more pass against the basis
# and a QR: without it, a start block spanning an invariant subspace (r = 2e-6 when the Krylov
# space ran out) left Q 1.4e-9 off orthogonal and the iteration stalled (1 of 50 pairs after
# 2 restarts at 10,242 vertices). Krylov blocks seldom come near it (κ < 5 nine times in ten).
REPROJECT = 1e-3


def _orthonormal_block(W, V, rng, out, gram=None):
    """``out := Q``, returning ``(R, D)`` with W = V D + Q R, Q orthonormal and orthogonal to V.

    ``gram`` is Wᵀ W if the caller has it; W is orthogonal to V on entry, and D (the
    caller adds it to W's coefficients on V) is zero unless the block's columns nearly
    coincide (``REPROJECT``). W is left as it is (the fallback below needs it: dividing it
    by an ill-conditioned R first would spoil its orthogonality to V).
    """
    if not (W.flags.f_contiguous and out.flags.f_contiguous):  # BLAS would write to copies
        raise ValueError("W and out must be column-major (Fortran-contiguous)")
    w = W.shape[1]
    R = _cholesky_qr(W, out, gram)
    if R is None:  # nearly dependent columns: Householder, whose Q is orthonormal for any W
        Q, R = np.linalg.qr(W)
        out[:] = Q
    diag = np.abs(np.diag(R))
    if not V.shape[1] or diag.min(initial=1.0) >= REPROJECT * diag.max(initial=1.0):
        return R, np.zeros((V.shape[1], w))
    # Q = V D' + Q₂ R₂ after one more pass against V, so W = V D' R + Q₂ (R₂ R)
    D = _inner(V, out)
    _subtract_product(out, V, D)
    Q2, R2 = np.linalg.qr(out)
    out[:] = Q2
    # A column that this pass nearly emptied (|R₂ⱼⱼ| < ½) was a cancelled column's direction
    # (R's row j is then ~0), which Householder may point into V: a random direction takes
    # its place, orthogonalised twice against V and the others, and its row of R₂ is zeroed,
    # so the basis keeps growing where the block met an invariant subspace.
    good = np.abs(np.diag(R2)) >= 0.5
    for j in np.flatnonzero(~good):
        x = rng.standard_normal(W.shape[0])
        for _ in range(2):
            for basis in (V, out[:, good]):
                x -= basis @ (basis.T @ x)
        out[:, j] = x / np.linalg.norm(x)
        good[j] = True
        R2[j, :] = 0.0
    return R2 @ R, D @ R


def _cholesky_qr(W, out, gram):
    """R with ``out := W R⁻¹`` by Cholesky QR (twice where needed), or None where it is not trusted."""
    w = W.shape[1]
    try:  # Cholesky QR twice: GEMMs and small triangular solves, ~5x faster than Householder
        R1 = cholesky(_inner(W, W) if gram is None else gram, lower=False)
        product_into(out, W, solve_triangular(R1, np.eye(w), lower=False))
        R = R1
        # One pass leaves QᵀQ - I ~ κ(W)² ε; the second one only where that is not below ~1e-14
        # (the Krylov blocks have κ(W) < 5 nine times in ten: this saves two passes over Q)
        if np.linalg.cond(R1) > CHOLQR_ONE_PASS:
            R2 = cholesky(_inner(out, out), lower=False)
            rotate_columns(out, solve_triangular(R2, np.eye(w), lower=False))  # out := out R2⁻¹, in place
            R = R2 @ R1
    except np.linalg.LinAlgError:  # nearly dependent columns
        return None
    return R if np.abs(np.diag(R)).min() > DEPENDENT_BLOCK * np.abs(np.diag(R)).max() else None


def _sizes(n, k, block, basis, keep):
    keep = min(k + block if keep is None else keep, n - block)
    size = min(max(2 * k, keep + 3 * block) if basis is None else max(basis, keep + 2 * block), n - block)
    return keep, size


def basis_workspace(n: int, k: int, *, block: int = 16, basis: int | None = None,
                    keep: int | None = None) -> np.ndarray:
    """The memory ``block_lanczos`` works in for these sizes (its ``workspace``), not yet mapped.

    A caller that has other work first maps it meanwhile on another thread (``map_pages``):
    the Cholesky route does while the factor is made (cholesky_route.py).
    """
    _, size = _sizes(n, k, block, basis, keep)
    # Column-major basis V = buffer.T: a block of basis vectors V[:, a:b] is one contiguous piece
    # of memory, so the reorthogonalisation GEMMs stream it (row-major, a narrow block is a
    # strided read that defeats the prefetcher: ~3x the time at 163,842 rows); and the buffer
    # can give its first k rows back as the result (see block_lanczos' end)
    return np.empty((size + 2 * block, n))


def map_pages(buffer: np.ndarray) -> None:
    """One write per 4 KB page of a fresh buffer, on this thread (NumPy releases the GIL for it).

    Where two threads first write the same fresh (transparent huge) page at once, each fault
    waited ~5 ms, and the first Lanczos cycle's blocks took 45-60 ms more than on mapped memory;
    the mapping itself took 23-28 ms for the Bunny's basis (50,000 x 166) after another solve
    had freed memory, 67 ms in a process that had not (Intel Xeon, 2 vCPU).
    """
    buffer.reshape(-1)[::512] = 0.0


def block_lanczos(apply, n: int, k: int, *, block: int = 16, basis: int | None = None, keep: int | None = None,
                  tol: float = 1e-12, maxiter: int = 100, start=None, progress=None, check_every: int = 2,
                  workspace: np.ndarray | None = None):
    """The k largest eigenpairs of a symmetric positive definite operator.

    Args:
        apply: ``apply(X) -> S X`` for X of shape (n, b), a column-major view of the basis
            that it must not change; a column-major result saves a copy.
        n: the operator's size.
        k: pairs wanted.
        block: vectors per application (the start block may be wider: see ``start``).
        basis: basis size before a restart (default ``max(2k, keep + 3 block)``).
        keep: Ritz vectors kept at a restart (default ``k + block``).
        tol: a pair has converged when ``‖S y - θ y‖ <= tol θ``.
        maxiter: restarts allowed.
        start: optional (n, j) start vectors (e.g. a previous solve's): random
            combinations of them form the first block.
        progress: optional ``progress(n_converged, k)`` after each Rayleigh–Ritz step.
        check_every: blocks between Rayleigh–Ritz steps (and at every restart).
        workspace: optional ``basis_workspace(n, k, block=, basis=, keep=)``, its pages
            mapped (``map_pages``); made here otherwise. The result's vectors are its
            first k rows, to which it shrinks.

    Returns:
        ``(theta (k,) descending, Y (n, k) orthonormal, residuals (k,), info)``, info with
        ``products`` (operator columns applied) and ``restarts``.
    """
    rng = np.random.default_rng(0)
    X = rng.standard_normal((n, block))
    if start is not None and start.shape[1]:
        # random combinations of the start vectors: a block that lies (nearly) in the
        # wanted subspace, with the block width of a fresh start
        X = start @ rng.standard_normal((start.shape[1], block))
    w = X.shape[1]
    keep, size = _sizes(n, k, w, basis, keep)
    buffer = workspace
    if buffer is None:
        buffer = basis_workspace(n, k, block=w, basis=basis, keep=keep)
        map_pages(buffer)
    elif not (buffer.shape == (size + 2 * w, n) and buffer.dtype == np.float64
              and buffer.flags.c_contiguous and buffer.flags.owndata):
        raise ValueError(f"workspace must be basis_workspace(n, k, ...) for these sizes: a float64 array of "
                         f"shape {(size + 2 * w, n)} that owns its memory (got {buffer.dtype}, {buffer.shape})")
    V = buffer.T
    H = np.zeros((size + 2 * w, size + 2 * w))
    _orthonormal_block(np.asfortranarray(X), V[:, :0], rng, V[:, :w])
    low, applied, cur, products, restarts, unchecked = 0, 0, w, 0, 0, 0
    while True:
        W = np.asfortranarray(apply(V[:, applied:cur]))
        if np.may_share_memory(W, V):  # W is updated in place below
            W = W.copy(order="F")
        products += W.shape[1]
        Vc = V[:, :cur]
        C = np.zeros((cur, W.shape[1]))
        # The three-term recurrence first: in exact arithmetic S V_j touches only the
        # blocks j - 1, j, j + 1 (all kept vectors after a restart), so this removes
        # nearly everything and one pass over the whole basis mends the rest (~1e-12 of
        # W). Reading the basis is the iteration's main cost (memory-bound), so a second
        # full pass runs only where cancellation says orthogonality was lost: where a
        # column kept under half its norm. The norms come from the Gram matrix that the
        # block's Cholesky QR needs anyway, ‖w‖² before the pass being ‖w‖² after it plus
        # the squares of what it removed (the basis is orthonormal).
        # The local subtraction and the whole-basis inner products in one pass over W's rows
        # (subtract_then_inner: a block of rows is read again while in cache): a cohort subject's
        # orthogonalisation 0.327-0.330 s against 0.351 s at 40,962 vertices, the Bunny's 0.40-0.42
        # against 0.45-0.47 s (k = 50, in one process; Intel Xeon, 2 vCPU). Fusing the whole-basis
        # subtraction with the Gram matrix as well was no faster (its 512-row GEMMs read 93+ columns).
        local = V[:, low:cur]
        C[low:] = _inner(local, W)
        C2, gram = subtract_then_inner(W, local, C[low:], Vc, gram=True)
        _subtract_product(W, Vc, C2)
        C += C2
        # Wᵀ W after that pass is the Gram matrix before it less C2ᵀ C2 (Vc orthonormal): no pass
        # over W of its own for it (~12 ms of a solve at 50,000 vertices, k = 50)
        gram -= C2.T @ C2
        after = np.diag(gram)
        if not np.all(after > 0.25 * (after + np.einsum("ij,ij->j", C2, C2))):
            C2 = _inner(Vc, W)  # cancellation: a second pass over the whole basis
            _subtract_product(W, Vc, C2)
            C += C2
            gram = _inner(W, W)
        R, D = _orthonormal_block(W, Vc, rng, V[:, cur:cur + w], gram)
        C += D
        H[:cur, applied:cur] = C
        H[applied:cur, :cur] = C.T
        H[cur:cur + w, applied:cur] = R
        H[applied:cur, cur:cur + w] = R.T
        low, applied, cur = applied, cur, cur + w
        unchecked += 1
        full = cur >= size
        # Rayleigh–Ritz every few blocks, not only at restarts: a solve that converges
        # mid-basis stops there (an eigh of the small H costs far less than a block). SciPy's
        # default driver (MRRR, "evr"): divide and conquer ("evd") is faster per call (4 ms
        # against 5.4 at 240) but took twice the products at 40,962 vertices, k = 100.
        if applied < k + w or not (full or unchecked >= check_every):
            continue
        unchecked = 0
        theta, Y = eigh(H[:applied, :applied])
        theta, Y = theta[::-1], Y[:, ::-1]
        residuals = np.linalg.norm(H[applied:cur, :applied] @ Y, axis=0)
        relative = residuals[:k] / np.abs(theta[:k])
        done = relative <= tol
        if progress is not None:
            progress(int(np.count_nonzero(done)), k)
        if done.all():
            break
        if not full:
            continue
        if restarts >= maxiter:
            raise EigenConvergenceError(
                f"block Lanczos: {int(done.sum())} of {k} eigenpairs converged after {maxiter} restarts "
                f"({products} operator columns); worst relative residual {relative.max():.2e} > tol = {tol:g}",
                evals=theta[:k], residuals=relative, n_converged=int(done.sum()),
            )
        restarts += 1
        # thick restart: the best `keep` Ritz vectors, then the residual block
        B = H[applied:cur, :applied] @ Y[:, :keep]
        rotate_columns(V, Y[:, :keep])
        V[:, keep:keep + w] = V[:, applied:cur]
        H[:] = 0.0
        H[:keep, :keep] = np.diag(theta[:keep])
        H[keep:keep + w, :keep] = B
        H[:keep, keep:keep + w] = B.T
        low, applied, cur = 0, keep, keep + w
    # The Ritz vectors in place of the basis' first k columns, which are the start of the
    # buffer; the buffer then shrinks to them (realloc keeps the start): no second n x k
    # array (at 163,842 x 100, 131 MB to allocate and fault in, ~0.3 s on a fresh VM).
    rotate_columns(V, Y[:, :k])
    del V, Vc, local  # views of the whole buffer: never used after the resize
    buffer.resize((k, n), refcheck=False)
    vectors = buffer.T
    # One reorthogonalisation pass leaves the basis orthogonal to ~1e-11 of the largest
    # θ; Löwdin's symmetric orthonormalisation mends that with the smallest change to
    # each vector (G^-½ is I to ~1e-11, far below the residuals).
    w_gram, u_gram = eigh(_inner(vectors, vectors))
    rotate_columns(vectors, (u_gram / np.sqrt(w_gram)) @ u_gram.T)
    return theta[:k], vectors, relative, {"products": products, "restarts": restarts}
