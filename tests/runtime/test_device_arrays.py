"""Foreign arrays and stream order, the parts that are pure Python (no GPU here).

``device_arrays`` classifies launch arguments, finds the device an array lives on, picks
the array type a backend hands out and reads the CUDA array interface or DLPack;
``stream_order`` picks the stream a launch runs on and the event waits that order it.
The stand-ins below carry exactly the attributes the real libraries expose: numba's
``__cuda_ndarray__`` and ``gpu_data.context.device.id``, CuPy's ``device.id`` and a
version-3 ``__cuda_array_interface__`` naming a stream, PyTorch's ``device.index`` and
a version-2 interface without one, DLPack's ``__dlpack__``/``__dlpack_device__``.
Making numba views and launching need a GPU: tests/gpu/test_foreign_arrays_gpu.py.
"""

from types import SimpleNamespace

import numpy as np
import pytest

from kernelrt import BackendMismatchError, CUDABackend, device_arrays
from kernelrt.arguments import describe, is_device_array
from kernelrt.device_arrays import (
    FOREIGN,
    HOST,
    NUMBA,
    OTHER,
    argument_kind,
    array_interface,
    check_arrays,
    device_of,
    launch_views,
    resolve_arrays,
)
from kernelrt.stream_order import (
    LEGACY_STREAM,
    as_numba_stream,
    needs_wait,
    numba_stream,
    plan_launch,
    stream_key,
)


class NumbaLike:
    __cuda_ndarray__ = True

    def __init__(self, device=0):
        self.gpu_data = SimpleNamespace(context=SimpleNamespace(device=SimpleNamespace(id=device)))


class CupyLike:
    def __init__(self, device=0, stream=LEGACY_STREAM, strides=None):
        self.device = SimpleNamespace(id=device)
        self.shape, self.dtype = (2, 3), np.dtype(np.float64)
        self.desc = {"shape": self.shape, "typestr": "<f8", "data": (0x1000, False), "version": 3,
                     "strides": strides, "stream": stream}

    @property
    def __cuda_array_interface__(self):
        return self.desc


class TorchLike:
    def __init__(self, index):
        self.device = SimpleNamespace(type="cuda" if index is not None else "cpu", index=index)
        self.shape, self.dtype = (8,), "torch.float64"

    @property
    def __cuda_array_interface__(self):
        if self.device.index is None:  # as PyTorch: a CPU tensor has no interface
            raise AttributeError("Can't get __cuda_array_interface__ on non-CUDA tensor")
        return {"shape": self.shape, "typestr": "<f8", "data": (0x2000, False), "version": 2, "strides": None}


class DLPackOnly:
    def __init__(self, device_type=2, device_id=0):
        self.where = (device_type, device_id)

    def __dlpack__(self, **kwargs):
        return "capsule"

    def __dlpack_device__(self):
        if self.where is None:
            raise BufferError("no device")
        return self.where


def test_argument_kinds():
    cases = [(np.ones(2), HOST), (NumbaLike(), NUMBA), (CupyLike(), FOREIGN), (TorchLike(0), FOREIGN),
             (DLPackOnly(), FOREIGN), (2.5, OTHER), (3, OTHER), (True, OTHER), (np.float32(1), OTHER),
             ((1, 2), OTHER), ("text", OTHER)]
    assert [argument_kind(a) for a, _ in cases] == [kind for _, kind in cases]
    assert device_arrays._KINDS[CupyLike] == FOREIGN and device_arrays._KINDS[float] == OTHER  # memoised per type


def test_an_interface_on_the_object_itself_is_decided_per_object():
    with_interface = SimpleNamespace(__cuda_array_interface__=CupyLike().desc)
    assert argument_kind(with_interface) == FOREIGN
    assert argument_kind(SimpleNamespace()) == OTHER  # same type, no interface
    assert SimpleNamespace not in device_arrays._KINDS


def test_device_of_each_kind_of_array():
    assert device_of(NumbaLike(3)) == 3
    assert device_of(CupyLike(device=2)) == 2
    assert device_of(TorchLike(1)) == 1
    assert device_of(DLPackOnly(2, 5)) == 5
    assert device_of(DLPackOnly(13, 4)) == 4  # managed memory is on a CUDA device too
    assert device_of(DLPackOnly(1, 0)) is None  # host memory: no device to compare
    broken = DLPackOnly()
    broken.where = None
    assert device_of(broken) is None  # a producer that cannot say is not checked
    assert device_of(TorchLike(None)) is None
    assert device_of(SimpleNamespace(device=SimpleNamespace(id=True))) is None  # a bool is no ordinal
    assert device_of(object()) is None


