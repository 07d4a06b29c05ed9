"""A short text summary of an Nsight Compute raw CSV (``ncu --import R.ncu-rep --csv --page raw``).

One line per profiled launch: the kernel (numba's mangled name shortened to the Python name),
its duration, registers per thread, achieved occupancy, DRAM bytes and the bandwidth they
imply, the fp64 pipe's activity, global-load sectors per request (4 is fully coalesced for
8-byte loads; scalar CSR reads many more) and thread instructions per warp instruction (32 is
no divergence). These are the figures GPU_PLAN §5.4 says to read first; `tools/gpu_check.sh ncu`
prints this after profiling.

    python tools/ncu_summary.py ncu_raw.csv
"""

from __future__ import annotations

import csv
import re
import sys

# ncu's unit names and their factor to the base unit (seconds, bytes). Versions differ: 2025.3
# (CUDA 13, the H100 of 2026-11-26) writes "ms"/"us"/"ns", older ones "msecond"/"usecond".
SCALE = {"nsecond": 1e-9, "usecond": 1e-6, "msecond": 1e-3, "second": 1.0,
         "ns": 1e-9, "us": 1e-6, "ms": 1e-3, "s": 1.0,
         "byte": 1.0, "Kbyte": 1e3, "Mbyte": 1e6, "Gbyte": 1e9, "Tbyte": 1e12,
         "KiB": 1024.0, "MiB": 1024.0 ** 2, "GiB": 1024.0 ** 3}
# Metrics whose unit must be one of SCALE's: read with a unit it does not know, a duration would
# silently be off by 10^3 (as the first H100 summary was: milliseconds read as seconds).
SCALED = {"gpu__time_duration.sum", "dram__bytes_read.sum", "dram__bytes_write.sum"}
KERNELS = ("sfap_columns", "sfap_response", "sfap_delay", "sfap_muap", "row_values", "face_values_atomic",
           "finish_mass", "csr_matvec", "csr_matmat", "heat_step_block", "heat_step", "cheb_step",
           "random_fill")


def short_name(mangled: str) -> str:
    """The kernel's Python name inside numba's mangled symbol (the longest known name it contains)."""
    found = [k for k in KERNELS if k in mangled]
    if found:
        return max(found, key=len)
    m = re.search(r"([A-Za-z_][A-Za-z0-9_]{2,})", mangled)
    return m.group(1) if m else mangled[:30]


def read_rows(path) -> list[dict]:
    """The launches of a raw CSV as dicts of floats in base units (strings where not numeric)."""
    with open(path, newline="") as f:
        lines = [line for line in f if line.strip() and not line.startswith("==")]  # ncu's own notes
    table = list(csv.reader(lines))
    if len(table) < 2:
        raise ValueError(f"{path}: no launches in this CSV (got {len(table)} lines)")
    header, units, body = table[0], table[1], table[2:]
    if not any(u in SCALE or u == "%" for u in units):  # a raw page without a units row
        units, body = [""] * len(header), table[1:]
    rows = []
    for values in body:
        row = {}
        for name, unit, value in zip(header, units, values):
            if name in SCALED and unit not in SCALE:
                raise ValueError(f"{path}: column {name!r} has the unit {unit!r}; expected one of {sorted(SCALE)}")
            text = value.replace(",", "")
            try:
                row[name] = float(text) * SCALE.get(unit, 1.0)
            except ValueError:
                row[name] = value
        rows.append(row)
    return rows


def summarize(rows: list[dict]) -> list[str]:
    def get(row, key):
        v = row.get(key)
        return v if isinstance(v, float) else None

    out = [f"{'kernel':18} {'time':>10} {'regs':>5} {'occ%':>5} {'DRAM MB':>9} {'GB/s':>7} "
           f"{'fp64%':>6} {'sect/req':>8} {'thr/inst':>8}"]
    for row in rows:
        name = short_name(str(row.get("Kernel Name", row.get("Function Name", "?"))))
        t = get(row, "gpu__time_duration.sum")
        dram = sum(filter(None, (get(row, "dram__bytes_read.sum"), get(row, "dram__bytes_write.sum"))))
        sectors = get(row, "l1tex__t_sectors_pipe_lsu_mem_global_op_ld.sum")
        requests = get(row, "l1tex__t_requests_pipe_lsu_mem_global_op_ld.sum")

        def fmt(v, spec):
            return format(v, spec) if v is not None else "-"

        out.append(f"{name:18} {fmt(t * 1e6 if t else None, '>8.1f') + 'us':>10} "
                   f"{fmt(get(row, 'launch__registers_per_thread'), '>5.0f'):>5} "
                   f"{fmt(get(row, 'sm__warps_active.avg.pct_of_peak_sustained_active'), '>5.1f'):>5} "
                   f"{dram / 1e6:>9.2f} {fmt(dram / t / 1e9 if t else None, '>7.0f'):>7} "
                   f"{fmt(get(row, 'sm__pipe_fp64_cycles_active.avg.pct_of_peak_sustained_active'), '>6.1f'):>6} "
                   f"{fmt(sectors / requests if sectors and requests else None, '>8.2f'):>8} "
                   f"{fmt(get(row, 'smsp__thread_inst_executed_per_inst_executed.ratio'), '>8.1f'):>8}")
    return out


def main(argv=None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    if len(argv) != 1:
        print("usage: python tools/ncu_summary.py NCU_RAW.csv", file=sys.stderr)
        return 2
    print("\n".join(summarize(read_rows(argv[0]))))
    return 0


if __name__ == "__main__":
    sys.exit(main())
