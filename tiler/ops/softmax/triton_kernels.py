"""Triton row-softmax kernels: ``y[r, :] = softmax(x[r, :])`` over ``rows`` rows of ``d`` elements (row-major,
contiguous; fp16, bf16 or fp32 in and out, fp32 arithmetic).

Three kernels; the knob names (``BLOCK_D``, ``passes``, ``ROWS``, ``num_warps``, ``num_stages``) are a fixed
contract with the cost model (tiler/ops/softmax/cuda.py). A program handles ``ROWS`` rows, grid =
``cdiv(rows, ROWS)``:

* ``BLOCK_D >= d``: **whole row** (``_softmax_row_kernel``): one ``[ROWS, BLOCK_D]`` tile in registers: load,
  max, exp, sum, scale, store. One read and one write of x, whatever ``passes`` says.
* ``BLOCK_D < d``, ``passes = 2``: **online** (``_softmax_online_kernel``): the row in chunks of ``BLOCK_D``; the
  first loop keeps a running max ``m`` and a running sum ``l`` rescaled when the max grows
  (``l = l * exp(m_old - m_new) + sum(exp(x - m_new))``), the second loop reads again and writes
  ``exp(x - m) / l``: two reads and one write.
* ``BLOCK_D < d``, ``passes = 3``: **three-pass** (``_softmax_3pass_kernel``): a loop for the max, a loop for
  the sum of exponentials, a loop that reads again and writes: three reads and one write.

``num_stages`` is Triton's software-pipelining depth of the chunk loops (the whole-row kernel has no loop).
Row offsets are int64, column offsets int32 (``d < 2**31``).

Kept free of ``tiler`` imports: bench/softmax_measure.py loads this file by path on the GPU machine. The module
imports without torch or triton (both lazily or under a guard), so ``validate`` and ``kernel_name`` work on a
machine without them.
"""

from __future__ import annotations

import math

try:  # guarded: the module must import where triton is absent
    import triton
    import triton.language as tl
except ImportError:  # pragma: no cover - exercised only without triton
    triton = None
    tl = None

CFG_KEYS = ("BLOCK_D", "passes", "ROWS", "num_warps", "num_stages")
MAX_THREAD_ELEMS = 128  # tile elements per thread (fp32 in registers): beyond this the tile does not fit
REL_ERR_MAX = 1e-2


def _pow2(v: int) -> bool:
    return v >= 1 and (v & (v - 1)) == 0


def next_pow2(v: int) -> int:
    return 1 << max(0, int(v) - 1).bit_length()


def normalize_cfg(cfg: dict) -> dict:
    """cfg with every knob an int; passes defaults to 2, ROWS to 1, num_warps to 4, num_stages to 1."""
    return {
        "BLOCK_D": int(cfg["BLOCK_D"]),
        "passes": int(cfg.get("passes", 2)),
        "ROWS": int(cfg.get("ROWS", 1)),
        "num_warps": int(cfg.get("num_warps", 4)),
        "num_stages": int(cfg.get("num_stages", 1)),
    }


def kernel_name(cfg: dict, d: int) -> str:
    """Which kernel runs the tiling for rows of `d` elements."""
    c = normalize_cfg(cfg)
    if c["BLOCK_D"] >= d:
        return "_softmax_row_kernel"
    return "_softmax_online_kernel" if c["passes"] == 2 else "_softmax_3pass_kernel"


