"""Issue 25, item 9: the start-up hook (kernelrt-integrations.pth) is cheap, quiet and guarded.

With ``KERNELRT_MYOGEN``/``KERNELRT_SPECTRALBRAIN`` set, every Python in the environment
runs the .pth line. It used to import kernelrt.integrations (NumPy) at every start, print
a traceback at every start when the install was broken, and make a peer version without
the patched private name fail to import. Each test runs a child Python that processes
the repository's .pth exactly as ``site`` does at start (``site.addsitedir``), so it
checks the file in this tree even where an older copy is installed; one test checks the
installed copy by a real interpreter start.
"""

from __future__ import annotations

import json
import os
import site
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

import kernelrt

PTH = Path(kernelrt.__file__).parent / "integrations" / "kernelrt-integrations.pth"
VARIABLES = ("KERNELRT_MYOGEN", "KERNELRT_SPECTRALBRAIN")
PATCHED = "myogen.simulator.core.emg.intramuscular.motor_unit_sim"


def _clean_env(**extra):
    env = {k: v for k, v in os.environ.items() if k not in VARIABLES}
    return dict(env, **extra)


def _site_dir(tmp_path) -> Path:
    d = tmp_path / "site"
    d.mkdir(exist_ok=True)
    (d / PTH.name).write_bytes(PTH.read_bytes())
    return d


def _start(tmp_path, body: str, *, variable="KERNELRT_MYOGEN", prefix=(), args=(), cwd=None, setup=""):
    """A child Python: ``setup``, ``variable`` set, the .pth processed as at start, then ``body``."""
    code = (
        f"import os, sys, site\n{setup}"
        f"os.environ[{variable!r}] = '1'\n"
        f"site.addsitedir({str(_site_dir(tmp_path))!r})\n" + textwrap.dedent(body)
    )
    return subprocess.run([sys.executable, *prefix, "-c", code, *args], capture_output=True, text=True,
                          env=_clean_env(), cwd=cwd, timeout=300)


@pytest.mark.parametrize("variable", VARIABLES)
def test_start_up_loads_neither_numpy_nor_kernelrt(tmp_path, variable):
    res = _start(tmp_path, """
        import json
        loaded = sorted(m for m in sys.modules if m.split('.')[0] in ('numpy', 'numba', 'kernelrt'))
        watching = [type(f).__name__ for f in sys.meta_path]
        import kernelrt.integrations as i  # importing the package enables what the variable asks
        print(json.dumps({"loaded": loaded, "watching": watching, "status": i.status(),
                          "numba": "numba" in sys.modules}))
    """, variable=variable)
    assert res.returncode == 0 and res.stderr == "", res.stderr
    out = json.loads(res.stdout)
    assert out["loaded"] == ["kernelrt.integrations.startup_hook"]  # stdlib only: no NumPy, no kernelrt
    assert out["watching"][0] == "_Watcher"
    name = "myogen" if variable == "KERNELRT_MYOGEN" else "spectralbrain"
    assert {n: s["enabled"] for n, s in out["status"].items()} == {
        "myogen": name == "myogen", "spectralbrain": name == "spectralbrain"}
    assert out["numba"] is False


def _installed_pth():
    for d in (*site.getsitepackages(), site.getusersitepackages()):
        if (Path(d) / PTH.name).exists():
            return Path(d) / PTH.name
    return None


def test_real_interpreter_start_with_the_installed_hook():
    installed = _installed_pth()
    if installed is None or installed.read_bytes() != PTH.read_bytes():
        pytest.skip("the installed kernelrt-integrations.pth is missing or older than this tree (pip install -e .)")
    for variable in VARIABLES:
        res = subprocess.run([sys.executable, "-c", "import sys; print('numpy' in sys.modules)"],
                             capture_output=True, text=True, env=_clean_env(**{variable: "1"}), check=True)
        assert res.stdout.strip() == "False" and res.stderr == ""


def _fake_kernelrt(tmp_path, hook_source: str) -> Path:
    root = tmp_path / "broken"
    (root / "kernelrt" / "integrations").mkdir(parents=True)
    (root / "kernelrt" / "__init__.py").write_text("")
    (root / "kernelrt" / "integrations" / "startup_hook.py").write_text(hook_source)
    return root


