"""A user's own Triton flash attention (forward), written the way the Triton tutorial teaches (not the project's kernel).

O = softmax(Q Kᵀ · sm_scale) V per (batch, head) for fp16/bf16 Q, K, V of shape (Z, H, N_CTX, HEAD_DIM), fp32
accumulation, optionally causal (query i sees keys j <= i). Meta-parameters are the tutorial's: ``BLOCK_M`` (query
rows per program), ``BLOCK_N`` (key rows per step), and the launch options ``num_warps``, ``num_stages``; the grid
is the tutorial's (query blocks, Z * H): the query blocks of one head side by side, heads after. One kernel for
both masks: the causal one stops at the query block's diagonal and masks inside every step (simpler than the
tutorial's two-stage loop; a user's kernel need not be the fastest). It is the stand-in for an attention kernel a
user brings to `tiler.triton` (issue 28): bench/gpu/user_autotune.py --kernel attention tunes it with
``@triton.autotune``.

Not a test module (no ``test_`` prefix): it imports without torch or triton, and then ``HAVE_TRITON`` is False and
the kernel is None. ``python3 tests/gpu_user_attention.py`` on a GPU machine checks a few configs against torch.
"""

from __future__ import annotations

import itertools
import math

try:  # guarded: CI has no GPU stack
    import triton
    import triton.language as tl

    HAVE_TRITON = True
except Exception:  # ImportError, or a triton that cannot load its native parts
    triton = None
    tl = None
    HAVE_TRITON = False

OP = "flash_attention"
VENDOR = "SDPA"  # torch.nn.functional.scaled_dot_product_attention, the backend torch's dispatcher picks
# the autotune key: one tuning per (batch, heads, sequence, head size, mask)
KEY = ["Z", "H", "N_CTX", "HEAD_DIM", "CAUSAL"]
META = ("BLOCK_M", "BLOCK_N")
LAUNCH = ("num_warps", "num_stages")

# The user's tuning space, Kernel Tuner style. 4 x 4 x 2 x 4 = 128 in the cross product, 94 after the
# restrictions: the fp32 output block of a 128-wide head takes at most 128 registers a thread; the score block
# (BLOCK_M x BLOCK_N fp32) at most 64; K and V stages in shared memory: 2 x BLOCK_N x 128 x 2 bytes a stage,
# at most 128 KiB.
PARAMS = {
    "BLOCK_M": [32, 64, 128, 256],
    "BLOCK_N": [16, 32, 64, 128],
    "num_warps": [4, 8],
    "num_stages": [1, 2, 3, 4],
}
RESTRICTIONS = [
    "BLOCK_M <= 32 * num_warps",
    "BLOCK_M * BLOCK_N <= 2048 * num_warps",
    "BLOCK_N * num_stages <= 256",
]
# The names are the model's knobs (search_spaces/flash_attention.toml, [cuda.*]): no key map. The kernel has no
# ORDER: its grid is the natural one (query blocks, batch * heads), the operator's built-in default.
KEY_MAP: dict = {}
DEFAULTS: dict = {}
# the problem's fields <- the kernel's arguments: no GQA (kv_heads = heads), self-attention (S1 = S2 = N_CTX)
SHAPE = {"Z": "B", "H": ["heads", "kv_heads"], "N_CTX": ["S1", "S2"], "HEAD_DIM": "D", "CAUSAL": "causal"}

