"""The ``kernelrt`` command: ``info``, ``cache``, ``demo``, ``cohort`` and ``bench``.

Also run as ``python -m kernelrt`` (``__main__.py``); ``kernelrt --version`` prints the
version. Every subcommand prints for people by default and takes ``--json`` for scripts.
Bad options are reported by argparse with the usage line and exit status 2.
"""

from __future__ import annotations

import argparse
import json
import sys

from . import __version__
from .bench_cli import add_bench_parser
from .compiler import compile_cuda_offline, load_kernels
from .cpu_backend import CPUBackend
from .cpu_threads import threading_layer_name
from .cuda_backend import CUDABackend
from .discovery import cpu_name, host_memory_info, nvml_memory, package_versions, probe
from .disk_cache import disk_cache_for
from .kernels import warm_specs
from .kernels.cohort_cli import add_cohort_parser
from .kernels.demo import add_demo_parser  # the front end is the one part that uses the kernel library
from .memory import format_bytes

__all__ = ["main", "build_parser"]


def info_report() -> dict:
    """Everything ``kernelrt info`` shows, as a dict."""
    facts = probe()
    avail = CUDABackend.availability()
    cache = disk_cache_for()
    free, total = host_memory_info()
    return {
        "backends": {
            "cpu": {"available": True, "device": cpu_name(), "threading_layer": threading_layer_name(),
                    "host_memory_free": free, "host_memory_total": total},
            "cuda": {"available": avail.ok, "code": avail.code, "reason": avail.reason, "fix": avail.fix},
        },
        "devices": [
            {
                "id": d.id,
                "name": d.name,
                "compute_capability": ".".join(map(str, d.compute_capability)),
                "total_memory": d.total_memory,
                "free_memory": nvml_memory(d.uuid)[0],  # NVML: no CUDA context for a report
                "uuid": d.uuid,
            }
            for d in facts.devices
        ],
        "driver_version": _dotted(facts.driver_version),
        "cuda_runtime_version": _dotted(facts.runtime_version),
        "nvvm_version": _dotted(facts.nvvm_version),
        "versions": package_versions(),
        "cache": {
            "directory": str(cache.directory),
            "enabled": cache.enabled,
            "disabled_reason": cache.disabled_reason,
            "entries": len(cache.entries()),
            "bytes": cache.volume(),
        },
    }


def _dotted(v):
    return ".".join(map(str, v)) if v else None


def _cmd_info(args) -> int:
    r = info_report()
    if args.json:
        print(json.dumps(r, indent=2))
        return 0
    cpu, cuda = r["backends"]["cpu"], r["backends"]["cuda"]
    print("kernelrt", r["versions"].get("kernelrt", "?"))
    print(f"cpu backend:  available on {cpu['device']} (numba threading layer: {cpu['threading_layer']}, "
          f"{format_bytes(cpu['host_memory_free'])} free of {format_bytes(cpu['host_memory_total'])})")
    state = "available" if cuda["available"] else "unavailable"
    print(f"cuda backend: {state}: {cuda['reason']}")
    for d in r["devices"]:
        mem = f", {format_bytes(d['total_memory'])}" if d["total_memory"] else ""
        free = f" ({format_bytes(d['free_memory'])} free)" if d["free_memory"] else ""
        print(f"  device {d['id']}: {d['name']}, cc {d['compute_capability']}{mem}{free}")
    print(f"driver: {r['driver_version'] or 'none'}; CUDA runtime: {r['cuda_runtime_version'] or 'none'}; "
          f"NVVM: {r['nvvm_version'] or 'none'}")
    print("versions: " + ", ".join(f"{k} {v}" for k, v in r["versions"].items()))
    c = r["cache"]
    status = f"{c['entries']} entries, {format_bytes(c['bytes'])}" if c["enabled"] else f"disabled: {c['disabled_reason']}"
    print(f"cache: {c['directory']} ({status})")
    return 0


# -- cache ------------------------------------------------------------------------------


