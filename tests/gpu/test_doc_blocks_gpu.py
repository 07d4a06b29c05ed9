"""The documentation's GPU blocks (``<!-- gpu -->`` above the fence), run on a real GPU."""

from __future__ import annotations

import os

import pytest
from tests.support import doc_blocks

GPU_BLOCKS = [b for b in doc_blocks.blocks() if b.mark == "gpu"]


@pytest.mark.parametrize("block", GPU_BLOCKS, ids=[b.id for b in GPU_BLOCKS])
def test_gpu_block_runs(block, cache_dir, tmp_path):
    doc_blocks.run(block, tmp_path, {**os.environ})
