#!/usr/bin/env bash
# GPU check: the steps of a GPU sitting, one command line each, every step under 9 minutes.
#
#   bash tools/fetch_gpu_wheels.sh                   # where there is internet: wheels into .whl/
#   bash tools/gpu_check.sh deps tests demo          # sitting call 1 (~6 min)
#   bash tools/gpu_check.sh deps probe               # sitting call 2 (~6-7 min)
#   bash tools/gpu_check.sh deps ncu                 # sitting call 3 (~4-6 min)
#   bash tools/gpu_check.sh deps bench               # a later sitting: the pytest-benchmark suites
#   bash tools/gpu_check.sh deps variants            # the kernel variants side by side, then ncu on them
#   bash tools/gpu_check.sh deps sweep e2e           # the eigen route's settings side by side, then
#                                                    # eigenpairs end to end, repeated
#   bash tools/gpu_check.sh --help
#
# Steps (positional words, run in the order given; none given: deps tests demo):
#   deps   install the carried wheels (.whl/) and kernelrt from this checkout into $SITE, no
#          network; later steps of the same call reuse it (a stamp skips a second install)
#   tests  pytest tests/gpu                                  -> $OUT/gpu-tests.txt
#   demo   warm a cache in a process that sees no GPU (kernelrt cache warm --cc XY), then
#          kernelrt demo from it; every kernel must load from disk -> $OUT/demo.json
#   probe  python3 bench/gpu_probe.py --budget 330 --out $OUT  (JSON, plot, short table last);
#          PROBE_BUDGET replaces 330, PROBE_ARGS adds options ("--section anchors --anchor-cap 60")
#   ncu    Nsight Compute on the named kernels of `gpu_probe.py --ncu` (GPU_PLAN §5.4), then the
#          CSV views and a text summary -> $OUT/kernels.ncu-rep, ncu_raw.csv, ncu_summary.txt
#   bench  kernelrt bench all --plot -> one tarball of this run's results in $OUT
#   variants  python3 bench/gpu_probe.py --variant all (each kernel variant against its default,
#          JSON and plot), bench/sfap_variants_e2e.py (compute_sfaps under each SFAP pair),
#          then ncu on `--ncu --variant all`, defaults and variants
#          -> $OUT/variants.ncu-rep, variants_raw.csv, variants_summary.txt
#   sweep  python3 bench/chebyshev_sweep.py --budget $SWEEP_BUDGET (default 150): the eigen route's
#          block widths, degree caps and tolerances at 163,842 and 655,362 vertices
#          -> $OUT/chebyshev-sweep.json
#   e2e    python3 bench/eigen_e2e.py: eigenpairs as a user calls it, each case repeated in one
#          process (163,842 vertices k = 50/100, 655,362 k = 100) -> $OUT/eigen-e2e.json
#
# Each step runs under `timeout` (STEP_TIMEOUT seconds, default 530), so a call of several
# steps is bounded by the sum; a step that fails or times out is reported and the others run.
# $OUT (the device tool's folder) gets only this run's files, at most 8: the logs of every step
# are appended to $OUT/gpu-check.log. Without $OUT, files go to bench/results/tmp/.
#
# Environment: PYTHON (default python3), KERNELRT_SITE (default /tmp/kernelrt-site),
# KERNELRT_WHEELS (the wheels' folder, default .whl),
# STEP_TIMEOUT, GPU_CHECK_QUICK=1 (small sizes in probe and bench), GPU_CHECK_ALLOW_CPU=1 (run
# the steps even without a usable GPU: a dry run of this script, GPU tests then skip).
set -uo pipefail
cd "$(dirname "$0")/.."

STEPS_KNOWN=" deps tests demo probe ncu bench variants sweep e2e "
usage() { sed -n '2,/^set -uo/p' "$0" | sed '$d' | sed 's/^# \{0,1\}//'; }
case "${1:-}" in -h|--help) usage; exit 0 ;; esac
for s in "$@"; do
  [[ "$STEPS_KNOWN" == *" $s "* ]] || { echo "gpu_check.sh: unknown step '$s' (steps: $STEPS_KNOWN)" >&2; exit 2; }
done
STEPS=" ${*:-deps tests demo} "
want() { [[ "$STEPS" == *" $1 "* ]]; }

