"""The benchmark figures (kernelrt/bench_plots.py) and their regeneration from JSON (tools/replot.py).

Figures are checked through matplotlib's objects, not pixels: what an axis holds (lines,
bars), its scale and labels, and the colour each implementation gets.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

pytest.importorskip("matplotlib")

from kernelrt.bench_plots import IMPLEMENTATIONS, figures, implementation, png_path, stale_suites  # noqa: E402

ROOT = Path(__file__).resolve().parents[2]
RESULTS = ROOT / "bench" / "results"
COLOUR = {name: colour.lower() for name, _, colour in IMPLEMENTATIONS}


def entry(figure, x, seconds, role="kernelrt", peer=None, **info):
    return {"group": f"{figure}-{x}", "name": f"test[{figure}-{x}-{peer}]", "role": role, "peer": peer,
            "median_s": seconds, "extra_info": {"figure": figure, "x": x, "x_label": "vertices", **info}}


def result(*entries, device="Test CPU"):
    return {"date": "2026-01-01", "commit": "0123456789abcdef", "dirty": False,
            "device": {"name": device, "backend": "cpu"}, "benchmarks": list(entries)}


def drawn(res) -> dict:
    """{(suite, quantity): Figure} for every figure of ``res``."""
    return {(suite, quantity): fig for suite, quantity, fig in figures(res)}


@pytest.fixture(autouse=True)
def close_figures():
    yield
    import matplotlib.pyplot as plt

    plt.close("all")


def data_lines(ax):
    """The lines that carry data (not the grey reference line at 1 or at the peak)."""
    return [line for line in ax.lines if line.get_gid() != "baseline"]


def test_one_size_per_series_is_a_bar_each_not_a_line():
    res = result(entry("demo-e2e", 4357, 9.1), entry("demo-e2e", 4357, 57.6, role="peer", peer="myogen 0.12.0"))
    figs = drawn(res)
    for quantity in ("time", "speedup"):
        ax = figs["demo", quantity].axes[0]
        assert not data_lines(ax), quantity
        heights = sorted(round(p.get_height(), 6) for p in ax.patches)
        assert heights == ([9.1, 57.6] if quantity == "time" else [round(57.6 / 9.1, 6)])
    # one colour per implementation, on bars too
    colours = {p.get_label(): p.get_facecolor() for p in figs["demo", "time"].axes[0].patches}
    import matplotlib.colors as mc

    assert mc.to_hex(colours["kernelrt"]) == COLOUR["kernelrt"]
    assert mc.to_hex(colours["myogen 0.12.0"]) == COLOUR["MyoGen"]


def test_a_series_of_one_size_beside_longer_ones_is_a_marker():
    res = result(*(entry("demo-rate", x, 1.0 / x, throughput=60 * x) for x in (1, 2, 4)),
                 entry("demo-rate", 2, 1.0, role="peer", peer="spectralbrain 0.1.0 loop", throughput=99.0))
    ax = drawn(res)["demo", "throughput"].axes[0]
    lines = {line.get_label(): line for line in data_lines(ax)}
    assert list(lines["kernelrt"].get_xdata()) == [1, 2, 4] and lines["kernelrt"].get_linestyle() == "-"
    peer = lines["spectralbrain 0.1.0 loop"]
    assert list(peer.get_xdata()) == [2] and peer.get_linestyle() == "None" and peer.get_marker() not in (None, "None")
    assert ax.get_ylim()[0] == 0  # rates from zero


def test_bandwidth_is_a_log_axis_in_percent_of_the_peak_when_the_peak_is_known():
    peak = 3.35e12
    rows = [entry("lap-spmv", x, t, bytes=b, peak_bandwidth=peak) for x, t, b in ((10242, 1e-4, 1e6), (655362, 2e-3, 7e7))]
    ax = drawn(result(*rows))["lap", "bandwidth"].axes[0]
    assert ax.get_yscale() == "log" and "% of the device peak" in ax.get_ylabel()
    (line,) = data_lines(ax)
    expected = [1e6 / 1e-4 / peak * 100, 7e7 / 2e-3 / peak * 100]  # bytes / time as a share of the peak
    assert list(line.get_ydata()) == pytest.approx(expected, rel=1e-12)
    assert [b.get_ydata()[0] for b in ax.lines if b.get_gid() == "baseline"] == [100.0]
    # no recorded peak: GB/s, still on a log axis
    rows = [entry("lap-spmv", x, t, bytes=b) for x, t, b in ((10242, 1e-4, 1e6), (655362, 2e-3, 7e7))]
    ax = drawn(result(*rows))["lap", "bandwidth"].axes[0]
    assert ax.get_yscale() == "log" and "GB/s" in ax.get_ylabel()
    assert list(data_lines(ax)[0].get_ydata()) == pytest.approx([10.0, 35.0], rel=1e-12)


def test_each_implementation_keeps_its_colour_across_figures():
    libigl = "libigl cotmatrix + massmatrix(BARYCENTRIC)"
    first = result(*(entry("lap-assemble", x, 1e-3 * x) for x in (10, 100)),
                   *(entry("lap-assemble", x, 2e-3 * x, role="peer", peer=libigl) for x in (10, 100)))
    second = result(*(entry("eig-k50", x, 1e-2 * x) for x in (10, 100)),
                    *(entry("eig-k50", x, 3e-2 * x, role="peer", peer="spectralbrain 0.1.0 eigsh") for x in (10, 100)),
                    *(entry("eig-k50", x, 4e-2 * x, role="peer", peer=libigl) for x in (10, 100)),
                    *(entry("eig-k50", x, 5e-2 * x, role="variant", series="kernelrt chebyshev (cpu)") for x in (10, 100)))
    colours = []
    for res, suite in ((first, "lap"), (second, "eig")):
        figs = drawn(res)
        lines = {line.get_label(): line.get_color() for line in data_lines(figs[suite, "time"].axes[0])}
        speedup = {line.get_label(): line.get_color() for line in data_lines(figs[suite, "speedup"].axes[0])}
        assert speedup[libigl] == lines[libigl]  # a speedup against a peer is drawn in the peer's colour
        colours.append(lines)
    assert colours[0]["kernelrt"] == colours[1]["kernelrt"] == COLOUR["kernelrt"]
    assert colours[0][libigl] == colours[1][libigl] == COLOUR["libigl"]
    assert colours[1]["spectralbrain 0.1.0 eigsh"] == COLOUR["SpectralBrain"]
    # another kernelrt route: kernelrt's hue in another shade, so both stay apart
    assert colours[1]["kernelrt chebyshev (cpu)"] not in (COLOUR["kernelrt"], COLOUR["SpectralBrain"])


def test_implementations_are_recognised_from_the_labels_the_suites_write():
    assert implementation("kernelrt") == "kernelrt"
    assert implementation("spectralbrain + kernelrt, backend=KernelrtBackend()") == "kernelrt"  # kernelrt's code ran
    assert implementation("spectralbrain 0.1.0 eigsh (ARPACK + SuperLU)") == "SpectralBrain"
    assert implementation("myogen 0.12.0 calc_sfaps(use_gpu=True)") == "MyoGen"
    assert implementation("robust-laplacian mesh_laplacian") == "robust-laplacian"
    assert implementation("scipy/numpy loop") == implementation("scipy csr @") == "NumPy/SciPy reference"
    assert implementation("cold compile") == "other"


def test_few_sizes_are_ticked_as_measured_with_thousands_separators():
    res = result(*(entry("lap-spmv", x, 1e-6 * x) for x in (10242, 163842, 655362)))
    ax = drawn(res)["lap", "time"].axes[0]
    assert ax.get_xscale() == "log"
    assert [t.get_text() for t in ax.get_xticklabels()] == ["10,242", "163,842", "655,362"]


def test_a_suite_measured_before_a_fix_is_not_drawn():
    res = result(entry("lap-assemble", 10, 1.0, stale="measured before the to_device stride fix"),
                 entry("lap-assemble", 100, 2.0), entry("sfap-50x25", 0.1, 1.0), entry("sfap-50x25", 0.5, 0.5))
    assert stale_suites(res) == {"lap": "1 rows measured before a fix (measured before the to_device stride fix)"}
    assert {suite for suite, _ in drawn(res)} == {"sfap"}


def test_png_names_match_kernelrt_bench_and_do_not_repeat_the_suite(tmp_path):
    assert png_path(tmp_path / "2026-01-01-test-cpu", "eigen", "time") == tmp_path / "2026-01-01-test-cpu-eigen-time.png"
    assert png_path(tmp_path / "2026-01-01-amd-epyc-eigen", "eigen", "time") == tmp_path / "2026-01-01-amd-epyc-eigen-time.png"


def replot(*args):
    return subprocess.run([sys.executable, str(ROOT / "tools" / "replot.py"), *map(str, args)],
                          capture_output=True, text=True, cwd=ROOT, timeout=300)


def test_replot_of_committed_results_writes_the_expected_files(tmp_path):
    myogen = RESULTS / "2026-11-23-amd-epyc-myogen.json"
    h100 = RESULTS / "2026-11-22-nvidia-h100-80gb-hbm3.json"
    res = replot(myogen, h100, "--out", tmp_path)
    assert res.returncode == 0, res.stderr
    expected = {f"2026-11-23-amd-epyc-myogen-{q}.png" for q in ("time", "speedup", "memory")}
    expected |= {f"2026-11-22-nvidia-h100-80gb-hbm3-sfap-{q}.png" for q in ("time", "speedup")}
    assert {p.name for p in tmp_path.iterdir()} == expected  # the H100 Laplacian rows predate a fix: not drawn
    assert all(p.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n" for p in tmp_path.iterdir())
    assert "laplacian: not drawn: 4 rows measured before a fix" in res.stdout


def test_replot_of_a_probe_result_writes_its_ratio_figure(tmp_path):
    res = replot(RESULTS / "2026-11-26-nvidia-h100-80gb-hbm3-variants.json", "--out", tmp_path)
    assert res.returncode == 0, res.stderr
    assert [p.name for p in tmp_path.iterdir()] == ["2026-11-26-nvidia-h100-80gb-hbm3-variants-ratios.png"]


def test_replot_checks_every_file_before_drawing(tmp_path):
    other = tmp_path / "demo.json"
    other.write_text(json.dumps({"backend": "cpu", "checks": []}))
    res = replot(RESULTS / "2026-11-23-amd-epyc-myogen.json", other, "--out", tmp_path)
    assert res.returncode == 2
    assert f"{other}: expected a kernelrt bench result ('benchmarks') or a GPU probe result ('sections')" in res.stderr
    assert not list(tmp_path.glob("*.png"))  # the good file was not drawn either
