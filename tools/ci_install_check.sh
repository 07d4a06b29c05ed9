#!/usr/bin/env bash
# kernelrt as a user gets it: sdist -> wheel -> a fresh venv, used from outside the checkout.
#
#   tools/ci_install_check.sh
#
# 1. builds the sdist from this checkout (python -m build --sdist) and a wheel from that
#    sdist (pip wheel --no-deps), as `pip install kernelrt-X.tar.gz` does;
# 2. installs the wheel with its dependencies (and the test extra's tools) into a fresh
#    venv, then from a directory outside the checkout imports kernelrt, checks that
#    kernelrt-integrations.pth landed in site-packages, runs `kernelrt info` and the CPU
#    quick start (tools/ci_quickstart.py: a kernel launch, a Laplacian and its spectrum);
# 3. uninstalls numba-cuda and its CUDA bindings there, leaving what macOS installs (no
#    numba-cuda wheel exists for it), and runs the quick start and the CPU layers
#    (tests/runtime, tests/sfap, tests/laplacian) against the installed kernelrt: pytest
#    runs from outside the checkout with --import-mode=append, so the checkout's tests
#    import the installed kernelrt first (a test that starts a subprocess with the checkout
#    first on its path still imports the checkout's copy of the same source).
#
# `python` must have `build` (the test extra); the new venv uses the same interpreter.
set -euo pipefail
cd "$(dirname "$0")/.."
root=$PWD
work=$(mktemp -d "${TMPDIR:-/tmp}/kernelrt-install-check.XXXXXX")
trap 'rm -rf "$work"' EXIT

say() { echo "install check: $*"; }

say "building the sdist, then a wheel from it"
python -m build --sdist --outdir "$work/dist" . > "$work/build.log" 2>&1 || { tail -n 40 "$work/build.log"; exit 1; }
sdist=$(ls "$work"/dist/kernelrt-*.tar.gz)
python -m pip wheel --quiet --no-deps --wheel-dir "$work/wheel" "$sdist"
wheel=$(ls "$work"/wheel/kernelrt-*.whl)
say "built $(basename "$sdist") and $(basename "$wheel")"

python -m venv "$work/venv"
vpy="$work/venv/bin/python"
"$vpy" -m pip install --quiet --upgrade pip
"$vpy" -m pip install --quiet "${wheel}[test]"

cd "$work"  # nothing of the checkout on sys.path from here on
"$vpy" - "$work/venv" <<'EOF'
import sys
import sysconfig
from pathlib import Path

import kernelrt

venv = Path(sys.argv[1]).resolve()
site = Path(sysconfig.get_paths()["purelib"]).resolve()
where = Path(kernelrt.__file__).resolve()
assert site in where.parents, f"kernelrt imported from {where}, not from {site}"
assert (site / "kernelrt-integrations.pth").is_file(), f"kernelrt-integrations.pth is not in {site}"
assert (site / "kernelrt" / "py.typed").is_file(), "kernelrt/py.typed is not installed"
print(f"install check: kernelrt {kernelrt.__version__} imported from {where.parent}; the .pth is in {site}")
EOF
"$work/venv/bin/kernelrt" info > "$work/info.txt" || { cat "$work/info.txt"; exit 1; }
"$vpy" "$root/tools/ci_quickstart.py"

say "without numba-cuda (what macOS installs)"
"$vpy" -m pip uninstall --quiet --yes numba-cuda cuda-bindings cuda-core cuda-pathfinder
"$work/venv/bin/kernelrt" info | grep -F "numba-cuda is not installed"
"$vpy" "$root/tools/ci_quickstart.py"
# `kernelrt bench` runs the suites in bench/ beside the kernelrt it imports (a source
# checkout's); the tests of that command get this checkout's, linked into the venv.
site=$("$vpy" -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])')
ln -s "$root/bench" "$site/bench"
# The layers in the order of the main run (tests/laplacian/test_warm.py counts the signatures
# every earlier test launched). One test starts `python -m kernelrt.cli` in the checkout,
# whose kernelrt/ has no kernels/: it is left to the main run.
"$vpy" -m pytest -q -p no:cacheprovider --import-mode=append --rootdir "$root" -c "$root/pyproject.toml" \
  "$root/tests/laplacian" "$root/tests/runtime" "$root/tests/sfap" \
  -k "not test_kernelrt_bench_gpu_delegates_to_the_probe"
