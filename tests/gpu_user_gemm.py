"""A user's own Triton GEMM, written the way the Triton tutorial teaches (not the project's kernel).

C[M, N] = A[M, K] @ B[K, N] for fp16/bf16 operands with any strides, fp32 accumulation. Meta-parameters are the
tutorial's: ``BLOCK_SIZE_M``, ``BLOCK_SIZE_N``, ``BLOCK_SIZE_K``, ``GROUP_SIZE_M`` and the launch options
``num_warps``, ``num_stages``. Programs are launched in the tutorial's grouped order (``GROUP_SIZE_M`` tile-rows
walked column by column, for L2 reuse); there is no split-K. It is the stand-in for a kernel a user brings to
`tiler.triton` (issue 28): tests/test_gpu_user_autotune.py and bench/gpu/user_autotune.py tune it with
``@triton.autotune``.

Not a test module (no ``test_`` prefix): it imports without torch or triton, and then ``HAVE_TRITON`` is False and
the kernel is None. ``python3 tests/gpu_user_gemm.py`` on a GPU machine checks a few configs against torch.matmul.
"""

from __future__ import annotations

import itertools

try:  # guarded: CI has no GPU stack
    import triton
    import triton.language as tl

    HAVE_TRITON = True
except Exception:  # ImportError, or a triton that cannot load its native parts
    triton = None
    tl = None
    HAVE_TRITON = False

OP = "matmul"
VENDOR = "cuBLAS"  # torch.matmul on the same operands
KEY = ["M", "N", "K"]  # the autotune key: one tuning per problem shape (and dtype)
META = ("BLOCK_SIZE_M", "BLOCK_SIZE_N", "BLOCK_SIZE_K", "GROUP_SIZE_M")
LAUNCH = ("num_warps", "num_stages")

# The user's tuning space, Kernel Tuner style: each parameter's values and restrictions as expressions over
# them. 76 configs. The restrictions: operand stages fit 192 KiB of shared memory; the fp32 accumulator takes at
# most 128 registers a thread; 8 warps only for tiles of at least 128 x 128; BLOCK_SIZE_K x num_stages (K columns
# in flight) between 160 and 384.
PARAMS = {
    "BLOCK_SIZE_M": [32, 64, 128, 256],
    "BLOCK_SIZE_N": [32, 64, 128, 256],
    "BLOCK_SIZE_K": [32, 64, 128],
    "GROUP_SIZE_M": [8],
    "num_warps": [4, 8],
    "num_stages": [3, 4, 5],
}
RESTRICTIONS = [
    "(BLOCK_SIZE_M + BLOCK_SIZE_N) * BLOCK_SIZE_K * 2 * num_stages <= 196608",
    "BLOCK_SIZE_M * BLOCK_SIZE_N <= 128 * 32 * num_warps",
    "num_warps == 4 or BLOCK_SIZE_M * BLOCK_SIZE_N >= 16384",
    "160 <= BLOCK_SIZE_K * num_stages <= 384",
]


# The user's meta-parameter names -> the model's knobs (search_spaces/matmul.toml, [cuda.*]); the kernel has no
# ORDER (it always launches grouped) and no SPLIT_K (1).
KEY_MAP = {
    "BLOCK_SIZE_M": "BLOCK_M",
    "BLOCK_SIZE_N": "BLOCK_N",
    "BLOCK_SIZE_K": "BLOCK_K",
    "GROUP_SIZE_M": "GROUP_M",
    "num_warps": "num_warps",
    "num_stages": "num_stages",
}
DEFAULTS = {"ORDER": 1, "SPLIT_K": 1}
SHAPE = {"M": "M", "N": "N", "K": "K"}  # the problem's fields <- the kernel's (autotune key) arguments


