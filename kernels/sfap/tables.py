"""The SFAP plan's data: the per-fibre tables the kernels read, and their column layout.

Conventions of the per-fibre tables (``FibrePlan``, ``FibreTables``), filled by prep.py:

* an interval is inclusive ``(lo, hi)``; an empty one has ``hi < lo``;
* ``IPAR`` columns: ``nz``, the long-side mask A, the mirrored short side S
  (B ∩ valid mirror rows), the mirror base ``mb`` (row j reads Λ at ``mb - j``), the
  end-plate rows E that are zeroed, and σ;
* ``rows[f, k]`` bounds the rows whose current I[j, k] can be non-zero. It is derived
  from the exact sign test ``x > 0 ⇔ σρ < v t`` and may only be a superset.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

__all__ = [
    "F_DELTA", "F_SCALE", "F_ZETA", "I_AHI", "I_ALO", "I_EHI", "I_ELO", "I_MB", "I_NZ", "I_SHI", "I_SIGMA",
    "I_SLO", "N_FPAR", "N_IPAR", "FibrePlan", "FibreTables", "UnitPlan",
]

# Column indices of the integer and float per-fibre tables the kernels read.
I_NZ, I_ALO, I_AHI, I_SLO, I_SHI, I_MB, I_ELO, I_EHI, I_SIGMA = range(9)
N_IPAR = 9
F_ZETA, F_DELTA, F_SCALE = range(3)
N_FPAR = 3


@dataclass(frozen=True)
class UnitPlan:
    """The whole-call part of a plan: what every batch shares, and what ``plan_tables`` reads.

    Attributes:
        t: (Nt,) time grid, s.
        vt: (Nf, Nt) v_f * t_k.
        kr2: (Nf, Ne) κ r² with r clamped to the minimum radial distance.
        delay_int: (Nf,) int64 integer part n of the NMJ delay in samples.
        delay_frac: (Nf,) float64 fractional part φ in [0, 1).
        nz: (Nf,) int64 rows of each fibre (Nz, without the extended row).
        n_left: (Nf,) int64 rows of numpy.arange's left half (the NMJ's row is n_left - 1).
        nmj_z, left, right, cv: (Nf,) float64 fibre inputs.
        scale: (Nf,) float64 c_f = σ_i·π·(d_f/2)².
        dz: the spatial step, mm.
    """

    t: np.ndarray
    vt: np.ndarray
    kr2: np.ndarray
    delay_int: np.ndarray
    delay_frac: np.ndarray
    nz: np.ndarray
    n_left: np.ndarray
    nmj_z: np.ndarray
    left: np.ndarray
    right: np.ndarray
    cv: np.ndarray
    scale: np.ndarray
    dz: float

    @property
    def nz_max(self) -> int:
        return int(self.nz.max())


@dataclass(frozen=True)
class FibreTables:
    """The per-fibre tables of a range of fibres (see ``FibrePlan`` for each field)."""

    z: np.ndarray
    ipar: np.ndarray
    fpar: np.ndarray
    rows: np.ndarray


@dataclass(frozen=True)
class FibrePlan:
    """Everything the kernels need, for all fibres of one motor unit.

    Attributes:
        t: (Nt,) time grid, s.
        z: (Nf, nz_max + 1) z rows including the extended row Nz; padding is 0.
        ipar: (Nf, N_IPAR) int64 per-fibre integers (see the module docstring).
        fpar: (Nf, N_FPAR) float64 per-fibre ζ, Δ and the scale c_f.
        vt: (Nf, Nt) v_f * t_k.
        kr2: (Nf, Ne) κ r² with r clamped to the minimum radial distance.
        rows: (Nf, Nt, 2) int64 inclusive row range where I[:, k] may be non-zero.
        delay_int: (Nf,) int64 integer part n of the NMJ delay in samples.
        delay_frac: (Nf,) float64 fractional part φ in [0, 1).
    """

    t: np.ndarray
    z: np.ndarray
    ipar: np.ndarray
    fpar: np.ndarray
    vt: np.ndarray
    kr2: np.ndarray
    rows: np.ndarray
    delay_int: np.ndarray
    delay_frac: np.ndarray

    @property
    def nz_max(self) -> int:
        return int(self.ipar[:, I_NZ].max())
