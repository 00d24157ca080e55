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
from ...errors import TilerError
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


# ----------------------------------------------------------------------------------------- native names


def _native_int(target: str, name: str, value, lo: int = 0) -> int:
    """A native field as an int (bools and integral floats too), at least `lo`; else one TilerError line."""
    if isinstance(value, bool):
        return int(value)
    if isinstance(value, float) and value.is_integer():
        value = int(value)
    if not isinstance(value, int) or value < lo:
        raise TilerError(f"{target}: {name} must be an integer >= {lo}, got {value!r}")
    return value


def _native_flat(fields: dict, names: tuple[str, ...], target: str, nests: dict[str, str]) -> dict:
    """`fields` with the view's nested objects opened: a key of `nests` holding a dict contributes its entries
    (its "name" entry under the nest's own key), so a whole exported view and a flat list of the target's
    names read the same way. A name given twice with different values, or an unknown name, is one
    TilerError line (the unknown one with the names the target reads)."""
    if not isinstance(fields, dict):
        raise TilerError(
            f"{target}: native fields must be an object of names to values, got {type(fields).__name__}"
        )
    flat: dict = {}

    def put(name: str, value, where: str) -> None:
        if name not in names:
            raise TilerError(f"{target}: unknown name {name!r}{where}; known: {', '.join(names)}")
        if name in flat and flat[name] != value:
            raise TilerError(f"{target}: {name} is given twice, {flat[name]!r} and {value!r}")
        flat[name] = value

    for key, value in fields.items():
        if key in nests and isinstance(value, dict):
            for k, x in value.items():
                put(nests[key] if k == "name" else k, x, f" in {key}")
        else:
            put(key, value, "")
    return flat


def _pinned(domains: dict) -> dict:
    """The knobs a target pins to one value: every config written in its names has them."""
    space = _space("ascend")
    return {k: space.knobs[k].label(space.knobs[k].parse(v[0])) for k, v in domains.items() if len(v) == 1}


def _check_operand(target: str, name: str, got: dict, want: dict) -> None:
    """An operand's declared facts (element, layout, format, isTrans) against the problem's."""
    for k, w in want.items():
        if k in got and got[k] != w:
            raise TilerError(f"{target}: {name}.{k} is {got[k]!r} but the problem needs {w!r}")


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


def _quant_no_view(p: Problem, target: str) -> str | None:
    """Why a target's view cannot express a quantised matmul (dequant scales, a float output of int8, int4 B), or
    None: the views write the plain int8 -> int32 kernel only, and a view is a promise of what the kernel does."""
    if getattr(p, "quant", False) or getattr(p, "b_int4", False):
        what = []
        if getattr(p, "b_int4", False):
            what.append("int4 B")
        if getattr(p, "quant", False):
            what.append(f"dequant (scale {p.scale}, {p.output_dtype} out)")
        return (
            f"{target} view writes the plain int8 -> int32 matmul; {' and '.join(what)} {'need' if len(what) > 1 else 'needs'} a quant kernel "
            + {
                "catlass": "(CATLASS's QuantMatmulMultiStageWorkspace / W4A8MatmulLocal, whose epilogue and workspace "
                "slots the view does not carry)",
                "ascendc": "(QuantBatchMatmulV3, whose tiling data wraps a TCubeTiling with its own quant fields the view "
                "does not carry)",
                "triton": "(a scaled int8 epilogue the project's Triton kernel does not have)",
            }[target]
        )
    return None


def catlass_supports(chip, p: Problem) -> str | None:
    if not _is_atlas_a2(chip):
        return f"CATLASS's AtlasA2 templates need an Atlas A2/A3 chip (910B1-B4, 910_93), not {chip.id}"
    return _quant_no_view(p, "catlass")


def ascendc_supports(chip, p: Problem) -> str | None:
    return _quant_no_view(p, "ascendc")


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
        "kernel": "SplitkMatmul" if split > 1 else "BasicMatmul",
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


