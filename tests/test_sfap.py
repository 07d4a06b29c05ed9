"""SFAP kernel library on the CPU backend: golden parity, model properties, inputs, batching.

Golden files (tests/data/sfap, MyoGen 0.12.0 outputs) are checked end to end; cases the
files do not cover are checked against the independent NumPy reference
(kernels/sfap/reference.py). Accuracy is the channel-relative error of specs/SFAP.md §11.
"""

from __future__ import annotations

import math

import numpy as np
import pytest
from kernelrt.kernels.sfap import prep as sfap_prep
from kernelrt.kernels.sfap import run as sfap_run
from kernelrt.kernels.sfap import SfapResult, compute_sfaps, warm_specs
from kernelrt.kernels.sfap.delay import (
    delay_fft,
    dirichlet_table,
    sfap_delay,
    sfap_muap,
)
from kernelrt.kernels.sfap.inputs import check_inputs
from kernelrt.kernels.sfap.reference import (
    channel_error,
    current_density,
    fibre_grid,
    reference_sfaps,
    shift_padding,
)
from sfap_cases import GOLDEN, TOL, golden_inputs
from testlib import requires_nvrtc

from kernelrt import DeviceMemoryError


def make_case(nf=3, ne=2, dz=0.1, length=20.0, seed=0, cv=(4000.0, 300.0)):
    """A small motor unit in the golden files' style (disc of fibres, needle-like array)."""
    rng = np.random.default_rng(seed)
    r = 2 * np.sqrt(rng.uniform(size=nf))
    th = rng.uniform(0, 2 * np.pi, nf)
    u = np.array([1.0, 0.25, 0.35]) / np.linalg.norm([1.0, 0.25, 0.35])
    return {
        "fibre_xy": np.stack([r * np.cos(th), r * np.sin(th)], axis=1),
        "fibre_diameter": np.clip(rng.lognormal(np.log(0.05), 0.3, nf), 0.02, 0.08),
        "fibre_cv": np.clip(rng.normal(cv[0], cv[1], nf), 2000, 6000),
        "nmj_z": np.clip(length / 2 + rng.normal(0, 2, nf), 1, length - 1),
        "fibre_ends": np.tile([0.0, length], (nf, 1)),
        "nerve_paths": np.stack([rng.uniform(2, 15, nf), rng.uniform(0.5, 3, nf)], axis=1),
        "branch_cv": np.array([5000.0, 2000.0]),
        "electrodes": np.array([-0.5, -0.4, length / 2 - 1.5]) + 0.5 * np.arange(ne)[:, None] * u,
        "dt": 1 / 10240,
        "dz": dz,
    }


def assert_matches(result, ref, tol=TOL):
    assert np.array_equal(result.t, ref["t"])  # exact: t_k = k * dt, one rounded product, as arange fills it
    for key in ("sfaps_raw", "sfaps", "muap"):
        got = getattr(result, key)
        assert got.shape == ref[key].shape, key
        err = channel_error(got, ref[key])
        assert err <= tol, f"{key}: channel-relative error {err:.2e} > {tol:.0e}"


# -- golden parity -----------------------------------------------------------------


@pytest.mark.parametrize("path", GOLDEN, ids=lambda p: p.stem)
def test_golden(cpu, path):
    kwargs, g = golden_inputs(path)
    result = compute_sfaps(**kwargs, backend=cpu)
    assert isinstance(result, SfapResult) and result.backend == "cpu"
    assert_matches(result, g)


def test_golden_files_present():
    assert [p.stem for p in GOLDEN] == ["sfap_a", "sfap_b", "sfap_c", "sfap_d"]


@pytest.mark.parametrize("path", GOLDEN, ids=lambda p: p.stem)
def test_host_preparation_matches_golden_tables(path):
    kwargs, g = golden_inputs(path)
    plan = sfap_prep.plan_fibres(**check_inputs(**kwargs, min_radial_dist=float(g["min_radial_dist"])))
    # exact on every x86: the host plan is NumPy element-wise + - * / and a pairwise-summed mean
    # in C (fixed order whatever the SIMD width), no libm; the golden tables are the same ops
    assert np.array_equal(plan.t, g["t"])
    assert np.array_equal(plan.ipar[:, sfap_prep.I_NZ], g["nz"])
    assert np.array_equal(plan.fpar[:, sfap_prep.F_DELTA], g["dz_eff"])  # bitwise: pairwise mean
    assert np.array_equal(plan.ipar[:, sfap_prep.I_SIGMA], g["sigma"])
    iv = g["row_intervals"]
    assert np.array_equal(plan.ipar[:, [sfap_prep.I_ALO, sfap_prep.I_AHI]], iv[:, [1, 2]])
    assert np.array_equal(plan.ipar[:, [sfap_prep.I_ELO, sfap_prep.I_EHI]], iv[:, [5, 6]])
    np.testing.assert_allclose(plan.delay_int + plan.delay_frac, g["delay_s"] / g["dt"], rtol=1e-15)


