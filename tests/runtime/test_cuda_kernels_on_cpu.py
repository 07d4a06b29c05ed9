"""Plain ``numba.cuda`` kernels on ``CPUBackend``: translated, run in parallel, checked.

The kernels and launch cases are in tests/support/cuda_kernels.py; the simulator layer
(tests/simulator/test_cuda_kernels_sim.py) runs the same cases in Numba's CUDA simulator
and compares. Here: against numpy references, the refusals, the cache, and that no CUDA
library is loaded on this path.
"""

from __future__ import annotations

import importlib.util
import subprocess
import sys
import textwrap

import numba
import numpy as np
import pytest
from numba import cuda

import kernelrt
import kernelrt.kernel_def
from kernelrt import CpuTranslationError
from tests.support import cuda_kernels as ck
from tests.support.layers import ROOT


@pytest.fixture
def cpu(tmp_path):
    return kernelrt.CPUBackend(cache_dir=tmp_path / "cache")


@pytest.mark.parametrize("case", [c for c in ck.CASES if c.reference is not None], ids=lambda c: c.name)
def test_case_matches_numpy(cpu, case):
    args = ck.arguments(case)
    cpu.launch_kernel(case.kernel, case.grid, case.block, *args)
    expected = case.reference(*args)
    for index, want in zip(case.outputs, expected):
        # exact: integer work, integer-valued float sums (exact in any order) and the same
        # + and * in the same order as the numpy reference (numba contracts no FMA)
        np.testing.assert_array_equal(args[index], want, err_msg=f"{case.name} argument {index}")


def test_math_and_cmath(cpu):
    case = next(c for c in ck.CASES if c.name == "math_cmath")
    out, theta = ck.arguments(case)
    cpu.launch_kernel(case.kernel, case.grid, case.block, out, theta)
    # cos^2 + sin^2 through cmath.exp and math.cos/sin: 1 within a few ulp of libm's
    # results (not bitwise: the kernel's and numpy's sin/cos may come from different libms)
    np.testing.assert_allclose(out, np.cos(theta) ** 2 + np.sin(theta) ** 2, rtol=4e-16 * 4)


def test_each_float_atomic_rule(cpu):
    """numba-cuda's NaN rules: max/min keep a NaN element and ignore a NaN value;
    nanmax/nanmin replace a NaN element and ignore a NaN value."""

    @cuda.jit
    def rules(a, v):
        i = cuda.grid(1)
        if i == 0:
            cuda.atomic.max(a, 0, v[0])
            cuda.atomic.max(a, 1, v[1])
            cuda.atomic.nanmax(a, 2, v[2])
            cuda.atomic.nanmin(a, 3, v[3])
            cuda.atomic.min(a, 4, v[4])
            cuda.atomic.sub(a, 5, v[5])

    a = np.array([np.nan, 1.0, np.nan, 5.0, 2.0, 10.0])
    v = np.array([3.0, np.nan, 4.0, np.nan, -1.0, 0.25])
    cpu.launch_kernel(rules, 1, 1, a, v)
    # exact: the rules pick one of the operands, and 10 - 0.25 is exact
    np.testing.assert_array_equal(a, [np.nan, 1.0, 4.0, 5.0, -1.0, 9.75])


def test_integer_atomics(cpu):
    @cuda.jit
    def ops(a, u):
        i = cuda.grid(1)
        if i < 64:
            cuda.atomic.and_(a, 0, ~(1 << i))  # clears bit i of a[0], once per thread
            cuda.atomic.or_(a, 1, 1 << i)
            cuda.atomic.xor(a, 2, 1 << i)
            cuda.atomic.inc(u, 0, np.uint64(9))  # counts 0..9 and wraps
            cuda.atomic.dec(u, 1, np.uint64(100))
        if i == 0:
            cuda.atomic.exch(a, 3, 42)
            cuda.atomic.compare_and_swap(a[4:], 7, 8)

    a = np.array([-1, 0, 0, 1, 7], np.int64)
    u = np.array([0, 0], np.uint64)
    cpu.launch_kernel(ops, 1, 64, a, u)
    assert a.tolist() == [0, -1, -1, 42, 8]
    assert u.tolist() == [64 % 10, 100 - 63]  # dec from 0 wraps to 100, then 63 decrements


