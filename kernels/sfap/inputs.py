"""Validation of ``compute_sfaps`` inputs, before any work is done.

Every check raises ``TypeError`` (not numeric, wrong kind) or ``ValueError`` (shape,
range) with a lowercase message naming the argument, what was expected and what was
given. What passes is returned as C-contiguous float64 arrays and Python floats.
"""

from __future__ import annotations

import numbers

import numpy as np

from ..conventions import refuse_quantity

__all__ = ["SfapInputs", "check_inputs"]


class SfapInputs(dict):
    """The validated inputs, keyed by ``plan_fibres``' parameter names."""


# The unit each argument is read in: a quantities/pint Quantity is refused with it named
# (conventions.refuse_quantity), never silently stripped.
UNITS = {"fibre_xy": "mm", "fibre_diameter": "mm", "fibre_cv": "mm/s", "nmj_z": "mm", "fibre_ends": "mm",
         "nerve_paths": "mm", "branch_cv": "mm/s", "electrodes": "mm", "dt": "s", "dz": "mm",
         "min_radial_dist": "mm"}


def _array(name: str, value, ndim: int, trailing: int | None = None) -> np.ndarray:
    if value is None:
        raise TypeError(f"{name} is required (got None)")
    refuse_quantity(value, name, UNITS[name])
    try:
        arr = np.asarray(value)
    except (TypeError, ValueError) as e:  # ragged lists and the like
        raise TypeError(f"{name} must be an array of numbers (got {type(value).__name__}: {e})") from None
    if arr.dtype.kind not in "iuf" or arr.dtype == np.bool_:
        raise TypeError(f"{name} must hold real numbers (got dtype {arr.dtype})")
    if ndim == 1 and arr.ndim == 2 and arr.shape[1] == 1:  # MyoGen's (N, 1) columns
        arr = arr[:, 0]
    if arr.ndim != ndim or (trailing is not None and arr.shape[-1] != trailing):
        want = "(N,) or (N, 1)" if ndim == 1 else f"(N, {trailing})"
        raise ValueError(f"{name} must have shape {want} (got shape {arr.shape})")
    arr = np.ascontiguousarray(arr, dtype=np.float64)
    if not np.all(np.isfinite(arr)):
        bad = np.argwhere(~np.isfinite(arr))[0]
        raise ValueError(f"{name} must be finite (got {float(arr[tuple(bad)])!r} at index {tuple(int(i) for i in bad)})")
    return arr


def _scalar(name: str, value, *, positive: bool = True) -> float:
    refuse_quantity(value, name, UNITS[name])
    if isinstance(value, np.ndarray) and value.shape == ():
        value = value.item()
    if isinstance(value, bool) or not isinstance(value, numbers.Real):
        raise TypeError(f"{name} must be a real number (got {type(value).__name__}: {value!r})")
    value = float(value)
    if not np.isfinite(value) or (positive and value <= 0):
        raise ValueError(f"{name} must be a finite number > 0 (got {value!r})")
    return value


def _positive(name: str, arr: np.ndarray, what: str) -> None:
    if np.any(arr <= 0):
        i = int(np.argmax(arr <= 0))
        raise ValueError(f"{name} must be > 0 ({what}) (got {float(arr.flat[i])!r} at index {i})")


def check_inputs(*, fibre_xy, fibre_diameter, fibre_cv, nmj_z, fibre_ends, nerve_paths, branch_cv,
                 electrodes, dt, dz, min_radial_dist) -> SfapInputs:
    """Validate and normalise; see ``compute_sfaps`` for the meaning of each argument."""
    xy = _array("fibre_xy", fibre_xy, 2, 2)
    nf = xy.shape[0]
    if nf == 0:
        raise ValueError("fibre_xy must hold at least one fibre (got shape (0, 2))")
    diam = _array("fibre_diameter", fibre_diameter, 1)
    cv = _array("fibre_cv", fibre_cv, 1)
    zeta = _array("nmj_z", nmj_z, 1)
    ends = _array("fibre_ends", fibre_ends, 2, 2)
    paths = _array("nerve_paths", nerve_paths, 2, 2)
    for name, arr in (("fibre_diameter", diam), ("fibre_cv", cv), ("nmj_z", zeta),
                      ("fibre_ends", ends), ("nerve_paths", paths)):
        if arr.shape[0] != nf:
            raise ValueError(
                f"{name} must have one entry per fibre, {nf} as in fibre_xy (got shape {arr.shape})"
            )
    branch = _array("branch_cv", branch_cv, 1)
    if branch.shape != (2,):
        raise ValueError(f"branch_cv must hold the two nerve-branch velocities (c1, c2) (got shape {branch.shape})")
    elec = _array("electrodes", electrodes, 2, 3)
    if elec.shape[0] == 0:
        raise ValueError("electrodes must hold at least one (x, y, z) point (got shape (0, 3))")
    _positive("fibre_diameter", diam, "a diameter in mm")
    _positive("fibre_cv", cv, "a conduction velocity in mm/s")
    _positive("branch_cv", branch, "a conduction velocity in mm/s")
    if np.any(paths < 0):
        f = int(np.argwhere(paths < 0)[0][0])
        raise ValueError(f"nerve_paths must be >= 0 mm (got {tuple(paths[f].tolist())} for fibre {f})")
    left, right = ends[:, 0], ends[:, 1]
    if np.any(left >= right):
        f = int(np.argmax(left >= right))
        raise ValueError(
            f"fibre_ends must be ordered (left, right) with left < right (got {tuple(ends[f].tolist())} for fibre {f})"
        )
    # nmj_z may lie outside the fibre's ends: MyoGen's NMJ simulation puts some there (a
    # large unit's branches spread by several mm), and its grid then runs from the NMJ to
    # the far tendon, which plan_fibres reproduces (docs/sfap.md, "Fibre grid").
    dt = _scalar("dt", dt)
    dz = _scalar("dz", dz)
    shortest = float(np.min(right - left))
    if dz >= shortest:
        raise ValueError(f"dz must be smaller than the shortest fibre, {shortest!r} mm (got {dz!r})")
    r_min = float(np.mean(diam)) if min_radial_dist is None else _scalar("min_radial_dist", min_radial_dist)
    return SfapInputs(
        fibre_xy=xy, fibre_diameter=diam, fibre_cv=cv, nmj_z=zeta, fibre_ends=ends, nerve_paths=paths,
        branch_cv=branch, electrodes=elec, dt=dt, dz=dz, min_radial_dist=r_min,
    )
