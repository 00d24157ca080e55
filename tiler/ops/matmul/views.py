"""Matmul's export targets: CATLASS (Atlas A2), AscendC's TCubeTiling and the project's Triton kernel.

Each target (tiler.target.Target) is a constraint on the search space, not a view computed afterwards: `DOMAINS`
pins the knobs to what the code generator can express, `rules` are its compile-time checks as masks over
candidates (the search sees them beside the capacity rules), `view` writes what the generator takes, `check`
re-derives the same rules from a view alone (what `tiler check` runs on a file, independently of the search's
masks, so a test can catch either being wrong) and `emit` prints the code a user pastes. docs/targets/*.md
describe each target, with what it cannot express.
"""

from __future__ import annotations

import math
from functools import lru_cache

import numpy as np

from ... import __version__
from ...model.common import ceil_div
from ...target import Target
from ..triton_config import triton_config, triton_entry
from .problem import Matmul as Problem

# ----------------------------------------------------------------------------------------------------- shared

# element type names of the generators, by problem dtype (inputs; int8 accumulates and is written as int32)
CPP_ELEMENT = {"fp16": "half", "bf16": "bfloat16_t", "fp32": "float", "int8": "int8_t"}
CPP_OUTPUT = {"fp16": "half", "bf16": "bfloat16_t", "fp32": "float", "int8": "int32_t"}
CPP_BYTES = {"half": 2, "bfloat16_t": 2, "float": 4, "int8_t": 1, "int32_t": 4}


def _layout(p: Problem) -> tuple[str, str, str]:
    """(A's storage n|t, B's storage n|t, B's format nd|nz); problems without the fields are nn / nd."""
    lay = getattr(p, "layout", "nn")
    return lay[0], lay[1], getattr(p, "b_format", "nd")