@pytest.mark.parametrize(
    "body, feature",
    [
        ("g = cuda.cg.this_grid()\n    out[0] = g.size", "the grid group's 'size', which the CPU backend cannot run"),
        ("s = cuda.shared.array(0, numba.float32)\n    s[0] = 1.0\n    g = cuda.cg.this_grid()\n    g.sync()",
         "dynamic shared memory (cuda.shared.array(0, ...)) with a grid-wide barrier"),
        ("for k in range(cuda.threadIdx.x):\n        cuda.syncthreads()", "loop whose trip count differs between threads"),
        ("out[0] = cuda.to_device(out)[0]", "cuda.to_device, which the CPU backend cannot run: not supported"),
    ],
)
def test_gpu_only_features_are_refused_by_name(cpu, tmp_path, body, feature):
    namespace = {"cuda": cuda, "numba": numba}
    source = f"def gpu_only(out):\n    {body}\n"
    path = tmp_path / "gpu_only.py"  # a real file: the translation reads the kernel's source
    path.write_text(source)
    exec(compile(source, str(path), "exec"), namespace)
    kern = cuda.jit(namespace["gpu_only"])
    out = np.zeros(4, np.float32)
    with pytest.raises(CpuTranslationError) as info:
        cpu.launch_kernel(kern, 1, 32, out)
    message = str(info.value)
    assert feature in message and "'gpu_only'" in message and "@k.cpu" in message
    assert out.tolist() == [0, 0, 0, 0]  # refused before anything ran
    assert isinstance(info.value, TypeError)  # a BackendMismatchError


def test_non_literal_grid_rank_is_refused(cpu):
    n = 1

    @cuda.jit
    def dynamic_rank(out):
        i = cuda.grid(n)
        out[i] = 1

    with pytest.raises(CpuTranslationError, match=r"cuda\.grid\(\) with an argument other than the literal 1, 2 or 3"):
        cpu.launch_kernel(dynamic_rank, 1, 1, np.zeros(1))


def test_explicit_twin_wins_over_translation(cpu):
    kern = kernelrt.cuda_kernel(ck.vector_add.py_func)

    @kern.cpu
    def twin(grid, block, a, b, c):
        for i in range(c.shape[0]):
            c[i] = a[i] - b[i]  # deliberately different, to see which ran

    a, b, c = np.ones(8), np.full(8, 2.0), np.zeros(8)
    cpu.launch_kernel(kern, 1, 8, a, b, c)
    assert c.tolist() == [-1.0] * 8


def test_import_styles_and_closures(cpu):
    from numba.cuda import atomic, grid

    offset = 5

    @cuda.jit
    def styles(out):
        i = grid(1)
        if i < out.shape[0]:
            atomic.add(out, i, numba.cuda.gridsize(1) + offset)

    out = np.zeros(10, np.int64)
    cpu.launch_kernel(styles, 2, 8, out)
    assert out.tolist() == [16 + 5] * 10


def test_translated_kernel_is_cached_on_disk(cpu):
    sig = "float32[::1], float32[::1], float32[::1]"
    assert cpu.compile_kernel(kernelrt.cuda_kernel(ck.vector_add.py_func), sig).status == "compiled"
    again = cpu.compile_kernel(kernelrt.cuda_kernel(ck.vector_add.py_func), sig)  # a new definition
    assert again.status == "disk"
    a, b, c = ck.arguments(ck.CASES[0])
    again[4, 256](a, b, c)
    np.testing.assert_array_equal(c, a + b)  # exact: one float32 addition each


