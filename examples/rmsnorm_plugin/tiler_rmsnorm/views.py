"""rmsnorm's export target on the cuda family (Operator.TARGETS): `triton`, the launch of this package's Triton
kernels (triton_kernels.py): the kernel a tiling runs, its constexprs, launch options and grid. Its check is the
kernels' own (`triton_kernels.validate`, which runs without triton), so `tiler check` on an exported file refuses
what the kernel would refuse."""

from __future__ import annotations

from tiler.target import Target

from . import triton_kernels as km
from .problem import RMSNorm

_INT = {"type": "integer", "minimum": 1}
KERNELS = ("_rmsnorm_row_kernel", "_rmsnorm_chunked_kernel")


def _cdiv(a: int, b: int) -> int:
    return -(-a // b)


def triton_view(p: RMSNorm, chip, tiling: dict, row: dict) -> dict:
    """The Triton launch: kernel, constexprs, launch options and the grid."""
    r, bn = int(tiling["ROWS"]), int(tiling["BLOCK_N"])
    return {
        "kernel": km.kernel_name({"BLOCK_N": bn}, p.hidden),
        "kwargs": {"ROWS": r, "BLOCK_N": bn},
        "num_warps": int(tiling["num_warps"]),
        "num_stages": 1,
        "grid": [_cdiv(p.rows, r)],
    }


TRITON_SCHEMA = {
    "type": "object",
    "required": ["kernel", "kwargs", "num_warps", "num_stages", "grid"],
    "properties": {
        "kernel": {"enum": list(KERNELS)},
        "kwargs": {
            "type": "object",
            "required": ["ROWS", "BLOCK_N"],
            "properties": {"ROWS": _INT, "BLOCK_N": {"type": "integer", "minimum": 16}},
            "additionalProperties": False,
        },
        "num_warps": {"enum": [1, 2, 4, 8, 16, 32]},
        "num_stages": {"const": 1},
        "grid": {"type": "array", "items": _INT, "minItems": 1, "maxItems": 1},
    },
    "additionalProperties": False,
}


def check_triton(v: dict, chip, p: RMSNorm) -> list[str]:
    """The kernel's own check of the constexprs, the grid that covers the rows, the kernel the chunk implies."""
    cfg = {**v["kwargs"], "num_warps": v["num_warps"]}
    bad = [why] if (why := km.validate(cfg, p.hidden)) else []
    if list(v["grid"]) != [_cdiv(p.rows, cfg["ROWS"])]:
        bad.append(f"grid = [ceil(rows / ROWS)] = [{_cdiv(p.rows, cfg['ROWS'])}]")
    if v["kernel"] != km.kernel_name(cfg, p.hidden):
        bad.append("BLOCK_N >= hidden runs _rmsnorm_row_kernel, a smaller chunk _rmsnorm_chunked_kernel")
    return bad


def triton_entry(v: dict, doc: dict) -> dict:
    """The triton.Config's arguments (a Python dispatch unit's entry)."""
    return {"kwargs": dict(v["kwargs"]), "num_warps": int(v["num_warps"]), "num_stages": int(v["num_stages"])}


def emit_triton(v: dict, doc: dict) -> str:
    """The kernel's constexprs and launch options as a `triton.Config`, after a comment naming kernel and grid."""
    args = ", ".join(f'"{k}": {x}' for k, x in v["kwargs"].items())
    config = f"triton.Config({{{args}}}, num_warps={v['num_warps']}, num_stages={v['num_stages']})"
    return f"# tiler: {v['kernel']} of tiler_rmsnorm/triton_kernels.py, grid {tuple(v['grid'])}\n{config}\n"


def _supports(chip, p: RMSNorm) -> str | None:
    return None if p.dtype in ("fp16", "bf16", "fp32") else f"the Triton rmsnorm kernels take no {p.dtype}"


TRITON = Target(
    name="triton",
    doc="the Triton RMSNorm kernels of tiler_rmsnorm/triton_kernels.py",
    schema=TRITON_SCHEMA,
    view=triton_view,
    check=check_triton,
    emit=emit_triton,
    supports=_supports,
    language="python",
    entry=triton_entry,
)
