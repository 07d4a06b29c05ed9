"""What CUDABackend.to_device hands numba: arrays numba's device array sees as contiguous.

Found on an H100, invisible to the simulator (its device arrays are NumPy arrays): NumPy
lets an axis of length 1 have any stride (``v[None]`` has stride 0) and still calls the
array C-contiguous, but numba's device-array layout (``dummyarray``) does not, so
``cuda.to_device`` copied such an array by walking it one element at a time in Python
(1.1 s for the (1, 163842, 3) vertices of one mesh). The layout check runs without a GPU.
"""

import numpy as np
import pytest
from numba.cuda.cudadrv import dummyarray

from kernelrt.device_arrays import c_strides as _c_strides


def _numba_sees_contiguous(a: np.ndarray) -> bool:
    return dummyarray.Array.from_desc(0, a.shape, a.strides, a.itemsize).is_c_contig


@pytest.mark.parametrize(
    "make",
    [
        lambda v: v[None],  # one subject's vertices, as MeshTopology.assemble passes them
        lambda v: v[:, None, :],
        lambda v: v.T,  # not contiguous at all: copied
        lambda v: v,
        lambda v: v[:1],
        lambda v: np.float64(3.0) * np.ones(()),  # zero-dimensional
    ],
    ids=["leading-new-axis", "middle-new-axis", "transposed", "plain", "one-row", "0-d"],
)
def test_host_arrays_reach_numba_with_standard_strides(make):
    host = make(np.arange(30.0).reshape(10, 3))
    ready = _c_strides(host)
    assert _numba_sees_contiguous(ready)
    np.testing.assert_array_equal(ready, host)  # exact: a view or a copy
    if host.ndim and host.flags.c_contiguous:
        assert np.shares_memory(ready, host)  # a view, not a copy, when NumPy already had it contiguous


def test_the_case_that_was_slow_is_one_extent():
    v = np.ones((163_842, 3))[None]
    assert not _numba_sees_contiguous(v)  # what numba was handed before
    extents = dummyarray.Array.from_desc(0, v.shape, _c_strides(v).strides, 8).iter_contiguous_extent()
    assert len(list(extents)) == 1