def test_launch_form_and_signatures(cpu):
    k = cpu.compile_kernel(ck.vector_add, (numba.float32[::1], "float32[::1]", numba.float32[::1]))
    a, b, c = ck.arguments(ck.CASES[0])
    k[4, 256](a, b, c)
    k[(4,), (256,), 0, 0](a, b, c)  # numba's [grid, block, stream, shared_mem]
    np.testing.assert_array_equal(c, a + b)  # exact: one float32 addition each
    with pytest.raises(kernelrt.KernelArgumentError, match="must be an array of float32"):
        k[4, 256](a.astype(np.float64), b, c)
    with pytest.raises(kernelrt.LaunchConfigError, match="max_threads_per_block"):
        k[1, 2048](a, b, c)
    with pytest.raises(kernelrt.LaunchConfigError, match=r"kernel\[grid, block\]"):
        k[4](a, b, c)


def test_no_cuda_library_is_loaded(tmp_path):
    """The CPU path needs no CUDA driver, compiler (NVVM, NVRTC) or simulator: none is loaded.

    (``from numba import cuda``, in the kernel's own module, loads the CUDA runtime
    library of the pip wheel numba-cuda depends on; that is the user's import, not ours.)
    """
    script = textwrap.dedent(
        f"""
        import sys
        sys.path.insert(0, {str(ROOT)!r})
        import numpy as np
        import kernelrt
        from tests.support import cuda_kernels as ck
        cpu = kernelrt.CPUBackend(cache_dir={str(tmp_path)!r})
        for case in ck.CASES:
            cpu.launch_kernel(case.kernel, case.grid, case.block, *ck.arguments(case))
        maps = open("/proc/self/maps").read()
        print([lib for lib in ("libcuda.so", "libnvvm", "libnvrtc") if lib in maps])
        """
    )
    env = {"PATH": "/usr/bin:/bin", "HOME": str(tmp_path), "NUMBA_ENABLE_CUDASIM": "0", "CUDA_HOME": "/nonexistent"}
    if importlib.util.find_spec("numba_cuda") is not None:
        # numba-cuda looks the driver up only when asked; numba's own numba.cuda (numba-cuda
        # absent) looks at import, and a path that is not a file is an error there
        env["NUMBA_CUDA_DRIVER"] = "/nonexistent/libcuda.so"
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, env=env, timeout=600, check=False)
    assert done.returncode == 0, done.stderr[-2000:]
    assert done.stdout.strip().splitlines()[-1] == "[]"


def test_signature_forms(cpu):
    def scale(x, a, n):
        i = cuda.grid(1)
        if i < n:
            x[i] *= a

    forms = [
        "float32[::1], float32, int64",
        "void(float32[::1], float32, int64)",
        (numba.float32[::1], np.float32, int),
        ["float32[::1]", np.dtype("float32"), np.int64],
    ]
    for form in forms:
        assert [str(t) for t in cpu.compile_kernel(scale, form).argtypes] == ["array(float32, 1d, C)", "float32", "int64"]
    with pytest.raises(TypeError, match=r"signature entry 1 \(a\) is not a type \(got str: 'flaot32'\); a signature is"):
        cpu.compile_kernel(scale, ("float32[::1]", "flaot32", int))
    with pytest.raises(TypeError, match=r"signature entry 0 \(x\) is not a type \(got type: <class 'object'>\)"):
        cpu.compile_kernel(scale, (object, np.float32, int))
    with pytest.raises(TypeError, match="cannot parse signature .*; a signature is a string"):
        cpu.compile_kernel(scale, "float32[::1], float32,, int64")
    with pytest.raises(TypeError, match="signature has 2 argument types but the kernel takes 3"):
        cpu.compile_kernel(scale, (np.float32, np.float32))


