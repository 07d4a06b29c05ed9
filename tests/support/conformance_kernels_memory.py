"""Conformance kernels (see conformance_kernels.py): local arrays, constant arrays, records."""

from __future__ import annotations

from typing import Any

import numpy as np
from numba import cuda
from numba.cuda import complex128, int32

from tests.support.conformance_case import REFUSE, Case

# -- cudapy/test_localmem.py, cudapy/test_constmem.py: local and constant arrays ---------------


def culocal(A, B):
    C = cuda.local.array(1000, dtype=int32)
    for i in range(C.shape[0]):
        C[i] = A[i]
    for i in range(C.shape[0]):
        B[i] = C[i]


def culocalcomplex(A, B):
    C = cuda.local.array(100, dtype=complex128)
    for i in range(C.shape[0]):
        C[i] = A[i]
    for i in range(C.shape[0]):
        B[i] = C[i]


def culocal1tuple(A, B):
    C = cuda.local.array((5,), dtype=int32)
    for i in range(C.shape[0]):
        C[i] = A[i]
    for i in range(C.shape[0]):
        B[i] = C[i]


CONST1D = np.arange(10, dtype=np.float64) / 2.0
CONST2D = np.asfortranarray(np.arange(100, dtype=np.int32).reshape(10, 10))
CONST_RECORD = np.array([(1.0, 2), (3.0, 4)], dtype=[("x", float), ("y", int)])


def cuconst(A):
    C = cuda.const.array_like(CONST1D)
    i = cuda.grid(1)

    # +1 or it'll be loaded & stored as a u32
    A[i] = C[i] + 1.0


def cuconst2d(A):
    C = cuda.const.array_like(CONST2D)
    i, j = cuda.grid(2)
    A[i, j] = C[i, j]


def cuconstRec(A, B):
    C = cuda.const.array_like(CONST_RECORD)
    i = cuda.grid(1)
    A[i] = C[i]["x"]
    B[i] = C[i]["y"]


# -- cudapy/test_record_dtype.py: records --------------------------------------------------------


def set_a(ary, i, v):
    ary[i].a = v


def set_record(ary, i, j):
    ary[i] = ary[j]


def record_read_2d_array(r, a):
    a[0, 0] = r.j[0, 0]
    a[0, 1] = r.j[0, 1]
    a[1, 0] = r.j[1, 0]
    a[1, 1] = r.j[1, 1]
    a[2, 0] = r.j[2, 0]
    a[2, 1] = r.j[2, 1]


recordtype = np.dtype(
    [
        ("a", np.float64),
        ("b", np.int32),
        ("c", np.complex64),
        ("d", (np.uint8, 5)),
    ],
    align=True,
)

recordwith2darray = np.dtype([("i", np.int32), ("j", np.float32, (3, 2))])


# -- launch cases --------------------------------------------------------------------------------


def _records(rng: np.random.Generator) -> np.recarray:
    ary = np.zeros(3, dtype=recordtype).view(np.recarray)
    for i in range(ary.size):  # as TestRecordDtype.setUp fills its sample
        x = i + 1
        ary[i]["a"] = x / 2
        ary[i]["b"] = x
        ary[i]["c"] = x * 1j
        ary[i]["d"] = "%d" % x
    return ary


def _set_a_ref(ary: np.recarray, i: int, v: float) -> tuple[Any, ...]:
    ary = ary.copy()
    ary[i].a = v
    return (ary,)


def _rec2d(rng: np.random.Generator) -> tuple[Any, ...]:
    rec = np.zeros(1, dtype=recordwith2darray).view(np.recarray)[0]
    rec["j"][:] = np.asarray([5.0, 6.0, 7.0, 8.0, 9.0, 10.0], np.float32).reshape(3, 2)
    return rec, np.zeros((3, 2), np.float32)


_L = "cudapy/test_localmem.py::TestCudaLocalMem."
_C = "cudapy/test_constmem.py::TestCudaConstantMemory."
_R = "cudapy/test_record_dtype.py::TestRecordDtype."

CASES = [
    Case("local_array", _L + "test_local_array (cuda.jit(sig)(culocal))", cuda.jit(culocal), (1,), (1,),
         lambda r: (np.arange(1000, dtype=np.int32), np.zeros(1000, np.int32)), (1,),
         reference=lambda a, b: (a,)),
    Case("local_array_complex", _L + "test_local_array_complex", cuda.jit(culocalcomplex), (1,), (1,),
         lambda r: ((np.arange(100, dtype="complex128") - 1) / 2j, np.zeros(100, np.complex128)), (1,),
         reference=lambda a, b: (a,)),
    Case("local_array_1_tuple", _L + "test_local_array_1_tuple", cuda.jit(culocal1tuple), (1,), (1,),
         lambda r: (np.arange(5, dtype=np.int32), np.zeros(5, np.int32)), (1,), reference=lambda a, b: (a,)),
    Case("const_array", _C + "test_const_array", cuda.jit(cuconst), (2,), (5,),
         lambda r: (np.zeros_like(CONST1D),), (0,), reference=lambda a: (CONST1D + 1,)),
    Case("const_array_2d", _C + "test_const_array_2d", cuda.jit(cuconst2d), (2, 2), (5, 5),
         lambda r: (np.zeros_like(CONST2D, order="C"),), (0,), reference=lambda a: (CONST2D,)),
    Case("const_record", _C + "test_const_record", cuda.jit(cuconstRec), (2,), (1,),
         lambda r: (np.zeros(2, dtype=float), np.zeros(2, dtype=int)), (0, 1),
         reference=lambda a, b: (CONST_RECORD["x"], CONST_RECORD["y"])),
    Case("record_set_field", _R + "test_set_a", cuda.jit(set_a), (1,), (1,),
         lambda r: (_records(r), 1, 3.1415), (0,), reference=_set_a_ref),
    Case("record_set_record", _R + "test_set_record", cuda.jit(set_record), (1,), (1,),
         lambda r: (_records(r), 0, 2), (0,), reference=lambda a, i, j: (a[[2, 1, 2]],)),
    Case("record_read_2d_array", _R + "test_record_read_2d_array", cuda.jit(record_read_2d_array), (1,), (1,),
         _rec2d, (1,), reference=lambda rec, a: (rec["j"],), expect=REFUSE),
]
