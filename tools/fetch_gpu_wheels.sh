#!/usr/bin/env bash
# Download, on a machine with internet, the wheels that tools/gpu_check.sh installs on a
# GPU machine without internet (Python 3.12, x86_64). They go to .whl/ (git-ignored),
# which travels with the checkout. The GPU image this was written for (an H100 with CUDA
# 13, 2026-11) already has numba, numba-cuda, cupy-cuda13x, scipy, pytest,
# pytest-benchmark, matplotlib and tqdm; this fetches the rest.
#
#   bash tools/fetch_gpu_wheels.sh            # kernelrt's needs (about 17 MB)
#   PEERS=1 bash tools/fetch_gpu_wheels.sh    # also the benchmark peers (about 58 MB in all)
#
# NumPy is fetched within kernelrt's pin (< 2.5): that image had NumPy 2.5, under which
# numba-cuda 0.30 compiles no kernel. A device tool that carries at most 64 MiB with the
# checkout fits the peers, but not TBB as well: without it numba's CPU threading layer is
# OpenMP there, which changes no GPU number.
set -euo pipefail
cd "$(dirname "$0")/.."
mkdir -p .whl
PY_VERSION=${PY_VERSION:-3.12}
fetch() {
  python3 -m pip download --quiet --no-deps --only-binary=:all: --python-version "$PY_VERSION" \
    --implementation cp --platform manylinux_2_28_x86_64 --platform manylinux_2_27_x86_64 \
    --platform manylinux_2_24_x86_64 --platform manylinux_2_17_x86_64 --platform manylinux2014_x86_64 \
    --platform manylinux1_x86_64 --platform any -d .whl "$@"
}
fetch "numpy>=1.26,<2.5" diskcache nvidia-ml-py platformdirs
if [ -n "${PEERS:-}" ]; then
  # Laplacian peers (SpectralBrain's _cotangent_laplacian needs only NumPy and SciPy)
  fetch libigl==2.6.3 robust-laplacian==1.1.0 spectralbrain==0.1.0
  # MyoGen 0.12 and what importing its MotorUnitSim needs (NEURON among them); its CuPy
  # path uses the image's CuPy. scikit-fmm has no Python 3.12 wheel on PyPI: built here.
  fetch myogen==0.12.0 neuron==8.2.7 neo quantities beartype scienceplots
  PY312=${PY312:-}
  for c in python3.12 "$HOME"/.pyenv/versions/3.12*/bin/python; do
    [ -z "$PY312" ] && "$c" -c 'import sys; assert sys.version_info[:2] == (3, 12)' >/dev/null 2>&1 && PY312=$c
  done
  if [ -n "$PY312" ]; then
    "$PY312" -m pip wheel --quiet --no-deps -w .whl scikit-fmm
  else
    echo "no Python 3.12 here to build scikit-fmm: MyoGen will not import on the GPU machine" >&2
  fi
fi
ls -la .whl
du -sh .whl
