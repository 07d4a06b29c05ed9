"""MyoGen's intramuscular single-fibre action potentials (SFAPs) on kernelrt backends.

``compute_sfaps`` reproduces MyoGen 0.12 ``MotorUnitSim.calc_sfaps`` (and
``calc_muap(jitter_std=0)``) for one motor unit to about 1e-14 channel-relative error
(docs/sfap.md). This ``__init__`` is the family's public API; the modules:

- ``compute``: ``compute_sfaps`` and ``SfapResult``, one motor unit.
- ``inputs``: validation of every argument, before any work.
- ``prep``: host preparation, bit-exact in float64 and vectorised across fibres
  (grids, masks, mirror map); ``tables`` its data, ``bounds`` its exact interval searches.
- ``kernels``: the electrode responses h and the fused current-density contraction.
- ``columns_tiled``: the contraction's register-tiled GPU variant (``kernelrt.kernels.variants``).
- ``cpu_math``: the vectorisable e^{-x} of the CPU twin.
- ``delay``: the NMJ delay and the MUAP sum.
- ``run``: the launch sequence (batches sized to free memory, kernels, delay; on a
  device the next batch is planned while the current one runs).
- ``many``: ``compute_many``, many motor units here (pipelined on a device) or on a Dask cluster.
- ``reference``: a plain NumPy reference written from the model, for tests and the demo.

Work is split into batches of fibres so that the per-fibre buffers (the electrode
responses h, Nz x Ne doubles per fibre) fit in the free device memory (``fit_batch``,
asked before anything is allocated) and, on the CPU, in ``HOST_BUDGET_BYTES`` of RAM.
The result does not depend on the batch size: every output sample is one sum in a
fixed row order.
"""

from __future__ import annotations

from ..tasks import FailedTasks, TaskFailure
from ..variants import variant
from .compute import SfapResult, compute_sfaps
from .delay import DELAY_SIGNATURE, sfap_delay, sfap_delay_staged, sfap_muap
from .columns_tiled import sfap_columns_tiled
from .kernels import sfap_columns, sfap_response
from .many import compute_many
from .run import HOST_BUDGET_BYTES

__all__ = ["HOST_BUDGET_BYTES", "FailedTasks", "SfapResult", "TaskFailure", "compute_many", "compute_sfaps", "variant_specs",
           "warm_specs"]

_SIG_RESPONSE = "float64[:, ::1], float64[:, ::1], float64[::1], int64[::1], float64[:, :, ::1]"
# On the CPU the response kernel writes through a transposed view (run.launch_response).
_SIG_RESPONSE_CPU = "float64[:, ::1], float64[:, ::1], float64[::1], int64[::1], float64[:, :, :]"
_SIG_COLUMNS = (
    "float64[:, ::1], float64[:, ::1], float64[:, :, ::1], int64[:, ::1], float64[:, ::1], "
    "int64[:, :, ::1], float64[:, :, ::1], int64"
)
_SIG_MUAP = "float64[:, :, ::1], float64[:, ::1]"
# Each variant's kernel and the signature its driver launches it with (the tiled kernel takes rc too).
_COLUMNS = {"rows": (sfap_columns, _SIG_COLUMNS), "tiled": (sfap_columns_tiled, _SIG_COLUMNS + ", int64")}
_DELAY = {"direct": (sfap_delay, DELAY_SIGNATURE), "staged": (sfap_delay_staged, DELAY_SIGNATURE)}


def warm_specs() -> dict:
    """Every kernel ``compute_sfaps`` launches, with the signature it uses, per backend.

    Returns:
        ``{"cpu": [(kernel, signature), ...], "cuda": [...]}`` for ``kernelrt cache warm``.
        On the CPU the delay and the MUAP run in NumPy, so only two kernels are listed.
    """
    return {
        "cpu": [(sfap_response, _SIG_RESPONSE_CPU), (sfap_columns, _SIG_COLUMNS)],
        "cuda": [(sfap_response, _SIG_RESPONSE), _COLUMNS[variant("sfap_columns")], _DELAY[variant("sfap_delay")],
                 (sfap_muap, _SIG_MUAP)],
    }


def variant_specs() -> list:
    """(kernel, signature) of each GPU kernel variant (``kernelrt.kernels.variants``), not in ``warm_specs``:
    the defaults are what the drivers launch; these are compiled where chosen, by the PTX layer and
    by tools/kernel_resources.py."""
    return [spec for family, table in (("sfap_columns", _COLUMNS), ("sfap_delay", _DELAY))
            for name, spec in table.items() if name != variant(family)]
