"""The GPU probe's floor arithmetic (bench/gpu_floors.py) against GPU_PLAN.md Appendix A's numbers.

The Appendix rounds its figures to 2-3 digits, so each check allows that rounding.
"""

from __future__ import annotations

import dataclasses
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "bench"))
import gpu_floors as g  # noqa: E402

H100 = g.peaks_for("NVIDIA H100 80GB HBM3")


def test_the_table_matches_device_names_and_the_h100_is_the_sxm_part():
    assert H100.name == "H100" and H100.hbm == 3.35e12 and H100.fp64_fma == 16.75e12 and H100.sms == 132
    assert g.peaks_for("NVIDIA H100 PCIe").name == "H100 PCIe"
    assert g.peaks_for("NVIDIA H200").hbm == 4.8e12
    assert g.peaks_for("NVIDIA A100-SXM4-80GB").name == "A100-SXM4-80GB"
    assert g.peaks_for("NVIDIA L40S").name == "L40S"
    assert g.peaks_for("Quadro P1000") is None


def test_peaks_from_attributes_use_the_memory_bus_and_the_cc_fp64_rate():
    # An H100 SXM5's attributes: 132 SMs, 1.98 GHz, HBM3 at 2.619 GHz on a 5,120-bit bus
    p = g.peaks_from_attributes("X", (9, 0), 132, 1_980_000, 2_619_000, 5120)
    assert p.hbm == pytest.approx(3.35e12, rel=0.01)
    assert p.fp64_fma == pytest.approx(16.7e12, rel=0.01)
    assert "estimated" in p.source


def test_ico_counts():
    assert g.ico_counts(7) == {"n": 163842, "faces": 327680, "edges": 491520, "nnz": 1146882}
    assert g.ico_counts(8)["nnz"] == 4587522


def test_l5_spmv_ico8():
    c = g.ico_counts(8)
    f = g.spmv_floor(c["n"], c["nnz"], H100)
    assert f["work"]["bytes"] == pytest.approx(68.16e6, rel=1e-3)
    assert f["floor_s"] == pytest.approx(20.3e-6, rel=3e-3)
    measured = dataclasses.replace(H100, hbm=3.0e12)  # the D2D copy measured on the machine
    assert g.spmv_floor(c["n"], c["nnz"], measured)["floor_s"] == pytest.approx(22.7e-6, rel=3e-3)


def test_l1_assembly_ico8():
    c = g.ico_counts(8)
    assert g.assembly_bytes(c["n"], c["faces"], c["nnz"]) == pytest.approx(154.7e6, rel=1e-3)
    f = g.assembly_floor(c["n"], c["faces"], c["nnz"], H100)
    assert f["floor_s"] == pytest.approx(46e-6, rel=0.01)  # memory-bound: > the 28 µs of compute
    assert f["work"]["compute_s"] == pytest.approx(28e-6, rel=0.02)
    e2e = g.assembly_e2e_floor(c["n"], c["faces"], c["nnz"], H100)
    assert e2e["work"]["pcie_bytes"] == pytest.approx(57.7e6, rel=1e-3)
    assert e2e["parts_s"]["pcie"] == pytest.approx(1.15e-3, rel=0.01)  # 50 GB/s
    assert e2e["floor_high_s"] - e2e["parts_s"]["kernel"] == pytest.approx(2.3e-3, rel=0.01)  # 25 GB/s


def test_l2_and_l4_cohort():
    c = g.ico_counts(7)
    assert g.assembly_bytes(c["n"], c["faces"], c["nnz"]) == pytest.approx(38.7e6, rel=2e-3)
    f = g.cohort_floor(c["n"], c["faces"], c["nnz"], 100, H100)
    assert f["work"]["bytes"] == pytest.approx(1.70e9, rel=3e-3)
    assert f["work"]["hbm_s"] == pytest.approx(0.51e-3, rel=0.01)
    assert f["floor_s"] == pytest.approx(0.70e-3, rel=0.01)  # compute-bound: 98 M visits x 120 instructions
    e2e = g.assembly_e2e_floor(c["n"], c["faces"], c["nnz"], H100, subjects=100)
    assert 100 * (8 * c["nnz"] + 8 * c["n"]) == pytest.approx(1.05e9, rel=2e-3)  # the D2H part of it
    assert e2e["parts_s"]["pcie"] > 1.05e9 / 50e9


def test_l6_spmm50_ico8():
    c = g.ico_counts(8)
    f = g.spmm_floor(c["n"], c["nnz"], 50, H100)
    assert f["work"]["bytes"] == pytest.approx(0.634e9, rel=3e-3)
    assert f["floor_s"] == pytest.approx(0.19e-3, rel=0.01)
    assert f["floor_high_s"] == pytest.approx(0.66e-3, rel=0.02)  # + 6 x 262 MB of missed gathers


def test_l7_heat_ico7_is_l2_resident():
    c = g.ico_counts(7)
    one = g.heat_floor(c["n"], c["nnz"], 1, H100)
    assert one["work"]["bytes_per_step"] == pytest.approx(18.4e6, rel=3e-3)
    assert one["work"]["l2_resident"] and one["floor_s"] == pytest.approx(1.8e-6, rel=0.03)
    steps = g.heat_floor(c["n"], c["nnz"], 200, H100)
    assert steps["floor_s"] == pytest.approx(0.37e-3, rel=0.01)
    assert steps["floor_high_s"] == pytest.approx(1.1e-3, rel=0.01)  # the same from HBM
    assert not g.heat_floor(**{"n": c["n"] * 16, "nnz": c["nnz"] * 16, "steps": 1, "peaks": H100})["work"]["l2_resident"]