# 14 shapes, none in a bench/data CSV (bench/gpu/user_autotune.py checks): prefill and encoders, causal (7) and not
# (7), short and long, sequence lengths that are not a multiple of 64; head size 128 throughout (each head size and
# mask is a specialisation Triton compiles anew: two here).
SHAPES = [
    ("llama3-8b prefill 3k causal", dict(B=1, heads=32, S=3072, D=128, causal=1)),
    ("odd seq 1000 causal", dict(B=2, heads=32, S=1000, D=128, causal=1)),
    ("mistral prefill 6k causal", dict(B=1, heads=32, S=6144, D=128, causal=1)),
    ("batch 8 x 768 causal", dict(B=8, heads=16, S=768, D=128, causal=1)),
    ("long 12k causal", dict(B=1, heads=16, S=12288, D=128, causal=1)),
    ("batch 32 x 256 causal", dict(B=32, heads=32, S=256, D=128, causal=1)),
    ("40 heads 2k causal", dict(B=2, heads=40, S=2048, D=128, causal=1)),
    ("qwen 1.5k non-causal", dict(B=2, heads=28, S=1536, D=128, causal=0)),
    ("odd seq 2500 non-causal", dict(B=1, heads=40, S=2500, D=128, causal=0)),
    ("577 tokens (patches + cls)", dict(B=16, heads=16, S=577, D=128, causal=0)),
    ("4k non-causal", dict(B=2, heads=8, S=4096, D=128, causal=0)),
    ("1500 frames non-causal", dict(B=4, heads=20, S=1500, D=128, causal=0)),
    ("batch 24 x 512", dict(B=24, heads=16, S=512, D=128, causal=0)),
    ("5k non-causal", dict(B=1, heads=32, S=5120, D=128, causal=0)),
]


def problem(shape: dict) -> dict:
    """The model's problem fields of one shape (tiler's flash_attention: no GQA, S1 = S2)."""
    return dict(
        B=shape["B"],
        heads=shape["heads"],
        kv_heads=shape["heads"],
        S1=shape["S"],
        S2=shape["S"],
        D=shape["D"],
        causal=shape["causal"],
    )


def label(shape: dict) -> str:
    return f"{shape['B']}x{shape['heads']}x{shape['S']}x{shape['D']}{' causal' if shape['causal'] else ''}"


def flops(shape: dict) -> float:
    """Q Kᵀ and P V multiply-adds counted as 2 flops, the causal half where the mask applies."""
    full = 4.0 * shape["B"] * shape["heads"] * shape["S"] ** 2 * shape["D"]
    return full / 2 if shape["causal"] else full


def specialisation(shape: dict) -> tuple:
    """What makes Triton compile anew: the constexprs (head size, mask)."""
    return (shape["D"], shape["causal"])


def user_space() -> dict:
    """The user space as a dict (tiler.triton.load_user_space's input)."""
    return {
        "op": OP,
        "params": {k: list(v) for k, v in PARAMS.items()},
        "restrictions": list(RESTRICTIONS),
        "key_map": dict(KEY_MAP),
        "defaults": dict(DEFAULTS),
        "shape": dict(SHAPE),
    }


def space_points(params: dict | None = None, restrictions: list | None = None) -> list[dict]:
    """Every combination of the parameters' values that passes every restriction, in product order."""
    params = PARAMS if params is None else params
    restrictions = RESTRICTIONS if restrictions is None else restrictions
    names = list(params)
    out = []
    for values in itertools.product(*(params[n] for n in names)):
        point = dict(zip(names, values, strict=True))
        if all(eval(r, {"__builtins__": {}}, dict(point)) for r in restrictions):  # noqa: S307 (our own text)
            out.append(point)
    return out


def to_config(point: dict):
    kw = {k: int(point[k]) for k in META}
    return triton.Config(kw, num_warps=int(point["num_warps"]), num_stages=int(point["num_stages"]))


def config_dict(cfg) -> dict:
    return {**{k: int(cfg.kwargs[k]) for k in META}, "num_warps": cfg.num_warps, "num_stages": cfg.num_stages}


def config_label(cfg_or_point) -> str:
    p = cfg_or_point if isinstance(cfg_or_point, dict) else config_dict(cfg_or_point)
    return f"{p['BLOCK_M']}x{p['BLOCK_N']} w{p['num_warps']} s{p['num_stages']}"


# --- the kernel --------------------------------------------------------------------------------------------


