"""kernelrt off Linux, without Linux: no fcntl, /proc or libtbb.so, and no numba-cuda.

The CI machine is Linux, so the other platforms are reached by what kernelrt asks of them:
a Python without ``fcntl`` (Windows), another ``sys.platform``, psutil's answers where
``/proc`` was read, and numba-cuda missing (macOS, where it has no wheel).
"""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import textwrap
from collections import namedtuple

import numpy as np
import psutil
import pytest

import kernelrt
from kernelrt import cpu_threads, discovery, disk_cache
from kernelrt.kernels.laplacian import cohort_outdir
from tests.support.layers import ROOT


# -- no fcntl: what a Windows Python lacks -----------------------------------------------------


def test_get_backend_and_a_cached_launch_work_without_fcntl(tmp_path):
    # A kernel compiled and stored by one process, loaded by the next: the disk cache's
    # per-key lock runs both times, and no kernelrt module may need fcntl to import.
    script = textwrap.dedent(
        f"""
        import sys
        sys.modules["fcntl"] = None  # `import fcntl` now raises ImportError, as on Windows
        import numpy as np
        import kernelrt

        @kernelrt.kernel
        def add_one(i, x):
            if i < x.shape[0]:
                x[i] += 1.0

        backend = kernelrt.get_backend()
        k = backend.compile_kernel(add_one, "float64[::1]")
        x = np.zeros(5)
        backend.launch_kernel(k, 1, 32, x)
        print(backend.name, k.status, x.tolist(), sys.modules["fcntl"])
        """
    )
    env = dict(os.environ, KERNELRT_CACHE_DIR=str(tmp_path / "cache"))
    runs = [subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, env=env, timeout=600,
                           check=False) for _ in range(2)]
    for done in runs:
        assert done.returncode == 0, done.stderr[-3000:]
    # no GPU here: "auto" is the CPU; the second process loads what the first stored
    assert [done.stdout.split() for done in runs] == [
        ["cpu", "compiled", "[1.0,", "1.0,", "1.0,", "1.0,", "1.0]", "None"],
        ["cpu", "disk", "[1.0,", "1.0,", "1.0,", "1.0,", "1.0]", "None"],
    ]


def test_without_posix_ownership_checks_the_cache_is_memory_only_and_kernels_still_run(tmp_path, monkeypatch):
    # Windows: cache_trust's owner and mode checks cannot be made, so nothing is loaded from disk.
    monkeypatch.setattr(disk_cache, "POSIX_TRUST", False)
    with pytest.warns(RuntimeWarning, match="POSIX-only, so on this platform kernels are compiled in memory"):
        cache = disk_cache.DiskCache(tmp_path / "cache")
    assert not cache.enabled and "KERNELRT_CACHE=0" in cache.disabled_reason
    assert not (tmp_path / "cache").exists()  # nothing created, nothing trusted

    @kernelrt.kernel
    def double(i, x):
        if i < x.shape[0]:
            x[i] *= 2.0

    with pytest.warns(RuntimeWarning, match="POSIX-only"):
        cpu = kernelrt.CPUBackend(cache_dir=tmp_path / "cache2")
    x = np.arange(4.0)
    cpu.launch_kernel(double, 1, 32, x)
    np.testing.assert_array_equal(x, [0.0, 2.0, 4.0, 6.0])


# -- the cohort lock: filelock on the descriptor kernelrt checked -------------------------------


def test_a_held_cohort_output_names_its_holder(tmp_path):
    out = tmp_path / "out"
    out.mkdir()
    with cohort_outdir.hold(out) as path:
        # a second open file description of the same file contends, as another process's would
        with pytest.raises(cohort_outdir.OutputInUse, match=f"pid {os.getpid()} on {socket.gethostname()}"):
            with cohort_outdir.hold(out):
                pass
        assert path.read_bytes().split() == [str(os.getpid()).encode(), socket.gethostname().encode()]
    with cohort_outdir.hold(out):  # released with the first run
        pass
    assert path.read_bytes() == b""  # the pid goes with the run