def validate(cfg: dict, d: int | None = None) -> str | None:
    """Why ``cfg`` cannot run (a sentence), or None when it can."""
    try:
        c = normalize_cfg(cfg)
    except (KeyError, TypeError, ValueError) as e:
        return f"bad config {cfg}: {type(e).__name__}: {e}"
    if not _pow2(c["BLOCK_D"]) or not 16 <= c["BLOCK_D"] <= 2**20:
        return f"BLOCK_D {c['BLOCK_D']} must be a power of two in [16, 2**20] (tl.arange)"
    if c["passes"] not in (2, 3):
        return f"passes {c['passes']} must be 2 (online) or 3"
    if not _pow2(c["ROWS"]) or c["ROWS"] > 256:
        return f"ROWS {c['ROWS']} must be a power of two <= 256"
    if not _pow2(c["num_warps"]) or c["num_warps"] > 32:
        return f"num_warps {c['num_warps']} must be a power of two <= 32"
    if c["num_stages"] < 1:
        return f"num_stages {c['num_stages']} must be >= 1"
    per_thread = c["ROWS"] * c["BLOCK_D"] / (32 * c["num_warps"])
    if per_thread > MAX_THREAD_ELEMS:
        return f"ROWS*BLOCK_D/(32*num_warps) = {per_thread:g} tile elements per thread > {MAX_THREAD_ELEMS}"
    if d is not None and int(d) < 1:
        return f"d = {d}: at least one element per row"
    return None


# --- kernels -----------------------------------------------------------------------------------------

if triton is not None:

    @triton.jit
    def _softmax_row_kernel(x_ptr, y_ptr, n_rows, d, ROWS: tl.constexpr, BLOCK_D: tl.constexpr):
        """Whole rows in registers: one read, one write."""
        pid = tl.program_id(0)
        rows = pid * ROWS + tl.arange(0, ROWS)
        rmask = rows < n_rows
        base = rows.to(tl.int64) * d
        cols = tl.arange(0, BLOCK_D)
        m = rmask[:, None] & (cols < d)[None, :]
        offs = base[:, None] + cols[None, :]
        x = tl.load(x_ptr + offs, mask=m, other=-float("inf")).to(tl.float32)
        mx = tl.max(x, axis=1)
        e = tl.exp(x - mx[:, None])
        inv = 1.0 / tl.sum(e, axis=1)
        tl.store(y_ptr + offs, (e * inv[:, None]).to(y_ptr.dtype.element_ty), mask=m)

    @triton.jit
    def _softmax_online_kernel(x_ptr, y_ptr, n_rows, d, ROWS: tl.constexpr, BLOCK_D: tl.constexpr):
        """Online (2 passes): running max and rescaled running sum in one read, then read again and write."""
        pid = tl.program_id(0)
        rows = pid * ROWS + tl.arange(0, ROWS)
        rmask = rows < n_rows
        base = rows.to(tl.int64) * d
        cols = tl.arange(0, BLOCK_D)
        m_i = tl.full((ROWS,), -float("inf"), tl.float32)
        l_i = tl.zeros((ROWS,), tl.float32)
        for start in range(0, d, BLOCK_D):
            c = start + cols
            msk = rmask[:, None] & (c < d)[None, :]
            x = tl.load(x_ptr + base[:, None] + c[None, :], mask=msk, other=-float("inf")).to(tl.float32)
            m_new = tl.maximum(m_i, tl.max(x, axis=1))
            l_i = l_i * tl.exp(m_i - m_new) + tl.sum(tl.exp(x - m_new[:, None]), axis=1)
            m_i = m_new
        inv = 1.0 / l_i
        for start in range(0, d, BLOCK_D):
            c = start + cols
            msk = rmask[:, None] & (c < d)[None, :]
            offs = base[:, None] + c[None, :]
            x = tl.load(x_ptr + offs, mask=msk, other=-float("inf")).to(tl.float32)
            y = tl.exp(x - m_i[:, None]) * inv[:, None]
            tl.store(y_ptr + offs, y.to(y_ptr.dtype.element_ty), mask=msk)

    @triton.jit
    def _softmax_3pass_kernel(x_ptr, y_ptr, n_rows, d, ROWS: tl.constexpr, BLOCK_D: tl.constexpr):
        """Three passes: read for the max, read for the sum of exponentials, read and write."""
        pid = tl.program_id(0)
        rows = pid * ROWS + tl.arange(0, ROWS)
        rmask = rows < n_rows
        base = rows.to(tl.int64) * d
        cols = tl.arange(0, BLOCK_D)
        m_i = tl.full((ROWS,), -float("inf"), tl.float32)
        for start in range(0, d, BLOCK_D):
            c = start + cols
            msk = rmask[:, None] & (c < d)[None, :]
            x = tl.load(x_ptr + base[:, None] + c[None, :], mask=msk, other=-float("inf")).to(tl.float32)
            m_i = tl.maximum(m_i, tl.max(x, axis=1))
        # the max loop's result is used once (broadcast here, outside the loops): Triton 3.6's
        # OptimizeThreadLocality pass asserts a reduction loop's result has one use (fp32 failed to compile)
        m_col = m_i[:, None]
        l_i = tl.zeros((ROWS,), tl.float32)
        for start in range(0, d, BLOCK_D):
            c = start + cols
            msk = rmask[:, None] & (c < d)[None, :]
            x = tl.load(x_ptr + base[:, None] + c[None, :], mask=msk, other=-float("inf")).to(tl.float32)
            l_i += tl.sum(tl.exp(x - m_col), axis=1)
        inv = 1.0 / l_i
        for start in range(0, d, BLOCK_D):
            c = start + cols
            msk = rmask[:, None] & (c < d)[None, :]
            offs = base[:, None] + c[None, :]
            x = tl.load(x_ptr + offs, mask=msk, other=-float("inf")).to(tl.float32)
            y = tl.exp(x - m_col) * inv[:, None]
            tl.store(y_ptr + offs, y.to(y_ptr.dtype.element_ty), mask=msk)


