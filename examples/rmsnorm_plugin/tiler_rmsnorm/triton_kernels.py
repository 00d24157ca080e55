"""Triton RMSNorm kernels: ``y[r, :] = x[r, :] / sqrt(mean(x[r, :]**2) + eps) * w`` over ``rows`` rows of
``hidden`` elements (row-major, contiguous; fp16, bf16 or fp32 in and out, fp32 arithmetic).

The knob names (``BLOCK_N``, ``ROWS``, ``num_warps``) are a fixed contract with the cost model (cuda.py). A
program handles ``ROWS`` rows, grid = ``cdiv(rows, ROWS)``:

* ``BLOCK_N >= hidden``: **one pass** (``_rmsnorm_row_kernel``): one ``[ROWS, BLOCK_N]`` tile in registers: load,
  sum of squares, rsqrt, load the weight once for the ROWS rows, scale, store. One read and one write of x.
* ``BLOCK_N < hidden``: **two passes** (``_rmsnorm_chunked_kernel``): a loop accumulates the squares of each
  chunk in an fp32 tile (one reduction after the loop), a second loop reads each chunk again with its weight chunk,
  scales and stores: two reads and one write.

Row offsets are int64, column offsets int32 (``hidden < 2**31``). The module imports without torch or triton (triton
under a guard, torch inside the functions that need it), so ``validate`` and ``kernel_name`` work anywhere; tiler
imports it only when a measurement runs (triton_runner.py).
"""

from __future__ import annotations

try:  # guarded: the module must import where triton is absent
    import triton
    import triton.language as tl
except ImportError:  # pragma: no cover - exercised only without triton
    triton = None
    tl = None

CFG_KEYS = ("BLOCK_N", "ROWS", "num_warps")
MAX_THREAD_ELEMS = 128  # fp32 elements a thread holds (cuda.MAX_THREAD_ELEMS: the model's `registers` rule)
EPS = 1e-6
REL_ERR_MAX = (
    1e-2  # relative L2 error against the fp32 torch reference (fp16/bf16 outputs round at 2**-8 / 2**-11)
)


def _pow2(v: int) -> bool:
    return v >= 1 and (v & (v - 1)) == 0


def normalize_cfg(cfg: dict) -> dict:
    """cfg with every knob an int; ROWS defaults to 1, num_warps to 4."""
    return {
        "BLOCK_N": int(cfg["BLOCK_N"]),
        "ROWS": int(cfg.get("ROWS", 1)),
        "num_warps": int(cfg.get("num_warps", 4)),
    }


def kernel_name(cfg: dict, hidden: int) -> str:
    """Which kernel runs the tiling for rows of `hidden` elements."""
    return "_rmsnorm_row_kernel" if normalize_cfg(cfg)["BLOCK_N"] >= hidden else "_rmsnorm_chunked_kernel"


def validate(cfg: dict, hidden: int | None = None) -> str | None:
    """Why ``cfg`` cannot run (a sentence), or None when it can."""
    try:
        c = normalize_cfg(cfg)
    except (KeyError, TypeError, ValueError) as e:
        return f"bad config {cfg}: {type(e).__name__}: {e}"
    if not _pow2(c["BLOCK_N"]) or not 16 <= c["BLOCK_N"] <= 2**20:
        return f"BLOCK_N {c['BLOCK_N']} must be a power of two in [16, 2**20] (tl.arange)"
    if not _pow2(c["ROWS"]) or c["ROWS"] > 256:
        return f"ROWS {c['ROWS']} must be a power of two <= 256"
    if not _pow2(c["num_warps"]) or c["num_warps"] > 32:
        return f"num_warps {c['num_warps']} must be a power of two <= 32"
    if hidden is not None:
        if int(hidden) < 1:
            return f"hidden = {hidden}: at least one element per row"
        tiles = 1 if c["BLOCK_N"] >= int(hidden) else 2
        per_thread = (c["ROWS"] * c["BLOCK_N"] * tiles + c["BLOCK_N"]) / (32 * c["num_warps"])
        if per_thread > MAX_THREAD_ELEMS:
            return f"{per_thread:g} fp32 elements per thread > {MAX_THREAD_ELEMS} (tile, accumulator, weight)"
    return None


# --- kernels -----------------------------------------------------------------------------------------

