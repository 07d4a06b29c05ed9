"""``kernelrt cohort``: the spectra of many subject surfaces from files, here or on Dask.

A front end over ``laplacian.cohort_spectra``: it finds the mesh files
(``mesh_files.find_meshes``, and ``freesurfer_surfaces`` for ``--subjects-dir``), names
the subjects (``mesh_files.subject_names``), runs them in
this process, on a ``LocalCluster`` it starts and stops (``--scheduler local:N``) or on a
running scheduler (``--scheduler ADDRESS``), and writes ``<out>/<name>.npz`` per subject
plus ``<out>/summary.csv``, one row per subject, failures included.

This module lives beside ``demo.py``, not in ``laplacian/``, because ``kernelrt --help``
imports it: the ``laplacian`` package imports numba (0.7 s), so it and Dask, meshio and
nibabel are imported only when the command runs.

The run holds an ``flock`` on ``<out>/.kernelrt-cohort.lock`` (a second run into the same
directory exits 2: cohort_outdir.py), removes the temporary files a killed run left, and
rebuilds ``summary.csv`` at the end from this run's subjects and the other ``.npz`` files
in ``<out>``; ``--resume`` keeps only files computed from the mesh file's present bytes.
A result that cannot be written (a full disk) stops the run: what is written stays,
summary.csv is still written, and the rest are failed rows.

Exit status: 0 when every subject succeeded, 1 when some failed or writing a result
failed (what was written stays; summary.csv says which), 2 for bad arguments, missing
paths, an unreadable mesh directory, an --out that cannot be written or that another run
holds, or a scheduler that cannot be reached (nothing ran).
"""

from __future__ import annotations

import argparse
import contextlib
import dataclasses
import json
import os
import sys
import time
from pathlib import Path

from .cohort_summary import SUMMARY_COLUMNS, format_table, summary_rows, write_summary
from .demo import positive_int

__all__ = ["SUMMARY_COLUMNS", "add_cohort_parser", "format_table", "summary_rows", "write_summary"]

# laplacian.cohort.DESCRIPTORS and mesh_files' names, spelled out: importing them would import numba for --help
DESCRIPTORS = ("hks", "wks")
SURFACES = ("pial", "white", "inflated", "sphere", "orig", "smoothwm", "midthickness", "sphere.reg")
HEMIS = {"lh": ("lh",), "rh": ("rh",), "both": ("lh", "rh")}
# local:N starts N processes here; a larger N is far more likely a mistyped address (local:8786)
MAX_LOCAL_WORKERS = 256

_HELP = """\
Each MESH is a mesh file (PLY, OBJ, OFF, VTK, VTU, STL, GIFTI, or a FreeSurfer surface
such as lh.pial) or a directory, whose mesh files are taken (not its subdirectories).
--subjects-dir SUBJECTS takes SUBJECTS/<subject>/surf/<hemi>.<surf> of every subject (a
subdirectory holding surf/ or mri/), for --hemi and --surf; a missing surface is a failed
subject, not an error. A subject's arrays go to DIR/<name>.npz and every subject, failed
ones included, gets a row in DIR/summary.csv.

Names: a file in a subject's surf/ directory is <subject>_<hemi>.<surf> (bert_lh.pial);
others are named after their files (sub-01.ply -> sub-01); names that would collide get
their parent directories' names (a/lh.pial, b/lh.pial -> a_lh.pial, b_lh.pial).

Files: evals (k,) float64; with --keep-evecs evecs (N, k); hks (N, T) and wks (N, E) with
their grids hks_times, wks_energies (float64). --dtype float32 stores evecs, hks and wks
in float32 (half the bytes; computed in float64); --compress deflates each file. --resume
keeps files of the same --dtype, compressed or not.

Files are passed to the tasks as absolute paths and read where each task runs: with a
remote --scheduler, every worker must see them at the same paths (a shared filesystem).

A dangling symbolic link (or a loop of links) named like a mesh in a directory is a
failed subject, not skipped. One run at a time per DIR: a second exits 2 naming the first's
pid. summary.csv lists this run's subjects, then the other <name>.npz already in DIR.

Exit status: 0 all subjects written, 1 some failed or a result could not be written (the
others are written; summary.csv says which), 2 bad arguments, missing or unreadable
paths, a DIR that cannot be written or that another run holds, or an unreachable
scheduler (nothing ran).
"""


# -- arguments ------------------------------------------------------------------------------


