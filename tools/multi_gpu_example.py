"""Multi-GPU with kernelrt: one backend per device, each driven from its own thread.

Every operation of a CUDABackend (allocate, copy, compile, launch, synchronize) enters
its own device and restores the previous one, so the threads never fight over the
"current device". On a machine with one GPU (or none) the script still runs: it uses
the devices it finds, or the CPU backend.

    python tools/multi_gpu_example.py [--n 10000000]
"""

import argparse
import threading
import time

import numpy as np

import kernelrt


@kernelrt.kernel
def scaled_sum(i, out, x, y, a):
    if i < out.shape[0]:
        out[i] = a * x[i] + y[i]


def work(backend, x, y, a, results, slot):
    """Copy in, launch, copy out: all on ``backend``'s own device."""
    t0 = time.perf_counter()
    dx, dy = backend.to_device(x), backend.to_device(y)
    out = backend.zeros(x.shape, x.dtype)
    block = 256
    backend.launch_kernel(scaled_sum, (x.size + block - 1) // block, block, out, dx, dy, a)
    backend.synchronize()
    results[slot] = (backend.to_host(out), time.perf_counter() - t0)


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--n", type=int, default=10_000_000, help="elements per device")
    args = parser.parse_args()

    avail = kernelrt.CUDABackend.availability()
    if avail.ok:
        backends = [kernelrt.CUDABackend(device_id=d.id) for d in avail.devices]
    else:
        print(f"CUDA unavailable ({avail.reason}); running on the CPU backend")
        backends = [kernelrt.CPUBackend()]

    rng = np.random.default_rng(0)
    chunks = [(rng.random(args.n), rng.random(args.n)) for _ in backends]
    results = [None] * len(backends)
    threads = [
        threading.Thread(target=work, args=(b, x, y, 2.0, results, i))
        for i, (b, (x, y)) in enumerate(zip(backends, chunks))
    ]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    for b, (x, y), (out, seconds) in zip(backends, chunks, results):
        ok = np.array_equal(out, 2.0 * x + y)
        print(f"{b}: {args.n:,} elements in {seconds * 1e3:.1f} ms, correct: {ok}")


if __name__ == "__main__":
    main()
