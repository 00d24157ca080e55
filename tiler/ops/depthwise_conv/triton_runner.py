"""`--measure triton` for depthwise_conv: time an exported tiling with the Triton kernels (triton_kernels.run).

torch and triton are optional (`pip install 'tiler[gpu]'`); without them a measurement fails with one line.
"""

from __future__ import annotations

from ..triton_measure import DocumentRunner
from .problem import DepthwiseConv


def _vendor(problem: dict, dtype) -> tuple[str, float]:
    """The vendor call a document's tiling is compared with: torch conv2d in its faster memory format (name, ms)."""
    ven = vendor_times(problem, dtype=dtype)
    return f"torch conv2d {ven['best']}", ven["ms"]


RUNNER = DocumentRunner(
    DepthwiseConv,
    knobs=f"{__package__}.cuda:KNOBS",
    time=f"{__package__}.triton_kernels:run",
    vendor=_vendor,
)
tiling_from_doc = RUNNER.tiling_from_doc
measure_document = RUNNER.measure_document
vendor_document = RUNNER.vendor_document


def vendor_times(
    problem: dict, dtype="fp16", seed: int = 0, warmup_ms: float = 10, rep_ms: float = 40, prob=None
):
    """torch's conv2d on the same problem (the same inputs as `triton_kernels.run`, or `prob`'s) in both memory
    formats, each checked against the fp32 reference and timed as a tiling is (do_bench median, L2 flushed).

    torch dispatches a depthwise conv to cuDNN or to its own depthwise kernel by shape and format; both are
    what a user gets. Returns {"nchw": {"ms", "rel_err"}, "channels_last": {...}, "best": the faster format,
    "ms": its time, "cudnn_enabled": torch.backends.cudnn.enabled}. The format conversion is not timed."""
    import torch

    from . import triton_kernels as tk

    prob = prob if prob is not None else tk.Problem(problem, dtype=dtype, seed=seed)
    out = prob.torch_formats(warmup_ms, rep_ms)
    best = min(out, key=lambda k: out[k]["ms"])
    return {**out, "best": best, "ms": out[best]["ms"], "cudnn_enabled": bool(torch.backends.cudnn.enabled)}


def run_with_vendor(
    problem: dict,
    cfg: dict,
    dtype="fp16",
    check: bool = True,
    seed: int = 0,
    warmup_ms: float = 10,
    rep_ms=40,
) -> dict:
    """`triton_kernels.run`'s dict for one tiling plus, on the same inputs in the same run, "vendor"
    (`vendor_times`) and "vs_vendor" (the faster torch format's time / the tiling's: above 1, the tiling is faster)."""
    from . import triton_kernels as tk

    why = tk.validate(cfg, problem)
    if why:
        raise ValueError(why)
    prob = tk.Problem(problem, dtype=dtype, seed=seed)
    err = prob.check(cfg) if check else None
    ms = prob.time(cfg, warmup_ms=warmup_ms, rep_ms=rep_ms)
    ven = vendor_times(problem, prob=prob, warmup_ms=warmup_ms, rep_ms=rep_ms)
    return {
        "ms": ms,
        "rel_err": err,
        "gbps": prob.bytes / (ms * 1e-3) / 1e9,
        "vendor": ven,
        "vs_vendor": ven["ms"] / ms,
    }
