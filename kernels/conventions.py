"""What both kernel families do the same way with their users' input and output.

* ``refuse_quantity``: a ``quantities``/``pint`` Quantity (duck-typed: ``.magnitude`` and
  ``.units``, so no units library is imported) is refused with a ``TypeError`` that says
  to pass its magnitude, never stripped silently: a diameter in m read as mm would be
  wrong by 1000, and only the caller knows which unit the numbers are in.
* ``terminal_bar``: the tqdm progress bar that ``progress=True`` asks for, drawn only
  when stderr is a terminal, so a log file gets no frames; ``progress_callback`` turns
  a ``progress=`` argument (True, False or a callable) into one callback.
"""

from __future__ import annotations

import contextlib

__all__ = ["refuse_quantity", "terminal_bar", "progress_callback"]


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


def terminal_bar(total: int, desc: str, unit: str):
    """A tqdm bar over ``total`` ``unit``s, drawn only on a terminal and removed when done."""
    from tqdm import tqdm  # only runs that ask for a bar pay for importing it

    # disable=None: no bar unless stderr is a terminal (a log file gets no frames)
    return tqdm(total=total, desc=desc, unit=unit, disable=None, leave=False)


@contextlib.contextmanager
def progress_callback(progress, total: int, desc: str, unit: str):
    """A ``progress=`` argument as a callback taking a count done, or None for no progress.

    A callable is used as it is; True draws a ``terminal_bar`` for the ``with`` block.
    """
    if callable(progress) or not progress:
        yield progress or None
        return
    with terminal_bar(total, desc, unit) as bar:
        yield bar.update