def _k_slice(p: Problem, base_k: int, split: int) -> int:
    """One split-K slice of K: whole base_k steps (the model's _k_slice, on ints)."""
    steps = -(-p.K // base_k)
    per = -(-steps // split)
    return min(per * base_k, p.K)


def _knob(t: dict, name: str, family: str = "ascend") -> int:
    """A decoded knob as the int the generators take: a categorical knob's label becomes its code, as the shipped
    space file (search_spaces/matmul.toml) defines them."""
    return _space(family).knobs[name].parse(t[name])


@lru_cache(maxsize=2)
def _space(family: str):
    from ...space import load_space

    return load_space("matmul", family, builtin=True)


# ------------------------------------------------------------------------------------------------- CATLASS

# Catlass::Arch::AtlasA2 buffer sizes (catlass include/catlass/arch/arch.hpp): the block's static_asserts use
# these, not the chip profile's.
ATLAS_A2 = {"L1_SIZE": 512 * 1024, "L0A_SIZE": 64 * 1024, "L0B_SIZE": 64 * 1024, "L0C_SIZE": 128 * 1024}

CATLASS_DOMAINS = {
    "step_m": (1,),  # L1TileShape::M == L0TileShape::M (preload-async and pingpong blocks)
    "step_n": (1,),  # L1TileShape::N == L0TileShape::N
    "multi_load": (1,),  # one GM->L1 copy per operand per L1 tile
    "weight_resident": (0,),  # no whole-K resident B panel in the preload-async block
    "iterate_order": ("m",),  # one L0 block per tile: the order inside a tile is moot
    "serpentine": (1,),  # GemmIdentityBlockSwizzle reverses every odd group: always serpentine
    "tail_split": ("off",),  # the identity swizzle does not re-cut the last round
    "core_split": ("walk",),  # task i -> core i mod cores, in swizzle order
}
CATLASS_RULES = {
    "catlass_one_k": ("step_ka", "step_kb"),
    "catlass_l1": ("base_m", "base_n", "base_k", "step_ka", "step_kb", "l1_stages"),
    "catlass_l0c": ("base_m", "base_n", "l0_pingpong"),
    "catlass_align": ("base_m", "base_n", "base_k"),
    "catlass_policy": ("split_k", "l1_stages", "preload", "l0_pingpong"),
}
CATLASS_TEXT = {
    "catlass_one_k": "one L1 K for A and B: step_ka == step_kb (L1TileShape has one K)",
    "catlass_l1": "(L1.M*L1.K + L1.K*L1.N) * bytes * L1_STAGES <= AtlasA2 L1_SIZE (512 KiB)",
    "catlass_l0c": "L1.M*L1.N*4*L0C_STAGES <= AtlasA2 L0C_SIZE (128 KiB)",
    "catlass_align": "every tile extent * element bits is a multiple of 256 bits (TileShapeAlignChecker)",
    "catlass_policy": "split_k 1: MmadAtlasA2PreloadAsync with 1 <= PRELOAD_STAGES < L1_STAGES; split_k > 1: "
    "the split-K kernel's MmadAtlasA2Pingpong (2 L1 and L0 stages, no preload)",
}


def _is_atlas_a2(chip) -> bool:
    """CATLASS's AtlasA2 arch tag: separated cube/vector cores with A2's L1/L0 sizes (910B1-B4, 910_93)."""
    return (
        chip.family == "ascend"
        and not chip.get("coupled", True)
        and chip["l1_bytes"] == ATLAS_A2["L1_SIZE"]
        and chip["l0a_bytes"] == ATLAS_A2["L0A_SIZE"]
        and chip["l0c_bytes"] == ATLAS_A2["L0C_SIZE"]
    )


def catlass_supports(chip, p: Problem) -> str | None:
    if not _is_atlas_a2(chip):
        return f"CATLASS's AtlasA2 templates need an Atlas A2/A3 chip (910B1-B4, 910_93), not {chip.id}"
    return None


def _l0c_stages(base_m, base_n) -> np.ndarray:
    """L0C buffers the block can double: 2 when two fp32 accumulator tiles fit AtlasA2's L0C."""
    return np.where(np.asarray(base_m) * np.asarray(base_n) * 4 * 2 <= ATLAS_A2["L0C_SIZE"], 2, 1)


def catlass_masks(p: Problem, chip, c: dict, names) -> dict:
    b = p.in_bytes
    out = {}
    for r in names:
        if r == "catlass_one_k":
            out[r] = c["step_ka"] == c["step_kb"]
        elif r == "catlass_l1":
            k1 = c["base_k"] * np.maximum(c["step_ka"], c["step_kb"])
            out[r] = (c["base_m"] * k1 + k1 * c["base_n"]) * b * c["l1_stages"] <= ATLAS_A2["L1_SIZE"]
        elif r == "catlass_l0c":
            out[r] = c["base_m"] * c["base_n"] * 4 <= ATLAS_A2["L0C_SIZE"]
        elif r == "catlass_align":
            bits = 8 * b
            out[r] = (
                (c["base_m"] * bits % 256 == 0)
                & (c["base_n"] * bits % 256 == 0)
                & (c["base_k"] * bits % 256 == 0)
            )
        elif r == "catlass_policy":
            preload_async = (c["split_k"] == 1) & (c["preload"] >= 1) & (c["preload"] < c["l1_stages"])
            pingpong = (
                (c["split_k"] > 1) & (c["l1_stages"] == 2) & (c["preload"] == 0) & (c["l0_pingpong"] == 1)
            )
            out[r] = preload_async | pingpong
    return out


def catlass_view(p: Problem, chip, t: dict, row: dict) -> dict:
    """The CATLASS types of the tiling: DispatchPolicy with every parameter, tile shapes, element types and layouts,
    and the block scheduler (the split-K scheduler and kernel when split_k > 1)."""
    a, bl, bf = _layout(p)
    split = _knob(t, "split_k")
    k1 = t["base_k"] * max(t["step_ka"], t["step_kb"])
    l0c = int(_l0c_stages(t["base_m"], t["base_n"]))
    unit_flag = l0c == 1 and p.dtype != "int8"
    if split == 1:
        policy = {
            "name": "MmadAtlasA2PreloadAsync",
            "PRELOAD_STAGES": int(t["preload"]),
            "L1_STAGES": int(t["l1_stages"]),
            "L0A_STAGES": 1 + int(t["l0_pingpong"]),
            "L0B_STAGES": 1 + int(t["l0_pingpong"]),
            "L0C_STAGES": l0c,
            "ENABLE_UNIT_FLAG": unit_flag,
            "ENABLE_SHUFFLE_K": False,
        }
        scheduler = "GemmIdentityBlockSwizzle"
    else:
        policy = {"name": "MmadAtlasA2Pingpong", "ENABLE_UNIT_FLAG": p.dtype != "int8"}
        scheduler = "SplitkGemmIdentityBlockSwizzle"
    layout_b = "zN" if bf == "nz" else ("ColumnMajor" if bl == "t" else "RowMajor")
    out_element = "float" if split > 1 and p.dtype != "int8" else CPP_OUTPUT[p.dtype]
    return {
        "ArchTag": "AtlasA2",
        "DispatchPolicy": policy,
        "L1TileShape": [int(t["base_m"]), int(t["base_n"]), int(k1)],
        "L0TileShape": [int(t["base_m"]), int(t["base_n"]), int(t["base_k"])],
        "AType": {"element": CPP_ELEMENT[p.dtype], "layout": "ColumnMajor" if a == "t" else "RowMajor"},
        "BType": {"element": CPP_ELEMENT[p.dtype], "layout": layout_b},
        "CType": {"element": out_element, "layout": "RowMajor"},
        "BlockScheduler": {
            "name": scheduler,
            "SwizzleOffset": int(t["swizzle_offset"]),
            "SwizzleDirection": int(t["swizzle_direction"]),
        },
        "kernel": "SplitkMatmul" if split > 1 else "preload-async matmul",
        "split_k": split,
        "block_dim": int(row["cores_used"]),
    }


def check_catlass(v: dict, chip, p: Problem) -> list[str]:
    """The preload-async (or split-K pingpong) block's compile-time checks, from the view alone."""
    bad = []
    l1m, l1n, l1k = v["L1TileShape"]
    l0m, l0n, l0k = v["L0TileShape"]
    ea, eb = CPP_BYTES[v["AType"]["element"]], CPP_BYTES[v["BType"]["element"]]
    acc = 4
    pol = v["DispatchPolicy"]
    pingpong = pol["name"] == "MmadAtlasA2Pingpong"
    l1_stages = 2 if pingpong else pol["L1_STAGES"]
    l0a = 2 if pingpong else pol["L0A_STAGES"]
    l0b = 2 if pingpong else pol["L0B_STAGES"]
    l0c = 1 if pingpong else pol["L0C_STAGES"]
    if (l1m * l1k * ea + l1n * l1k * eb) * l1_stages > ATLAS_A2["L1_SIZE"]:
        bad.append(f"L1TileShape exceeds L1: ({l1m}*{l1k}*{ea} + {l1n}*{l1k}*{eb})*{l1_stages} > 524288")
    if l0m * l0k * ea * l0a > ATLAS_A2["L0A_SIZE"]:
        bad.append(f"L0TileShape exceeds L0A: {l0m}*{l0k}*{ea}*{l0a} > 65536")
    if l0k * l0n * eb * l0b > ATLAS_A2["L0B_SIZE"]:
        bad.append(f"L0TileShape exceeds L0B: {l0k}*{l0n}*{eb}*{l0b} > 65536")
    if l1m * l1n * acc * l0c > ATLAS_A2["L0C_SIZE"]:
        bad.append(f"L0C: {l1m}*{l1n}*4*{l0c} > 131072")
    if l1m != l0m or l1n != l0n:
        bad.append("L1TileShape and L0TileShape must agree on M and N")
    if l0k > l1k:
        bad.append("L0TileShape::K cannot exceed L1TileShape::K")
    for name, ext, size in (
        ("L1.M", l1m, ea),
        ("L1.K", l1k, ea),
        ("L1.K", l1k, eb),
        ("L1.N", l1n, eb),
        ("L0.M", l0m, ea),
        ("L0.K", l0k, ea),
        ("L0.K", l0k, eb),
        ("L0.N", l0n, eb),
    ):
        if ext * size * 8 % 256:
            bad.append(f"{name} = {ext} is not 32-byte aligned for a {size}-byte element")
    if v["CType"]["layout"] != "RowMajor":
        bad.append("LayoutC must be RowMajor")
    if pol.get("ENABLE_UNIT_FLAG") and v["AType"]["element"] == "int8_t":
        bad.append("ENABLE_UNIT_FLAG must be false for int8 inputs")
    if not pingpong:
        if not 1 <= pol["PRELOAD_STAGES"] < pol["L1_STAGES"]:
            bad.append("PreloadAsync needs 1 <= PRELOAD_STAGES < L1_STAGES")
        if pol["ENABLE_UNIT_FLAG"] and pol["L0C_STAGES"] != 1:
            bad.append("ENABLE_UNIT_FLAG needs L0C_STAGES == 1")
    split = v["split_k"]
    want = "SplitkGemmIdentityBlockSwizzle" if split > 1 else "GemmIdentityBlockSwizzle"
    if v["BlockScheduler"]["name"] != want or pingpong != (split > 1):
        bad.append(
            f"split_k {split} needs {want} and the {'split-K' if split > 1 else 'preload-async'} kernel"
        )
    sch = v["BlockScheduler"]
    if sch["SwizzleOffset"] < 1 or sch["SwizzleDirection"] not in (0, 1):
        bad.append("SwizzleOffset >= 1 and SwizzleDirection 0 or 1")
    if split > 1 and v["CType"]["element"] != "float" and v["AType"]["element"] != "int8_t":
        bad.append("the split-K kernel accumulates fp32 partials: CType element float")
    if v["AType"]["element"] != CPP_ELEMENT[p.dtype] or v["BType"]["element"] != CPP_ELEMENT[p.dtype]:
        bad.append(f"AType/BType element must be {CPP_ELEMENT[p.dtype]} for {p.dtype}")
    return bad


def emit_catlass(v: dict, doc: dict) -> str:
    """The C++ fragment: CATLASS's includes, then the aliases of its examples at namespace scope."""
    pol = v["DispatchPolicy"]
    if pol["name"] == "MmadAtlasA2PreloadAsync":
        params = [
            pol[k] for k in ("PRELOAD_STAGES", "L1_STAGES", "L0A_STAGES", "L0B_STAGES", "L0C_STAGES")
        ] + [pol["ENABLE_UNIT_FLAG"], pol["ENABLE_SHUFFLE_K"]]
    else:
        params = [pol["ENABLE_UNIT_FLAG"]]
    args = ", ".join(str(x).lower() if isinstance(x, bool) else str(x) for x in params)
    sch = v["BlockScheduler"]

    def gemm_type(t: dict) -> str:
        return f"Catlass::Gemm::GemmType<{t['element']}, Catlass::layout::{t['layout']}>"

    lines = [
        '#include "catlass/arch/arch.hpp"',
        '#include "catlass/gemm/block/block_mmad.hpp"',
        '#include "catlass/gemm/block/block_swizzle.hpp"',
        '#include "catlass/gemm/dispatch_policy.hpp"',
        '#include "catlass/gemm/gemm_type.hpp"',
        '#include "catlass/gemm_coord.hpp"',
        '#include "catlass/layout/layout.hpp"',
        "",
        f"// {_header(doc)}",
    ]
    if v["split_k"] > 1:
        lines.append(
            f"// split-K: kernel Catlass::Gemm::Kernel::SplitkMatmul, splitkFactor {v['split_k']}, then the "
            "SplitkReduceAdd kernel to the output type"
        )
    lines += [
        f"using ArchTag = Catlass::Arch::{v['ArchTag']};",
        f"using DispatchPolicy = Catlass::Gemm::{pol['name']}<{args}>;",
        "using L1TileShape = Catlass::GemmShape<{}, {}, {}>;".format(*v["L1TileShape"]),
        "using L0TileShape = Catlass::GemmShape<{}, {}, {}>;".format(*v["L0TileShape"]),
        f"using AType = {gemm_type(v['AType'])};",
        f"using BType = {gemm_type(v['BType'])};",
        f"using CType = {gemm_type(v['CType'])};",
        f"using BlockScheduler = Catlass::Gemm::Block::{sch['name']}<{sch['SwizzleOffset']}, "
        f"{sch['SwizzleDirection']}>;",
    ]
    return "\n".join(lines) + "\n"


def _header(doc: dict) -> str:
    """One comment line: what the fragment is for and what the model predicts."""
    shape = ",".join(f"{k}={v}" for k, v in doc["problem"]["shape"].items())
    return (
        f"tiler {__version__}: {doc['op']} {shape} {doc['problem']['dtype']} on {doc['chip']['id']} "
        f"({doc['chip']['cores']} cores), predicted {doc['estimate']['time_us']:.2f} us"
    )


# ------------------------------------------------------------------------------------------------- AscendC

# The TCubeTiling struct as CANN defines it (adv_api matmul_tilingdata.h): every field, in order, int32.
TCUBE_FIELDS = (
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
    "isBias",
    "transLength",
    "iterateOrder",
    "shareMode",
    "shareL1Size",
    "shareL0CSize",
    "shareUbSize",
    "batchM",
    "batchN",
    "singleBatchM",
    "singleBatchN",
    "stepKa",
    "stepKb",
    "depthAL1CacheUB",
    "depthBL1CacheUB",
    "dbL0A",
    "dbL0B",
    "dbL0C",
    "ALayoutInfoB",
    "ALayoutInfoS",
    "ALayoutInfoN",
    "ALayoutInfoG",
    "ALayoutInfoD",
    "BLayoutInfoB",
    "BLayoutInfoS",
    "BLayoutInfoN",
    "BLayoutInfoG",
    "BLayoutInfoD",
    "CLayoutInfoB",
    "CLayoutInfoS1",
    "CLayoutInfoN",
    "CLayoutInfoG",
    "CLayoutInfoS2",
    "BatchNum",
    "mxTypePara",
)
ASCENDC_DOMAINS = {
    "core_split": ("block",),  # each core one contiguous singleCoreM x singleCoreN x singleCoreK block
    "swizzle_offset": (1,),  # (the walk knobs are moot under the block split: one value each)
    "swizzle_direction": (0,),
    "serpentine": (0,),
    "tail_split": ("off",),  # the last block row/column is smaller (AscendC's tail), not re-cut
    "l1_stages": (1, 2),  # depthA1 = stepM*stepKa*dbA1 with dbA1 in {1, 2}
    "preload": (0, 1),  # doMTE2Preload: the next block's first load, one block ahead
}
ASCENDC_RULES = {
    "ascendc_cores": ("split_k",),
    "ascendc_preload": (
        "weight_resident",
        "preload",
        "multi_load",
        "l1_stages",
        "iterate_order",
        "base_k",
        "step_ka",
        "step_kb",
        "split_k",
    ),
}
ASCENDC_TEXT = {
    "ascendc_cores": "usedCoreNum <= the chip's cores: each split-K slice needs at least one core of its own",
    "ascendc_preload": "doMTE2Preload needs MDL (multi_load), L1 double buffering of the preloaded operand "
    "(A when iterating along M, B along N; a resident B panel is single-buffered) and that operand whole along K",
}


def ascendc_masks(p: Problem, chip, c: dict, names) -> dict:
    out = {}
    if "ascendc_cores" in names:
        out["ascendc_cores"] = c["split_k"] <= chip.cores
    if "ascendc_preload" in names:
        kc = np.minimum(ceil_div(ceil_div(p.K, c["base_k"]), c["split_k"]) * c["base_k"], p.K)
        full_a = c["base_k"] * c["step_ka"] >= kc
        full_b = c["base_k"] * c["step_kb"] >= kc
        # a resident B panel is one L1 buffer (depthB1 = stepN*stepKb): B cannot be the double-buffered preload
        full = np.where(c["iterate_order"] == 0, full_a, full_b & (c["weight_resident"] == 0))
        out["ascendc_preload"] = (c["preload"] == 0) | ((c["multi_load"] == 1) & (c["l1_stages"] == 2) & full)
    return out


def tcube_view(p: Problem, chip, t: dict, row: dict) -> dict:
    """The whole TCubeTiling (every field, int32, AscendC's meanings: singleCore* are one core's share) and the
    template-side facts a kernel declares beside it (MatmulConfig, MatmulType per operand)."""
    a, bl, bf = _layout(p)
    split = _knob(t, "split_k")
    single_k = _k_slice(p, t["base_k"], split)
    resident = _knob(t, "weight_resident") == 1
    step_kb = -(-single_k // t["base_k"]) if resident else int(t["step_kb"])
    stages = int(t["l1_stages"])
    single_m = int(row["single_core_m"])
    single_n = int(row["single_core_n"])
    used = -(-p.M // single_m) * -(-p.N // single_n) * -(-p.K // single_k)
    batch = p.batch
    f = dict.fromkeys(TCUBE_FIELDS, 0)
    f.update(
        usedCoreNum=used,
        M=p.M,
        N=p.N,
        Ka=p.K,
        Kb=p.K,
        singleCoreM=single_m,
        singleCoreN=single_n,
        singleCoreK=single_k,
        baseM=int(t["base_m"]),
        baseN=int(t["base_n"]),
        baseK=int(t["base_k"]),
        depthA1=int(t["step_m"]) * int(t["step_ka"]) * stages,
        depthB1=int(t["step_n"]) * step_kb * (1 if resident else stages),
        stepM=int(t["step_m"]),
        stepN=int(t["step_n"]),
        iterateOrder=_knob(t, "iterate_order"),
        batchM=batch if batch > 1 else 0,
        batchN=batch if batch > 1 else 0,
        singleBatchM=1 if batch > 1 else 0,
        singleBatchN=1 if batch > 1 else 0,
        stepKa=int(t["step_ka"]),
        stepKb=step_kb,
        dbL0A=1 + int(t["l0_pingpong"]),
        dbL0B=1 + int(t["l0_pingpong"]),
        dbL0C=2 if int(t["base_m"]) * int(t["base_n"]) * 4 * 2 <= chip["l0c_bytes"] else 1,
        BatchNum=batch if batch > 1 else 0,
    )
    elem = {"fp16": "half", "bf16": "bfloat16_t", "fp32": "float", "int8": "int8_t"}[p.dtype]
    return {
        "TCubeTiling": f,
        "MatmulConfig": {
            "preset": "CFG_MDL" if _knob(t, "multi_load") == 1 else "CFG_NORM",
            "doMTE2Preload": 0 if int(t["preload"]) == 0 else 1 + _knob(t, "iterate_order"),
            "enableMultiCoreSplitK": split > 1,
        },
        "MatmulType": {
            "A": {"position": "GM", "format": "ND", "type": elem, "isTrans": a == "t"},
            "B": {
                "position": "GM",
                "format": "NZ" if bf == "nz" else "ND",
                "type": elem,
                "isTrans": bl == "t",
            },
            "C": {"position": "GM", "format": "ND", "type": "float" if split > 1 else CPP_OUTPUT[p.dtype]},
        },
        "block_dim": used,
    }


def check_tcube(view: dict, chip, p: Problem) -> list[str]:
    """AscendC's TCubeTiling rules (asc-devkit TCubeTiling table 2, the MDL rules) and the per-core coverage, from
    the view alone; returns the broken ones."""
    v = view["TCubeTiling"]
    trans_a = view["MatmulType"]["A"]["isTrans"]
    trans_b = view["MatmulType"]["B"]["isTrans"]
    b = p.in_bytes
    c0 = 32 // b
    bad = []
    if (v["M"], v["N"], v["Ka"], v["Kb"]) != (p.M, p.N, p.K, p.K):
        bad.append(f"M, N, Ka, Kb must be the problem's {p.M}, {p.N}, {p.K}, {p.K}")
    scm, scn, sck = v["singleCoreM"], v["singleCoreN"], v["singleCoreK"]
    if not (0 < scm <= p.M and 0 < scn <= p.N and 0 < sck <= p.K):
        bad.append("0 < singleCoreM <= M, 0 < singleCoreN <= N, 0 < singleCoreK <= Ka")
        return bad
    blocks = math.ceil(p.M / scm) * math.ceil(p.N / scn) * math.ceil(p.K / sck)
    if v["usedCoreNum"] != blocks:
        bad.append(f"usedCoreNum = ceil(M/singleCoreM)*ceil(N/singleCoreN)*ceil(Ka/singleCoreK) = {blocks}")
    if v["usedCoreNum"] > chip.cores:
        bad.append(f"usedCoreNum <= the chip's {chip.cores} cores")
    if sck < p.K and not view["MatmulConfig"]["enableMultiCoreSplitK"]:
        bad.append("singleCoreK < Ka needs enableMultiCoreSplitK")
    if v["baseM"] % 16 or v["baseN"] % 16 or v["baseK"] % 16 or v["baseK"] % c0:
        bad.append("baseM, baseN multiples of 16; baseK a multiple of C0 and 16")
    if v["baseM"] * v["baseK"] * b * v["dbL0A"] > chip["l0a_bytes"]:
        bad.append("baseM*baseK*sizeof*dbL0A <= L0A")
    if v["baseN"] * v["baseK"] * b * v["dbL0B"] > chip["l0b_bytes"]:
        bad.append("baseN*baseK*sizeof*dbL0B <= L0B")
    if v["baseM"] * v["baseN"] * 4 * v["dbL0C"] > chip["l0c_bytes"]:
        bad.append("baseM*baseN*4*dbL0C <= L0C")
    for name, depth, step in (
        ("A", v["depthA1"], v["stepM"] * v["stepKa"]),
        ("B", v["depthB1"], v["stepN"] * v["stepKb"]),
    ):
        if step <= 0 or depth % step or depth // step not in (1, 2):
            bad.append(
                f"depth{name}1 = step{'M' if name == 'A' else 'N'}*stepK{name.lower()}*db{name}1 with db in 1, 2"
            )
    pad = lambda x: -(-x // c0) * c0  # noqa: E731  (C0 padding of the fractal's short side)
    a_l1 = (pad(v["baseM"]) if trans_a else v["baseM"]) * v["baseK"] * v["depthA1"] * b
    b_l1 = (v["baseN"] if trans_b else pad(v["baseN"])) * v["baseK"] * v["depthB1"] * b
    if a_l1 + b_l1 > chip["l1_bytes"]:
        bad.append(f"AL1 + BL1 = {a_l1 + b_l1} B <= L1 ({chip['l1_bytes']} B)")
    k_iter_a = math.ceil(sck / (v["baseK"] * v["stepKa"]))
    k_iter_b = math.ceil(sck / (v["baseK"] * v["stepKb"]))
    if k_iter_a % k_iter_b and k_iter_b % k_iter_a:
        bad.append("kaStepIter and kbStepIter divide one another")
    if k_iter_a > 1 and v["stepM"] != 1:
        bad.append("stepM = 1 when A is not fully loaded along K")
    if k_iter_b > 1 and v["stepN"] != 1:
        bad.append("stepN = 1 when B is not fully loaded along K")
    if v["baseM"] > -(-scm // 16) * 16 or v["baseN"] > -(-scn // 16) * 16:
        bad.append("baseM <= align16(singleCoreM), baseN <= align16(singleCoreN) (SetFixSplit)")
    if v["iterateOrder"] not in (0, 1) or v["isBias"] not in (0, 1):
        bad.append("iterateOrder and isBias are 0 or 1")
    pre = view["MatmulConfig"]["doMTE2Preload"]
    if pre:
        full = k_iter_a == 1 if pre == 1 else k_iter_b == 1
        depth = (
            v["depthA1"] // max(v["stepM"] * v["stepKa"], 1)
            if pre == 1
            else v["depthB1"] // max(v["stepN"] * v["stepKb"], 1)
        )
        if view["MatmulConfig"]["preset"] != "CFG_MDL" or not full or depth != 2:
            bad.append(
                "doMTE2Preload needs CFG_MDL, the operand fully loaded along K and L1 double buffering"
            )
    return bad


def emit_ascendc(v: dict, doc: dict) -> str:
    """One `tiling.set_<field>(<value>);` per TCubeTiling field, for a `TCubeTiling tiling` in scope."""
    cfg, types = v["MatmulConfig"], v["MatmulType"]
    lines = [
        f"// {_header(doc)}",
        f"// MatmulConfig {cfg['preset']} (doMTE2Preload {cfg['doMTE2Preload']}, enableMultiCoreSplitK "
        f"{str(cfg['enableMultiCoreSplitK']).lower()}); blockDim {v['block_dim']}",
        "// MatmulType: "
        + "; ".join(
            f"{k} {t['type']} {t['format']}"
            + (f" isTrans={str(t['isTrans']).lower()}" if "isTrans" in t else "")
            for k, t in types.items()
        ),
    ]
    lines += [f"tiling.set_{k}({int(v['TCubeTiling'][k])});" for k in TCUBE_FIELDS]
    return "\n".join(lines) + "\n"


# --------------------------------------------------------------------------------------------------- Triton

TRITON_KWARGS = ("BLOCK_M", "BLOCK_N", "BLOCK_K", "GROUP_M", "ORDER", "SPLIT_K")


def triton_view(p: Problem, chip, t: dict, row: dict) -> dict:
    """The kernel's constexpr arguments, launch options and grid (tiler/ops/matmul/triton_runner.py's kernel)."""
    kwargs = {k: _knob(t, k, "cuda") for k in TRITON_KWARGS}
    tiles = -(-p.M // kwargs["BLOCK_M"]) * -(-p.N // kwargs["BLOCK_N"])
    return {
        "kernel": "tiler.ops.matmul.triton_runner:_gemm_tile_kernel",
        "kwargs": kwargs,
        "num_warps": int(t["num_warps"]),
        "num_stages": int(t["num_stages"]),
        "grid": [tiles, kwargs["SPLIT_K"]],
    }


def check_triton(v: dict, chip, p: Problem) -> list[str]:
    """What Triton and the GPU check at compile and launch time, from the view alone."""
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
    tiles = -(-p.M // kw["BLOCK_M"]) * -(-p.N // kw["BLOCK_N"])
    if list(v["grid"]) != [tiles, kw["SPLIT_K"]]:
        bad.append(f"grid = [ceil(M/BLOCK_M)*ceil(N/BLOCK_N), SPLIT_K] = [{tiles}, {kw['SPLIT_K']}]")
    if kw["ORDER"] not in (0, 1, 2) or kw["GROUP_M"] < 1 or kw["SPLIT_K"] < 1:
        bad.append("ORDER 0, 1 or 2; GROUP_M >= 1; SPLIT_K >= 1")
    return bad


def emit_triton(v: dict, doc: dict) -> str:
    """A `triton.Config` for the project's kernel (one line), after a comment naming the problem."""
    config = triton_config(v["kwargs"], v["num_warps"], v["num_stages"])
    return f"# {_header(doc)}; grid {tuple(v['grid'])}\n{config}\n"


# ------------------------------------------------------------------------------------------ JSON Schemas

_INT = {"type": "integer", "minimum": 1}
_SHAPE3 = {"type": "array", "items": _INT, "minItems": 3, "maxItems": 3}
_CPP_TYPE = {
    "type": "object",
    "required": ["element", "layout"],
    "properties": {
        "element": {"enum": sorted(CPP_BYTES)},
        "layout": {"enum": ["RowMajor", "ColumnMajor", "zN"]},
    },
    "additionalProperties": False,
}
CATLASS_SCHEMA = {
    "type": "object",
    "required": [
        "ArchTag",
        "DispatchPolicy",
        "L1TileShape",
        "L0TileShape",
        "AType",
        "BType",
        "CType",
        "BlockScheduler",
        "split_k",
    ],
    "properties": {
        "ArchTag": {"const": "AtlasA2"},
        "DispatchPolicy": {
            "oneOf": [
                {
                    "type": "object",
                    "properties": {
                        "name": {"const": "MmadAtlasA2PreloadAsync"},
                        **{
                            k: {"type": "integer", "minimum": 0}
                            for k in ("PRELOAD_STAGES", "L1_STAGES", "L0A_STAGES", "L0B_STAGES", "L0C_STAGES")
                        },
                        "ENABLE_UNIT_FLAG": {"type": "boolean"},
                        "ENABLE_SHUFFLE_K": {"type": "boolean"},
                    },
                    "required": [
                        "name",
                        "PRELOAD_STAGES",
                        "L1_STAGES",
                        "L0A_STAGES",
                        "L0B_STAGES",
                        "L0C_STAGES",
                        "ENABLE_UNIT_FLAG",
                        "ENABLE_SHUFFLE_K",
                    ],
                    "additionalProperties": False,
                },
                {
                    "type": "object",
                    "properties": {
                        "name": {"const": "MmadAtlasA2Pingpong"},
                        "ENABLE_UNIT_FLAG": {"type": "boolean"},
                    },
                    "required": ["name", "ENABLE_UNIT_FLAG"],
                    "additionalProperties": False,
                },
            ]
        },
        "L1TileShape": _SHAPE3,
        "L0TileShape": _SHAPE3,
        "AType": _CPP_TYPE,
        "BType": _CPP_TYPE,
        "CType": _CPP_TYPE,
        "BlockScheduler": {
            "type": "object",
            "required": ["name", "SwizzleOffset", "SwizzleDirection"],
            "properties": {
                "name": {"enum": ["GemmIdentityBlockSwizzle", "SplitkGemmIdentityBlockSwizzle"]},
                "SwizzleOffset": _INT,
                "SwizzleDirection": {"enum": [0, 1]},
            },
            "additionalProperties": False,
        },
        "split_k": _INT,
        "block_dim": _INT,
        "kernel": {"type": "string"},
    },
    "additionalProperties": False,
}
_INT32 = {"type": "integer", "minimum": 0, "maximum": 2**31 - 1}
_OPERAND = {
    "type": "object",
    "required": ["position", "format", "type"],
    "properties": {
        "position": {"const": "GM"},
        "format": {"enum": ["ND", "NZ"]},
        "type": {"enum": sorted(CPP_BYTES)},
        "isTrans": {"type": "boolean"},
    },
    "additionalProperties": False,
}
TCUBE_SCHEMA = {
    "type": "object",
    "required": ["TCubeTiling", "MatmulConfig", "MatmulType", "block_dim"],
    "properties": {
        "TCubeTiling": {
            "type": "object",
            "required": list(TCUBE_FIELDS),
            "properties": dict.fromkeys(TCUBE_FIELDS, _INT32),
            "additionalProperties": False,
        },
        "MatmulConfig": {
            "type": "object",
            "required": ["preset", "doMTE2Preload", "enableMultiCoreSplitK"],
            "properties": {
                "preset": {"enum": ["CFG_NORM", "CFG_MDL"]},
                "doMTE2Preload": {"enum": [0, 1, 2]},
                "enableMultiCoreSplitK": {"type": "boolean"},
            },
            "additionalProperties": False,
        },
        "MatmulType": {
            "type": "object",
            "required": ["A", "B", "C"],
            "properties": {"A": _OPERAND, "B": _OPERAND, "C": _OPERAND},
            "additionalProperties": False,
        },
        "block_dim": _INT,
    },
    "additionalProperties": False,
}
TRITON_SCHEMA = {
    "type": "object",
    "required": ["kwargs", "num_warps", "num_stages", "grid"],
    "properties": {
        "kernel": {"type": "string"},
        "kwargs": {
            "type": "object",
            "required": list(TRITON_KWARGS),
            "properties": {**{k: _INT for k in TRITON_KWARGS}, "ORDER": {"enum": [0, 1, 2]}},
            "additionalProperties": False,
        },
        "num_warps": _INT,
        "num_stages": _INT,
        "grid": {"type": "array", "items": _INT, "minItems": 2, "maxItems": 2},
    },
    "additionalProperties": False,
}

# -------------------------------------------------------------------------------------------------- targets

CATLASS = Target(
    name="catlass",
    doc="CATLASS (Atlas A2): BlockMmad with MmadAtlasA2PreloadAsync, or the split-K kernel, and its swizzle",
    schema=CATLASS_SCHEMA,
    view=catlass_view,
    domains=CATLASS_DOMAINS,
    rules=CATLASS_RULES,
    rule_text=CATLASS_TEXT,
    masks=catlass_masks,
    check=check_catlass,
    emit=emit_catlass,
    supports=catlass_supports,
)
ASCENDC = Target(
    name="ascendc",
    doc="AscendC Matmul high-level API: the whole TCubeTiling, one contiguous block per core",
    schema=TCUBE_SCHEMA,
    view=tcube_view,
    domains=ASCENDC_DOMAINS,
    rules=ASCENDC_RULES,
    rule_text=ASCENDC_TEXT,
    masks=ascendc_masks,
    check=check_tcube,
    emit=emit_ascendc,
)


def triton_supports(chip, p: Problem) -> str | None:
    if p.batch != 1:
        return "the project's Triton kernel has no batch axis: launch it once per product (batch must be 1)"
    return None


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
