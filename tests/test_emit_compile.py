"""The code tiler emits compiles, and means what it says.

`--emit catlass` fragments instantiate the whole CATLASS kernel (block, scheduler, kernel, DeviceGemm adapter, the
host call sequence) and are syntax-checked against stand-ins of CATLASS's headers that declare every emitted name
with CATLASS's template arities and restate its compile-time checks as static_asserts. `--emit ascendc` fragments
carry two forms of the host tiling (the MultiCoreMatmulTiling calls of the AscendC docs, and every TCubeTiling
field by its setter); a test program runs both against a stand-in tiling API and shows they fill the same struct.

The stand-ins are in tests/cpp/include (tests/cpp/README.md says where each name and rule comes from). Hand-written
fragments show the harness can fail (each breaks one rule, arity or name and must be rejected, with that rule's
message) and can pass; the tool's own fragments must compile, and mutated copies of them (a wrong arity, a misspelt
kernel, a wrong SetFixSplit, a missing override) must fail. Needs a C++17 compiler (g++, clang++ or c++ on PATH);
skipped without one.
"""

from __future__ import annotations

import re
import shutil
import subprocess
import textwrap
from pathlib import Path

import pytest

from tiler.cli import main

INCLUDE = Path(__file__).resolve().parent / "cpp" / "include"
CXX = next((path for name in ("g++", "clang++", "c++") if (path := shutil.which(name))), None)

pytestmark = pytest.mark.skipif(CXX is None, reason="no C++ compiler (g++, clang++ or c++) on PATH")

CATLASS_FLAGS = ["-std=c++17", "-fsyntax-only", "-Wall", "-Wextra", "-Werror"]
# -Wconversion: a value that does not fit the setter's int32_t (or is not an integer) is an error, not a wrap.
ASCENDC_FLAGS = ["-std=c++17", "-Wall", "-Wextra", "-Wconversion", "-Werror"]
# What g++ and clang++ say about a template given the wrong number of arguments.
ARITY = ("wrong number of template arguments", "too many template arguments", "too few template arguments")


@pytest.fixture(scope="module")
def cxx(tmp_path_factory) -> str:
    """The compiler, once it has shown it takes C++17 (else the module's tests skip)."""
    probe = tmp_path_factory.mktemp("cxx") / "probe.cpp"
    probe.write_text(
        "#include <type_traits>\ntemplate <class T> inline constexpr bool v = true;\n"
        "static_assert(std::is_same_v<int, int> && v<int>);\nint main() { if constexpr (v<int>) {} }\n"
    )
    proc = subprocess.run([CXX, "-std=c++17", "-fsyntax-only", str(probe)], capture_output=True, text=True)
    if proc.returncode != 0:
        pytest.skip(f"{CXX} does not compile C++17: {proc.stderr.strip()[:200]}")
    return CXX


def _compile(cxx: str, tmp_path: Path, source: str, flags: list[str], out: Path | None = None):
    tu = tmp_path / "tu.cpp"
    tu.write_text(source)
    cmd = [cxx, *flags, "-I", str(INCLUDE), str(tu)] + (["-o", str(out)] if out else [])
    return subprocess.run(cmd, capture_output=True, text=True, timeout=120)


def _numbered(source: str) -> str:
    return "\n".join(f"{i:4} | {line}" for i, line in enumerate(source.splitlines(), 1))


def assert_compiles(proc, source: str) -> None:
    assert proc.returncode == 0, f"does not compile:\n{proc.stderr[-4000:]}\n--- TU ---\n{_numbered(source)}"


def assert_rejected(proc, source: str, message: str | tuple[str, ...]) -> None:
    """Compilation failed, and the compiler said `message` (or one of them)."""
    messages = (message,) if isinstance(message, str) else message
    assert proc.returncode != 0, f"compiled, but should break {messages[0]!r}:\n{_numbered(source)}"
    assert any(m in proc.stderr for m in messages), (
        f"rejected, but not for {messages}:\n{proc.stderr[-4000:]}"
    )


def emit(capsys, chip: str, shape: str, dtype: str, target: str, extra=()) -> str:
    args = ["search", "--op", "matmul", "--chip", chip, "--shape", shape, "--dtype", dtype]
    code = main([*args, *extra, "--target", target, "--emit", target])
    out = capsys.readouterr()
    assert code == 0, f"tiler {' '.join(args)} --target {target} --emit {target}: exit {code}\n{out.err}"
    assert out.out.strip(), f"--emit {target} printed nothing"
    return out.out


def replace_once(text: str, old: str, new: str) -> str:
    """`text` with `old` replaced, which must occur (else the mutation tests nothing)."""
    assert old in text, f"{old!r} is not in the fragment:\n{text}"
    return text.replace(old, new, 1)


# ---------------------------------------------------------------------------------------------------- CATLASS

CATLASS_INCLUDES = [
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
]
# The entry's aliases, in the order CATLASS's examples declare them.
CATLASS_ALIASES = (
    "ArchTag",
    "DispatchPolicy",
    "L1TileShape",
    "L0TileShape",
    "AType",
    "BType",
    "CType",
    "BlockMmad",
    "BlockEpilogue",
    "BlockScheduler",
    "MatmulKernel",
    "Adapter",
)