def user_attention(
    Q,
    K,
    V,
    Out,
    sm_scale,
    stride_qz,
    stride_qh,
    stride_qm,
    stride_kz,
    stride_kh,
    stride_kn,
    stride_vz,
    stride_vh,
    stride_vn,
    stride_oz,
    stride_oh,
    stride_om,
    Z,
    H,
    N_CTX,
    HEAD_DIM: tl.constexpr,
    CAUSAL: tl.constexpr,
    BLOCK_M: tl.constexpr,
    BLOCK_N: tl.constexpr,
):
    start_m = tl.program_id(0)  # the query block
    off_hz = tl.program_id(1)  # batch * heads
    off_z = off_hz // H
    off_h = off_hz % H
    q_base = Q + off_z * stride_qz + off_h * stride_qh
    k_base = K + off_z * stride_kz + off_h * stride_kh
    v_base = V + off_z * stride_vz + off_h * stride_vh
    o_base = Out + off_z * stride_oz + off_h * stride_oh

    rows = start_m * BLOCK_M + tl.arange(0, BLOCK_M)
    cols0 = tl.arange(0, BLOCK_N)
    dims = tl.arange(0, HEAD_DIM)
    q = tl.load(q_base + rows[:, None] * stride_qm + dims[None, :], mask=rows[:, None] < N_CTX, other=0.0)

    m_i = tl.full((BLOCK_M,), float("-inf"), dtype=tl.float32)  # running row maximum (log2 units)
    l_i = tl.zeros((BLOCK_M,), dtype=tl.float32)  # running row sum
    acc = tl.zeros((BLOCK_M, HEAD_DIM), dtype=tl.float32)
    qk_scale = sm_scale * 1.44269504  # exp(x) = exp2(x * log2(e))
    if CAUSAL:
        hi = tl.minimum((start_m + 1) * BLOCK_M, N_CTX)  # no key past the block's last query
    else:
        hi = N_CTX
    for start_n in range(0, hi, BLOCK_N):
        cols = start_n + cols0
        k = tl.load(k_base + cols[None, :] * stride_kn + dims[:, None], mask=cols[None, :] < N_CTX, other=0.0)
        qk = tl.dot(q, k) * qk_scale
        keep = cols[None, :] < N_CTX
        if CAUSAL:
            keep = keep & (rows[:, None] >= cols[None, :])
        qk = tl.where(keep, qk, -1.0e6)
        m_new = tl.maximum(m_i, tl.max(qk, 1))
        p = tl.math.exp2(qk - m_new[:, None])
        alpha = tl.math.exp2(m_i - m_new)
        l_i = l_i * alpha + tl.sum(p, 1)
        acc = acc * alpha[:, None]
        v = tl.load(v_base + cols[:, None] * stride_vn + dims[None, :], mask=cols[:, None] < N_CTX, other=0.0)
        acc = tl.dot(p.to(v.dtype), v, acc)
        m_i = m_new
    acc = acc / l_i[:, None]
    tl.store(
        o_base + rows[:, None] * stride_om + dims[None, :],
        acc.to(Out.dtype.element_ty),
        mask=rows[:, None] < N_CTX,
    )


def jit_copy():
    """A fresh triton.jit of the kernel (its own in-memory cache of compiled variants)."""
    return triton.jit(user_attention)


user_attention_kernel = jit_copy() if HAVE_TRITON else None


def autotuned(configs, prune_configs_by=None, kernel=None):
    """The kernel under ``@triton.autotune(configs, key=KEY, prune_configs_by=...)``, on a fresh JITFunction unless
    `kernel` is given."""
    return triton.autotune(configs=list(configs), key=KEY, prune_configs_by=prune_configs_by)(
        kernel if kernel is not None else jit_copy()
    )