def _scheduler(text: str) -> tuple[str, object]:
    """``("local", N)`` for ``local:N``, else ``("address", text)``."""
    if text == "local" or text.startswith("local:"):
        count = text.partition(":")[2]
        if not count.isdigit() or int(count) < 1:
            raise argparse.ArgumentTypeError(
                f"local:N takes a positive number of worker processes (got {text!r})")
        if int(count) > MAX_LOCAL_WORKERS:
            raise argparse.ArgumentTypeError(
                f"local:{int(count)} would start {int(count)} worker processes on this machine (at most "
                f"{MAX_LOCAL_WORKERS}); for a scheduler's address write it with its protocol, e.g. tcp://{text}")
        return "local", int(count)
    if not text or any(c.isspace() for c in text):
        raise argparse.ArgumentTypeError(
            f"expected a scheduler address such as tcp://host:8786, or local:N (got {text!r})")
    return "address", text


def _descriptors(text: str) -> tuple[str, ...]:
    names = [d.strip() for d in text.split(",") if d.strip()]
    unknown = [d for d in names if d not in DESCRIPTORS]
    if unknown:
        raise argparse.ArgumentTypeError(
            f"unknown descriptor {', '.join(map(repr, unknown))}: choose from {','.join(DESCRIPTORS)}, "
            "or '' for eigenpairs only")
    return tuple(dict.fromkeys(names))


def _surfaces(text: str) -> tuple[str, ...]:
    names = [d.strip() for d in text.split(",") if d.strip()]
    unknown = [d for d in names if d not in SURFACES]
    if unknown or not names:
        raise argparse.ArgumentTypeError(f"expected surfaces among {','.join(SURFACES)} (got {text!r})")
    return tuple(dict.fromkeys(names))


