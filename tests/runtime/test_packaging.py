"""What ``pip install kernelrt`` gets: the sdist's files, and the dependencies per platform.

The sdist must carry what its wheel is built from (the .pth setup.py copies to the wheel's
root, the typing markers, the licence); the requirements must follow numba-cuda's
platforms (it has wheels for Linux and Windows, none for macOS) and keep CUDA toolkit
wheels out of the test extra. tools/ci_install_check.sh does the whole round trip in CI.
"""

from __future__ import annotations

import importlib.util
import subprocess
import sys
import tarfile
import tomllib
import zipfile
from importlib import metadata

import pytest
from packaging.markers import default_environment
from packaging.requirements import Requirement
from packaging.version import Version

from kernelrt.integrations.hooks import TESTED_VERSIONS
from tests.support.layers import ROOT

PYPROJECT = tomllib.loads((ROOT / "pyproject.toml").read_text())
PROJECT = PYPROJECT["project"]
PLATFORMS = {  # sys_platform, platform_machine, platform_system
    "linux": ("linux", "x86_64", "Linux"),
    "linux-aarch64": ("linux", "aarch64", "Linux"),
    "windows": ("win32", "AMD64", "Windows"),
    "macos-arm64": ("darwin", "arm64", "Darwin"),
    "macos-x86_64": ("darwin", "x86_64", "Darwin"),
}


def _requirements(specs: list[str], platform: str, python: str = "3.11", extra: str = "") -> dict[str, Requirement]:
    """The requirements that apply on ``platform`` under Python ``python``, by name."""
    sys_platform, machine, system = PLATFORMS[platform]
    env = dict(default_environment(), sys_platform=sys_platform, platform_machine=machine, platform_system=system,
               python_version=python, python_full_version=python + ".0", extra=extra)
    out = {}
    for spec in specs:
        req = Requirement(spec)
        if req.marker is None or req.marker.evaluate(env):
            assert req.name not in out, f"two requirements for {req.name} apply on {platform}"
            out[req.name] = req
    return out


def _allows(req: Requirement, version: str) -> bool:
    return req.specifier.contains(Version(version), prereleases=True)


@pytest.mark.parametrize("platform", ["linux", "linux-aarch64", "windows"])
def test_numba_cuda_and_numpys_cap_where_numba_cuda_has_wheels(platform):
    deps = _requirements(PROJECT["dependencies"], platform)
    assert _allows(deps["numba-cuda"], "0.30.4") and not _allows(deps["numba-cuda"], "0.31.0")
    # numba-cuda 0.30 registers np.row_stack, which NumPy 2.5 removed
    assert _allows(deps["numpy"], "2.4.6") and not _allows(deps["numpy"], "2.5.0")


@pytest.mark.parametrize("platform", ["macos-arm64", "macos-x86_64"])
def test_macos_installs_without_numba_cuda_and_may_have_numpy_2_5(platform):
    deps = _requirements(PROJECT["dependencies"], platform)
    assert "numba-cuda" not in deps
    assert _allows(deps["numpy"], "2.5.0") and not _allows(deps["numpy"], "1.25.0")
    assert {"numba", "scipy", "filelock", "psutil"} <= set(deps)


@pytest.mark.parametrize("platform", list(PLATFORMS))
def test_every_platform_gets_the_portable_locking_and_memory_libraries(platform):
    deps = _requirements(PROJECT["dependencies"], platform)
    assert _allows(deps["filelock"], "3.30.0") and not _allows(deps["filelock"], "3.29.7")  # lock_descriptor
    assert "psutil" in deps


def test_the_test_extra_pulls_no_cuda_toolkit_and_the_ptx_extra_does():
    extras = PROJECT["optional-dependencies"]
    test = {Requirement(s).name: Requirement(s) for s in extras["test"]}
    assert "numba-cuda" not in test and not any(name.startswith(("nvidia-", "cuda-")) for name in test)
    assert {"mypy", "build"} <= set(test)
    ptx = [Requirement(s) for s in extras["ptx"]]
    assert [(r.name, r.extras) for r in ptx] == [("numba-cuda", {"cu12"})]  # NVRTC for sm_80/sm_90