def inputs(shape: dict, seed: int = 0, dtype=None) -> dict:
    """Random Q, K, V (Z, H, N_CTX, HEAD_DIM) and an output poisoned with NaN."""
    import torch

    gen = torch.Generator(device="cuda").manual_seed(seed)
    dt = dtype or torch.float16
    dims = (shape["B"], shape["heads"], shape["S"], shape["D"])
    q, k, v = (torch.randn(dims, generator=gen, device="cuda", dtype=torch.float32).to(dt) for _ in range(3))
    o = torch.full(dims, float("nan"), dtype=dt, device="cuda")
    return {"q": q, "k": k, "v": v, "out": o, "causal": bool(shape["causal"])}


def _args(x: dict) -> tuple:
    q, k, v, o = x["q"], x["k"], x["v"], x["out"]
    Z, H, S, D = q.shape
    return (
        q, k, v, o, 1.0 / math.sqrt(D),
        q.stride(0), q.stride(1), q.stride(2),
        k.stride(0), k.stride(1), k.stride(2),
        v.stride(0), v.stride(1), v.stride(2),
        o.stride(0), o.stride(1), o.stride(2),
        Z, H, S, D, x["causal"],
    )  # fmt: skip


def named_args(shape: dict) -> dict:
    """The named arguments the pruner sees at a launch, without a GPU (tensors as dtype-only stand-ins)."""

    class _T:  # dtype and shape only
        dtype = "torch.float16"

    names = list(user_attention.__code__.co_varnames[: user_attention.__code__.co_argcount])
    Z, H, S, D = shape["B"], shape["heads"], shape["S"], shape["D"]
    vals = (_T(), _T(), _T(), _T(), 1.0 / math.sqrt(D), *([0] * 12), Z, H, S, D, bool(shape["causal"]))
    return dict(zip(names, vals, strict=False))


def launch(x: dict, kernel, config=None):
    """O = attention(Q, K, V) through `kernel`: an autotuned kernel (config None: it picks) or a JITFunction with
    `config` (a triton.Config or a point dict)."""
    Z, H, S, _ = x["q"].shape

    def grid(meta):
        return (triton.cdiv(S, meta["BLOCK_M"]), Z * H)

    if config is None:
        kernel[grid](*_args(x))
    else:  # the launch arguments @triton.autotune passes for the same config (so the same compiled variant)
        cfg = to_config(config) if isinstance(config, dict) else config
        kernel[grid](*_args(x), **cfg.all_kwargs())
    return x["out"]


def vendor(x: dict):
    """The vendor call on the same operands: SDPA, the backend torch picks."""
    import torch.nn.functional as F

    def call():
        return F.scaled_dot_product_attention(x["q"], x["k"], x["v"], is_causal=x["causal"])

    return call


def error(x: dict, out=None) -> float:
    """||O - ref|| / ||ref|| against an fp32 attention of the same (rounded) operands; NaN if O holds NaN."""
    import torch
    import torch.nn.functional as F

    ref = F.scaled_dot_product_attention(
        x["q"].float(), x["k"].float(), x["v"].float(), is_causal=x["causal"]
    )
    o = x["out"] if out is None else out
    return float(torch.linalg.vector_norm(o.float() - ref) / torch.linalg.vector_norm(ref))


def check(shape: dict, kernel=None, config=None, seed=0, tol=1e-2) -> float:
    """Run once on fresh random operands (output poisoned) and return rel_err; AssertionError past `tol`."""
    import torch

    x = inputs(shape, seed)
    launch(x, kernel if kernel is not None else user_attention_kernel, config)
    torch.cuda.synchronize()
    err = error(x)
    assert err <= tol, f"{label(shape)} {config}: rel_err {err:.3g} > {tol}"
    return err


if __name__ == "__main__":
    pts = space_points()
    print(f"{len(pts)} configs")
    for shp in [dict(B=2, heads=4, S=1000, D=128, causal=1), dict(B=1, heads=3, S=300, D=64, causal=0)]:
        for p in pts[:: max(1, len(pts) // 6)]:
            print(f"{label(shp)} {config_label(p)} rel_err {check(shp, config=p):.2e}")
