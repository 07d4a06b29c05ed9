"""MyoGen's intramuscular single-fibre action potentials (SFAPs) on kernelrt backends.

``compute_sfaps`` reproduces MyoGen 0.12 ``MotorUnitSim.calc_sfaps`` (and
``calc_muap(jitter_std=0)``) for one motor unit to about 1e-14 channel-relative error
(docs/sfap.md). This ``__init__`` is the family's public API; the modules:

- ``inputs``: validation of every argument, before any work.
- ``prep``: host preparation, bit-exact in float64 (masks, mirror map, tables).
- ``kernels``: the electrode responses h and the fused current-density contraction.
- ``cpu_math``: the vectorisable e^{-x} of the CPU twin.
- ``delay``: the NMJ delay and the MUAP sum.
- ``run``: the launch sequence (batches sized to free memory, kernels, delay).
- ``reference``: a plain NumPy reference written from the model, for tests and the demo.

Work is split into batches of fibres so that the per-fibre buffers (the electrode
responses h, Nz x Ne doubles per fibre) fit in the free device memory (``fit_batch``,
asked before anything is allocated) and, on the CPU, in ``HOST_BUDGET_BYTES`` of RAM.
The result does not depend on the batch size: every output sample is one sum in a
fixed row order.
"""

from __future__ import annotations

import contextlib
from dataclasses import dataclass

import numpy as np

import kernelrt

from ..conventions import terminal_bar
from .delay import sfap_delay, sfap_muap
from .inputs import check_inputs
from .kernels import sfap_columns, sfap_response
from .prep import plan_fibres
from .run import HOST_BUDGET_BYTES, run_plan

__all__ = ["HOST_BUDGET_BYTES", "SfapResult", "compute_sfaps", "warm_specs"]

_SIG_RESPONSE = "float64[:, ::1], float64[:, ::1], float64[::1], int64[::1], float64[:, :, ::1]"
# On the CPU the response kernel writes through a transposed view (run.launch_response).
_SIG_RESPONSE_CPU = "float64[:, ::1], float64[:, ::1], float64[::1], int64[::1], float64[:, :, :]"
_SIG_COLUMNS = (
    "float64[:, ::1], float64[:, ::1], float64[:, :, ::1], int64[:, ::1], float64[:, ::1], "
    "int64[:, :, ::1], float64[:, :, ::1], int64"
)
_SIG_DELAY = "float64[:, :, ::1], float64[:, ::1], int64[::1], float64[:, :, ::1]"
_SIG_MUAP = "float64[:, :, ::1], float64[:, ::1]"


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
    sfaps_raw: object
    sfaps: object
    muap: object
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
        progress: True draws a tqdm bar over fibres (on a terminal only); a callable is
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
    plan = plan_fibres(**inputs)
    with _progress_bar(progress, plan.vt.shape[0]) as update:
        raw, sfaps, muap = run_plan(backend, plan, inputs["electrodes"][:, 2].copy(), keep_raw=keep_raw,
                                    progress=update)
    if backend.name != "cpu" and not keep_on_device:
        raw = None if raw is None else backend.to_host(raw)
        sfaps, muap = backend.to_host(sfaps), backend.to_host(muap)
    return SfapResult(t=plan.t, sfaps_raw=raw, sfaps=sfaps, muap=muap, backend=backend.name)


@contextlib.contextmanager
def _progress_bar(progress, n_fibres: int):
    """The ``progress`` argument as a per-batch callback (or None): a tqdm bar for True."""
    if callable(progress) or not progress:
        yield progress or None
        return
    with terminal_bar(n_fibres, "kernelrt SFAPs", "fibre") as bar:
        yield bar.update


def warm_specs() -> dict:
    """Every kernel ``compute_sfaps`` launches, with the signature it uses, per backend.

    Returns:
        ``{"cpu": [(kernel, signature), ...], "cuda": [...]}`` for ``kernelrt cache warm``.
        On the CPU the delay and the MUAP run in NumPy, so only two kernels are listed.
    """
    return {
        "cpu": [(sfap_response, _SIG_RESPONSE_CPU), (sfap_columns, _SIG_COLUMNS)],
        "cuda": [(sfap_response, _SIG_RESPONSE), (sfap_columns, _SIG_COLUMNS), (sfap_delay, _SIG_DELAY),
                 (sfap_muap, _SIG_MUAP)],
    }
