"""MyoGen 0.12 on kernelrt: ``MotorUnitSim.calc_sfaps`` and ``calc_muap`` swapped, MyoGen's types kept.

After ``enable()`` (or with ``KERNELRT_MYOGEN=1`` in the environment) MyoGen's own API
computes with kernelrt: ``MotorUnitSim.calc_sfaps`` fills ``sfaps`` (and ``dt``, ``dz``,
``Npt``, ``mnap_delays``) as MyoGen's does, from the motor unit's own (N, 1) columns and
private fibre ends, on the backend MyoGen's ``use_gpu`` asks for; ``calc_muap`` sums
them, with MyoGen's jitter drawn from MyoGen's own random generator when
``jitter_std > 0``. ``IntramuscularEMG.simulate_muaps(n_jobs=...)`` swaps in its joblib
workers too (hooks.py explains how). ``simulate_muaps(emg)`` computes every motor unit
in this process instead, each with all cores (or on the GPU), which beats worker
processes that each hold a unit's SFAPs.

Calls kernelrt cannot take (inputs it refuses, e.g. a motor unit without NMJs, or
``use_gpu=True`` where kernelrt has no GPU) are handed back to MyoGen's own method, so
the user sees MyoGen's own error (or MyoGen's own CuPy path); each is counted in
``stats()["fallbacks"]`` and logged. The patches apply to MyoGen 0.12.x only, and only
when every name they replace exists; otherwise one ``RuntimeWarning``, and MyoGen runs
its own code (``stats()["refused"]`` says why; hooks.py).

Importing this module imports neither MyoGen nor numba: the start-up hook imports it when
a process where the variable is set first imports MyoGen.
"""

from __future__ import annotations

import logging
import sys
from typing import Any

import numpy as np

import kernelrt

from .. import config
from .hooks import Integration, Patch

__all__ = ["INTEGRATION", "disable", "enable", "motor_unit_inputs", "simulate_muaps", "stats"]

MODULE = "myogen.simulator.core.emg.intramuscular.motor_unit_sim"
log = logging.getLogger("kernelrt.integrations.myogen")


def motor_unit_inputs(mu, electrode_positions, dt: float, dz: float, min_radial_dist=None) -> dict:
    """``compute_sfaps`` keyword arguments for a MyoGen ``MotorUnitSim``, read from its attributes.

    Its (N, 1) columns are passed as they are (compute_sfaps accepts them); the fibre ends
    come from the unit's private ``_muscle_fiber_left_ends__mm`` / ``_right_ends__mm``, the
    NMJ positions from ``_neuromuscular_z_coordinates__mm`` (set by MyoGen's
    ``sim_nmj_branches_*``).

    Raises:
        ValueError: the unit has no NMJ positions or nerve paths yet.
    """
    nmj_z = mu._neuromuscular_z_coordinates__mm
    nerve_paths = getattr(mu, "nerve_paths", None)
    if nmj_z is None or nerve_paths is None:
        raise ValueError("the motor unit has no NMJ positions yet: call its sim_nmj_branches_* method first")
    ends = np.hstack([np.asarray(mu._muscle_fiber_left_ends__mm, dtype=np.float64).reshape(-1, 1),
                      np.asarray(mu._muscle_fiber_right_ends__mm, dtype=np.float64).reshape(-1, 1)])
    return {
        "fibre_xy": mu.muscle_fiber_centers__mm,
        "fibre_diameter": mu.muscle_fiber_diameters__mm,
        "fibre_cv": mu.muscle_fiber_conduction_velocity__mm_per_s,
        "nmj_z": nmj_z,
        "fibre_ends": ends,
        "nerve_paths": nerve_paths,
        "branch_cv": mu.neuromuscular_junction_conduction_velocities__mm_per_s,
        "electrodes": electrode_positions,
        "dt": dt,
        "dz": dz,
        "min_radial_dist": min_radial_dist,
    }


def _backend_for(use_gpu) -> str:
    """MyoGen's tri-state ``use_gpu`` as a kernelrt backend kind.

    None is "the GPU if there is one", decided here rather than by ``get_backend("auto")``:
    MyoGen's own CPU path is silent, so the swap issues no ``CPUFallbackWarning`` (which a
    suite run with warnings as errors would raise).
    """
    if use_gpu is None:
        return "cuda" if not config.myogen_gpu_disabled() and kernelrt.CUDABackend.check_available() else "cpu"
    return "cuda" if use_gpu else "cpu"