def test_delay_of_golden_raw(cpu):
    """Both delay forms reproduce MyoGen's delay of the stored raw SFAPs (§7)."""
    for path in GOLDEN:
        kwargs, g = golden_inputs(path)
        plan = sfap_prep.plan_fibres(**check_inputs(**kwargs, min_radial_dist=None))
        raw = np.ascontiguousarray(g["sfaps_raw"])
        fft = delay_fft(raw, plan.delay_int, plan.delay_frac)
        assert channel_error(fft, g["sfaps"]) <= 1e-14
        nt, ne, nf = raw.shape
        out = np.empty_like(raw)
        table = dirichlet_table(nt, plan.delay_frac)
        cpu.launch_kernel(sfap_delay, (nt, ne, nf), (1, 1, 1), raw, table, plan.delay_int, out)
        assert channel_error(out, g["sfaps"]) <= 1e-13
        muap = np.empty((nt, ne))
        cpu.launch_kernel(sfap_muap, (ne, nt), (1, 1), out, muap)
        assert channel_error(muap, g["muap"]) <= 1e-13


# -- host preparation: bit-exact grid, mirror map, row bounds ---------------------------


def test_grid_is_bitwise_numpy_arange():
    rng = np.random.default_rng(7)
    for _ in range(1500):
        dz = float(rng.choice([0.5, 0.3, 0.1, 0.07, 0.05, 0.02, 0.01, rng.uniform(0.005, 1.0)]))
        a = float(rng.choice([0.0, rng.uniform(-50, 50)]))
        b = a + float(rng.choice([30.0, 120.0, rng.uniform(2.0, 150.0)]))
        zeta = float(rng.choice([rng.uniform(a, b), a, b, a + rng.uniform(0, dz), b - rng.uniform(0, dz)]))
        # exact: both are start + i * delta with two roundings (NumPy's arange fill is not FMA-contracted)
        assert np.array_equal(sfap_prep.fibre_grid(zeta, a, b, dz), fibre_grid(zeta, a, b, dz)), (zeta, a, b, dz)


def test_tie_rows_follow_the_arange_grid():
    """At dz = 0.1 the rows at ζ ± 0.5 are exact ties; the end-plate mask must follow z's last bit."""
    rng = np.random.default_rng(0)
    flips = 0
    for zeta in rng.uniform(1, 119, 100):
        z = sfap_prep.fibre_grid(float(zeta), 0.0, 120.0, 0.1)
        j0 = int(np.flatnonzero(z == zeta)[0])  # exact: the grid starts at ζ itself
        kept = (z <= zeta - 0.5) | (z >= zeta + 0.5)
        flips += int(not kept[j0 + 5]) + int(not kept[j0 - 5])
    assert 0 < flips < 200  # some tie rows are suppressed, some kept: the grid decides


@pytest.mark.parametrize("nz", [1, 2, 5, 8])
def test_mirror_intervals_match_shift_padding(nz):
    rows = np.arange(nz)
    for s in range(-3 * nz - 1, 3 * nz + 2):
        expect = shift_padding(rows[::-1].astype(float) + 1, s) - 1  # source row, or -1
        valid, mb = sfap_prep._mirror(nz, s)
        got = np.full(nz, -1.0)
        got[valid[0] : valid[1] + 1] = mb - rows[valid[0] : valid[1] + 1]
        assert np.array_equal(got, expect), s  # exact: integer-valued row numbers


@pytest.mark.parametrize("ends", [(0.0, 20.0), (5.0, 25.0), (-10.0, 10.0)])
def test_row_bounds_cover_every_nonzero_current(ends):
    """The skipped rows are exactly zero in the dense reference current."""
    kwargs = make_case(nf=4, ne=1, dz=0.1, length=20.0, seed=3)
    kwargs["fibre_ends"] = np.tile(ends, (4, 1))
    kwargs["nmj_z"] = np.array([ends[0], ends[0] + 0.05, ends[1] - 7.0, ends[1]])
    plan = sfap_prep.plan_fibres(**check_inputs(**kwargs, min_radial_dist=None))
    for f in range(4):
        z = fibre_grid(kwargs["nmj_z"][f], *ends, kwargs["dz"])
        current = current_density(plan.t, z, kwargs["nmj_z"][f], *ends, kwargs["fibre_cv"][f], 0.05)
        j = np.arange(z.shape[0])[:, None]
        lo, hi = plan.rows[f, :, 0][None, :], plan.rows[f, :, 1][None, :]
        # exact: outside x > 0 the current is a structural 0.0 (masked), not a rounded value
        assert not np.any((current != 0) & ((j < lo) | (j > hi)))


