"""Depthwise convolution's export views and their JSON Schemas (Operator.TARGETS).

`ascendc_conv`: what an AscendC depthwise kernel needs to run a tiling, with the on-chip buffers it fills;
`check_ascendc_conv` re-derives its rules from the view alone (what `tiler check` runs) and `ASCENDC_TILING` is
the host tiling-data class it emits (docs/targets/depthwise_conv.md).
`triton`: the launch of tiler/ops/depthwise_conv/triton_kernels.py (kernel, constexprs, options, grid).
"""

from __future__ import annotations

from ...model.common import round_up
from ...target import Target
from ..ascendc_tiling import TilingData, space_codes
from ..triton_config import triton_config
from .geometry import input_elems, packed_k, strip_tiles
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
        "layout": p.layout.upper(),
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


CUBE_BUFFERS = ("base_m", "base_k", "base_n", "l0a_bytes", "l0b_bytes", "l0c_bytes", "l1_bytes")
VECTOR_BUFFERS = ("ub_bytes", "vector_cores")


def _cdiv(a: int, b: int) -> int:
    return -(-a // b)


def check_ascendc_conv(v: dict, chip, p: DepthwiseConv, vector_units: int) -> list[str]:
    """The rules a view breaks, re-derived from its fields in plain integers (independently of the model's
    masks): the packing its scheme allows, counts that cover the layer, a launch the chip has cores for, the
    cube's L0/L1 tiles or the vector scheme's UB (each as the kernel fills it, and within the chip's), and the
    expanded weight of group_opt. `vector_units`: the cores the vector scheme spreads over."""
    bad = []
    scheme, g, m = v["scheme"], v["enlarge"], v["tile_m"]
    if (scheme == "group_loop" and g != 1) or (scheme == "group_opt" and g < 2):
        bad.append(f"enlarge = {g}: group_loop packs 1 channel per op, group_opt at least 2")
    if g > p.C:
        bad.append(f"enlarge = {g}: at most the layer's C = {p.C} channels per op")
    if v["group_ops"] != _cdiv(p.C, g):
        bad.append(f"group_ops = ceil(C / enlarge) = {_cdiv(p.C, g)}")
    if m % 16:
        bad.append(f"tile_m = {m}: a multiple of 16 (the cube fractal's M)")
    if v["m_tiles"] != _cdiv(p.pixels, m):
        bad.append(f"m_tiles = ceil(N*out_h*out_w / tile_m) = {_cdiv(p.pixels, m)}")
    cube = scheme != "vector"
    units = chip.cores if cube else vector_units
    tiles = _cdiv(p.pixels, m) * _cdiv(p.C, g)
    if not 1 <= v["block_dim"] <= min(units, tiles):
        bad.append(
            f"block_dim = {v['block_dim']}: 1..min({'cube' if cube else 'vector'} cores {units}, tiles {tiles})"
        )
    have, other = (CUBE_BUFFERS, VECTOR_BUFFERS) if cube else (VECTOR_BUFFERS, CUBE_BUFFERS)
    if missing := [k for k in have if k not in v]:
        bad.append(f"the {scheme} scheme's view needs {', '.join(missing)}")
        return bad
    if extra := [k for k in other if k in v]:
        bad.append(f"the {scheme} scheme fills no {', '.join(extra)}")
    b, db = p.in_bytes, 1 + v["double_buffer"]
    rows = g * int(input_elems(p, m)) * b  # the input rows of one tile's channels
    if cube:
        n16, kp = -(-g // 16) * 16, -(-(g * p.taps) // (32 // b)) * (32 // b)
        if (v["base_m"], v["base_k"], v["base_n"]) != (m, kp, n16):
            bad.append(
                f"base_m, base_k, base_n = tile_m, roundK0(enlarge*kh*kw), round16(enlarge) = {m}, {kp}, {n16}"
            )
        need = {
            "l0a_bytes": m * 32 * 2,  # one 32-byte-deep img2col slice, ping-ponged
            "l0b_bytes": 32 * n16 * 2,
            "l0c_bytes": m * n16 * 4,  # the fp32 accumulator
            "l1_bytes": rows * db + kp * n16 * b,  # input rows (x2 double-buffered) + the expanded weight
        }
    else:
        need = {"ub_bytes": g * (int(input_elems(p, m)) * b + m * p.out_bytes) * db + g * m * 4}
        if v["vector_cores"] != vector_units:
            bad.append(
                f"vector_cores = {v['vector_cores']}: {chip.id} spreads the vector scheme over {vector_units}"
            )
    for k, n in need.items():
        if n > chip[k]:
            bad.append(f"{k}: a tile needs {n} B, the chip has {chip[k]}")
        elif v[k] != n:
            bad.append(f"{k} = {v[k]}: a tile fills {n} B")
    expand = "weight_expand" in v, "weight_expanded_shape" in v
    if scheme == "group_opt":
        if not all(expand):
            bad.append("group_opt names its weight_expand and weight_expanded_shape")
        elif list(v["weight_expanded_shape"]) != [v["group_ops"], v["base_k"], v["base_n"]]:
            bad.append("weight_expanded_shape = [group_ops, base_k, base_n]")
    elif any(expand):
        bad.append(f"{scheme} has no block-diagonal weight to expand")
    return bad


def triton_kernel(p: DepthwiseConv, scheme: str, strip: int = 1) -> str:
    """The kernel a scheme runs on the problem's layout: the NHWC kernel (vector only; its strip kernel for
    strips of more than one column), else dot or vector."""
    if p.layout == "nhwc":
        return "_dw_nhwc_strip_kernel" if strip > 1 else "_dw_nhwc_kernel"
    return "_dw_vec_kernel" if scheme == "vector" else "_dw_dot_kernel"


def triton_view(p: DepthwiseConv, chip, tiling: dict, row: dict) -> dict:
    """The Triton launch: kernel (dot, vector, or the NHWC vector kernel), constexprs, launch options and the
    grid; the tensors' layout is the problem's (the export's problem.layout)."""
    g, bp = int(tiling["groups_per_op"]), int(tiling["BLOCK_P"])
    scheme, sw = tiling["scheme"], int(tiling.get("STRIP", 1))
    return {
        "kernel": triton_kernel(p, scheme, sw),
        # the filter as the kernel reads it (triton_kernels.filter_for): torch's on nchw, a tap's channels
        # contiguous on nhwc
        "filter_layout": "kh,kw,C" if p.layout == "nhwc" else "C,1,kh,kw",
        "scheme": scheme,
        "groups_per_op": g,
        "BLOCK_P": bp,
        "BLOCK_K": int(tiling["BLOCK_K"]),
        "num_warps": int(tiling["num_warps"]),
        "num_stages": int(tiling["num_stages"]),
        # output columns a strip (`_dw_nhwc_strip_kernel`); 1 on nchw, whose kernels compute a pixel a lane
        "STRIP": sw,
        "grid": _triton_grid(p, bp, g, sw),
    }


def _triton_grid(p: DepthwiseConv, bp: int, g: int, strip: int) -> list[int]:
    """[pixel tiles (`strip_tiles`), channel groups, N]."""
    return [int(strip_tiles(p, bp, strip)), _cdiv(p.C, g), p.N]


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
# The host tiling data: the problem (its layout as a code: 0 NCHW, 1 NHWC, 2 NC1HWC0, the order of the problem's
# choices), then every field of the view but its layout (the problem's) and the expanded weight's shape ([groupOps, baseK, baseN]); the scheme and weight_expand as the space's codes, the buffers of the
# other scheme (and weight_expand outside group_opt) 0.
ASCENDC_TILING = TilingData(
    name="DepthwiseConvTilingData",
    op_type="DepthwiseConv",
    target="ascendc_conv",
    header="depthwise_conv_tiling.h",
    keys=(
        *DepthwiseConv.FIELDS,
        *DepthwiseConv.OPTIONAL,
        *(k for k in ASCENDC_CONV_SCHEMA["required"] if k != "layout"),
        *CUBE_BUFFERS,
        "weight_expand",
        *VECTOR_BUFFERS,
    ),
    codes={
        "layout": {w: i for i, v in enumerate(DepthwiseConv.CHOICES["layout"]) for w in (v, v.upper())},
        "scheme": space_codes("depthwise_conv", "scheme"),
        "weight_expand": space_codes("depthwise_conv", "weight_expand"),
    },
)
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
        "kernel": {"enum": ["_dw_dot_kernel", "_dw_vec_kernel", "_dw_nhwc_kernel", "_dw_nhwc_strip_kernel"]},
        "STRIP": {"enum": [1, 2, 4]},
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
    sw = v.get("STRIP", 1)
    if sw > 1 and p.layout != "nhwc":
        bad.append(f"STRIP = {sw}: only the nhwc kernel computes strips (nchw: 1)")
    if sw > v["BLOCK_P"]:
        bad.append(f"STRIP = {sw}: at most BLOCK_P = {v['BLOCK_P']} columns")
    grid = _triton_grid(p, v["BLOCK_P"], v["groups_per_op"], max(min(sw, v["BLOCK_P"]), 1))
    if list(v["grid"]) != grid:
        bad.append(
            f"grid = [ceil(out_h*ceil(out_w/STRIP) / (BLOCK_P/STRIP)), ceil(C/groups_per_op), N] = {grid}"
        )
    if p.layout == "nhwc" and v["scheme"] != "vector":
        bad.append(f"scheme = {v['scheme']}: an nhwc problem runs the vector scheme only")
    want = "kh,kw,C" if p.layout == "nhwc" else "C,1,kh,kw"
    if v.get("filter_layout", want) != want:
        bad.append(
            f"filter_layout = {v['filter_layout']!r}: the {p.layout} kernel reads the filter as {want}"
        )
    if v["kernel"] != triton_kernel(p, v["scheme"], sw):
        bad.append(
            f"kernel = {v['kernel']}: {p.layout} runs {triton_kernel(p, v['scheme'], sw)} for the {v['scheme']} "
            "scheme (nchw: _dw_vec_kernel for vector, _dw_dot_kernel for the cube schemes; nhwc: _dw_nhwc_kernel, "
            "_dw_nhwc_strip_kernel for strips of 2 or 4)"
        )
    g_max = 256 if p.layout == "nhwc" else 64
    if v["groups_per_op"] > g_max or v["groups_per_op"] & (v["groups_per_op"] - 1):
        bad.append(f"groups_per_op = {v['groups_per_op']}: a power of two <= {g_max} on {p.layout}")
    for k in ("BLOCK_P", "BLOCK_K"):
        if v[k] & (v[k] - 1):
            bad.append(f"{k} = {v[k]}: a power of two (tl.arange)")
    return bad


def triton_entry(v: dict, doc: dict) -> dict:
    """The triton.Config's arguments (a Python dispatch unit's entry, and what `emit_triton` prints): the
    kernel's constexprs, which this view keeps at its top level."""
    kwargs = {k: v[k] for k in ("groups_per_op", "BLOCK_P", "BLOCK_K", "STRIP") if k in v}
    return {"kwargs": kwargs, "num_warps": v["num_warps"], "num_stages": v["num_stages"]}


def emit_triton(v: dict, doc: dict) -> str:
    """The kernel's constexprs and launch options as a `triton.Config`, after a comment naming kernel, grid and
    the filter layout the kernel reads."""
    config = triton_config(**triton_entry(v, doc))
    where = f"{v['kernel']} ({v['scheme']}) of tiler/ops/depthwise_conv/triton_kernels.py"
    return f"# tiler: {where}, grid {tuple(v['grid'])}, filter [{v['filter_layout']}]\n{config}\n"


TRITON = Target(
    name="triton",
    doc="the project's Triton depthwise kernels (tiler/ops/depthwise_conv/triton_kernels.py)",
    schema=TRITON_SCHEMA,
    view=triton_view,
    check=check_triton,
    emit=emit_triton,
    language="python",
    entry=triton_entry,
)