if triton is not None:

    @triton.jit
    def _rmsnorm_row_kernel(
        x_ptr, w_ptr, y_ptr, n_rows, hidden, eps, ROWS: tl.constexpr, BLOCK_N: tl.constexpr
    ):
        """Whole rows in registers: one read, the weight once, one write."""
        pid = tl.program_id(0)
        rows = pid * ROWS + tl.arange(0, ROWS)
        rmask = rows < n_rows
        base = rows.to(tl.int64) * hidden
        cols = tl.arange(0, BLOCK_N)
        cmask = cols < hidden
        m = rmask[:, None] & cmask[None, :]
        offs = base[:, None] + cols[None, :]
        x = tl.load(x_ptr + offs, mask=m, other=0.0).to(tl.float32)
        rstd = 1.0 / tl.sqrt(tl.sum(x * x, axis=1) / hidden + eps)
        w = tl.load(w_ptr + cols, mask=cmask, other=0.0).to(tl.float32)
        y = x * rstd[:, None] * w[None, :]
        tl.store(y_ptr + offs, y.to(y_ptr.dtype.element_ty), mask=m)

    @triton.jit
    def _rmsnorm_chunked_kernel(
        x_ptr, w_ptr, y_ptr, n_rows, hidden, eps, ROWS: tl.constexpr, BLOCK_N: tl.constexpr
    ):
        """Two passes: accumulate the squares chunk by chunk (one reduction after the loop), then read again with
        the weight chunk, scale and write."""
        pid = tl.program_id(0)
        rows = pid * ROWS + tl.arange(0, ROWS)
        rmask = rows < n_rows
        base = rows.to(tl.int64) * hidden
        cols = tl.arange(0, BLOCK_N)
        acc = tl.zeros((ROWS, BLOCK_N), tl.float32)
        for start in range(0, hidden, BLOCK_N):
            c = start + cols
            m = rmask[:, None] & (c < hidden)[None, :]
            x = tl.load(x_ptr + base[:, None] + c[None, :], mask=m, other=0.0).to(tl.float32)
            acc += x * x
        rstd = 1.0 / tl.sqrt(tl.sum(acc, axis=1) / hidden + eps)
        rstd_col = rstd[:, None]
        for start in range(0, hidden, BLOCK_N):
            c = start + cols
            cmask = c < hidden
            m = rmask[:, None] & cmask[None, :]
            offs = base[:, None] + c[None, :]
            x = tl.load(x_ptr + offs, mask=m, other=0.0).to(tl.float32)
            w = tl.load(w_ptr + c, mask=cmask, other=0.0).to(tl.float32)
            tl.store(y_ptr + offs, (x * rstd_col * w[None, :]).to(y_ptr.dtype.element_ty), mask=m)


def launch(x, w, y, cfg: dict, eps: float = EPS) -> None:
    """Run one tiling: x and y [rows, hidden] and w [hidden], contiguous, one dtype, on one CUDA device."""
    if triton is None:
        raise ImportError("triton is not installed")
    n_rows, hidden = (int(v) for v in x.shape)
    why = validate(cfg, hidden)
    if why:
        raise ValueError(why)
    if tuple(y.shape) != (n_rows, hidden) or tuple(w.shape) != (hidden,):
        raise ValueError(f"x {tuple(x.shape)}, w {tuple(w.shape)}, y {tuple(y.shape)}: shapes do not match")
    if not (x.is_contiguous() and y.is_contiguous() and w.is_contiguous()):
        raise ValueError("x, w and y must be contiguous")
    if hidden >= 2**31:
        raise ValueError("hidden >= 2**31: column offsets are int32")
    c = normalize_cfg(cfg)
    kern = _rmsnorm_row_kernel if kernel_name(c, hidden) == "_rmsnorm_row_kernel" else _rmsnorm_chunked_kernel
    grid = (triton.cdiv(n_rows, c["ROWS"]),)
    kern[grid](x, w, y, n_rows, hidden, eps, ROWS=c["ROWS"], BLOCK_N=c["BLOCK_N"], num_warps=c["num_warps"])


def reference(x, w, eps: float = EPS):
    """torch's RMSNorm in fp32 (the upcast input), the value every tiling is checked against."""
    import torch

    xf = x.float()
    return xf * torch.rsqrt(xf.pow(2).mean(dim=-1, keepdim=True) + eps) * w.float()


def _torch_dtype(torch, dtype: str):
    return {"fp16": torch.float16, "bf16": torch.bfloat16, "fp32": torch.float32}[dtype]


def run(
    problem: dict, cfg: dict, dtype: str = "fp16", seed: int = 0, rep_ms: int = 100, warmup_ms: int = 25
) -> dict:
    """Check one tiling against torch and time it (triton.testing.do_bench, which flushes L2 between runs):
    {"ms": median, "rel_err": relative L2 error, "gbps": compulsory bytes over the time, "kernel": its name}.
    A wrong result raises AssertionError (the measurement fails)."""
    import torch

    if triton is None:
        raise ImportError("triton is not installed")
    from triton.testing import do_bench

    n_rows, hidden = int(problem["rows"]), int(problem["hidden"])
    dt = _torch_dtype(torch, dtype)
    gen = torch.Generator(device="cuda")
    gen.manual_seed(seed)
    x = torch.randn((n_rows, hidden), generator=gen, device="cuda", dtype=torch.float32).to(dt)
    w = (1.0 + 0.1 * torch.randn((hidden,), generator=gen, device="cuda", dtype=torch.float32)).to(dt)
    y = torch.empty_like(x)
    launch(x, w, y, cfg)
    torch.cuda.synchronize()
    ref = reference(x, w)
    err = float(torch.linalg.vector_norm(y.float() - ref) / torch.linalg.vector_norm(ref).clamp_min(1e-30))
    if not err <= REL_ERR_MAX:  # NaN fails too
        raise AssertionError(
            f"wrong result: relative error {err:.3g} > {REL_ERR_MAX} ({kernel_name(cfg, hidden)})"
        )
    ms = float(do_bench(lambda: launch(x, w, y, cfg), warmup=warmup_ms, rep=rep_ms, return_mode="median"))
    nbytes = x.numel() * x.element_size() * 2 + w.numel() * w.element_size()
    return {"ms": ms, "rel_err": err, "gbps": nbytes / (ms * 1e-3) / 1e9, "kernel": kernel_name(cfg, hidden)}
