"""The probe's A/B groups for the kernel variants of ``kernelrt.kernels.variants`` (``--variant NAME|all``).

Each group times a family's default and its alternative on the same inputs against one
floor, so one GPU sitting decides which becomes the default:

* ``sfap_columns``: ``sfap_columns`` vs ``sfap_columns_tiled`` (kernel-only), the probe's
  SFAP cases; the floor row also carries both kernels' L1 design bounds.
* ``sfap_delay``: ``sfap_delay`` vs ``sfap_delay_staged`` (kernel-only), the same cases.
* ``assembly`` (gpu_variants.py): ``row_values``, ``row_values_nodiv`` and
  ``face_values_atomic`` (kernel-only), ico7, ico8 and a 100-subject cohort.
* ``sparse_spmv``, ``sparse_spmm``, ``sparse_cheb``: CSR vs SELL-32 for the vector product, the 50-column product and the
  Chebyshev step (kernel-only), ico7 and ico8.
* ``loops_heat``, ``loops_filter``: 200 heat steps and a degree-20 Chebyshev filter on 50 columns, one launch per
  step vs one cooperative launch, timed as calls on device-resident arrays (wall clock,
  ``timing`` "device-resident"): the host's launch cost is what the variant removes, so a
  kernel-only figure would hide it.
"""

from __future__ import annotations

import numpy as np
from gpu_floors import (heat_floor, ico_counts, sfap_counts, sfap_floors, spmm_floor, spmv_floor,
                        tiled_columns_bound)
from gpu_variants import GROUPS, Group, register_variant

__all__ = ["HEAT_STEPS", "FILTER_DEGREE"]

HEAT_STEPS = 200
FILTER_DEGREE = 20


def _sfap_cases(probe):
    """The probe's SFAP cases, each also at the batch compute_sfaps launches when that is smaller.

    The 2026-11-27 H200 sitting timed the tiled columns kernel-only on a whole unit (436
    fibres: 872 one-warp blocks at MyoGen's 121 samples) and found it slower end to end,
    where the pipeline launches 109-fibre batches (218 warps for 132 SMs): the batch rows
    time what the driver runs.
    """
    from gpu_cases_sfap import sfap_cases

    from kernelrt.kernels.sfap.run import pipeline_batch

    cases = []
    for name, nf, ne, dz, length in sfap_cases(probe):
        cases.append((name, nf, ne, dz, length, None))
        batch = pipeline_batch(nf)
        if probe.gpu and batch < nf:
            cases.append((f"{name} batch{batch}", nf, ne, dz, length, batch))
    return cases


def _sfap_setup(probe, nf, ne, dz, length, batch):
    from gpu_cases_sfap import SfapSetup

    return SfapSetup(probe.backend, nf, ne, dz, length, batch)


def _columns_floor(probe, setup, nf, ne, dz, length, batch):
    floor = sfap_floors(sfap_counts(setup.plan, ne), probe.peaks)["sfap_columns"]
    floor["tiled_design_bound_s"] = tiled_columns_bound(setup.plan, ne, probe.peaks)["design_bound_s"]
    return floor


def _delay_floor(probe, setup, nf, ne, dz, length, batch):
    return sfap_floors(sfap_counts(setup.plan, ne), probe.peaks)["sfap_delay"]


def _mesh_cases(probe):
    if probe.kind == "simulated":
        return [("ico1", 1)]
    if probe.kind == "cpu":
        return [("ico3", 3)] if probe.quick else [("ico5", 5)]
    return [("ico7", 7), ("ico8", 8)]


