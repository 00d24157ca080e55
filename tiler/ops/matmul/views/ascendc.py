"""The AscendC target (the Matmul high-level API's TCubeTiling): its domains and rules, view, check, entry and
emitted C++, native names and JSON Schema."""

from __future__ import annotations

import math

import numpy as np

from ....errors import TilerError
from ....model.common import ceil_div
from ....target import Target
from ..problem import Matmul as Problem
from .shared import (
    _INT,
    CPP_BYTES,
    CPP_ELEMENT,
    CPP_OUTPUT,
    _check_operand,
    _header,
    _indent,
    _k_slice,
    _knob,
    _layout,
    _native_flat,
    _native_int,
    _pinned,
    _quant_no_view,
    _space,
)

# ------------------------------------------------------------------------------------------------- AscendC


def ascendc_supports(chip, p: Problem) -> str | None:
    return _quant_no_view(p, "ascendc")


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


# The host tiling API the AscendC docs' multi-core example uses (Matmul Tiling类使用说明, "Matmul多核Tiling"; the
# asc-devkit snapshot below carries those pages under docs/zh/api/SIMD-API/高阶API/矩阵计算/Matmul-Tiling类/).
ASCENDC_DOCS_SNAPSHOT = "mirror-cann/asc-devkit@82b89a15f26329511fc7fbc807d5132a1f9b4ba7"
ASCENDC_INCLUDES = ("tiling/tiling_api.h",)  # optiling::TCubeTiling and matmul_tiling::MultiCoreMatmulTiling
# TCubeTiling fields no MultiCoreMatmulTiling setter reaches: GetTiling picks them itself (its own search over
# L1 and L0 factors, its buffer accounting, the batch split of BatchMatmulTiling). SetFixSplit's baseK is one
# of them: the docs allow only -1 there. The API form writes tiler's values over GetTiling's for each.
ASCENDC_API_CHOSEN = (
    "baseK",
    "depthA1",
    "depthB1",
    "stepM",
    "stepN",
    "stepKa",
    "stepKb",
    "dbL0A",
    "dbL0B",
    "dbL0C",
    "transLength",
    "shareL1Size",
    "shareL0CSize",
    "shareUbSize",
    "depthAL1CacheUB",
    "depthBL1CacheUB",
    "batchM",
    "batchN",
    "singleBatchM",
    "singleBatchN",
)
_ACL_DTYPE = {
    "half": "DT_FLOAT16",
    "bfloat16_t": "DT_BFLOAT16",
    "float": "DT_FLOAT",
    "int8_t": "DT_INT8",
    "int32_t": "DT_INT32",
}


def _tcube_setters(values: dict, fields) -> list[str]:
    """`tiling.set_<field>(<value>);` for `fields`, in order: the one way both forms write a field."""
    return [f"tiling.set_{k}({int(values[k])});" for k in fields]


def ascendc_entry(v: dict, doc: dict) -> str:
    """The raw-setter form as C++ declarations, valid at namespace scope and as a dispatch unit's `struct
    Entry<I> { ... };` body: `static void Fill(optiling::TCubeTiling &tiling)` setting every field once, in
    the struct's order, and `kBlockDim`, the block dim to launch with."""
    body = _indent("\n".join(_tcube_setters(v["TCubeTiling"], TCUBE_FIELDS)))
    return (
        "static void Fill(optiling::TCubeTiling &tiling)\n{\n"
        + body
        + f"\n}}\nstatic constexpr uint32_t kBlockDim = {int(v['block_dim'])};\n"
    )


