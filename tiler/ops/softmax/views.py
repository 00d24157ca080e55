"""Row softmax's export views and their JSON Schemas (Operator.TARGETS).

`ascendc_softmax`: what an AscendC softmax kernel on the vector cores needs to run a tiling: tasks, rows per
task, the UB chunk, the passes it makes over a row and the UB bytes a task fills. `ASCENDC_TILING` is the host
tiling-data class the target emits (`--emit ascendc_softmax`, a dispatch unit's entries): the problem's rows
and d, then every field of the view (docs/targets/softmax.md).
`triton`: the launch of tiler/ops/softmax/triton_kernels.py (kernel, constexprs, launch options, grid).
"""

from __future__ import annotations

from ..ascendc_tiling import TilingData
from ..triton_config import triton_config
from .problem import Softmax

_INT = {"type": "integer", "minimum": 1}
KERNELS = ("_softmax_row_kernel", "_softmax_online_kernel", "_softmax_3pass_kernel")
MAX_THREAD_ELEMS = 128  # triton_kernels.MAX_THREAD_ELEMS (that module is loaded by path on the GPU machine)


def _cdiv(a: int, b: int) -> int:
    return -(-a // b)


def _pow2(v: int) -> bool:
    return v >= 1 and not v & (v - 1)


# --- ascendc_softmax ---------------------------------------------------------------------------------------


def ascendc_view(p: Softmax, tiling: dict, row: dict, vector_cores: int) -> dict:
    """The tiling as an AscendC softmax kernel reads it. `row_passes` is what the kernel does (1 when the slice
    fits its UB chunk, else the `passes` knob); `ub_bytes` the UB a task fills (checked against the chip)."""
    s = int(tiling["cores_per_row"])
    q = int(tiling["rows_per_core"])
    slice_d = _cdiv(p.d, s)
    chunk = min(int(tiling["block_d"]), slice_d)
    chunks = _cdiv(slice_d, chunk)
    return {
        "rows_per_task": q,
        "cores_per_row": s,
        "slice_d": slice_d,
        "block_d": chunk,
        "chunks": chunks,
        "row_passes": 1 if chunks == 1 else int(tiling["passes"]),
        "double_buffer": int(tiling["double_buffer"]),
        "tasks": _cdiv(p.rows, q) * s,
        "block_dim": int(row["cores_used"]),
        "vector_cores": vector_cores,
        "ub_bytes": int(row["ub_bytes"]),
    }


ASCENDC_SCHEMA = {
    "type": "object",
    "required": [
        "rows_per_task",
        "cores_per_row",
        "slice_d",
        "block_d",
        "chunks",
        "row_passes",
        "double_buffer",
        "tasks",
        "block_dim",
        "vector_cores",
        "ub_bytes",
    ],
    "properties": {
        **{
            k: _INT
            for k in (
                "rows_per_task",
                "cores_per_row",
                "slice_d",
                "block_d",
                "chunks",
                "tasks",
                "block_dim",
                "vector_cores",
                "ub_bytes",
            )
        },
        "row_passes": {"enum": [1, 2, 3]},
        "double_buffer": {"enum": [0, 1]},
    },
    "additionalProperties": False,
}


ASCENDC_TILING = TilingData(
    name="SoftmaxTilingData",
    op_type="Softmax",
    target="ascendc_softmax",
    header="softmax_tiling.h",
    keys=(*Softmax.FIELDS, *Softmax.OPTIONAL, *ASCENDC_SCHEMA["required"]),
)


def check_ascendc(v: dict, chip, p: Softmax) -> list[str]:
    """The view alone must cover the problem and fit the chip: tasks, slices and chunks consistent with the
    shape, the UB bytes a task fills re-derived and within the chip's UB, no more cores than it has."""
    bad = []
    slice_d = _cdiv(p.d, v["cores_per_row"])
    if v["slice_d"] != slice_d:
        bad.append(f"slice_d = ceil(d / cores_per_row) = {slice_d}")
    if v["block_d"] > slice_d:
        bad.append(f"block_d = {v['block_d']} > slice_d = {slice_d}")
    chunks = _cdiv(slice_d, v["block_d"])
    if v["chunks"] != chunks:
        bad.append(f"chunks = ceil(slice_d / block_d) = {chunks}")
    if v["row_passes"] != 1 and chunks == 1:
        bad.append("a slice that fits its chunk is read once: row_passes = 1")
    if v["row_passes"] == 1 and chunks > 1:
        bad.append("a slice of several chunks needs row_passes 2 or 3")
    tasks = _cdiv(p.rows, v["rows_per_task"]) * v["cores_per_row"]
    if v["tasks"] != tasks:
        bad.append(f"tasks = ceil(rows / rows_per_task) * cores_per_row = {tasks}")
    units = int(chip["vector_cores"]) or chip.cores
    if v["block_dim"] > min(units, tasks):
        bad.append(f"block_dim = {v['block_dim']} > min(vector cores {units}, tasks {tasks})")
    bufs = 1 + v["double_buffer"]
    ub = v["rows_per_task"] * v["block_d"] * (bufs * (p.in_bytes + p.out_bytes) + 4) + v["rows_per_task"] * 64
    if v["ub_bytes"] != ub:
        bad.append(f"ub_bytes = rows_per_task*block_d*(buffers*(in+out bytes)+4) + rows_per_task*64 = {ub}")
    if ub > chip["ub_bytes"]:
        bad.append(f"ub_bytes = {ub} > the chip's UB ({chip['ub_bytes']})")
    return bad


# --- triton -------------------------------------------------------------------------------------------------


def kernel_of(block_d: int, passes: int, d: int) -> str:
    """The kernel a tiling runs: the whole-row kernel when a chunk holds the row, else by passes."""
    if block_d >= d:
        return KERNELS[0]
    return KERNELS[1] if passes == 2 else KERNELS[2]


def triton_view(p: Softmax, chip, tiling: dict, row: dict) -> dict:
    """The Triton launch: kernel, constexprs, launch options and the grid."""
    r, bd = int(tiling["ROWS"]), int(tiling["BLOCK_D"])
    return {
        "kernel": kernel_of(bd, int(tiling["passes"]), p.d),
        "kwargs": {"ROWS": r, "BLOCK_D": bd},
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
            "required": ["ROWS", "BLOCK_D"],
            "properties": {"ROWS": _INT, "BLOCK_D": {"type": "integer", "minimum": 16}},
            "additionalProperties": False,
        },
        "num_warps": {"enum": [1, 2, 4, 8, 16, 32]},
        "num_stages": {"const": 1},
        "grid": {"type": "array", "items": _INT, "minItems": 1, "maxItems": 1},
    },
    "additionalProperties": False,
}


