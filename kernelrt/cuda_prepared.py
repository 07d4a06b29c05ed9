"""CUDABackend's prepared launches and launch sequences (CUDA graphs where possible).

A prepared launch (``prepared.PreparedLaunch``) binds its arguments through ``CudaBinder``: the
device checks, numba views of foreign arrays (``device_arrays.launch_views``) and the stream
plan (``stream_order.plan_launch``) are done per bind, the argument check and the choice of the
compiled overload once, for the first bind (a re-bind has the same kinds, hence the same
overload). Calling the bound launch makes the device current, orders the launch after its
arrays' streams, and launches the overload directly (``numba_internals.launch_overload``), which
skips the dispatcher's per-call typing and launch-configuration objects. Where numba offers
no loaded overload (the simulator, launch-configuration-specialised kernels) it calls the
dispatcher as ``launch_kernel`` does.

``GraphSequence`` replays a sequence as a CUDA graph: on the first ``run`` with at least
``GRAPH_MIN_REPEATS`` repeats it captures the launches once on a CuPy stream
(``Stream.begin_capture`` / ``end_capture``; numba launches onto it through
``numba.cuda.external_stream``), then launches the graph ``repeats`` times on the launches'
stream, so each repeat costs one graph launch of host time. It falls back to the plain loop,
with the reason in ``fallback``, under the simulator, with numba arrays (``arrays="numba"``),
without CuPy, for launches on different streams, and on any capture error. **The graph path
has not yet run on a GPU** (written without one, issue 24); the loop is what the CPU and the
simulator test, and the graph records the same launches in the same order.
"""

from __future__ import annotations

from .arguments import check_kernel_arguments
from .device_arrays import cupy_module, launch_views
from .numba_internals import core_stream, cuda_typeof, launch_overload, prepared_overload
from .prepared import LaunchSequence, _repeats
from .stream_order import plan_launch, stream_key, wait_for

__all__ = ["CudaBinder", "GraphSequence", "GRAPH_MIN_REPEATS"]

GRAPH_MIN_REPEATS = 2  # one run of a sequence gains nothing from a graph: capture costs a launch's host work


class CudaBinder:
    """Binds arguments for one prepared launch of ``kernel`` on ``be`` (module docstring)."""

    __slots__ = ("be", "k", "disp", "cfg", "declared", "stream", "kern", "resolved", "_core")

    def __init__(self, be, k, disp, cfg, declared, stream):
        self.be, self.k, self.disp, self.cfg = be, k, disp, cfg
        self.declared, self.stream = declared, stream  # stream: numba's, or None
        self.kern, self.resolved, self._core = None, False, (None, None)

    def __call__(self, args) -> "CudaBound":
        be, k = self.be, self.k
        foreign = be._first_foreign(k, args)  # launch_kernel's device checks
        with be.activated():
            waits = ()
            if foreign is None or be.is_simulator:
                stream = 0 if self.stream is None else self.stream
            else:
                args, producers = launch_views(k, args, foreign, be.device_id)
                stream, waits = plan_launch(self.stream, producers)
            if not self.resolved:
                self.kern = self._resolve(args)
                self.resolved = True
        if self._core[0] is not stream and self.kern is not None:  # converted once per stream, not per bind
            self._core = (stream, core_stream(stream))
        return CudaBound(be, self.kern, self.disp, self.cfg, tuple(args), stream, tuple(waits), self._core[1])

    def _resolve(self, args):
        """The overload to launch (checked and loaded through the cache), or None: the dispatcher."""
        argtypes = check_kernel_arguments(self.k, args, backend="cuda", typeof=cuda_typeof, declared=self.declared)
        if self.be.is_simulator:
            return None
        self.be._ensure(self.k, argtypes)
        return prepared_overload(self.disp, argtypes)


