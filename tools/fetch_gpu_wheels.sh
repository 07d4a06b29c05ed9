#!/usr/bin/env bash
# Download, on a machine with internet, the wheels that tools/gpu_check.sh installs on a
# GPU machine without internet (Python 3.12, x86_64). They go to .whl/ (git-ignored),
# which travels with the checkout. The GPU machine already has numba, numba-cuda,
# cupy, scipy, pytest and pytest-benchmark; this fetches the rest.
#
#   bash tools/fetch_gpu_wheels.sh            # then: bash tools/gpu_check.sh (on the GPU machine)
set -euo pipefail
cd "$(dirname "$0")/.."
mkdir -p .whl
PY_VERSION=${PY_VERSION:-3.12}
fetch() {
  python3 -m pip download --quiet --no-deps --only-binary=:all: --python-version "$PY_VERSION" \
    --implementation cp --platform manylinux_2_28_x86_64 --platform manylinux_2_27_x86_64 \
    --platform manylinux_2_17_x86_64 --platform manylinux2014_x86_64 --platform manylinux1_x86_64 \
    --platform any -d .whl "$@"
}
# kernelrt's own dependencies missing there
fetch diskcache nvidia-ml-py platformdirs tbb tcmlib
# plots (kernelrt bench --plot) and progress bars
fetch matplotlib contourpy cycler fonttools kiwisolver packaging pillow pyparsing python-dateutil six tqdm
ls -la .whl
du -sh .whl