def ascendc_api_form(v: dict) -> str:
    """The host tiling API form: `TilerTilingByApi(platform, tiling)` makes the calls of the AscendC docs'
    multi-core example in its order (SetDim, SetAType/SetBType/SetCType, SetShape, SetSingleShape,
    SetOrgShape, EnableBias, SetBufferSpace), then SetFixSplit, SetMatmulConfigParams, SetTraverse and
    EnableMultiCoreSplitK (all before GetTiling, as their pages require), GetTiling, and tiler's values
    over the fields GetTiling picks itself (ASCENDC_API_CHOSEN). SetTraverse follows SetMatmulConfigParams
    because the latter sets the traversal too (NOSET by default). SetDim is the tiling's block count: with
    SetSingleShape, GetTiling reports usedCoreNum as at most that."""
    f, cfg, types = v["TCubeTiling"], v["MatmulConfig"], v["MatmulType"]

    def operand(name: str) -> str:
        t = types[name]
        trans = f", {str(t['isTrans']).lower()}" if "isTrans" in t else ""
        return (
            f"api.Set{name}Type(matmul_tiling::TPosition::{t['position']}, "
            f"matmul_tiling::CubeFormat::{t['format']}, "
            f"matmul_tiling::DataType::{_ACL_DTYPE[t['type']]}{trans});"
        )

    traverse = "FIRSTM" if f["iterateOrder"] == 0 else "FIRSTN"
    calls = [
        "matmul_tiling::MultiCoreMatmulTiling api(ascendcPlatform);",
        f"api.SetDim({f['usedCoreNum']});",
        operand("A"),
        operand("B"),
        operand("C"),
        f"api.SetShape({f['M']}, {f['N']}, {f['Ka']});",
        f"api.SetSingleShape({f['singleCoreM']}, {f['singleCoreN']}, {f['singleCoreK']});",
        f"api.SetOrgShape({f['M']}, {f['N']}, {f['Ka']}, {f['Kb']});",
        f"api.EnableBias({str(bool(f['isBias'])).lower()});",
        "api.SetBufferSpace(-1, -1, -1);",
        f"api.SetFixSplit({f['baseM']}, {f['baseN']}, -1);",
        f"api.SetMatmulConfigParams({1 if cfg['preset'] == 'CFG_MDL' else 0});",
        f"api.SetTraverse(matmul_tiling::MatrixTraverse::{traverse});",
        f"api.EnableMultiCoreSplitK({str(bool(cfg['enableMultiCoreSplitK'])).lower()});",
    ]
    if f["BatchNum"]:
        calls.append(f"api.SetBatchNum({f['BatchNum']});")
    calls += [
        "if (api.GetTiling(tiling) == -1) {",
        "    return false;",
        "}",
        "// GetTiling picks these itself (no setter takes them; SetFixSplit's baseK must be -1): "
        "tiler's values",
        *_tcube_setters(f, ASCENDC_API_CHOSEN),
        "return true;",
    ]
    return (
        "inline bool TilerTilingByApi(const platform_ascendc::PlatformAscendC &ascendcPlatform, "
        "optiling::TCubeTiling &tiling)\n{\n" + _indent("\n".join(calls)) + "\n}\n"
    )


def emit_ascendc(v: dict, doc: dict) -> str:
    """The host tiling code to paste, both forms filling the same TCubeTiling: (a) the MultiCoreMatmulTiling
    calls of the AscendC docs (ascendc_api_form) and (b) every field by its setter, in a struct
    `TilerTiling` whose body is the dispatch unit's entry (ascendc_entry). Comment lines first: the
    MatmulConfig preset and each operand's MatmulType the kernel must declare to match, and the block dim."""
    cfg, types = v["MatmulConfig"], v["MatmulType"]
    lines = [f'#include "{h}"' for h in ASCENDC_INCLUDES]
    lines += [
        "",
        f"// {_header(doc, 'ascendc')}",
        f"// MatmulConfig {cfg['preset']} (doMTE2Preload {cfg['doMTE2Preload']}, enableMultiCoreSplitK "
        f"{str(cfg['enableMultiCoreSplitK']).lower()}); blockDim {v['block_dim']}",
        "// MatmulType: "
        + "; ".join(
            f"{k} {t['type']} {t['format']}"
            + (f" isTrans={str(t['isTrans']).lower()}" if "isTrans" in t else "")
            for k, t in types.items()
        ),
        "",
        "// (a) The host tiling API, as the AscendC docs' multi-core example calls it "
        f"({ASCENDC_DOCS_SNAPSHOT}).",
        ascendc_api_form(v).rstrip("\n"),
        "",
        "// (b) Every field by its setter: TilerTiling::Fill(tiling) writes the same TCubeTiling as (a).",
        "struct TilerTiling {",
        _indent(ascendc_entry(v, doc)),
        "};",
    ]
    return "\n".join(lines) + "\n"


ASCENDC_NATIVE_NAMES = (
    *TCUBE_FIELDS,
    "TCubeTiling",
    "MatmulConfig",
    "preset",
    "doMTE2Preload",
    "enableMultiCoreSplitK",
    "MatmulType",
    "block_dim",
)