def add_cohort_parser(sub) -> None:
    """Add ``kernelrt cohort`` to the ``kernelrt`` command's subparsers."""
    p = sub.add_parser(
        "cohort", help="eigenpairs and HKS/WKS of many subject surfaces, here or on a Dask cluster",
        description="The k smallest Laplacian eigenpairs (and HKS/WKS) of every subject surface,\n"
                    "one task per subject, in this process or on a Dask cluster.",
        epilog=_HELP, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("meshes", nargs="*", metavar="MESH", help="mesh files and directories of them")
    p.add_argument("--subjects-dir", type=Path, metavar="SUBJECTS",
                   help="a FreeSurfer SUBJECTS_DIR: every subject's surf/<hemi>.<surf> (with or instead of MESH)")
    p.add_argument("--surf", type=_surfaces, metavar="LIST",
                   help=f"with --subjects-dir: comma-separated surfaces among {', '.join(SURFACES)} (default pial)")
    p.add_argument("--hemi", choices=tuple(HEMIS), help="with --subjects-dir: the hemispheres (default both)")
    p.add_argument("--k", type=positive_int, default=100, help="eigenpairs per subject (default 100)")
    p.add_argument("--scheduler", type=_scheduler, metavar="ADDRESS|local:N",
                   help="a Dask scheduler's address (tcp://host:8786), or local:N to start N worker "
                        "processes here for this run; default: run in this process (no Dask)")
    p.add_argument("--out", type=Path, required=True, metavar="DIR",
                   help="output directory (created): <name>.npz per subject and summary.csv")
    p.add_argument("--descriptors", type=_descriptors, default=DESCRIPTORS, metavar="LIST",
                   help="comma-separated descriptors among hks,wks (default hks,wks; '' for eigenpairs only)")
    p.add_argument("--keep-evecs", action="store_true", help="also write the (N, k) eigenvectors")
    p.add_argument("--dtype", choices=("float64", "float32"), default="float64",
                   help="dtype of the stored eigenvectors, HKS and WKS (default float64; float32 halves the "
                        "files; eigenvalues stay float64)")
    p.add_argument("--compress", action="store_true",
                   help="deflate each .npz (np.savez_compressed): HKS/WKS files about 15%% smaller in float64, "
                        "30%% in float32, and seconds slower to write per 40k-vertex subject")
    p.add_argument("--resume", action="store_true",
                   help="keep the subjects already in DIR (same k, descriptors, --dtype and mesh file bytes, every "
                        "array whole) and compute the others")
    p.add_argument("--threads-per-task", type=positive_int, metavar="T",
                   help="with --scheduler: numba threads per task on the workers (registers "
                        "KernelrtPlugin(threads_per_task=T), replacing the cluster's; default 1)")
    p.add_argument("--json", action="store_true", help="print the summary rows as JSON (messages go to stderr)")
    p.set_defaults(func=_cmd_cohort, cohort_parser=p)


# -- the command ------------------------------------------------------------------------------


def _cmd_cohort(args) -> int:
    from .laplacian import cohort_outdir as outdir  # numba: only when the command runs
    from .laplacian.mesh_files import find_meshes, freesurfer_surfaces, subject_names

    parser = args.cohort_parser
    if args.threads_per_task is not None and args.scheduler is None:
        parser.error("--threads-per-task applies to a Dask run: give --scheduler too")
    if args.subjects_dir is None and (args.surf, args.hemi) != (None, None):
        parser.error("--surf and --hemi choose the surfaces of --subjects-dir: give it too")
    if not args.meshes and args.subjects_dir is None:
        parser.error("give MESH files or directories, or --subjects-dir")
    if args.out.exists() and not args.out.is_dir():
        parser.error(f"--out: {args.out} is a file, not a directory")
    try:
        files = find_meshes(args.meshes) if args.meshes else []
        if args.subjects_dir is not None:
            surfaces = freesurfer_surfaces(args.subjects_dir, args.surf or ("pial",), HEMIS[args.hemi or "both"])
            given = {os.path.abspath(f) for f in files}  # a surface also given as MESH runs once
            files += [f for f in surfaces if os.path.abspath(f) not in given]
    except (OSError, ValueError) as e:  # missing, unreadable directory, no mesh (or subject) in it
        parser.error(str(e))
    names = subject_names(files)
    # a worker's working directory is not ours: absolute paths name the same files there
    paths = [str(f.absolute()) for f in files]
    say = _printer(args.json)
    try:
        outdir.check_writable(args.out)  # before any work: not after the first subject
    except OSError as e:
        parser.error(f"--out: cannot write to {args.out}: {e.strerror or e}")
    try:
        with outdir.hold(args.out):
            return _run(args, names, paths, say, parser)
    except (outdir.OutputInUse, outdir.UnsafeOutput) as e:
        parser.error(str(e))


def _run(args, names, paths, say, parser) -> int:
    """The run, with ``--out`` locked: stale temporaries out, compute, summarise."""
    from .laplacian import cohort_spectra
    from .laplacian.cohort_store import remove_stale_parts

    stale = remove_stale_parts(args.out)
    what = ", ".join(args.descriptors) or "no descriptors"
    stored = ", ".join([args.dtype] * (args.dtype != "float64") + ["compressed"] * args.compress)
    say(f"{_count(len(paths), 'subject')}, k = {args.k}, {what} -> {args.out}" + (f" ({stored})" if stored else ""))
    missing = [n for n, p in zip(names, paths) if not os.path.lexists(p)]
    if missing:
        say(f"{_count(len(missing), 'surface')} not found, failed rows: {', '.join(missing[:8])}"
            + (", ..." if len(missing) > 8 else ""))
    if stale:
        say(f"removed {_count(len(stale), 'temporary file')} a killed run left in {args.out}")
    stopped = None
    with _client(args.scheduler, parser) as client:
        if client is None:
            say("running in this process")
        else:
            _prepare_cluster(client, args.threads_per_task, say)
        t0, started = time.perf_counter(), time.time()
        try:
            results = cohort_spectra(paths, args.k, descriptors=args.descriptors, client=client, out=args.out,
                                     names=names, errors="keep", keep_evecs=args.keep_evecs,
                                     resume=args.resume, progress=True, dtype=args.dtype, compress=args.compress)
        except OSError as e:  # writing a result failed (a full disk, ...): stop, keep what is written
            stopped = e
            results = _after_stop(args, names, paths, f"not written: the run stopped: {type(e).__name__}: {e}",
                                  since=started)
        seconds = time.perf_counter() - t0

    rows = summary_rows(results)
    others = summary_rows(_earlier_runs(args.out, exclude=set(names)))
    try:
        write_summary(args.out, rows + others)
    except OSError as e:
        say(f"error: cannot write {args.out / 'summary.csv'}: {type(e).__name__}: {e}")
        stopped = stopped or e
    failed = sum(r["status"] == "failed" for r in rows)
    if args.json:
        print(json.dumps(rows, indent=2))
    else:
        print(format_table(rows))
    kept = sum(getattr(r, "resumed", False) for r in results)  # found written by an earlier run
    rate = (len(rows) - kept) / seconds * 60 if seconds > 0 else float("inf")
    written = f"{len(rows) - failed} written to {args.out}" + (f" ({kept} kept from an earlier run)" if kept else "")
    say(f"{_count(len(rows), 'subject')}: {written}, {failed} failed "
        f"({seconds:.1f} s, {rate:.1f} subjects/min)"
        + (f"; summary.csv also lists {_count(len(others), 'subject')} of earlier runs" if others else ""))
    if stopped is not None:
        say(f"error: the run stopped (writing to {args.out}, or the cluster): {type(stopped).__name__}: {stopped}")
    return 1 if failed or stopped is not None else 0


def _after_stop(args, names, paths, why: str, since: float) -> list:
    """This run's subjects after it stopped: those ``resume`` would keep (written by this run,
    or whole from an earlier one with the same settings and mesh), the others failed with ``why``."""
    from .laplacian.cohort import settings_digest
    from .laplacian.cohort_store import finished_spectrum, mesh_digest
    from .tasks import TaskFailure

    digest = settings_digest(args.k, args.descriptors, keep_evecs=args.keep_evecs, dtype=args.dtype)
    arrays = tuple(args.descriptors) + ("evecs",) * args.keep_evecs
    found = [finished_spectrum(args.out, name, digest, arrays, mesh_digest(path=path))
             for name, path in zip(names, paths)]
    # a file this run wrote is no "kept from an earlier run" (resumed), though resume would keep it
    found = [s if s is None or s.path.stat().st_mtime < since else dataclasses.replace(s, resumed=False)
             for s in found]
    return [s if s is not None else TaskFailure(name, RuntimeError(why)) for name, s in zip(names, found)]


def _earlier_runs(out, exclude) -> list:
    """Every other ``<name>.npz`` in ``out``, as it reads back (a damaged one: failed, with why)."""
    from .laplacian.cohort_store import check_spectrum_file, spectrum_on_disk
    from .tasks import TaskFailure

    found = []
    for name in sorted(p.name[:-4] for p in out.glob("*.npz") if not p.name.startswith(".")):
        if name in exclude:
            continue
        try:
            fields = check_spectrum_file(out / f"{name}.npz")
        except ValueError as e:
            found.append(TaskFailure(name, e))
            continue
        found.append(spectrum_on_disk(out / f"{name}.npz", fields, name=name))
    return found


def _count(n: int, noun: str) -> str:
    return f"{n} {noun}" if n == 1 else f"{n} {noun}s"


def _printer(as_json: bool):
    """Messages for people: stdout, or stderr under --json so stdout is the JSON alone."""
    stream = sys.stderr if as_json else sys.stdout

    def say(text: str) -> None:
        print(text, file=stream, flush=True)

    return say


@contextlib.contextmanager
def _client(scheduler, parser):
    """A ``distributed.Client`` for ``--scheduler`` (None without), closed (with its cluster) after."""
    if scheduler is None:
        yield None
        return
    import distributed  # Dask: only for a run on a cluster

    kind, value = scheduler
    if kind == "local":
        # ":0": a free port for the dashboard, whose link is printed (8787 may be another cluster's)
        with distributed.LocalCluster(n_workers=value, threads_per_worker=1, dashboard_address=":0") as cluster, \
                distributed.Client(cluster) as client:
            yield client
        return
    try:
        client = distributed.Client(value)
    except (OSError, ValueError) as e:  # unreachable (TimeoutError is an OSError), or a malformed address
        parser.error(f"--scheduler: cannot connect to {value}: {e}")
    with client:
        yield client


def _prepare_cluster(client, threads_per_task, say) -> None:
    """The plugin on every worker, then what to watch: the dashboard and the workers."""
    from kernelrt.distributed import (
        PLUGIN_NAME,
        KernelrtPlugin,
        ensure_plugin,
        worker_info,
    )

    if threads_per_task is not None:
        client.register_plugin(KernelrtPlugin(threads_per_task=threads_per_task), name=PLUGIN_NAME)
    else:
        ensure_plugin(client)  # what cohort_spectra would do, done first so the workers can be listed
    # Without bokeh the scheduler still serves a link, to a page asking to install bokeh.
    if client.dashboard_link and client.run_on_scheduler(_has_bokeh):
        say(f"dashboard: {client.dashboard_link}")
    workers = worker_info(client)
    say(f"workers: {len(workers)}" + ("" if workers else " (the tasks wait for workers to join)"))
    for address, info in sorted(workers.items()):
        if "error" in info:  # its plugin failed: its tasks will fail with this
            say(f"  {address}  KernelrtPlugin failed: {info['error']}")
        else:
            say(f"  {address}  {info.get('backend', '?')}  {info.get('device', '?')}")


def _has_bokeh(dask_scheduler=None) -> bool:
    import importlib.util

    return importlib.util.find_spec("bokeh") is not None
