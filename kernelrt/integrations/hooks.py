"""Swapping a peer's functions for kernelrt's: reversibly, now or when the peer is imported, here and in child processes.

Owns the machinery every integration (``myogen``, ``spectralbrain``) shares:

* ``Patch``: one attribute of a peer module (``"MotorUnitSim.calc_sfaps"``) and what
  replaces it. Applying it remembers the original, so ``disable`` restores exactly
  what was there.
* ``Integration``: a named set of patches with its environment variable and counters
  (``calls``: work kernelrt did; ``fallbacks``: calls handed back to the peer, which
  then raises its own error or computes itself).
* A post-import hook: a patch whose module is not imported yet is applied the moment
  it is, so ``enable()`` (or the environment variable) never imports a heavy peer
  that a process does not use.
* Child processes: ``enable()`` sets the variable in ``os.environ``, which every child
  inherits, and the ``kernelrt-integrations.pth`` file that kernelrt installs into
  site-packages arms a standard-library watcher when any Python starts
  (``startup_hook.py``): the child's first import of the peer (or of
  ``kernelrt.integrations``) calls ``kernelrt.integrations.startup()``, so the child
  enables the integration too. Worker pools started *before* the switch (joblib's reusable loky
  executor) would keep their old state: switching shuts that executor down, so the
  peer's next ``Parallel`` starts fresh workers.

* Version guards: before its first patch applies, an integration checks the peer's
  version against the range kernelrt was tested with (``TESTED_VERSIONS``) and each
  patched attribute for existence. A peer outside the range, of unknown version, or
  without a patched (often private) name gets one ``RuntimeWarning`` and is left
  untouched: patches already applied are undone and the peer imports and runs its own
  code (``stats()["refused"]`` says why).

Guarantees: ``enable`` and ``disable`` are idempotent; nothing here imports a peer; no
patch makes a peer's import fail.
"""

from __future__ import annotations

import importlib.abc
import logging
import os
import re
import sys
import threading
from dataclasses import dataclass, field
from typing import Any

from .. import config
from .startup_hook import warn

__all__ = ["Integration", "Patch", "TESTED_VERSIONS", "log"]

log = logging.getLogger("kernelrt.integrations")

# Peer distribution (the top-level package of a patched module) -> the versions kernelrt's
# patches were tested with: [lowest, first untested). Peers not listed are not checked.
TESTED_VERSIONS = {"myogen": ((0, 12), (0, 13)), "spectralbrain": ((0, 1), (0, 2))}


@dataclass(frozen=True)
class Patch:
    """Replace ``module``'s ``attribute`` (dotted, e.g. ``"Class.method"``) with ``replacement``."""

    module: str
    attribute: str
    replacement: object

    def _owner(self, mod):
        owner = mod
        *path, _ = self.attribute.split(".")
        for name in path:
            owner = getattr(owner, name)
        return owner, self.attribute.rsplit(".", 1)[-1]

    def _present(self, mod) -> bool:
        try:
            owner, leaf = self._owner(mod)
        except AttributeError:
            return False
        return hasattr(owner, leaf)


