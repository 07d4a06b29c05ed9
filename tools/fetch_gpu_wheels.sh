#!/usr/bin/env bash
# Download, on a machine with internet, the wheels that tools/gpu_check.sh installs on a
# GPU machine without internet (Python 3.12, x86_64). They go to .whl/ (git-ignored),
# which travels with the checkout. The GPU image this was written for (an H100 with CUDA
# 13, 2026-11) already has numba, numba-cuda, cupy-cuda13x, scipy, pytest,
# pytest-benchmark, matplotlib and tqdm; this fetches the rest.
#
#   bash tools/fetch_gpu_wheels.sh            # kernelrt's needs, cholespy and the Dask set
#   DASK=0 bash tools/fetch_gpu_wheels.sh     # without the Dask set and mesh readers
#   PEERS=1 DASK=0 bash tools/fetch_gpu_wheels.sh   # the benchmark peers instead (they and the
#                                             # Dask set do not fit the 64 MiB carry together)
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
# What the current code imports that the image lacks: the CPU eigensolver's METIS ordering for
# kernelrt's supernodal factor (pymetis; without it the Cholesky route falls back to cholespy),
# cholespy (then SuperLU), and the portable cache lock (filelock >= 3.30: lock_descriptor) and
# memory query (psutil).
fetch "numpy>=1.26,<2.5" diskcache nvidia-ml-py platformdirs "pymetis>=2025.2" cholespy==2.2.0 "filelock>=3.30" \
  "psutil>=5.9"
if [ "${DASK:-1}" != 0 ]; then
  # kernelrt.distributed (KernelrtPlugin, cohort_spectra(client=), compute_many(client=)) and
  # `kernelrt cohort` on mesh files; the image has cloudpickle, toolz, msgpack, psutil,
  # sortedcontainers, pyyaml, jinja2, click and fsspec. meshio imports rich.
  fetch "dask[distributed]>=2024.8" distributed tornado partd locket zict tblib \
    meshio nibabel rich markdown-it-py mdurl pygments "importlib-resources>=5.12"
fi
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
# The device tool carries the working tree and .whl/ together, 64 MiB in all (the tree is ~8 MB).
SIZE_MB=$(du -sm .whl | cut -f1)
echo "carried: .whl/ is ${SIZE_MB} MB ($(ls .whl/*.whl | wc -l) wheels)"
if [ "$SIZE_MB" -gt 50 ]; then
  echo "warning: .whl/ is over 50 MB: with the working tree it may exceed the 64 MiB carry limit" >&2
fi