# Appended to a fragment (a struct TilerMatmul holding the entry): every alias must exist and be of the right kind,
# the adapter must instantiate (that instantiates the kernel, its block and scheduler: the stand-ins' static_asserts,
# CATLASS's checks) and BlockMmad must be the block of the entry's own policy, shapes and types. The split-K lines
# are the emitted format's convention (the split-K kernel: ping-pong block, fp32 partials; int8 keeps int32).
CATLASS_CHECK = textwrap.dedent(
    """
    // ---- appended by tests/test_emit_compile.py ----
    #include <cstdint>
    #include <type_traits>
    namespace tiler_check {
    using E = TilerMatmul;
    template <class T> struct is_shape : std::false_type {};
    template <std::uint32_t M, std::uint32_t N, std::uint32_t K>
    struct is_shape<Catlass::GemmShape<M, N, K>> : std::true_type {};
    template <class T> struct is_gemm_type : std::false_type {};
    template <class El, class L> struct is_gemm_type<Catlass::Gemm::GemmType<El, L>> : std::true_type {};
    template <class T> struct is_pingpong : std::false_type {};
    template <bool U> struct is_pingpong<Catlass::Gemm::MmadAtlasA2Pingpong<U>> : std::true_type {};
    template <class T> struct is_preload_async : std::false_type {};
    template <std::uint32_t P, std::uint32_t L1, std::uint32_t L0A, std::uint32_t L0B, std::uint32_t L0C, bool U,
              bool S>
    struct is_preload_async<Catlass::Gemm::MmadAtlasA2PreloadAsync<P, L1, L0A, L0B, L0C, U, S>>
        : std::true_type {};
    template <class T> struct is_swizzle : std::false_type {};
    template <std::uint32_t O, std::uint32_t D>
    struct is_swizzle<Catlass::Gemm::Block::GemmIdentityBlockSwizzle<O, D>> : std::true_type {};
    template <class T> struct is_splitk_swizzle : std::false_type {};
    template <std::uint32_t O, std::uint32_t D>
    struct is_splitk_swizzle<Catlass::Gemm::Block::SplitkGemmIdentityBlockSwizzle<O, D>> : std::true_type {};
    template <class T> struct is_splitk_kernel : std::false_type {};
    template <class B, class Ep, class S, class R>
    struct is_splitk_kernel<Catlass::Gemm::Kernel::SplitkMatmul<B, Ep, S, R>> : std::true_type {};
    template <class T> struct is_basic_kernel : std::false_type {};
    template <class B, class Ep, class S>
    struct is_basic_kernel<Catlass::Gemm::Kernel::BasicMatmul<B, Ep, S>> : std::true_type {};
    using Block = Catlass::Gemm::Block::BlockMmad<E::DispatchPolicy, E::L1TileShape, E::L0TileShape, E::AType,
                                                  E::BType, E::CType>;
    constexpr bool splitk = is_splitk_swizzle<E::BlockScheduler>::value;

    static_assert(std::is_same_v<E::ArchTag, Catlass::Arch::AtlasA2>, "check: ArchTag is Catlass::Arch::AtlasA2");
    static_assert(std::is_same_v<E::ArchTag, E::DispatchPolicy::ArchTag>, "check: ArchTag is the policy's arch");
    static_assert(is_preload_async<E::DispatchPolicy>::value || is_pingpong<E::DispatchPolicy>::value,
                  "check: DispatchPolicy is MmadAtlasA2PreloadAsync or MmadAtlasA2Pingpong");
    static_assert(is_shape<E::L1TileShape>::value && is_shape<E::L0TileShape>::value,
                  "check: L1TileShape and L0TileShape are Catlass::GemmShape");
    static_assert(is_gemm_type<E::AType>::value && is_gemm_type<E::BType>::value && is_gemm_type<E::CType>::value,
                  "check: AType, BType and CType are Catlass::Gemm::GemmType");
    static_assert(std::is_same_v<E::BlockMmad, Block>, "check: BlockMmad is the block of the entry's own types");
    static_assert(std::is_void_v<E::BlockEpilogue>, "check: no epilogue (BlockEpilogue = void)");
    static_assert(is_swizzle<E::BlockScheduler>::value || splitk,
                  "check: BlockScheduler is a GemmIdentityBlockSwizzle or SplitkGemmIdentityBlockSwizzle");
    static_assert(!splitk || is_pingpong<E::DispatchPolicy>::value,
                  "check: split-K (SplitkGemmIdentityBlockSwizzle) goes with MmadAtlasA2Pingpong");
    static_assert(!splitk || std::is_same_v<E::CType::Element, float> ||
                      (std::is_same_v<E::AType::Element, std::int8_t> && std::is_same_v<E::CType::Element, std::int32_t>),
                  "check: split-K accumulates its partials in float (CType's element)");
    static_assert(splitk ? is_splitk_kernel<E::MatmulKernel>::value : is_basic_kernel<E::MatmulKernel>::value,
                  "check: MatmulKernel is SplitkMatmul with the split-K scheduler, BasicMatmul otherwise");
    static_assert(std::is_same_v<E::MatmulKernel::BlockMmad, E::BlockMmad> &&
                      std::is_same_v<E::MatmulKernel::BlockScheduler, E::BlockScheduler>,
                  "check: the kernel runs the entry's block and scheduler");
    static_assert(std::is_same_v<E::Adapter, Catlass::Gemm::Device::DeviceGemm<E::MatmulKernel>>,
                  "check: Adapter is DeviceGemm<MatmulKernel>");
    static_assert(sizeof(E::Adapter) > 0, "check: the adapter, kernel, block and scheduler instantiate");
    static_assert(E::kBlockDim >= 1, "check: kBlockDim is a block count");
    }  // namespace tiler_check
    """
)
# Appended to the tool's fragments: the host call sequence must instantiate for the emitted entry.
LAUNCH_CHECK = (
    "template Catlass::Status TilerRunMatmul<TilerMatmul>(aclrtStream, Catlass::GemmCoord, uint8_t *, uint8_t *, "
    "uint8_t *);\n"
)