def calc_sfaps(self, index, dt, dz, electrode_positions, electrode_normals=None, min_radial_dist=None,
               verbose=True, use_gpu=None):
    """kernelrt's ``MotorUnitSim.calc_sfaps`` (MyoGen's signature; normals are unused, as in MyoGen)."""
    args = (self, index, dt, dz, electrode_positions, electrode_normals, min_radial_dist, verbose, use_gpu)
    if not INTEGRATION.enabled:  # a reference taken while enabled, called after disable()
        return INTEGRATION.original("MotorUnitSim.calc_sfaps")(*args)
    # Lazy: keeps numba out of interpreter start-up, where the .pth hook imports this module.
    from kernelrt.kernels.sfap import compute_sfaps
    from kernelrt.kernels.sfap.inputs import check_inputs

    try:
        backend = kernelrt.get_backend(_backend_for(use_gpu))
        inputs = motor_unit_inputs(self, electrode_positions, dt, dz, min_radial_dist)
        checked = check_inputs(**inputs)  # refusals go back to MyoGen; errors while computing do not
    except (TypeError, ValueError, kernelrt.CudaUnavailableError) as e:
        INTEGRATION.record("fallbacks")
        log.info("kernelrt cannot take this call (%s); MyoGen's own calc_sfaps runs", e)
        return INTEGRATION.original("MotorUnitSim.calc_sfaps")(*args)
    result = compute_sfaps(**inputs, backend=backend, keep_raw=False, progress=bool(verbose))
    self.dt, self.dz, self.Npt = dt, dz, checked["electrodes"].shape[0]
    self.sfaps = result.sfaps
    self.calc_mnap_delays()  # MyoGen's own: leaves mnap_delays as its shift_sfaps does
    INTEGRATION.record("calls")


def calc_muap(self, jitter_std: float = 0.0) -> np.ndarray:
    """kernelrt's ``MotorUnitSim.calc_muap``: MyoGen's jitter, from MyoGen's own generator."""
    from kernelrt.kernels.sfap.delay import jitter_muap  # lazy, as in calc_sfaps

    if (not INTEGRATION.enabled or jitter_std == 0 or getattr(self, "sfaps", None) is None
            or getattr(self, "dt", None) is None):
        # MyoGen's own errors for a unit without SFAPs; its own plain sum without jitter
        return INTEGRATION.original("MotorUnitSim.calc_muap")(self, jitter_std)
    rng = sys.modules[MODULE].get_random_generator()  # the one MyoGen draws from, so seeds agree
    delays = jitter_std * rng.standard_normal(size=(self._number_of_muscle_fibers, 1))
    self.muap = jitter_muap(self.sfaps, delays[:, 0] / self.dt)
    INTEGRATION.record("calls")
    return self.muap


def simulate_muaps(emg: Any, *, verbose: bool = True) -> Any:
    """Every motor unit of a MyoGen ``IntramuscularEMG``, in this process, on kernelrt.

    Runs MyoGen's own ``simulate_muaps`` with ``n_jobs=1`` and the swap enabled for the
    call: MyoGen builds its motor units and NMJs (its random draws unchanged) and fills
    ``muaps__Block`` as always, while each unit's SFAPs run on kernelrt with all cores (or
    the GPU). One unit's SFAPs are held at a time, where MyoGen's workers hold one each.

    Returns:
        MyoGen's ``INTRAMUSCULAR_MUAP__Block``, as ``emg.simulate_muaps`` returns it.
    """
    was_enabled = INTEGRATION.enabled
    INTEGRATION.enable(environment=False)
    try:
        return emg.simulate_muaps(n_jobs=1, verbose=verbose)
    finally:
        if not was_enabled:
            INTEGRATION.disable()


INTEGRATION = Integration(
    "myogen",
    "KERNELRT_MYOGEN",
    patches=(Patch(MODULE, "MotorUnitSim.calc_sfaps", calc_sfaps), Patch(MODULE, "MotorUnitSim.calc_muap", calc_muap)),
)


def enable() -> None:
    """Swap MyoGen's ``calc_sfaps``/``calc_muap`` for kernelrt's, here and in processes started from now on."""
    INTEGRATION.enable()


def disable() -> None:
    """Restore MyoGen's own ``calc_sfaps``/``calc_muap``."""
    INTEGRATION.disable()


def stats() -> dict:
    """This process's counters: ``enabled``, ``applied``, ``calls``, ``fallbacks``, ``pid``."""
    return INTEGRATION.stats()