@dataclass
class Integration:
    """A peer's patches, its environment variable and what the swap has done in this process."""

    name: str
    env_var: str
    patches: tuple[Patch, ...]
    calls: int = 0
    fallbacks: int = 0
    _originals: dict = field(default_factory=dict, repr=False)
    _wanted: bool = field(default=False, repr=False)
    _refused: str | None = field(default=None, repr=False)
    _versions_checked: bool = field(default=False, repr=False)

    @property
    def enabled(self) -> bool:
        """True once enabled (patches of a peer not imported yet apply when it is)."""
        return self._wanted

    def original(self, patch_attribute: str) -> Any:
        """The peer's own function behind a patched attribute (for fallbacks).

        While enabled it is the one the patch saved; after ``disable()`` the peer's module
        holds it again. A reference to a replacement taken while enabled (``from peer
        import f`` at the top of a module) thus follows the switch.
        """
        with _lock:
            if patch_attribute in self._originals:
                return self._originals[patch_attribute]
        patch = next(p for p in self.patches if p.attribute == patch_attribute)
        owner, leaf = patch._owner(sys.modules[patch.module])
        return getattr(owner, leaf)

    def record(self, counter: str) -> None:
        """Count one call in ``calls`` or ``fallbacks`` (replacements may run in several threads)."""
        with _lock:
            setattr(self, counter, getattr(self, counter) + 1)

    def stats(self) -> dict:
        """Counters of this process: enabled, patches applied, calls, fallbacks, pid."""
        return {"enabled": self._wanted, "applied": sorted(self._originals), "calls": self.calls,
                "fallbacks": self.fallbacks, "refused": self._refused, "pid": os.getpid()}

    def enable(self, *, environment: bool = True) -> None:
        """Swap now where the peer is imported, at import otherwise; children inherit it."""
        with _lock:
            if environment:
                config.request_integration(self.env_var, True)
            if self._wanted:
                return
            self._wanted = True
            for patch in self.patches:
                if patch.module in sys.modules:
                    self._apply(patch, sys.modules[patch.module])
                else:
                    _finder.watch(patch.module, self)
        _restart_worker_pools()
        log.info("kernelrt %s integration enabled in process %d (%s)", self.name, os.getpid(),
                 ", ".join(p.attribute for p in self.patches))

    def disable(self) -> None:
        """Restore the peer's own functions; children started from now on do not swap."""
        with _lock:
            config.request_integration(self.env_var, False)
            if not self._wanted:
                return
            self._wanted = False
            for patch in self.patches:
                if patch.attribute in self._originals:
                    owner, leaf = patch._owner(sys.modules[patch.module])
                    setattr(owner, leaf, self._originals.pop(patch.attribute))
        _restart_worker_pools()
        log.info("kernelrt %s integration disabled in process %d", self.name, os.getpid())

    def _apply(self, patch: Patch, module) -> None:
        if not self._wanted or self._refused or patch.attribute in self._originals:
            return
        if not self._versions_checked:
            self._versions_checked = True
            problem = _untested_version(self.patches)
            if problem:
                return self._refuse(problem)
        if not patch._present(module):
            return self._refuse(f"{patch.module} has no {patch.attribute} (the name kernelrt replaces)")
        owner, leaf = patch._owner(module)
        self._originals[patch.attribute] = getattr(owner, leaf)
        setattr(owner, leaf, patch.replacement)

    def _refuse(self, why: str) -> None:
        """Leave the peer untouched (undo applied patches), with one warning."""
        self._refused = why
        for patch in self.patches:
            if patch.attribute in self._originals:
                owner, leaf = patch._owner(sys.modules[patch.module])
                setattr(owner, leaf, self._originals.pop(patch.attribute))
        message = (f"kernelrt {self.name} integration: {why}; the peer is left untouched and runs its own "
                   f"code. Install a tested version of the peer, or unset {self.env_var}")
        log.info("%s", message)
        warn(message, stacklevel=2)  # under -W error a stderr line: the peer's import must go on

    def _on_import(self, module) -> None:
        with _lock:
            for patch in self.patches:
                if patch.module == module.__name__:
                    try:
                        self._apply(patch, module)
                    except Exception as e:  # noqa: BLE001  (never fail the peer's import)
                        self._refuse(f"patching {patch.module}.{patch.attribute} failed ({type(e).__name__}: {e})")


_lock = threading.RLock()


def _untested_version(patches) -> str | None:
    """Why the peer's installed version is not one kernelrt was tested with, or None."""
    peer = patches[0].module.split(".")[0]
    if peer not in TESTED_VERSIONS:
        return None
    low, high = TESTED_VERSIONS[peer]
    tested = f">= {'.'.join(map(str, low))}, < {'.'.join(map(str, high))}"
    version = _installed_version(peer)
    match = re.match(r"\d+(\.\d+)*", version or "")
    if match is None:
        return f"the version of {peer} is unknown (tested: {tested})"
    release = tuple(int(part) for part in match.group(0).split("."))
    if not low <= release < high:
        return f"{peer} {version} is outside the versions kernelrt was tested with ({tested})"
    return None


def _installed_version(peer: str) -> str | None:
    from importlib import metadata  # lazy: on the peer's import, not at interpreter start

    try:
        return metadata.version(peer)
    except metadata.PackageNotFoundError:
        return getattr(sys.modules.get(peer), "__version__", None)


class _PostImportFinder(importlib.abc.MetaPathFinder):
    """Finds watched modules through the other finders and runs callbacks once they have executed."""

    def __init__(self):
        self._watched: dict[str, list[Integration]] = {}

    def watch(self, module: str, integration: Integration) -> None:
        self._watched.setdefault(module, []).append(integration)
        if self not in sys.meta_path:
            sys.meta_path.insert(0, self)

    def find_spec(self, fullname, path, target=None):
        if fullname not in self._watched:
            return None
        for finder in sys.meta_path:
            if finder is self or not hasattr(finder, "find_spec"):
                continue
            spec = finder.find_spec(fullname, path, target)
            if spec is not None:
                if spec.loader is not None and hasattr(spec.loader, "exec_module"):
                    spec.loader = _ThenPatch(spec.loader, self._watched.pop(fullname))
                return spec
        return None


class _ThenPatch(importlib.abc.Loader):
    """The peer's own loader, then the integrations' patches."""

    def __init__(self, loader, integrations):
        self._loader = loader
        self._integrations = integrations

    def create_module(self, spec):
        return self._loader.create_module(spec)

    def exec_module(self, module):
        self._loader.exec_module(module)
        for integration in self._integrations:
            integration._on_import(module)

    def __getattr__(self, name):  # get_source, is_package, resource readers, ...
        return getattr(self._loader, name)


_finder = _PostImportFinder()


def _restart_worker_pools() -> None:
    """Shut joblib's reusable loky executor down, so new workers see the switched environment."""
    executor_module = sys.modules.get("joblib.externals.loky.reusable_executor")
    executor = getattr(executor_module, "_executor", None)
    if executor is not None:
        executor.shutdown(wait=True)
        executor_module._executor = None
