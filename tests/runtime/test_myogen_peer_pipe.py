"""bench_sfap.MyoGenPeer: a peer that dies says why, and PYTHONSAFEPATH does not kill it.

The 2026-11-27 H200 sitting ran the probe under tools/gpu_check.sh, which sets
PYTHONSAFEPATH=1; the MyoGen peer inherited it, could not import ``benchlib`` from its own
directory, and the probe row read only "JSONDecodeError". Here the peer runs with this
interpreter, which has no MyoGen: it must get past its own imports and fail on MyoGen's,
and the error must carry that line of its stderr.
"""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


@pytest.mark.skipif(importlib.util.find_spec("myogen") is not None, reason="MyoGen is installed here")
def test_a_dead_peer_names_its_error_even_under_pythonsafepath(monkeypatch):
    monkeypatch.syspath_prepend(str(ROOT / "bench"))
    monkeypatch.setenv("PYTHONSAFEPATH", "1")
    from bench_sfap import MyoGenPeer

    peer = MyoGenPeer(sys.executable)
    try:
        with pytest.raises(RuntimeError, match=r"(?s)exit code 1.*No module named 'myogen'"):
            peer.load({"x": [1.0]})
    finally:
        peer.close()
