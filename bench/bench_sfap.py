"""SFAP benchmarks: ``compute_sfaps`` against MyoGen 0.12 ``calc_sfaps(use_gpu=False)``.

Cases (those timed in MyoGen's PR #11, which added its CuPy path): muscle 120 mm, CV ~ N(4000, 300)
mm/s, fs = 10240 Hz, 25 electrodes; 200 fibres at dz = 0.1 and 50 fibres at dz in
{0.5, 0.1, 0.05, 0.02, 0.01}. Both sides compute the same end-to-end result (raw SFAPs,
NMJ delay, MUAP) from the same inputs, in the same run.

The peer is MyoGen itself when a Python 3.12 interpreter with ``myogen==0.12.0`` is found
(``KERNELRT_MYOGEN_PYTHON``, else /tmp/myogen312/bin/python; setup in
tools/regen_sfap_golden.py), served by bench/myogen_peer.py so that only its
computation is timed; otherwise the in-repo NumPy reference (kernels/sfap/reference.py),
and the peer name says which. Peak RSS is measured for dz = 0.01 in fresh processes.
On a GPU the kernelrt entries also carry the column kernel's time alone, its FP64 rate
(2·Nt·Nz·Ne·Nf flops) and exp rate beside the device's peak.

Host planning alone (``plan_fibres``, groups ``plan-*``): the vectorised planning against
the per-fibre loop it replaced (tests/sfap/prep_oracle.py, the tests' oracle) on the same
inputs, for 200 fibres x 25 electrodes at dz 0.1, 50 fibres at dz 0.01 and a synthetic
MyoGen-default-like muscle (10 units, 4,357 fibres, 30 mm, v = 2000 mm/s, 4 electrodes,
dz 0.01; ``myogen_default_like``). Process CPU time, the better measure on a shared host.

Run: ``kernelrt bench sfap`` (or ``python -m pytest bench/bench_sfap.py --benchmark-enable``);
``python bench/bench_sfap.py`` prints ``run()``'s dict as JSON. Never asserts on time.
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
import pytest

REPO = Path(__file__).resolve().parents[1]
QUICK = os.environ.get("KERNELRT_BENCH_QUICK", "") not in ("", "0")
CASES = [(200, 25, 0.1)] + [(50, 25, dz) for dz in (0.5, 0.1, 0.05, 0.02, 0.01)]
QUICK_CASES = [(200, 25, 0.1), (50, 25, 0.5)]
MYOGEN_PYTHONS = [os.environ.get("KERNELRT_MYOGEN_PYTHON", ""), "/tmp/myogen312/bin/python"]
# FP64 peak (no tensor cores), FLOP/s, by device-name substring; the first match wins.
FP64_PEAK = [("H200", 34e12), ("H100 PCIe", 25.6e12), ("H100", 34e12), ("A100", 9.7e12),
             ("V100", 7.8e12), ("RTX 3090", 0.556e12), ("RTX 4090", 1.29e12)]


def case_name(nf: int, ne: int, dz: float) -> str:
    return f"sfap-{nf}x{ne}-dz{dz:g}"


def make_case(nf: int, ne: int, dz: float, seed: int = 0, length: float = 120.0) -> dict:
    """A motor unit drawn like the golden files' generator (tests/data/sfap/README.md)."""
    from kernelrt.kernels.sfap.reference import synthetic_motor_unit

    return synthetic_motor_unit(nf, ne, dz, seed, length)


def myogen_default_like(seed: int = 0) -> list[dict]:
    """Ten units shaped like MyoGen's default muscle as bench_myogen.py simulates it (every
    10th of 100 units: 13 to 1,658 fibres, 4,357 in all), drawn without MyoGen: 30 mm
    fibres at v = 2000 mm/s (MyoGen clips its CV law there), 4 electrodes, dz 0.01."""
    units = []
    for i, n in enumerate((13, 60, 130, 210, 300, 390, 480, 560, 556, 1658)):
        unit = make_case(n, 4, 0.01, seed + i, 30.0)
        unit["fibre_cv"] = np.full(n, 2000.0)
        units.append(unit)
    return units


