"""Flash attention's CUDA export target: the project's Triton kernel (triton_kernels.py) as a `triton.Config`."""

from __future__ import annotations

from ...target import Target
from ..triton_config import triton_config
from .problem import FlashAttention

_INT = {"type": "integer", "minimum": 1}
KWARGS = ("BLOCK_M", "BLOCK_N", "ORDER")  # required; LOADS is optional (absent: 0, the pointer kernel)


def _order(v) -> int:
    return {"natural": 0, "heavy_first": 1}.get(v, v) if isinstance(v, str) else int(v)


def triton_view(p: FlashAttention, chip, t: dict, row: dict) -> dict:
    """The kernel's constexprs, launch options and grid: (query blocks, batch*heads) for ORDER 0, the transpose
    for ORDER 1. LOADS only when 1 (tma): absent is the kernel's 0 (triton_kernels.OPTIONAL), so a pointer tiling's
    view is the one written before the knob."""
    kwargs = {"BLOCK_M": int(t["BLOCK_M"]), "BLOCK_N": int(t["BLOCK_N"]), "ORDER": _order(t["ORDER"])}
    if int(t.get("LOADS", 0)) == 1:
        kwargs["LOADS"] = 1
    n_m = -(-p.S1 // kwargs["BLOCK_M"])
    grid = [n_m, p.B * p.heads] if kwargs["ORDER"] == 0 else [p.B * p.heads, n_m]
    return {
        "kernel": "tiler/ops/flash_attention/triton_kernels.py:fa_forward",
        "kwargs": kwargs,
        "num_warps": int(t["num_warps"]),
        "num_stages": int(t["num_stages"]),
        "grid": grid,
    }


def check_triton(v: dict, chip, p: FlashAttention) -> list[str]:
    kw, bad = v["kwargs"], []
    for k in ("BLOCK_M", "BLOCK_N"):
        if kw[k] < 16 or kw[k] & (kw[k] - 1):
            bad.append(f"{k} = {kw[k]}: a power of two >= 16 (tl.arange, tl.dot)")
    n_m = -(-p.S1 // kw["BLOCK_M"])
    want = [n_m, p.B * p.heads] if kw["ORDER"] == 0 else [p.B * p.heads, n_m]
    if list(v["grid"]) != want:
        bad.append(f"grid = {want} for ORDER {kw['ORDER']}")
    if 32 * v["num_warps"] > 1024:
        bad.append("32*num_warps <= 1024")
    if kw.get("LOADS", 0) == 1 and not chip.has_tma:
        bad.append("LOADS = 1 (tma): a chip with TMA tensor descriptors (Hopper: mma_version 3)")
    return bad


def triton_entry(v: dict, doc: dict) -> dict:
    """The triton.Config's arguments (a Python dispatch unit's entry, and what `emit_triton` prints)."""
    return {"kwargs": dict(v["kwargs"]), "num_warps": v["num_warps"], "num_stages": v["num_stages"]}


def emit_triton(v: dict, doc: dict) -> str:
    shape = ",".join(f"{k}={x}" for k, x in doc["problem"]["shape"].items())
    config = triton_config(**triton_entry(v, doc))
    return f"# tiler: {v['kernel']}, {shape}, grid {tuple(v['grid'])}\n{config}\n"


TRITON_SCHEMA = {
    "type": "object",
    "required": ["kernel", "kwargs", "num_warps", "num_stages", "grid"],
    "properties": {
        "kernel": {"type": "string"},
        "kwargs": {
            "type": "object",
            "required": list(KWARGS),
            "properties": {
                "BLOCK_M": _INT,
                "BLOCK_N": _INT,
                "ORDER": {"enum": [0, 1]},
                "LOADS": {"enum": [0, 1]},
            },
            "additionalProperties": False,
        },
        "num_warps": _INT,
        "num_stages": _INT,
        "grid": {"type": "array", "items": _INT, "minItems": 2, "maxItems": 2},
    },
    "additionalProperties": False,
}
TRITON = Target(
    name="triton",
    doc="the project's Triton flash-attention forward kernel (tiler/ops/flash_attention/triton_kernels.py)",
    schema=TRITON_SCHEMA,
    view=triton_view,
    check=check_triton,
    emit=emit_triton,
    language="python",
    entry=triton_entry,
)