def _ascendc_split(p: Problem, single_k: int, base_k: int | None) -> int:
    """split_k from singleCoreK: the smallest of the knob's values whose K slice (whole baseK steps, as
    tcube_view cuts it) is singleCoreK; without baseK, ceil(Ka / singleCoreK) when that is one of them."""
    values = _space("ascend").knobs["split_k"].values
    if base_k is not None:
        hits = [s for s in values if _k_slice(p, base_k, s) == single_k]
    else:
        hits = [s for s in values if s == -(-p.K // single_k)]
    if not hits:
        raise TilerError(
            f"ascendc: singleCoreK = {single_k} is no split of Ka = {p.K}"
            + (f" in whole baseK = {base_k} steps" if base_k is not None else "")
            + f" that split_k ({', '.join(map(str, values))}) expresses"
        )
    return hits[0]


def _ascendc_problem_fields(f: dict, num: dict, p: Problem) -> None:
    """ascendc_native's checks of the fields the problem decides: M, N, Ka, Kb, no bias, and MatmulType's A and B
    (element type, format, transposition) as the problem's dtype, layout and B format give them."""
    for name, want in (("M", p.M), ("N", p.N), ("Ka", p.K), ("Kb", p.K)):
        if name in num and num[name] != want:
            raise TilerError(f"ascendc: {name} = {num[name]} but the problem's is {want}")
    if num.get("isBias"):
        raise TilerError("ascendc: isBias = 1: tiler's matmul has no bias")
    a, b, bf = _layout(p)
    types = f.get("MatmulType", {})
    if not isinstance(types, dict):
        raise TilerError(f"ascendc: MatmulType must be an object of A, B, C, got {types!r}")
    elem = CPP_ELEMENT[p.dtype]
    _check_operand(
        "ascendc", "MatmulType.A", types.get("A", {}), {"type": elem, "format": "ND", "isTrans": a == "t"}
    )
    _check_operand(
        "ascendc",
        "MatmulType.B",
        types.get("B", {}),
        {"type": elem, "format": "NZ" if bf == "nz" else "ND", "isTrans": b == "t"},
    )


def _ascendc_l1_buffers(num: dict, knobs: dict) -> None:
    """ascendc_native's L1 knobs: l1_stages from depthA1 / (stepM*stepKa), and weight_resident (with step_kb) from
    depthB1 / (stepN*stepKb) against it; set in `knobs`."""
    single_k = num.get("singleCoreK")

    def buffers(depth: str, step: str, step_k: str) -> int | None:
        """depth / (step * step_k), AscendC's db of that operand's L1 (1 or 2), when all three are given."""
        if not all(k in num for k in (depth, step, step_k)):
            return None
        per = _native_int("ascendc", step, num[step], 1) * _native_int("ascendc", step_k, num[step_k], 1)
        if num[depth] % per or num[depth] // per not in (1, 2):
            raise TilerError(
                f"ascendc: {depth} = {num[depth]} is not {step}*{step_k} = {per} times 1 or 2 "
                "(its L1 buffers)"
            )
        return num[depth] // per

    db_a = buffers("depthA1", "stepM", "stepKa")
    db_b = buffers("depthB1", "stepN", "stepKb")
    if db_a is not None:
        knobs["l1_stages"] = db_a
    if db_a is not None and db_b is not None and db_a != db_b:
        whole_k = single_k is not None and "baseK" in num and num["stepKb"] * num["baseK"] >= single_k
        if not (db_b == 1 and db_a == 2 and whole_k):
            raise TilerError(
                f"ascendc: depthA1/(stepM*stepKa) = {db_a} but depthB1/(stepN*stepKb) = {db_b}: "
                "tiler's l1_stages "
                "counts both operands' L1 buffers (B single-buffered only as a panel whole along singleCoreK)"
            )
        knobs["weight_resident"] = 1
    else:
        if db_a is not None and db_b is not None:
            knobs["weight_resident"] = 0
        if "stepKb" in num:
            knobs["step_kb"] = _native_int("ascendc", "stepKb", num["stepKb"], 1)


def _ascendc_cores(f: dict, num: dict, p: Problem, knobs: dict) -> None:
    """ascendc_native's split_k from singleCoreK (checked against enableMultiCoreSplitK), and usedCoreNum and
    block_dim against the per-core split."""
    single_k = num.get("singleCoreK")
    if single_k is not None:
        if not 0 < single_k <= p.K:
            raise TilerError(f"ascendc: singleCoreK = {single_k} must be in 1..Ka = {p.K}")
        knobs["split_k"] = _ascendc_split(p, single_k, num.get("baseK"))
        split_on = f.get("enableMultiCoreSplitK")
        if split_on is not None and bool(split_on) != (single_k < p.K):
            raise TilerError(
                f"ascendc: enableMultiCoreSplitK = {str(bool(split_on)).lower()} "
                f"but singleCoreK = {single_k} "
                f"{'<' if single_k < p.K else '='} Ka = {p.K}"
            )
    if all(k in num for k in ("usedCoreNum", "singleCoreM", "singleCoreN", "singleCoreK")):
        if min(num["singleCoreM"], num["singleCoreN"]) < 1:
            raise TilerError("ascendc: singleCoreM and singleCoreN must be at least 1")
        blocks = -(-p.M // num["singleCoreM"]) * -(-p.N // num["singleCoreN"]) * -(-p.K // num["singleCoreK"])
        if num["usedCoreNum"] != blocks:
            raise TilerError(
                f"ascendc: usedCoreNum = {num['usedCoreNum']} but singleCoreM/N/K cut the problem "
                f"into {blocks} blocks"
            )
    if "block_dim" in num and "usedCoreNum" in num and num["block_dim"] != num["usedCoreNum"]:
        raise TilerError(f"ascendc: block_dim = {num['block_dim']} but usedCoreNum = {num['usedCoreNum']}")


def ascendc_native(fields: dict, p: Problem) -> dict:
    """Ascend matmul knobs from a TCubeTiling (and the MatmulConfig and MatmulType beside it) in AscendC's
    names (ASCENDC_NATIVE_NAMES: the struct's fields flat, or the exported view): tcube_view read
    backwards. baseM/N/K, stepM/N/Ka/Kb and iterateOrder map one to one; depthA1 / (stepM*stepKa) is
    l1_stages (AscendC's dbA1, 1 or 2); depthB1 / (stepN*stepKb) must be the same count, or 1 with a B
    panel whole along singleCoreK against A's 2 (weight_resident, whose step_kb the struct does not keep);
    dbL0A = dbL0B = 1 + l0_pingpong; singleCoreK gives split_k; the preset gives multi_load and
    doMTE2Preload preload; the knobs the target pins come with every answer. M, N, Ka, Kb, MatmulType and
    usedCoreNum are checked against the problem and the per-core split; singleCoreM/N (the schedule's
    choice), dbL0C and the fields a plain matmul leaves 0 determine no knob. Contradictions (depthA1 not a
    multiple of stepM*stepKa, dbL0A != dbL0B, ...) raise TilerError naming them."""
    f = _native_flat(
        fields,
        ASCENDC_NATIVE_NAMES,
        "ascendc",
        {"TCubeTiling": "TCubeTiling", "MatmulConfig": "MatmulConfig"},
    )
    num = {k: _native_int("ascendc", k, f[k]) for k in TCUBE_FIELDS if k in f}
    if "block_dim" in f:
        num["block_dim"] = _native_int("ascendc", "block_dim", f["block_dim"], 1)
    knobs = _pinned(ASCENDC_DOMAINS)
    _ascendc_problem_fields(f, num, p)

    for tiler_name, name in (
        ("base_m", "baseM"),
        ("base_n", "baseN"),
        ("base_k", "baseK"),
        ("step_m", "stepM"),
    ):
        if name in num:
            knobs[tiler_name] = _native_int("ascendc", name, num[name], 1)
    for tiler_name, name in (("step_n", "stepN"), ("step_ka", "stepKa")):
        if name in num:
            knobs[tiler_name] = _native_int("ascendc", name, num[name], 1)

    _ascendc_l1_buffers(num, knobs)

    l0 = {k: num[k] for k in ("dbL0A", "dbL0B") if k in num}
    if len(set(l0.values())) > 1:
        raise TilerError(
            f"ascendc: dbL0A = {l0['dbL0A']} and dbL0B = {l0['dbL0B']} differ (l0_pingpong is one knob)"
        )
    if l0:
        v = next(iter(l0.values()))
        if v not in (1, 2):
            raise TilerError(f"ascendc: dbL0A and dbL0B must be 1 or 2, got {v}")
        knobs["l0_pingpong"] = v - 1

    order = None
    if "iterateOrder" in num:
        order = num["iterateOrder"]
        if order not in (0, 1):
            raise TilerError(f"ascendc: iterateOrder must be 0 or 1, got {order}")
        knobs["iterate_order"] = _space("ascend").knobs["iterate_order"].label(order)
    if "preset" in f:
        if f["preset"] not in ("CFG_MDL", "CFG_NORM"):
            raise TilerError(f"ascendc: preset must be CFG_MDL or CFG_NORM, got {f['preset']!r}")
        knobs["multi_load"] = int(f["preset"] == "CFG_MDL")
    if "doMTE2Preload" in f:
        pre = _native_int("ascendc", "doMTE2Preload", f["doMTE2Preload"])
        if pre not in (0, 1, 2):
            raise TilerError(f"ascendc: doMTE2Preload must be 0, 1 or 2, got {pre}")
        if pre and order is not None and pre != order + 1:
            raise TilerError(
                f"ascendc: doMTE2Preload = {pre} preloads along {'MN'[pre - 1]} but iterateOrder = {order} "
                f"iterates along {'MN'[order]}"
            )
        knobs["preload"] = int(pre > 0)

    _ascendc_cores(f, num, p, knobs)
    return knobs


# ------------------------------------------------------------------------------------------- JSON Schema

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

# --------------------------------------------------------------------------------------------------- target

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
    language="cpp",
    includes=ASCENDC_INCLUDES,
    entry=ascendc_entry,
    native=ascendc_native,
    native_names=ASCENDC_NATIVE_NAMES,
    supports=ascendc_supports,
)