# The CATLASS snapshot the emitted code follows: names, template-parameter order and the host call sequence
# were read from this commit (examples/00_basic_matmul/basic_matmul.cpp,
# examples/09_splitk_matmul/splitk_matmul.cpp, include/catlass/gemm/{kernel,device,block}/*.hpp).
# docs/targets/catlass.md says what each line comes from.
CATLASS_SNAPSHOT = "hicann/catlass@0dfcf9df304f297361edab86448ac5ea6aed1647"

# What an entry (the kernel's type aliases) needs: both kernels' headers, so that one dispatch unit can hold
# plain and split-K entries. The host call sequence (emit only) adds ACL's runtime header.
CATLASS_INCLUDES = (
    "catlass/arch/arch.hpp",
    "catlass/catlass.hpp",
    "catlass/gemm/block/block_mmad.hpp",
    "catlass/gemm/block/block_swizzle.hpp",
    "catlass/gemm/device/device_gemm.hpp",
    "catlass/gemm/dispatch_policy.hpp",
    "catlass/gemm/gemm_type.hpp",
    "catlass/gemm/kernel/basic_matmul.hpp",
    "catlass/gemm/kernel/splitk_matmul.hpp",
    "catlass/gemm_coord.hpp",
    "catlass/layout/layout.hpp",
    "catlass/status.hpp",
)
# The output element of the problem, by input element (the split-K reduce casts the fp32 partials to it).
_CPP_OUT_OF_IN = {CPP_ELEMENT[d]: CPP_OUTPUT[d] for d in CPP_ELEMENT}


def _cpp_args(params) -> str:
    return ", ".join(str(x).lower() if isinstance(x, bool) else str(x) for x in params)


