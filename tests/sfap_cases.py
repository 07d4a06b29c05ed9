"""Golden SFAP files as compute_sfaps arguments (shared by the CPU, simulator and GPU tests)."""

import numpy as np
from testlib import DATA

GOLDEN = sorted((DATA / "sfap").glob("sfap_*.npz"))
TOL = 1e-12


def golden_inputs(path):
    """(compute_sfaps keyword arguments, the whole file) of one golden file."""
    g = np.load(path)
    kwargs = {
        "fibre_xy": g["fibre_xy"], "fibre_diameter": g["fibre_diam"], "fibre_cv": g["fibre_cv"],
        "nmj_z": g["nmj_z"], "fibre_ends": np.stack([g["left_end"], g["right_end"]], axis=1),
        "nerve_paths": g["nerve_paths"], "branch_cv": g["nmj_branch_cv"], "electrodes": g["electrodes"],
        "dt": float(g["dt"]), "dz": float(g["dz"]),
    }
    return kwargs, g