PLAN_CASES = {"plan-200x25-dz0.1": lambda: [make_case(200, 25, 0.1)],
              "plan-50x25-dz0.01": lambda: [make_case(50, 25, 0.01)],
              "plan-4357x4-dz0.01-myogen-default-like": myogen_default_like}


def _planners():
    """(vectorised plan_fibres, the per-fibre loop it replaced) and the checked inputs' maker."""
    if str(REPO) not in sys.path:
        sys.path.insert(0, str(REPO))
    from kernelrt.kernels.sfap.inputs import check_inputs
    from kernelrt.kernels.sfap.prep import plan_fibres

    from tests.sfap.prep_oracle import plan_fibres as per_fibre_loop

    return plan_fibres, per_fibre_loop, lambda unit: check_inputs(**unit, min_radial_dist=None)


def plan_rows(rounds: int = 5) -> list[dict]:
    """``plan_fibres`` alone per PLAN_CASES entry: vectorised and per-fibre loop, CPU seconds."""
    vectorised, loop, checked = _planners()
    rows = []
    for name, build in PLAN_CASES.items():
        units = [checked(u) for u in build()]
        ours = min(_time(lambda: [vectorised(**u) for u in units], rounds)[1])
        theirs = min(_time(lambda: [loop(**u) for u in units], rounds)[1])
        rows.append({"case": name, "fibres": sum(u["fibre_cv"].shape[0] for u in units), "kernelrt_cpu_s": ours,
                     "per_fibre_loop_cpu_s": theirs, "cpu_ratio": theirs / ours})
    return rows


# -- peers ------------------------------------------------------------------------------


class MyoGenPeer:
    """MyoGen 0.12 in its own interpreter (bench/myogen_peer.py), one process for all cases."""

    def __init__(self, python: str, gpu: bool = False):
        self.name = f"myogen 0.12.0 calc_sfaps(use_gpu={gpu})"
        self.gpu = gpu
        self._warm = not gpu  # the CuPy path compiles its kernels on the first call: one untimed run
        self._tmp = tempfile.TemporaryDirectory()
        env = dict(os.environ) if gpu else dict(os.environ, MYOGEN_DISABLE_GPU="1")
        self._stderr = open(os.path.join(self._tmp.name, "stderr.txt"), "w+")  # noqa: SIM115  (closed in close())
        self._proc = subprocess.Popen(
            [python, str(REPO / "bench" / "myogen_peer.py")], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
            stderr=self._stderr, text=True, env=env,
        )

    def _ask(self, **cmd) -> dict:
        try:
            self._proc.stdin.write(json.dumps(cmd) + "\n")
            self._proc.stdin.flush()
            line = self._proc.stdout.readline()
        except BrokenPipeError:
            line = ""
        try:
            reply = json.loads(line)
        except json.JSONDecodeError:  # the peer died or printed something else: say what it wrote
            if not line:  # end of its output: let it exit, so its code and all its stderr are there
                with contextlib.suppress(subprocess.TimeoutExpired):
                    self._proc.wait(timeout=30)
            self._stderr.seek(0)
            tail = self._stderr.read()[-1500:]
            raise RuntimeError(f"myogen peer (exit code {self._proc.poll()}) replied {line[:200]!r}; "
                               f"its stderr ends: {tail}") from None
        if not reply.get("ok"):
            raise RuntimeError(f"myogen peer: {reply}")
        return reply

    def load(self, case: dict) -> None:
        path = os.path.join(self._tmp.name, "case.npz")
        np.savez(path, **case)
        self._ask(load=path)

    def run(self) -> float:
        if not self._warm:
            self._ask(run=True, gpu=self.gpu)
            self._warm = True
        reply = self._ask(run=True, gpu=self.gpu)
        self.last_cpu_s = reply["cpu_seconds"]
        return reply["seconds"]

    def result(self) -> dict:
        path = os.path.join(self._tmp.name, "out.npz")
        self._ask(save=path)
        return dict(np.load(path))

    def close(self) -> None:
        if self._proc.poll() is None:
            self._proc.stdin.write(json.dumps({"quit": True}) + "\n")
            self._proc.stdin.flush()
            self._proc.wait(timeout=30)
        self._stderr.close()
        self._tmp.cleanup()