def _kernel_and_args(cfg: dict, n_rows: int, d: int):
    """(jit kernel, grid, runtime int args, constexpr/launch kwargs) for one tiling."""
    if triton is None:
        raise RuntimeError("triton is not installed")
    c = normalize_cfg(cfg)
    kern = {
        "_softmax_row_kernel": _softmax_row_kernel,
        "_softmax_online_kernel": _softmax_online_kernel,
        "_softmax_3pass_kernel": _softmax_3pass_kernel,
    }[kernel_name(c, d)]
    grid = (triton.cdiv(n_rows, c["ROWS"]),)
    kw = dict(ROWS=c["ROWS"], BLOCK_D=c["BLOCK_D"], num_warps=c["num_warps"], num_stages=c["num_stages"])
    return kern, grid, (n_rows, d), kw


def launch(x, y, cfg: dict) -> None:
    """Run one tiling: x and y [rows, d], contiguous, same dtype."""
    n_rows, d = (int(v) for v in x.shape)
    why = validate(cfg, d)
    if why:
        raise ValueError(why)
    if tuple(y.shape) != (n_rows, d) or not (x.is_contiguous() and y.is_contiguous()):
        raise ValueError(f"x {tuple(x.shape)} and y {tuple(y.shape)} must be equal and contiguous")
    if d >= 2**31:
        raise ValueError("d >= 2**31: column offsets are int32")
    kern, grid, ints, kw = _kernel_and_args(cfg, n_rows, d)
    kern[grid](x, y, *ints, **kw)


def precompile(problem: dict, cfg: dict, dtype: str = "fp16"):
    """Compile, into Triton's on-disk cache, the kernel ``launch`` would run for this problem (tiny tensors,
    the real ints, so the specialisation is the timed run's). Returns Triton's compiled kernel (``n_regs``,
    ``n_spills``, ``metadata.shared``)."""
    import torch

    n_rows, d = int(problem["rows"]), int(problem["d"])
    why = validate(cfg, d)
    if why:
        raise ValueError(why)
    kern, grid, ints, kw = _kernel_and_args(cfg, n_rows, d)
    t = [torch.empty(16, dtype=_torch_dtype(torch, dtype), device="cuda") for _ in range(2)]
    return kern.warmup(*t, *ints, grid=grid, **kw)


# --- measuring ----------------------------------------------------------------------------------------


