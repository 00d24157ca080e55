"""Flash attention's Ascend export target `ascendc_fa` and its JSON Schema (Operator.TARGETS).

The view is what a FlashAttentionScore / CATLASS FA-infer style AscendC kernel takes from its host tiling: the s1
and s2 bases (and the GQA heads a block packs when S1 is small), the core split (block dim, tasks, the most tasks
one core runs, plain or balanced), the preload depth (CATLASS's KERNEL_TASK_NUM = preload + 1 blocks in flight),
the kv split of the decode path with its combine step, the double buffering, the vector cores per cube core and the
bytes each buffer holds. `check_ascendc_fa` re-derives the block counts and the buffer sizes from the view alone
(plain integers, independent of the model's masks) and checks them against the chip: what `tiler check` runs.
`ASCENDC_TILING` is the host tiling-data class the target emits (`--emit ascendc_fa`, a dispatch unit's
entries): the problem's fields, then the view's (docs/targets/flash_attention.md).
"""

from __future__ import annotations

from ..ascendc_tiling import TilingData, space_codes
from .problem import FlashAttention

STAT_BYTES = 32  # one 32-byte block per row for each of max, sum and the rescale factor
VEC_SLICE_BYTES = 32768  # fp32 bytes of S one vector core holds at once
L0_CHUNK = 128  # keys (and D columns) per L0 MMAD tile

_INT = {"type": "integer", "minimum": 1}
_NONNEG = {"type": "integer", "minimum": 0}
_SIZES = ("l0a_bytes", "l0b_bytes", "l0c_bytes", "l1_bytes", "ub_bytes")