def test_peer_extras_are_the_ranges_the_integrations_were_tested_with():
    extras = PROJECT["optional-dependencies"]
    for peer, (low, high) in TESTED_VERSIONS.items():
        (req,) = [Requirement(s) for s in extras[peer] if Requirement(s).name == peer]
        lowest, first_untested = ".".join(map(str, low)), ".".join(map(str, high))
        assert _allows(req, lowest) and not _allows(req, first_untested), (peer, str(req))
        # no marker: on a Python the peer has no wheel for, pip fails instead of installing nothing
        assert req.marker is None, (peer, str(req))
    bench = [Requirement(s) for s in extras["bench"]]
    assert all(str(r.specifier).startswith("==") for r in bench if r.name not in ("pytest-benchmark", "matplotlib"))


def test_metadata_states_the_platforms_and_the_licence():
    classifiers = set(PROJECT["classifiers"])
    assert {
        "Operating System :: POSIX :: Linux", "Operating System :: Microsoft :: Windows", "Operating System :: MacOS",
        "Programming Language :: Python :: 3.11", "Programming Language :: Python :: 3.12",
        "Programming Language :: Python :: 3.13", "Intended Audience :: Science/Research",
        "Environment :: GPU :: NVIDIA CUDA", "Typing :: Typed",
    } <= classifiers
    assert PROJECT["license"] == "BSD-3-Clause" and PROJECT["license-files"] == ["LICENSE"]
    assert "Copyright (c) 2026, the kernelrt developers" in (ROOT / "LICENSE").read_text()
    package_data = PYPROJECT["tool"]["setuptools"]["package-data"]
    assert package_data == {"kernelrt": ["py.typed"], "kernelrt.kernels": ["py.typed"]}


def _can_build_without_isolation() -> str | None:
    """Why the sdist cannot be built here without fetching the build backend, or None."""
    if importlib.util.find_spec("build") is None:
        return "the build package is not installed (pip install -e '.[test]')"
    try:
        setuptools = metadata.version("setuptools")
    except metadata.PackageNotFoundError:
        return "setuptools is not installed"
    if Version(setuptools) < Version("77"):
        return f"setuptools {setuptools} is older than the 77 pyproject.toml needs"
    return None


@pytest.fixture(scope="module")
def sdist(tmp_path_factory):
    why = _can_build_without_isolation()
    if why:
        pytest.skip(why)
    out = tmp_path_factory.mktemp("dist")
    done = subprocess.run([sys.executable, "-m", "build", "--sdist", "--no-isolation", "--outdir", str(out), str(ROOT)],
                          capture_output=True, text=True, timeout=600, check=False)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    (path,) = out.glob("kernelrt-*.tar.gz")
    return path


def test_the_sdist_carries_what_its_wheel_is_built_from(sdist):
    with tarfile.open(sdist) as tar:
        names = {name.split("/", 1)[1] for name in tar.getnames() if "/" in name}
    expected = {
        "kernelrt/integrations/kernelrt-integrations.pth",  # setup.py copies it to the wheel's root
        "kernelrt/py.typed", "kernels/py.typed",
        "LICENSE", "CHANGELOG.md", "README.md", "pyproject.toml", "setup.py",
        "kernelrt/__init__.py", "kernels/laplacian/__init__.py", "kernels/sfap/__init__.py",
    }
    assert expected <= names, sorted(expected - names)
    assert not any(name.startswith(("tests/", ".venv", ".ci")) for name in names)


@pytest.mark.slow
def test_the_wheel_built_from_the_sdist_puts_the_pth_in_site_packages(sdist, tmp_path):
    done = subprocess.run([sys.executable, "-m", "pip", "wheel", "--no-deps", "--no-build-isolation", "--quiet",
                           "--wheel-dir", str(tmp_path), str(sdist)],
                          capture_output=True, text=True, timeout=600, check=False)
    assert done.returncode == 0, done.stderr[-3000:]
    (wheel,) = tmp_path.glob("kernelrt-*.whl")
    names = set(zipfile.ZipFile(wheel).namelist())
    assert {"kernelrt-integrations.pth", "kernelrt/py.typed", "kernelrt/kernels/py.typed",
            "kernelrt/kernels/laplacian/cohort.py"} <= names
    assert any(n.endswith(".dist-info/licenses/LICENSE") for n in names)