def test_dlpack_arrays_on_a_cuda_device_are_device_arrays():
    assert is_device_array(DLPackOnly(2, 0)) and is_device_array(DLPackOnly(13, 0))
    assert not is_device_array(DLPackOnly(1, 0)) and not is_device_array(np.ones(2))
    assert describe(DLPackOnly()) == "device array (DLPackOnly)"
    assert describe(TorchLike(0)) == "device array of torch.float64 with shape (8,)"


@pytest.mark.parametrize("bad", ["CuPy", "", None, 3])
def test_arrays_choice_is_checked(bad):
    with pytest.raises(ValueError, match=rf"arrays must be 'auto', 'cupy' or 'numba' \(got {bad!r}\)"):
        check_arrays(bad)
    with pytest.raises(ValueError, match="arrays must be"):  # refused before CUDA is looked for
        CUDABackend(arrays=bad)


def test_arrays_resolve_to_cupy_only_where_cupy_can_be_used(monkeypatch):
    assert resolve_arrays("auto", simulated=True) == "numba"
    with pytest.raises(ValueError, match=r"arrays='cupy' needs a real GPU.*\(got arrays='cupy'\)"):
        resolve_arrays("cupy", simulated=True)
    monkeypatch.setattr(device_arrays, "cupy_module", lambda: None)
    assert resolve_arrays("auto", simulated=False) == "numba"
    with pytest.raises(ImportError, match=r'needs CuPy.*pip install "kernelrt\[cuda12\]"'):
        resolve_arrays("cupy", simulated=False)
    working = SimpleNamespace(cuda=SimpleNamespace(runtime=SimpleNamespace(getDeviceCount=lambda: 1)))
    monkeypatch.setattr(device_arrays, "cupy_module", lambda: working)
    assert resolve_arrays("auto", simulated=False) == "cupy"
    assert resolve_arrays("cupy", simulated=False) == "cupy"
    assert resolve_arrays("numba", simulated=False) == "numba"


def test_a_cupy_that_cannot_reach_the_gpu_is_not_used(monkeypatch, caplog):
    def no_driver():
        raise RuntimeError("cudaErrorInsufficientDriver: CUDA driver version is insufficient")

    broken = SimpleNamespace(cuda=SimpleNamespace(runtime=SimpleNamespace(getDeviceCount=no_driver)))
    monkeypatch.setattr(device_arrays, "cupy_module", lambda: broken)
    with caplog.at_level("WARNING", logger="kernelrt"):
        assert resolve_arrays("auto", simulated=False) == "numba"
    assert "CuPy cannot reach the GPU (RuntimeError: cudaErrorInsufficientDriver" in caplog.text
    with pytest.raises(ImportError, match=r"needs CuPy, which cannot reach the GPU \(RuntimeError: .*\(got arrays='cupy'\)"):
        resolve_arrays("cupy", simulated=False)


def test_array_interface_reads_the_interface_or_dlpack(monkeypatch):
    a = CupyLike()
    assert array_interface(a, "a") == (a, a.desc)
    with pytest.raises(BackendMismatchError, match=r"x is a host array \(DLPack device type 1, got DLPackOnly\)"):
        array_interface(DLPackOnly(1, 0), "x")
    with pytest.raises(TypeError, match=r"x must be a CUDA device array \(got object\)"):
        array_interface(object(), "x")
    monkeypatch.setattr(device_arrays, "cupy_module", lambda: None)
    with pytest.raises(TypeError, match=r"without __cuda_array_interface__ \(got DLPackOnly\).*kernelrt\[cuda12\]"):
        array_interface(DLPackOnly(), "x")
    imported = CupyLike(stream=7)
    fake_cupy = SimpleNamespace(from_dlpack=lambda obj: imported)
    monkeypatch.setattr(device_arrays, "cupy_module", lambda: fake_cupy)
    assert array_interface(DLPackOnly(), "x") == (imported, imported.desc)


def test_launch_views_replace_foreign_arrays_and_collect_their_streams(monkeypatch):
    monkeypatch.setattr(device_arrays, "launch_view", lambda owner, desc, device_id: ("view of", owner))
    monkeypatch.setattr(device_arrays, "numba_stream", lambda handle: f"stream {handle}")
    kernel = SimpleNamespace(name="k", params=("out", "x", "y", "z", "a"))
    out, x, y, z = NumbaLike(), CupyLike(stream=7), TorchLike(0), CupyLike(stream=None)
    args, producers = launch_views(kernel, (out, x, y, z, 2.0), 1)
    assert args == (out, ("view of", x), ("view of", y), ("view of", z), 2.0) and args[0] is out
    assert producers == ["stream 7"]  # PyTorch's version-2 interface and a None stream name none
    with pytest.raises(BackendMismatchError, match=r"argument 'y' of 'k' is a host array"):
        launch_views(kernel, (out, x, DLPackOnly(1, 0), z, 2.0), 1)


