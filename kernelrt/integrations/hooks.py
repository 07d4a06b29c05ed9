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
  site-packages calls ``kernelrt.integrations.startup()`` when any Python starts, so
  the child enables the integration too. Worker pools started *before* the switch (joblib's reusable loky
  executor) would keep their old state: switching shuts that executor down, so the
  peer's next ``Parallel`` starts fresh workers.

Guarantees: ``enable`` and ``disable`` are idempotent; nothing here imports a peer.
"""

from __future__ import annotations

import importlib.abc
import logging
import os
import sys
import threading
from dataclasses import dataclass, field

from .. import config

__all__ = ["Integration", "Patch", "log"]

log = logging.getLogger("kernelrt.integrations")


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

    @property
    def enabled(self) -> bool:
        """True once enabled (patches of a peer not imported yet apply when it is)."""
        return self._wanted

    def original(self, patch_attribute: str):
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
                "fallbacks": self.fallbacks, "pid": os.getpid()}

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
        if not self._wanted or patch.attribute in self._originals:
            return
        owner, leaf = patch._owner(module)
        self._originals[patch.attribute] = getattr(owner, leaf)
        setattr(owner, leaf, patch.replacement)

    def _on_import(self, module) -> None:
        with _lock:
            for patch in self.patches:
                if patch.module == module.__name__:
                    self._apply(patch, module)


_lock = threading.RLock()


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
