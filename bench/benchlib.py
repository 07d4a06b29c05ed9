"""Helpers shared by the benchmark suites (kept out of conftest, whose name is not unique)."""

import os

QUICK = os.environ.get("KERNELRT_BENCH_QUICK", "") not in ("", "0")


def tag(benchmark, group, role, peer=None, **info):
    """Label a benchmark for ``kernelrt bench``: its case (group), kernelrt or a peer, extras.

    Plots use ``figure``, ``x`` and ``x_label`` (and ``bytes``/``peak_bandwidth`` for
    bandwidth) from ``info``; see kernelrt/bench_cli.py.
    """
    benchmark.group = group
    benchmark.extra_info.update(role=role, peer=peer, **info)