class ReferencePeer:
    """The in-repo NumPy reference, when MyoGen cannot be run here."""

    name = "numpy reference (kernels/sfap/reference.py; MyoGen not installed)"

    def __init__(self):
        from kernelrt.kernels.sfap.reference import reference_sfaps

        self._fn = reference_sfaps
        self._case = None
        self._out = None

    def load(self, case: dict) -> None:
        self._case = case

    def run(self) -> float:
        t0, c0 = time.perf_counter(), time.process_time()
        self._out = self._fn(**self._case)
        self.last_cpu_s = time.process_time() - c0
        return time.perf_counter() - t0

    def result(self) -> dict:
        return self._out

    def close(self) -> None:
        pass


def _myogen_python(check: str = "import myogen") -> str | None:
    """The first interpreter in MYOGEN_PYTHONS where ``check`` runs, if any."""
    for python in filter(None, MYOGEN_PYTHONS):
        if shutil.which(python) and subprocess.run(
            [python, "-c", check], capture_output=True, timeout=120, check=False
        ).returncode == 0:
            return python
    return None


def open_peer(kind: str = "auto"):
    """MyoGen when a working interpreter is found (or ``kind="myogen"``), else the reference."""
    if kind in ("auto", "myogen"):
        python = _myogen_python()
        if python:
            return MyoGenPeer(python)
        if kind == "myogen":
            raise RuntimeError("no Python with myogen==0.12.0 found; set KERNELRT_MYOGEN_PYTHON")
    return ReferencePeer()


def open_gpu_peer():
    """MyoGen's own CuPy path, where its interpreter has CuPy and sees a GPU; else None."""
    python = _myogen_python("import myogen, cupy; assert cupy.cuda.runtime.getDeviceCount() > 0")
    return MyoGenPeer(python, gpu=True) if python else None


# -- measurements -------------------------------------------------------------------------


_RSS_SCRIPT = """
import resource, sys, numpy as np
sys.path.insert(0, {bench!r})
from bench_sfap import make_case
import kernelrt
from kernelrt.kernels.sfap import compute_sfaps
compute_sfaps(**make_case({nf}, {ne}, {dz}), backend=kernelrt.get_backend({backend!r}))
print(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024)
"""


def peak_rss_bytes(nf: int, ne: int, dz: float, backend: str = "auto") -> int:
    """Peak resident memory of a fresh process that runs one ``compute_sfaps`` call."""
    script = _RSS_SCRIPT.format(bench=str(REPO / "bench"), nf=nf, ne=ne, dz=dz, backend=backend)
    out = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, check=True, timeout=600)
    return int(out.stdout.strip().splitlines()[-1])


def gpu_kernel_metrics(backend, case: dict, repeats: int = 5) -> dict:
    """Column-kernel time alone on a CUDA backend, with its FP64 and exp rates."""
    from kernelrt.kernels.sfap import run as sfap_run
    from kernelrt.kernels.sfap.inputs import check_inputs
    from kernelrt.kernels.sfap.prep import I_AHI, I_ALO, I_NZ, I_SIGMA, plan_tables, plan_unit

    unit = plan_unit(**check_inputs(**case, min_radial_dist=None))
    plan = plan_tables(unit)
    nf, nt = unit.vt.shape
    ze = case["electrodes"][:, 2].copy()
    ne = ze.shape[0]
    batch = sfap_run.upload_batch(backend, unit, 0, nf, plan)
    h = backend.allocate((nf, unit.nz_max, ne), np.float64)
    raw = backend.zeros((nt, ne, nf), np.float64)
    sfap_run.launch_response(backend, batch, backend.to_device(ze), h)
    sfap_run.launch_columns(backend, batch, h, raw)  # compile or load, and warm up
    times = []
    for _ in range(repeats):
        start, end = backend.event(), backend.event()
        start.record()
        sfap_run.launch_columns(backend, batch, h, raw)
        end.record()
        end.synchronize()
        times.append(start.elapsed_time(end) / 1e3)
    seconds = statistics.median(times)
    flops = 2.0 * nt * float(plan.ipar[:, I_NZ].sum()) * ne
    exps = 0  # the exps the model needs: rows of A (and the extra row) behind the wave front
    for f in range(nf):
        rho = plan.z[f, plan.ipar[f, I_ALO] : plan.ipar[f, I_AHI] + 2] - plan.fpar[f, 0]
        sr = np.sort(rho * plan.ipar[f, I_SIGMA])
        exps += int(np.searchsorted(sr, unit.vt[f], side="left").sum())
    name = backend.device_name
    peak = next((p for key, p in FP64_PEAK if key in name), None)
    return {"kernel_s": seconds, "fp64_flops": flops / seconds, "fp64_peak_flops": peak,
            "fp64_fraction_of_peak": (flops / seconds / peak) if peak else None,
            "exps_needed": exps, "exp_per_s": exps / seconds}


