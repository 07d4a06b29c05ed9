"""compute_sfaps as users call it: bad inputs, the backend argument, the result, warm specs, the cache.

Accuracy is the channel-relative error of docs/sfap.md ("Accuracy metric").
"""

from __future__ import annotations

import numpy as np
import pytest
from kernelrt.kernels.sfap import compute_sfaps, warm_specs

from tests.support.sfap_cases import (
    make_case,
)

# -- inputs ----------------------------------------------------------------------------


def _bad(**changes):
    kwargs = make_case(nf=2, ne=2, dz=0.1, length=20.0)
    kwargs.update(changes)
    return kwargs


BAD_INPUTS = [
    ("fibre_xy", np.zeros((2, 3)), ValueError, r"fibre_xy must have shape \(N, 2\) \(got shape \(2, 3\)\)"),
    ("fibre_xy", np.zeros((0, 2)), ValueError, "at least one fibre"),
    ("fibre_xy", [["a", "b"], ["c", "d"]], TypeError, "fibre_xy must hold real numbers"),
    ("fibre_diameter", np.array([0.05]), ValueError, "fibre_diameter must have one entry per fibre"),
    ("fibre_diameter", np.array([0.05, 0.0]), ValueError, r"fibre_diameter must be > 0 .*got 0.0"),
    ("fibre_diameter", np.array([0.05, np.nan]), ValueError, "fibre_diameter must be finite"),
    ("fibre_cv", np.array([4000.0, -1.0]), ValueError, "fibre_cv must be > 0"),
    ("fibre_cv", np.array([4000.0, np.inf]), ValueError, "fibre_cv must be finite"),
    ("nmj_z", np.array([[10.0, 10.0]]), ValueError, r"nmj_z must have shape \(N,\)"),
    ("fibre_ends", np.array([[0.0, 20.0], [20.0, 0.0]]), ValueError, "left < right"),
    ("fibre_ends", np.array([[0.0, 20.0], [5.0, 5.0]]), ValueError, "left < right"),
    ("fibre_ends", np.zeros(2), ValueError, r"fibre_ends must have shape \(N, 2\)"),
    ("nerve_paths", np.array([[1.0, 1.0], [-1.0, 1.0]]), ValueError, "nerve_paths must be >= 0"),
    ("nerve_paths", np.ones((3, 2)), ValueError, "nerve_paths must have one entry per fibre"),
    ("branch_cv", np.array([5000.0]), ValueError, "branch_cv must hold the two"),
    ("branch_cv", np.array([5000.0, 0.0]), ValueError, "branch_cv must be > 0"),
    ("electrodes", np.zeros((2, 2)), ValueError, r"electrodes must have shape \(N, 3\)"),
    ("electrodes", np.zeros((0, 3)), ValueError, "at least one"),
    ("electrodes", np.array([[0.0, 0.0, np.nan]]), ValueError, "electrodes must be finite"),
    ("dt", 0.0, ValueError, r"dt must be a finite number > 0 \(got 0.0\)"),
    ("dt", "fast", TypeError, "dt must be a real number"),
    ("dz", -0.1, ValueError, "dz must be a finite number > 0"),
    ("dz", float("nan"), ValueError, "dz must be a finite number > 0"),
    ("dz", 25.0, ValueError, "dz must be smaller than the shortest fibre"),
    ("min_radial_dist", 0.0, ValueError, "min_radial_dist must be a finite number > 0"),
    ("min_radial_dist", True, TypeError, "min_radial_dist must be a real number"),
]


@pytest.mark.parametrize("name, value, error, message", BAD_INPUTS, ids=[f"{b[0]}-{i}" for i, b in enumerate(BAD_INPUTS)])
def test_bad_inputs(cpu, name, value, error, message):
    with pytest.raises(error, match=message):
        compute_sfaps(**_bad(**{name: value}), backend=cpu)


def test_backend_argument(cpu):
    kwargs = make_case(nf=1, ne=1, length=10.0)
    assert compute_sfaps(**kwargs, backend="cpu").backend == "cpu"
    with pytest.raises(TypeError, match=r"backend must be .*a kernelrt backend.*\(got list\)"):
        compute_sfaps(**kwargs, backend=[cpu])


def test_missing_argument_is_a_type_error(cpu):
    kwargs = _bad()
    del kwargs["electrodes"]
    with pytest.raises(TypeError, match="electrodes"):
        compute_sfaps(**kwargs, backend=cpu)


class _Quantity(np.ndarray):
    """A stand-in for a quantities/pint array: numbers plus ``.magnitude`` and ``.units``."""

    units = "m"

    @property
    def magnitude(self):
        return np.asarray(self)


def test_myogen_columns_are_accepted(cpu):
    """MyoGen stores per-fibre vectors as (N, 1) columns; they mean the same as (N,)."""
    kwargs = make_case(nf=3, ne=2, dz=0.5, length=10.0)
    columns = {k: np.asarray(kwargs[k])[:, None] for k in ("fibre_diameter", "fibre_cv", "nmj_z")}
    flat = compute_sfaps(**kwargs, backend=cpu)
    col = compute_sfaps(**{**kwargs, **columns}, backend=cpu)
    assert np.array_equal(flat.sfaps, col.sfaps)
    with pytest.raises(ValueError, match=r"fibre_cv must have shape \(N,\) or \(N, 1\) \(got shape \(3, 2\)\)"):
        compute_sfaps(**{**kwargs, "fibre_cv": np.ones((3, 2))}, backend=cpu)


