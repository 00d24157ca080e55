"""Run and time one GEMM tiling on an NVIDIA GPU with a Triton kernel.

C[M, N] = A[M, K] @ B[K, N]; fp16 or bf16, fp32 accumulation; C row-major. The kernel takes A's and B's strides,
so every layout of the problem runs it: `nn` (A M x K, B K x N row-major), `nt` (B stored N x K and passed as
its transposed view, stride 1 along K: a torch nn.Linear weight), `tn` (A stored K x M), `tt`. One program of the
kernel computes one BLOCK_M x BLOCK_N tile of C, stepping BLOCK_K along K. The knobs:

* ``ORDER`` maps the 1-D program id to a tile: 0 row-major, 1 grouped (``GROUP_M`` tile-rows walked
  column by column, the L2 swizzle of the Triton tutorial), 2 serpentine (odd tile-rows reversed).
* ``SPLIT_K`` > 1 adds a second grid dimension: each program reduces one contiguous slice of the K
  tiles and adds its partial tile into a zeroed fp32 buffer with atomics; a cast to the output dtype
  follows. The zeroing and the cast belong to the call and are timed with it.
* ``num_warps`` / ``num_stages``: launch options (warps per program, software-pipelining depth).

torch and triton are optional (``pip install 'tiler[gpu]'``): this module imports without them and
raises `TilerError` when a function that needs them is called.

Command line: ``python3 -m tiler.ops.matmul.triton_runner TILING.json`` times an exported tiling
(schema ``tiler.tiling/v1``) and prints the median time in microseconds as the last line of stdout.
"""

from __future__ import annotations

import json
import math
import os
import sys

from tiler.errors import SpaceError, TilerError, closest
from tiler.ops.matmul.triton_tma import TEMPLATES, _store_tile, _tile_of, launcher
from tiler.ops.triton_measure import GPU_EXTRA, load_document, measured_us, median_ms

MISSING_GPU_STACK = f"the Triton runner needs torch and triton: {GPU_EXTRA}"

CONFIG_KEYS = ("BLOCK_M", "BLOCK_N", "BLOCK_K", "num_stages", "num_warps", "GROUP_M", "ORDER", "SPLIT_K")
# keys a config may leave out, with the value it then takes (TEMPLATE 0: the pointer kernel; triton_tma)
OPTIONAL_KEYS = {"TEMPLATE": 0, "TAIL_SPLIT": 1, "EPILOGUE_SUBTILE": 1}
DTYPES = {
    "fp16": "float16",
    "float16": "float16",
    "half": "float16",
    "bf16": "bfloat16",
    "bfloat16": "bfloat16",
}
MAX_REL_ERR = 1e-2
TILING_SCHEMA = "tiler.tiling/v1"
LAYOUTS = ("nn", "nt", "tn", "tt")  # A then B: n as the product is written, t stored transposed

# --- the kernel (defined only where triton imports) --------------------------------------------------

try:  # guarded: the module must import on machines without the GPU stack
    import triton as _triton
    import triton.language as tl
except Exception:  # ImportError, or a triton that cannot load its native parts
    _triton = None
    tl = None

