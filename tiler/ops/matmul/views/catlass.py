"""The CATLASS target (Atlas A2): its domains and rules, view, check, entry and emitted C++, native names and
JSON Schema."""

from __future__ import annotations

import numpy as np

from ....errors import TilerError
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
    _knob,
    _layout,
    _native_flat,
    _native_int,
    _pinned,
    _quant_no_view,
)

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
    return _quant_no_view(p, "catlass")


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


# The template parameters of MmadAtlasA2PreloadAsync, the dispatch policy of the preload kernel
_PRELOAD_POLICY = (
    "PRELOAD_STAGES",
    "L1_STAGES",
    "L0A_STAGES",
    "L0B_STAGES",
    "L0C_STAGES",
    "ENABLE_UNIT_FLAG",
    "ENABLE_SHUFFLE_K",
)
# The kernel's type parameters after the dispatch policy: tile shapes, operand types, block scheduler
_KERNEL_TYPES = ("L1TileShape", "L0TileShape", "AType", "BType", "CType", "BlockScheduler")
CATLASS_NATIVE_NAMES = (
    "ArchTag",
    "DispatchPolicy",
    *_PRELOAD_POLICY,
    *_KERNEL_TYPES,
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


def _catlass_stages(f: dict, knobs: dict) -> None:
    """catlass_native's pipeline knobs (l1_stages, preload, l0_pingpong) from DispatchPolicy and the *_STAGES
    fields (the ping-pong policy fixes them); set in `knobs`."""
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

    _catlass_stages(f, knobs)

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


# ------------------------------------------------------------------------------------------- JSON Schema

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
        *_KERNEL_TYPES,
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
                    "required": ["name", *_PRELOAD_POLICY],
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

# --------------------------------------------------------------------------------------------------- target

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
