"""What both kernel families do the same way with their users' input and output.

* ``refuse_quantity``: a ``quantities``/``pint`` Quantity (duck-typed: ``.magnitude`` and
  ``.units``, so no units library is imported) is refused with a ``TypeError`` that says
  to pass its magnitude, never stripped silently: a diameter in m read as mm would be
  wrong by 1000, and only the caller knows which unit the numbers are in.
* ``progress_bar``: the tqdm progress bar that ``progress=True`` asks for (``tqdm.auto``: a
  widget in Jupyter, text on a terminal), drawn only where someone sees it
  (``bars_visible``: stderr is a terminal, or the process is a Jupyter kernel), so a log
  file gets no frames; ``progress_callback`` turns a ``progress=`` argument (True, False or
  a callable) into one callback (``converged_callback``: one taking the count so far).
"""

from __future__ import annotations

import contextlib
import sys
from collections.abc import Callable, Iterator
from typing import Any, TextIO

__all__ = ["refuse_quantity", "progress_bar", "bars_visible", "in_jupyter", "progress_callback", "converged_callback"]


def refuse_quantity(value, name: str, unit: str | None = None) -> None:
    """Raise ``TypeError`` when ``value`` is a quantity with units.

    Args:
        value: what the caller passed as ``name``.
        name: the argument's name, for the message.
        unit: the unit the argument is read in, named in the message with the conversion
            to write; None where the unit is the caller's choice (mesh coordinates).
    """
    if not (hasattr(value, "magnitude") and hasattr(value, "units")):
        return
    if unit is not None:
        raise TypeError(
            f"{name} must be a plain number or array in {unit} (got a quantity in {value.units}); "
            f"pass its magnitude, e.g. x.rescale('{unit}').magnitude (quantities) or x.m_as('{unit}') (pint)"
        )
    raise TypeError(
        f"{name} must be plain numbers, not a quantity with units (got {type(value).__name__} in {value.units}): "
        f"pass {name}.magnitude, converted first to the unit you mean (e.g. .to('mm').magnitude)"
    )


def bars_visible(stream: TextIO | None = None) -> bool:
    """Whether a progress bar on ``stream`` (default: stderr) would be seen by someone.

    True on a terminal and in a Jupyter kernel (where stderr is no terminal, but the notebook
    shows it); False when it is redirected to a file or a pipe, which would fill with frames.
    """
    stream = sys.stderr if stream is None else stream
    try:
        terminal = bool(stream.isatty())
    except (AttributeError, ValueError):  # no isatty, or a closed stream
        terminal = False
    return terminal or in_jupyter()


def in_jupyter() -> bool:
    """Whether this process is a Jupyter kernel (notebook, JupyterLab, VS Code, Colab).

    As ``tqdm.auto`` tells: ipykernel's shell is running, not merely imported. Neither
    IPython nor ipykernel is imported to find out.
    """
    zmqshell = sys.modules.get("ipykernel.zmqshell")
    shell_class = getattr(zmqshell, "ZMQInteractiveShell", None)
    get_ipython = getattr(sys.modules.get("IPython"), "get_ipython", None)
    if shell_class is None or get_ipython is None:
        return False
    return isinstance(get_ipython(), shell_class)


def progress_bar(total: int, desc: str, unit: str) -> Any:
    """A ``tqdm.auto`` bar over ``total`` ``unit``s, removed when done.

    Drawn where ``bars_visible()``: a terminal, or a notebook (a widget with ipywidgets
    installed, text without); elsewhere it counts without drawing.
    """
    from tqdm.auto import tqdm  # only runs that ask for a bar pay for importing it

    return tqdm(total=total, desc=desc, unit=unit, disable=not bars_visible(), leave=False)


@contextlib.contextmanager
def progress_callback(progress: bool | Callable[[int], object] | None, total: int, desc: str,
                      unit: str) -> Iterator[Callable[[int], object] | None]:
    """A ``progress=`` argument as a callback taking a count done, or None for no progress.

    A callable is used as it is; True draws a ``progress_bar`` for the ``with`` block.
    """
    if callable(progress) or not progress:
        yield progress or None
        return
    with progress_bar(total, desc, unit) as bar:
        yield bar.update


@contextlib.contextmanager
def converged_callback(progress: bool | Callable[[int, int], object] | None, total: int, desc: str,
                       unit: str) -> Iterator[Callable[[int, int], object] | None]:
    """``progress_callback`` for solvers that report ``(done so far, total)``, not increments
    (the eigensolvers: pairs converged out of k)."""
    if callable(progress) or not progress:
        yield progress or None
        return
    with progress_bar(total, desc, unit) as bar:
        yield lambda done, total: bar.update(done - bar.n)