if _triton is not None:

    @_triton.jit
    def _gemm_tile_kernel(
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
        BLOCK_M: tl.constexpr,
        BLOCK_N: tl.constexpr,
        BLOCK_K: tl.constexpr,
        GROUP_M: tl.constexpr,
        ORDER: tl.constexpr,
        SPLIT_K: tl.constexpr,
    ):
        pid = tl.program_id(axis=0)
        tiles_m = tl.cdiv(M, BLOCK_M)
        tiles_n = tl.cdiv(N, BLOCK_N)

        # which tile of C this program owns
        tile_m, tile_n = _tile_of(pid, tiles_m, tiles_n, GROUP_M, ORDER)

        # which K tiles it reduces
        k_tiles = tl.cdiv(K, BLOCK_K)
        if SPLIT_K == 1:
            kt_begin = 0
            kt_end = k_tiles
        else:
            per_split = tl.cdiv(k_tiles, SPLIT_K)
            kt_begin = tl.program_id(axis=1) * per_split
            kt_end = tl.minimum(kt_begin + per_split, k_tiles)

        # rows/cols past the edge wrap around: the loads stay in bounds without masks, the store masks
        rm = tile_m * BLOCK_M + tl.arange(0, BLOCK_M)
        rn = tile_n * BLOCK_N + tl.arange(0, BLOCK_N)
        rk = tl.arange(0, BLOCK_K)
        a_rows = rm % M
        b_cols = rn % N
        a_tile = a_ptr + a_rows[:, None] * stride_am + (kt_begin * BLOCK_K + rk)[None, :] * stride_ak
        b_tile = b_ptr + (kt_begin * BLOCK_K + rk)[:, None] * stride_bk + b_cols[None, :] * stride_bn

        acc = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)
        for kt in range(kt_begin, kt_end):
            k_left = K - kt * BLOCK_K
            a = tl.load(a_tile, mask=rk[None, :] < k_left, other=0.0)
            b = tl.load(b_tile, mask=rk[:, None] < k_left, other=0.0)
            acc = tl.dot(a, b, acc)
            a_tile += BLOCK_K * stride_ak
            b_tile += BLOCK_K * stride_bk

        _store_tile(
            c_ptr,
            acc,
            tile_m * BLOCK_M,
            tile_n * BLOCK_N,
            M,
            N,
            stride_cm,
            stride_cn,
            BLOCK_M,
            BLOCK_N,
            SPLIT_K,
        )

else:
    _gemm_tile_kernel = None


# --- the GPU stack ----------------------------------------------------------------------------------


def _gpu_stack():
    """(torch, triton), or TilerError naming the pip extra."""
    try:
        import torch
        import triton
    except ImportError as e:
        raise TilerError(MISSING_GPU_STACK) from e
    if _gemm_tile_kernel is None or torch is None or triton is None:
        raise TilerError(MISSING_GPU_STACK)
    return torch, triton


def _interpreting() -> bool:
    return os.environ.get("TRITON_INTERPRET", "0") not in ("", "0")


def _torch_dtype(torch, dtype):
    if not isinstance(dtype, str):
        if dtype in (torch.float16, torch.bfloat16):
            return dtype
        raise TilerError(f"dtype {dtype} is not supported: use fp16 or bf16")
    name = DTYPES.get(dtype.lower())
    if name is None:
        raise TilerError(f"dtype {dtype!r} is not supported: {closest(dtype, DTYPES)}")
    return getattr(torch, name)