def test_launch_views_are_cached_by_what_they_describe(monkeypatch):
    made = []
    monkeypatch.setattr(device_arrays, "_LAUNCH_VIEWS", {})
    monkeypatch.setattr(device_arrays, "numba_view", lambda owner, desc: made.append(owner) or object())
    a, same_memory, b = CupyLike(stream=7), CupyLike(stream=9), CupyLike(strides=(24, 8))
    first = device_arrays.launch_view(a, a.desc, 0)
    assert device_arrays.launch_view(same_memory, same_memory.desc, 0) is first  # same description
    assert made == [None]  # made once, owning nothing (the caller's array keeps the memory alive)
    assert device_arrays.launch_view(b, b.desc, 0) is not first  # other strides
    assert device_arrays.launch_view(a, a.desc, 1) is not first  # another device
    assert len(made) == 3


def test_copies_of_non_contiguous_interfaces_are_detected():
    assert device_arrays._c_contiguous(CupyLike().desc)  # strides None: C-contiguous by definition
    assert device_arrays._c_contiguous(CupyLike(strides=(24, 8)).desc)
    assert not device_arrays._c_contiguous(CupyLike(strides=(8, 16)).desc)  # a transpose


EXT, MINE = (999, False), (555, True)  # a foreign stream pointer (flags unknown); one numba made
LEGACY, PER_THREAD = (LEGACY_STREAM, True), (2, True)


@pytest.mark.parametrize(
    "producer,consumer,wait",
    [
        (LEGACY, LEGACY, False),
        (LEGACY, MINE, False),  # the legacy stream and a blocking stream order each other
        (MINE, LEGACY, False),
        (PER_THREAD, LEGACY, False),
        (LEGACY, EXT, True),  # a foreign stream may be non-blocking
        (EXT, LEGACY, True),
        (EXT, EXT, False),
        (EXT, MINE, True),
        (PER_THREAD, MINE, True),  # only the legacy stream orders implicitly
    ],
)
def test_which_streams_need_an_event(producer, consumer, wait):
    assert needs_wait(producer, consumer) is wait


def test_a_launch_goes_on_the_first_arrays_stream_and_waits_for_the_others():
    keys = {0: LEGACY, "legacy": LEGACY, "ext": EXT, "other ext": (777, False), "mine": MINE}
    key = keys.__getitem__
    assert plan_launch(None, [], key) == (0, [])
    assert plan_launch(None, ["legacy"], key) == ("legacy", [])
    assert plan_launch(None, ["ext", "legacy", "ext", "other ext"], key) == ("ext", ["legacy", "other ext"])
    assert plan_launch("mine", ["legacy", 0], key) == ("mine", [])
    assert plan_launch("mine", ["ext"], key) == ("mine", ["ext"])
    assert plan_launch(0, ["legacy"], key) == (0, [])


def test_stream_keys_of_numba_streams():
    pytest.importorskip("numba_cuda", reason="numba-cuda is not installed: its streams wrap cuda.bindings")
    from cuda.bindings import driver as cu
    from numba.cuda.cudadrv.driver import Stream

    assert stream_key(0) == LEGACY
    assert stream_key(Stream(cu.CUstream(0))) == LEGACY  # numba's default stream object
    assert stream_key(Stream(cu.CUstream(2))) == PER_THREAD
    assert stream_key(Stream(cu.CUstream(555))) == MINE  # made by numba: blocking
    assert stream_key(Stream(cu.CUstream(999), external=True)) == EXT


def test_stream_arguments():
    class ProtocolStream:
        def __cuda_stream__(self):
            return (0, 1)

    # the legacy default stream under each spelling: CuPy's null stream has ptr 0, PyTorch's
    # default stream cuda_stream 0
    for s in (None, 0, SimpleNamespace(ptr=0), SimpleNamespace(ptr=1), SimpleNamespace(cuda_stream=0),
              ProtocolStream()):
        assert as_numba_stream(s) == 0
    assert numba_stream(None) == 0 and numba_stream(LEGACY_STREAM) == 0
    for bad in ("fast", 5, SimpleNamespace(ptr=True)):
        with pytest.raises(TypeError, match=r"stream must be a numba stream \(backend.stream\(\)\), a CuPy or "
                                            r"PyTorch stream, 0 or None \(got "):
            as_numba_stream(bad)
