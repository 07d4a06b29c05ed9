"""``progress=True``: a bar where someone sees it (a terminal, a Jupyter kernel), none in a
log file. Jupyter is simulated: the modules ``tqdm.auto`` and kernels/conventions.py look at
are put in ``sys.modules`` (neither IPython nor ipykernel need be installed).
"""

from __future__ import annotations

import io
import sys
import types

import pytest
import tqdm.auto  # noqa: F401  imported before any fake Jupyter: it picks text or widget at import

from kernelrt.kernels import conventions


class _Terminal(io.StringIO):
    def isatty(self) -> bool:
        return True


class ZMQInteractiveShell:
    """Stands for ipykernel's shell (notebook, JupyterLab, VS Code, Colab subclass it)."""


class TerminalInteractiveShell:
    """Stands for IPython in a terminal: not a kernel."""


def _ipython(monkeypatch, shell) -> None:
    zmqshell = types.ModuleType("ipykernel.zmqshell")
    zmqshell.ZMQInteractiveShell = ZMQInteractiveShell
    ipython = types.ModuleType("IPython")
    ipython.get_ipython = lambda: shell
    monkeypatch.setitem(sys.modules, "ipykernel", types.ModuleType("ipykernel"))
    monkeypatch.setitem(sys.modules, "ipykernel.zmqshell", zmqshell)
    monkeypatch.setitem(sys.modules, "IPython", ipython)


@pytest.fixture
def jupyter(monkeypatch):
    _ipython(monkeypatch, ZMQInteractiveShell())


@pytest.fixture
def plain(monkeypatch):
    """A script or a test: no kernel, whatever this process imported before."""
    monkeypatch.delitem(sys.modules, "ipykernel.zmqshell", raising=False)


def test_a_terminal_sees_bars_and_a_redirected_stream_does_not(plain):
    assert conventions.bars_visible(_Terminal())
    assert not conventions.bars_visible(io.StringIO())
    assert not conventions.in_jupyter()


def test_a_jupyter_kernel_sees_bars_though_its_stderr_is_no_terminal(jupyter):
    assert conventions.in_jupyter()
    assert conventions.bars_visible(io.StringIO())


@pytest.mark.parametrize("shell", [None, TerminalInteractiveShell()], ids=["imported-no-shell", "ipython-terminal"])
def test_ipykernel_imported_without_its_shell_running_is_not_jupyter(monkeypatch, shell):
    _ipython(monkeypatch, shell)
    assert not conventions.in_jupyter()
    assert not conventions.bars_visible(io.StringIO())


def test_progress_true_draws_in_jupyter(jupyter, capsys):
    with conventions.progress_callback(True, 4, "kernelrt SFAPs", "fibre") as update:
        update(4)
    assert "kernelrt SFAPs" in capsys.readouterr().err


def test_progress_true_draws_nothing_into_a_log_file(plain, capsys):
    with conventions.progress_callback(True, 4, "kernelrt SFAPs", "fibre") as update:
        update(4)  # counted, not drawn
    assert capsys.readouterr().err == ""


def test_the_eigensolvers_bar_follows_the_same_rule(jupyter, capsys, monkeypatch):
    with conventions.converged_callback(True, 3, "eigenpairs (dense)", "pair") as update:
        update(2, 3)  # the count so far, not an increment
    assert "eigenpairs (dense)" in capsys.readouterr().err
    monkeypatch.delitem(sys.modules, "ipykernel.zmqshell")  # the same process, now a script's
    with conventions.converged_callback(True, 3, "eigenpairs (dense)", "pair") as update:
        update(3, 3)
    assert capsys.readouterr().err == ""


def test_eigenpairs_draws_its_bar_in_jupyter(jupyter, capsys, cache_dir):
    import numpy as np
    import scipy.sparse as sp

    from kernelrt.kernels import laplacian as lap

    n = 200  # a path graph's Laplacian: connected, PSD, no mesh kernels to compile
    L = sp.diags([-np.ones(n - 1), np.r_[1.0, 2.0 * np.ones(n - 2), 1.0], -np.ones(n - 1)], [-1, 0, 1]).tocsr()
    pairs = lap.eigenpairs(L, np.ones(n), 6, backend="cpu", method="cholesky", progress=True)
    assert len(pairs.evals) == 6
    assert "eigenpairs (cholesky)" in capsys.readouterr().err


def test_a_callable_is_called_and_false_gives_no_callback():
    seen = []
    with conventions.progress_callback(seen.append, 4, "x", "y") as update:
        update(1)
    assert seen == [1]
    with conventions.progress_callback(False, 4, "x", "y") as update:
        assert update is None