ELEMENT = {"fp16": "half", "bf16": "bfloat16_t", "fp32": "float", "int8": "int8_t"}
BASIC_KERNEL = "Catlass::Gemm::Kernel::BasicMatmul<BlockMmad, BlockEpilogue, BlockScheduler>"
SPLITK_KERNEL = "Catlass::Gemm::Kernel::SplitkMatmul<BlockMmad, BlockEpilogue, BlockScheduler, ReduceAdd>"
SPLITK_REDUCE = (
    "Catlass::Gemm::Kernel::SplitkReduceAdd<ArchTag, float, half, 1, ArchTag::UB_SIZE / sizeof(float)>"
)


def catlass_fragment(
    policy: str = "MmadAtlasA2PreloadAsync<1, 2, 2, 2, 1, true, false>",
    l1=(128, 256, 256),
    l0=(128, 256, 64),
    a=("half", "RowMajor"),
    b=("half", "ColumnMajor"),
    c=("half", "RowMajor"),
    scheduler: str = "GemmIdentityBlockSwizzle<3, 0>",
    block: str = "Catlass::Gemm::Block::BlockMmad<DispatchPolicy, L1TileShape, L0TileShape, AType, BType, CType>",
    kernel: str = BASIC_KERNEL,
    reduce: str | None = None,
    adapter: str = "Catlass::Gemm::Device::DeviceGemm<MatmulKernel>",
    drop: tuple[str, ...] = (),
) -> str:
    """A hand-written entry in the emitted format, a struct TilerMatmul (defaults: CATLASS's A2 fp16 matmul), with
    the aliases in `drop` left out."""
    lines = {
        "ArchTag": "Catlass::Arch::AtlasA2",
        "DispatchPolicy": f"Catlass::Gemm::{policy}",
        "L1TileShape": "Catlass::GemmShape<{}, {}, {}>".format(*l1),
        "L0TileShape": "Catlass::GemmShape<{}, {}, {}>".format(*l0),
        "AType": f"Catlass::Gemm::GemmType<{a[0]}, Catlass::layout::{a[1]}>",
        "BType": f"Catlass::Gemm::GemmType<{b[0]}, Catlass::layout::{b[1]}>",
        "CType": f"Catlass::Gemm::GemmType<{c[0]}, Catlass::layout::{c[1]}>",
        "BlockMmad": block,
        "BlockEpilogue": "void",
        "BlockScheduler": f"Catlass::Gemm::Block::{scheduler}",
        **({"ReduceAdd": reduce} if reduce else {}),
        "MatmulKernel": kernel,
        "Adapter": adapter,
    }
    body = [f"    using {k} = {v};" for k, v in lines.items() if k not in drop]
    return (
        "\n".join(
            [f'#include "{h}"' for h in CATLASS_INCLUDES]
            + ["", "// tiler test: hand-written fragment", "struct TilerMatmul {"]
            + body
            + ["    static constexpr uint32_t kBlockDim = 20;", "};"]
        )
        + "\n"
    )


def compile_catlass(cxx: str, tmp_path: Path, fragment: str, extra: str = ""):
    """The fragment, the check block and `extra` (more checks) as one TU, syntax-checked."""
    source = fragment + CATLASS_CHECK + extra
    return _compile(cxx, tmp_path, source, CATLASS_FLAGS), source


INT8 = dict(
    policy="MmadAtlasA2PreloadAsync<1, 2, 2, 2, 1, false, false>",
    l1=(128, 256, 256),
    l0=(128, 256, 128),
    a=("int8_t", "RowMajor"),
    b=("int8_t", "ColumnMajor"),
    c=("int32_t", "RowMajor"),
)
SPLITK = dict(
    policy="MmadAtlasA2Pingpong<true>",
    l1=(64, 64, 512),
    l0=(64, 64, 64),
    c=("float", "RowMajor"),
    scheduler="SplitkGemmIdentityBlockSwizzle<3, 0>",
    reduce=SPLITK_REDUCE,
    kernel=SPLITK_KERNEL,
)

GOOD = {
    # CATLASS's A2 default: (128*256 + 256*256) * 2 B * 2 stages = 393216 <= 524288
    "fp16_default": {},
    "bf16_b_nz": dict(a=("bfloat16_t", "RowMajor"), b=("bfloat16_t", "zN"), c=("bfloat16_t", "RowMajor")),
    "int8": INT8,
    "fp32": dict(
        l1=(128, 128, 128),
        l0=(128, 128, 32),
        a=("float", "RowMajor"),
        b=("float", "RowMajor"),
        c=("float", "RowMajor"),
    ),
    "splitk_pingpong": SPLITK,
    # two L0C buffers are fine without the unit flag: 64*128*4 B * 2 = 65536 <= 131072
    "l0c_double_buffer": dict(
        policy="MmadAtlasA2PreloadAsync<1, 2, 2, 2, 2, false, false>", l1=(64, 128, 256), l0=(64, 128, 64)
    ),
    # CATLASS's 00_basic_matmul as its example writes it: the ping-pong block in BasicMatmul
    "basic_matmul_pingpong": dict(policy="MmadAtlasA2Pingpong<true>", l1=(128, 256, 256), l0=(128, 256, 64)),
}


@pytest.mark.parametrize("name", list(GOOD))
def test_hand_written_catlass_fragment_compiles(cxx, tmp_path, name):
    proc, source = compile_catlass(cxx, tmp_path, catlass_fragment(**GOOD[name]))
    assert_compiles(proc, source)


