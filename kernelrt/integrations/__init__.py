"""kernelrt inside its peers' own APIs: MyoGen and SpectralBrain users switch with one line.

Each integration swaps the peer's inner-loop function for kernelrt's, keeps the peer's
types and error messages, and is reversible::

    import kernelrt.integrations.myogen as kmyogen
    kmyogen.enable()        # MotorUnitSim.calc_sfaps / calc_muap now run on kernelrt
    kmyogen.disable()       # MyoGen's own code again

or, for code you cannot edit, ``KERNELRT_MYOGEN=1`` / ``KERNELRT_SPECTRALBRAIN=1`` in
the environment. The modules:

- ``hooks``: patches, the post-import hook, the environment and worker processes, and
  the version guards (peers patched only at the versions kernelrt was tested with).
- ``startup_hook``: what ``kernelrt-integrations.pth`` loads at interpreter start (standard
  library only): an import watcher that calls ``startup()``.
- ``myogen``: MyoGen 0.12 (``calc_sfaps``, ``calc_muap`` with jitter, a whole
  ``IntramuscularEMG`` in one call).
- ``spectralbrain``: SpectralBrain 0.1 (``_cotangent_laplacian``, a backend for its
  ``eigsh``).

``startup()`` is what the watcher of the ``kernelrt-integrations.pth`` file installed
into site-packages calls when a process started with one of the variables set first
imports a peer (or this package): it is how worker processes (joblib/loky,
multiprocessing) swap too. Importing this package imports neither peer nor numba.
"""

from __future__ import annotations

from .. import config
from . import myogen, spectralbrain
from .hooks import log as hooks_log

__all__ = ["INTEGRATIONS", "startup", "status"]

INTEGRATIONS = {"myogen": myogen.INTEGRATION, "spectralbrain": spectralbrain.INTEGRATION}


def startup() -> None:
    """Enable every integration whose environment variable is set (the .pth start-up hook).

    Called by ``startup_hook``'s watcher when a peer or this package is first imported:
    a failure is logged, never raised.
    """
    for integration in INTEGRATIONS.values():
        if config.integration_requested(integration.env_var):
            try:
                integration.enable(environment=False)
            except Exception:  # noqa: BLE001  (a broken integration must not stop Python from starting)
                hooks_log.exception("kernelrt %s integration: start-up failed", integration.name)


def status() -> dict:
    """Each integration's counters in this process (``Integration.stats``)."""
    return {name: integration.stats() for name, integration in INTEGRATIONS.items()}