def check_triton(v: dict, chip, p: Softmax) -> list[str]:
    """The launch must cover the rows and run the kernel its chunk implies; the tile must fit the registers."""
    bad = []
    r, bd = v["kwargs"]["ROWS"], v["kwargs"]["BLOCK_D"]
    for k, x in (("ROWS", r), ("BLOCK_D", bd)):
        if not _pow2(x):
            bad.append(f"{k} = {x}: a power of two (tl.arange)")
    if list(v["grid"]) != [_cdiv(p.rows, r)]:
        bad.append(f"grid = [ceil(rows / ROWS)] = [{_cdiv(p.rows, r)}]")
    if (v["kernel"] == KERNELS[0]) != (bd >= p.d):
        bad.append("BLOCK_D >= d runs _softmax_row_kernel; a smaller chunk one of the chunked kernels")
    per = r * bd / (32 * v["num_warps"])
    if per > MAX_THREAD_ELEMS:
        bad.append(f"ROWS*BLOCK_D/(32*num_warps) = {per:g} tile elements per thread > {MAX_THREAD_ELEMS}")
    return bad


def triton_entry(v: dict, doc: dict) -> dict:
    """The triton.Config's arguments (a Python dispatch unit's entry, and what `emit_triton` prints)."""
    return {"kwargs": dict(v["kwargs"]), "num_warps": v["num_warps"], "num_stages": v["num_stages"]}


def emit_triton(v: dict, doc: dict) -> str:
    """The kernel's constexprs and launch options as a `triton.Config`, after a comment naming kernel and grid."""
    config = triton_config(**triton_entry(v, doc))
    return (
        f"# tiler: {v['kernel']} of tiler/ops/softmax/triton_kernels.py, grid {tuple(v['grid'])}\n{config}\n"
    )