# Python puts the working directory first on sys.path for `-c` and `-m`; here that is the
# source tree, whose kernelrt/ lacks kernelrt.kernels. Import the installed copy instead.
export PYTHONSAFEPATH=1 KERNELRT_REPO="$PWD" PYTHONUNBUFFERED=1
PY=${PYTHON:-python3}
SITE=${KERNELRT_SITE:-/tmp/kernelrt-site}
WHEELS=${KERNELRT_WHEELS:-.whl}
STEP_TIMEOUT=${STEP_TIMEOUT:-530}
KEEP=bench/results/tmp
DEST=${OUT:-$KEEP}
WORK=$(mktemp -d)
mkdir -p "$KEEP" "$DEST"
LOG="$DEST/gpu-check.log"
export PYTHONPATH="$SITE:$PWD:${PYTHONPATH:-}"
export KERNELRT_CACHE_DIR=${KERNELRT_CACHE_DIR:-$WORK/cache}
FAILED=()
say() { printf '\n==== [%s] %s ====\n' "$(date +%H:%M:%S)" "$*" | tee -a "$LOG"; }
fail() { echo "!! $*" | tee -a "$LOG"; FAILED+=("$*"); }
# run_step NAME FILE CMD...: the command under the step timeout; its stdout to FILE (or, with
# FILE "-", to the console and the log), its stderr to the console and the log
run_step() {
  local name=$1 file=$2 rc; shift 2
  if [ "$file" = "-" ]; then
    timeout --kill-after=20 "$STEP_TIMEOUT" "$@" 2>&1 | tee -a "$LOG"; rc=${PIPESTATUS[0]}
  else
    timeout --kill-after=20 "$STEP_TIMEOUT" "$@" > "$file" 2> >(tee -a "$LOG" >&2); rc=$?
  fi
  if [ "$rc" -eq 124 ] || [ "$rc" -eq 137 ]; then fail "$name: timed out after ${STEP_TIMEOUT}s"
  elif [ "$rc" -ne 0 ]; then fail "$name (exit $rc)"; fi
  return "$rc"
}

say "machine"
{ "$PY" --version; git rev-parse --short HEAD 2>/dev/null || echo "(not a git checkout)"
  nvidia-smi --query-gpu=index,name,driver_version,memory.total,compute_cap --format=csv 2>/dev/null \
    || echo "nvidia-smi: not available"; } 2>&1 | tee -a "$LOG"