BAD = {
    # (128*512 + 256*512) * 2 B * 3 stages = 1179648 > 524288
    "l1_over_capacity": (
        dict(policy="MmadAtlasA2PreloadAsync<1, 3, 2, 2, 1, true, false>", l1=(128, 256, 512)),
        "exceeds L1:",
    ),
    # L0A: 256*128 * 2 B * 2 stages = 131072 > 65536 (L0B: 128*128 * 2 B * 2 = 65536 fits)
    "l0a_over_capacity": (dict(l1=(256, 128, 256), l0=(256, 128, 128)), "exceeds L0A:"),
    # L0C holds the L1 M x N block in fp32: 256*256 * 4 B = 262144 > 131072
    "l0c_over_capacity": (dict(l1=(256, 256, 256), l0=(256, 256, 64)), "exceeds L0C:"),
    "l1_m_differs_from_l0_m": (dict(l0=(64, 256, 64)), "must have the same M and N"),
    "l0_k_above_l1_k": (dict(l1=(128, 128, 64), l0=(128, 128, 128)), "L0TileShape::K must not exceed"),
    "preload_not_below_l1_stages": (
        dict(policy="MmadAtlasA2PreloadAsync<2, 2, 2, 2, 1, true, false>"),
        "PRELOAD_STAGES must be less than L1_STAGES",
    ),
    "preload_zero": (
        dict(policy="MmadAtlasA2PreloadAsync<0, 2, 2, 2, 1, true, false>"),
        "PRELOAD_STAGES must be at least 1",
    ),
    "unit_flag_with_two_l0c_stages": (
        dict(
            policy="MmadAtlasA2PreloadAsync<1, 2, 2, 2, 2, true, false>", l1=(64, 128, 256), l0=(64, 128, 64)
        ),
        "ENABLE_UNIT_FLAG requires L0C_STAGES == 1",
    ),
    "int8_with_unit_flag": (
        {**INT8, "policy": "MmadAtlasA2PreloadAsync<1, 2, 2, 2, 1, true, false>"},
        "ENABLE_UNIT_FLAG must be false for int8_t",
    ),
    # 16 int8 elements are 16 bytes, half a C0 block
    "int8_l0_m_16_misaligned": (
        {**INT8, "l1": (16, 256, 256), "l0": (16, 256, 128)},
        "L0TileShape::M is not 32-byte",
    ),
    "layout_c_column_major": (dict(c=("half", "ColumnMajor")), "LayoutC must be RowMajor"),
    "mixed_input_elements": (
        dict(b=("bfloat16_t", "ColumnMajor")),
        "no accumulator for these input element types",
    ),
    "swizzle_offset_zero": (
        dict(scheduler="GemmIdentityBlockSwizzle<0, 0>"),
        "SwizzleOffset must be at least 1",
    ),
    "swizzle_direction_two": (
        dict(scheduler="GemmIdentityBlockSwizzle<3, 2>"),
        "SwizzleDirection must be 0 or 1",
    ),
    "missing_block_scheduler": (dict(drop=("BlockScheduler",)), "BlockScheduler"),
    # ping-pong, two stages: (128*1024 + 128*1024) * 2 B * 2 = 1048576 > 524288
    "pingpong_l1_over_capacity": ({**SPLITK, "l1": (128, 128, 1024), "l0": (128, 128, 64)}, "exceeds L1:"),
    "pingpong_int8_with_unit_flag": (
        {**SPLITK, "a": ("int8_t", "RowMajor"), "b": ("int8_t", "ColumnMajor"), "l0": (64, 64, 128)},
        "ENABLE_UNIT_FLAG must be false for int8_t",
    ),
    "splitk_scheduler_with_preload_async": (
        dict(scheduler="SplitkGemmIdentityBlockSwizzle<3, 0>", c=("float", "RowMajor")),
        "split-K (SplitkGemmIdentityBlockSwizzle) goes with MmadAtlasA2Pingpong",
    ),
    # --- names and arities of the kernel, block, reduce and adapter templates (CATLASS's, tests/cpp/README.md)
    "basic_matmul_without_epilogue": (
        dict(kernel="Catlass::Gemm::Kernel::BasicMatmul<BlockMmad, BlockScheduler>"),
        ARITY,
    ),
    "basic_matmul_misspelt": (
        dict(kernel="Catlass::Gemm::Kernel::BasicMatmull<BlockMmad, BlockEpilogue, BlockScheduler>"),
        "BasicMatmull",
    ),
    "splitk_matmul_without_reduce": (
        {**SPLITK, "kernel": "Catlass::Gemm::Kernel::SplitkMatmul<BlockMmad, BlockEpilogue, BlockScheduler>"},
        ARITY,
    ),
    # the older release's reduce stage: ReduceAdd<ArchTag, ElementAccumulator, ElementOut, COMPUTE_LENGTH>
    "old_reduce_add_name": (
        {**SPLITK, "reduce": "Catlass::Gemm::Kernel::ReduceAdd<ArchTag, float, half, 49152>"},
        "ReduceAdd",
    ),
    "reduce_add_without_stages": (
        {**SPLITK, "reduce": "Catlass::Gemm::Kernel::SplitkReduceAdd<ArchTag, float, half, 49152>"},
        ARITY,
    ),
    "reduce_add_over_ub": (
        {**SPLITK, "reduce": SPLITK_REDUCE.replace(", 1, ", ", 2, ")},
        "SplitkReduceAdd exceeds UB",
    ),
    "reduce_add_reads_the_wrong_partials": (
        {**SPLITK, "reduce": SPLITK_REDUCE.replace("float, half", "half, half")},
        "SplitkReduceAdd's ElementAccumulator must be CType's element",
    ),
    "basic_matmul_with_splitk_scheduler": (
        {**SPLITK, "kernel": BASIC_KERNEL},
        "BasicMatmul builds its BlockScheduler",
    ),
    "splitk_matmul_with_plain_scheduler": (
        {**SPLITK, "scheduler": "GemmIdentityBlockSwizzle<3, 0>"},
        "SplitkMatmul builds its BlockScheduler",
    ),
    "device_gemm_two_arguments": (
        dict(adapter="Catlass::Gemm::Device::DeviceGemm<MatmulKernel, BlockScheduler>"),
        ARITY,
    ),
    "block_mmad_eleven_arguments": (
        dict(
            block="Catlass::Gemm::Block::BlockMmad<DispatchPolicy, L1TileShape, L0TileShape, AType, BType, "
            "CType, void, void, void, void, void>"
        ),
        ARITY,
    ),
    "missing_adapter": (dict(drop=("Adapter",)), "Adapter"),
}


