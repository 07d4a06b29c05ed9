"""The ``kernelrt`` command: ``info``, ``cache``, ``demo``, ``cohort`` and ``bench``.

Also run as ``python -m kernelrt`` (``__main__.py``); ``kernelrt --version`` prints the
version, and ``kernelrt`` alone (or ``kernelrt cache`` alone) its help. Every subcommand
prints for people by default and takes ``--json`` for scripts: then standard output is one
JSON document, and notices and bars go to standard error. Bad options are reported by
argparse with the usage line and exit status 2; a reader that closes standard output early
(``kernelrt cache list | head -1``) ends the command quietly with status 141 (``cli_common``).
"""

from __future__ import annotations

import argparse
import difflib
import json
import sys
import time

from . import __version__, config
from .bench_cli import add_bench_parser
from .cli_common import Parser, run_quietly_on_closed_stdout
from .compiler import compile_cuda_offline, load_kernels
from .cpu_backend import CPUBackend
from .cpu_threads import threading_layer_name
from .cuda_backend import CUDABackend
from .discovery import cpu_name, host_memory_info, nvml_memory, package_versions, probe
from .disk_cache import disk_cache_for
from .kernels import host_warmups, warm_specs
from .kernels.cohort_cli import add_cohort_parser
# the front end is the one part that uses the kernel library
from .kernels.demo import add_demo_parser, compile_notice, uncached_count
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
    if args.action is None:  # `kernelrt cache` alone: what it can do
        args.help_parser.print_help()
        return 0
    cache = disk_cache_for()
    if args.action == "list":
        return _cmd_cache_list(args, cache)
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
        return _cmd_cache_clear(args, cache)
    return _cmd_cache_warm(args, cache)


def _cmd_cache_list(args, cache) -> int:
    rows = cache.entries()
    if args.json:
        print(json.dumps([{"kernel": e.kernel, "target": e.target, "size": e.size, "age_seconds": round(e.age_seconds, 1),
                           "compile_seconds": e.compile_seconds, "key": e.key} for e in rows], indent=2))
        return 0
    if not rows:
        print(f"no cached kernels in {cache.directory}" + ("" if cache.enabled else f" (disabled: {cache.disabled_reason})"))
        return 0
    # Names in full, the columns as wide as the longest: each is what `cache clear --kernel` takes.
    name_w = max(len("kernel"), *(len(e.kernel) for e in rows))
    target_w = max(len("target"), *(len(e.target) for e in rows))
    print(f"{'kernel':{name_w}}  {'target':{target_w}}  {'size':>10}  {'age':>5}")
    for e in rows:
        print(f"{e.kernel:{name_w}}  {e.target:{target_w}}  {format_bytes(e.size):>10}  {_age(e.age_seconds):>5}")
    return 0


def _cmd_cache_clear(args, cache) -> int:
    names = sorted({e.kernel for e in cache.entries()}) if args.kernel else []
    n = cache.clear(args.kernel)
    if args.json:
        print(json.dumps({"directory": str(cache.directory), "kernel": args.kernel, "removed": n}, indent=2))
    else:
        what = f"entries of {args.kernel}" if args.kernel else "entries"
        print(f"removed {n} {what} from {cache.directory}")
    if args.kernel and n == 0 and args.kernel not in names:  # a typo, or a name cut short
        near = [name for name in names if args.kernel in name][:3] or difflib.get_close_matches(args.kernel, names, 3)
        print(f"kernelrt cache clear: no cached kernel is named {args.kernel!r}"
              + (f"; did you mean {' or '.join(near)}?" if near else "; `kernelrt cache list` prints their names"),
              file=sys.stderr)
        return 1
    return 0


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
    # (label, target prefix of its entries, specs, compile_one(kernel, signature) -> status)
    jobs = [("cpu" if be.name == "cpu" else f"cuda {be.compute_capability}",
             "cpu:" if be.name == "cpu" else "cuda:sm_{}{}".format(*be.compute_capability), specs[be.name],
             lambda kernel, sig, be=be: be.compile_kernel(kernel, sig).status) for be in backends]
    jobs += [(f"ptx sm_{cc[0]}{cc[1]}", f"cuda:sm_{cc[0]}{cc[1]}", specs["cuda"],  # offline: (status, ptx)
              lambda kernel, sig, cc=cc: compile_cuda_offline(kernel, kernel.parse_signature(sig), cc, cache)[0])
             for cc in args.cc or []]
    missing = sum(uncached_count(entries, cache, prefix) for _, prefix, entries, _ in jobs)
    if missing:
        print(compile_notice(missing, cache), file=sys.stderr, flush=True)
    if not args.json:
        print(f"warming {cache.directory}", flush=True)
    results = []
    for where, _, entries, compile_one in jobs:
        for kernel, status, seconds in load_kernels(entries, compile_one):
            results.append({"kernel": kernel.qualname, "target": where, "status": status, "seconds": round(seconds, 3)})
            if not args.json:
                print(f"  {kernel.name + ' [' + where + ']':60} {status:9} {seconds:6.2f} s", flush=True)
    hosts = _warm_host_functions(cache, args.json)
    statuses = [r["status"] for r in results]
    counts = {"compiled": statuses.count("compiled"), "unsupported": statuses.count("unsupported")}
    counts["cached"] = len(results) - counts["compiled"] - counts["unsupported"]
    if args.json:
        print(json.dumps({"directory": str(cache.directory), "kernels": results, "host_functions": hosts, **counts},
                         indent=2))
        return 0
    print(f"{len(results)} kernels: {counts['compiled']} compiled, {counts['cached']} already cached"
          + (f", {counts['unsupported']} not supported by this GPU" if counts["unsupported"] else ""))
    return 0


