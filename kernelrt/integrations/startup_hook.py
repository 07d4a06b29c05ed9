"""What ``kernelrt-integrations.pth`` runs at interpreter start: a watcher, nothing more.

With ``KERNELRT_MYOGEN`` or ``KERNELRT_SPECTRALBRAIN`` set, every Python in the
environment runs the .pth line, so the start must cost next to nothing and must never
fail loudly. This module is standard-library only, and the .pth loads it by its file
path, without importing ``kernelrt.integrations`` (whose package imports NumPy).
``install()`` puts one finder at the front of ``sys.meta_path``; it answers no import
itself. The first time a requested peer (``myogen``, ``spectralbrain``) or
``kernelrt.integrations`` is imported it calls ``kernelrt.integrations.startup()``
(once), which enables the requested integrations (their patches then apply as the peer's modules load,
``hooks.py``). A process that imports neither pays for one ``sys.meta_path`` entry.

Failures never stop an import: at start one line goes to stderr, naming the variable and
the fix; later, one warning, and the peer imports untouched.
"""

import sys
import warnings

__all__ = ["PEERS", "install", "uninstall", "warn"]

PEERS = {"KERNELRT_MYOGEN": "myogen", "KERNELRT_SPECTRALBRAIN": "spectralbrain"}  # variable -> top-level package
_PACKAGE = "kernelrt.integrations"
_variables: list = []  # those the .pth found set


def install(variables) -> None:
    """Arm the watcher for ``variables`` (the integration variables set); never raises.

    The .pth reads the environment (kernelrt's modules leave that to ``kernelrt.config``)
    and passes the names; ``kernelrt.integrations.startup()`` reads their values again,
    through ``kernelrt.config``, when it enables the integrations.
    """
    _variables[:] = [v for v in variables if v in PEERS]
    if not _variables:
        return
    try:
        watched = {PEERS[v] for v in _variables} | {_PACKAGE}
        if any(name in sys.modules for name in watched):
            _enable()  # installed late (by hand): something to patch is already there
        elif not any(isinstance(f, _Watcher) and not f.done for f in sys.meta_path):
            sys.meta_path.insert(0, _Watcher(watched))
    except Exception as e:  # noqa: BLE001  (interpreter start must go on)
        print(f"kernelrt: {_names()} set, but the kernelrt start-up hook failed ({type(e).__name__}: {e}); "
              f"reinstall kernelrt (pip install --force-reinstall kernelrt) or unset {_names()}", file=sys.stderr)


def uninstall() -> None:
    """Remove the watcher (the integrations it enabled stay enabled); not from inside an import."""
    sys.meta_path[:] = [f for f in sys.meta_path if not isinstance(f, _Watcher)]


def _names() -> str:
    return " and ".join(_variables)


def warn(message: str, stacklevel: int = 1) -> None:
    """One RuntimeWarning (``stacklevel`` counted from the caller); under ``-W error`` a
    stderr line instead, so the import it runs in still succeeds (hooks.py uses it too)."""
    try:
        warnings.warn(message, RuntimeWarning, stacklevel=stacklevel + 1)
    except Warning:
        print(f"RuntimeWarning: {message}", file=sys.stderr)


def _enable(package=None) -> None:
    """``kernelrt.integrations.startup()``; a failure is one warning, never an exception."""
    try:
        if package is None:
            import importlib  # lazy: only once a watched import happens, not at interpreter start

            package = importlib.import_module(_PACKAGE)
        package.startup()
    except Exception as e:  # noqa: BLE001  (the peer's import must go on)
        warn(f"kernelrt: {_names()} set, but kernelrt's integrations could not be enabled "
             f"({type(e).__name__}: {e}); the peers run their own code. Reinstall kernelrt "
             f"(pip install --force-reinstall kernelrt) or unset {_names()}", stacklevel=2)


class _Watcher:
    """A meta-path finder that finds nothing: it notices the first import of a peer or of kernelrt.integrations.

    It stays in ``sys.meta_path`` once done (and answers nothing): removing it while the
    import system iterates over that list would make it skip the next finder.
    """

    def __init__(self, watched):
        self.watched = frozenset(watched)
        self.done = False

    def find_spec(self, fullname, path=None, target=None):
        if self.done or fullname not in self.watched:
            return None
        self.done = True
        if fullname != _PACKAGE:
            _enable()  # before the peer runs: the patches wait for its modules (hooks.py)
            return None
        for finder in sys.meta_path:
            spec = finder.find_spec(fullname, path, target) if hasattr(finder, "find_spec") else None
            if spec is not None:
                if spec.loader is not None and hasattr(spec.loader, "exec_module"):
                    spec.loader = _ThenEnable(spec.loader)
                return spec
        return None

    def invalidate_caches(self):
        pass


class _ThenEnable:
    """kernelrt.integrations' own loader, then ``startup()``: its ``status()`` shows the switch."""

    def __init__(self, loader):
        self._loader = loader

    def create_module(self, spec):
        return self._loader.create_module(spec)

    def exec_module(self, module):
        self._loader.exec_module(module)
        _enable(module)

    def __getattr__(self, name):  # get_source, is_package, resource readers, ...
        return getattr(self._loader, name)