@pytest.mark.parametrize("name", list(BAD))
def test_catlass_fragment_breaking_a_rule_is_rejected(cxx, tmp_path, name):
    kwargs, message = BAD[name]
    proc, source = compile_catlass(cxx, tmp_path, catlass_fragment(**kwargs))
    assert_rejected(proc, source, message)


# ---------------------------------------------------------------------------------------------------- AscendC

TCUBE_FIELDS = (
    "usedCoreNum M N Ka Kb singleCoreM singleCoreN singleCoreK baseM baseN baseK depthA1 depthB1 stepM stepN "
    "isBias transLength iterateOrder shareMode shareL1Size shareL0CSize shareUbSize batchM batchN singleBatchM "
    "singleBatchN stepKa stepKb depthAL1CacheUB depthBL1CacheUB dbL0A dbL0B dbL0C ALayoutInfoB ALayoutInfoS "
    "ALayoutInfoN ALayoutInfoG ALayoutInfoD BLayoutInfoB BLayoutInfoS BLayoutInfoN BLayoutInfoG BLayoutInfoD "
    "CLayoutInfoB CLayoutInfoS1 CLayoutInfoN CLayoutInfoG CLayoutInfoS2 BatchNum mxTypePara"
).split()
assert len(TCUBE_FIELDS) == 50

ASCENDC_MAIN = textwrap.dedent(
    """
    }

    // ---- appended by tests/test_emit_compile.py ----
    int main() {
        tiler_emitted();
        return tiler_standin::report(stdout) == 0 ? 0 : 1;
    }
    """
)


def ascendc_tu(fragment: str) -> str:
    """The fragment pasted into a function body where `TCubeTiling tiling` is in scope, and a main that
    fails unless every field was set exactly once."""
    head = '#include "tiler_tcube_standin.h"\n\nvoid tiler_emitted() {\n    TCubeTiling tiling;\n'
    return head + fragment + ASCENDC_MAIN


def run_ascendc(cxx: str, tmp_path: Path, fragment: str):
    """Compiles and, when that worked, runs the TU: (compile process, run process or None, source)."""
    source = ascendc_tu(fragment)
    exe = tmp_path / "tu"
    proc = _compile(cxx, tmp_path, source, ASCENDC_FLAGS, out=exe)
    if proc.returncode != 0:
        return proc, None, source
    return proc, subprocess.run([str(exe)], capture_output=True, text=True, timeout=60), source


def reported_values(run) -> dict[str, int]:
    """field -> value from the stand-in's report (`<field> <value> <calls>` lines, in the struct's order)."""
    rows = [r for line in run.stdout.splitlines() if len(r := line.split()) == 3 and r[0] in TCUBE_FIELDS]
    assert [r[0] for r in rows] == TCUBE_FIELDS, "the stand-in's field list is not the test's"
    return {name: int(value) for name, value, _ in rows}


# The 4096^3 fp16 tiling with CATLASS's L0 block (128x256x64), every field set once.
TCUBE_GOOD = {
    **dict.fromkeys(TCUBE_FIELDS, 0),
    **dict(
        usedCoreNum=20, M=4096, N=4096, Ka=4096, Kb=4096, singleCoreM=128, singleCoreN=256, singleCoreK=4096
    ),
    **dict(baseM=128, baseN=256, baseK=64, depthA1=8, depthB1=8, stepM=1, stepN=1, stepKa=4, stepKb=4),
    **dict(batchM=1, batchN=1, singleBatchM=1, singleBatchN=1, dbL0A=2, dbL0B=2, dbL0C=1, BatchNum=1),
}


def ascendc_fragment(values: dict, extra: tuple[str, ...] = ()) -> str:
    return (
        "\n".join(
            ["// tiler test: hand-written fragment"]
            + [f"tiling.set_{k}({v});" for k, v in values.items()]
            + list(extra)
        )
        + "\n"
    )


def test_hand_written_ascendc_fragment_compiles_and_sets_every_field_once(cxx, tmp_path):
    proc, run, source = run_ascendc(cxx, tmp_path, ascendc_fragment(TCUBE_GOOD))
    assert_compiles(proc, source)
    assert run.returncode == 0, run.stderr
    assert reported_values(run) == TCUBE_GOOD


def test_ascendc_fragment_missing_a_setter_fails_the_run(cxx, tmp_path):
    values = {k: v for k, v in TCUBE_GOOD.items() if k != "dbL0C"}
    proc, run, source = run_ascendc(cxx, tmp_path, ascendc_fragment(values))
    assert_compiles(proc, source)
    assert run.returncode != 0 and "dbL0C set 0 times" in run.stderr, run.stderr


