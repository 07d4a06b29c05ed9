"""kernelrt inside MyoGen 0.12 (kernelrt.integrations.myogen), checked against MyoGen itself.

MyoGen 0.12 ships only a cp312 wheel: these tests run where it imports (``bash .ci/run``
builds a Python 3.12 venv for them when a 3.12 interpreter is on the machine; by hand:
tools/peer_tests.sh). Parity uses MyoGen's own GPU-parity criteria
(tests/test_gpu_parity.py in MyoGen: per-channel normalised cross-correlation > 0.999999,
RMSE < 1e-12) and the channel-relative error of docs/sfap.md (<= 1e-12).
"""

from __future__ import annotations

import contextlib
import io
import logging
import os
import subprocess
import sys

import numpy as np
import pytest

myogen = pytest.importorskip("myogen", reason="MyoGen 0.12 is not installed (it needs Python >= 3.12)")
with contextlib.redirect_stdout(io.StringIO()):  # NEURON's "no DISPLAY" banner
    from myogen import set_random_seed, simulator
    from myogen.simulator.core.emg.intramuscular.motor_unit_sim import MotorUnitSim

from kernelrt.kernels.sfap.reference import channel_error

import kernelrt.integrations.myogen as kmyogen

DT = 1 / 10240
ORIGINAL_SFAPS = MotorUnitSim.calc_sfaps
ORIGINAL_MUAP = MotorUnitSim.calc_muap


@pytest.fixture(autouse=True)
def _restore():
    yield
    kmyogen.disable()


def _motor_unit(seed: int, nf: int, ne: int, length: float = 120.0, tendons: str | None = None):
    """A MyoGen motor unit with NMJs and nerve paths set directly (no RNG of MyoGen's involved)."""
    rng = np.random.default_rng(seed)
    r, th = 2 * np.sqrt(rng.uniform(size=nf)), rng.uniform(0, 2 * np.pi, nf)
    xy = np.stack([r * np.cos(th), r * np.sin(th)], axis=1)
    mu = MotorUnitSim(
        muscle_fiber_centers__mm=xy,
        muscle_length__mm=length,
        muscle_fiber_diameters__mm=np.clip(rng.lognormal(np.log(0.05), 0.3, nf), 0.02, 0.08),
        muscle_fiber_conduction_velocity__mm_per_s=np.clip(rng.normal(4000, 300, nf), 2000, 6000),
        nominal_center__mm=xy.mean(axis=0),
    )
    nmj = np.clip(length / 2 + rng.normal(0, 2, nf), 1, length - 1)
    if tendons == "at":  # NMJs at and next to either tendon: the mirror and mask edge cases
        nmj[:3] = (0.02, length - 0.03, 0.0)
    elif tendons == "outside":  # past the tendons, as MyoGen's NMJ simulation places some
        nmj[:3] = (-3.4154912756538636, length + 0.188538403434386, length + 1.7)
    mu._neuromuscular_z_coordinates__mm = nmj[:, None]
    mu.nerve_paths = np.stack([rng.uniform(2, 15, nf), rng.uniform(0.5, 3, nf)], axis=1)
    electrodes = np.array([-0.5, -0.4, length / 2 - 1.5]) + 0.5 * np.arange(ne)[:, None] * np.array([0.9, 0.2, 0.3])
    electrodes[0, :2] = xy[0]  # on fibre 0's axis: r is clamped to r_min
    return mu, electrodes


def _myogen_parity(ref: np.ndarray, got: np.ndarray) -> None:
    """MyoGen's tests/test_gpu_parity.py criteria, per (electrode, fibre) channel."""
    a, b = ref.reshape(ref.shape[0], -1), got.reshape(got.shape[0], -1)
    live = np.abs(a).max(axis=0) > 0
    a, b = a[:, live], b[:, live]
    xcorr = (a * b).sum(axis=0) / np.sqrt((a * a).sum(axis=0) * (b * b).sum(axis=0))
    assert xcorr.min() > 0.999999
    assert np.sqrt(np.mean((a - b) ** 2)) < 1e-12
    assert channel_error(got, ref) <= 1e-12