def _time(fn, rounds: int) -> tuple[list[float], list[float]]:
    """Wall and process-CPU seconds of ``rounds`` calls (CPU time is the better measure
    on a shared machine, where the wall clock also counts other tenants' work)."""
    wall, cpu = [], []
    for _ in range(rounds):
        t0, c0 = time.perf_counter(), time.process_time()
        fn()
        wall.append(time.perf_counter() - t0)
        cpu.append(time.process_time() - c0)
    return wall, cpu


def run(quick: bool = QUICK, backend=None, peer: str = "auto", rss: bool = True) -> dict:
    """Every case once against the peer; a plain dict for the CLI (no pytest needed)."""
    from kernelrt.kernels.sfap import compute_sfaps

    import kernelrt

    backend = kernelrt.get_backend("auto") if backend is None else backend
    the_peer = open_peer(peer)
    rows = []
    try:
        for nf, ne, dz in QUICK_CASES if quick else CASES:
            case = make_case(nf, ne, dz)
            compute_sfaps(**case, backend=backend)  # compile or load the kernels first
            ours, ours_cpu = _time(lambda case=case: compute_sfaps(**case, backend=backend), 3)
            the_peer.load(case)
            theirs, theirs_cpu = [], []
            for _ in range(1 if dz <= 0.02 or quick else 2):
                theirs.append(the_peer.run())
                theirs_cpu.append(the_peer.last_cpu_s)
            row = {"case": case_name(nf, ne, dz), "kernelrt_s": min(ours), "peer_s": min(theirs),
                   "ratio": min(theirs) / min(ours), "kernelrt_cpu_s": min(ours_cpu),
                   "peer_cpu_s": min(theirs_cpu), "cpu_ratio": min(theirs_cpu) / min(ours_cpu)}
            if backend.name == "cuda":
                row.update(gpu_kernel_metrics(backend, case))
            rows.append(row)
    finally:
        the_peer.close()
    result = {"peer": the_peer.name, "backend": backend.name, "device": backend.device_name, "cases": rows,
              "plan_fibres": plan_rows(3 if quick else 5)}
    if rss and not quick:
        result["peak_rss_bytes"] = {"kernelrt 50x25 dz=0.01": peak_rss_bytes(50, 25, 0.01, backend.name)}
    return result


# -- pytest-benchmark suite -------------------------------------------------------------------


@pytest.fixture(scope="module")
def peer():
    p = open_peer()
    yield p
    p.close()


@pytest.fixture(scope="module")
def gpu_peer(backend):
    p = open_gpu_peer() if backend.name == "cuda" else None
    yield p
    if p is not None:
        p.close()


@pytest.fixture(scope="module")
def backend():
    import kernelrt

    return kernelrt.get_backend("auto")


def _figure(nf: int, ne: int, dz: float) -> dict:
    """Plot the dz sweep (one fibre count) as time and speedup against dz."""
    if nf != 50:
        return {}
    return {"figure": f"sfap-{nf}x{ne}", "x": dz, "x_label": "dz (mm): finer to the left"}


def _cases():
    return [pytest.param(c, id=case_name(*c)) for c in (QUICK_CASES if QUICK else CASES)]