class CudaBound:
    """One bound launch: call it to launch (inside the device, ordered after its arrays)."""

    __slots__ = ("be", "kern", "disp", "cfg", "args", "stream", "waits", "_core")

    def __init__(self, be, kern, disp, cfg, args, stream, waits, core):
        self.be, self.kern, self.disp, self.cfg = be, kern, disp, cfg
        self.args, self.stream, self.waits, self._core = args, stream, waits, core  # core: core_stream(stream)

    def __call__(self) -> None:
        with self.be.activated():
            if self.waits:
                wait_for(self.waits, self.stream)
            self._launch(self.stream, self._core)
            for producer in self.waits:  # join back, as launch_kernel does
                wait_for([self.stream], producer)

    def launch_on(self, stream) -> None:
        """Launch on ``stream`` (numba's) with no ordering: a capture, or after the caller ordered it."""
        self._launch(stream, None if self.kern is None else core_stream(stream))

    def _launch(self, stream, core) -> None:
        cfg = self.cfg
        if self.kern is not None:
            launch_overload(self.kern, self.args, cfg.grid, cfg.block, core, cfg.shared_mem)
        else:
            self.disp[cfg.grid, cfg.block, stream, cfg.shared_mem](*self.args)


class GraphSequence(LaunchSequence):
    """A launch sequence that CUDABackend replays as a CUDA graph where it can (module docstring).

    Attributes:
        mode: ``"graph"`` once captured, else ``"loop"``.
        fallback: why the plain loop runs (None while a graph may still be used).
    """

    def __init__(self, be, launches, graph: bool = True):
        super().__init__(launches)
        self.be, self._graph, self.fallback = be, None, None
        if not graph:
            self.fallback = "graph=False"
        elif be.is_simulator:
            self.fallback = "the CUDA simulator has no graphs"
        elif be.arrays != "cupy" or cupy_module() is None:
            self.fallback = "graphs are captured through CuPy, which this backend does not use"
        elif len({stream_key(p.bound.stream) for p in self.launches}) > 1:
            self.fallback = "the launches run on different streams"

    @property
    def mode(self) -> str:
        return "graph" if self._graph is not None else "loop"

    def run(self, repeats: int = 1) -> None:
        repeats = _repeats(repeats)
        if self._graph is None and (self.fallback or repeats < GRAPH_MIN_REPEATS or not self.launches):
            return super().run(repeats)
        if self._graph is None:
            self._graph = self._capture()
            if self._graph is None:
                return super().run(repeats)
        cp = cupy_module()
        with self.be.activated():
            stream = self.launches[0].bound.stream
            waits = [w for p in self.launches for w in p.bound.waits]
            wait_for(waits, stream)  # the graph follows its arrays' producers, as each launch would
            # 1 and 2 are CUDA's legacy and per-thread default stream handles: valid stream values too
            target = cp.cuda.ExternalStream(stream_key(stream)[0], self.be.device_id)
            try:
                self._graph.launch(target)  # GPU only, not yet run on hardware
            except Exception as exc:  # nothing ran yet: the loop does every repeat instead
                self._graph, self.fallback = None, f"graph launch failed ({type(exc).__name__}: {exc})"[:300]
                return super().run(repeats)
            for _ in range(repeats - 1):
                self._graph.launch(target)
            for producer in waits:
                wait_for([stream], producer)

    # -- GPU only, not yet run on hardware: every failure falls back to the loop ------------------
    def _capture(self):
        """Record the launches once on a capturing CuPy stream; None (and ``fallback``) on failure."""
        cp = cupy_module()
        from numba import cuda  # lazy: importing kernelrt loads no numba

        with self.be.activated():
            capture = cp.cuda.Stream(non_blocking=True)  # capture cannot run on the legacy stream
            capturing = False
            try:
                on = cuda.external_stream(capture.ptr)
                # thread-local: unsafe calls of other threads (allocations, synchronous copies) are
                # not caught up in this capture
                mode = getattr(cp.cuda.runtime, "streamCaptureModeThreadLocal", None)
                capture.begin_capture() if mode is None else capture.begin_capture(mode)
                capturing = True
                for p in self.launches:
                    p.bound.launch_on(on)
                capturing = False
                return capture.end_capture()
            except Exception as exc:  # any capture error: the launches run as a loop instead
                if capturing:
                    try:
                        capture.end_capture()
                    except Exception:  # the capture is invalidated: ending it may raise too
                        pass
                self.fallback = f"capture failed ({type(exc).__name__}: {exc})"[:300]
                return None
