"""The hot CUDA kernels keep their registers: none spills to local memory on sm_90 (no GPU).

``tools/kernel_resources.py`` compiles each built-in kernel to PTX, assembles it with ``ptxas -v``
and reads what ptxas reports. A spill (local-memory stores and loads in the hot loop) costs the
SFAP column kernel or an SpMM more than any launch overhead, and would pass every correctness
test: this is the check that catches it. The occupancy model is checked against hand-worked
cases of the CUDA occupancy rules.
"""

from __future__ import annotations

import importlib.util
import json
from pathlib import Path

import pytest

from kernelrt.ptxas import find_ptxas
from tests.support.layers import requires_nvrtc

ROOT = Path(__file__).resolve().parents[2]
TOOL = ROOT / "tools" / "kernel_resources.py"
TABLE = ROOT / "bench" / "results" / "kernel-resources.json"
_spec = importlib.util.spec_from_file_location("kernel_resources", TOOL)
kr = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(kr)

PTXAS = find_ptxas()


def _hot_specs():
    # the hot kernels, and every variant written to replace one (they await GPU timing: a spill
    # would decide the A/B before it is run)
    seen, out = set(), []
    for kernel, signature, role in kr.specs():
        if (kernel.name in kr.HOT or role == "variant") and kernel.name not in seen:
            seen.add(kernel.name)
            out.append((kernel, signature))
    return out


@pytest.mark.ptx
@requires_nvrtc
@pytest.mark.skipif(PTXAS is None, reason="ptxas not found (pip install nvidia-cuda-nvcc-cu12)")
def test_hot_kernels_do_not_spill_on_sm90(tmp_path):
    specs = _hot_specs()
    assert set(kr.HOT) <= {k.name for k, _ in specs}  # every hot kernel is still a built-in one
    spilled = []
    for kernel, signature in specs:
        row = kr.measure(kernel, signature, (9, 0), tmp_path)
        assert row["registers"] > 0, row  # ptxas reported on this kernel
        if row["spill_stores"] or row["spill_loads"] or row["stack_bytes"]:
            spilled.append(f"{kernel.name}: {row['spill_stores']} B spill stores, {row['spill_loads']} B loads, "
                           f"{row['stack_bytes']} B stack at {row['registers']} registers")
    assert not spilled, "hot kernels spill to local memory on sm_90: " + "; ".join(spilled)


def test_committed_table_is_of_todays_kernels():
    # the table describes the kernels that run: a kernel added, removed or given another
    # signature means running the tool again (python tools/kernel_resources.py --out ...)
    committed = {(row["kernel"], row["signature"]) for row in json.loads(TABLE.read_text())["kernels"]}
    current = {(kernel.name, signature) for kernel, signature, _ in kr.specs()}
    assert committed == current, f"stale: only in the table {committed - current}; not in it {current - committed}"


def test_ptxas_report_is_parsed():
    text = """ptxas info    : Compiling entry function '_Z3fooPd' for 'sm_90a'
ptxas info    : Function properties for _Z3fooPd
    16 bytes stack frame, 8 bytes spill stores, 12 bytes spill loads
ptxas info    : Used 104 registers, 24704 bytes smem, 400 bytes cmem[0]"""
    assert kr.parse_ptxas(text) == {"registers": 104, "stack_bytes": 16, "spill_stores": 8, "spill_loads": 12,
                                    "static_smem": 24704, "cmem0": 400}


@pytest.mark.parametrize("regs, smem, threads, cc, blocks, limiter", [
    (32, 0, 128, (9, 0), 16, "warps"),          # 64 warps / 4 per block
    (104, 24704, 256, (9, 0), 2, "registers"),  # 104 -> 3328 per warp x 8 warps = 26,624 regs: 2 blocks
    (40, 0, 128, (9, 0), 12, "registers"),      # 1280 per warp x 4 = 5120: 12 blocks (48 warps)
    (16, 100 * 1024, 64, (8, 0), 1, "shared_mem"),  # 101 KiB with the reserve: one block in 164 KiB
    (16, 0, 32, (9, 0), 32, "blocks"),          # one-warp blocks stop at 32 resident blocks
])
def test_occupancy_model(regs, smem, threads, cc, blocks, limiter):
    o = kr.occupancy(regs, smem, threads, cc)
    assert (o["blocks_per_sm"], o["limited_by"]) == (blocks, limiter)
    assert o["occupancy"] == round(blocks * (threads // 32) / 64, 3)