@pytest.mark.parametrize("seed, nf, ne, dz, tendons", [(0, 8, 5, 0.1, None), (1, 6, 4, 0.5, None),
                                                        (3, 6, 4, 0.05, "at"), (4, 5, 3, 0.1, "outside")])
def test_calc_sfaps_and_muap_match_myogen(seed, nf, ne, dz, tendons):
    ref_mu, electrodes = _motor_unit(seed, nf, ne, tendons=tendons)
    ref_mu.calc_sfaps(0, DT, dz, electrodes, verbose=False, use_gpu=False)
    ref_muap = ref_mu.calc_muap(0.0)

    kmyogen.enable()
    assert MotorUnitSim.calc_sfaps is kmyogen.calc_sfaps
    mu, _ = _motor_unit(seed, nf, ne, tendons=tendons)
    before = kmyogen.stats()["calls"]
    mu.calc_sfaps(0, DT, dz, electrodes, verbose=False, use_gpu=False)
    assert kmyogen.stats()["calls"] == before + 1
    assert mu.sfaps.shape == ref_mu.sfaps.shape and mu.sfaps.dtype == np.float64
    assert (mu.dt, mu.dz, mu.Npt) == (ref_mu.dt, ref_mu.dz, ref_mu.Npt)
    np.testing.assert_array_equal(mu.mnap_delays, ref_mu.mnap_delays)  # MyoGen's own calc_mnap_delays ran
    _myogen_parity(ref_mu.sfaps, mu.sfaps)
    _myogen_parity(ref_muap, mu.calc_muap(0.0))


def test_jittered_muap_draws_from_myogens_generator():
    ref_mu, electrodes = _motor_unit(5, 7, 3)
    ref_mu.calc_sfaps(0, DT, 0.1, electrodes, verbose=False, use_gpu=False)
    set_random_seed(11)
    ref = ref_mu.calc_muap(jitter_std=35e-6)

    kmyogen.enable()
    mu, _ = _motor_unit(5, 7, 3)
    mu.calc_sfaps(0, DT, 0.1, electrodes, verbose=False, use_gpu=False)
    set_random_seed(11)
    got = mu.calc_muap(jitter_std=35e-6)
    assert got is mu.muap
    _myogen_parity(ref, got)
    assert channel_error(got, mu.calc_muap(0.0)) > 1e-3  # the jitter did move the fibres


def test_refused_calls_get_myogens_own_error(caplog):
    kmyogen.enable()
    mu, electrodes = _motor_unit(0, 3, 2)
    mu._neuromuscular_z_coordinates__mm = None  # no sim_nmj_branches_* yet
    before = kmyogen.stats()["fallbacks"]
    with (caplog.at_level(logging.INFO, logger="kernelrt.integrations.myogen"),
          pytest.raises(ValueError, match="Must call sim_nmj_branches_")):
        mu.calc_sfaps(0, DT, 0.1, electrodes, verbose=False, use_gpu=False)
    assert kmyogen.stats()["fallbacks"] == before + 1
    assert "MyoGen's own calc_sfaps runs" in caplog.text
    kmyogen.disable()
    with pytest.raises(Exception) as own:  # MyoGen 0.12: AttributeError, no sfaps attribute yet
        _motor_unit(0, 3, 2)[0].calc_muap(35e-6)
    kmyogen.enable()
    with pytest.raises(own.type, match=str(own.value)):
        _motor_unit(0, 3, 2)[0].calc_muap(35e-6)


def test_use_gpu_true_without_a_kernelrt_gpu_is_myogens_call():
    import kernelrt

    if kernelrt.get_backend("auto").name == "cuda":
        pytest.skip("a GPU is present: use_gpu=True runs on kernelrt's CUDA backend")
    kmyogen.enable()
    mu, electrodes = _motor_unit(0, 3, 2)
    try:
        import cupy  # noqa: F401

        has_cupy = True
    except ImportError:
        has_cupy = False
    if has_cupy:
        pytest.skip("CuPy is installed: MyoGen's own GPU path would run")
    with pytest.raises(RuntimeError, match="use_gpu=True but CuPy is not available"):
        mu.calc_sfaps(0, DT, 0.1, electrodes, verbose=False, use_gpu=True)


