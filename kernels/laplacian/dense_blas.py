"""BLAS and LAPACK called from numba code: SciPy's own routines, by address.

Owns the four dense kernels the supernodal Cholesky (supernodal.py) runs on its fronts
and on blocks of right-hand sides: ``dgemm``, ``dtrsm``, ``dsyrk`` and ``dpotrf``. They
are SciPy's (``scipy.linalg.cython_blas`` / ``cython_lapack``, the BLAS that NumPy's
peers load and that threadpoolctl limits), called by address from compiled code: no
Python, no GIL, callable from ``prange`` threads, and cached in kernelrt's disk cache with
the functions that call them (``kernelrt.njit``).

Every argument is passed by address, as Fortran expects. Matrices are column-major, an
address plus a leading dimension; the callers pass ``array.ctypes.data + 8 * offset``.
Each wrapper takes ``scratch``, an int32 array of at least 6 entries and a float64 array
of 2, owned by the calling thread (the addresses of the scalar arguments).
"""

from __future__ import annotations

import llvmlite.binding as llvm
import numpy as np
from llvmlite import ir
from numba import types
from numba.core import cgutils
from numba.extending import get_cython_function_address, intrinsic

import kernelrt

__all__ = ["gemm", "trsm", "syrk", "potrf", "LOWER", "UPPER", "LEFT", "RIGHT", "NOTRANS", "TRANS", "scratch"]


def _external(module: str, name: str, nargs: int):
    """A numba intrinsic calling ``name`` from a SciPy Cython module, every argument an address.

    The routine's address is registered with LLVM under a kernelrt name, and compiled code
    calls that name. A ctypes pointer would bake this process's address into the machine
    code, which numba then refuses to cache; a named symbol is resolved when the cached
    code is loaded, after this module (imported first) has registered it.
    """
    symbol = f"kernelrt_scipy_{name}"
    llvm.add_symbol(symbol, get_cython_function_address(module, name))

    def typer(typingctx, addresses):  # one tuple: numba's intrinsics take no *args
        if not (isinstance(addresses, types.BaseTuple) and len(addresses) == nargs
                and all(isinstance(a, types.Integer) for a in addresses)):
            return None

        def codegen(context, builder, sig, llargs):
            byte_ptr = ir.IntType(8).as_pointer()
            fn = cgutils.get_or_insert_function(builder.module, ir.FunctionType(ir.VoidType(), [byte_ptr] * nargs),
                                                symbol)
            values = cgutils.unpack_tuple(builder, llargs[0], nargs)
            builder.call(fn, [builder.inttoptr(context.cast(builder, v, t, types.intp), byte_ptr)
                              for v, t in zip(values, addresses)])
            return context.get_dummy_value()

        return types.void(addresses), codegen

    typer.__name__ = symbol
    return intrinsic(typer)


_dgemm = _external("scipy.linalg.cython_blas", "dgemm", 13)
_dtrsm = _external("scipy.linalg.cython_blas", "dtrsm", 11)
_dsyrk = _external("scipy.linalg.cython_blas", "dsyrk", 10)
_dpotrf = _external("scipy.linalg.cython_lapack", "dpotrf", 5)

# Fortran's one-character options, as indices into the CHARS array every wrapper reads
LOWER, UPPER, LEFT, RIGHT, NOTRANS, TRANS = 0, 1, 2, 3, 4, 5
_CHARS = np.array([ord(c) for c in "LULRNT"], dtype=np.uint8)


@kernelrt.njit
def scratch():
    """(ints, doubles, chars) for one thread's calls: the scalar arguments' storage."""
    return np.zeros(8, np.int32), np.zeros(2, np.float64), _CHARS.copy()


@kernelrt.njit
def gemm(s, ta, tb, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc):
    """C = alpha op(A) op(B) + beta C; a, b, c are addresses (column-major)."""
    ints, dbl, ch = s
    ints[0], ints[1], ints[2], ints[3], ints[4], ints[5] = m, n, k, lda, ldb, ldc
    dbl[0], dbl[1] = alpha, beta
    i, d, q = ints.ctypes.data, dbl.ctypes.data, ch.ctypes.data
    _dgemm((q + ta, q + tb, i, i + 4, i + 8, d, a, i + 12, b, i + 16, d + 8, c, i + 20))


@kernelrt.njit
def trsm(s, side, uplo, ta, m, n, alpha, a, lda, b, ldb):
    """B = alpha op(A)⁻¹ B (side LEFT) or alpha B op(A)⁻¹ (RIGHT), A triangular, non-unit."""
    ints, dbl, ch = s
    ints[0], ints[1], ints[2], ints[3] = m, n, lda, ldb
    dbl[0] = alpha
    i, d, q = ints.ctypes.data, dbl.ctypes.data, ch.ctypes.data
    _dtrsm((q + side, q + uplo, q + ta, q + NOTRANS, i, i + 4, d, a, i + 8, b, i + 12))


@kernelrt.njit
def syrk(s, uplo, ta, n, k, alpha, a, lda, beta, c, ldc):
    """C = alpha A Aᵀ + beta C (ta NOTRANS), the ``uplo`` triangle of C only."""
    ints, dbl, ch = s
    ints[0], ints[1], ints[2], ints[3] = n, k, lda, ldc
    dbl[0], dbl[1] = alpha, beta
    i, d, q = ints.ctypes.data, dbl.ctypes.data, ch.ctypes.data
    _dsyrk((q + uplo, q + ta, i, i + 4, d, a, i + 8, d + 8, c, i + 12))


@kernelrt.njit
def potrf(s, uplo, n, a, lda) -> int:
    """Cholesky factor of A in place (the ``uplo`` triangle); LAPACK's info (0: success)."""
    ints, dbl, ch = s
    ints[0], ints[1], ints[2] = n, lda, 0
    i, q = ints.ctypes.data, ch.ctypes.data
    _dpotrf((q + uplo, i, a, i + 4, i + 8))
    return ints[2]