def _cmd_cache(args) -> int:
    cache = disk_cache_for()
    if args.action == "list":
        rows = cache.entries()
        if args.json:
            print(json.dumps([{"kernel": e.kernel, "target": e.target, "size": e.size, "age_seconds": round(e.age_seconds, 1),
                               "compile_seconds": e.compile_seconds, "key": e.key} for e in rows], indent=2))
            return 0
        if not rows:
            print(f"no cached kernels in {cache.directory}")
            return 0
        print(f"{'kernel':48} {'target':34} {'size':>10} {'age':>8}")
        for e in rows:
            print(f"{e.kernel[-48:]:48} {e.target[:34]:34} {format_bytes(e.size):>10} {_age(e.age_seconds):>8}")
        return 0
    if args.action == "stats":
        totals = cache.totals().as_dict()
        out = {"directory": str(cache.directory), "enabled": cache.enabled, "disabled_reason": cache.disabled_reason,
               "entries": len(cache.entries()), "bytes": cache.volume(), "size_limit": cache.size_limit, "totals": totals}
        if args.json:
            print(json.dumps(out, indent=2))
        else:
            print(f"cache: {out['directory']}" + ("" if cache.enabled else f" (disabled: {cache.disabled_reason})"))
            print(f"entries: {out['entries']}, {format_bytes(out['bytes'])} of {format_bytes(out['size_limit'])}")
            print(f"all processes: {totals['hits']} hits, {totals['misses']} misses, {totals['rejected']} rejected entries, "
                  f"{totals['compile_seconds']:.1f} s compiling, {totals['seconds_saved']:.1f} s saved by hits")
        return 0
    if args.action == "clear":
        n = cache.clear(args.kernel)
        what = f"entries of {args.kernel}" if args.kernel else "entries"
        print(f"removed {n} {what} from {cache.directory}")
        return 0
    return _cmd_cache_warm(args, cache)


def _age(seconds: float) -> str:
    for unit, size in (("d", 86400), ("h", 3600), ("m", 60)):
        if seconds >= size:
            return f"{seconds / size:.0f}{unit}"
    return f"{seconds:.0f}s"


def _parse_ccs(text: str) -> list[tuple[int, int]]:
    ccs = []
    for part in text.split(","):
        part = part.strip().replace(".", "")
        if not part.isdigit() or len(part) < 2:
            raise argparse.ArgumentTypeError(f"--cc takes compute capabilities like 80,90 (got {text!r})")
        ccs.append((int(part[:-1]), int(part[-1])))
    return ccs


def _cmd_cache_warm(args, cache) -> int:
    specs = warm_specs()
    backends = [CPUBackend()]
    if CUDABackend.check_available():
        backends.append(CUDABackend())
    results = []

    def run(where, entries, compile_one):
        for kernel, status, seconds in load_kernels(entries, compile_one):
            results.append(status)
            print(f"  {kernel.name + ' [' + where + ']':60} {status:9} {seconds:6.2f} s", flush=True)

    print(f"warming {cache.directory}")
    for backend in backends:
        where = backend.name if backend.name == "cpu" else f"cuda {backend.compute_capability}"
        run(where, specs[backend.name], lambda kernel, sig, be=backend: be.compile_kernel(kernel, sig).status)
    for cc in args.cc or []:
        run(f"ptx sm_{cc[0]}{cc[1]}", specs["cuda"],  # offline: (status, ptx)
            lambda kernel, sig, cc=cc: compile_cuda_offline(kernel, kernel.parse_signature(sig), cc, cache)[0])
    compiled, unsupported = results.count("compiled"), results.count("unsupported")
    print(f"{len(results)} kernels: {compiled} compiled, {len(results) - compiled - unsupported} already cached"
          + (f", {unsupported} not supported by this GPU" if unsupported else ""))
    return 0


# -- parser -----------------------------------------------------------------------------------


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="kernelrt", description="kernelrt: custom kernels on CUDA and CPU")
    parser.add_argument("--version", action="version", version=f"kernelrt {__version__}")
    sub = parser.add_subparsers(dest="command", required=True)

    p = sub.add_parser("info", help="backends, devices, versions and the cache directory")
    p.add_argument("--json", action="store_true", help="print JSON")
    p.set_defaults(func=_cmd_info)

    p = sub.add_parser("cache", help="manage the compiled-kernel cache")
    p.add_argument("action", choices=["list", "stats", "clear", "warm"])
    p.add_argument("--kernel", help="clear: only the entries of this kernel (its qualified name)")
    p.add_argument("--cc", type=_parse_ccs, help="warm: also build PTX for these compute capabilities, e.g. 80,90")
    p.add_argument("--json", action="store_true", help="print JSON (list, stats)")
    p.set_defaults(func=_cmd_cache)

    add_demo_parser(sub)
    add_cohort_parser(sub)
    add_bench_parser(sub)
    return parser


def main(argv=None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    if args.command == "cache" and args.kernel and args.action != "clear":
        parser.error("--kernel applies to 'cache clear' only")
    if args.command == "cache" and args.cc and args.action != "warm":
        parser.error("--cc applies to 'cache warm' only")
    return int(args.func(args) or 0)


if __name__ == "__main__":
    sys.exit(main())