@pytest.mark.parametrize("shape", _cases())
def test_sfap_kernelrt(benchmark, backend, shape):
    from benchlib import tag
    from kernelrt.kernels.sfap import compute_sfaps

    nf, ne, dz = shape
    case = make_case(nf, ne, dz)
    compute_sfaps(**case, backend=backend)  # compile or load the kernels first
    info = {**_figure(nf, ne, dz), "fibres": nf, "electrodes": ne,
            "backend": backend.name, "device": backend.device_name}
    if dz == 0.01 and not QUICK:
        info["peak_rss_bytes"] = peak_rss_bytes(nf, ne, dz, backend.name)
    if backend.name == "cuda":
        info.update(gpu_kernel_metrics(backend, case))
    info["cpu_s"] = min(_time(lambda: compute_sfaps(**case, backend=backend), 2)[1])
    tag(benchmark, case_name(nf, ne, dz), "kernelrt", **info)
    benchmark.pedantic(lambda: compute_sfaps(**case, backend=backend), rounds=3 if QUICK else 5, iterations=1)


@pytest.mark.parametrize("name", list(PLAN_CASES))
@pytest.mark.parametrize("role", ["kernelrt", "peer"])
def test_plan_fibres(benchmark, name, role):
    """Host planning alone: vectorised (kernelrt) against the per-fibre loop it replaced (peer)."""
    from benchlib import tag

    vectorised, loop, checked = _planners()
    units = [checked(u) for u in PLAN_CASES[name]()]
    fn = vectorised if role == "kernelrt" else loop
    peer = None if role == "kernelrt" else "per-fibre loop (plan_fibres before issue 24; tests/sfap/prep_oracle.py)"
    tag(benchmark, name, role, peer=peer, fibres=sum(u["fibre_cv"].shape[0] for u in units),
        cpu_s=min(_time(lambda: [fn(**u) for u in units], 3)[1]))
    benchmark.pedantic(lambda: [fn(**u) for u in units], rounds=5, iterations=1)


@pytest.mark.parametrize("shape", _cases())
def test_sfap_peer(benchmark, peer, backend, shape):
    from benchlib import tag

    nf, ne, dz = shape
    case = make_case(nf, ne, dz)
    peer.load(case)
    tag(benchmark, case_name(nf, ne, dz), "peer", peer=peer.name, **_figure(nf, ne, dz))
    rounds = 1 if (QUICK or dz <= 0.02) else 2
    benchmark.pedantic(peer.run, rounds=rounds, iterations=1)
    benchmark.extra_info["cpu_s"] = peer.last_cpu_s
    benchmark.extra_info.update(accuracy_against(peer.result(), case, backend))


def accuracy_against(theirs: dict, case: dict, backend) -> dict:
    """kernelrt's channel-relative error against the peer's outputs for the same case.

    The README's accuracy figures at MyoGen's default dz = 0.01 come from here.
    """
    from kernelrt.kernels.sfap import compute_sfaps
    from kernelrt.kernels.sfap.reference import channel_error

    ours = compute_sfaps(**case, backend=backend)
    return {f"channel_error_{key}": channel_error(np.asarray(getattr(ours, key)), theirs[key])
            for key in ("sfaps", "muap")}


@pytest.mark.parametrize("shape", _cases())
def test_sfap_gpu_peer(benchmark, gpu_peer, shape):
    """MyoGen's CuPy path (calc_sfaps(use_gpu=True)) beside kernelrt on the same GPU."""
    from benchlib import tag

    if gpu_peer is None:
        pytest.skip("MyoGen's CuPy path needs a CUDA backend and MyoGen with CuPy")
    nf, ne, dz = shape
    gpu_peer.load(make_case(nf, ne, dz))
    tag(benchmark, case_name(nf, ne, dz), "peer", peer=gpu_peer.name, **_figure(nf, ne, dz))
    benchmark.pedantic(gpu_peer.run, rounds=2 if QUICK else 3, iterations=1)


if __name__ == "__main__":
    print(json.dumps(run(quick="--quick" in sys.argv), indent=2))
