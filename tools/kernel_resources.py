"""Registers, spills, shared memory and occupancy of every built-in CUDA kernel, without a GPU.

For each kernel that ``kernelrt cache warm`` builds (``kernelrt.kernels.warm_specs()``), this
compiles PTX for each requested compute capability through kernelrt's offline path, assembles it
with ``ptxas -v`` (the ``nvidia-cuda-nvcc-cu12`` wheel that numba-cuda's cu12 extra installs, or
``ptxas`` on PATH) and records what ptxas reports: registers per thread, stack frame, spill
stores and loads, static shared and constant memory. From those it computes the theoretical
occupancy at the block sizes the drivers launch with. Where ``nvdisasm`` (or ``cuobjdump``) is
found (``pip install nvidia-cuda-nvdisasm``), it also counts the SASS instruction mix: DFMA,
DADD/DMUL, global loads (LDG), shared loads (LDS), atomics and MUFU per kernel.

    python tools/kernel_resources.py                  # sm_80 and sm_90, table to stdout
    python tools/kernel_resources.py --cc 90 --out bench/results/kernel-resources
                                                      # also writes <out>.json and <out>.md

The occupancy model (CUDA occupancy calculator rules, per SM): registers are allocated per warp
in units of 256 (``ceil(regs * 32 / 256) * 256``) from 65,536; at most 64 resident warps and
32 resident blocks; shared memory per block is the static amount plus 1 KiB the driver
reserves, from 228 KiB (sm_90) or 164 KiB (sm_80). Dynamic shared memory is not in the PTX: the
one kernel that uses it, ``sfap_columns_tiled``, is counted with what it launches with at 25
electrodes (``dynamic_smem``). Kernel variants (``kernelrt.kernels.variant_specs``) are listed
too, marked as such. A kernel with a grid barrier is assembled with ``ptxas -c`` (the
cooperative-groups runtime is linked by the driver). A GPU run checks these predictions
against ncu's ``launch__occupancy_limit_*`` (docs/gpu_check.md).
"""

from __future__ import annotations

import argparse
import json
import math
import os
import re
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

# Per compute capability: shared memory per SM usable by blocks (bytes), warps and blocks per SM.
SM_LIMITS = {(8, 0): {"smem": 164 * 1024, "warps": 64, "blocks": 32, "regs": 65536},
             (9, 0): {"smem": 228 * 1024, "warps": 64, "blocks": 32, "regs": 65536}}
RESERVED_SMEM = 1024  # the driver reserves 1 KiB of shared memory per block (cc >= 8.0)
REG_UNIT = 256  # registers are allocated per warp in units of 256
# The block sizes the drivers launch each kernel with (threads per block); others: 128 and 256.
BLOCKS = {"sfap_columns": 256, "sfap_response": 256, "sfap_delay": 256, "sfap_muap": 256,  # kernels/sfap/run.py
          "csr_matmat": 128, "heat_step_block": 128, "cheb_step": 128}  # 2-D products: 128 in all
DEFAULT_BLOCK = 128  # kernels/laplacian/placement.py BLOCK: every 1-D Laplacian kernel
# Kernel variants (kernelrt.kernels.variants) at the shape they launch with in the target cases:
# sfap_columns_tiled at 25 electrodes (16 x 8 threads, dynamic shared memory from columns_tiling).
VARIANT_BLOCKS = {"sfap_columns_tiled": 128, "sfap_delay_staged": 128}
# The kernels that carry the GPU's work: a spill in one of these is a regression (tests/runtime/test_kernel_resources.py).
HOT = ("sfap_columns", "sfap_response", "row_values", "csr_matmat", "cheb_step", "heat_step_block", "csr_matvec")
SASS_CLASSES = {"DFMA": r"DFMA", "DADD/DMUL": r"D(ADD|MUL)", "LDG": r"LDG", "LDS": r"LDS", "STG": r"STG",
                "ATOM": r"(RED|ATOM)", "MUFU": r"MUFU", "BAR": r"BAR"}


def find_tool(name: str) -> str | None:
    """``name`` (nvdisasm, cuobjdump) from an NVIDIA wheel in this environment, else from PATH."""
    import importlib.util

    for package in ("nvidia.cuda_nvdisasm", "nvidia.cuda_cuobjdump", "nvidia.cu13", "nvidia"):
        try:
            spec = importlib.util.find_spec(package)
        except (ImportError, ValueError):
            continue
        for root in (spec.submodule_search_locations or []) if spec else []:
            for candidate in (Path(root) / "bin" / name, *Path(root).glob(f"*/bin/{name}")):
                if candidate.is_file() and os.access(candidate, os.X_OK):
                    return str(candidate)
    return shutil.which(name)


