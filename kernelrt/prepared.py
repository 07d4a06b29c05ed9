"""Prepared launches and launch sequences: the host work of a launch done once, not per launch.

``backend.prepare(kernel, grid, block, *args)`` checks the kernel and launch configuration,
resolves the compiled overload, turns foreign arrays into numba views and plans the stream,
once, and returns a ``PreparedLaunch``. Calling it (``p()``) launches; ``p(*args)`` binds new
arguments of the same kinds first (same array type, dtype, ndim, layout and writeability,
same scalar types), which loops need for buffer rotation and per-step scalars. The kind check
is a few attribute reads per argument; a mismatch is a ``KernelArgumentError`` that names
the argument.

``backend.sequence(launches)`` is a ``LaunchSequence``: prepared launches run in order,
``run(repeats)`` times. Here it is a plain loop (the CPU backend, the simulator); CUDABackend
returns one that replays the sequence as a CUDA graph where it can (``cuda_prepared``).
Either way, the kernels run in the same order with the same arguments, so results are
bitwise those of the same ``launch_kernel`` calls.
"""

from __future__ import annotations

from collections.abc import Iterable

import numpy as np

from .errors import KernelArgumentError

__all__ = ["PreparedLaunch", "LaunchSequence", "argument_kinds"]


def _layout(a) -> str:
    is_c = getattr(a, "is_c_contiguous", None)  # numba device arrays (and the simulator's)
    if is_c is not None:
        return "C" if is_c() else ("F" if a.is_f_contiguous() else "A")
    flags = getattr(a, "flags", None)  # numpy, CuPy
    if flags is None:  # other producers (PyTorch): the type, dtype and ndim decide
        return "?"
    return "C" if flags.c_contiguous else ("F" if flags.f_contiguous else "A")


def _kind(a):
    """What must stay the same for a re-bound argument to use the prepared overload."""
    t = type(a)
    if t is np.ndarray:  # the flags object read once: each ``a.flags`` builds a new one
        f = a.flags
        return t, a.dtype, a.ndim, "C" if f.c_contiguous else ("F" if f.f_contiguous else "A"), f.writeable
    dtype = getattr(a, "dtype", None)
    if dtype is not None and hasattr(a, "shape") and not isinstance(a, np.generic):
        return t, dtype, len(a.shape), _layout(a)
    return t


def argument_kinds(args) -> tuple:
    """The kinds of ``args`` (``PreparedLaunch`` compares them on every re-bind)."""
    return tuple(_kind(a) for a in args)


def _describe_kind(kind) -> str:
    if not isinstance(kind, tuple):
        return kind.__name__
    t, dtype, ndim, layout = kind[:4]
    ro = " read-only" if len(kind) > 4 and not kind[4] else ""
    return f"{t.__name__} {dtype} {ndim}-d layout {layout}{ro}"


class PreparedLaunch:
    """A kernel launch resolved once (``backend.prepare``); call it to launch.

    ``p()`` launches with the bound arguments; ``p(*args)`` binds ``args`` (same kinds as
    before: see the module docstring) and launches. ``p.bind(*args)`` binds without launching.

    Attributes:
        kernel: the kernel as given to ``prepare``.
        name: the kernel's name.
        args: the bound arguments, as given.
        stream: the ``stream=`` given to ``prepare`` (None: the launch follows its arrays).
        bound: the backend's launch of the bound arguments, a callable taking none (what
            ``p()`` and a ``LaunchSequence`` call).
    """

    __slots__ = ("kernel", "name", "args", "stream", "_kinds", "_binder", "bound")

    def __init__(self, kernel, name: str, args: tuple, stream, binder):
        self.kernel, self.name, self.stream = kernel, name, stream
        self._binder = binder  # binder(args) -> the backend's bound launch (callable, no arguments)
        self.args = tuple(args)
        self._kinds = argument_kinds(self.args)
        self.bound = binder(self.args)

    def __call__(self, *args) -> None:
        if args:
            self.bind(*args)
        self.bound()

    def bind(self, *args) -> "PreparedLaunch":
        """Bind new arguments of the kinds prepared (no launch); returns self.

        Raises:
            KernelArgumentError: another number of arguments, or an argument of another kind.
        """
        kinds = self._kinds
        if len(args) != len(kinds):
            raise KernelArgumentError(
                f"prepared launch of {self.name!r} takes {len(kinds)} arguments (got {len(args)})"
            )
        for i, (a, before) in enumerate(zip(args, self.args)):
            if a is not before and _kind(a) != kinds[i]:  # the same object as bound before: same kind
                raise KernelArgumentError(
                    f"argument {i} of the prepared launch of {self.name!r} must be a {_describe_kind(kinds[i])} "
                    f"like the one it was prepared with (got {_describe_kind(_kind(a))}); prepare a new launch"
                )
        self.bound = self._binder(args)
        self.args = tuple(args)
        return self

    def __repr__(self):
        return f"<prepared launch of {self.name!r}>"


class LaunchSequence:
    """Prepared launches run in order, ``run(repeats)`` times (``backend.sequence``).

    The launches keep their bound arguments: re-bind one (``p.bind``) and the sequence runs
    it with the new ones. Here a plain loop; ``mode`` says ``"loop"``.
    """

    mode = "loop"

    def __init__(self, launches: Iterable[PreparedLaunch]) -> None:
        launches = tuple(launches)
        for p in launches:
            if not isinstance(p, PreparedLaunch):
                raise TypeError(f"a launch sequence takes prepared launches (backend.prepare) (got {type(p).__name__})")
        self.launches = launches

    def run(self, repeats: int = 1) -> None:
        """Run the launches in order, ``repeats`` times (0: nothing).

        Raises:
            ValueError: ``repeats`` is not an int >= 0.
        """
        for _ in range(_repeats(repeats)):
            for p in self.launches:
                p.bound()


def _repeats(repeats) -> int:
    if isinstance(repeats, bool) or not isinstance(repeats, (int, np.integer)) or repeats < 0:
        raise ValueError(f"repeats must be an int >= 0 (got {repeats!r})")
    return int(repeats)