def check_config(config) -> dict:
    """The config with exactly the keys CONFIG_KEYS, as ints, each in range; SpaceError otherwise."""
    if not isinstance(config, dict):
        raise SpaceError(
            f"a Triton config is a dict with keys {', '.join(CONFIG_KEYS)}; got {type(config).__name__}"
        )
    unknown = [k for k in config if k not in CONFIG_KEYS and k not in OPTIONAL_KEYS]
    if unknown:
        raise SpaceError(f"unknown Triton config key {unknown[0]!r}: {closest(str(unknown[0]), CONFIG_KEYS)}")
    missing = [k for k in CONFIG_KEYS if k not in config]
    if missing:
        raise SpaceError(f"Triton config lacks {', '.join(missing)}")
    out = {}
    for k in (*CONFIG_KEYS, *(o for o in OPTIONAL_KEYS if o in config)):  # an optional key only when given
        v = config[k]
        if isinstance(v, bool) or not isinstance(v, int):
            if isinstance(v, float) and v.is_integer():
                v = int(v)
            else:
                raise SpaceError(f"Triton config {k} must be an integer, got {v!r}")
        out[k] = v
    for k in ("BLOCK_M", "BLOCK_N", "BLOCK_K"):
        if out[k] < 16 or out[k] & (out[k] - 1):
            raise SpaceError(f"{k} must be a power of two >= 16 (tl.dot needs 16), got {out[k]}")
    if out["num_warps"] < 1 or out["num_warps"] & (out["num_warps"] - 1) or out["num_warps"] > 32:
        raise SpaceError(f"num_warps must be a power of two in 1..32, got {out['num_warps']}")
    if out["num_stages"] < 1:
        raise SpaceError(f"num_stages must be >= 1, got {out['num_stages']}")
    if out["GROUP_M"] < 1:
        raise SpaceError(f"GROUP_M must be >= 1, got {out['GROUP_M']}")
    if out["ORDER"] not in (0, 1, 2):
        raise SpaceError(f"ORDER must be 0 (row-major), 1 (grouped) or 2 (serpentine), got {out['ORDER']}")
    if out["SPLIT_K"] < 1:
        raise SpaceError(f"SPLIT_K must be >= 1, got {out['SPLIT_K']}")
    if not 0 <= out.get("TEMPLATE", 0) < len(TEMPLATES):
        names = ", ".join(f"{i} ({t})" for i, t in enumerate(TEMPLATES))
        raise SpaceError(f"TEMPLATE must be one of {names}, got {out['TEMPLATE']}")
    if out.get("TEMPLATE", 0) == 3 and out["SPLIT_K"] > 1:
        # measured on the H200 with Triton 3.6: the warp-specialised loop's split-K atomics left the output zero
        raise SpaceError("TEMPLATE 3 (persistent_ws) needs SPLIT_K 1, got SPLIT_K " + str(out["SPLIT_K"]))
    tail = out.get("TAIL_SPLIT", 1)
    if tail < 1:
        raise SpaceError(f"TAIL_SPLIT must be >= 1, got {tail}")
    if tail > 1 and (out.get("TEMPLATE", 0) != 2 or out["SPLIT_K"] > 1):
        # the last wave's K slices are work items of the persistent grid, and they are the only split
        raise SpaceError(
            f"TAIL_SPLIT {tail} needs TEMPLATE 2 (persistent) and SPLIT_K 1, got TEMPLATE "
            f"{out.get('TEMPLATE', 0)} and SPLIT_K {out['SPLIT_K']}"
        )
    if out.get("EPILOGUE_SUBTILE", 1) not in (1, 2) or (
        out.get("EPILOGUE_SUBTILE", 1) == 2 and not out.get("TEMPLATE")
    ):
        # the halves are two bulk copies through C's descriptor: a TMA template's epilogue
        raise SpaceError(
            f"EPILOGUE_SUBTILE must be 1, or 2 with a TMA template, got {out.get('EPILOGUE_SUBTILE')} with TEMPLATE "
            f"{out.get('TEMPLATE', 0)}"
        )
    return out


def _kernel_kwargs(cfg: dict) -> dict:
    return {
        "BLOCK_M": cfg["BLOCK_M"],
        "BLOCK_N": cfg["BLOCK_N"],
        "BLOCK_K": cfg["BLOCK_K"],
        "GROUP_M": cfg["GROUP_M"],
        "ORDER": cfg["ORDER"],
        "SPLIT_K": cfg["SPLIT_K"],
        "num_warps": cfg["num_warps"],
        "num_stages": cfg["num_stages"],
    }


def _grid(M: int, N: int, cfg: dict) -> tuple[int, int]:
    tiles = math.ceil(M / cfg["BLOCK_M"]) * math.ceil(N / cfg["BLOCK_N"])
    return (tiles, cfg["SPLIT_K"])