def test_the_holder_record_is_readable_past_the_byte_windows_locks(tmp_path, monkeypatch):
    # Windows locks byte 0 against reads by other processes: the record must be read after it.
    monkeypatch.setattr(cohort_outdir, "_RECORD_AT", 1)
    out = tmp_path / "out"
    out.mkdir()
    with cohort_outdir.hold(out):
        with pytest.raises(cohort_outdir.OutputInUse, match=f"\\(pid {os.getpid()} on {socket.gethostname()}\\)"):
            with cohort_outdir.hold(out):
                pass


def test_on_windows_the_cohort_lock_skips_posix_owners_but_still_refuses_a_symlink(tmp_path, monkeypatch):
    monkeypatch.setattr(cohort_outdir, "_WINDOWS", True)
    st = os.stat(tmp_path)
    fake = os.stat_result((0o100666, *st[1:4], 0, *st[5:]))  # how Windows reports any writable file
    assert cohort_outdir._problem(fake) is None
    monkeypatch.setattr(cohort_outdir, "_WINDOWS", False)
    assert cohort_outdir._problem(fake) == "is writable by other users"
    monkeypatch.setattr(cohort_outdir, "_WINDOWS", True)
    out = tmp_path / "out"
    out.mkdir()
    (out / cohort_outdir.LOCK_NAME).symlink_to(tmp_path / "victim")
    with pytest.raises(cohort_outdir.UnsafeOutput, match="is a symlink"):
        with cohort_outdir.hold(out):
            pass
    assert not (tmp_path / "victim").exists()


# -- psutil where /proc was read ----------------------------------------------------------------


def test_host_memory_is_psutils_answer(monkeypatch):
    memory = namedtuple("svmem", "total available")
    monkeypatch.setattr(psutil, "virtual_memory", lambda: memory(64 * 2**30, 10 * 2**30))
    assert discovery.host_memory_info() == (10 * 2**30, 64 * 2**30)


def test_the_real_host_memory_is_plausible():
    available, total = discovery.host_memory_info()
    assert 0 < available <= total


def test_the_cpu_name_off_linux_reads_no_proc(monkeypatch):
    import builtins

    real_open = builtins.open

    def no_proc(path, *args, **kwargs):
        assert not str(path).startswith("/proc"), path
        return real_open(path, *args, **kwargs)

    monkeypatch.setattr(builtins, "open", no_proc)
    monkeypatch.setattr(sys, "platform", "darwin")
    monkeypatch.setattr(discovery.platform, "processor", lambda: "arm")
    discovery.cpu_name.cache_clear()
    try:
        assert discovery.cpu_name() == "arm"
    finally:
        monkeypatch.undo()
        discovery.cpu_name.cache_clear()


Part = namedtuple("sdiskpart", "device mountpoint fstype opts")


@pytest.fixture
def network_filesystem():
    pytest.importorskip("distributed", reason="kernelrt.distributed needs Dask (pip install 'kernelrt[distributed]')")
    from kernelrt.distributed import network_filesystem

    return network_filesystem


def test_network_filesystems_from_psutils_mount_table(tmp_path, monkeypatch, network_filesystem):
    parts = [
        Part("/dev/sda1", "/", "ext4", "rw"),
        Part("server:/export", str(tmp_path / "shared"), "nfs4", "rw"),
        Part("/dev/sdb1", str(tmp_path / "shared" / "local"), "xfs", "rw"),
        Part("//server/share", str(tmp_path / "mapped"), "NTFS", "rw,remote"),  # a Windows network drive
        Part("//mac/share", str(tmp_path / "smb"), "smbfs", "rw"),  # macOS
    ]
    monkeypatch.setattr(psutil, "disk_partitions", lambda all=False: parts if all else parts[:1])
    assert network_filesystem(tmp_path / "shared" / "kcache") == "nfs4"
    assert network_filesystem(tmp_path / "shared" / "local" / "kcache") is None
    assert network_filesystem(tmp_path / "mapped" / "kcache") == "network drive (NTFS)"
    assert network_filesystem(tmp_path / "smb") == "smbfs"
    assert network_filesystem(tmp_path / "elsewhere") is None