def catlass_splitk_factor(m: int, n: int, k: int, l1: tuple[int, int, int], cores: int) -> int:
    """The splitkFactor CATLASS's SplitkMatmul derives for itself (its Arguments carry no factor, only
    `aicCoreNum`): SplitkMatmul::GetSplitkFactor in include/catlass/gemm/kernel/splitk_matmul.hpp of
    CATLASS_SNAPSHOT, restated. A cap by K (2 up to K = 1024, 4 to 2048, 8 to 4096, else 16); the cores per
    L1 tile (at least 1, at most the cap), raised while one more slice adds no round of tiles when there
    are fewer tiles than cores; at most the L1 K tiles there are; at least 2 above K = 8192 and 4 above
    32768."""
    cap = 2 if k <= 1024 else 4 if k <= 2048 else 8 if k <= 4096 else 16
    tiles = -(-m // l1[0]) * -(-n // l1[1])
    factor = max(min(cores // tiles, cap), 1)
    if tiles < cores:
        while factor + 1 <= cap and -(-tiles * factor // cores) >= -(-tiles // cores) * factor:
            factor += 1
    factor = min(-(-k // l1[2]), factor)
    if k > 8192:
        factor = max(factor, 2)
    if k > 32768:
        factor = max(factor, 4)
    return factor


def _catlass_splitk_cores(v: dict, doc: dict) -> tuple[int, int]:
    """(aicCoreNum to put in SplitkMatmul's Arguments, the factor the kernel then picks). The kernel reads
    `aicCoreNum` only to pick its splitkFactor (GetWorkspaceSize and ToUnderlyingArguments; the launch
    takes the block dim separately), so the value nearest the chip's cores that makes it pick the tiling's
    split_k is the one to pass. None picks it (K too short in L1 K tiles, or K's floor above 8192): the
    chip's cores and the factor the kernel will use instead."""
    shape, cores, want = doc["problem"]["shape"], int(doc["chip"]["cores"]), int(v["split_k"])
    m, n, k, l1 = int(shape["M"]), int(shape["N"]), int(shape["K"]), tuple(v["L1TileShape"])
    tiles = -(-m // l1[0]) * -(-n // l1[1])
    # from (cap + 1) cores per tile on, the factor is the cap whatever aicCoreNum is: every factor it can take
    # is reached at or below that count (the K cap is at most 16)
    top = min(17 * tiles, 1 << 17)
    hits = [a for a in range(1, top + 1) if catlass_splitk_factor(m, n, k, l1, a) == want]
    if not hits:
        return cores, catlass_splitk_factor(m, n, k, l1, cores)
    return min(hits, key=lambda a: (abs(a - cores), a)), want


def catlass_entry(v: dict, doc: dict) -> str:
    """One CATLASS kernel instantiation as C++ declarations (type aliases and constants), valid at namespace
    scope and as the body of a dispatch unit's `struct Entry<I> { ... };`: the types of CATLASS's
    examples/00_basic_matmul (examples/09_splitk_matmul when split_k > 1) in their order, ArchTag through
    `Adapter = Catlass::Gemm::Device::DeviceGemm<MatmulKernel>`, then `kBlockDim`, the block dim to launch
    with (split-K adds `kSplitkAicCoreNum`, the Arguments' aicCoreNum that makes the kernel split K as
    tiled). The preload-async block is CATLASS's grouped-matmul policy (examples/08_grouped_matmul);
    BasicMatmul calls it as it calls the ping-pong block, and the block drains its queued tiles when it is
    destroyed."""
    pol = v["DispatchPolicy"]
    if pol["name"] == "MmadAtlasA2PreloadAsync":
        keys = ("PRELOAD_STAGES", "L1_STAGES", "L0A_STAGES", "L0B_STAGES", "L0C_STAGES")
        params = [pol[k] for k in keys] + [pol["ENABLE_UNIT_FLAG"], pol["ENABLE_SHUFFLE_K"]]
    else:
        params = [pol["ENABLE_UNIT_FLAG"]]
    sch = v["BlockScheduler"]
    split = int(v["split_k"]) > 1

    def gemm_type(t: dict) -> str:
        return f"Catlass::Gemm::GemmType<{t['element']}, Catlass::layout::{t['layout']}>"

    lines = [
        f"using ArchTag = Catlass::Arch::{v['ArchTag']};",
        f"using DispatchPolicy = Catlass::Gemm::{pol['name']}<{_cpp_args(params)}>;",
        "using L1TileShape = Catlass::GemmShape<{}, {}, {}>;".format(*v["L1TileShape"]),
        "using L0TileShape = Catlass::GemmShape<{}, {}, {}>;".format(*v["L0TileShape"]),
        f"using AType = {gemm_type(v['AType'])};",
        f"using BType = {gemm_type(v['BType'])};",
        f"using CType = {gemm_type(v['CType'])};",
        "using BlockMmad = Catlass::Gemm::Block::BlockMmad<DispatchPolicy, L1TileShape, L0TileShape, AType, "
        "BType, CType>;",
        "using BlockEpilogue = void;",
        f"using BlockScheduler = Catlass::Gemm::Block::{sch['name']}<{sch['SwizzleOffset']}, "
        f"{sch['SwizzleDirection']}>;",
    ]
    block_dim = int(v.get("block_dim") or doc["chip"]["cores"])
    if split:
        acc = v["CType"]["element"]
        out = _CPP_OUT_OF_IN[v["AType"]["element"]]
        aic, factor = _catlass_splitk_cores(v, doc)
        lines += [
            "// the partials (CType) are summed and cast to the output by one reduce stage on the whole UB",
            f"using ReduceAdd = Catlass::Gemm::Kernel::SplitkReduceAdd<ArchTag, {acc}, {out}, 1, "
            f"ArchTag::UB_SIZE / sizeof({acc})>;",
            "using MatmulKernel = Catlass::Gemm::Kernel::SplitkMatmul<BlockMmad, BlockEpilogue, "
            "BlockScheduler, ReduceAdd>;",
            "using Adapter = Catlass::Gemm::Device::DeviceGemm<MatmulKernel>;",
            f"static constexpr uint32_t kBlockDim = {block_dim};",
            "// SplitkMatmul picks its splitkFactor from Arguments::aicCoreNum (GetSplitkFactor); "
            "with this value "
            + (
                f"it picks {factor}, tiler's split_k"
                if factor == int(v["split_k"])
                else f"it picks {factor}, NOT tiler's split_k {v['split_k']}: no aicCoreNum makes it split so"
            ),
            f"static constexpr uint32_t kSplitkAicCoreNum = {aic};",
        ]
    else:
        lines += [
            "using MatmulKernel = Catlass::Gemm::Kernel::BasicMatmul<BlockMmad, BlockEpilogue, "
            "BlockScheduler>;",
            "using Adapter = Catlass::Gemm::Device::DeviceGemm<MatmulKernel>;",
            f"static constexpr uint32_t kBlockDim = {block_dim};",
        ]
    return "\n".join(lines) + "\n"


def catlass_launcher(split: bool) -> str:
    """The host call sequence of CATLASS's examples (00_basic_matmul; 09_splitk_matmul for split-K) as a
    function template over an entry (a struct with catlass_entry's body): the Arguments, CanImplement,
    GetWorkspaceSize, a workspace when the kernel asks for one, Initialize, the launch with the entry's
    block dim, then the wait. Split-K's Arguments carry aicCoreNum and the workspace element size, and its
    launch the hardware sync address (the AIC and AIV halves signal each other)."""
    if split:
        args = (
            "problemShape, Entry::kSplitkAicCoreNum, sizeof(typename Entry::CType::Element), deviceA, "
            "deviceB, deviceC"
        )
        sync = [
            "    uint64_t hardwareSyncAddr = 0;",
            "    if (aclrtGetHardwareSyncAddr(reinterpret_cast<void **>(&hardwareSyncAddr)) != "
            "ACL_SUCCESS) {",
            "        return Catlass::Status::kInvalid;",
            "    }",
        ]
        launch = "    matmulOp(stream, Entry::kBlockDim, hardwareSyncAddr);"
    else:
        args, sync, launch = (
            "problemShape, deviceA, deviceB, deviceC",
            [],
            "    matmulOp(stream, Entry::kBlockDim);",
        )
    return "\n".join(
        [
            "template <class Entry>",
            "Catlass::Status TilerRunMatmul(aclrtStream stream, Catlass::GemmCoord problemShape, "
            "uint8_t *deviceA,",
            "                               uint8_t *deviceB, uint8_t *deviceC)",
            "{",
            *sync,
            f"    typename Entry::MatmulKernel::Arguments arguments{{{args}}};",
            "    typename Entry::Adapter matmulOp;",
            "    if (matmulOp.CanImplement(arguments) != Catlass::Status::kSuccess) {",
            "        return Catlass::Status::kInvalid;",
            "    }",
            "    size_t workspaceSize = matmulOp.GetWorkspaceSize(arguments);",
            "    uint8_t *workspace = nullptr;",
            "    if (workspaceSize > 0 && aclrtMalloc(reinterpret_cast<void **>(&workspace), workspaceSize,",
            "                                         ACL_MEM_MALLOC_HUGE_FIRST) != ACL_SUCCESS) {",
            "        return Catlass::Status::kInvalid;",
            "    }",
            "    matmulOp.Initialize(arguments, workspace);",
            launch,
            "    aclError waited = aclrtSynchronizeStream(stream);",
            "    if (workspace != nullptr) {",
            "        aclrtFree(workspace);",
            "    }",
            "    return waited == ACL_SUCCESS ? Catlass::Status::kSuccess : Catlass::Status::kInvalid;",
            "}",
        ]
    )


def _indent(text: str, by: str = "    ") -> str:
    return "\n".join(by + line if line else line for line in text.rstrip("\n").split("\n"))


def emit_catlass(v: dict, doc: dict) -> str:
    """The C++ to paste: the includes, the kernel's types (catlass_entry, the dispatch unit's entry body) in a
    struct `TilerMatmul`, and the examples' host call sequence as `TilerRunMatmul<Entry>`, with the call
    for this problem in a comment."""
    split = int(v["split_k"]) > 1
    example = (
        "examples/09_splitk_matmul/splitk_matmul.cpp"
        if split
        else "examples/00_basic_matmul/basic_matmul.cpp"
    )
    shape = doc["problem"]["shape"]
    lines = [f'#include "{h}"' for h in (*CATLASS_INCLUDES, "acl/acl.h")]
    lines += [
        "",
        f"// {_header(doc, 'catlass')}",
        f"// CATLASS {CATLASS_SNAPSHOT}: the kernel and host calls of {example}"
        + ("" if split else ", with the preload-async block of examples/08_grouped_matmul"),
        "struct TilerMatmul {",
        _indent(catlass_entry(v, doc)),
        "};",
        "",
        f"// The host call sequence of {example}; adapt the device buffers (aclrtMalloc) and the stream.",
        catlass_launcher(split),
        "// TilerRunMatmul<TilerMatmul>(stream, Catlass::GemmCoord{"
        f"{shape['M']}, {shape['N']}, {shape['K']}}}, deviceA, deviceB, deviceC);",
    ]
    if int(shape.get("batch", 1)) > 1:
        lines.append(
            f"// batch = {shape['batch']}: one call per product "
            "(CATLASS's BatchedMatmul kernel is not emitted)"
        )
    return "\n".join(lines) + "\n"


def _header(doc: dict, target: str | None = None) -> str:
    """One comment line: what the fragment is for and what the model predicts for the view's own tiling (a
    target's view may be of its own best tiling: `runnable.<target>` of the document)."""
    quiet = {k: Problem.OPTIONAL[k] for k in Problem.QUIET}  # the quant fields, left out at their defaults
    shape = ",".join(f"{k}={v}" for k, v in doc["problem"]["shape"].items() if quiet.get(k, object()) != v)
    time_us = doc.get("runnable", {}).get(target, {}).get("time_us", doc["estimate"]["time_us"])
    return (
        f"tiler {__version__}: {doc['op']} {shape} {doc['problem']['dtype']} on {doc['chip']['id']} "
        f"({doc['chip']['cores']} cores), predicted {time_us:.2f} us"
    )


CATLASS_NATIVE_NAMES = (
    "ArchTag",
    "DispatchPolicy",
    "PRELOAD_STAGES",
    "L1_STAGES",
    "L0A_STAGES",
    "L0B_STAGES",
    "L0C_STAGES",
    "ENABLE_UNIT_FLAG",
    "ENABLE_SHUFFLE_K",
    "L1TileShape",
    "L0TileShape",
    "AType",
    "BType",
    "CType",
    "BlockScheduler",
    "SwizzleOffset",
    "SwizzleDirection",
    "splitkFactor",
    "split_k",
    "kernel",
    "block_dim",
)
_CATLASS_POLICIES = ("MmadAtlasA2PreloadAsync", "MmadAtlasA2Pingpong")
_CATLASS_SCHEDULERS = ("GemmIdentityBlockSwizzle", "SplitkGemmIdentityBlockSwizzle")


def _catlass_shape(name: str, value) -> list[int]:
    if not isinstance(value, list | tuple) or len(value) != 3:
        raise TilerError(f"catlass: {name} must be [M, N, K], got {value!r}")
    return [_native_int("catlass", f"{name}[{i}]", x, 1) for i, x in enumerate(value)]


def catlass_native(fields: dict, p: Problem) -> dict:
    """Ascend matmul knobs from a CATLASS config in CATLASS's names (CATLASS_NATIVE_NAMES, flat or as the
    exported view nests them): catlass_view read backwards. L0TileShape gives base_m, base_n, base_k and
    L1TileShape's K over L0's the one step_ka = step_kb; L1_STAGES, PRELOAD_STAGES, L0A/L0B_STAGES (1 +
    l0_pingpong) and the ping-pong policy's fixed two stages the pipeline; SwizzleOffset, SwizzleDirection
    and splitkFactor (or split_k) the rest; the knobs the target pins come with every answer. L0C_STAGES,
    ENABLE_UNIT_FLAG, ENABLE_SHUFFLE_K, kernel and block_dim determine no knob (the first two follow from
    the tile size, the model does not price shuffle-K); AType/BType/CType and ArchTag are checked against
    the problem. Fields that contradict one another (L1 and L0 M differ, L0A and L0B stages differ, a
    split-K scheduler with splitkFactor 1, ...) raise TilerError naming them."""
    f = _native_flat(
        fields,
        CATLASS_NATIVE_NAMES,
        "catlass",
        {"DispatchPolicy": "DispatchPolicy", "BlockScheduler": "BlockScheduler"},
    )
    knobs = _pinned(CATLASS_DOMAINS)
    if "ArchTag" in f and f["ArchTag"] != "AtlasA2":
        raise TilerError(
            f"catlass: ArchTag must be AtlasA2 (the only arch tiler models), got {f['ArchTag']!r}"
        )
    a, b, bf = _layout(p)
    elem = CPP_ELEMENT[p.dtype]
    _check_operand(
        "catlass",
        "AType",
        f.get("AType", {}),
        {"element": elem, "layout": "ColumnMajor" if a == "t" else "RowMajor"},
    )
    layout_b = "zN" if bf == "nz" else ("ColumnMajor" if b == "t" else "RowMajor")
    _check_operand("catlass", "BType", f.get("BType", {}), {"element": elem, "layout": layout_b})
    _check_operand("catlass", "CType", f.get("CType", {}), {"layout": "RowMajor"})

    l1 = _catlass_shape("L1TileShape", f["L1TileShape"]) if "L1TileShape" in f else None
    l0 = _catlass_shape("L0TileShape", f["L0TileShape"]) if "L0TileShape" in f else None
    if l1 and l0:
        if l1[:2] != l0[:2]:
            raise TilerError(
                f"catlass: L1TileShape {l1} and L0TileShape {l0} differ in M or N "
                "(CATLASS's blocks need the same)"
            )
        if l1[2] % l0[2]:
            raise TilerError(f"catlass: L1TileShape K {l1[2]} is not a multiple of L0TileShape K {l0[2]}")
        knobs["step_ka"] = knobs["step_kb"] = l1[2] // l0[2]
    if l1 or l0:
        knobs["base_m"], knobs["base_n"] = (l0 or l1)[:2]
    if l0:
        knobs["base_k"] = l0[2]

    policy = f.get("DispatchPolicy")
    if policy is not None and policy not in _CATLASS_POLICIES:
        raise TilerError(
            f"catlass: DispatchPolicy must be one of {', '.join(_CATLASS_POLICIES)}, got {policy!r}"
        )
    stages = {
        k: _native_int("catlass", k, f[k], 1) for k in ("L1_STAGES", "L0A_STAGES", "L0B_STAGES") if k in f
    }
    if "PRELOAD_STAGES" in f:
        stages["PRELOAD_STAGES"] = _native_int("catlass", "PRELOAD_STAGES", f["PRELOAD_STAGES"])
    if policy == "MmadAtlasA2Pingpong":  # two L1 and L0 stages, nothing preloaded
        fixed = {"L1_STAGES": 2, "L0A_STAGES": 2, "L0B_STAGES": 2, "PRELOAD_STAGES": 0}
        for k, v in stages.items():
            if v != fixed[k]:
                raise TilerError(f"catlass: {k} = {v} contradicts MmadAtlasA2Pingpong ({fixed[k]})")
        stages = fixed
    if "L0A_STAGES" in stages and "L0B_STAGES" in stages and stages["L0A_STAGES"] != stages["L0B_STAGES"]:
        raise TilerError(
            f"catlass: L0A_STAGES = {stages['L0A_STAGES']} and L0B_STAGES = {stages['L0B_STAGES']} differ "
            "(tiler's l0_pingpong double-buffers both or neither)"
        )
    if "L1_STAGES" in stages:
        knobs["l1_stages"] = stages["L1_STAGES"]
    if "PRELOAD_STAGES" in stages:
        knobs["preload"] = stages["PRELOAD_STAGES"]
    l0_stages = stages.get("L0A_STAGES", stages.get("L0B_STAGES"))
    if l0_stages is not None:
        if l0_stages not in (1, 2):
            raise TilerError(f"catlass: L0A_STAGES and L0B_STAGES must be 1 or 2, got {l0_stages}")
        knobs["l0_pingpong"] = l0_stages - 1

    splits = {k: _native_int("catlass", k, f[k], 1) for k in ("splitkFactor", "split_k") if k in f}
    if len(set(splits.values())) > 1:
        raise TilerError(
            f"catlass: splitkFactor = {splits['splitkFactor']} and split_k = {splits['split_k']} differ"
        )
    split = next(iter(splits.values()), None)
    scheduler = f.get("BlockScheduler")
    if scheduler is not None and scheduler not in _CATLASS_SCHEDULERS:
        raise TilerError(
            f"catlass: BlockScheduler must be one of {', '.join(_CATLASS_SCHEDULERS)}, got {scheduler!r}"
        )
    if scheduler is not None and split is not None and (scheduler == _CATLASS_SCHEDULERS[1]) != (split > 1):
        raise TilerError(f"catlass: BlockScheduler {scheduler} contradicts splitkFactor {split}")
    if split is not None:
        knobs["split_k"] = split
    if "SwizzleOffset" in f:
        knobs["swizzle_offset"] = _native_int("catlass", "SwizzleOffset", f["SwizzleOffset"], 1)
    if "SwizzleDirection" in f:
        knobs["swizzle_direction"] = _native_int("catlass", "SwizzleDirection", f["SwizzleDirection"])
        if knobs["swizzle_direction"] not in (0, 1):
            raise TilerError(f"catlass: SwizzleDirection must be 0 or 1, got {f['SwizzleDirection']!r}")
    return knobs


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
    single_k = num.get("singleCoreK")
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
    return knobs


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
    (tile, K slice), the persistent ones min(SMs, that) programs (triton_tma.programs)."""
    tiles = -(-p.M // kw["BLOCK_M"]) * -(-p.N // kw["BLOCK_N"])
    template = kw.get("TEMPLATE", 0)
    if template == 0:
        return [tiles, kw["SPLIT_K"]]
    work = tiles * kw["SPLIT_K"]
    return [min(sms, work) if template >= 2 else work, 1]


def triton_view(p: Problem, chip, t: dict, row: dict) -> dict:
    """The kernel's constexpr arguments, launch options and grid (tiler/ops/matmul/triton_runner.py's kernel, or
    triton_tma.py's for a TMA template: then `kwargs` carries TEMPLATE, which the runner's config reads)."""
    kwargs = {k: _knob(t, k, "cuda") for k in TRITON_KWARGS}
    template = _knob(t, "TEMPLATE", "cuda") if "TEMPLATE" in t else 0
    if template:
        kwargs["TEMPLATE"] = template
    return {
        "kernel": TRITON_KERNELS[template],
        "kwargs": kwargs,
        "num_warps": int(t["num_warps"]),
        "num_stages": int(t["num_stages"]),
        "grid": _triton_grid(p, kwargs, chip.cores),
    }


def check_triton(v: dict, chip, p: Problem) -> list[str]:
    """What Triton and the GPU check at compile and launch time, from the view alone."""
    from .triton_tma import TEMPLATES, tma_ok

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
    if template and not tma_ok(p.M, p.N, p.K, p.layout, p.in_bytes):
        bad.append(
            f"TEMPLATE {template} ({TEMPLATES[template]}): TMA needs each operand's row stride a multiple of 16 B"
        )
    if template and float(chip.get("mma_version", 3.0)) < 3:
        bad.append(
            f"TEMPLATE {template} ({TEMPLATES[template]}): TMA needs a Hopper GPU (compute capability 9.0)"
        )
    if template == 3 and kw["SPLIT_K"] > 1:
        bad.append("TEMPLATE 3 (persistent_ws) needs SPLIT_K 1")
    want = _triton_grid(p, kw, chip.cores)
    if list(v["grid"]) != want:
        bad.append(
            f"grid = {want}: [ceil(M/BLOCK_M)*ceil(N/BLOCK_N), SPLIT_K] for the pointer kernel, [tiles*SPLIT_K, 1] "
            "for tma, [min(SMs, tiles*SPLIT_K), 1] for the persistent templates"
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
            "properties": {
                **{k: _INT for k in TRITON_KWARGS},
                "ORDER": {"enum": [0, 1, 2]},
                "TEMPLATE": {"enum": [1, 2, 3]},  # absent: the pointer kernel (0)
            },
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
    language="cpp",
    includes=CATLASS_INCLUDES,
    entry=catlass_entry,
    native=catlass_native,
    native_names=CATLASS_NATIVE_NAMES,
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
    language="cpp",
    includes=ASCENDC_INCLUDES,
    entry=ascendc_entry,
    native=ascendc_native,
    native_names=ASCENDC_NATIVE_NAMES,
    supports=ascendc_supports,
)


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