def _warm_host_functions(cache, as_json: bool) -> list:
    # the kernel library's kernelrt.njit functions, compiled by a small run each (kernels.host_warmups)
    out = []
    for name, run in host_warmups():
        misses, hits, t0 = cache.stats.misses, cache.stats.hits, time.perf_counter()
        run()
        status = "compiled" if cache.stats.misses > misses else "disk" if cache.stats.hits > hits else "memory"
        out.append({"name": name, "status": status, "seconds": round(time.perf_counter() - t0, 3)})
        if not as_json:
            print(f"  {name + ' [cpu host functions]':60} {status:9} {out[-1]['seconds']:6.2f} s", flush=True)
    return out


# -- parser -----------------------------------------------------------------------------------


EXAMPLES = """\
examples:
  kernelrt info                 backends, devices, versions; why CUDA is unavailable
  kernelrt demo --small         both kernel families, checked and timed, in seconds
  kernelrt cache list           the compiled kernels in the disk cache
  kernelrt info --json | python -m json.tool

'kernelrt COMMAND --help' prints a command's options.
"""

CACHE_ACTIONS = {
    "list": "one line per entry: the kernel's full name, its target, size and age",
    "stats": "entries and size; hits, misses and seconds saved over all processes",
    "clear": "remove every entry, or with --kernel one kernel's (status 1 if it names none)",
    "warm": "compile (or load) every built-in kernel for this machine's CPU and GPU",
}


def build_parser() -> argparse.ArgumentParser:
    parser = Parser(prog="kernelrt", description="kernelrt: custom kernels on CUDA and CPU",
                    epilog=EXAMPLES, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--version", action="version", version=f"kernelrt {__version__}",
                        help="print the version and exit")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND", title="commands")

    text = "backends, devices, versions and the cache directory"
    p = sub.add_parser("info", help=text, description=f"kernelrt info: {text}; when CUDA is unavailable, why and the fix")
    p.add_argument("--json", action="store_true", help="print the same as one JSON document")
    p.set_defaults(func=_cmd_info)

    p = sub.add_parser("cache", help="list, count, clear or fill the compiled-kernel cache",
                       description="kernelrt cache: the compiled-kernel cache of this user and kernelrt\n"
                                   "version (KERNELRT_CACHE_DIR moves it).",
                       epilog="actions:\n" + "".join(f"  {a:7} {t}\n" for a, t in CACHE_ACTIONS.items()),
                       formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("action", nargs="?", choices=list(CACHE_ACTIONS), metavar="ACTION",
                   help=f"{', '.join(CACHE_ACTIONS)} (below); none: this help")
    p.add_argument("--kernel", metavar="NAME",
                   help="clear: only the entries of this kernel, its full name as 'cache list' prints it")
    p.add_argument("--cc", type=_parse_ccs, metavar="LIST",
                   help="warm: also build CUDA code for these compute capabilities, e.g. 80,90 (no GPU needed)")
    p.add_argument("--json", action="store_true",
                   help="print one JSON document: list's entries, stats' counters, clear's count, warm's kernels")
    p.set_defaults(func=_cmd_cache, help_parser=p)

    add_demo_parser(sub)
    add_cohort_parser(sub)
    add_bench_parser(sub)
    return parser


def main(argv=None) -> int:
    """The ``kernelrt`` command; returns its exit status (0 done, 1 failed, 2 bad usage, 141 stdout closed)."""
    return run_quietly_on_closed_stdout(lambda: _run(argv))


def _run(argv) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    if args.command is None:  # `kernelrt` alone: the commands and examples, not an error
        parser.print_help()
        return 0
    if args.command == "cache" and args.kernel and args.action != "clear":
        parser.error("--kernel applies to 'cache clear' only")
    if args.command == "cache" and args.cc and args.action != "warm":
        parser.error("--cc applies to 'cache warm' only")
    if args.command == "cohort" and not args.meshes and args.subjects_dir is None and config.freesurfer_subjects_dir():
        # FreeSurfer's own setting, as its tools read it (only config reads the environment)
        from pathlib import Path

        args.subjects_dir = Path(config.freesurfer_subjects_dir())
        print(f"kernelrt cohort: --subjects-dir {args.subjects_dir} (from SUBJECTS_DIR)", file=sys.stderr)
    return int(args.func(args) or 0)


if __name__ == "__main__":
    sys.exit(main())
