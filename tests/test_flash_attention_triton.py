"""The project's flash-attention kernel and its `--measure triton` runner on a GPU (skipped without one)."""

from __future__ import annotations

import pytest

from tiler.export import tiling_document
from tiler.hardware import load_chip
from tiler.operator import get_operator
from tiler.problem import parse_problem
from tiler.search import search
from tiler.space import load_space


@pytest.mark.parametrize("causal", [0, 1])
@pytest.mark.parametrize("order", [0, 1])
@pytest.mark.parametrize("s1,s2", [(200, 328), (256, 256), (64, 512), (1, 300), (130, 130)])
def test_kernel_matches_sdpa_for_gqa_and_chunked_causal(torch, causal, order, s1, s2):
    """Bottom-right causal mask with S1 < S2, GQA, ragged S1 and S2, keys a multiple of BLOCK_N (every step
    without masks off the causal band), one query row: both launch orders match torch's SDPA."""
    from tiler.ops.flash_attention import triton_kernels as tk

    q, k, v = tk.inputs(2, 8, 2, s1, s2, 64)
    out = tk.attention(
        q, k, v, dict(BLOCK_M=64, BLOCK_N=64, num_stages=2, num_warps=4, ORDER=order), bool(causal)
    )
    ref = tk.reference(q, k, v, bool(causal))
    assert float((out.float() - ref.float()).abs().max()) < 2e-2


def test_measure_runs_the_searched_tiling(torch):
    """`--measure triton`: the exported best tiling of a small causal shape runs, is correct and gives a time."""
    chip = load_chip("h200")
    p = parse_problem("flash_attention", dict(B=1, heads=8, kv_heads=2, S1=512, S2=512, D=64, causal=1))
    res = search(p, chip, load_space("flash_attention", "cuda"), top=1)
    us = get_operator("flash_attention", "cuda").runner("triton")(
        tiling_document(p, chip, res.tiling(0), res.row(0))
    )
    assert 0 < us < 1e5