def _cdiv(a: int, b: int) -> int:
    return -(-a // b)


def _up(a: int, b: int) -> int:
    return _cdiv(a, b) * b


def _label(v) -> str:
    return v if isinstance(v, str) else ("balanced" if int(v) == 1 else "plain")


def ascendc_fa_view(p, chip, tiling: dict, row: dict, cv_ratio: int) -> dict:
    """The tiling as the kernel's host tiling data: bases, counts, split, depth and the buffers a block fills
    (the model's rules checked them against the chip)."""
    s1, s2, ks = int(tiling["block_s1"]), int(tiling["block_s2"]), int(tiling["kv_split"])
    heads = int(row["heads_per_block"])
    s2_blocks = _cdiv(p.S2, s2)
    view = {
        "layout": "BNSD",
        "mask": "causal_bottom_right" if p.causal else "none",
        "s1_base": s1,
        "s2_base": s2,
        "heads_per_block": heads,
        "rows_per_block": int(row["rows_per_block"]),
        "s1_blocks": 1 if p.S1 < s1 else _cdiv(p.S1, s1),
        "s2_blocks": s2_blocks,
        "kv_split": ks,
        "s2_blocks_per_split": _cdiv(s2_blocks, ks),
        "core_split": _label(tiling["core_split"]),
        "block_dim": int(row["cores_used"]),
        "tasks": int(row["tiles"]),
        "tasks_per_core_max": int(row["tasks_per_core_max"]),
        "preload": int(tiling["preload"]),
        "kernel_task_num": int(tiling["preload"]) + 1,
        "double_buffer": int(tiling["double_buffer"]),
        "cv_ratio": int(cv_ratio),
        "workspace_bytes": int(row["workspace_bytes"]),
    }
    view.update({k: int(row[k]) for k in _SIZES})
    return view


def buffer_bytes(p, v: dict) -> dict[str, int]:
    """The buffers a block fills, from the view's fields (the model's `buffers`, in plain integers)."""
    b = p.in_bytes
    c0 = 32 // b
    rows, w = v["rows_per_block"], min(v["s2_base"], p.S2)
    buf, inflight = 1 + v["double_buffer"], v["preload"] + 1
    r16, w16 = _up(rows, 16), _up(w, 16)
    n0 = min(w16, L0_CHUNK)
    dc0, d16 = _up(p.D, c0), _up(p.D, 16)
    dk, dn = min(dc0, L0_CHUNK), min(d16, L0_CHUNK)
    rv = _cdiv(rows, v["cv_ratio"])
    slice_rows = max(1, min(VEC_SLICE_BYTES // (w16 * 4), rv))
    return {
        "l0a_bytes": r16 * max(dk, n0) * b * buf,
        "l0b_bytes": n0 * dn * b * buf,
        "l0c_bytes": r16 * max(n0, dn) * 4 * buf,
        "l1_bytes": r16 * dc0 * b + 2 * w16 * dc0 * b * buf + r16 * w16 * b * max(buf, inflight),
        "ub_bytes": slice_rows * w16 * (4 + b) * buf
        + slice_rows * d16 * 4
        + rv * d16 * 4
        + inflight * 3 * rv * STAT_BYTES,
    }


def check_ascendc_fa(v: dict, chip, p) -> list[str]:
    """The rules a view breaks: bases on the fractal, counts that cover the problem, GQA packing within one group,
    a split the chip can launch, and every buffer (re-derived from the view) within the chip's."""
    bad = []
    for k in ("s1_base", "s2_base"):
        if v[k] % 16:
            bad.append(f"{k} = {v[k]}: a multiple of 16 (the cube fractal)")
    group = p.heads // p.kv_heads
    heads = v["heads_per_block"]
    if group % heads or (heads > 1 and heads * p.S1 > v["s1_base"]):
        bad.append(
            f"heads_per_block = {heads}: a divisor of heads/kv_heads = {group} with heads*S1 <= s1_base"
        )
    rows = heads * p.S1 if p.S1 < v["s1_base"] else v["s1_base"]
    if v["rows_per_block"] != rows:
        bad.append(f"rows_per_block = {v['rows_per_block']}: heads_per_block*S1 or s1_base = {rows}")
    s1_blocks = 1 if p.S1 < v["s1_base"] else _cdiv(p.S1, v["s1_base"])
    s2_blocks = _cdiv(p.S2, v["s2_base"])
    if v["s1_blocks"] != s1_blocks or v["s2_blocks"] != s2_blocks:
        bad.append(f"s1_blocks, s2_blocks = ceil(S1/s1_base), ceil(S2/s2_base) = {s1_blocks}, {s2_blocks}")
    if v["kv_split"] > s2_blocks:
        bad.append(f"kv_split = {v['kv_split']}: at most s2_blocks = {s2_blocks} (a block per chunk)")
    if v["s2_blocks_per_split"] != _cdiv(s2_blocks, v["kv_split"]):
        bad.append("s2_blocks_per_split = ceil(s2_blocks / kv_split)")
    if v["kernel_task_num"] != v["preload"] + 1:
        bad.append("kernel_task_num = preload + 1 (blocks in flight between cube and vector)")
    if not 1 <= v["block_dim"] <= chip.cores:
        bad.append(f"block_dim = {v['block_dim']}: 1..{chip.cores} cores")
    if v["block_dim"] * v["tasks_per_core_max"] < v["tasks"]:
        bad.append("block_dim x tasks_per_core_max must cover the tasks")
    cv = 1 if chip["coupled"] else max(1, int(chip["vector_cores"]) // chip.cores)
    if v["cv_ratio"] != cv:
        bad.append(f"cv_ratio = {v['cv_ratio']}: {chip.id} has {cv} vector core(s) per cube core")
    need = buffer_bytes(p, v)
    for k in _SIZES:
        cap = chip[k]
        if need[k] > cap:
            bad.append(f"{k}: the block needs {need[k]} B, the chip has {cap}")
        elif v[k] != need[k]:
            bad.append(f"{k} = {v[k]}: the block fills {need[k]} B")
    return bad


# The view's fields in the order of the host tiling data; those not listed in _FA_TYPED are integers >= 0
_FA_FIELDS = [
    "s1_base",
    "s2_base",
    "heads_per_block",
    "rows_per_block",
    "s1_blocks",
    "s2_blocks",
    "kv_split",
    "s2_blocks_per_split",
    "core_split",
    "block_dim",
    "tasks",
    "tasks_per_core_max",
    "preload",
    "kernel_task_num",
    "double_buffer",
    "cv_ratio",
    "workspace_bytes",
    *_SIZES,
]
_FA_TYPED = {
    "core_split": {"enum": ["plain", "balanced"]},
    "preload": {"type": "integer", "minimum": 0, "maximum": 3},
    "double_buffer": {"enum": [0, 1]},
    "workspace_bytes": _NONNEG,
}
ASCENDC_FA_SCHEMA = {
    "type": "object",
    "required": _FA_FIELDS,
    "properties": {
        "layout": {"enum": ["BNSD"]},
        "mask": {"enum": ["none", "causal_bottom_right"]},
        **{k: _INT for k in _FA_FIELDS if k not in _FA_TYPED},
        **_FA_TYPED,
    },
    "additionalProperties": False,
}

# The host tiling data: the problem (the kernel's shapes), then every field of the view but its constant layout
# (BNSD); the mask and the core split as codes (the split's are the space's).
ASCENDC_TILING = TilingData(
    name="FlashAttentionTilingData",
    op_type="FlashAttention",
    target="ascendc_fa",
    header="flash_attention_tiling.h",
    keys=(*FlashAttention.FIELDS, *FlashAttention.OPTIONAL, "mask", *ASCENDC_FA_SCHEMA["required"]),
    wide=("workspace_bytes",),
    codes={
        "mask": {"none": 0, "causal_bottom_right": 1},
        "core_split": space_codes("flash_attention", "core_split"),
    },
    workspace="workspace_bytes",
)