def _operands(torch, a, b, out):
    """(M, N, K, out) of out = a @ b: 2-D fp16 or bf16 operands of one dtype on one CUDA device (or in Triton's
    interpreter), inner dimensions equal, no empty dimension; `out` made when None, else checked."""
    if a.dim() != 2 or b.dim() != 2:
        raise TilerError(f"matmul needs 2-D operands, got {a.dim()}-D and {b.dim()}-D")
    M, K = a.shape
    K2, N = b.shape
    if K != K2:
        raise TilerError(f"inner dimensions differ: A is {M}x{K}, B is {K2}x{N}")
    if a.dtype != b.dtype or a.dtype not in (torch.float16, torch.bfloat16):
        raise TilerError(f"A and B must both be fp16 or both bf16, got {a.dtype} and {b.dtype}")
    if a.device != b.device:
        raise TilerError(f"A and B are on different devices ({a.device}, {b.device})")
    if a.device.type != "cuda" and not _interpreting():
        raise TilerError(f"the Triton runner needs CUDA tensors, got {a.device}")
    if min(M, N, K) < 1:
        raise TilerError(f"empty problem M={M} N={N} K={K}")
    if out is None:
        out = torch.empty((M, N), dtype=a.dtype, device=a.device)
    elif tuple(out.shape) != (M, N) or out.dtype != a.dtype or out.device != a.device:
        raise TilerError(f"out must be a {M}x{N} {a.dtype} tensor on {a.device}")
    return M, N, K, out


def _plan(a, b, config, out=None):
    """Check the operands; return (fn, out): fn() computes out = a @ b (zeroing/cast included)."""
    torch, triton = _gpu_stack()
    cfg = check_config(config)
    M, N, K, out = _operands(torch, a, b, out)
    grid = _grid(M, N, cfg)
    kw = _kernel_kwargs(cfg)
    kernel = _gemm_tile_kernel[grid]
    template = cfg.get("TEMPLATE", 0)
    if template:  # operands TMA cannot describe are staged by the launcher (triton_tma._staged)
        sms = torch.cuda.get_device_properties(a.device).multi_processor_count if a.is_cuda else 1

        def tma_kernel(c):
            return launcher(a, b, c, cfg, sms)

    if template and cfg["SPLIT_K"] == 1:
        run = tma_kernel(out)

        def fn():
            run()
            return out

    elif template:
        acc = torch.empty((M, N), dtype=torch.float32, device=a.device)
        run = tma_kernel(acc)

        def fn():
            acc.zero_()
            run()
            out.copy_(acc)
            return out

    elif cfg["SPLIT_K"] == 1:

        def fn():
            kernel(
                a,
                b,
                out,
                M,
                N,
                K,
                a.stride(0),
                a.stride(1),
                b.stride(0),
                b.stride(1),
                out.stride(0),
                out.stride(1),
                **kw,
            )
            return out

    else:
        acc = torch.empty((M, N), dtype=torch.float32, device=a.device)

        def fn():
            acc.zero_()
            kernel(
                a,
                b,
                acc,
                M,
                N,
                K,
                a.stride(0),
                a.stride(1),
                b.stride(0),
                b.stride(1),
                acc.stride(0),
                acc.stride(1),
                **kw,
            )
            out.copy_(acc)
            return out

    def guarded():
        try:
            return fn()
        except triton.TritonError as e:  # out of shared memory / threads, compile or ptxas error
            raise TilerError(f"config {cfg} cannot run here: {type(e).__name__}: {e}") from e

    return guarded, out


def matmul(a, b, config: dict, out=None):
    """C = A @ B with one tiling config (keys exactly CONFIG_KEYS). Returns a new tensor unless out is given."""
    fn, _ = _plan(a, b, config, out)
    return fn()


def check_layout(layout: str) -> str:
    """One of LAYOUTS (case and blanks ignored); TilerError otherwise."""
    text = str(layout).strip().lower()
    if text not in LAYOUTS:
        raise TilerError(f"layout: must be one of {', '.join(LAYOUTS)}, got {layout!r}")
    return text


def layout_strides(M: int, N: int, K: int, layout: str = "nn") -> tuple[int, int, int, int]:
    """(stride_am, stride_ak, stride_bk, stride_bn) of A (M x K) and B (K x N) as views of their stored
    tensors: A `n` stored M x K (K, 1), `t` stored K x M (1, M); B `n` stored K x N (N, 1), `t` N x K (1, K)."""
    lay = check_layout(layout)
    a = (1, M) if lay[0] == "t" else (K, 1)
    b = (1, K) if lay[1] == "t" else (N, 1)
    return (*a, *b)