def _torch_dtype(torch, dtype):
    if not isinstance(dtype, str):
        return dtype
    return {"fp16": torch.float16, "bf16": torch.bfloat16, "fp32": torch.float32}[dtype]


def compulsory_bytes(problem: dict, elem_bytes: int = 2) -> int:
    """x read once and y written once."""
    return 2 * elem_bytes * int(problem["rows"]) * int(problem["d"])


class Problem:
    """Random x (normal, scaled by 4: logits with a spread) of one softmax problem on a device, its fp32
    reference (torch.softmax of the upcast input) and an output buffer."""

    def __init__(self, problem: dict, dtype="fp16", seed: int = 0, device: str = "cuda"):
        import torch

        self.rows, self.d = int(problem["rows"]), int(problem["d"])
        self.dtype = _torch_dtype(torch, dtype)
        gen = torch.Generator(device=device)
        gen.manual_seed(seed)
        x = torch.randn((self.rows, self.d), generator=gen, device=device, dtype=torch.float32) * 4.0
        self.x = x.to(self.dtype)
        self.y = torch.empty_like(self.x)
        self.ref = torch.softmax(self.x.float(), dim=-1)
        self.ref_norm = float(torch.linalg.vector_norm(self.ref))
        self.bytes = compulsory_bytes({"rows": self.rows, "d": self.d}, self.x.element_size())

    def rel_err(self, out) -> float:
        import torch

        if bool(torch.isnan(out).any()):
            return math.nan
        return float(torch.linalg.vector_norm(out.float() - self.ref)) / max(self.ref_norm, 1e-30)

    def check(self, cfg: dict) -> float:
        """Poison y with NaN, run once, return ||y - ref|| / ||ref|| (raises if > 1e-2 or NaN)."""
        import torch

        self.y.fill_(float("nan"))
        launch(self.x, self.y, cfg)
        torch.cuda.synchronize()
        err = self.rel_err(self.y)
        if not err <= REL_ERR_MAX:
            raise RuntimeError(f"wrong result: rel_err {err:.3e} for cfg {cfg}")
        return err

    def torch_fn(self):
        import torch

        x = self.x
        return lambda: torch.softmax(x, dim=-1)

    def check_torch(self) -> float:
        err = self.rel_err(self.torch_fn()())
        if not err <= REL_ERR_MAX:
            raise RuntimeError(f"torch.softmax: rel_err {err:.3e}")
        return err

    def time_fn(self, fn, warmup_ms: float = 5, rep_ms: float = 20) -> float:
        """Median ms of fn over do_bench (which flushes L2 with a 256 MB write before every timed call)."""
        import triton as _triton

        return float(_triton.testing.do_bench(fn, warmup=warmup_ms, rep=rep_ms, return_mode="median"))

    def time(self, cfg: dict, warmup_ms: float = 5, rep_ms: float = 20) -> float:
        x, y = self.x, self.y
        kern, grid, ints, kw = _kernel_and_args(cfg, self.rows, self.d)
        kern[grid](x, y, *ints, **kw)  # compile / load outside the timed region

        def fn():
            kern[grid](x, y, *ints, **kw)

        return self.time_fn(fn, warmup_ms, rep_ms)


def run(
    problem: dict,
    cfg: dict,
    check: bool = True,
    rep_ms: float = 20,
    warmup_ms: float = 5,
    dtype="fp16",
    seed=0,
) -> dict:
    """Fresh random inputs, a correctness check against torch.softmax (fp32 on the upcast input), then the
    median time. Returns ``{"ms", "rel_err", "gbps"}``; ValueError for a config ``validate`` rejects,
    RuntimeError for a wrong result."""
    why = validate(cfg, int(problem["d"]))
    if why:
        raise ValueError(why)
    prob = Problem(problem, dtype=dtype, seed=seed)
    err = prob.check(cfg) if check else None
    ms = prob.time(cfg, warmup_ms=warmup_ms, rep_ms=rep_ms)
    return {"ms": ms, "rel_err": err, "gbps": prob.bytes / (ms * 1e-3) / 1e9}