def test_ascendc_fragment_setting_a_field_twice_fails_the_run(cxx, tmp_path):
    proc, run, source = run_ascendc(cxx, tmp_path, ascendc_fragment(TCUBE_GOOD, ("tiling.set_baseK(128);",)))
    assert_compiles(proc, source)
    assert run.returncode != 0 and "baseK set 2 times" in run.stderr, run.stderr


@pytest.mark.parametrize(
    "line, message",
    [
        ("tiling.set_usedCoreNun(20);", "set_usedCoreNun"),  # misspelt setter
        ("tiling.set_shareL1Size(4294967296);", "4294967296"),  # does not fit int32_t
        ("tiling.set_shareUbSize(1.5);", "conversion"),  # not an integer
    ],
    ids=["misspelt", "out_of_int32", "not_integer"],
)
def test_bad_ascendc_statement_does_not_compile(cxx, tmp_path, line, message):
    proc, _, source = run_ascendc(cxx, tmp_path, ascendc_fragment(TCUBE_GOOD, (line,)))
    assert_rejected(proc, source, message)


# ------------------------------------------------------------------------------------------- the tool's fragments

# (chip, shape, dtype, extra search flags); split_k is pinned where the split-K form is the point.
CASES = {
    "910b3-fp16-4096": ("ascend910b3", "M=4096,N=4096,K=4096", "fp16", []),
    "910b4-bf16-gemv-nt": ("ascend910b4", "M=1,N=4096,K=4096,layout=nt", "bf16", []),
    "910b3-int8-1000x768x512": ("ascend910b3", "M=1000,N=768,K=512", "int8", []),
    "910b2-fp16-splitk": ("ascend910b2", "M=64,N=64,K=65536", "fp16", ["--fix", "split_k=8"]),
    "910b3-fp32-512": ("ascend910b3", "M=512,N=512,K=512", "fp32", []),
    "910b1-fp16-tn-b-nz": ("ascend910b1", "M=2048,N=1024,K=3072,layout=tn,b_format=nz", "fp16", []),
    "910b3-bf16-splitk4": ("ascend910b3", "M=256,N=256,K=16384", "bf16", ["--fix", "split_k=4"]),
}


def _dims(shape: str) -> dict[str, str]:
    return dict(kv.split("=") for kv in shape.split(","))


@pytest.mark.parametrize("case", list(CASES))
def test_emitted_catlass_fragment_compiles(cxx, tmp_path, capsys, case):
    """The whole kernel (block, scheduler, kernel, adapter) and the host call sequence instantiate against the
    stand-ins, with the problem's element types and, for split_k > 1, the split-K kernel."""
    chip, shape, dtype, extra = CASES[case]
    fragment = emit(capsys, chip, shape, dtype, "catlass", extra)
    lines = [s.strip() for s in fragment.splitlines() if s.strip()]
    includes = [i for i, s in enumerate(lines) if s.startswith("#include")]
    assert includes == list(range(len(includes))), f"#include lines come first:\n{fragment}"
    declared = [m.group(1) for s in lines if (m := re.match(r"using (\w+) = ", s))]
    assert [a for a in declared if a in CATLASS_ALIASES] == list(CATLASS_ALIASES), fragment
    element = ELEMENT[dtype]
    checks = [
        "static_assert(std::is_same_v<TilerMatmul::AType::Element, " + element + "> && "
        f'std::is_same_v<TilerMatmul::BType::Element, {element}>, "case: {dtype} inputs are {element}");'
    ]
    if any(x.startswith("split_k=") and x != "split_k=1" for x in extra):
        checks.append(
            "static_assert(tiler_check::is_splitk_kernel<TilerMatmul::MatmulKernel>::value, "
            '"case: split_k > 1 is emitted as the split-K kernel (SplitkMatmul)");'
        )
    proc, source = compile_catlass(cxx, tmp_path, fragment, LAUNCH_CHECK + "\n".join(checks) + "\n")
    assert_compiles(proc, source)


CATLASS_MUTATIONS = {
    # (case, old, new, what the compiler must say)
    "kernel_without_epilogue": (
        "910b3-fp16-4096",
        "BasicMatmul<BlockMmad, BlockEpilogue, BlockScheduler>",
        "BasicMatmul<BlockMmad, BlockScheduler>",
        ARITY,
    ),
    "misspelt_kernel": ("910b3-fp16-4096", "Kernel::BasicMatmul<", "Kernel::BasicMatMul<", "BasicMatMul"),
    "adapter_arity": (
        "910b3-fp16-4096",
        "DeviceGemm<MatmulKernel>",
        "DeviceGemm<MatmulKernel, ArchTag>",
        ARITY,
    ),
    "splitk_kernel_without_reduce": (
        "910b2-fp16-splitk",
        "BlockScheduler, ReduceAdd>;",
        "BlockScheduler>;",
        ARITY,
    ),
    "splitk_arguments_of_the_basic_kernel": (
        "910b2-fp16-splitk",
        "problemShape, Entry::kSplitkAicCoreNum, sizeof(typename Entry::CType::Element), deviceA",
        "problemShape, deviceA",
        "TilerRunMatmul",
    ),
}


@pytest.mark.parametrize("name", list(CATLASS_MUTATIONS))
def test_emitted_catlass_fragment_with_a_wrong_name_or_arity_is_rejected(cxx, tmp_path, capsys, name):
    """The harness can fail on the tool's own output: one wrong arity or misspelt name in an emitted fragment."""
    case, old, new, message = CATLASS_MUTATIONS[name]
    chip, shape, dtype, extra = CASES[case]
    fragment = replace_once(emit(capsys, chip, shape, dtype, "catlass", extra), old, new)
    proc, source = compile_catlass(cxx, tmp_path, fragment, LAUNCH_CHECK)
    assert_rejected(proc, source, message)