# 14 shapes (name, problem), none in a bench/data CSV (bench/gpu/user_autotune.py checks); one odd-N shape early, so
# the second specialisation's compiles come early too
SHAPES = [
    ("llama3-8b gate_up decode", dict(M=32, N=28672, K=4096)),
    ("gpt2-large lm_head", dict(M=256, N=50257, K=1280)),
    ("qwen2.5-7b gate_up prefill", dict(M=1024, N=37888, K=3584)),
    ("odd K 4000", dict(M=1024, N=4096, K=4000)),
    ("llama3-70b qkv tp8 decode", dict(M=16, N=1280, K=8192)),
    ("llama3-70b gate_up tp8 prefill", dict(M=2048, N=7168, K=8192)),
    ("odd K 1200", dict(M=2048, N=2048, K=1200)),
    ("qwen1.5-moe expert gate_up", dict(M=768, N=2816, K=2048)),
    ("llama3-8b down decode", dict(M=64, N=4096, K=14336)),
    ("classifier head N=1000", dict(M=512, N=1000, K=2048)),
    ("llama3-70b down prefill", dict(M=512, N=8192, K=28672)),
    ("odd K 720", dict(M=4096, N=1024, K=720)),
    ("qwen2.5-7b down decode", dict(M=32, N=3584, K=18944)),
    ("qwen1.5-moe expert down", dict(M=768, N=2048, K=1408)),
]


def problem(shape: dict) -> dict:
    """The model's problem fields of one shape (nn: A row-major M x K, B row-major K x N)."""
    return dict(shape)


def label(shape: dict) -> str:
    return f"{shape['M']}x{shape['N']}x{shape['K']}"


def flops(shape: dict) -> float:
    return 2.0 * shape["M"] * shape["N"] * shape["K"]


def specialisation(shape: dict) -> tuple:
    """What makes Triton compile anew: its divisibility-by-16 specialisation of the integer arguments."""
    return tuple(shape[f] % 16 == 0 for f in ("M", "N", "K"))


def user_space() -> dict:
    """The user space as a dict (tiler.triton.load_user_space's input): op, params, restrictions, key_map, defaults,
    shape."""
    return {
        "op": "matmul",
        "params": {k: list(v) for k, v in PARAMS.items()},
        "restrictions": list(RESTRICTIONS),
        "key_map": dict(KEY_MAP),
        "defaults": dict(DEFAULTS),
        "shape": dict(SHAPE),
    }


def user_space_toml() -> str:
    """The same space as TOML text (for `tiler search --space FILE`)."""

    def val(v):
        if isinstance(v, str):
            return '"' + v.replace("\\", "\\\\").replace('"', '\\"') + '"'
        if isinstance(v, list):
            return "[" + ", ".join(val(x) for x in v) + "]"
        return str(v)

    sp = user_space()
    lines = ["# the user's GEMM of tests/gpu_user_gemm.py", f"op = {val(sp['op'])}", "restrictions = ["]
    lines += [f"    {val(r)}," for r in sp["restrictions"]] + ["]"]
    for table in ("params", "key_map", "defaults", "shape"):
        lines += ["", f"[{table}]"] + [f"{k} = {val(v)}" for k, v in sp[table].items()]
    return "\n".join(lines) + "\n"


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
    """A triton.Config of one point (meta-parameters as kwargs, the launch options as such)."""
    kw = {k: int(point[k]) for k in META}
    return triton.Config(kw, num_warps=int(point["num_warps"]), num_stages=int(point["num_stages"]))


def config_dict(cfg) -> dict:
    """The point of a triton.Config (the inverse of to_config)."""
    return {**{k: int(cfg.kwargs[k]) for k in META}, "num_warps": cfg.num_warps, "num_stages": cfg.num_stages}


def config_label(cfg_or_point) -> str:
    p = cfg_or_point if isinstance(cfg_or_point, dict) else config_dict(cfg_or_point)
    return (
        f"{p['BLOCK_SIZE_M']}x{p['BLOCK_SIZE_N']}x{p['BLOCK_SIZE_K']} g{p['GROUP_SIZE_M']} "
        f"w{p['num_warps']} s{p['num_stages']}"
    )


def user_configs() -> list:
    return [to_config(p) for p in space_points()]


