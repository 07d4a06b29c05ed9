"""warm_specs lists exactly the (kernel, signature) pairs the drivers launch on the CPU."""

import numpy as np

from kernelrt.codegen import cpu_index_arity
from kernelrt.compiler import cpu_dispatcher
from kernelrt.kernels import laplacian as lap


def _launched_signatures(kernel) -> set:
    """User-argument types of every CPU overload compiled in this process."""
    skip = cpu_index_arity(kernel.ndim) if kernel.kind == "thread" else 2  # index args, or (grid, block)
    return {tuple(key[skip:]) for key in cpu_dispatcher(kernel).overloads}


def test_drivers_launch_only_the_warmed_signatures(cpu):
    # Only what this test's driver calls add counts: other tests in the process may have
    # launched a kernel with types no driver uses (read-only arrays in test_prepared).
    kernels = {kernel for kernel, _ in lap.warm_specs(("int32", "int64"))["cpu"]}
    before = {kernel: _launched_signatures(kernel) for kernel in kernels}
    specs = lap.warm_specs()["cpu"]
    for kernel, sig in specs:
        status = cpu.compile_kernel(kernel, sig).status
        assert status in ("compiled", "disk", "memory")
    # every driver path on the CPU
    V, F = lap.icosphere(2)
    topo = lap.MeshTopology(F, len(V))
    L, m = topo.assemble(V, cpu)
    topo.assemble(V, cpu, variant="atomic")
    topo.assemble_batch(np.stack([V, V]), cpu)
    op = lap.LaplacianOperator(L, m, backend=cpu)
    x, X = np.ones(len(V)), np.ones((len(V), 4))
    op.matvec(x), op.matvec(X), op.heat_steps(x, 1e-3, 2), op.heat_steps(X, 1e-3, 2)
    warmed: dict = {}
    for kernel, sig in lap.warm_specs(("int32", "int64"))["cpu"]:
        warmed.setdefault(kernel, set()).add(tuple(kernel.parse_signature(sig)))
    for kernel, sigs in warmed.items():
        launched = _launched_signatures(kernel) - before[kernel]
        assert launched <= sigs, f"{kernel.name} launched with unwarmed types {launched - sigs}"


def test_specs_cover_both_targets_and_index_widths():
    s32 = lap.warm_specs()
    both = lap.warm_specs(("int32", "int64"))
    names = {k.name for k, _ in s32["cuda"]}
    assert {"row_values", "face_values_atomic", "finish_mass", "csr_matvec", "csr_matmat",
            "heat_step", "heat_step_block", "cheb_step", "random_fill"} == names
    assert {"count_corners", "fill_corners", "row_candidates", "row_fill", "scatter_face_slots"} <= {
        k.name for k, _ in s32["cpu"]
    }
    assert len(both["cuda"]) > len(s32["cuda"])
    assert len(set(both["cuda"])) == len(both["cuda"])  # no duplicates
