"""The project's flash-attention forward kernel in Triton, and how to run, check and time one tiling of it.

Self-contained (imports no `tiler` module) so that the GPU machine can load it by path. One program computes
BLOCK_M query rows of one (batch, head) with the online softmax over the keys in steps of BLOCK_N; under the causal
mask (aligned bottom-right: query i sees keys j <= i + S2 - S1) a program stops at its last visible key.
ORDER 0 launches grid (query blocks, batch*heads); ORDER 1 launches (batch*heads, query blocks) with the last
(heaviest, under the mask) query blocks first. The key steps that every row of the block sees in full (all of
them without the causal mask, when S2 is a multiple of BLOCK_N) load and score without masks; only the steps
across the causal band or past S2 pay for them (since 2026-12-03: the kernel the data before that date timed
masked every step). The knobs are the columns of shared/data/h200_fa_cal.csv.

LOADS (optional, 0 when absent: every config and table without it runs the pointer kernel) picks how a step reads
its K and V blocks: 0 masked pointer loads; 1 the tensor memory accelerator (TMA), through device-side tensor
descriptors (`tl.make_tensor_descriptor`) over the [S2, D] rows of the program's (batch, kv head), which the
copy engine zero-fills past S2 (no load masks). Q and O stay pointer accesses (one load and one store a program).
The descriptors need 16-byte-aligned K/V with unit stride along D and 16-byte multiples for the other strides
(`tma_describable`); LOADS 1 copies a K or V that is not into a contiguous tensor first, inside the call (a timing
includes the copy), and writes each program's descriptors into a global scratch buffer that the launcher takes
from `triton.set_allocator` (set to a torch allocation unless one is set already).
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
OPTIONAL = {"LOADS": (0, 1)}  # knob -> allowed values; absent means the first
# what a runner passes on from a tiling document (the optional ones where present)
RUNNER_KNOBS = (*KNOBS, *OPTIONAL)
# a TMA descriptor's base address and every stride but the innermost: multiples of 16 bytes
TMA_ALIGN_BYTES = 16
LOG2E = 1.4426950408889634

if triton is not None:

    @triton.jit
    def _fa_step(
        acc,
        row_sum,
        row_max,
        q,
        k_src,
        v_src,
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
        LOADS: tl.constexpr,
    ):
        """One BLOCK_N step of the online softmax. MASKED: the step may hold keys past S2 or, under the causal
        mask, keys some rows do not see; the other steps load and score without masks. k_src / v_src: the
        (batch, kv head)'s K and V base pointers (LOADS 0) or tensor descriptors over their [S2, D] rows (LOADS 1,
        zero-filled past S2 by the copy engine, so only the scores are masked)."""
        keys = start + tl.arange(0, BLOCK_N)
        if LOADS == 1:
            k_t = k_src.load([start, 0]).T
        elif MASKED:
            k_t = tl.load(k_src + keys[None, :] * k_ss + cols[:, None], mask=keys[None, :] < S2, other=0.0)
        else:
            k_t = tl.load(k_src + keys[None, :] * k_ss + cols[:, None])
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
        if LOADS == 1:
            v_blk = v_src.load([start, 0])
        elif MASKED:
            v_blk = tl.load(v_src + keys[:, None] * v_ss + cols[None, :], mask=keys[:, None] < S2, other=0.0)
        else:
            v_blk = tl.load(v_src + keys[:, None] * v_ss + cols[None, :])
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
        LOADS: tl.constexpr = 0,
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
        if LOADS == 1:  # this program's [S2, D] rows of K and V, read BLOCK_N rows a step by the copy engine
            k_src = tl.make_tensor_descriptor(k_base, [S2, D], [k_ss, 1], [BLOCK_N, D])
            v_src = tl.make_tensor_descriptor(v_base, [S2, D], [v_ss, 1], [BLOCK_N, D])
        else:
            k_src = k_base
            v_src = v_base
        for start in range(0, full, BLOCK_N):
            acc, row_sum, row_max = _fa_step(
                acc, row_sum, row_max, q, k_src, v_src, k_ss, v_ss, rows, cols, start, S2, shift,
                scale_log2, BLOCK_N, False, CAUSAL, LOADS,
            )  # fmt: skip
        for start in range(full, end, BLOCK_N):
            acc, row_sum, row_max = _fa_step(
                acc, row_sum, row_max, q, k_src, v_src, k_ss, v_ss, rows, cols, start, S2, shift,
                scale_log2, BLOCK_N, True, CAUSAL, LOADS,
            )  # fmt: skip
        acc = acc / row_sum[:, None]
        tl.store(
            o_ptr + b * o_sb + h * o_sh + rows[:, None] * o_ss + cols[None, :],
            acc.to(o_ptr.dtype.element_ty),
            mask=rows[:, None] < S1,
        )


def check_config(config: dict) -> dict:
    """The five knobs, and LOADS (0 when absent), as ints; ValueError naming the first bad one."""
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
    for k, allowed in OPTIONAL.items():
        out[k] = int(config.get(k, allowed[0]))
        if out[k] not in allowed:
            raise ValueError(f"{k} must be one of {', '.join(map(str, allowed))}, got {out[k]}")
    return out


def tma_describable(t) -> bool:
    """Whether a TMA descriptor can describe the rows of `t` ([B, heads, S, D]) as stored: unit stride along D,
    the other strides and the start address multiples of 16 bytes (every program's base is then aligned too)."""
    size = t.element_size()
    return (
        t.stride(3) == 1
        and all(s * size % TMA_ALIGN_BYTES == 0 for s in t.stride()[:3])
        and t.data_ptr() % TMA_ALIGN_BYTES == 0
    )


def _tma_operand(t, name: str):
    """`t` itself where TMA can describe it, else a contiguous copy; ValueError where not even that can be (D
    elements not a multiple of 16 bytes)."""
    if tma_describable(t):
        return t
    c = t.contiguous()
    if (
        c is t
    ):  # contiguous but misaligned: contiguous() returns it as is; a clone is a fresh (aligned) allocation
        c = t.clone()
    if not tma_describable(c):
        raise ValueError(
            f"LOADS 1: {name}'s rows ({t.shape[3]} x {t.element_size()} bytes) are not a multiple of 16 bytes"
        )
    return c


def _ensure_allocator() -> None:
    """Give Triton a global-memory allocator (a torch tensor) for the device-side descriptors' scratch, unless the
    caller set one already."""
    import torch

    try:
        from triton.runtime._allocation import NullAllocator, _allocator

        if not isinstance(_allocator.get(), NullAllocator):
            return
    except Exception:  # noqa: BLE001 - a private module: absent or changed, set ours
        pass

    def alloc(size: int, alignment: int, stream):
        return torch.empty(size, dtype=torch.int8, device="cuda")

    triton.set_allocator(alloc)


def attention(q, k, v, config: dict, causal: bool, out=None):
    """O = softmax(Q Kᵀ / sqrt(D)) V with one tiling; q [B, heads, S1, D], k and v [B, kv_heads, S2, D]."""
    o = out if out is not None else q.new_empty(q.shape)
    attention_kernel(q, k, v, config, causal, o)
    return o


def attention_kernel(q, k, v, config: dict, causal: bool, o):
    """Launch one tiling into `o`; returns the compiled kernel (its n_regs, n_spills, metadata.shared). LOADS 1
    copies a K or V that TMA cannot describe into a contiguous tensor first (`_tma_operand`)."""
    cfg = check_config(config)
    if cfg["LOADS"] == 1:
        k, v = _tma_operand(k, "K"), _tma_operand(v, "V")
        _ensure_allocator()
    strides = [t.stride()[:3] for t in (q, k, v, o)]
    grid, ints, kw = launch_args(cfg, causal, tuple(q.shape), tuple(k.shape), strides)
    return fa_forward[grid](q, k, v, o, *ints, **kw)


def launch_args(cfg: dict, causal: bool, q_shape: tuple, kv_shape: tuple, strides: list) -> tuple:
    """(grid, the scalar arguments after the four tensors, the keyword arguments) of `fa_forward` for a checked
    config, q [B, heads, S1, D], k/v [B, kv_heads, S2, D] and the first three strides of q, k, v, o: the one
    place the launch is spelled, for `attention_kernel` and `precompile`."""
    B, heads, S1, D = q_shape
    kv_heads, S2 = kv_shape[1], kv_shape[2]
    n_blocks = -(-S1 // cfg["BLOCK_M"])
    grid = (n_blocks, B * heads) if cfg["ORDER"] == 0 else (B * heads, n_blocks)
    ints = (
        LOG2E / math.sqrt(D),
        *(s for st in strides for s in st),
        heads,
        heads // kv_heads,
        S1,
        S2,
        n_blocks,
    )
    kw = dict(D=D, BLOCK_M=cfg["BLOCK_M"], BLOCK_N=cfg["BLOCK_N"], CAUSAL=bool(causal), ORDER=cfg["ORDER"])
    kw |= dict(LOADS=cfg["LOADS"], num_warps=cfg["num_warps"], num_stages=cfg["num_stages"])
    return grid, ints, kw


def precompile(shape: dict, cfg: dict, dtype: str = "fp16"):
    """Compile, into Triton's on-disk cache, the kernel `attention_kernel` runs for this shape (contiguous
    tensors; tiny ones with the real integers, so the specialisation is the timed run's) without launching it;
    returns Triton's compiled kernel (n_regs, n_spills, metadata.shared). bench/gpu/compile_pool.py calls it."""
    import torch

    cfg = check_config(cfg)
    B, heads, kv_heads, S1, S2, D = (int(shape[f]) for f in ("B", "heads", "kv_heads", "S1", "S2", "D"))
    q_st, kv_st = (heads * S1 * D, S1 * D, D), (kv_heads * S2 * D, S2 * D, D)
    grid, ints, kw = launch_args(
        cfg, bool(shape.get("causal", 0)), (B, heads, S1, D), (B, kv_heads, S2, D), [q_st, kv_st, kv_st, q_st]
    )
    dt = {"fp16": torch.float16, "bf16": torch.bfloat16}[dtype]
    t = [torch.empty(16, dtype=dt, device="cuda") for _ in range(4)]
    return fa_forward.warmup(*t, *ints, grid=grid, **kw)


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