def test_disable_restores_myogen():
    kmyogen.enable()
    kept = MotorUnitSim.calc_sfaps  # a reference to the replacement, taken while enabled
    kmyogen.disable()
    assert MotorUnitSim.calc_sfaps is ORIGINAL_SFAPS and MotorUnitSim.calc_muap is ORIGINAL_MUAP
    assert "KERNELRT_MYOGEN" not in os.environ
    mu, electrodes = _motor_unit(0, 3, 2)
    calls = kmyogen.stats()["calls"]
    kept(mu, 0, DT, 0.5, electrodes, verbose=False, use_gpu=False)  # follows the switch: MyoGen's own
    assert kmyogen.stats()["calls"] == calls and mu.sfaps.shape[2] == 3


# -- a whole IntramuscularEMG -----------------------------------------------------------


@pytest.fixture(scope="module")
def small_muscle():
    """8 motor units of 14-378 fibres (1,100 in all) on a 1 mm muscle: MyoGen's own model."""
    set_random_seed(42)
    with contextlib.redirect_stdout(io.StringIO()), contextlib.redirect_stderr(io.StringIO()):
        thresholds, _ = simulator.RecruitmentThresholds(
            N=8, recruitment_range__ratio=30, deluca__slope=5, konstantin__max_threshold__ratio=1.0, mode="combined"
        )
        import quantities as pq

        return simulator.Muscle(recruitment_thresholds=thresholds, radius__mm=1.0 * pq.mm, autorun=True)


def _muaps(muscle, how: str):
    import quantities as pq

    set_random_seed(7)
    electrode = simulator.IntramuscularElectrodeArray(
        num_electrodes=4, inter_electrode_distance__mm=0.5 * pq.mm, differentiation_mode="consecutive",
        position__mm=(0.0 * pq.mm, 0.0 * pq.mm, 15.0 * pq.mm),
    )
    emg = simulator.IntramuscularEMG(muscle_model=muscle, electrode_array=electrode,
                                     spatial_resolution__mm=0.1 * pq.mm)
    with contextlib.redirect_stderr(io.StringIO()):
        block = kmyogen.simulate_muaps(emg, verbose=False) if how == "kernelrt" else emg.simulate_muaps(
            n_jobs=2, verbose=False)
    return [np.asarray(s.analogsignals[0].magnitude) for s in block.segments]


@pytest.mark.slow
def test_simulate_muaps_in_joblib_workers_and_in_one_call(small_muscle):
    from joblib import Parallel, delayed

    reference = _muaps(small_muscle, "myogen")
    calls_here = kmyogen.stats()["calls"]
    kmyogen.enable()
    in_workers = _muaps(small_muscle, "workers")
    # the same loky workers answer: kernelrt was enabled there and did the units' work
    worker_stats = Parallel(n_jobs=2)(delayed(kmyogen.stats)() for _ in range(8))
    assert all(s["enabled"] and s["pid"] != os.getpid() for s in worker_stats)
    assert sum({s["pid"]: s["calls"] for s in worker_stats}.values()) >= 1
    assert kmyogen.stats()["calls"] == calls_here  # nothing ran in this process
    kmyogen.disable()
    in_process = _muaps(small_muscle, "kernelrt")
    assert MotorUnitSim.calc_sfaps is ORIGINAL_SFAPS  # simulate_muaps enables only for its call
    assert len(reference) == len(in_workers) == len(in_process) == 8
    for ref, a, b in zip(reference, in_workers, in_process, strict=True):
        assert ref.shape == a.shape == b.shape
        _myogen_parity(ref[:, :, None], a[:, :, None])
        _myogen_parity(ref[:, :, None], b[:, :, None])


def test_environment_variable_swaps_in_a_fresh_process():
    code = ("import contextlib, io\n"
            "with contextlib.redirect_stdout(io.StringIO()):\n"
            "    from myogen.simulator.core.emg.intramuscular.motor_unit_sim import MotorUnitSim\n"
            "print(MotorUnitSim.calc_sfaps.__module__)\n")
    for value, module in (("1", "kernelrt.integrations.myogen"),
                          ("0", "myogen.simulator.core.emg.intramuscular.motor_unit_sim")):
        env = dict(os.environ, KERNELRT_MYOGEN=value)
        out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, check=True)
        assert out.stdout.split()[-1] == module, out.stderr