class SparseSetup:
    """One icosphere's L on the backend in both layouts, with device inputs for each timed kernel."""

    def __init__(self, backend, level: int):
        from gpu_cases_laplacian import SPMM_K, TAU
        from kernelrt.kernels.laplacian import LaplacianOperator, MeshTopology, icosphere

        V, F = icosphere(level)
        L, m = MeshTopology(F, V.shape[0]).assemble(V, "cpu")
        self.be, self.n, self.nnz, self.k, self.tau = backend, V.shape[0], L.nnz, SPMM_K, TAU
        self.ops = {layout: LaplacianOperator(L, m, backend=backend, layout=layout) for layout in ("csr", "sell")}
        rng = np.random.default_rng(0)
        self.x = backend.to_device(rng.standard_normal(self.n))
        self.y = backend.allocate(self.n, np.float64)
        self.X = backend.to_device(rng.standard_normal((self.n, SPMM_K)))
        self.Y = backend.allocate((self.n, SPMM_K), np.float64)

    def launcher(self, layout: str, what: str):
        """(kernel name, launch()) of one product kernel of ``what`` ("spmv", "spmm", "cheb") in ``layout``."""
        from kernelrt.kernels.laplacian.chebyshev import cheb_step
        from kernelrt.kernels.laplacian.csr_rows import _geometry
        from kernelrt.kernels.laplacian.placement import BLOCK, blocks
        from kernelrt.kernels.laplacian.spmv import csr_matmat, csr_matvec

        op, be = self.ops[layout], self.be
        if what == "spmv":
            kernel = op.kernel_for(csr_matvec)
            return kernel.name, lambda: be.launch_kernel(kernel, blocks(self.n), BLOCK, *op.sparse, self.x, self.y)
        grid, block = _geometry(self.n, self.k)
        if what == "spmm":
            kernel = op.kernel_for(csr_matmat)
            return kernel.name, lambda: be.launch_kernel(kernel, grid, block, *op.sparse, self.X, self.Y)
        kernel = op.kernel_for(cheb_step)
        return kernel.name, lambda: be.launch_kernel(kernel, grid, block, *op.sparse, 1e-3, 1.0, 0.5, self.X, self.X,
                                                     self.Y)

    def loop(self, loops: str, what: str):
        """(label, call()) of ``HEAT_STEPS`` heat steps or a degree-``FILTER_DEGREE`` filter, loops = ``loops``."""
        from kernelrt.kernels.laplacian.chebyshev import _Block
        from kernelrt.kernels.laplacian.placement import cupy_or_none
        from kernelrt.kernels.variants import use_variants

        op = self.ops["csr"]
        if what == "heat":
            def call():
                with use_variants(loops=loops):
                    op.heat_steps(self.x, self.tau, HEAT_STEPS)
            return f"heat_steps x{HEAT_STEPS}", call
        block = _Block(op, cupy_or_none(self.be))
        y = block.to_dense(self.X)

        def call():
            with use_variants(loops=loops):
                block.filter(y, FILTER_DEGREE, 0.5, 8.0)
        return f"chebyshev filter d{FILTER_DEGREE}", call


def _sparse_floor(what):
    def floor(probe, setup, level):
        c = ico_counts(level)
        if what == "spmv":
            return spmv_floor(c["n"], c["nnz"], probe.peaks)
        return spmm_floor(c["n"], c["nnz"], setup.k, probe.peaks)
    return floor


def _loops_floor(what):
    def floor(probe, setup, level):
        c = ico_counts(level)
        if what == "heat":
            return heat_floor(c["n"], c["nnz"], HEAT_STEPS, probe.peaks)
        one = spmm_floor(c["n"], c["nnz"], setup.k, probe.peaks)
        return {**one, "floor_s": FILTER_DEGREE * one["floor_s"], "formula": f"{FILTER_DEGREE} x " + one["formula"]}
    return floor


def _sparse_setup(probe, level):
    return SparseSetup(probe.backend, level)


GROUPS["sfap_columns"] = Group(_sfap_cases, _sfap_setup, _columns_floor)
GROUPS["sfap_delay"] = Group(_sfap_cases, _sfap_setup, _delay_floor)
for _what in ("spmv", "spmm", "cheb"):
    GROUPS[f"sparse_{_what}"] = Group(_mesh_cases, _sparse_setup, _sparse_floor(_what))
for _what in ("heat", "filter"):
    GROUPS[f"loops_{_what}"] = Group(_mesh_cases, _sparse_setup, _loops_floor(_what), timing="device-resident")

for _v, _k in (("rows", "sfap_columns"), ("tiled", "sfap_columns_tiled")):
    register_variant("sfap_columns", _v, lambda s, *case, v=_v, k=_k: (k, lambda: s.columns(v)))
for _v, _k in (("direct", "sfap_delay"), ("staged", "sfap_delay_staged")):
    register_variant("sfap_delay", _v, lambda s, *case, v=_v, k=_k: (k, lambda: s.delay(v)))
for _what in ("spmv", "spmm", "cheb"):
    for _layout in ("csr", "sell"):
        register_variant(f"sparse_{_what}", _layout, lambda s, *case, w=_what, lay=_layout: s.launcher(lay, w))
for _what in ("heat", "filter"):
    for _loops in ("launches", "cooperative"):
        register_variant(f"loops_{_what}", _loops, lambda s, *case, w=_what, lp=_loops: s.loop(lp, w))