def test_an_unreadable_mount_table_is_unknown_not_an_error(tmp_path, monkeypatch, network_filesystem):
    def refuse(all=False):
        raise PermissionError("denied")

    monkeypatch.setattr(psutil, "disk_partitions", refuse)
    assert network_filesystem(tmp_path) is None


def test_the_real_mount_table_is_read(network_filesystem):
    # psutil's own table, unpatched: an answer for this checkout, whatever disk it is on
    from kernelrt.distributed import NETWORK_FILESYSTEMS

    kind = network_filesystem(ROOT)
    assert kind is None or kind in NETWORK_FILESYSTEMS or kind.startswith("network drive")


# -- TBB under each platform's name --------------------------------------------------------------


@pytest.mark.parametrize(
    "platform,relative",
    [("linux", "lib/libtbb.so.12"), ("darwin", "lib/libtbb.12.dylib"), ("win32", "Library/bin/tbb12.dll")],
)
def test_tbb_is_found_under_each_platforms_name(tmp_path, monkeypatch, platform, relative):
    for name in ("lib/libtbb.so.12", "lib/libtbb.12.dylib", "Library/bin/tbb12.dll", "lib/libtbbmalloc.so.2"):
        (tmp_path / name).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / name).write_bytes(b"")
    monkeypatch.setattr(sys, "prefix", str(tmp_path))
    monkeypatch.setattr(sys, "base_prefix", str(tmp_path))
    monkeypatch.setattr(sys, "executable", str(tmp_path / "bin" / "python"))
    monkeypatch.setattr(sys, "path", [])
    assert cpu_threads._tbb_library_candidates(platform) == [str(tmp_path / relative)]
    assert cpu_threads._tbb_library_candidates("sunos5") == []


# -- numba-cuda absent (macOS; or uninstalled) ---------------------------------------------------


@pytest.fixture
def no_numba_cuda(monkeypatch):
    real = discovery.util.find_spec
    monkeypatch.setattr(discovery.util, "find_spec", lambda name, *a: None if name == "numba_cuda" else real(name, *a))
    discovery.probe.cache_clear()
    yield
    monkeypatch.undo()
    discovery.probe.cache_clear()


def test_without_numba_cuda_on_linux_the_reason_says_so_and_how_to_install_it(no_numba_cuda, monkeypatch):
    monkeypatch.setattr(sys, "platform", "linux")
    avail = kernelrt.CUDABackend.availability()
    assert not kernelrt.CUDABackend.check_available() and avail.code == "no_compiler"
    assert "numba-cuda is not installed; install it: pip install \"kernelrt[cuda12]\"" in avail.reason
    assert "driver" not in avail.reason.split(";")[0]  # not a driver message
    assert discovery.toolchain_problem(discovery.probe()).code == "no_compiler"  # PTX cannot be compiled either


def test_without_numba_cuda_on_macos_the_reason_says_it_has_no_build_there(no_numba_cuda, monkeypatch):
    monkeypatch.setattr(sys, "platform", "darwin")
    avail = kernelrt.CUDABackend.availability()
    assert "numba-cuda is not installed (it has no build for this platform)" in avail.reason
    assert avail.fix.startswith("kernelrt runs on the CPU backend here")
    assert "pip install" not in avail.reason and "NVIDIA driver" not in avail.reason
    with pytest.raises(kernelrt.CudaUnavailableError, match="no build for this platform"):
        kernelrt.get_backend("cuda", enable_caching=False)