@pytest.mark.parametrize(
    "grid, block, shared_mem, limit",
    [
        (1, 2048, 0, r"block \(2048,\) has 2048 threads; the limit max_threads_per_block"),
        (1, (32, 32, 2), 0, r"block \(32, 32, 2\) has 2048 threads"),
        (1, (1, 1, 65), 0, r"block\.z = 65 exceeds the limit max_block_dim_z"),
        ((1, 70_000), 1, 0, r"grid\.y = 70000 exceeds the limit max_grid_dim_y"),
        (1, 1, 10**6, r"shared memory 1000000 bytes exceeds the limit max_shared_mem_per_block"),
    ],
)
def test_cpu_launches_obey_every_gpus_limits(cpu, grid, block, shared_mem, limit):
    a, b, c = np.ones(4, np.float32), np.ones(4, np.float32), np.zeros(4, np.float32)
    with pytest.raises(kernelrt.LaunchConfigError, match=limit + ".* on every supported CUDA GPU"):
        cpu.launch_kernel(ck.vector_add, grid, block, a, b, c, shared_mem=shared_mem)
    assert c.tolist() == [0, 0, 0, 0]  # refused before anything ran
    kernelrt.CPUBackend(gpu_limits=False).launch_kernel(ck.vector_add, grid, block, a, b, c, shared_mem=shared_mem)
    assert c[0] == 2  # the opt-out runs it (over x = grid.x * block.x threads, at least one)


# -- found in review: each once wrong or unclear ---------------------------------------------------


@cuda.jit(device=True)
def _bump(acc, v):
    acc[0] += v


@cuda.jit(device=True)
def _read_past_end(a, i):
    return a[i + 1000]


def test_reads_after_atomics_and_device_writes_see_them(cpu):
    """numba's parfor pass hoists reads it thinks loop-invariant; writes through calls must stop it."""

    @cuda.jit
    def atomic_then_read(acc, out):
        cuda.atomic.add(acc, 0, 5)
        out[0] = acc[0]

    @cuda.jit
    def device_then_read(acc, x, out):
        i = cuda.grid(1)
        if i < x.shape[0]:
            _bump(acc, x[i])
        if i == 0:
            out[0] = acc[0]

    @cuda.jit
    def argmax(values, best, winner):
        i = cuda.grid(1)
        if i < values.shape[0]:
            cuda.atomic.max(best, 0, values[i])
    # (a second launch reads best after every thread's max: launches are ordered)

    @cuda.jit
    def pick(values, best, winner):
        i = cuda.grid(1)
        if i < values.shape[0] and values[i] == best[0]:
            winner[0] = i

    acc, out = np.zeros(1, np.int64), np.zeros(1, np.int64)
    cpu.launch_kernel(atomic_then_read, 1, 1, acc, out)
    assert (acc[0], out[0]) == (5, 5)
    acc, out = np.zeros(1), np.zeros(1)
    cpu.launch_kernel(device_then_read, 1, 1, acc, np.array([45.0]), out)
    assert out[0] == 45.0  # exact: one addition
    values = np.random.default_rng(1).permutation(5000).astype(np.float64)
    best, winner = np.full(1, -np.inf), np.full(1, -1)
    cpu.launch_kernel(argmax, 40, 128, values, best, winner)
    cpu.launch_kernel(pick, 40, 128, values, best, winner)
    assert best[0] == 4999.0 and winner[0] == int(np.argmax(values))


def test_kernels_calling_device_functions_load_from_disk(cpu):
    sig = "float64[:, ::1], float64[::1], float64[::1]"
    assert cpu.compile_kernel(kernelrt.cuda_kernel(ck.poly_2d.py_func), sig).status == "compiled"
    assert cpu.compile_kernel(kernelrt.cuda_kernel(ck.poly_2d.py_func), sig).status == "disk"


def test_debug_mode_checks_device_functions_and_atomics(tmp_path):
    debug = kernelrt.CPUBackend(cache_dir=tmp_path, debug=True)

    @cuda.jit
    def oob_device(a, out):
        i = cuda.grid(1)
        if i < a.shape[0]:
            out[i] = _read_past_end(a, i)

    @cuda.jit
    def oob_atomic(h):
        i = cuda.grid(1)
        cuda.atomic.add(h, i + 10, 1)

    with pytest.raises(IndexError):
        debug.launch_kernel(oob_device, 1, 4, np.zeros(4), np.zeros(4))
    h = np.zeros(4, np.int64)
    with pytest.raises(IndexError):
        debug.launch_kernel(oob_atomic, 1, 4, h)
    assert h.tolist() == [0, 0, 0, 0]


