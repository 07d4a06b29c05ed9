"""Helpers shared by the benchmark suites (kept out of conftest, whose name is not unique)."""

import os

QUICK = os.environ.get("KERNELRT_BENCH_QUICK", "") not in ("", "0")


def tag(benchmark, group, role, peer=None, **info):
    """Label a benchmark for ``kernelrt bench``: its case (group), kernelrt or a peer, extras.

    Plots use ``figure``, ``x`` and ``x_label`` (and ``bytes``/``peak_bandwidth`` for
    bandwidth) from ``info``; see kernelrt/bench_cli.py.
    """
    benchmark.group = group
    benchmark.extra_info.update(role=role, peer=peer, **info)


def vm_hwm(pid="self") -> int:
    """A process's peak resident size in bytes (``VmHWM`` in /proc/<pid>/status, Linux)."""
    with open(f"/proc/{pid}/status") as f:
        return next(int(line.split()[1]) * 1024 for line in f if line.startswith("VmHWM:"))


def peak_rss(run) -> dict:
    """Call ``run()`` and measure its peak RSS above the RSS just before it (this process).

    On Linux >= 4.0 the high-water mark is reset first (``/proc/self/clear_refs``), so what
    was built before the call does not count; elsewhere ``ru_maxrss`` covers the whole
    process and is too high if building the inputs peaked higher. Run it in a fresh
    process (``fresh_process``): a warm one holds freed memory and earlier peaks.
    """
    import gc
    import resource

    gc.collect()
    with open("/proc/self/statm") as f:  # resident pages now
        baseline = int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")
    try:
        with open("/proc/self/clear_refs", "w") as f:
            f.write("5")
        reset = True
    except OSError:
        reset = False
    run()
    if reset:
        peak = vm_hwm()
    else:  # KiB on Linux
        peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024
    return {"peak_bytes": max(peak - baseline, 0), "baseline_bytes": baseline, "hwm_reset": reset}


def fresh_process(script: str, *args, env=None, timeout: float = 3600) -> dict:
    """``python script --rss *args`` in a new process; its last stdout line, as JSON.

    A failure is recorded (``peak_bytes`` None and the error's last line), never raised.
    """
    import json
    import subprocess
    import sys

    cmd = [sys.executable, os.path.abspath(script), "--rss", *map(str, args)]
    out = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout, check=False, env=env)
    if out.returncode != 0:
        return {"peak_bytes": None, "peak_error": out.stderr.strip().splitlines()[-1:]}
    return json.loads(out.stdout.strip().splitlines()[-1])