def operands(torch, M: int, N: int, K: int, layout: str = "nn", gen=None, device="cuda", dtype=None):
    """A (M x K) and B (K x N) as the product reads them, random normal, each a view of a tensor stored as
    `layout` says: `t` stores the transpose contiguously and passes `.T` (a view, no copy)."""
    lay = check_layout(layout)
    dt = dtype or torch.float16

    def randn(rows, cols):
        return torch.randn((rows, cols), generator=gen, device=device, dtype=torch.float32).to(dt)

    a = randn(K, M).T if lay[0] == "t" else randn(M, K)
    b = randn(N, K).T if lay[1] == "t" else randn(K, N)
    return a, b


def precompile(M: int, N: int, K: int, config: dict, dtype="fp16", layout: str = "nn"):
    """Compile (into Triton's on-disk cache) the kernel that a contiguous MxNxK problem would launch.

    Uses tiny tensors and the real sizes/strides (of `layout`), so the specialisation (which ints are
    multiples of 16, which strides are 1) is the one the timed run gets. Nothing is launched, so
    shared-memory limits are not checked. Returns Triton's compiled kernel (registers, spills and shared
    memory are read from it by bench/gpu_registers.py).
    """
    torch, triton = _gpu_stack()
    cfg = check_config(config)
    dt = _torch_dtype(torch, dtype)
    strides = layout_strides(M, N, K, layout)
    dev = "cuda"
    a = torch.empty(16, dtype=dt, device=dev)
    b = torch.empty(16, dtype=dt, device=dev)
    c = torch.empty(16, dtype=torch.float32 if cfg["SPLIT_K"] > 1 else dt, device=dev)
    try:
        return _gemm_tile_kernel.warmup(
            a, b, c, M, N, K, *strides, N, 1, grid=_grid(M, N, cfg), **_kernel_kwargs(cfg)
        )
    except triton.TritonError as e:
        raise TilerError(f"config {cfg} does not compile: {type(e).__name__}: {e}") from e


# --- measuring ----------------------------------------------------------------------------------------


