"""Per-loop cost of numba's threading layers on this machine, idle and with a busy core.

Each layer runs in its own process (numba picks the layer once per process): a small
``prange`` loop is called 3,000 times and the median, p99 and max call times are printed.
kernelrt uses TBB (kernelrt/cpu_threads.py); this script is the measurement behind it.

    python tools/threading_layers.py
"""

import subprocess
import sys

PROBE = r"""
import sys, time
import numpy as np
from kernelrt.cpu_threads import prepare_threading_layer
prepare_threading_layer()
import numba
numba.config.THREADING_LAYER = sys.argv[1]

@numba.njit(parallel=True)
def loop(a):
    for i in numba.prange(a.shape[0]):
        a[i] += 1.0

a = np.zeros(1024)
loop(a)
ts = []
for _ in range(3000):
    t = time.perf_counter(); loop(a); ts.append(time.perf_counter() - t)
ts = np.array(ts) * 1e6
print(f"{numba.threading_layer():9} median {np.median(ts):7.1f} us  p99 {np.percentile(ts, 99):8.1f} us  max {ts.max():8.1f} us")
"""


def measure(label):
    print(label)
    for layer in ("tbb", "omp", "workqueue"):
        res = subprocess.run([sys.executable, "-c", PROBE, layer], capture_output=True, text=True)
        print("  " + (res.stdout.strip() or f"{layer}: unavailable ({res.stderr.strip().splitlines()[-1]})"))


if __name__ == "__main__":
    measure("idle machine:")
    busy = subprocess.Popen([sys.executable, "-c", "while True: pass"])
    try:
        measure("one core busy with another process:")
    finally:
        busy.kill()