@pytest.mark.parametrize("broken", ["hook raises", "install raises", "kernelrt missing"])
def test_broken_install_prints_one_line_and_python_starts(tmp_path, broken):
    body = "print('started')\n"
    if broken == "kernelrt missing":  # the .pth left behind: no site-packages, kernelrt nowhere
        res = _start(tmp_path, body, prefix=("-S",), cwd=tmp_path)
    else:
        source = ("raise RuntimeError('broken on purpose')\n" if broken == "hook raises" else
                  "def install(variables):\n    raise RuntimeError('broken on purpose')\n")
        fake = _fake_kernelrt(tmp_path, source)  # found first: the editable finder comes after sys.path
        res = _start(tmp_path, body, setup=f"sys.path.insert(0, {str(fake)!r})\n", cwd=tmp_path)
    assert res.returncode == 0 and res.stdout == "started\n"
    lines = res.stderr.splitlines()
    assert len(lines) == 1, res.stderr  # no traceback
    assert "KERNELRT_MYOGEN" in lines[0] and "pip install --force-reinstall kernelrt" in lines[0]
    if broken != "kernelrt missing":
        assert "RuntimeError: broken on purpose" in lines[0]


def _fake_myogen(tmp_path, version: str, with_calc_sfaps: bool) -> Path:
    """A package named ``myogen`` with the module kernelrt patches and its distribution metadata."""
    root = tmp_path / "peer"
    pkg = root / PATCHED.replace(".", "/")
    pkg.parent.mkdir(parents=True)
    for d in [root / "myogen", *(p for p in pkg.parents if root / "myogen" in p.parents)]:
        (d / "__init__.py").write_text("")
    sfaps = "    def calc_sfaps(self, *a, **k):\n        return 'peer'\n" if with_calc_sfaps else ""
    pkg.with_suffix(".py").write_text(
        "class MotorUnitSim:\n" + sfaps + "    def calc_muap(self, jitter_std=0.0):\n        return 'peer'\n")
    dist = root / f"myogen-{version}.dist-info"
    dist.mkdir()
    (dist / "METADATA").write_text(f"Metadata-Version: 2.1\nName: myogen\nVersion: {version}\n")
    return root


IMPORT_PEER = """
import json, warnings
sys.path.insert(0, sys.argv[1])
with warnings.catch_warnings(record=True) as caught:
    warnings.simplefilter("always")
    import myogen
    from myogen.simulator.core.emg.intramuscular import motor_unit_sim as m
import kernelrt.integrations as i
print(json.dumps({"calc_muap": m.MotorUnitSim.calc_muap.__module__,
                  "warnings": [str(w.message) for w in caught if 'kernelrt' in str(w.message)],
                  "refused": i.status()["myogen"]["refused"]}))
"""


@pytest.mark.parametrize("version, with_calc_sfaps, patched, why", [
    ("0.12.0", True, True, None),  # the tested version: swapped
    ("0.12.0", False, False, "has no MotorUnitSim.calc_sfaps"),  # the patched name is gone
    ("0.13.0", True, False, "myogen 0.13.0 is outside the versions kernelrt was tested with"),
])
def test_peer_guards(tmp_path, version, with_calc_sfaps, patched, why):
    peer = _fake_myogen(tmp_path, version, with_calc_sfaps)
    res = _start(tmp_path, IMPORT_PEER, args=(str(peer),))
    assert res.returncode == 0, res.stderr  # the peer imports in every case
    out = json.loads(res.stdout)
    assert out["calc_muap"] == ("kernelrt.integrations.myogen" if patched else PATCHED)
    if why is None:
        assert out["warnings"] == [] and out["refused"] is None
    else:
        assert len(out["warnings"]) == 1 and why in out["warnings"][0], out["warnings"]
        assert "KERNELRT_MYOGEN" in out["warnings"][0] and why in out["refused"]


def test_peer_without_the_patched_name_imports_under_warnings_as_errors(tmp_path):
    peer = _fake_myogen(tmp_path, "0.12.0", with_calc_sfaps=False)
    body = "sys.path.insert(0, sys.argv[1])\nimport myogen.simulator.core.emg.intramuscular.motor_unit_sim\nprint('ok')\n"
    res = _start(tmp_path, body, prefix=("-W", "error"), args=(str(peer),))
    assert res.returncode == 0 and res.stdout == "ok\n", res.stderr
    assert [line for line in res.stderr.splitlines() if "kernelrt" in line] == [
        line for line in res.stderr.splitlines() if "has no MotorUnitSim.calc_sfaps" in line]