def parse_ptxas(text: str) -> dict:
    """The resource lines of ``ptxas -v`` for one entry function."""
    def num(pattern, default=0):
        m = re.search(pattern, text)
        return int(m.group(1)) if m else default

    return {"registers": num(r"Used (\d+) registers"),
            "stack_bytes": num(r"(\d+) bytes stack frame"),
            "spill_stores": num(r"(\d+) bytes spill stores"),
            "spill_loads": num(r"(\d+) bytes spill loads"),
            "static_smem": num(r"(\d+) bytes smem"),
            "cmem0": num(r"(\d+) bytes cmem\[0\]")}


def occupancy(registers: int, static_smem: int, threads: int, cc) -> dict:
    """Resident blocks and warps per SM, the occupancy fraction and what limits it."""
    lim = SM_LIMITS[tuple(cc)]
    warps = math.ceil(threads / 32)
    per_warp = math.ceil(max(registers, 1) * 32 / REG_UNIT) * REG_UNIT
    by = {"warps": lim["warps"] // warps, "blocks": lim["blocks"],
          "registers": lim["regs"] // (per_warp * warps),
          "shared_mem": lim["smem"] // (static_smem + RESERVED_SMEM)}
    blocks = min(by.values())
    limiter = min(by, key=lambda k: (by[k], k != "warps"))
    return {"threads": threads, "blocks_per_sm": blocks, "warps_per_sm": blocks * warps,
            "occupancy": round(blocks * warps / lim["warps"], 3), "limited_by": limiter}


def sass_mix(cubin: Path) -> dict | None:
    """Counts of SASS instruction classes in the cubin, or None without nvdisasm/cuobjdump."""
    tool = find_tool("nvdisasm")
    cmd = [tool, str(cubin)] if tool else None
    if cmd is None and (tool := find_tool("cuobjdump")):
        cmd = [tool, "-sass", str(cubin)]
    if cmd is None:
        return None
    out = subprocess.run(cmd, capture_output=True, text=True, check=False)
    if out.returncode:
        return None
    ops = re.findall(r"^\s*(?:/\*[0-9a-f]+\*/)?\s*(?:@!?U?P\w+\s+)?([A-Z][A-Z0-9_.]+)", out.stdout, re.M)
    counts = {label: sum(1 for op in ops if re.match(rx, op)) for label, rx in SASS_CLASSES.items()}
    counts["total"] = len(ops)
    return counts


def measure(kernel, signature: str, cc, workdir: Path) -> dict:
    """Compile one kernel for ``cc`` offline, assemble it with ptxas, and describe its resources."""
    from kernelrt import compile_ptx
    from kernelrt.disk_cache import disk_cache_for
    from kernelrt.ptxas import assemble

    ptx = compile_ptx(kernel, signature, cc, cache=disk_cache_for(workdir / "cache"))
    # numba-cuda targets the arch-specific variant on Hopper (.target sm_90a): assemble names it
    arch = re.search(r"^\.target\s+(sm_\w+)", ptx, re.M).group(1)
    try:
        # ptxas -v: the resource lines are its log. A grid barrier calls cudadevrt's cudaCGSynchronize,
        # which only the driver's link resolves: such kernels are assembled as relocatable objects.
        code, log = assemble(ptx, relocatable="cudaCGSynchronize" in ptx)
    except RuntimeError as e:
        raise RuntimeError(f"{kernel.name} for sm_{cc[0]}{cc[1]}: {e}") from None
    cubin = workdir / f"{kernel.name}.sm{cc[0]}{cc[1]}.cubin"
    cubin.write_bytes(code)
    res = parse_ptxas(log)
    threads = BLOCKS.get(kernel.name) or VARIANT_BLOCKS.get(kernel.name, DEFAULT_BLOCK)
    dynamic = dynamic_smem(kernel.name)
    return {"kernel": kernel.name, "cc": f"{cc[0]}.{cc[1]}", "arch": arch, "signature": signature, **res,
            "dynamic_smem": dynamic, "occupancy": occupancy(res["registers"], res["static_smem"] + dynamic, threads, cc),
            "sass": sass_mix(cubin)}


def dynamic_smem(name: str) -> int:
    """The dynamic shared memory a kernel launches with in the target cases (0 for most)."""
    if name == "sfap_columns_tiled":
        from kernelrt.kernels.sfap.columns_tiled import columns_tiling

        return columns_tiling(25)[2]
    return 0


def specs() -> list[tuple[object, str, str]]:
    """(kernel, signature, role) of every built-in CUDA kernel: "default" (warm_specs) or "variant"."""
    from kernelrt.kernels import variant_specs, warm_specs

    return [(k, s, "default") for k, s in warm_specs()["cuda"]] + [(k, s, "variant") for k, s in variant_specs()]


def collect(ccs) -> list[dict]:
    rows, seen = [], set()
    with tempfile.TemporaryDirectory() as tmp:
        for cc in ccs:
            for kernel, signature, role in specs():
                if (kernel.name, signature, cc) in seen:
                    continue
                seen.add((kernel.name, signature, cc))
                if kernel.min_cc is not None and tuple(cc) < tuple(kernel.min_cc):
                    continue
                rows.append({**measure(kernel, signature, cc, Path(tmp)), "role": role})
    return rows


def markdown(rows: list[dict], ptxas_version: str) -> str:
    lines = ["# Built-in CUDA kernels: resources from ptxas (no GPU)", "",
             f"Generated by `python tools/kernel_resources.py --out bench/results/kernel-resources` with {ptxas_version}. "
             "Occupancy is theoretical, at the block size the drivers launch with, from registers and shared "
             "memory, static plus the dynamic amount a variant launches with (model in the tool's docstring). "
             "Rows marked *variant* are the alternatives to each family's default (`kernelrt.kernels.variants`, docs/gpu.md). "
             "SASS counts are static instructions in the whole kernel, not executed ones.", "",
             "| kernel | sm | signature | regs | spill st/ld (B) | stack (B) | smem (B) | threads | blocks/SM | "
             "occupancy | limited by | DFMA | DADD/DMUL | LDG | LDS | ATOM | MUFU |",
             "|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|"]
    for r in rows:
        o, s = r["occupancy"], r["sass"] or {}
        sig = r["signature"] if len(r["signature"]) < 40 else r["signature"][:37] + "..."
        name = r["kernel"] + (" *(variant)*" if r.get("role") == "variant" else "")
        smem = r["static_smem"] + r.get("dynamic_smem", 0)
        lines.append(f"| {name} | {r['cc'].replace('.', '')} | `{sig}` | {r['registers']} | "
                     f"{r['spill_stores']}/{r['spill_loads']} | {r['stack_bytes']} | {smem} | "
                     f"{o['threads']} | {o['blocks_per_sm']} | {o['occupancy']:.0%} | {o['limited_by']} | "
                     + " | ".join(str(s.get(k, "-")) for k in ("DFMA", "DADD/DMUL", "LDG", "LDS", "ATOM", "MUFU")) + " |")
    return "\n".join(lines) + "\n"


def _ccs(text: str) -> list[tuple[int, int]]:
    out = []
    for part in text.split(","):
        part = part.strip().replace(".", "")
        if not part.isdigit() or (int(part[:-1] or 0), int(part[-1])) not in SM_LIMITS:
            raise argparse.ArgumentTypeError(f"--cc takes 80 and/or 90, comma-separated (got {text!r})")
        out.append((int(part[:-1]), int(part[-1])))
    return out


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--cc", type=_ccs, default=[(8, 0), (9, 0)], help="compute capabilities (default 80,90)")
    p.add_argument("--out", type=Path, help="write <out>.json and <out>.md")
    args = p.parse_args(argv)
    from kernelrt.ptxas import find_ptxas, ptxas_version

    if find_ptxas() is None:
        print("ptxas not found: pip install nvidia-cuda-nvcc-cu12 (numba-cuda's cu12 extra brings it)", file=sys.stderr)
        return 2
    version = ptxas_version()
    rows = collect(args.cc)
    table = markdown(rows, version)
    if args.out:
        args.out.parent.mkdir(parents=True, exist_ok=True)
        args.out.with_suffix(".json").write_text(json.dumps({"ptxas": version, "kernels": rows}, indent=1) + "\n")
        args.out.with_suffix(".md").write_text(table)
    print(table)
    return 0


if __name__ == "__main__":
    sys.exit(main())
