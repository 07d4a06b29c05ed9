#!/usr/bin/env bash
# GPU check: on a machine with a CUDA GPU, install kernelrt from this checkout without
# network, run the gpu-marked tests, fill a kernel cache from a process that sees no GPU
# (`kernelrt cache warm --cc XY`, as a build machine would) and run the demo from it, then
# the benchmarks, and write bench/results/<date>-<gpu>.json (device, versions, commit,
# peer ratios, the GPU test summary and the demo's checks) with its plots.
#
#   bash tools/fetch_gpu_wheels.sh     # where there is internet: wheels into .whl/
#   bash tools/gpu_check.sh            # on the GPU machine (Python 3.12 with numba-cuda, cupy)
#   bash tools/gpu_check.sh tests demo # some steps only: tests, demo (with the warm), bench
#
# Environment: PYTHON (default python3), KERNELRT_RESULTS_DIR (default bench/results),
# GPU_CHECK_QUICK=1 (small benchmark sizes), GPU_CHECK_ALLOW_CPU=1 (run every step even
# without a GPU: a dry run of this script). The test summary and the demo's report are kept
# in bench/results/tmp/ (git-ignored), so a bench step run later attaches them too. If
# $OUT is set, this run's results are copied there.
set -uo pipefail
cd "$(dirname "$0")/.."
# Python puts the working directory first on sys.path for `-c` and `-m`; here that is the
# source tree, whose kernelrt/ lacks kernelrt.kernels. Import the installed copy instead.
export PYTHONSAFEPATH=1 KERNELRT_REPO="$PWD"
PY=${PYTHON:-python3}
RESULTS=${KERNELRT_RESULTS_DIR:-bench/results}
SITE=${KERNELRT_SITE:-/tmp/kernelrt-site}
WORK=$(mktemp -d)
KEEP=bench/results/tmp
mkdir -p "$KEEP" "$RESULTS"
STEPS=" ${*:-tests demo bench} "
want() { [[ "$STEPS" == *" $1 "* ]]; }
FAILED=()
step() { printf '\n==== [%s] %s ====\n' "$(date +%H:%M:%S)" "$*"; }
fail() { echo "!! $*"; FAILED+=("$*"); }

step "1/7 machine"
"$PY" --version || { echo "no $PY"; exit 1; }
nvidia-smi --query-gpu=index,name,driver_version,memory.total,compute_cap --format=csv 2>/dev/null \
  || echo "nvidia-smi: not available"
git rev-parse --short HEAD 2>/dev/null || echo "(not a git checkout)"

