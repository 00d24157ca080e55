"""The Triton target (the project's matmul kernel): its view, check, emitted triton.Config and JSON Schema."""

from __future__ import annotations

from ....target import Target
from ...triton_config import triton_config, triton_entry
from ..problem import Matmul as Problem
from .shared import _INT, _header, _knob, _quant_no_view

# --------------------------------------------------------------------------------------------------- Triton

TRITON_KWARGS = ("BLOCK_M", "BLOCK_N", "BLOCK_K", "GROUP_M", "ORDER", "SPLIT_K")


TRITON_KERNELS = (  # by TEMPLATE (tiler/ops/matmul/triton_tma.py)
    "tiler.ops.matmul.triton_runner:_gemm_tile_kernel",
    "tiler.ops.matmul.triton_tma:_gemm_tma_kernel",
    "tiler.ops.matmul.triton_tma:_gemm_tma_kernel",
    "tiler.ops.matmul.triton_tma:_gemm_tma_kernel",
)


def _triton_grid(p: Problem, kw: dict, sms: int) -> list[int]:
    """The launch grid of the view's kernel: the pointer kernel (tiles, SPLIT_K); a TMA template one program per
    work item (a tile and K slice; with TAIL_SPLIT, each last-wave tile's slices), the persistent ones min(SMs,
    that) programs (triton_tma.programs, which the launcher reads)."""
    from ..triton_tma import programs

    template = kw.get("TEMPLATE", 0)
    if template == 0:
        return [-(-p.M // kw["BLOCK_M"]) * -(-p.N // kw["BLOCK_N"]), kw["SPLIT_K"]]
    return [programs(p.M, p.N, {**kw, "TEMPLATE": template}, sms), 1]


def triton_view(p: Problem, chip, t: dict, row: dict) -> dict:
    """The kernel's constexpr arguments, launch options and grid (tiler/ops/matmul/triton_runner.py's kernel, or
    triton_tma.py's for a TMA template: then `kwargs` carries TEMPLATE, which the runner's config reads)."""
    kwargs = {k: _knob(t, k, "cuda") for k in TRITON_KWARGS}
    template = _knob(t, "TEMPLATE", "cuda") if "TEMPLATE" in t else 0
    if template:
        kwargs["TEMPLATE"] = template
    tail = _knob(t, "TAIL_SPLIT", "cuda") if "TAIL_SPLIT" in t else 1
    if tail > 1:
        kwargs["TAIL_SPLIT"] = tail
    return {
        "kernel": TRITON_KERNELS[template],
        "kwargs": kwargs,
        "num_warps": int(t["num_warps"]),
        "num_stages": int(t["num_stages"]),
        "grid": _triton_grid(p, kwargs, chip.cores),
    }


def check_triton(v: dict, chip, p: Problem) -> list[str]:
    """What Triton and the GPU check at compile and launch time, from the view alone."""
    from ..triton_tma import TEMPLATES

    kw, bad = v["kwargs"], []
    for k in ("BLOCK_M", "BLOCK_N", "BLOCK_K"):
        if kw[k] < 16 or kw[k] & (kw[k] - 1):
            bad.append(f"{k} = {kw[k]}: a power of two >= 16 (tl.arange, tl.dot)")
    w = v["num_warps"]
    if w < 1 or w & (w - 1) or 32 * w > 1024:
        bad.append(f"num_warps = {w}: a power of two, at most 32 (1024 threads)")
    smem = (kw["BLOCK_M"] * kw["BLOCK_K"] + kw["BLOCK_K"] * kw["BLOCK_N"]) * p.in_bytes * v["num_stages"]
    if smem > chip["smem_bytes_per_block"]:
        bad.append(
            f"shared memory {smem} B = (BLOCK_M*BLOCK_K + BLOCK_K*BLOCK_N)*{p.in_bytes}*num_stages > "
            f"{chip['smem_bytes_per_block']} B per block"
        )
    template = kw.get("TEMPLATE", 0)
    if template not in range(len(TEMPLATES)):
        bad.append(
            f"TEMPLATE = {template}: one of {', '.join(f'{i} ({n})' for i, n in enumerate(TEMPLATES))}"
        )
        return bad
    if template and not chip.has_tma:
        bad.append(
            f"TEMPLATE {template} ({TEMPLATES[template]}): TMA needs a Hopper GPU (compute capability 9.0)"
        )
    if template == 3 and kw["SPLIT_K"] > 1:
        bad.append("TEMPLATE 3 (persistent_ws) needs SPLIT_K 1")
    tail = kw.get("TAIL_SPLIT", 1)
    if tail < 1 or (tail > 1 and (template != 2 or kw["SPLIT_K"] > 1)):
        bad.append(f"TAIL_SPLIT = {tail}: 1, or more with TEMPLATE 2 (persistent) and SPLIT_K 1")
    want = _triton_grid(p, kw, chip.cores)
    if list(v["grid"]) != want:
        bad.append(
            f"grid = {want}: [ceil(M/BLOCK_M)*ceil(N/BLOCK_N), SPLIT_K] for the pointer kernel, [tiles*SPLIT_K, 1] "
            "for tma, [min(SMs, work items), 1] for the persistent templates (tiles*SPLIT_K, or with TAIL_SPLIT "
            "the last partial wave's tiles TAIL_SPLIT items each)"
        )
    if v.get("kernel", TRITON_KERNELS[template]) != TRITON_KERNELS[template]:
        bad.append(f"kernel = {TRITON_KERNELS[template]} for TEMPLATE {template}")
    if kw["ORDER"] not in (0, 1, 2) or kw["GROUP_M"] < 1 or kw["SPLIT_K"] < 1:
        bad.append("ORDER 0, 1 or 2; GROUP_M >= 1; SPLIT_K >= 1")
    return bad


def emit_triton(v: dict, doc: dict) -> str:
    """A `triton.Config` for the project's kernel (one line), after a comment naming the problem."""
    config = triton_config(v["kwargs"], v["num_warps"], v["num_stages"])
    return f"# {_header(doc)}; grid {tuple(v['grid'])}\n{config}\n"


# ------------------------------------------------------------------------------------------- JSON Schema

TRITON_SCHEMA = {
    "type": "object",
    "required": ["kwargs", "num_warps", "num_stages", "grid"],
    "properties": {
        "kernel": {"type": "string"},
        "kwargs": {
            "type": "object",
            "required": list(TRITON_KWARGS),
            "properties": {
                **{k: _INT for k in TRITON_KWARGS},
                "ORDER": {"enum": [0, 1, 2]},
                "TEMPLATE": {"enum": [1, 2, 3]},  # absent: the pointer kernel (0)
                "TAIL_SPLIT": {
                    "type": "integer",
                    "minimum": 1,
                },  # absent (the views write it only above 1): 1
            },
            "additionalProperties": False,
        },
        "num_warps": _INT,
        "num_stages": _INT,
        "grid": {"type": "array", "items": _INT, "minItems": 2, "maxItems": 2},
    },
    "additionalProperties": False,
}


# --------------------------------------------------------------------------------------------------- target


def triton_supports(chip, p: Problem) -> str | None:
    if p.batch != 1:
        return "the project's Triton kernel has no batch axis: launch it once per product (batch must be 1)"
    if p.dtype == "int8" and not (p.quant or p.b_int4):
        return "the project's Triton kernel takes fp16/bf16 operands (tiler/ops/matmul/triton_runner.py), not int8"
    return _quant_no_view(p, "triton")


TRITON = Target(
    name="triton",
    doc="the project's Triton matmul kernel (tiler/ops/matmul/triton_runner.py): a triton.Config and the grid",
    schema=TRITON_SCHEMA,
    view=triton_view,
    check=check_triton,
    emit=emit_triton,
    supports=triton_supports,
    language="python",
    entry=triton_entry,
)
