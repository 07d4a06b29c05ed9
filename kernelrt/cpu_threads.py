"""Numba's threading layer for kernelrt's parallel CPU loops.

Why TBB: on a 2-vCPU VM shared with other work, the default OpenMP layer spins and
then sleeps between loops; measured per small ``prange`` loop with another process busy
(tools/threading_layers.py): OpenMP has a 2 us median but stalls of 7-10 ms (the "8 ms
per loop" seen before), workqueue a 20 us median, TBB a 1.5 us median and a worst case
under 0.1 ms. TBB is also safe to call from several threads at once; workqueue is not.

The ``tbb`` wheel installs ``libtbb.so.12`` into ``<prefix>/lib`` (``libtbb.12.dylib`` on
macOS, ``tbb12.dll`` into ``<prefix>/Library/bin`` on Windows), which the dynamic loader
does not search, so numba would silently fall back to OpenMP. We load it by path
(RTLD_GLOBAL) before numba picks a layer; numba's default priority list already puts TBB
first. A layer chosen by the user (``NUMBA_THREADING_LAYER``) is left alone.
"""

from __future__ import annotations

import ctypes
import glob
import os
import sys

import numpy as np

from . import config

__all__ = ["prepare_threading_layer", "threading_layer_name"]

_prepared = False


# Where the tbb wheel puts TBB 12 under a prefix, and its file names, per platform.
TBB_LIBRARIES = {
    "linux": (("lib",), "libtbb.so.12*"),
    "darwin": (("lib",), "libtbb.12*.dylib"),
    "win32": (("Library", "bin"), "tbb12*.dll"),
}


def _tbb_library_candidates(platform: str | None = None) -> list[str]:
    """TBB 12 libraries under the environment's prefix (pip, venv) and under sys.path
    entries (pip --target), for ``platform`` (``sys.platform`` by default)."""
    platform = platform or sys.platform
    subdir, pattern = TBB_LIBRARIES.get("linux" if platform.startswith("linux") else platform, (None, None))
    if subdir is None:
        return []
    roots = [sys.prefix, sys.base_prefix, os.path.dirname(os.path.dirname(sys.executable))]
    roots += [p for p in sys.path if p and os.path.isdir(os.path.join(p, *subdir))]
    found: list[str] = []
    for root in dict.fromkeys(roots):
        found += sorted(glob.glob(os.path.join(root, *subdir, pattern)))
    return found


def prepare_threading_layer() -> None:
    """Make TBB loadable for numba; call before the first parallel CPU launch."""
    global _prepared
    if _prepared:
        return
    _prepared = True
    if config.numba_threading_layer():  # the user chose a layer: leave it to numba
        return
    for path in _tbb_library_candidates():
        try:
            ctypes.CDLL(path, mode=ctypes.RTLD_GLOBAL)
            return
        except OSError:
            continue


def threading_layer_name() -> str:
    """The layer numba uses (runs a tiny parallel loop once to find out)."""
    prepare_threading_layer()
    import numba  # lazy: importing kernelrt loads no numba

    try:
        return numba.threading_layer()
    except ValueError:  # no parallel region has run yet in this process
        _touch(np.zeros(2))
        return numba.threading_layer()


def _touch(a):
    import numba  # lazy: importing kernelrt loads no numba

    @numba.njit(parallel=True)
    def _one_loop(x):
        for i in numba.prange(x.shape[0]):
            x[i] += 1.0

    _one_loop(a)
