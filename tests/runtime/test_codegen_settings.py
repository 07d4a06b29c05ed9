"""numba's code-generation settings and the debug mode in the cache key; bounds checks on the CPU."""

import json
import os
import subprocess
import sys

import numpy as np
import pytest
from numba import prange
from numba.core import config as numba_config

import kernelrt
from kernelrt.cache_key import codegen_settings
from kernelrt.compiler import _key, cpu_dispatcher


def _flip(name):
    return lambda: not getattr(numba_config, name)


def _opt_max():
    return type(numba_config.OPT)("max")


# (target, numba.config attribute, a value other than this process's): each reaches the compiler.
CHANGES = [
    ("cpu", "BOUNDSCHECK", lambda: 1),
    ("cpu", "OPT", lambda: 0),
    ("cpu", "OPT", _opt_max),  # NUMBA_OPT=max: level 3 plus extra passes
    ("cpu", "LOOP_VECTORIZE", _flip("LOOP_VECTORIZE")),
    ("cpu", "SLP_VECTORIZE", _flip("SLP_VECTORIZE")),
    ("cpu", "ENABLE_AVX", _flip("ENABLE_AVX")),
    ("cpu", "USING_SVML", _flip("USING_SVML")),
    ("cpu", "DEBUGINFO_DEFAULT", lambda: 1),
    ("cpu", "EXTEND_VARIABLE_LIFETIMES", lambda: 1),
    ("cpu", "LLVM_REFPRUNE_PASS", lambda: 0),
    ("cpu", "LLVM_REFPRUNE_FLAGS", lambda: "per_bb"),
    ("cpu", "DEBUG_NRT", lambda: 1),
    ("cpu", "DEBUG_ARRAY_OPT_RUNTIME", lambda: 1),
    ("cuda", "CUDA_DEBUGINFO_DEFAULT", lambda: 1),
    ("cuda", "OPT", lambda: 0),
    ("cuda", "FORCE_CUDA_CC", lambda: (8, 0)),
    ("cuda", "CUDA_ENABLE_NRT", lambda: True),
]


@pytest.mark.parametrize("target, name, value", CHANGES, ids=[f"{t}-{n}" for t, n, _ in CHANGES])
def test_each_setting_changes_the_key(monkeypatch, target, name, value):
    before = codegen_settings(target)
    key_before = _key(_KERNEL, _KERNEL.py_func, (), f"{target}:label", "versions")
    monkeypatch.setattr(numba_config, name, value(), raising=False)
    assert codegen_settings(target) != before
    assert _key(_KERNEL, _KERNEL.py_func, (), f"{target}:label", "versions") != key_before


@pytest.mark.parametrize("target", ["cpu", "cuda"])
def test_debug_mode_changes_the_key(target):
    assert codegen_settings(target, debug=True) != codegen_settings(target, debug=False)
    label = f"{target}:label"
    assert _key(_KERNEL, _KERNEL.py_func, (), label, "v", True) != _key(_KERNEL, _KERNEL.py_func, (), label, "v")


# (target, debug, {attribute: value} set first, {attribute: value} that then changes nothing):
# settings that do not reach the compiler, so the key must not churn on them.
NO_CHURN = [
    ("cpu", False, {"BOUNDSCHECK": None}, {"BOUNDSCHECK": 0}),  # unset and 0: no checks either way
    ("cpu", False, {}, {"CUDA_DEBUGINFO_DEFAULT": 1, "FORCE_CUDA_CC": (8, 0)}),  # CUDA only
    ("cpu", False, {"LLVM_REFPRUNE_PASS": 0}, {"LLVM_REFPRUNE_FLAGS": "per_bb"}),  # flags of a pass that is off
    ("cpu", False, {"CPU_FEATURES": "+sse2"}, {"ENABLE_AVX": 0}),  # AVX edits the host's list, which this replaces
    ("cpu", False, {"DEBUGINFO_DEFAULT": 1}, {"EXTEND_VARIABLE_LIFETIMES": 1}),  # debug info extends them anyway
    ("cuda", False, {}, {"BOUNDSCHECK": 1}),  # numba-cuda never checks bounds
    ("cuda", False, {}, {"LOOP_VECTORIZE": 0, "SLP_VECTORIZE": 1, "DEBUGINFO_DEFAULT": 1}),  # CPU only
    ("cuda", False, {"OPT": 3}, {"OPT": 2}),  # NVVM gets -opt=3 for any level above 0
    ("cuda", True, {}, {"OPT": 0, "CUDA_DEBUGINFO_DEFAULT": 1}),  # debug mode passes debug and opt itself
]


@pytest.mark.parametrize("target, debug, given, changes", NO_CHURN)
def test_settings_that_do_not_reach_the_compiler_keep_the_key(monkeypatch, target, debug, given, changes):
    for name, value in given.items():
        monkeypatch.setattr(numba_config, name, value)
    before = codegen_settings(target, debug)
    for name, value in changes.items():
        monkeypatch.setattr(numba_config, name, value, raising=False)
    assert codegen_settings(target, debug) == before


