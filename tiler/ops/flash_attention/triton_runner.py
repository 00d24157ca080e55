"""`--measure triton` for flash_attention: time an exported tiling with the project's kernel (triton_kernels).

torch and triton are optional (`pip install 'tiler[gpu]'`); without them a measurement fails with one line.
"""

from __future__ import annotations

from ..triton_measure import DocumentRunner, median_ms
from .problem import FlashAttention


def _time(problem: dict, cfg: dict, dtype="fp16") -> dict:
    """`triton_kernels.time_config` of one tiling; ImportError when triton is missing."""
    from . import triton_kernels

    if triton_kernels.triton is None:
        raise ImportError("triton")
    return triton_kernels.time_config(problem, cfg, dtype=dtype)


def _vendor(problem: dict, dtype) -> tuple[str, float]:
    """The vendor call a document's tiling is compared with: the fastest fused SDPA backend, else SDPA as
    dispatched (name, ms)."""
    ven = vendor_times(problem, dtype=dtype)
    return f"SDPA {ven['fastest'].lower()}", ven["fastest_ms"]


RUNNER = DocumentRunner(
    FlashAttention,
    knobs=f"{__package__}.triton_kernels:RUNNER_KNOBS",
    time=_time,
    vendor=_vendor,
)
tiling_from_doc = RUNNER.tiling_from_doc
measure_document = RUNNER.measure_document
vendor_document = RUNNER.vendor_document


def _sdpa_backend(torch, q, k, v, causal: bool, gqa: bool) -> str:
    """The SDPA backend torch picks for these inputs (its own dispatcher's answer), or "unknown"."""
    try:
        from torch.nn.attention import SDPBackend

        try:  # torch 2.5+: scale and enable_gqa are keyword-only
            idx = torch._fused_sdp_choice(q, k, v, None, 0.0, causal, scale=None, enable_gqa=gqa)
        except TypeError:
            idx = torch._fused_sdp_choice(q, k, v, None, 0.0, causal, None, gqa)
        return next(b.name for b in SDPBackend.__members__.values() if int(b.value) == int(idx))
    except Exception:  # noqa: BLE001 - a private API: absent or changed
        return "unknown"


# SDPA's fused backends, each forced in turn (torch.nn.attention.sdpa_kernel): FlashAttention-2, the
# memory-efficient (xFormers/CUTLASS) kernel and cuDNN's; MATH is the unfused reference, not a vendor kernel
SDPA_BACKENDS = ("FLASH_ATTENTION", "EFFICIENT_ATTENTION", "CUDNN_ATTENTION")


def vendor_times(shape: dict, dtype="fp16", seed: int = 0, warmup=5, rep=25, backends: bool = True) -> dict:
    """torch's scaled_dot_product_attention on the same problem and inputs as `triton_kernels.time_config`, checked
    against its reference and timed the same way (do_bench median, L2 flushed).

    K/V heads are shared through `enable_gqa` (no copies); a causal problem with S1 != S2 uses the kernel's
    bottom-right mask (`causal_lower_right`), with K/V repeated for GQA outside the timed call. Returns {"ms",
    "max_abs_err", "backend": the SDPA backend torch picked ("lower_right_bias" for the masked case, dispatched by
    torch's CausalBias), "gqa": "enable_gqa" | "repeated" | "none"}; with `backends`, also "backends": each of
    SDPA_BACKENDS forced alone -> {"ms", "max_abs_err"} or {"error": why it cannot run these inputs}, and
    "fastest" / "fastest_ms": the fastest backend that runs them (the dispatcher's pick when none does)."""
    import torch
    import torch.nn.functional as F
    import triton  # noqa: F401 - fail before any work where triton is missing

    from . import triton_kernels as tk

    q, k, v = tk.inputs(
        *(shape[f] for f in ("B", "heads", "kv_heads", "S1", "S2", "D")), dtype=dtype, seed=seed
    )
    causal = bool(shape.get("causal", 0))
    S1, S2 = q.shape[2], k.shape[2]
    group = q.shape[1] // k.shape[1]
    if causal and S1 != S2:
        from torch.nn.attention.bias import causal_lower_right

        kr, vr = (
            (k, v) if group == 1 else (k.repeat_interleave(group, dim=1), v.repeat_interleave(group, dim=1))
        )
        mask = causal_lower_right(S1, S2)

        def fn():
            return F.scaled_dot_product_attention(q, kr, vr, attn_mask=mask)

        backend, gqa = "lower_right_bias", ("repeated" if group > 1 else "none")
    else:
        kw = {"enable_gqa": True} if group > 1 else {}

        def fn():
            return F.scaled_dot_product_attention(q, k, v, is_causal=causal, **kw)

        backend, gqa = (
            _sdpa_backend(torch, q, k, v, causal, group > 1),
            ("enable_gqa" if group > 1 else "none"),
        )
    ref = tk.reference(q, k, v, causal).float()
    err = float((fn().float() - ref).abs().max())
    if not err < 2e-2:
        raise ArithmeticError(f"torch SDPA: max |error| {err:.3g} against the reference")
    out = {"ms": median_ms(fn, warmup, rep), "max_abs_err": err, "backend": backend, "gqa": gqa}
    if backends:
        out["backends"] = {name: _forced(name, fn, ref, warmup, rep) for name in SDPA_BACKENDS}
        ran = {n: b["ms"] for n, b in out["backends"].items() if "ms" in b}
        out["fastest"], out["fastest_ms"] = (
            min(ran.items(), key=lambda kv: kv[1]) if ran else (backend, out["ms"])
        )
    return out


def _forced(name: str, fn, ref, warmup, rep) -> dict:
    """One SDPA backend forced alone on the call `fn`: its time and error, or why it does not run."""
    from torch.nn.attention import SDPBackend, sdpa_kernel

    try:
        with sdpa_kernel([getattr(SDPBackend, name)]):
            err = float((fn().float() - ref).abs().max())
            if not err < 2e-2:
                return {"error": f"max |error| {err:.3g} against the reference"}
            ms = median_ms(fn, warmup, rep)
    except Exception as exc:  # noqa: BLE001 - this backend does not take these inputs (dtype, mask, head size)
        first = (str(exc).strip().splitlines() or [type(exc).__name__])[0]
        return {"error": f"{type(exc).__name__}: {first[:160]}"}
    return {"ms": ms, "max_abs_err": err}


def time_with_vendor(shape: dict, config: dict, dtype="fp16", check=True, warmup=5, rep=25) -> dict:
    """`triton_kernels.time_config`'s dict for one tiling plus, in the same run on the same inputs, "vendor"
    (`vendor_times`, every SDPA backend too), "vs_vendor" (the dispatched SDPA's time / the tiling's: above 1, the
    tiling is faster) and "vs_fastest" (the fastest backend's time / the tiling's)."""
    from . import triton_kernels as tk

    res = tk.time_config(shape, config, dtype=dtype, check=check, warmup=warmup, rep=rep)
    ven = vendor_times(shape, dtype=dtype, warmup=warmup, rep=rep)
    return {
        **res,
        "vendor": ven,
        "vs_vendor": ven["ms"] / res["ms"],
        "vs_fastest": ven["fastest_ms"] / res["ms"],
    }