@pytest.mark.parametrize("name", ["fibre_diameter", "dz"])
def test_quantities_are_refused_with_the_unit_named(cpu, name):
    kwargs = make_case(nf=2, ne=2, dz=0.5, length=10.0)
    value = np.atleast_1d(np.asarray(kwargs[name], dtype=float)).view(_Quantity)
    kwargs[name] = value if name != "dz" else value.reshape(())
    with pytest.raises(TypeError, match=rf"{name} must be a plain number or array in mm \(got a quantity in m\); "
                                        r"pass its magnitude"):
        compute_sfaps(**kwargs, backend=cpu)


def test_nmj_outside_the_fibre_follows_the_model(cpu):
    """MyoGen places some NMJs past a tendon; kernelrt computes them as the NumPy reference does."""
    from kernelrt.kernels.sfap.reference import channel_error, reference_sfaps

    kwargs = make_case(nf=4, ne=3, dz=0.1, length=20.0)
    kwargs["nmj_z"] = np.array([-1.37, 21.5, 0.004, 10.0])  # before a, past b, just inside, mid
    ours = compute_sfaps(**kwargs, backend=cpu)
    ref = reference_sfaps(**kwargs)
    assert ours.sfaps.shape == ref["sfaps"].shape
    # the reference sums in another order (BLAS); docs/sfap.md, "Accuracy metric"
    assert channel_error(ours.sfaps, ref["sfaps"]) <= 1e-12


def test_keep_raw_false_and_progress(cpu):
    """keep_raw=False delays in place: the same SFAPs, no raw array; progress counts every fibre."""
    kwargs = make_case(nf=5, ne=3, dz=0.1, length=20.0)
    full = compute_sfaps(**kwargs, backend=cpu)
    seen = []
    light = compute_sfaps(**kwargs, backend=cpu, keep_raw=False, progress=seen.append)
    assert light.sfaps_raw is None
    assert np.array_equal(full.sfaps, light.sfaps) and np.array_equal(full.muap, light.muap)
    assert sum(seen) == 5
    assert compute_sfaps(**kwargs, backend=cpu, progress=True).sfaps.shape == full.sfaps.shape


# -- API surface -----------------------------------------------------------------------


def test_result_is_frozen_and_host_arrays(cpu):
    result = compute_sfaps(**make_case(nf=1, ne=1, length=10.0), backend=cpu, keep_on_device=True)
    assert all(isinstance(getattr(result, k), np.ndarray) for k in ("t", "sfaps_raw", "sfaps", "muap"))
    assert result.sfaps.dtype == np.float64 and result.sfaps.flags.c_contiguous
    with pytest.raises(AttributeError):
        result.t = None


def test_default_backend_and_radial_distance(cpu):
    kwargs = make_case(nf=2, ne=2, length=10.0)
    auto = compute_sfaps(**kwargs)  # get_backend("auto"): the CPU here
    explicit = compute_sfaps(**kwargs, backend=cpu, min_radial_dist=float(np.mean(kwargs["fibre_diameter"])))
    assert np.array_equal(auto.sfaps, explicit.sfaps)  # exact: the same float, the same computation


def test_warm_specs_are_what_the_cpu_driver_launches(cpu):
    from kernelrt.compiler import cpu_dispatcher

    specs = warm_specs()
    assert set(specs) == {"cpu", "cuda"}
    assert {k.name for k, _ in specs["cuda"]} == {"sfap_response", "sfap_columns", "sfap_delay_staged", "sfap_muap"}
    for kernel, signature in specs["cpu"]:
        assert cpu.compile_kernel(kernel, signature).status in ("compiled", "disk", "memory")
    before = {k.name: set(cpu_dispatcher(k).overloads) for k, _ in specs["cpu"]}
    compute_sfaps(**make_case(nf=3, ne=3, dz=0.5, length=10.0), backend=cpu)
    assert {k.name: set(cpu_dispatcher(k).overloads) for k, _ in specs["cpu"]} == before


def test_cpu_kernels_load_from_disk_in_a_new_process(cache_dir):
    """The twin must be disk-cacheable and its key stable across hash seeds (set order)."""
    import os
    import subprocess
    import sys

    script = (
        "from kernelrt import CPUBackend\n"
        "from kernelrt.kernels.sfap import warm_specs\n"
        "b = CPUBackend()\n"
        "print(' '.join(b.compile_kernel(k, s).status for k, s in warm_specs()['cpu']))\n"
    )
    statuses = []
    for seed in ("1", "2"):
        env = dict(os.environ, PYTHONHASHSEED=seed, KERNELRT_CACHE_DIR=str(cache_dir))
        out = subprocess.run([sys.executable, "-c", script], env=env, capture_output=True, text=True, check=True)
        statuses.append(out.stdout.split())
    assert statuses[1] == ["disk", "disk"], statuses
