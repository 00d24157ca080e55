"""The project's flash-attention forward kernel in Triton, and how to run, check and time one tiling of it.

Self-contained (imports no `tiler` module) so that the GPU machine can load it by path. One program computes
BLOCK_M query rows of one (batch, head) with the online softmax over the keys in steps of BLOCK_N; under the causal
mask (aligned bottom-right: query i sees keys j <= i + S2 - S1) a program stops at its last visible key.
ORDER 0 launches grid (query blocks, batch*heads); ORDER 1 launches (batch*heads, query blocks) with the last
(heaviest, under the mask) query blocks first. The key steps that every row of the block sees in full (all of
them without the causal mask, when S2 is a multiple of BLOCK_N) load and score without masks; only the steps
across the causal band or past S2 pay for them (since 2026-12-03: the kernel the data before that date timed
masked every step). The knobs are the columns of shared/data/h200_fa_cal.csv.
"""

from __future__ import annotations

import math

try:  # guarded: the module must import where triton is missing (the model never needs it)
    import triton
    import triton.language as tl
except Exception:  # ImportError, or a triton that cannot load its native parts
    triton = None
    tl = None

KNOBS = ("BLOCK_M", "BLOCK_N", "num_stages", "num_warps", "ORDER")
LOG2E = 1.4426950408889634

