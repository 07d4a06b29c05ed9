"""``compute_sfaps``: the SFAPs and MUAP of one motor unit (the family's main entry point).

Checks every input (inputs.py), plans the fibres on the host (prep.py), runs the launch
sequence on the chosen backend (run.py) and returns an ``SfapResult``. The three steps
are also separate (``plan_call``, ``start_call``, ``finish_call``) so that ``compute_many``
can plan one unit on the host while the device runs the one before (many.py).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

import kernelrt

from ..conventions import progress_callback
from .inputs import check_inputs
from .prep import UnitPlan, plan_unit
from .run import run_plan

__all__ = ["SfapResult", "Started", "compute_sfaps", "finish_call", "plan_call", "start_call"]


@dataclass(frozen=True)
class SfapResult:
    """SFAPs of one motor unit.

    Attributes:
        t: (Nt,) time grid in s, t_k = k·dt (always a numpy array).
        sfaps_raw: (Nt, Ne, Nf) SFAPs before the NMJ delay (fibre index fastest), or None
            when computed with ``keep_raw=False``.
        sfaps: (Nt, Ne, Nf) SFAPs after the NMJ delay (MyoGen's ``MotorUnitSim.sfaps``).
        muap: (Nt, Ne) sum of ``sfaps`` over fibres (``calc_muap(jitter_std=0)``).
        backend: name of the backend that computed them ("cpu" or "cuda").
    """

    t: np.ndarray
    # numpy arrays, or device arrays with keep_on_device: typed Any so callers need no cast
    sfaps_raw: Any
    sfaps: Any
    muap: Any
    backend: str


def compute_sfaps(*, fibre_xy, fibre_diameter, fibre_cv, nmj_z, fibre_ends, nerve_paths, branch_cv,
                  electrodes, dt, dz, min_radial_dist=None, backend=None, keep_on_device=False,
                  keep_raw=True, progress=False) -> SfapResult:
    """SFAPs and MUAP of one motor unit (MyoGen 0.12 ``calc_sfaps(use_gpu=False)`` semantics).

    Units are mm, s and mm/s throughout.

    Args:
        fibre_xy: (Nf, 2) fibre axis positions (x, y); fibres run parallel to z.
        fibre_diameter: (Nf,) fibre diameters, > 0 ((Nf, 1) columns, as MyoGen stores
            them, are accepted for every per-fibre vector).
        fibre_cv: (Nf,) muscle-fibre conduction velocities, > 0.
        nmj_z: (Nf,) end-plate (NMJ) z positions; outside the fibre's ends too, as MyoGen
            allows (the grid then runs from the NMJ to the far tendon, docs/sfap.md).
        fibre_ends: (Nf, 2) left and right tendon z positions, left < right.
        nerve_paths: (Nf, 2) nerve-branch path lengths (p1, p2), >= 0.
        branch_cv: (2,) nerve-branch conduction velocities (c1, c2), > 0.
        electrodes: (Ne, 3) point-electrode positions.
        dt: time step, > 0 (1 / sampling rate).
        dz: spatial step along the fibres, > 0 and below the shortest fibre.
        min_radial_dist: radial distances below it are raised to it; None means the mean
            fibre diameter (MyoGen's default).
        backend: a kernelrt backend, or "auto" / "cuda" / "cpu" for ``kernelrt.get_backend``;
            None means "auto" (CUDA if available, else the CPU).
        keep_on_device: on a CUDA backend, return device arrays instead of numpy arrays.
        keep_raw: False delays the SFAPs in place of the raw ones, which halves the
            memory of the outputs; ``sfaps_raw`` is then None.
        progress: True draws a tqdm bar over fibres (on a terminal or in Jupyter); a callable is
            called with the number of fibres each finished batch held.

    Returns:
        An SfapResult with ``t``, ``sfaps_raw``, ``sfaps`` and ``muap`` (float64).

    Raises:
        TypeError, ValueError: an input is malformed (the message names it).
        kernelrt.DeviceMemoryError: not even one fibre's buffers fit in free memory.
    """
    inputs = check_inputs(
        fibre_xy=fibre_xy, fibre_diameter=fibre_diameter, fibre_cv=fibre_cv, nmj_z=nmj_z,
        fibre_ends=fibre_ends, nerve_paths=nerve_paths, branch_cv=branch_cv, electrodes=electrodes,
        dt=dt, dz=dz, min_radial_dist=min_radial_dist,
    )
    backend = kernelrt.get_backend(backend)
    unit, ze = _plan(inputs)
    with progress_callback(progress, unit.vt.shape[0], "kernelrt SFAPs", "fibre") as update:
        started = start_call(backend, unit, ze, keep_raw=keep_raw, progress=update)
    return finish_call(backend, started, keep_on_device=keep_on_device)


@dataclass(frozen=True)
class Started:
    """A call whose work is queued on its backend (device arrays valid in stream order)."""

    t: np.ndarray
    sfaps_raw: object
    sfaps: object
    muap: object


def plan_call(**kwargs) -> tuple[UnitPlan, np.ndarray]:
    """Check ``compute_sfaps``' unit arguments and plan the unit: (``UnitPlan``, electrode z)."""
    return _plan(check_inputs(**kwargs))


def _plan(inputs) -> tuple[UnitPlan, np.ndarray]:
    return plan_unit(**inputs), inputs["electrodes"][:, 2].copy()


def start_call(backend, unit: UnitPlan, ze: np.ndarray, *, keep_raw: bool = True, progress=None,
               planned=None) -> Started:
    """Queue a planned unit's work on ``backend`` (run.run_plan); returns without waiting on a device."""
    raw, sfaps, muap = run_plan(backend, unit, ze, keep_raw=keep_raw, progress=progress, planned=planned)
    return Started(t=unit.t, sfaps_raw=raw, sfaps=sfaps, muap=muap)


def finish_call(backend, started: Started, *, keep_on_device: bool = False, muap_only: bool = False) -> SfapResult:
    """The ``SfapResult`` of a started call: copied to the host (waiting for it) unless
    ``keep_on_device``; ``muap_only`` copies and keeps the MUAP alone."""
    raw, sfaps, muap = (None, None, started.muap) if muap_only else (started.sfaps_raw, started.sfaps, started.muap)
    if backend.name != "cpu" and not keep_on_device:
        raw = None if raw is None else backend.to_host(raw)
        sfaps = None if sfaps is None else backend.to_host(sfaps)
        muap = backend.to_host(muap)
    return SfapResult(t=started.t, sfaps_raw=raw, sfaps=sfaps, muap=muap, backend=backend.name)