# --- the kernel --------------------------------------------------------------------------------------------
# Kept as a plain function so that each `jit_copy()` is a separate JITFunction (its own compiled-kernel cache):
# a full and a pruned autotune in one process then each compile what they run.


def user_gemm(
    a_ptr,
    b_ptr,
    c_ptr,
    M,
    N,
    K,
    stride_am,
    stride_ak,
    stride_bk,
    stride_bn,
    stride_cm,
    stride_cn,
    BLOCK_SIZE_M: tl.constexpr,
    BLOCK_SIZE_N: tl.constexpr,
    BLOCK_SIZE_K: tl.constexpr,
    GROUP_SIZE_M: tl.constexpr,
):
    # program id -> output tile, grouped: GROUP_SIZE_M tile-rows share the columns of B while they run
    pid = tl.program_id(axis=0)
    row_tiles = tl.cdiv(M, BLOCK_SIZE_M)
    col_tiles = tl.cdiv(N, BLOCK_SIZE_N)
    in_group = GROUP_SIZE_M * col_tiles
    first_row = (pid // in_group) * GROUP_SIZE_M
    group_rows = tl.minimum(row_tiles - first_row, GROUP_SIZE_M)
    pid_m = first_row + (pid % in_group) % group_rows
    pid_n = (pid % in_group) // group_rows

    # rows of A and columns of B, wrapped past the edge so every load stays in bounds (the store masks them)
    rows = pid_m * BLOCK_SIZE_M + tl.arange(0, BLOCK_SIZE_M)
    cols = pid_n * BLOCK_SIZE_N + tl.arange(0, BLOCK_SIZE_N)
    ks = tl.arange(0, BLOCK_SIZE_K)
    a_ptrs = a_ptr + (rows % M)[:, None] * stride_am + ks[None, :] * stride_ak
    b_ptrs = b_ptr + ks[:, None] * stride_bk + (cols % N)[None, :] * stride_bn

    acc = tl.zeros((BLOCK_SIZE_M, BLOCK_SIZE_N), dtype=tl.float32)
    for step in range(0, tl.cdiv(K, BLOCK_SIZE_K)):
        k_left = K - step * BLOCK_SIZE_K  # the last step may be partial: zeros past K
        a = tl.load(a_ptrs, mask=ks[None, :] < k_left, other=0.0)
        b = tl.load(b_ptrs, mask=ks[:, None] < k_left, other=0.0)
        acc = tl.dot(a, b, acc)
        a_ptrs += BLOCK_SIZE_K * stride_ak
        b_ptrs += BLOCK_SIZE_K * stride_bk

    c_ptrs = c_ptr + rows[:, None] * stride_cm + cols[None, :] * stride_cn
    tl.store(c_ptrs, acc.to(c_ptr.dtype.element_ty), mask=(rows[:, None] < M) & (cols[None, :] < N))


def jit_copy():
    """A fresh triton.jit of the kernel (its own in-memory cache of compiled variants)."""
    return triton.jit(user_gemm)


user_gemm_kernel = jit_copy() if HAVE_TRITON else None


def autotuned(configs, prune_configs_by=None, kernel=None):
    """The kernel under ``@triton.autotune(configs, key=["M", "N", "K"], prune_configs_by=...)``, on a fresh
    JITFunction unless `kernel` is given."""
    return triton.autotune(configs=list(configs), key=KEY, prune_configs_by=prune_configs_by)(
        kernel if kernel is not None else jit_copy()
    )


def _grid(M, N):
    return lambda meta: (triton.cdiv(M, meta["BLOCK_SIZE_M"]) * triton.cdiv(N, meta["BLOCK_SIZE_N"]),)


def _args(a, b, c):
    M, K = a.shape
    N = b.shape[1]
    return (a, b, c, M, N, K, a.stride(0), a.stride(1), b.stride(0), b.stride(1), c.stride(0), c.stride(1))


def matmul(a, b, kernel, config=None, out=None):
    """C = A @ B through `kernel`: an autotuned kernel (config None: it picks) or a JITFunction with `config` (a
    triton.Config or a point dict)."""
    import torch

    M, K = a.shape
    K2, N = b.shape
    assert K == K2, f"inner dimensions differ: {a.shape} @ {b.shape}"
    c = out if out is not None else torch.empty((M, N), dtype=a.dtype, device=a.device)
    if config is None:
        kernel[_grid(M, N)](*_args(a, b, c))
    else:  # the launch arguments @triton.autotune passes for the same config (so the same compiled variant)
        cfg = to_config(config) if isinstance(config, dict) else config
        kernel[_grid(M, N)](*_args(a, b, c), **cfg.all_kwargs())
    return c


def rel_err(c, a, b) -> float:
    """||C - A @ B|| / ||A @ B|| against an fp32 product of the same (rounded) operands; NaN if C holds NaN."""
    import torch

    ref = torch.matmul(a.float(), b.float())
    return float(torch.linalg.vector_norm(c.float() - ref) / torch.linalg.vector_norm(ref))


def check(M, N, K, kernel=None, config=None, dtype=None, seed=0, tol=1e-2) -> float:
    """Run the kernel once on fresh random operands (output poisoned with NaN first) and return rel_err against
    torch; AssertionError past `tol` (NaN fails)."""
    import torch

    gen = torch.Generator(device="cuda").manual_seed(seed)
    dt = dtype or torch.float16
    a = torch.randn((M, K), generator=gen, device="cuda", dtype=torch.float32).to(dt)
    b = torch.randn((K, N), generator=gen, device="cuda", dtype=torch.float32).to(dt)
    c = torch.full((M, N), float("nan"), dtype=dt, device="cuda")
    matmul(a, b, kernel if kernel is not None else user_gemm_kernel, config, out=c)
    torch.cuda.synchronize()
    err = rel_err(c, a, b)
    assert err <= tol, f"{M}x{N}x{K} {config}: rel_err {err:.3g} > {tol}"
    return err


# --- the bench's interface (bench/gpu/user_autotune.py: one shape's operands, a launch, the vendor call, the error) ---


def inputs(shape: dict, seed: int = 0, dtype=None) -> dict:
    """Random A (M x K), B (K x N) and an output poisoned with NaN."""
    import torch

    gen = torch.Generator(device="cuda").manual_seed(seed)
    dt = dtype or torch.float16
    M, N, K = shape["M"], shape["N"], shape["K"]
    a = torch.randn((M, K), generator=gen, device="cuda", dtype=torch.float32).to(dt)
    b = torch.randn((K, N), generator=gen, device="cuda", dtype=torch.float32).to(dt)
    return {"a": a, "b": b, "out": torch.full((M, N), float("nan"), dtype=dt, device="cuda")}


def launch(x: dict, kernel, config=None):
    return matmul(x["a"], x["b"], kernel, config, out=x["out"])


def vendor(x: dict):
    import torch

    def call():
        return torch.matmul(x["a"], x["b"], out=x["out"])

    return call


def error(x: dict, out=None) -> float:
    """rel_err of the output (or `out`, the vendor's result) against an fp32 product."""
    return rel_err(x["out"] if out is None else out, x["a"], x["b"])


def named_args(shape: dict) -> dict:
    """The named arguments the pruner sees at a launch, without a GPU (tensors as dtype-only stand-ins)."""

    class _T:
        dtype = "torch.float16"

    M, N, K = shape["M"], shape["N"], shape["K"]
    vals = (_T(), _T(), _T(), M, N, K, K, 1, N, 1, N, 1)
    names = user_gemm.__code__.co_varnames[: user_gemm.__code__.co_argcount]
    return dict(zip(names, vals, strict=False))


if __name__ == "__main__":
    pts = space_points()
    print(f"{len(pts)} configs")
    for M, N, K in [(16, 1280, 8192), (1000, 1000, 1000), (257, 50257, 96)]:
        for p in pts[:: max(1, len(pts) // 6)]:
            print(f"{M}x{N}x{K} {config_label(p)} rel_err {check(M, N, K, config=p):.2e}")