# -- properties against the NumPy reference --------------------------------------------


def _check_reference(cpu, kwargs, tol=TOL):
    result = compute_sfaps(**kwargs, backend=cpu)
    assert_matches(result, reference_sfaps(**kwargs), tol)
    return result


@pytest.mark.parametrize(
    "where",
    ["left", "left+half_dz", "left+dz", "right", "right-half_dz", "right-dz", "middle"],
)
def test_nmj_at_or_near_a_tendon(cpu, where):
    kwargs = make_case(nf=2, ne=3, dz=0.05, length=15.0, seed=11)
    a, b, dz = 0.0, 15.0, 0.05
    zeta = {
        "left": a, "left+half_dz": a + dz / 2, "left+dz": a + dz,
        "right": b, "right-half_dz": b - dz / 2, "right-dz": b - dz, "middle": 7.3,
    }[where]
    kwargs["nmj_z"] = np.array([zeta, 7.0])
    _check_reference(cpu, kwargs)


@pytest.mark.parametrize("ends", [(5.0, 25.0), (20.0, 35.0), (-10.0, 5.0)])
def test_shifted_fibre_ends_wrap_the_mirror(cpu, ends):
    """Ends away from 0 drive MyoGen's mirror shift s past ±Nz (§3.6 wrap cases)."""
    kwargs = make_case(nf=3, ne=2, dz=0.1, length=15.0, seed=5)
    kwargs["fibre_ends"] = np.tile(ends, (3, 1))
    kwargs["nmj_z"] = np.array([ends[0] + 0.3, (ends[0] + ends[1]) / 2 + 1.0, ends[1] - 0.05])
    kwargs["electrodes"][:, 2] += ends[0]
    shifts = []
    for zeta in kwargs["nmj_z"]:
        z = fibre_grid(zeta, *ends, kwargs["dz"])
        delta = np.mean(np.diff(z))
        L1, L2 = ends[1] - zeta, zeta - ends[0]
        shifts.append((round((((L1 + L2) - (z[-1] + delta)) + L2 - L1) / delta), z.shape[0]))
    assert any(s < -nz or s >= nz for s, nz in shifts), shifts
    _check_reference(cpu, kwargs)


@pytest.mark.parametrize("sigma_side", ["left_of_middle", "right_of_middle"])
def test_both_wave_directions(cpu, sigma_side):
    kwargs = make_case(nf=2, ne=2, dz=0.1, length=20.0, seed=2)
    kwargs["nmj_z"] = np.array([6.0, 8.5]) if sigma_side == "left_of_middle" else np.array([12.0, 14.5])
    plan = sfap_prep.plan_fibres(**check_inputs(**kwargs, min_radial_dist=None))
    assert set(plan.ipar[:, sfap_prep.I_SIGMA]) == ({1} if sigma_side == "left_of_middle" else {-1})
    _check_reference(cpu, kwargs)


def test_electrode_on_a_fibre_axis_and_on_a_row(cpu):
    kwargs = make_case(nf=2, ne=2, dz=0.1, length=20.0, seed=4)
    z = sfap_prep.fibre_grid(float(kwargs["nmj_z"][0]), 0.0, 20.0, 0.1)
    kwargs["electrodes"][0] = (*kwargs["fibre_xy"][0], z[37])  # r = 0, clamped; z on a row
    _check_reference(cpu, kwargs)


@pytest.mark.parametrize("dz", [0.5, 0.25, 0.1, 0.05, 0.02])
def test_tie_step_sizes(cpu, dz):
    """0.5 / dz is an integer: the end-plate rows at ζ ± 0.5 are floating-point ties."""
    _check_reference(cpu, make_case(nf=3, ne=2, dz=dz, length=12.0, seed=int(1 / dz)))


def test_single_fibre_single_electrode(cpu):
    result = _check_reference(cpu, make_case(nf=1, ne=1, dz=0.07, length=25.0, seed=9))
    assert result.sfaps.shape[1:] == (1, 1) and result.muap.shape[1:] == (1,)


def test_min_radial_dist_and_slow_fibres(cpu):
    kwargs = make_case(nf=3, ne=3, dz=0.1, length=20.0, seed=8, cv=(2500.0, 800.0))
    kwargs["min_radial_dist"] = 0.3
    _check_reference(cpu, kwargs)


def test_nerve_delay_beyond_the_window_gives_zeros(cpu):
    kwargs = make_case(nf=2, ne=2, dz=0.1, length=10.0, seed=1)
    kwargs["nerve_paths"] = np.array([[5000.0, 0.0], [1.0, 0.5]])  # fibre 0: a 1 s delay
    result = _check_reference(cpu, kwargs)
    assert not np.any(result.sfaps[:, :, 0])