install_deps() {
  mkdir -p "$SITE"
  local stamp="$SITE/.kernelrt-stamp" want_stamp
  want_stamp="$(git rev-parse HEAD 2>/dev/null) $(git status --porcelain 2>/dev/null | md5sum | cut -c1-8) $(ls "$WHEELS"/*.whl 2>/dev/null | md5sum | cut -c1-8)"
  if [ -f "$stamp" ] && [ "$(cat "$stamp")" = "$want_stamp" ]; then echo "deps: already installed in $SITE"; return 0; fi
  if ls "$WHEELS"/*.whl >/dev/null 2>&1; then
    "$PY" -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target "$SITE" "$WHEELS"/*.whl \
      || { echo "installing the wheels in $WHEELS/ failed"; return 1; }
    echo "installed $(ls "$WHEELS"/*.whl | wc -l) wheels into $SITE ($(du -sh "$WHEELS" | cut -f1) carried)"
  else
    echo "no wheels in $WHEELS/: using what $PY already has (run tools/fetch_gpu_wheels.sh where there is internet)"
  fi
  # Copy the two import packages into place (kernels/ is installed as kernelrt.kernels):
  # no build backend and no network needed.
  rm -rf "$SITE/kernelrt" && cp -r kernelrt "$SITE/kernelrt" && rm -rf "$SITE/kernelrt/kernels" \
    && cp -r kernels "$SITE/kernelrt/kernels" || return 1
  "$PY" -c "import kernelrt, kernelrt.kernels, numba, numba.cuda, diskcache, psutil; from filelock import lock_descriptor; print('imports ok:', kernelrt.__file__)" \
    || { echo "kernelrt does not import"; return 1; }
  echo "$want_stamp" > "$stamp"
}

if want deps || [ ! -f "$SITE/.kernelrt-stamp" ]; then
  say "deps: wheels from $WHEELS/ and kernelrt from this checkout into $SITE (offline)"
  install_deps 2>&1 | tee -a "$LOG"
  [ "${PIPESTATUS[0]}" -eq 0 ] || { fail "deps"; echo "GPU check FAILED: deps"; exit 1; }
fi

say "kernelrt info"
"$PY" -m kernelrt.cli info 2>&1 | tee -a "$LOG" || fail "kernelrt info"
if ! "$PY" -c "import sys, kernelrt; a = kernelrt.CUDABackend.availability(); print('cuda:', a.reason); sys.exit(a.code != 'ok')" 2>&1 | tee -a "$LOG"; then
  if [ -z "${GPU_CHECK_ALLOW_CPU:-}" ]; then echo "no usable GPU: stopping (GPU_CHECK_ALLOW_CPU=1 runs the steps anyway)"; exit 1; fi
  echo "no usable GPU: continuing because GPU_CHECK_ALLOW_CPU is set (GPU tests will skip)" | tee -a "$LOG"
fi
QUICK=${GPU_CHECK_QUICK:+--quick}

if want tests; then
  say "tests: pytest tests/gpu"
  # tests/ is a package, so pytest's default import mode puts the checkout first on sys.path,
  # where kernelrt/ has no kernels/ (it is installed as kernelrt.kernels in $SITE): append it.
  run_step tests "$KEEP/gpu-tests.txt" "$PY" -m pytest -q -p no:cacheprovider --import-mode=append tests/gpu \
    --junitxml="$KEEP/gpu-tests.xml"
  tail -n 30 "$KEEP/gpu-tests.txt" | tee -a "$LOG"
  cp "$KEEP/gpu-tests.txt" "$DEST/" 2>/dev/null || true
fi

if want demo; then
  say "demo: from a cache warmed by a process that sees no GPU"
  CC=$(nvidia-smi --query-gpu=compute_cap --format=csv,noheader 2>/dev/null | head -n 1 | tr -d ' .')
  if [ -n "$CC" ]; then
    CUDA_VISIBLE_DEVICES="" run_step "cache warm --cc $CC without a GPU" "$WORK/warm.txt" "$PY" -m kernelrt.cli cache warm --cc "$CC"
    tail -n 1 "$WORK/warm.txt"
  fi
  run_step demo "$KEEP/demo.json" "$PY" -m kernelrt.cli demo --json
  cp "$KEEP/demo.json" "$DEST/" 2>/dev/null || true
  "$PY" - "$KEEP/demo.json" "${CC:+warmed}" <<'PY' 2>&1 | tee -a "$LOG" || fail "demo kernels not loaded from the warmed cache"
import json, sys
d = json.load(open(sys.argv[1]))
print(json.dumps({k: d.get(k) for k in ("backend", "kernels", "checks")}, indent=1)[:3000])
statuses = (d.get("kernels") or {}).get("statuses", {})
if len(sys.argv) > 2 and sys.argv[2] and d["backend"]["name"] == "cuda" and set(statuses) != {"disk"}:
    sys.exit(f"kernels warmed without a GPU should all load from disk here (got {statuses})")
PY
fi

if want probe; then
  say "probe: bench/gpu_probe.py --budget 330"
  # PROBE_ARGS: more probe options, split on spaces (e.g. "--section anchors,eigen --anchor-cap 60")
  # shellcheck disable=SC2086
  run_step probe - "$PY" bench/gpu_probe.py --budget "${PROBE_BUDGET:-330}" --out "$DEST" $QUICK ${PROBE_ARGS:-}
fi

# ncu_step NAME [probe args]: Nsight Compute on the kernels `gpu_probe.py --ncu [args]` launches,
# then the CSV view and a text summary -> $DEST/NAME.ncu-rep, NAME_raw.csv, NAME_summary.txt
ncu_step() {
  local name=$1; shift
  if ! command -v ncu >/dev/null; then fail "ncu: not installed"; return; fi
  # numba mangles the names, so match on a regex (the variants' names extend the defaults')
  K='sfap_columns|sfap_delay|sfap_response|sfap_muap|row_values|face_values_atomic|csr_matvec|csr_matmat|cheb_step|heat_step|sell_mat|sell_cheb'
  M=gpu__time_duration.sum,dram__bytes_read.sum,dram__bytes_write.sum,lts__t_bytes.sum
  M=$M,sm__warps_active.avg.pct_of_peak_sustained_active,launch__registers_per_thread
  M=$M,launch__occupancy_limit_registers,launch__occupancy_limit_shared_mem
  M=$M,sm__pipe_fp64_cycles_active.avg.pct_of_peak_sustained_active,sm__inst_executed_pipe_fp64.sum
  M=$M,sm__inst_executed_pipe_lsu.avg.pct_of_peak_sustained_active
  M=$M,l1tex__data_pipe_lsu_wavefronts_mem_shared.sum,l1tex__t_sectors_pipe_lsu_mem_global_op_ld.sum
  M=$M,l1tex__t_requests_pipe_lsu_mem_global_op_ld.sum,smsp__thread_inst_executed_per_inst_executed.ratio
  run_step "$name" - ncu --target-processes all --clock-control none -k "regex:$K" --launch-count 40 \
    --section SpeedOfLight --section LaunchStats --section Occupancy --section MemoryWorkloadAnalysis \
    --section ComputeWorkloadAnalysis --section WarpStateStats --metrics "$M" \
    -o "$DEST/$name" --force-overwrite "$PY" bench/gpu_probe.py --ncu "$@"
  if [ -f "$DEST/$name.ncu-rep" ]; then
    ncu --import "$DEST/$name.ncu-rep" --csv --page raw > "$DEST/${name/kernels/ncu}_raw.csv" 2>>"$LOG" \
      || fail "ncu --import raw"
    "$PY" tools/ncu_summary.py "$DEST/${name/kernels/ncu}_raw.csv" 2>&1 | tee "$DEST/${name/kernels/ncu}_summary.txt" \
      | tee -a "$LOG" || fail "ncu summary"
  fi
}

if want ncu; then
  say "ncu: the named kernels of gpu_probe.py --ncu"
  ncu_step kernels
fi

if want variants; then
  say "variants: bench/gpu_probe.py --variant all, then ncu on defaults and variants"
  run_step variants - "$PY" bench/gpu_probe.py --variant all --budget "${PROBE_BUDGET:-330}" --out "$DEST" $QUICK
  # kernel-only wins need not survive end to end (the tiled columns did not on the 2026-11-27 H200)
  run_step "variants e2e" - "$PY" bench/sfap_variants_e2e.py --backend auto --out "$DEST/sfap-variants-e2e.json" $QUICK
  ncu_step variants --variant all
fi

if want sweep; then
  say "sweep: bench/chebyshev_sweep.py --budget ${SWEEP_BUDGET:-150}"
  run_step sweep - "$PY" bench/chebyshev_sweep.py --budget "${SWEEP_BUDGET:-150}" --backend auto \
    --out "$DEST/chebyshev-sweep.json" $QUICK
fi

if want e2e; then
  say "e2e: bench/eigen_e2e.py"
  run_step e2e - "$PY" bench/eigen_e2e.py --backend auto --out "$DEST/eigen-e2e.json" $QUICK
fi

if want bench; then
  say "bench: kernelrt bench all"
  ATTACH=()
  [ -f "$KEEP/gpu-tests.xml" ] && ATTACH+=(--attach "gpu_tests=$KEEP/gpu-tests.xml")
  [ -f "$KEEP/demo.json" ] && ATTACH+=(--attach "demo=$KEEP/demo.json")
  # MyoGen (Python >= 3.12) as the SFAP peer, CPU and CuPy paths, where this Python has it.
  if [ -z "${KERNELRT_MYOGEN_PYTHON:-}" ] && "$PY" -c "import myogen" >/dev/null 2>&1; then
    export KERNELRT_MYOGEN_PYTHON=$(command -v "$PY")
  fi
  mkdir -p "$WORK/bench"
  run_step bench - "$PY" -m kernelrt.cli bench all $QUICK --plot --out "$WORK/bench" "${ATTACH[@]}"
  # one file for $OUT (the device tool returns at most 8), and a copy kept in bench/results
  cp "$WORK"/bench/* bench/results/ 2>/dev/null || true
  tar -czf "$DEST/bench-results.tar.gz" -C "$WORK/bench" . 2>/dev/null || true
fi

say "summary"
ls -la "$DEST" | tee -a "$LOG"
if [ ${#FAILED[@]} -eq 0 ]; then echo "GPU check passed: $STEPS" | tee -a "$LOG"; exit 0; fi
echo "GPU check FAILED: ${FAILED[*]}" | tee -a "$LOG"; exit 1