@cuda.jit(device=True)
def _countdown(n):
    return 0 if n == 0 else _countdown(n - 1)


@cuda.jit(device=True)
def _is_even(n):
    if n == 0:
        return True
    return _is_odd(n - 1)


@cuda.jit(device=True)
def _is_odd(n):
    if n == 0:
        return False
    return _is_even(n - 1)


def test_recursive_device_functions_run(cpu):
    @cuda.jit
    def recursive(out):
        out[0] = _countdown(3)

    @cuda.jit
    def parity(x, out):  # mutual recursion
        i = cuda.grid(1)
        if i < x.shape[0]:
            out[i] = _is_even(x[i])

    out = np.ones(1)
    cpu.launch_kernel(recursive, 1, 1, out)
    assert out[0] == 0
    x, even = np.arange(37), np.zeros(37, np.bool_)
    cpu.launch_kernel(parity, 2, 32, x, even)
    np.testing.assert_array_equal(even, x % 2 == 0)


def test_atomics_refuse_read_only_arrays(cpu):
    @cuda.jit
    def count(h):
        cuda.atomic.add(h, 0, 1)

    h = np.zeros(1, np.int64)
    h.setflags(write=False)
    with pytest.raises(Exception, match="read-only array"):
        cpu.launch_kernel(count, 1, 1, h)
    assert h[0] == 0


def test_adoption_follows_the_function_and_its_fastmath():
    import gc
    import weakref

    def make():
        def k(x):
            x[0] = 1.0

        return k

    plain = make()
    fast = cuda.jit(fastmath=True)(plain)
    assert kernelrt.kernel_def.adopt(plain).options["fastmath"] is False
    assert kernelrt.kernel_def.adopt(fast).options["fastmath"] is True
    assert kernelrt.kernel_def.adopt(plain) is kernelrt.kernel_def.adopt(cuda.jit(plain))
    gone = weakref.ref(kernelrt.kernel_def.adopt(plain))
    del plain, fast
    gc.collect()
    assert gone() is None  # the Kernel goes with its function


def test_directly_imported_intrinsics_run(cpu):
    from numba.cuda import fma, libdevice

    @cuda.jit
    def fused(out):
        out[0] = fma(out[0], 2.0, 1.0)

    @cuda.jit
    def lib(out):
        out[0] = libdevice.sqrt(out[0])

    out = np.array([3.0])
    cpu.launch_kernel(fused, 1, 1, out)
    cpu.launch_kernel(lib, 1, 1, out)
    assert out[0] == np.sqrt(7.0)  # exact: 3 * 2 + 1 is exact, sqrt is correctly rounded


def test_a_device_function_is_not_a_kernel(cpu):
    with pytest.raises(kernelrt.BackendMismatchError, match="'_bump' is a device function"):
        cpu.launch_kernel(_bump, 1, 1, np.zeros(1), 1.0)


def test_translator_digest_covers_every_translator_module():
    # a module the translator imports but the digest leaves out would change translations
    # without changing their cache keys: stale entries would be loaded
    import ast
    from pathlib import Path

    from kernelrt import kernel_source

    here = Path(kernel_source.__file__).resolve().parent
    seen: set[str] = set()

    def walk(name: str) -> None:
        if name in seen:
            return
        seen.add(name)
        for node in ast.walk(ast.parse((here / name).read_text(encoding="utf-8"))):
            if isinstance(node, ast.ImportFrom) and node.level == 1:
                names = [node.module.split(".")[0]] if node.module else [a.name for a in node.names]
                for mod in names:
                    if (here / f"{mod}.py").exists():
                        walk(f"{mod}.py")

    walk("cuda_on_cpu.py")
    assert seen - {"errors.py"} == set(kernel_source.TRANSLATOR_MODULES)