class Problem:
    """Fresh random-normal operands of one shape and layout on the GPU and their fp32 reference product.

    `layout` (nn, nt, tn, tt): A and B are stored as the layout says and the product reads them through
    transposed views (`a = torch.randn(K, M).T` for a `t` A), so the kernel sees the strides a real caller's
    tensors have."""

    def __init__(
        self,
        M: int,
        N: int,
        K: int,
        dtype="fp16",
        seed: int = 0,
        reference: bool = True,
        device: str = "cuda",
        layout: str = "nn",
        warmup_ms: float = 25.0,
        rep_ms: float = 100.0,
    ):
        torch, _ = _gpu_stack()
        if device == "cuda" and not torch.cuda.is_available():
            raise TilerError("no CUDA device is visible: the Triton runner times on an NVIDIA GPU")
        M, N, K = int(M), int(N), int(K)
        if min(M, N, K) < 1:
            raise TilerError(f"empty problem M={M} N={N} K={K}")
        self.M, self.N, self.K = M, N, K
        # do_bench's warm-up and timed span: the defaults time a burst at boost clock; a long warm-up and span
        # (300 / 1000 ms) time the power-capped steady state of back-to-back work (bench/data/README.md)
        self.warmup_ms, self.rep_ms = float(warmup_ms), float(rep_ms)
        self.layout = check_layout(layout)
        self.dtype = _torch_dtype(torch, dtype)
        self.device = device
        gen = torch.Generator(device=device)
        gen.manual_seed(seed)
        self.a, self.b = operands(torch, M, N, K, self.layout, gen, device, self.dtype)
        self.ref = None
        if reference:
            # plain fp32 product of the rounded operands (TF32 off unless the caller turned it on)
            self.ref = torch.matmul(self.a.float(), self.b.float())
            self._ref_norm = float(torch.linalg.vector_norm(self.ref))

    @property
    def flops(self) -> float:
        return 2.0 * self.M * self.N * self.K

    def rel_err(self, c) -> float:
        import torch

        if self.ref is None:
            raise TilerError("this Problem was made without a reference")
        diff = float(torch.linalg.vector_norm(c.float() - self.ref))
        return diff / self._ref_norm if self._ref_norm > 0 else diff

    def _time(self, fn, check: bool, out) -> dict:
        torch, _ = _gpu_stack()
        rel = None
        if check:
            out.fill_(float("nan"))  # poison: every element must be written
            fn()
            if self.device != "cpu":
                torch.cuda.synchronize()
            rel = self.rel_err(out)
            if not (rel <= MAX_REL_ERR):  # NaN fails too
                raise TilerError(
                    f"wrong result for M={self.M} N={self.N} K={self.K}: rel_err {rel:.3g} > {MAX_REL_ERR}"
                )
        ms = median_ms(fn, self.warmup_ms, self.rep_ms)
        return {"ms": ms, "tflops": self.flops / (ms * 1e-3) / 1e12, "rel_err": rel}

    def measure(self, config: dict, check: bool = True) -> dict:
        """Time one config on this problem: {'ms', 'tflops', 'rel_err'} (rel_err None if not checked)."""
        fn, out = _plan(self.a, self.b, config)
        return self._time(fn, check, out)

    def measure_torch(self, check: bool = True) -> dict:
        """Time torch.matmul (cuBLAS) on this problem, same protocol."""
        import torch

        out = torch.empty((self.M, self.N), dtype=self.dtype, device=self.device)

        def fn():
            return torch.matmul(self.a, self.b, out=out)

        return self._time(fn, check, out)


VENDOR = "cublas"  # the vendor call for the same problem: torch.matmul on the same operands (cuBLAS)


def time_config(
    M: int,
    N: int,
    K: int,
    config: dict,
    dtype="fp16",
    seed: int = 0,
    check: bool = True,
    layout: str = "nn",
    vendor: bool = False,
) -> dict:
    """Median latency of one config on fresh random inputs stored as `layout` says (nn, nt, tn, tt).

    Returns {'ms': median of triton.testing.do_bench (warmup=25, rep=100; L2 flushed before each run),
    'tflops': 2MNK / time, 'rel_err': ||C - ref|| / ||ref|| vs an fp32 reference (None if check=False)}.
    With `vendor`, the same run also times torch.matmul (cuBLAS) on the same operands, same protocol, and adds
    'vendor': {'name': 'cublas', 'ms', 'tflops', 'rel_err'} and 'vs_vendor': vendor time / this config's time
    (above 1: the config is faster).
    Raises TilerError if the result is wrong (rel_err > 1e-2 or NaN) or the config cannot run.
    """
    _gpu_stack()
    cfg = check_config(config)
    problem = Problem(M, N, K, dtype=dtype, seed=seed, reference=check, layout=layout)
    res = problem.measure(cfg, check=check)
    if vendor:
        ven = problem.measure_torch(check=check)
        res["vendor"] = {"name": VENDOR, **ven}
        res["vs_vendor"] = ven["ms"] / res["ms"]
    return res


# --- exported tilings ---------------------------------------------------------------------------------


