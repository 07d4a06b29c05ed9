"""The swap machinery of kernelrt.integrations (hooks.py), on a fake peer package written per test.

No real peer is needed: the tests write a tiny module to a temporary directory and swap one
of its functions, before and after it is imported, in this process and in a child process
(through the environment variable and the installed kernelrt-integrations.pth).
"""

from __future__ import annotations

import logging
import os
import site
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from kernelrt.config import integration_requested
from kernelrt.integrations import INTEGRATIONS, status
from kernelrt.integrations.hooks import Integration, Patch


@pytest.fixture
def fake_peer(tmp_path, monkeypatch):
    """A module ``fakepeer_<n>.core`` with ``Model.run`` and ``build``; its name is unique per test."""
    name = f"fakepeer_{os.getpid()}_{len(list(tmp_path.parent.iterdir()))}"
    pkg = tmp_path / name
    pkg.mkdir()
    (pkg / "__init__.py").write_text("")
    (pkg / "core.py").write_text(textwrap.dedent("""
        class Model:
            def run(self, x):
                return ("peer", x)

        def build(x):
            if x < 0:
                raise ValueError("peer says: x must be >= 0")
            return ("peer", x)
    """))
    monkeypatch.syspath_prepend(str(tmp_path))
    yield f"{name}.core"
    for mod in [m for m in sys.modules if m.startswith(name)]:
        del sys.modules[mod]


def _integration(module: str, var: str) -> Integration:
    return Integration("fake", var, patches=(
        Patch(module, "Model.run", lambda self, x: ("kernelrt", x)),
        Patch(module, "build", lambda x: ("kernelrt", x)),
    ))


def test_enable_before_import_patches_at_import(fake_peer, monkeypatch):
    monkeypatch.delenv("KERNELRT_FAKE_A", raising=False)
    integ = _integration(fake_peer, "KERNELRT_FAKE_A")
    integ.enable()
    try:
        assert fake_peer not in sys.modules  # enable() imports nothing
        assert os.environ["KERNELRT_FAKE_A"] == "1"  # children inherit the switch
        import importlib

        core = importlib.import_module(fake_peer)
        assert core.Model().run(2) == ("kernelrt", 2)
        assert core.build(3) == ("kernelrt", 3)
        assert integ.stats()["applied"] == ["Model.run", "build"]
    finally:
        integ.disable()
    assert core.Model().run(2) == ("peer", 2)
    assert core.build(3) == ("peer", 3)
    assert "KERNELRT_FAKE_A" not in os.environ


def test_enable_after_import_and_round_trip(fake_peer, caplog):
    import importlib

    core = importlib.import_module(fake_peer)
    run, build = core.Model.run, core.build
    integ = _integration(fake_peer, "KERNELRT_FAKE_B")
    with caplog.at_level(logging.INFO, logger="kernelrt.integrations"):
        integ.enable()
        integ.enable()  # idempotent: the originals are not replaced by the patch
    assert "kernelrt fake integration enabled" in caplog.text
    assert core.build(1) == ("kernelrt", 1)
    assert integ.original("build") is build
    integ.disable()
    integ.disable()
    assert core.Model.run is run and core.build is build
    assert not integ.enabled and integ.stats()["applied"] == []


def test_integration_variable_values(monkeypatch):
    for value, on in (("1", True), ("yes", True), ("0", False), ("false", False), ("", False), ("OFF", False)):
        monkeypatch.setenv("KERNELRT_FAKE_C", value)
        assert integration_requested("KERNELRT_FAKE_C") is on
    monkeypatch.delenv("KERNELRT_FAKE_C")
    assert integration_requested("KERNELRT_FAKE_C") is False


def test_registered_integrations_start_disabled():
    assert set(INTEGRATIONS) == {"myogen", "spectralbrain"}
    assert {name: s["enabled"] for name, s in status().items()} == {"myogen": False, "spectralbrain": False}
    assert INTEGRATIONS["myogen"].env_var == "KERNELRT_MYOGEN"
    assert INTEGRATIONS["spectralbrain"].env_var == "KERNELRT_SPECTRALBRAIN"


def _pth_installed() -> bool:
    dirs = [*site.getsitepackages(), site.getusersitepackages()]
    return any((Path(d) / "kernelrt-integrations.pth").exists() for d in dirs)


@pytest.mark.skipif(not _pth_installed(), reason="kernelrt-integrations.pth is not installed in site-packages "
                    "(kernelrt not pip-installed in this environment)")
@pytest.mark.parametrize("value, expected", [("1", True), ("0", False), (None, False)])
def test_child_process_swaps_from_the_environment(value, expected):
    """The .pth start-up hook: a fresh Python enables the integration from KERNELRT_MYOGEN alone."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("KERNELRT_MYOGEN")}
    if value is not None:
        env["KERNELRT_MYOGEN"] = value
    code = "import sys, kernelrt.integrations as i; print(i.status()['myogen']['enabled'], 'numba' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, check=True)
    enabled, numba_loaded = out.stdout.split()
    assert enabled == str(expected), out.stderr
    assert numba_loaded == "False"  # start-up never imports numba (or the peer)