# -- batching -------------------------------------------------------------------------


def test_batches_give_the_same_result(cpu, monkeypatch):
    kwargs = make_case(nf=5, ne=3, dz=0.1, length=20.0, seed=6)
    whole = compute_sfaps(**kwargs, backend=cpu)
    plan = sfap_prep.plan_fibres(**check_inputs(**kwargs, min_radial_dist=None))
    per_fibre, fixed = sfap_run.batch_bytes("cpu", plan, 3)
    monkeypatch.setattr(cpu, "get_memory_info", lambda: (int((fixed + 2 * per_fibre) / 0.7) + 1, 1 << 40))
    assert sfap_run.batch_size(cpu, plan, 3) == 2
    launches = []
    real_launch = cpu.launch_kernel
    monkeypatch.setattr(cpu, "launch_kernel", lambda k, *a, **kw: (launches.append(k.name), real_launch(k, *a, **kw)))
    batched = compute_sfaps(**kwargs, backend=cpu)
    assert launches.count("sfap_columns") == 3
    for key in ("sfaps_raw", "sfaps", "muap"):
        # exact: each output column is one task's, in an order fixed by the compiled code and
        # the tile (not by batches or threads); same process, so the same SIMD width
        assert np.array_equal(getattr(batched, key), getattr(whole, key)), key


def test_no_room_for_one_fibre(cpu, monkeypatch):
    monkeypatch.setattr(cpu, "get_memory_info", lambda: (1024, 1 << 40))
    with pytest.raises(DeviceMemoryError, match="compute_sfaps needs"):
        compute_sfaps(**make_case(nf=2, ne=2), backend=cpu)


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
    ("nmj_z", np.array([10.0, 25.0]), ValueError, "nmj_z must lie within the fibre's ends"),
    ("nmj_z", np.array([10.0, -0.1]), ValueError, "nmj_z must lie within"),
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
    assert {k.name for k, _ in specs["cuda"]} == {"sfap_response", "sfap_columns", "sfap_delay", "sfap_muap"}
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


def test_simd_exp_within_one_ulp():
    from kernelrt.kernels.sfap.cpu_math import EXP_NEG_MAX, exp_neg
    from numba import njit

    @njit
    def both(xs, ours, libm):
        for i in range(xs.shape[0]):
            ours[i] = exp_neg(xs[i])
            libm[i] = math.exp(-xs[i])

    rng = np.random.default_rng(1)
    xs = np.concatenate([np.linspace(0.0, 2.0, 200_001), rng.uniform(0, 40, 200_000),
                         rng.uniform(0, EXP_NEG_MAX, 200_000), [0.0, EXP_NEG_MAX]])
    ours, libm = np.empty_like(xs), np.empty_like(xs)
    both(xs, ours, libm)
    assert np.max(np.abs(ours - libm) / np.spacing(libm)) <= 1.0


def test_simd_dot_products():
    from kernelrt.kernels.sfap.cpu_math import dot8, dot8x2

    rng = np.random.default_rng(2)
    cur, h_a, h_b = rng.standard_normal((8, 301)), rng.standard_normal(320), rng.standard_normal(320)
    lo, n = 7, 297
    want_a, want_b = cur[:, :n] @ h_a[lo : lo + n], cur[:, :n] @ h_b[lo : lo + n]
    got_a, got_b = dot8x2(h_a, h_b, cur, lo, 0, n)
    np.testing.assert_allclose(got_a, want_a, rtol=1e-13, atol=1e-13)
    np.testing.assert_allclose(got_b, want_b, rtol=1e-13, atol=1e-13)
    np.testing.assert_allclose(dot8(h_a, cur, lo, 0, n), want_a, rtol=1e-13, atol=1e-13)


@pytest.mark.ptx
@requires_nvrtc
@pytest.mark.parametrize("cc", [(8, 0), (9, 0)], ids=["sm80", "sm90"])
def test_cuda_kernels_compile_to_ptx(cache_dir, cc):
    import re

    import kernelrt

    for kernel, signature in warm_specs()["cuda"]:
        ptx = kernelrt.compile_ptx(kernel, signature, cc=cc)
        assert re.search(rf"\.target sm_{cc[0]}{cc[1]}a?\b", ptx), kernel.name
        assert ".entry" in ptx
        shared = sum(int(n) for n in re.findall(r"\.shared \.align \d+ \.b8 \w+\[(\d+)\]", ptx))
        assert shared <= 48 * 1024, f"{kernel.name} uses {shared} bytes of static shared memory"
        assert not re.search(r"\b(div|sqrt)\.approx\.f64", ptx), f"{kernel.name}: approximate fp64 division"