@pytest.mark.parametrize("case", [c for c, (_, _, _, extra) in CASES.items() if "--fix" in extra])
def test_emitted_splitk_entry_makes_the_kernel_split_as_tiled(cxx, tmp_path, capsys, case):
    """SplitkMatmul picks its factor itself from Arguments::aicCoreNum: run the stand-in's GetSplitkFactor
    (CATLASS's rule restated) on the emitted entry's kSplitkAicCoreNum, and it must give the tiling's split_k."""
    chip, shape, dtype, extra = CASES[case]
    split = int(next(x for x in extra if x.startswith("split_k=")).split("=")[1])
    d = _dims(shape)
    main_fn = (
        '#include <cstdio>\nint main() {\n    std::printf("%u\\n", TilerMatmul::MatmulKernel::GetSplitkFactor('
        f"{d['M']}, {d['N']}, {d['K']}, TilerMatmul::kSplitkAicCoreNum));\n}}\n"
    )
    source = emit(capsys, chip, shape, dtype, "catlass", extra) + main_fn
    exe = tmp_path / "splitk"
    proc = _compile(cxx, tmp_path, source, ["-std=c++17", "-Wall", "-Wextra", "-Werror"], out=exe)
    assert_compiles(proc, source)
    run = subprocess.run([str(exe)], capture_output=True, text=True, timeout=60)
    assert run.returncode == 0 and int(run.stdout) == split, (run.stdout, run.stderr, source)


def test_splitk_factor_rule_agrees_between_python_and_the_stand_in(cxx, tmp_path):
    """views.catlass_splitk_factor (what the emitter solves for aicCoreNum with) and the stand-in's
    GetSplitkFactor are two restatements of CATLASS's rule: they agree over a grid crossing every branch (K caps,
    fewer and more tiles than cores, the L1 K tile limit, the floors past K = 8192 and 32768)."""
    from tiler.ops.matmul.views import catlass_splitk_factor

    grid = [
        (m, n, k, cores)
        for m in (64, 300, 4096)
        for n in (64, 1000)
        for k in (512, 1500, 4000, 9000, 40000)
        for cores in (1, 7, 20, 24, 64)
    ]
    calls = "\n".join(
        f'    std::printf("%u\\n", K::GetSplitkFactor({m}, {n}, {k}, {c}));' for m, n, k, c in grid
    )
    source = (
        catlass_fragment(**SPLITK)
        + "#include <cstdio>\nusing K = TilerMatmul::MatmulKernel;\nint main() {\n"
        + calls
        + "\n}\n"
    )
    exe = tmp_path / "factor"
    proc = _compile(cxx, tmp_path, source, ["-std=c++17", "-Wall", "-Wextra", "-Werror"], out=exe)
    assert_compiles(proc, source)
    got = [int(x) for x in subprocess.run([str(exe)], capture_output=True, text=True).stdout.split()]
    want = [catlass_splitk_factor(m, n, k, SPLITK["l1"], c) for m, n, k, c in grid]
    assert got == want
    assert len(set(want)) >= 5, "the grid does not reach enough branches to compare"


# The AscendC test program: (a) the API form through the stand-in tiling API, the fields GetTiling left to its own
# choice, then (b) the raw setters (every field exactly once: the stand-in's report), then the two structs field by
# field. Output lines: `chosen <field>`, `<field> <value> <calls>` (b's report), `differ <field> <a> <b>`,
# `kBlockDim <n>`; the exit status is 0 only when (a) succeeded, (b) set every field once and nothing differs.
ASCENDC_BOTH_MAIN = textwrap.dedent(
    """
    // ---- appended by tests/test_emit_compile.py ----
    #include <cstdio>
    int main() {
        platform_ascendc::PlatformAscendC platform;
        optiling::TCubeTiling byApi;
        if (!TilerTilingByApi(platform, byApi)) {
            std::printf("gettiling-failed\\n");
            return 3;
        }
        for (int i = 0; i < tiler_standin::FIELD_COUNT; ++i) {
            if (tiler_standin::api_chosen[i]) {
                std::printf("chosen %s\\n", tiler_standin::FIELD_NAMES[i]);
            }
        }
        tiler_standin::reset();
        optiling::TCubeTiling bySetters;
        TilerTiling::Fill(bySetters);
        int bad = tiler_standin::report(stdout);
    #define TILER_COMPARE(name)                                                                        \\
        if (byApi.get_##name() != bySetters.get_##name()) {                                            \\
            std::printf("differ %s %ld %ld\\n", #name, static_cast<long>(byApi.get_##name()),           \\
                        static_cast<long>(bySetters.get_##name()));                                    \\
            ++bad;                                                                                     \\
        }
        TILER_TCUBE_FIELDS(TILER_COMPARE)
    #undef TILER_COMPARE
        std::printf("kBlockDim %u\\n", static_cast<unsigned>(TilerTiling::kBlockDim));
        return bad == 0 ? 0 : 1;
    }
    """
)


def run_both_forms(cxx: str, tmp_path: Path, fragment: str, l0c_bytes: int):
    """Compiles the emitted fragment with ASCENDC_BOTH_MAIN (the stand-in platform's L0C set to the chip's) and
    runs it: (compile process, run process or None, source)."""
    source = fragment + ASCENDC_BOTH_MAIN
    exe = tmp_path / "both"
    flags = [*ASCENDC_FLAGS, f"-DTILER_STANDIN_L0C_BYTES={l0c_bytes}"]
    proc = _compile(cxx, tmp_path, source, flags, out=exe)
    if proc.returncode != 0:
        return proc, None, source
    return proc, subprocess.run([str(exe)], capture_output=True, text=True, timeout=60), source


