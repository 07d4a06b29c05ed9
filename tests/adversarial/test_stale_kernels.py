"""Issue 25, item 1: a kernel's file edited after its import must never serve stale code.

numba compiles the bytecode a process imported; the cache key once hashed the source
text, which ``inspect.getsource`` reads from the file as it is now. A process that
imported a kernel, saw its file edited, and then launched it stored the old machine
code under the new source's key, and every later process ran the old kernel until
``kernelrt cache clear``. Now the key hashes the code objects numba compiles.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap

import numpy as np

from kernelrt.cache_key import function_fingerprint

KERNELS = """
import kernelrt

@kernelrt.device
def shift(v):
    return v + {helper}

@kernelrt.kernel
def bump(i, out, x):
    if i < out.shape[0]:
        out[i] = x[i] * {body}

@kernelrt.kernel
def via_helper(i, out, x):
    if i < out.shape[0]:
        out[i] = shift(x[i])
"""

# argv: source folder, then "edit" (rewrite the module between import and first launch)
# or "plain". Prints the results and the cache counters as JSON.
RUNNER = textwrap.dedent("""
    import json, pathlib, sys
    import numpy as np
    src = pathlib.Path(sys.argv[1])
    sys.path.insert(0, str(src))
    import kernelrt, stale_kernels
    if sys.argv[2] == "edit":
        (src / "stale_kernels.py").write_text(sys.argv[3])
    b = kernelrt.CPUBackend()
    x = np.arange(8.0)
    res = {}
    for name in ("bump", "via_helper"):
        out = np.zeros(8)
        b.launch_kernel(getattr(stale_kernels, name), 1, 8, out, x)
        res[name] = out.tolist()
    res["stats"] = b.cache.stats.as_dict()
    print(json.dumps(res))
""")


def _source(body, helper):
    # Old and new differ in length too, so no file-time granularity can hide the edit.
    return KERNELS.format(body=body, helper=helper)


def _run(src, cache_dir, *extra):
    env = dict(os.environ, KERNELRT_CACHE_DIR=str(cache_dir))
    res = subprocess.run([sys.executable, "-c", RUNNER, str(src), *extra], capture_output=True, text=True,
                         env=env, timeout=300)
    assert res.returncode == 0, res.stderr
    return json.loads(res.stdout.strip().splitlines()[-1])


def test_file_edited_between_import_and_first_launch(tmp_path, cache_dir):
    src = tmp_path / "src"
    src.mkdir()
    (src / "stale_kernels.py").write_text(_source(body="2.0", helper="1.0"))
    x = np.arange(8.0)
    old = {"bump": (x * 2.0).tolist(), "via_helper": (x + 1.0).tolist()}
    new = {"bump": (x * 30.0).tolist(), "via_helper": (x + 40.0).tolist()}  # exact: small integers

    # Imports the old module, then its file (kernel body and device function) is edited:
    # it runs, compiles and stores what it imported.
    first = _run(src, cache_dir, "edit", _source(body="30.0", helper="40.0"))
    assert {k: first[k] for k in old} == old
    assert first["stats"]["misses"] == 2

    # A new process imports the edited file: it must run the new code, not load the
    # old code stored under the new source's key (before the fix: old results, 2 hits).
    second = _run(src, cache_dir, "plain")
    assert {k: second[k] for k in new} == new
    assert second["stats"]["misses"] == 2 and second["stats"]["hits"] == 0

    # And the entries it stored serve the next process.
    third = _run(src, cache_dir, "plain")
    assert {k: third[k] for k in new} == new
    assert third["stats"]["hits"] == 2 and third["stats"]["misses"] == 0


def _compiled(source, filename="<mod>"):
    ns = {}
    exec(compile(source, filename, "exec"), ns)
    return ns["f"]


F = """
def f(x, n=3):
    # a comment
    s = 0.0
    for k in range(n):
        s += x * 2.0 + (lambda v: v + 1.0)(k)
    return s if k in {1, 2, 3} else -s
"""


def test_moving_a_function_or_editing_a_comment_keeps_the_key():
    base = function_fingerprint(_compiled(F))
    moved = "\n\n\n# header\n" + F.replace("# a comment", "# another comment, longer")
    assert function_fingerprint(_compiled(moved, "/elsewhere/other_name.py")) == base


def test_every_compiled_part_changes_the_key():
    base = function_fingerprint(_compiled(F))
    edits = [
        ("x * 2.0", "x * 2.5"),  # a constant
        ("v + 1.0", "v - 1.0"),  # inside a nested code object
        ("{1, 2, 3}", "{1, 2, 4}"),  # a frozenset constant
        ("n=3", "n=4"),  # a default: numba compiles omitted arguments' defaults in
        ("s = 0.0", "s = 0"),  # a constant's type (0 == 0.0)
        ("range(n)", "range(n + 0)"),
    ]
    for old, new in edits:
        assert function_fingerprint(_compiled(F.replace(old, new))) != base, new


def test_key_does_not_depend_on_the_hash_seed():
    # Frozenset constants iterate in an order that follows PYTHONHASHSEED for strings.
    code = (
        "from kernelrt.cache_key import function_fingerprint as fp\n"
        "ns = {}\n"
        "exec('def f(s):\\n    return s in {\"alpha\", \"beta\", \"gamma\", \"delta\"}\\n', ns)\n"
        "print(fp(ns['f']).hex())\n"
    )
    digests = {
        subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True,
                       env=dict(os.environ, PYTHONHASHSEED=seed)).stdout
        for seed in ("1", "2", "3")
    }
    assert len(digests) == 1


CUDA_KERNEL = """
from numba import cuda

@cuda.jit
def scale(out, x):
    i = cuda.grid(1)
    if i < out.shape[0]:
        out[i] = x[i] * {factor}
"""

CUDA_RUNNER = textwrap.dedent("""
    import pathlib, sys
    import numpy as np
    src = pathlib.Path(sys.argv[1])
    sys.path.insert(0, str(src))
    import kernelrt, cuda_scale
    (src / "cuda_scale.py").write_text(sys.argv[2])
    out = np.zeros(8)
    try:
        kernelrt.CPUBackend().launch_kernel(cuda_scale.scale, 1, 8, out, np.arange(8.0))
    except kernelrt.CpuTranslationError as e:
        print("refused:", e)
    else:
        print("ran:", out.tolist())
""")


def test_a_cuda_kernel_whose_file_changed_after_import_is_refused_on_the_cpu(tmp_path, cache_dir):
    # The CPU translation of a numba.cuda kernel reads the file's text (inspect.getsource):
    # after an edit it would run code this process never imported (and with lines shifted
    # above, the wrong lines). It must refuse and say why, not run either.
    src = tmp_path / "src"
    src.mkdir()
    (src / "cuda_scale.py").write_text(CUDA_KERNEL.format(factor=2))
    for edited, expected in ((CUDA_KERNEL.format(factor=7), "refused:"),
                             ("\n\n\n" + CUDA_KERNEL.format(factor=2), "refused:"),
                             (CUDA_KERNEL.format(factor=2), "ran: [0.0, 2.0")):
        (src / "cuda_scale.py").write_text(CUDA_KERNEL.format(factor=2))
        done = subprocess.run([sys.executable, "-c", CUDA_RUNNER, str(src), edited], capture_output=True,
                              text=True, timeout=300, env=dict(os.environ, PYTHONDONTWRITEBYTECODE="1"))
        assert done.returncode == 0, done.stderr
        assert done.stdout.startswith(expected), done.stdout
        if expected == "refused:":
            assert "changed after it was imported" in done.stdout