if triton is not None:

    @triton.jit
    def _fa_step(
        acc,
        row_sum,
        row_max,
        q,
        k_base,
        v_base,
        k_ss,
        v_ss,
        rows,
        cols,
        start,
        S2,
        shift,
        scale_log2,
        BLOCK_N: tl.constexpr,
        MASKED: tl.constexpr,
        CAUSAL: tl.constexpr,
    ):
        """One BLOCK_N step of the online softmax. MASKED: the step may hold keys past S2 or, under the causal
        mask, keys some rows do not see; the other steps load and score without masks."""
        keys = start + tl.arange(0, BLOCK_N)
        if MASKED:
            k_t = tl.load(k_base + keys[None, :] * k_ss + cols[:, None], mask=keys[None, :] < S2, other=0.0)
        else:
            k_t = tl.load(k_base + keys[None, :] * k_ss + cols[:, None])
        s = tl.dot(q, k_t) * scale_log2
        if MASKED:
            visible = keys[None, :] < S2
            if CAUSAL:
                visible = visible & (keys[None, :] <= rows[:, None] + shift)
            s = tl.where(visible, s, float("-inf"))
        new_max = tl.maximum(row_max, tl.max(s, 1))
        p = tl.math.exp2(s - new_max[:, None])
        alpha = tl.math.exp2(row_max - new_max)
        row_sum = row_sum * alpha + tl.sum(p, 1)
        acc = acc * alpha[:, None]
        if MASKED:
            v_blk = tl.load(v_base + keys[:, None] * v_ss + cols[None, :], mask=keys[:, None] < S2, other=0.0)
        else:
            v_blk = tl.load(v_base + keys[:, None] * v_ss + cols[None, :])
        acc = tl.dot(p.to(v_blk.dtype), v_blk, acc)
        return acc, row_sum, new_max

    @triton.jit
    def fa_forward(
        q_ptr,
        k_ptr,
        v_ptr,
        o_ptr,
        scale_log2,
        q_sb,
        q_sh,
        q_ss,
        k_sb,
        k_sh,
        k_ss,
        v_sb,
        v_sh,
        v_ss,
        o_sb,
        o_sh,
        o_ss,
        heads,
        group,
        S1,
        S2,
        n_blocks,
        D: tl.constexpr,
        BLOCK_M: tl.constexpr,
        BLOCK_N: tl.constexpr,
        CAUSAL: tl.constexpr,
        ORDER: tl.constexpr,
    ):
        if ORDER == 0:
            block = tl.program_id(0)
            bh = tl.program_id(1)
        else:  # heads fastest, the last query block first
            bh = tl.program_id(0)
            block = n_blocks - 1 - tl.program_id(1)
        b = bh // heads
        h = bh % heads
        kv = h // group
        rows = block * BLOCK_M + tl.arange(0, BLOCK_M)
        cols = tl.arange(0, D)
        q = tl.load(
            q_ptr + b * q_sb + h * q_sh + rows[:, None] * q_ss + cols[None, :],
            mask=rows[:, None] < S1,
            other=0.0,
        )
        row_max = tl.full([BLOCK_M], float("-inf"), tl.float32)
        row_sum = tl.zeros([BLOCK_M], tl.float32)
        acc = tl.zeros([BLOCK_M, D], tl.float32)
        shift = S2 - S1
        if CAUSAL:
            end = tl.minimum((block + 1) * BLOCK_M + shift, S2)
            # keys every row of the block sees (the block's first row's limit): whole steps of them need no mask
            seen = tl.minimum(tl.maximum(block * BLOCK_M + shift + 1, 0), end)
        else:
            end = S2
            seen = S2
        full = (seen // BLOCK_N) * BLOCK_N
        k_base = k_ptr + b * k_sb + kv * k_sh
        v_base = v_ptr + b * v_sb + kv * v_sh
        for start in range(0, full, BLOCK_N):
            acc, row_sum, row_max = _fa_step(
                acc, row_sum, row_max, q, k_base, v_base, k_ss, v_ss, rows, cols, start, S2, shift,
                scale_log2, BLOCK_N, False, CAUSAL,
            )  # fmt: skip
        for start in range(full, end, BLOCK_N):
            acc, row_sum, row_max = _fa_step(
                acc, row_sum, row_max, q, k_base, v_base, k_ss, v_ss, rows, cols, start, S2, shift,
                scale_log2, BLOCK_N, True, CAUSAL,
            )  # fmt: skip
        acc = acc / row_sum[:, None]
        tl.store(
            o_ptr + b * o_sb + h * o_sh + rows[:, None] * o_ss + cols[None, :],
            acc.to(o_ptr.dtype.element_ty),
            mask=rows[:, None] < S1,
        )


def check_config(config: dict) -> dict:
    """The five knobs as ints; ValueError naming the first bad one."""
    out = {}
    for k in KNOBS:
        if k not in config:
            raise ValueError(f"the config lacks {k}")
        v = config[k]
        if isinstance(v, str):
            v = {"natural": 0, "heavy_first": 1}.get(v, v)
        out[k] = int(v)
    for k in ("BLOCK_M", "BLOCK_N"):
        if out[k] < 16 or out[k] & (out[k] - 1):
            raise ValueError(f"{k} must be a power of two >= 16, got {out[k]}")
    if out["ORDER"] not in (0, 1):
        raise ValueError(f"ORDER must be 0 or 1, got {out['ORDER']}")
    return out


def attention(q, k, v, config: dict, causal: bool, out=None):
    """O = softmax(Q Kᵀ / sqrt(D)) V with one tiling; q [B, heads, S1, D], k and v [B, kv_heads, S2, D]."""
    o = out if out is not None else q.new_empty(q.shape)
    attention_kernel(q, k, v, config, causal, o)
    return o


def attention_kernel(q, k, v, config: dict, causal: bool, o):
    """Launch one tiling into `o`; returns the compiled kernel (its n_regs, n_spills, metadata.shared)."""
    cfg = check_config(config)
    B, heads, S1, D = q.shape
    kv_heads, S2 = k.shape[1], k.shape[2]
    n_blocks = triton.cdiv(S1, cfg["BLOCK_M"])
    grid = (n_blocks, B * heads) if cfg["ORDER"] == 0 else (B * heads, n_blocks)
    return fa_forward[grid](
        q,
        k,
        v,
        o,
        LOG2E / math.sqrt(D),
        *q.stride()[:3],
        *k.stride()[:3],
        *v.stride()[:3],
        *o.stride()[:3],
        heads,
        heads // kv_heads,
        S1,
        S2,
        n_blocks,
        D=D,
        BLOCK_M=cfg["BLOCK_M"],
        BLOCK_N=cfg["BLOCK_N"],
        CAUSAL=bool(causal),
        ORDER=cfg["ORDER"],
        num_warps=cfg["num_warps"],
        num_stages=cfg["num_stages"],
    )


def reference(q, k, v, causal: bool):
    """torch's scaled_dot_product_attention with K/V repeated for GQA and the bottom-right causal mask."""
    import torch
    import torch.nn.functional as F

    group = q.shape[1] // k.shape[1]
    kr, vr = k.repeat_interleave(group, dim=1), v.repeat_interleave(group, dim=1)
    S1, S2 = q.shape[2], k.shape[2]
    if not causal:
        return F.scaled_dot_product_attention(q, kr, vr)
    if S1 == S2:
        return F.scaled_dot_product_attention(q, kr, vr, is_causal=True)
    mask = torch.ones(S1, S2, dtype=torch.bool, device=q.device).tril(diagonal=S2 - S1)
    return F.scaled_dot_product_attention(q, kr, vr, attn_mask=mask)


def inputs(B, heads, kv_heads, S1, S2, D, dtype="fp16", seed=0, device="cuda"):
    import torch

    torch.manual_seed(seed)
    dt = {"fp16": torch.float16, "bf16": torch.bfloat16}[dtype]
    q = torch.randn(B, heads, S1, D, device=device, dtype=dt)
    k = torch.randn(B, kv_heads, S2, D, device=device, dtype=dt)
    v = torch.randn(B, kv_heads, S2, D, device=device, dtype=dt)
    return q, k, v


def time_config(shape: dict, config: dict, dtype="fp16", check=True, warmup=5, rep=25) -> dict:
    """Median milliseconds of one tiling (triton.testing.do_bench: L2 flushed before each run) on fresh random
    inputs, and its largest absolute difference to torch's SDPA."""
    q, k, v = inputs(*(shape[f] for f in ("B", "heads", "kv_heads", "S1", "S2", "D")), dtype=dtype)
    causal = bool(shape.get("causal", 0))
    o = q.new_empty(q.shape)
    err = float("nan")
    if check:
        o.fill_(float("nan"))
        attention(q, k, v, config, causal, o)
        err = float((o.float() - reference(q, k, v, causal).float()).abs().max())
        if not err < 2e-2:
            raise ArithmeticError(f"wrong result: max |error| {err:.3g} against torch's SDPA")
    ms = triton.testing.do_bench(
        lambda: attention(q, k, v, config, causal, o), warmup=warmup, rep=rep, return_mode="median"
    )
    return {"ms": float(ms), "max_abs_err": err}
