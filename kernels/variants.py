"""Kernel variants: other kernels for the same work, chosen at run time so one GPU run can time them side by side.

Each family's default (its first name below) is the kernel that measured fastest on a GPU
(bench/results/2026-11-27-nvidia-h200*: the staged delay won there; the others lost, tied
or, like the tiled SFAP contraction, won only kernel-only); the alternatives were designed
for the hardware's limit (GPU_PLAN.md in the shared specs) and are proven equal on the CUDA
simulator, in the PTX layer and on the device. A variant changes how the GPU does the work,
never the result: each is bitwise equal to its family's default where it keeps the
summation order (all of them today; docs/gpu.md, "Kernel variants").

    from kernelrt.kernels.variants import use_variants

    with use_variants(sfap_columns="tiled", sparse="sell"):
        out = compute_sfaps(...)

The choice is a context variable: it holds for the current thread (or asyncio task) and
what it calls, and a thread started inside the block starts from the defaults. Drivers
that take a ``variant=`` keyword use it before the setting.

=================  ===============  ==============================================================
family             variants          what the alternative changes (default first)
=================  ===============  ==============================================================
``sfap_columns``   ``rows``, tiled   lanes over (electrode, sample) pairs, several samples per
                                     thread in registers: one ``h`` load feeds several FMAs
``sfap_delay``     ``staged``,       the default stages a fibre's raw column in shared memory once
                   direct            per block; ``direct`` makes one strided global load per
                                     multiply-add
``row_values``     ``branchy``,      the face's corners rotated by selection, one call of the
                   nodiv             face terms instead of three behind a divergent branch
``sparse``         ``csr``, sell     SELL-32 slot-major storage for products, heat steps and the
                                     Chebyshev step: a warp's loads are consecutive
``loops``          ``launches``,     heat steps and the Chebyshev filter as one persistent
                   cooperative       cooperative kernel with a grid barrier between steps
=================  ===============  ==============================================================
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from contextvars import ContextVar

__all__ = ["FAMILIES", "DEFAULTS", "variant", "current_variants", "set_variants", "use_variants"]

FAMILIES: dict[str, tuple[str, ...]] = {
    "sfap_columns": ("rows", "tiled"),
    "sfap_delay": ("staged", "direct"),
    "row_values": ("branchy", "nodiv"),
    "sparse": ("csr", "sell"),
    "loops": ("launches", "cooperative"),
}
DEFAULTS: dict[str, str] = {family: names[0] for family, names in FAMILIES.items()}

_chosen: ContextVar[dict[str, str]] = ContextVar("kernelrt_kernel_variants", default=DEFAULTS)


def _check(family: str, name: object) -> str:
    if family not in FAMILIES:
        raise ValueError(f"kernel family must be one of {sorted(FAMILIES)} (got {family!r})")
    if name not in FAMILIES[family]:
        raise ValueError(f"{family} variant must be one of {list(FAMILIES[family])} (got {name!r})")
    return str(name)


def variant(family: str, override: str | None = None) -> str:
    """The variant of ``family`` in force: ``override`` (a driver's keyword) if given, else the setting."""
    if override is not None:
        return _check(family, override)
    _check(family, DEFAULTS.get(family))
    return _chosen.get()[family]


def current_variants() -> dict[str, str]:
    """Every family's variant in force, a copy."""
    return dict(_chosen.get())


def set_variants(**choices: str) -> dict[str, str]:
    """Choose variants for the current context (checked first: nothing changes on a bad name); returns the previous choice."""
    previous = _chosen.get()
    new = dict(previous)
    for family, name in choices.items():
        new[family] = _check(family, name)
    _chosen.set(new)
    return dict(previous)


@contextmanager
def use_variants(**choices: str) -> Iterator[dict[str, str]]:
    """``set_variants`` for the ``with`` block only; yields the choice in force inside it."""
    token = _chosen.set(_chosen.get())  # restored exactly on exit, even if the block raised
    try:
        set_variants(**choices)
        yield current_variants()
    finally:
        _chosen.reset(token)
