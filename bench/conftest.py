"""Benchmarks: pytest-benchmark suites, each pairing kernelrt with a peer in the same run.

Every benchmark sets ``benchmark.group`` to a case and ``extra_info["role"]`` to
``"kernelrt"`` or ``"peer"`` (with ``extra_info["peer"]`` naming it); ``kernelrt bench``
(kernelrt/bench_cli.py) turns the pairs into ratios. Benchmarks never assert on time.
Run directly with: ``python -m pytest bench --benchmark-enable``.
"""

import pytest


def pytest_configure(config):
    config.addinivalue_line("python_files", "bench_*.py")


def pytest_collection_modifyitems(config, items):
    # pyproject's addopts disable benchmarks for the test suite; bench/ needs them on.
    if config.getoption("benchmark_enable", default=False):
        return
    for item in items:
        item.add_marker(pytest.mark.skip(reason="run benchmarks with --benchmark-enable (or kernelrt bench)"))
