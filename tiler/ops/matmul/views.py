"""Matmul's export views: AscendC TCubeTiling fields, CATLASS template arguments and the Triton launch config.

`check_tcube()` re-checks a TCubeTiling view against AscendC's published rules independently of the model's own
feasibility code, so a test can catch either being wrong.
"""

from __future__ import annotations

from .problem import Matmul as Problem


def tcube_view(problem: Problem, chip, t: dict, row: dict) -> dict:
    """AscendC TCubeTiling fields for the tiling `t` (decoded knobs) and its estimate row."""
    split = int(t["split_k"])
    k_steps = -(-problem.K // t["base_k"])
    per = -(-k_steps // split)
    single_k = min(per * t["base_k"], problem.K)
    # a resident B panel is one L1 buffer holding the whole K slice: stepKb covers it, no double buffer
    step_kb = -(-single_k // t["base_k"]) if t["weight_resident"] == 1 else t["step_kb"]
    depth_b = t["step_n"] * step_kb * (1 if t["weight_resident"] == 1 else t["l1_stages"])
    db_l0c = 2 if t["base_m"] * t["base_n"] * 4 * 2 <= chip["l0c_bytes"] else 1
    return {
        "usedCoreNum": int(row["cores_used"]),
        "M": problem.M,
        "N": problem.N,
        "Ka": problem.K,
        "Kb": problem.K,
        "singleCoreM": t["base_m"] * t["step_m"],
        "singleCoreN": t["base_n"] * t["step_n"],
        "singleCoreK": single_k,
        "baseM": t["base_m"],
        "baseN": t["base_n"],
        "baseK": t["base_k"],
        "depthA1": t["step_m"] * t["step_ka"] * t["l1_stages"],
        "depthB1": depth_b,
        "stepM": t["step_m"],
        "stepN": t["step_n"],
        "stepKa": t["step_ka"],
        "stepKb": step_kb,
        "isBias": 0,
        "transLength": 0,
        "iterateOrder": 0 if t["iterate_order"] == "m" else 1,
        "dbL0A": 1 + t["l0_pingpong"],
        "dbL0B": 1 + t["l0_pingpong"],
        "dbL0C": db_l0c,
        "shareMode": 0,
        "shareL1Size": 0,
        "shareL0CSize": 0,
        "shareUbSize": 0,
        "batchM": 1,
        "batchN": 1,
        "singleBatchM": 1,
        "singleBatchN": 1,
        "enableMultiCoreSplitK": split > 1,
        "doMultiDataLoad": bool(t["multi_load"]),
        "doMTE2Preload": int(t["preload"] > 0),
    }


def catlass_view(problem: Problem, t: dict) -> dict:
    """CATLASS template arguments: L1/L0 tile shapes, block swizzle, dispatch policy and its stages."""
    preload = t["preload"] > 0
    return {
        "L1TileShape": [
            t["base_m"] * t["step_m"],
            t["base_n"] * t["step_n"],
            t["base_k"] * max(t["step_ka"], t["step_kb"]),
        ],
        "L0TileShape": [t["base_m"], t["base_n"], t["base_k"]],
        "block_swizzle": {
            "name": "GemmIdentityBlockSwizzle",
            "SwizzleOffset": t["swizzle_offset"],
            "SwizzleDirection": t["swizzle_direction"],
            "serpentine": bool(t["serpentine"]),
        },
        "dispatch_policy": {
            "name": "MmadAtlasA2PreloadAsync" if preload else "MmadAtlasA2Pingpong",
            "L1_STAGES": t["l1_stages"],
            "PRELOAD_STAGES": t["preload"],
            "L0A_STAGES": 1 + t["l0_pingpong"],
            "L0B_STAGES": 1 + t["l0_pingpong"],
            "ENABLE_UNIT_FLAG": True,
        },
        "split_k": t["split_k"],
        "tail_split": t["tail_split"],
        "full_load_b": bool(t["weight_resident"]),
    }


def triton_view(problem: Problem, t: dict) -> dict:
    keys = ("BLOCK_M", "BLOCK_N", "BLOCK_K", "num_stages", "num_warps", "GROUP_M", "ORDER", "SPLIT_K")
    cfg = {k: (int(t[k]) if not isinstance(t[k], str) else t[k]) for k in keys}
    if isinstance(cfg["ORDER"], str):
        cfg["ORDER"] = {"row": 0, "grouped": 1, "serpentine": 2}.get(cfg["ORDER"], 0)
    tiles = -(-problem.M // cfg["BLOCK_M"]) * -(-problem.N // cfg["BLOCK_N"])
    return {**cfg, "grid": [tiles, cfg["SPLIT_K"], problem.batch]}


def check_tcube(view: dict, chip, dtype_bytes: int) -> list[str]:
    """AscendC TCubeTiling rules (asc-devkit TCubeTiling table 2, MDL rules); returns the broken ones."""
    v, bad = view, []
    c0 = 32 // dtype_bytes
    if v["usedCoreNum"] > chip.cores:
        bad.append("usedCoreNum <= core count")
    if v["baseM"] % 16 or v["baseN"] % 16 or v["baseK"] % 16 or v["baseK"] % c0:
        bad.append("baseM, baseN multiples of 16; baseK multiple of C0 and 16")
    if v["baseM"] * v["baseK"] * dtype_bytes * v["dbL0A"] > chip["l0a_bytes"]:
        bad.append("baseM*baseK*sizeof*dbL0A <= L0A")
    if v["baseN"] * v["baseK"] * dtype_bytes * v["dbL0B"] > chip["l0b_bytes"]:
        bad.append("baseN*baseK*sizeof*dbL0B <= L0B")
    if v["baseM"] * v["baseN"] * 4 * v["dbL0C"] > chip["l0c_bytes"]:
        bad.append("baseM*baseN*4*dbL0C <= L0C")
    if v["depthA1"] % (v["stepM"] * v["stepKa"]):
        bad.append("depthA1 = stepM*stepKa*dbA1")
    a_l1 = v["baseM"] * v["baseK"] * v["depthA1"] * dtype_bytes
    b_l1 = -(-v["baseN"] // c0) * c0 * v["baseK"] * v["depthB1"] * dtype_bytes
    if a_l1 + b_l1 > chip["l1_bytes"]:
        bad.append("AL1 + BL1 <= L1")
    k_iter_a = -(-v["singleCoreK"] // (v["baseK"] * v["stepKa"]))
    k_iter_b = -(-v["singleCoreK"] // (v["baseK"] * v["stepKb"]))
    if k_iter_a % k_iter_b and k_iter_b % k_iter_a:
        bad.append("kaStepIter and kbStepIter divide one another")
    if k_iter_a > 1 and v["stepM"] != 1:
        bad.append("stepM = 1 when A is not fully loaded along K")
    if v["depthB1"] % (v["stepN"] * v["stepKb"]):
        bad.append("depthB1 = stepN*stepKb*dbB1")
    if k_iter_b > 1 and v["stepN"] != 1:
        bad.append("stepN = 1 when B is not fully loaded along K")
    return bad


# JSON Schemas of the views (Operator.TARGETS): `tiler.export.validate` checks every exported view against them.
_INT = {"type": "integer", "minimum": 1}
_SHAPE3 = {"type": "array", "items": _INT, "minItems": 3, "maxItems": 3}
TCUBE_SCHEMA = {
    "type": "object",
    "required": [
        "usedCoreNum",
        "M",
        "N",
        "Ka",
        "Kb",
        "singleCoreM",
        "singleCoreN",
        "singleCoreK",
        "baseM",
        "baseN",
        "baseK",
        "depthA1",
        "depthB1",
        "stepM",
        "stepN",
        "stepKa",
        "stepKb",
        "iterateOrder",
        "dbL0A",
        "dbL0B",
        "dbL0C",
    ],
    "additionalProperties": {"type": ["integer", "boolean"]},
}
CATLASS_SCHEMA = {
    "type": "object",
    "required": ["L1TileShape", "L0TileShape", "block_swizzle", "dispatch_policy"],
    "properties": {"L1TileShape": _SHAPE3, "L0TileShape": _SHAPE3},
}
TRITON_SCHEMA = {
    "type": "object",
    "required": ["BLOCK_M", "BLOCK_N", "BLOCK_K", "num_stages", "num_warps", "GROUP_M", "ORDER", "SPLIT_K"],
    "properties": {
        **{
            k: _INT
            for k in ("BLOCK_M", "BLOCK_N", "BLOCK_K", "num_stages", "num_warps", "GROUP_M", "SPLIT_K")
        },
        "ORDER": {"enum": [0, 1, 2]},
    },
}