def test_l8_l9_chebyshev():
    c7, c8 = g.ico_counts(7), g.ico_counts(8)
    assert g.chebyshev_bytes_per_column(c7["n"], c7["nnz"], 60) == pytest.approx(4.39e6, rel=2e-3)
    assert g.chebyshev_bytes_per_column(c8["n"], c8["nnz"], 60) == pytest.approx(17.56e6, rel=2e-3)
    assert g.chebyshev_bytes_per_column(c8["n"], c8["nnz"], 120) == pytest.approx(16.65e6, rel=2e-3)
    measured = dataclasses.replace(H100, hbm=3.0e12)
    f = g.chebyshev_floor(c8["n"], c8["nnz"], 154_000, 120, 60, measured)
    assert f["parts_s"]["filter"] == pytest.approx(0.85, rel=0.01)  # 154k columns x 16.65 MB / 3.0 TB/s
    assert f["parts_s"]["rayleigh_ritz"] == pytest.approx(60 * 2.1e-3, rel=0.02)  # 10 passes over 629 MB


def test_s1_s2_columns_floor_and_design_bound():
    s1 = g.columns_floor(1.926e9, 39.2e6, H100)
    assert s1["parts_s"]["fma"] == pytest.approx(0.115e-3, rel=0.01)
    assert s1["parts_s"]["exp"] == pytest.approx(0.07e-3, rel=0.01)
    assert s1["floor_s"] == pytest.approx(0.185e-3, rel=0.01)
    assert g.columns_design_bound(2.50e9 / 32, H100) == pytest.approx(0.90e-3, rel=0.01)
    s2 = g.columns_floor(4.717e9, 96.6e6, H100)
    assert s2["parts_s"]["fma"] == pytest.approx(0.28e-3, rel=0.01)
    assert s2["parts_s"]["exp"] == pytest.approx(0.17e-3, rel=0.03)
    assert g.columns_design_bound(6.24e9 / 32, H100) == pytest.approx(2.24e-3, rel=0.01)


def test_s3_transfers_and_s5_delay():
    d2h = g.copy_floor(32.1e6, H100)
    assert d2h["floor_s"] == pytest.approx(0.64e-3, rel=0.01) and d2h["floor_high_s"] == pytest.approx(1.28e-3, rel=0.01)
    assert 0.80e9 / H100.fp64_fma == pytest.approx(0.048e-3, rel=0.01)


def test_sfap_counts_of_the_bench_case_match_gpu_plan():
    """The 200 x 25 dz 0.1 case's counts as GPU_PLAN §2 tabulates them (plan made here)."""
    from kernelrt.kernels.sfap.inputs import check_inputs
    from kernelrt.kernels.sfap.prep import plan_fibres
    from kernelrt.kernels.sfap.reference import synthetic_motor_unit

    plan = plan_fibres(**check_inputs(**synthetic_motor_unit(200, 25, 0.1), min_radial_dist=None))
    c = g.sfap_counts(plan, 25)
    assert (c["nt"], c["nz_max"]) == (399, 1202)
    assert c["useful_fma"] == pytest.approx(1.926e9, rel=1e-3)
    assert c["lane_slots"] == pytest.approx(2.50e9, rel=2e-3) and c["warp_fmas"] == c["lane_slots"] // 32
    assert c["dense_fma"] == pytest.approx(2.40e9, rel=2e-3)
    assert c["exps_needed"] == pytest.approx(39.2e6, rel=2e-3)
    assert c["delay_fma"] <= 399 * 399 * 25 * 200  # Appendix A's bound, 0.80 G
    assert c["h_bytes"] == pytest.approx(48e6, rel=2e-3) and c["out_bytes"] == 399 * 25 * 200 * 8
    assert c["d2h_bytes"] == pytest.approx(32.0e6, rel=1e-3)  # Appendix: 31.9 + 0.08 MB (it rounds the sum to 32.1)
    floors = g.sfap_floors(c, H100)
    assert floors["sfap_columns"]["floor_s"] == pytest.approx(0.185e-3, rel=0.01)
    assert floors["sfap_columns"]["design_bound_s"] == pytest.approx(0.90e-3, rel=0.01)


@pytest.mark.parametrize("text,message", [
    ("B200", "--peaks must be a model"),
    ("hbm=fast", "--peaks hbm must be a positive number (got 'fast')"),
    ("hbm=-1", "--peaks hbm must be a positive number (got '-1')"),
    ("speed=1", "--peaks keys are"),
])
def test_bad_peaks_are_refused(text, message):
    with pytest.raises(ValueError, match=message.replace("(", r"\(").replace(")", r"\)")):
        g.parse_peaks(text)


def test_peaks_overrides_and_models():
    p = g.parse_peaks("hbm=3.0e12,pcie_high=40e9")
    assert p.hbm == 3.0e12 and p.pcie == (40e9, 25e9) and p.fp64_fma == H100.fp64_fma and "--peaks" in p.source
    assert g.parse_peaks("h200").name == "H200"
