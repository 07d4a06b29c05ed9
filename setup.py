"""Puts kernelrt-integrations.pth at the root of the wheel (and of the editable wheel).

Everything else about the build is in pyproject.toml. The .pth file (in
kernelrt/integrations/) lands in site-packages, where Python runs its one line at start-up:
with KERNELRT_MYOGEN or KERNELRT_SPECTRALBRAIN set it loads
kernelrt/integrations/startup_hook.py by its file path (standard library only), whose
import watcher calls ``kernelrt.integrations.startup()`` when the peer is first imported,
so processes a peer starts (joblib workers) swap too; unset, it costs two dictionary
lookups. setuptools has no option for a root-level file, so
``build_py`` copies it into the build tree and ``editable_wheel`` (PEP 660, what
``pip install -e`` runs, which never calls ``build_py``'s outputs into the wheel) writes it
into the wheel through its strategy object. MANIFEST.in puts it in the sdist, so a wheel
built from the sdist (``pip install kernelrt-X.tar.gz``) has it too.
"""

from pathlib import Path

from setuptools import setup
from setuptools.command.build_py import build_py
from setuptools.command.editable_wheel import editable_wheel

PTH = Path(__file__).parent / "kernelrt" / "integrations" / "kernelrt-integrations.pth"


class BuildPyWithPth(build_py):
    def run(self):
        super().run()
        self.copy_file(str(PTH), str(Path(self.build_lib) / PTH.name), preserve_mode=0)

    def get_outputs(self, *args, **kwargs):
        return [*super().get_outputs(*args, **kwargs), str(Path(self.build_lib) / PTH.name)]


class _StrategyWithPth:
    """setuptools' editable strategy, plus the .pth at the wheel's root."""

    def __init__(self, strategy):
        self._strategy = strategy

    def __call__(self, wheel, files, mapping):
        self._strategy(wheel, files, mapping)
        wheel.writestr(PTH.name, PTH.read_bytes())

    def __enter__(self):
        self._strategy.__enter__()
        return self

    def __exit__(self, *exc):
        return self._strategy.__exit__(*exc)


class EditableWheelWithPth(editable_wheel):
    # _select_strategy is setuptools-internal (checked with setuptools 77-80); if it moves,
    # editable installs lose only the .pth, and kernelrt.integrations warns about it.
    def _select_strategy(self, *args, **kwargs):
        return _StrategyWithPth(super()._select_strategy(*args, **kwargs))


setup(cmdclass={"build_py": BuildPyWithPth, "editable_wheel": EditableWheelWithPth})