def test_boundscheck_zero_overrides_debug_mode(monkeypatch):
    # NUMBA_BOUNDSCHECK=0 turns numba's checks off everywhere, debug mode included.
    debug = codegen_settings("cpu", debug=True)
    monkeypatch.setattr(numba_config, "BOUNDSCHECK", 0)
    assert "boundscheck=False" in codegen_settings("cpu", debug=True)
    assert codegen_settings("cpu", debug=True) != debug


def test_unknown_target_is_refused():
    with pytest.raises(ValueError, match=r"target must be 'cpu' or 'cuda' \(got 'rocm'\)"):
        codegen_settings("rocm")


# -- the debug mode on the CPU ---------------------------------------------------------------


@kernelrt.kernel
def _shift(i, out, x):
    if i < out.shape[0]:
        out[i] = x[i + 1]  # one past the end for the last thread


_KERNEL = _shift


@kernelrt.cuda_kernel
def _shift_twin(out, x):
    pass


@_shift_twin.cpu
def _shift_twin_cpu(grid, block, out, x):
    for i in prange(out.shape[0]):  # a parallel twin: debug mode must run it serially to raise
        out[i] = x[i + 1]


def test_debug_cpu_backend_raises_index_error(cache_dir):
    x, out = np.arange(8.0), np.zeros(8)
    with pytest.raises(IndexError, match="out of bounds"):
        kernelrt.CPUBackend(debug=True).launch_kernel(_shift, 1, 8, out, x)
    # In bounds, the debug kernel gives the fast kernel's result.
    fast, checked = np.zeros(7), np.zeros(7)
    kernelrt.CPUBackend().launch_kernel(_shift, 1, 7, fast, x)
    kernelrt.CPUBackend(debug=True).launch_kernel(_shift, 1, 7, checked, x)
    assert np.array_equal(fast, checked) and np.array_equal(fast, x[1:])  # exact: copies of small integers


def test_debug_cpu_backend_checks_a_cpu_twin(cache_dir):
    with pytest.raises(IndexError):
        kernelrt.CPUBackend(debug=True).launch_kernel(_shift_twin, 1, 8, np.zeros(8), np.arange(8.0))


def test_debug_dispatcher_is_separate_and_the_fast_one_unchanged():
    fast, checked = cpu_dispatcher(_shift), cpu_dispatcher(_shift, debug=True)
    assert fast is not checked and cpu_dispatcher(_shift, debug=True) is checked
    assert checked.targetoptions["boundscheck"] is True and checked.targetoptions["parallel"] is False
    # The fast loop keeps its speed: parallel, and no bounds checks unless numba's own settings ask.
    assert fast.targetoptions["boundscheck"] is None and fast.targetoptions["parallel"] is True


def test_debug_from_the_environment_and_get_backend(cache_dir, monkeypatch):
    default = kernelrt.get_backend("cpu")
    assert default.debug is False
    assert kernelrt.get_backend("cpu", debug=True).debug is True
    monkeypatch.setenv("KERNELRT_DEBUG_KERNELS", "1")
    assert kernelrt.CPUBackend().debug is True
    assert kernelrt.CPUBackend(debug=False).debug is False  # the argument wins
    from_env = kernelrt.get_backend("cpu")
    assert from_env.debug is True and from_env is not default


def test_debug_must_be_a_bool(cache_dir):
    with pytest.raises(TypeError, match=r"debug must be True, False or None \(got str: 'yes'\)"):
        kernelrt.CPUBackend(debug="yes")


# -- across processes --------------------------------------------------------------------------

KERNEL_MODULE = """
import kernelrt

@kernelrt.kernel
def plus_one(i, out, x):
    if i < out.shape[0]:
        out[i] = x[i] + 1.0
"""

RUNNER = """
import json, sys
sys.path.insert(0, sys.argv[1])
import kernelrt, settings_kernels
b = kernelrt.CPUBackend()
print(json.dumps(b.compile_kernel(settings_kernels.plus_one, "float64[::1], float64[::1]").status))
"""


def _status(src, cache_dir, **env):
    full = dict(os.environ, KERNELRT_CACHE_DIR=str(cache_dir), **env)
    for name in ("NUMBA_BOUNDSCHECK", "NUMBA_OPT", "NUMBA_DEBUGINFO", "KERNELRT_DEBUG_KERNELS"):
        if name not in env:
            full.pop(name, None)  # the baseline is numba's defaults, whatever this process has
    res = subprocess.run([sys.executable, "-c", RUNNER, str(src)], capture_output=True, text=True, env=full, check=False)
    assert res.returncode == 0, res.stderr
    return json.loads(res.stdout.strip().splitlines()[-1])


@pytest.mark.slow
def test_a_process_with_other_settings_compiles_its_own(tmp_path, cache_dir):
    src = tmp_path / "src"
    src.mkdir()
    (src / "settings_kernels.py").write_text(KERNEL_MODULE)
    assert _status(src, cache_dir) == "compiled"
    assert _status(src, cache_dir) == "disk"  # the cache serves a process with the same settings
    for env in ({"NUMBA_BOUNDSCHECK": "1"}, {"NUMBA_OPT": "0"}, {"NUMBA_DEBUGINFO": "1"},
                {"KERNELRT_DEBUG_KERNELS": "1"}):
        assert _status(src, cache_dir, **env) == "compiled", env
