"""Depthwise convolution's export views and their JSON Schemas (Operator.TARGETS).

`ascendc_conv`: what an AscendC depthwise kernel needs to run a tiling, with the on-chip buffers it fills.
`triton`: the launch of tiler/ops/depthwise_conv/triton_kernels.py (kernel, constexprs, options, grid).
"""

from __future__ import annotations

from ...model.common import round_up
from ...target import Target
from ..triton_config import triton_config
from .geometry import packed_k
from .problem import DepthwiseConv

_INT = {"type": "integer", "minimum": 1}
_SCHEME = {"enum": ["group_loop", "group_opt", "vector"]}
_SHAPE3 = {"type": "array", "items": _INT, "minItems": 3, "maxItems": 3}


def ascendc_conv_view(p: DepthwiseConv, tiling: dict, row: dict, vector_cores: int) -> dict:
    """The tiling as an AscendC depthwise kernel reads it. `enlarge` is the packing factor (CANN's group-opt name
    for channels per cube op); the block-diagonal weight is `weight_expanded_shape`; the `*_bytes` are the
    buffers a tile fills (the model's rules checked them against the chip)."""
    g, m = int(tiling["groups_per_op"]), int(tiling["tile_m"])
    kp, n16 = int(packed_k(p, g)[()]), int(round_up(g, 16))
    view = {
        "scheme": tiling["scheme"],
        "enlarge": g,
        "group_ops": -(-p.C // g),
        "tile_m": m,
        "m_tiles": -(-p.pixels // m),
        "block_dim": int(row["cores_used"]),
        "double_buffer": int(tiling["double_buffer"]),
        "layout": "NCHW",
    }
    if tiling["scheme"] == "vector":
        return {**view, "ub_bytes": int(row["ub_bytes"]), "vector_cores": vector_cores}
    view.update(
        base_m=m,
        base_k=kp,
        base_n=n16,
        l0a_bytes=m * 32 * 2,  # one 32-byte-deep img2col slice, ping-ponged
        l0b_bytes=32 * n16 * 2,
        l0c_bytes=m * n16 * 4,
        l1_bytes=int(row["l1_bytes"]),
    )
    if tiling["scheme"] == "group_opt":
        view.update(weight_expand=tiling["weight_expand"], weight_expanded_shape=[view["group_ops"], kp, n16])
    return view


def triton_view(p: DepthwiseConv, chip, tiling: dict, row: dict) -> dict:
    """The Triton launch: kernel (dot or vector), constexprs, launch options and the grid."""
    g, bp = int(tiling["groups_per_op"]), int(tiling["BLOCK_P"])
    scheme = tiling["scheme"]
    return {
        "kernel": "_dw_vec_kernel" if scheme == "vector" else "_dw_dot_kernel",
        "scheme": scheme,
        "groups_per_op": g,
        "BLOCK_P": bp,
        "BLOCK_K": int(tiling["BLOCK_K"]),
        "num_warps": int(tiling["num_warps"]),
        "num_stages": int(tiling["num_stages"]),
        "grid": [-(-(p.out_h * p.out_w) // bp), -(-p.C // g), p.N],
    }


ASCENDC_CONV_SCHEMA = {
    "type": "object",
    "required": [
        "scheme",
        "enlarge",
        "group_ops",
        "tile_m",
        "m_tiles",
        "block_dim",
        "double_buffer",
        "layout",
    ],
    "properties": {
        "scheme": _SCHEME,
        **{k: _INT for k in ("enlarge", "group_ops", "tile_m", "m_tiles", "block_dim", "base_m", "base_k")},
        "double_buffer": {"enum": [0, 1]},
        "weight_expand": {"enum": ["offline", "per_call"]},
        "weight_expanded_shape": _SHAPE3,
    },
    "additionalProperties": {"type": ["integer", "string", "array"]},
}
TRITON_SCHEMA = {
    "type": "object",
    "required": [
        "kernel",
        "scheme",
        "groups_per_op",
        "BLOCK_P",
        "BLOCK_K",
        "num_warps",
        "num_stages",
        "grid",
    ],
    "properties": {
        "kernel": {"enum": ["_dw_dot_kernel", "_dw_vec_kernel"]},
        "scheme": _SCHEME,
        **{k: _INT for k in ("groups_per_op", "num_warps", "num_stages")},
        "BLOCK_P": {"type": "integer", "minimum": 16},
        "BLOCK_K": {"type": "integer", "minimum": 16},
        "grid": _SHAPE3,
    },
}


def check_triton(v: dict, chip, p: DepthwiseConv) -> list[str]:
    """The launch a view describes must cover the output: the grid of its blocks, and the kernel of its scheme."""
    bad = []
    grid = [-(-(p.out_h * p.out_w) // v["BLOCK_P"]), -(-p.C // v["groups_per_op"]), p.N]
    if list(v["grid"]) != grid:
        bad.append(f"grid = [ceil(out_h*out_w/BLOCK_P), ceil(C/groups_per_op), N] = {grid}")
    if (v["kernel"] == "_dw_vec_kernel") != (v["scheme"] == "vector"):
        bad.append("the vector scheme runs _dw_vec_kernel, the cube schemes _dw_dot_kernel")
    for k in ("BLOCK_P", "BLOCK_K"):
        if v[k] & (v[k] - 1):
            bad.append(f"{k} = {v[k]}: a power of two (tl.arange)")
    return bad


def emit_triton(v: dict, doc: dict) -> str:
    """The kernel's constexprs and launch options as a `triton.Config`, after a comment naming kernel and grid."""
    config = triton_config(
        {k: v[k] for k in ("groups_per_op", "BLOCK_P", "BLOCK_K")}, v["num_warps"], v["num_stages"]
    )
    where = f"{v['kernel']} ({v['scheme']}) of tiler/ops/depthwise_conv/triton_kernels.py"
    return f"# tiler: {where}, grid {tuple(v['grid'])}\n{config}\n"


TRITON = Target(
    name="triton",
    doc="the project's Triton depthwise kernels (tiler/ops/depthwise_conv/triton_kernels.py)",
    schema=TRITON_SCHEMA,
    view=triton_view,
    check=check_triton,
    emit=emit_triton,
)