def tiling_from_doc(path_or_dict) -> tuple[int, int, int, str, dict]:
    """(M, N, K, dtype, config) from a tiler.tiling/v1 document (path or parsed dict)."""
    doc = load_document(path_or_dict)
    schema = doc.get("schema")
    if schema is not None and schema != TILING_SCHEMA:
        raise TilerError(f"tiling schema is {schema!r}; this runner reads {TILING_SCHEMA!r}")
    try:
        problem = doc["problem"]
        shape = problem["shape"]
        M, N, K = (int(shape[k]) for k in ("M", "N", "K"))
        dtype = str(problem.get("dtype", "fp16"))
        target = doc["targets"]["triton"]
    except (KeyError, TypeError, ValueError) as e:
        raise TilerError(
            f"tiling document lacks {e}: needs problem.shape.{{M,N,K}}, problem.dtype and targets.triton"
        ) from e
    if not isinstance(target, dict):
        raise TilerError("targets.triton must be an object with the Triton config")
    # the view is {"kwargs": {...}, "num_warps": w, "num_stages": s, "grid": [...]}; a flat dict of the same
    # keys (older exports, hand-written files) reads the same
    flat = {**target.get("kwargs", {}), **{k: v for k, v in target.items() if k not in ("kwargs", "grid")}}
    config = {k: flat[k] for k in (*CONFIG_KEYS, *OPTIONAL_KEYS) if k in flat}
    return M, N, K, dtype, check_config(config)


def layout_from_doc(path_or_dict) -> str:
    """The problem's layout (problem.shape.layout, default nn) of a tiling document; TilerError for a B format
    the kernel cannot read (NZ fractals are Ascend's) or an unknown layout."""
    doc = load_document(path_or_dict)
    shape = (doc.get("problem") or {}).get("shape") or {}
    if str(shape.get("b_format", "nd")).strip().lower() != "nd":
        raise TilerError(f"b_format: the Triton runner reads nd operands, got {shape['b_format']!r}")
    return check_layout(shape.get("layout", "nn"))


def run_tiling_json(path_or_dict, check: bool = True, vendor: bool = False) -> dict:
    """Time an exported tiling (schema tiler.tiling/v1) on operands of its problem's layout; returns
    time_config's dict (with `vendor`, cuBLAS timed beside it in the same run)."""
    doc = load_document(path_or_dict)
    M, N, K, dtype, config = tiling_from_doc(doc)
    return time_config(M, N, K, config, dtype=dtype, check=check, layout=layout_from_doc(doc), vendor=vendor)


def vendor_document(doc: dict) -> dict:
    """The vendor call (torch.matmul: cuBLAS) on a tiling document's problem, in its layout: {"name", "us"}."""
    M, N, K, dtype, _ = tiling_from_doc(doc)
    _gpu_stack()
    ven = Problem(M, N, K, dtype=dtype, layout=layout_from_doc(doc)).measure_torch(check=True)
    return {"name": VENDOR, "us": float(ven["ms"]) * 1e3}


def measure_document(doc: dict) -> float:
    """`--measure triton`: the median time in microseconds of a tiling document; any failure (no GPU stack, a
    kernel that does not compile or launch, a wrong result) is a MeasureError that fails this trial only; the
    runner's own errors (TilerError) read as they are."""
    return measured_us(lambda: run_tiling_json(doc), own=(TilerError,), missing=())


def main(argv=None) -> int:
    import argparse

    parser = argparse.ArgumentParser(
        prog="python3 -m tiler.ops.matmul.triton_runner",
        description="Time one exported tiling on the GPU; the last stdout line is the median in microseconds.",
    )
    parser.add_argument("tiling", help="a tiler.tiling/v1 JSON file")
    parser.add_argument("--no-check", action="store_true", help="skip the correctness check")
    parser.add_argument(
        "--vendor",
        action="store_true",
        help="also time torch.matmul (cuBLAS) on the same operands (stderr JSON)",
    )
    args = parser.parse_args(argv)
    try:
        M, N, K, dtype, config = tiling_from_doc(args.tiling)
        layout = layout_from_doc(args.tiling)
        res = run_tiling_json(args.tiling, check=not args.no_check, vendor=args.vendor)
    except TilerError as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    info = {"M": M, "N": N, "K": K, "dtype": dtype, "layout": layout, "config": config, **res}
    print(json.dumps(info), file=sys.stderr)
    print(f"{res['ms'] * 1e3:.3f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
