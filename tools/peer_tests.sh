#!/usr/bin/env bash
# The peer layer: kernelrt inside MyoGen 0.12 and SpectralBrain 0.1, in a Python 3.12 venv.
#
# MyoGen 0.12 ships only a cp312 wheel, so its integration is tested in its own venv:
#
#   tools/peer_tests.sh [--venv DIR] [--suites] [--myogen-tests PATH]
#
# 1. finds a Python 3.12 ($KERNELRT_PYTHON312, python3.12 on PATH, or pyenv's 3.12.x);
#    exits 3 with a message when there is none (`--find-python` only prints it);
# 2. creates or updates the venv (default .venv312) with kernelrt[test,bench,myogen,spectralbrain] (bench: libigl, the third Laplacian);
# 3. runs kernelrt's own peer tests, tests/peers/ (parity with MyoGen and SpectralBrain,
#    MyoGen's joblib workers, the environment variables);
# 4. with --suites: the peers' own test suites without and with the integration
#    (tools/peer_tests.py): SpectralBrain's from its PyPI sdist, MyoGen's from a checkout
#    of its repository given with --myogen-tests (its wheel ships no tests).
set -euo pipefail
cd "$(dirname "$0")/.."

venv=.venv312
suites=0
myogen_tests=""
find_only=0
while [ $# -gt 0 ]; do
  case "$1" in
    --venv) venv="$2"; shift 2 ;;
    --suites) suites=1; shift ;;
    --myogen-tests) myogen_tests="$2"; shift 2 ;;
    --find-python) find_only=1; shift ;;
    *) echo "usage: $0 [--venv DIR] [--suites] [--myogen-tests PATH] [--find-python]" >&2; exit 2 ;;
  esac
done

find_python312() {
  local root
  root=$(pyenv root 2>/dev/null || true)
  for c in "${KERNELRT_PYTHON312:-}" python3.12 ${root:+"$root"/versions/3.12*/bin/python3.12}; do
    if [ -n "$c" ] && "$c" -c 'import sys; assert sys.version_info[:2] == (3, 12)' 2>/dev/null; then
      command -v "$c" 2>/dev/null || echo "$c"
      return 0
    fi
  done
  return 1
}

if ! python312=$(find_python312); then
  echo "no Python 3.12 found (set KERNELRT_PYTHON312): MyoGen 0.12 needs one; peer layer not run" >&2
  exit 3
fi
if [ "$find_only" = 1 ]; then
  echo "$python312"
  exit 0
fi

[ -x "$venv/bin/python" ] || "$python312" -m venv "$venv"
"$venv/bin/python" -m pip install --quiet --upgrade pip
"$venv/bin/python" -m pip install --quiet -e ".[test,bench,myogen,spectralbrain]"

"$venv/bin/python" -m pytest -q -p no:cacheprovider tests/peers

if [ "$suites" = 1 ]; then
  "$venv/bin/python" tools/peer_tests.py spectralbrain
  if [ -n "$myogen_tests" ]; then
    "$venv/bin/python" tools/peer_tests.py myogen --tests "$myogen_tests"
  fi
fi
