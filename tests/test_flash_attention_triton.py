"""The project's flash-attention kernel and its `--measure triton` runner on a GPU (skipped without one)."""

from __future__ import annotations

import pytest

from tiler.export import tiling_document
from tiler.hardware import load_chip
from tiler.operator import get_operator
from tiler.problem import parse_problem
from tiler.search import search
from tiler.space import load_space


@pytest.mark.parametrize("loads", [0, 1])
@pytest.mark.parametrize("causal", [0, 1])
@pytest.mark.parametrize("order", [0, 1])
@pytest.mark.parametrize("s1,s2", [(200, 328), (256, 256), (64, 512), (1, 300), (130, 130)])
def test_kernel_matches_sdpa_for_gqa_and_chunked_causal(torch, causal, order, s1, s2, loads):
    """Bottom-right causal mask with S1 < S2, GQA, ragged S1 and S2, keys a multiple of BLOCK_N (every step
    without masks off the causal band), one query row: both launch orders, with pointer (LOADS 0) and TMA
    (LOADS 1: keys past S2 zero-filled by the copy engine) loads, match torch's SDPA."""
    from tiler.ops.flash_attention import triton_kernels as tk

    q, k, v = tk.inputs(2, 8, 2, s1, s2, 64)
    cfg = dict(BLOCK_M=64, BLOCK_N=64, num_stages=2, num_warps=4, ORDER=order, LOADS=loads)
    out = tk.attention(q, k, v, cfg, bool(causal))
    ref = tk.reference(q, k, v, bool(causal))
    assert float((out.float() - ref.float()).abs().max()) < 2e-2


@pytest.mark.parametrize("layout", ["bshd", "misaligned"])
def test_tma_loads_take_strided_and_misaligned_kv(torch, layout):
    """LOADS 1 on K/V stored [B, S2, kv_heads, D] (described as stored: every stride a 16-byte multiple) and on
    K/V starting one element past a 16-byte boundary (copied to contiguous tensors first): both match SDPA."""
    from tiler.ops.flash_attention import triton_kernels as tk

    q, k, v = tk.inputs(2, 8, 2, 200, 328, 64)
    if layout == "bshd":
        k, v = (t.transpose(1, 2).contiguous().transpose(1, 2) for t in (k, v))
        assert tk.tma_describable(k) and not k.is_contiguous()
    else:
        k, v = (
            torch.empty(t.numel() + 1, dtype=t.dtype, device=t.device)[1:].view(t.shape).copy_(t)
            for t in (k, v)
        )
        assert not tk.tma_describable(k)
    cfg = dict(BLOCK_M=64, BLOCK_N=32, num_stages=3, num_warps=4, ORDER=1, LOADS=1)
    for causal in (False, True):
        out = tk.attention(q, k, v, cfg, causal)
        assert float((out.float() - tk.reference(q, k, v, causal).float()).abs().max()) < 2e-2


def test_check_config_takes_loads_0_or_1_and_defaults_to_0():
    """LOADS absent is the pointer kernel (every config written before the knob runs as before); 2 is refused
    with a message naming the knob and its values."""
    from tiler.ops.flash_attention import triton_kernels as tk

    base = dict(BLOCK_M=64, BLOCK_N=64, num_stages=2, num_warps=4, ORDER=0)
    assert tk.check_config(base)["LOADS"] == 0
    assert tk.check_config(dict(base, LOADS=1))["LOADS"] == 1
    with pytest.raises(ValueError, match=r"LOADS must be one of 0, 1, got 2"):
        tk.check_config(dict(base, LOADS=2))


class _Strided:
    """What `tma_describable` and `_tma_operand` read of a tensor: strides, element size, address."""

    def __init__(self, strides, size=2, ptr=0, shape=(1, 1, 1, 64)):
        self._strides, self._size, self.ptr, self.shape = strides, size, ptr, shape

    def stride(self, i=None):
        return self._strides if i is None else self._strides[i]

    def element_size(self):
        return self._size

    def data_ptr(self):
        return self.ptr

    def contiguous(self):
        """As torch's: the tensor itself where its strides are already contiguous (at its own address), else a
        fresh allocation (address 0 here, aligned)."""
        s = self.shape
        dense = (s[1] * s[2] * s[3], s[2] * s[3], s[3], 1)
        return self if tuple(self._strides) == dense else _Strided(dense, self._size, 0, s)

    def clone(self):
        """A fresh allocation with the same strides."""
        return _Strided(self._strides, self._size, 0, self.shape)


def test_tma_operand_keeps_describable_kv_and_copies_the_rest():
    """LOADS 1's launcher: K/V whose strides and start are 16-byte multiples go in as stored; a misaligned start
    or a non-unit D stride is made contiguous; rows of D elements that are not 16 bytes are refused."""
    from tiler.ops.flash_attention import triton_kernels as tk

    ok = _Strided((4 * 328 * 64, 64, 4 * 64, 1), shape=(2, 4, 328, 64))  # [B, S, H, D] seen as [B, H, S, D]
    assert tk._tma_operand(ok, "K") is ok
    misaligned_dense = _Strided(
        (4 * 328 * 64, 328 * 64, 64, 1), ptr=2, shape=ok.shape
    )  # contiguous() is itself
    for bad in (
        _Strided(ok.stride(), ptr=2, shape=ok.shape),
        _Strided((1, 2, 3, 2), shape=ok.shape),
        misaligned_dense,
    ):
        assert not tk.tma_describable(bad)
        fixed = tk._tma_operand(bad, "K")
        assert fixed is not bad and tk.tma_describable(fixed)
    with pytest.raises(ValueError, match="LOADS 1: V's rows"):
        tk._tma_operand(_Strided((12, 12, 12, 2), shape=(1, 1, 1, 12)), "V")


def test_runner_passes_loads_through_from_the_document():
    """`--measure triton` hands LOADS to the kernel where the tiling document has it (a searched document: the
    number, which the kernel's check_config reads), and leaves it out (the kernel's default, the pointer loads)
    where it does not."""
    from tiler.ops.flash_attention import triton_runner

    chip = load_chip("h200")
    p = parse_problem("flash_attention", dict(B=1, heads=8, kv_heads=2, S1=512, S2=512, D=64, causal=1))
    res = search(p, chip, load_space("flash_attention", "cuda"), top=1)
    doc = tiling_document(p, chip, res.tiling(0), res.row(0))
    # the searched knob, a number
    assert triton_runner.tiling_from_doc(doc)[1]["LOADS"] == res.tiling(0)["LOADS"]
    del doc["tiling"]["LOADS"]  # a document written before the knob
    assert "LOADS" not in triton_runner.tiling_from_doc(doc)[1]
    doc["tiling"]["LOADS"] = 1
    assert triton_runner.tiling_from_doc(doc)[1]["LOADS"] == 1


def test_measure_runs_the_searched_tiling(torch):
    """`--measure triton`: the exported best tiling of a small causal shape runs, is correct and gives a time."""
    chip = load_chip("h200")
    p = parse_problem("flash_attention", dict(B=1, heads=8, kv_heads=2, S1=512, S2=512, D=64, causal=1))
    res = search(p, chip, load_space("flash_attention", "cuda"), top=1)
    us = get_operator("flash_attention", "cuda").runner("triton")(
        tiling_document(p, chip, res.tiling(0), res.row(0))
    )
    assert 0 < us < 1e5