step "2/7 dependencies from .whl/ (offline)"
mkdir -p "$SITE"
if ls .whl/*.whl >/dev/null 2>&1; then
  "$PY" -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target "$SITE" .whl/*.whl \
    || { echo "installing the wheels in .whl/ failed"; exit 1; }
  echo "installed $(ls .whl/*.whl | wc -l) wheels into $SITE"
else
  echo "no .whl/ folder: using what $PY already has (run tools/fetch_gpu_wheels.sh where there is internet)"
fi

step "3/7 kernelrt from this checkout"
# Copy the two import packages into place (kernels/ is installed as kernelrt.kernels):
# no build backend and no network needed.
rm -rf "$SITE/kernelrt" && cp -r kernelrt "$SITE/kernelrt" && cp -r kernels "$SITE/kernelrt/kernels"
export PYTHONPATH="$SITE:$PWD:${PYTHONPATH:-}"
export KERNELRT_CACHE_DIR=${KERNELRT_CACHE_DIR:-$WORK/cache}
"$PY" -c "import kernelrt, kernelrt.kernels, numba, numba.cuda, diskcache; print('imports ok:', kernelrt.__file__)" \
  || { echo "kernelrt does not import"; exit 1; }

step "4/7 kernelrt info"
"$PY" -m kernelrt.cli info || fail "kernelrt info"
if ! "$PY" -c "import sys, kernelrt; a = kernelrt.CUDABackend.availability(); print('cuda:', a.reason); sys.exit(a.code != 'ok')"; then
  if [ -z "${GPU_CHECK_ALLOW_CPU:-}" ]; then echo "no usable GPU: stopping (GPU_CHECK_ALLOW_CPU=1 runs the steps anyway)"; exit 1; fi
  echo "no usable GPU: continuing because GPU_CHECK_ALLOW_CPU is set (GPU tests will skip)"
fi

if want tests; then
  step "5/7 GPU tests (tests/gpu)"
  "$PY" -m pytest -q -p no:cacheprovider tests/gpu --junitxml="$KEEP/gpu-tests.xml" 2>&1 | tee "$KEEP/gpu-tests.txt"
  [ "${PIPESTATUS[0]}" -eq 0 ] || fail "GPU tests"
fi

if want demo; then
  step "6/7 demo, from a cache warmed by a process that sees no GPU"
  CC=$(nvidia-smi --query-gpu=compute_cap --format=csv,noheader 2>/dev/null | head -n 1 | tr -d ' .')
  if [ -n "$CC" ]; then
    CUDA_VISIBLE_DEVICES="" "$PY" -m kernelrt.cli cache warm --cc "$CC" > "$WORK/warm.txt" 2>&1 \
      || { cat "$WORK/warm.txt"; fail "cache warm --cc $CC without a GPU"; }
    tail -n 1 "$WORK/warm.txt"
  fi
  "$PY" -m kernelrt.cli demo --json > "$KEEP/demo.json" || fail "demo"
  "$PY" - "$KEEP/demo.json" "${CC:+warmed}" <<'PY' || fail "demo kernels not loaded from the warmed cache"
import json, sys
d = json.load(open(sys.argv[1]))
print(json.dumps({k: d.get(k) for k in ("backend", "kernels", "checks")}, indent=1)[:3000])
statuses = (d.get("kernels") or {}).get("statuses", {})
if len(sys.argv) > 2 and sys.argv[2] and d["backend"]["name"] == "cuda" and set(statuses) != {"disk"}:
    sys.exit(f"kernels warmed without a GPU should all load from disk here (got {statuses})")
PY
fi

if want bench; then
  step "7/7 benchmarks"
  QUICK=${GPU_CHECK_QUICK:+--quick}
  ATTACH=()
  [ -f "$KEEP/gpu-tests.xml" ] && ATTACH+=(--attach "gpu_tests=$KEEP/gpu-tests.xml")
  [ -f "$KEEP/demo.json" ] && ATTACH+=(--attach "demo=$KEEP/demo.json")
  # MyoGen (Python >= 3.12) as the SFAP peer, CPU and CuPy paths, where this Python has it.
  if [ -z "${KERNELRT_MYOGEN_PYTHON:-}" ] && "$PY" -c "import myogen" >/dev/null 2>&1; then
    export KERNELRT_MYOGEN_PYTHON=$(command -v "$PY")
  fi
  touch "$WORK/before-bench"
  "$PY" -m kernelrt.cli bench all $QUICK --plot --out "$RESULTS" "${ATTACH[@]}" || fail "benchmarks"
fi

step "summary"
ls -la "$RESULTS" | tail -n 20
if [ -n "${OUT:-}" ]; then
  # this run's files only: its results and plots, the test log and the demo's report
  find "$RESULTS" -maxdepth 1 -type f -newer "$WORK/before-bench" -exec cp {} "$OUT"/ \; 2>/dev/null
  cp "$KEEP"/gpu-tests.txt "$KEEP"/demo.json "$OUT"/ 2>/dev/null
  echo "copied this run's results to \$OUT"
fi
if [ ${#FAILED[@]} -eq 0 ]; then echo "GPU check passed"; exit 0; fi
echo "GPU check FAILED: ${FAILED[*]}"; exit 1