def _lines(run, tag: str) -> list[list[str]]:
    return [line.split()[1:] for line in run.stdout.splitlines() if line.startswith(tag + " ")]


def _overridden(fragment: str) -> set[str]:
    """The fields the API form sets after GetTiling (the emitted function's lines between GetTiling and return)."""
    api = fragment[fragment.index("GetTiling(tiling)") : fragment.index("return true;")]
    return set(re.findall(r"tiling\.set_(\w+)\(", api))


ASCENDC_CASES = {
    **CASES,
    "910a-fp16-1024x4096x2048": ("ascend910a", "M=1024,N=4096,K=2048", "fp16", []),
    "910b3-fp16-batch4": ("ascend910b3", "M=512,N=512,K=1024,batch=4", "fp16", []),
}


@pytest.mark.parametrize("case", list(ASCENDC_CASES))
def test_emitted_ascendc_forms_fill_the_same_tcube_tiling(cxx, tmp_path, capsys, case):
    """Both forms of the emitted host tiling compile and run: the MultiCoreMatmulTiling calls (through the stand-in
    API, which fills only what the calls fix) and tiler's values over what GetTiling picks itself give the very
    TCubeTiling the raw setters give (all 50 fields); the raw form sets every field exactly once; the form
    overrides exactly the fields the API leaves to its own choice; kBlockDim is usedCoreNum; the struct keeps
    its own rules (check_tcube on the values read back)."""
    from tiler.hardware import load_chip
    from tiler.ops.matmul.views import check_tcube
    from tiler.problem import parse_problem

    chip_id, shape, dtype, extra = ASCENDC_CASES[case]
    chip = load_chip(chip_id)
    fragment = emit(capsys, chip_id, shape, dtype, "ascendc", extra)
    proc, run, source = run_both_forms(cxx, tmp_path, fragment, chip["l0c_bytes"])
    assert_compiles(proc, source)
    assert run.returncode == 0, (
        f"exit {run.returncode}\n{run.stdout}\n{run.stderr}\n--- fragment ---\n{fragment}"
    )
    assert not _lines(run, "differ")
    assert {r[0] for r in _lines(run, "chosen")} == _overridden(fragment)
    values = reported_values(run)
    assert int(_lines(run, "kBlockDim")[0][0]) == values["usedCoreNum"]
    dims = _dims(shape)
    assert (values["M"], values["N"], values["Ka"], values["Kb"]) == tuple(
        int(dims[k]) for k in ("M", "N", "K", "K")
    )
    assert 1 <= values["usedCoreNum"] <= chip.cores
    problem = parse_problem("matmul", dims, dtype)
    view = {
        "TCubeTiling": values,
        "MatmulConfig": {
            "preset": "CFG_MDL",
            "doMTE2Preload": 0,
            "enableMultiCoreSplitK": values["singleCoreK"] < values["Ka"],
        },
        "MatmulType": {
            "A": {"isTrans": problem.layout[0] == "t"},
            "B": {"isTrans": problem.layout[1] == "t"},
        },
    }
    assert check_tcube(view, chip, problem) == [], values


ASCENDC_MUTATIONS = {
    # (case, old, new, a line the run must print)
    "wrong_fix_split": ("910b3-fp16-4096", "api.SetFixSplit(256, ", "api.SetFixSplit(64, ", "differ baseM"),
    "missing_override": (
        "910b3-fp16-4096",
        "    tiling.set_depthA1(",
        "    // tiling.set_depthA1(",
        "differ depthA1",
    ),
    # SetMatmulConfigParams resets the traversal: called after SetTraverse, the iteration order is the API's again
    "traverse_before_config_params": (
        "910b3-fp16-4096",
        "    api.SetMatmulConfigParams(1);\n",
        "",
        "differ iterateOrder",
    ),
    "split_k_not_enabled": (
        "910b2-fp16-splitk",
        "api.EnableMultiCoreSplitK(true);",
        "api.EnableMultiCoreSplitK(false);",
        "gettiling-failed",
    ),
    "wrong_single_shape": (
        "910b3-fp16-4096",
        "api.SetSingleShape(",
        "api.SetSingleShape(16 + ",
        "differ singleCoreM",
    ),
}


@pytest.mark.parametrize("name", list(ASCENDC_MUTATIONS))
def test_ascendc_forms_that_differ_fail_the_comparison(cxx, tmp_path, capsys, name):
    """The comparison can fail: one changed call in the emitted API form and the run reports the field (or
    GetTiling's failure) and exits non-zero."""
    from tiler.hardware import load_chip

    case, old, new, line = ASCENDC_MUTATIONS[name]
    chip_id, shape, dtype, extra = ASCENDC_CASES[case]
    fragment = emit(capsys, chip_id, shape, dtype, "ascendc", extra)
    if name == "traverse_before_config_params":
        # move SetMatmulConfigParams after SetTraverse
        fragment = replace_once(fragment, old, new)
        fragment = replace_once(
            fragment,
            "    api.EnableMultiCoreSplitK(",
            "    api.SetMatmulConfigParams(1);\n    api.EnableMultiCoreSplitK(",
        )
    else:
        fragment = replace_once(fragment, old, new)
    proc, run, source = run_both_forms(cxx, tmp_path, fragment, load_chip(chip_id)["l0c_bytes"])
    assert_compiles(proc, source)
    assert run.returncode != 0 and any(s.startswith(line) for s in run.stdout.splitlines()), run.stdout
