"""The code tiler emits compiles: `--emit catlass` fragments against stand-ins of the CATLASS headers that
carry CATLASS's compile-time checks as static_asserts, `--emit ascendc` fragments against a stand-in
TCubeTiling whose setters count their calls (compiled and run: every field set exactly once).

The stand-ins are in tests/cpp/include (tests/cpp/README.md says where each rule comes from). Hand-written
fragments show the harness can fail (each breaks one rule and must be rejected, with that rule's message) and
can pass (CATLASS's defaults compile); the tool's own fragments must compile. Needs a C++17 compiler (g++,
clang++ or c++ on PATH); skipped without one.
"""

from __future__ import annotations

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


# ---------------------------------------------------------------------------------------------------- CATLASS

CATLASS_INCLUDES = [
    "catlass/arch/arch.hpp",
    "catlass/gemm/block/block_mmad.hpp",
    "catlass/gemm/block/block_swizzle.hpp",
    "catlass/gemm/dispatch_policy.hpp",
    "catlass/gemm/gemm_type.hpp",
    "catlass/gemm_coord.hpp",
    "catlass/layout/layout.hpp",
]
CATLASS_ALIASES = (
    "ArchTag",
    "DispatchPolicy",
    "L1TileShape",
    "L0TileShape",
    "AType",
    "BType",
    "CType",
    "BlockScheduler",
)

# Appended to a fragment: every alias must exist and be of the right kind, the block must instantiate (that runs
# the stand-in's static_asserts, CATLASS's checks) and so must the scheduler. The split-K lines are the emitted
# format's convention (the split-K kernel: ping-pong block, fp32 partials; int8 may keep int32 partials).
CATLASS_CHECK = textwrap.dedent(
    """
    // ---- appended by tests/test_emit_compile.py ----
    #include <cstdint>
    #include <type_traits>
    namespace tiler_check {
    template <class T> struct is_shape : std::false_type {};
    template <std::uint32_t M, std::uint32_t N, std::uint32_t K>
    struct is_shape<Catlass::GemmShape<M, N, K>> : std::true_type {};
    template <class T> struct is_gemm_type : std::false_type {};
    template <class E, class L> struct is_gemm_type<Catlass::Gemm::GemmType<E, L>> : std::true_type {};
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
    using Block = Catlass::Gemm::Block::BlockMmad<DispatchPolicy, L1TileShape, L0TileShape, AType, BType, CType>;
    }  // namespace tiler_check

    static_assert(std::is_same_v<ArchTag, Catlass::Arch::AtlasA2>, "check: ArchTag is Catlass::Arch::AtlasA2");
    static_assert(std::is_same_v<ArchTag, DispatchPolicy::ArchTag>, "check: ArchTag is the policy's arch");
    static_assert(tiler_check::is_preload_async<DispatchPolicy>::value || tiler_check::is_pingpong<DispatchPolicy>::value,
                  "check: DispatchPolicy is MmadAtlasA2PreloadAsync or MmadAtlasA2Pingpong");
    static_assert(tiler_check::is_shape<L1TileShape>::value && tiler_check::is_shape<L0TileShape>::value,
                  "check: L1TileShape and L0TileShape are Catlass::GemmShape");
    static_assert(tiler_check::is_gemm_type<AType>::value && tiler_check::is_gemm_type<BType>::value &&
                      tiler_check::is_gemm_type<CType>::value,
                  "check: AType, BType and CType are Catlass::Gemm::GemmType");
    static_assert(tiler_check::is_swizzle<BlockScheduler>::value || tiler_check::is_splitk_swizzle<BlockScheduler>::value,
                  "check: BlockScheduler is a GemmIdentityBlockSwizzle or SplitkGemmIdentityBlockSwizzle");
    static_assert(!tiler_check::is_splitk_swizzle<BlockScheduler>::value ||
                      tiler_check::is_pingpong<DispatchPolicy>::value,
                  "check: split-K (SplitkGemmIdentityBlockSwizzle) goes with MmadAtlasA2Pingpong");
    static_assert(!tiler_check::is_splitk_swizzle<BlockScheduler>::value ||
                      std::is_same_v<CType::Element, float> ||
                      (std::is_same_v<AType::Element, std::int8_t> && std::is_same_v<CType::Element, std::int32_t>),
                  "check: split-K accumulates its partials in float (CType's element)");
    static_assert(sizeof(BlockScheduler) > 0, "check: BlockScheduler instantiates");
    static_assert(sizeof(tiler_check::Block) > 0, "check: BlockMmad instantiates");
    """
)

ELEMENT = {"fp16": "half", "bf16": "bfloat16_t", "fp32": "float", "int8": "int8_t"}


def catlass_fragment(
    policy: str = "MmadAtlasA2PreloadAsync<1, 2, 2, 2, 1, true, false>",
    l1=(128, 256, 256),
    l0=(128, 256, 64),
    a=("half", "RowMajor"),
    b=("half", "ColumnMajor"),
    c=("half", "RowMajor"),
    scheduler: str = "GemmIdentityBlockSwizzle<3, 0>",
    drop: tuple[str, ...] = (),
) -> str:
    """A fragment in the emitted format (defaults: CATLASS's A2 fp16 matmul), with the aliases in `drop` left
    out."""
    lines = {
        "ArchTag": "Catlass::Arch::AtlasA2",
        "DispatchPolicy": f"Catlass::Gemm::{policy}",
        "L1TileShape": "Catlass::GemmShape<{}, {}, {}>".format(*l1),
        "L0TileShape": "Catlass::GemmShape<{}, {}, {}>".format(*l0),
        "AType": f"Catlass::Gemm::GemmType<{a[0]}, Catlass::layout::{a[1]}>",
        "BType": f"Catlass::Gemm::GemmType<{b[0]}, Catlass::layout::{b[1]}>",
        "CType": f"Catlass::Gemm::GemmType<{c[0]}, Catlass::layout::{c[1]}>",
        "BlockScheduler": f"Catlass::Gemm::Block::{scheduler}",
    }
    return (
        "\n".join(
            [f'#include "{h}"' for h in CATLASS_INCLUDES]
            + ["", "// tiler test: hand-written fragment"]
            + [f"using {k} = {v};" for k, v in lines.items() if k not in drop]
        )
        + "\n"
    )


def compile_catlass(cxx: str, tmp_path: Path, fragment: str, extra: str = ""):
    """The fragment, the check block and `extra` (more static_asserts) as one TU, syntax-checked."""
    source = fragment + CATLASS_CHECK + extra
    return _compile(cxx, tmp_path, source, CATLASS_FLAGS), source


def assert_compiles(proc, source: str) -> None:
    assert proc.returncode == 0, f"does not compile:\n{proc.stderr[-4000:]}\n--- TU ---\n{_numbered(source)}"


def assert_rejected(proc, source: str, message: str) -> None:
    assert proc.returncode != 0, f"compiled, but should break {message!r}:\n{_numbered(source)}"
    assert message in proc.stderr, f"rejected, but not for {message!r}:\n{proc.stderr[-4000:]}"


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
    """field -> value from the stand-in's report (fields in the struct's order)."""
    rows = [line.split() for line in run.stdout.splitlines() if line.strip()]
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

# (chip, shape, dtype, extra search flags for the CATLASS case); split_k is pinned so the split-K form is emitted.
CASES = {
    "910b3-fp16-4096": ("ascend910b3", "M=4096,N=4096,K=4096", "fp16", []),
    "910b4-bf16-gemv-nt": ("ascend910b4", "M=1,N=4096,K=4096,layout=nt", "bf16", []),
    "910b3-int8-1000x768x512": ("ascend910b3", "M=1000,N=768,K=512", "int8", []),
    "910b2-fp16-splitk": ("ascend910b2", "M=64,N=64,K=65536", "fp16", ["--fix", "split_k=8"]),
    "910b3-fp32-512": ("ascend910b3", "M=512,N=512,K=512", "fp32", []),
}
DTYPE_BYTES = {"fp16": 2, "bf16": 2, "fp32": 4, "int8": 1}


def emit(capsys, chip: str, shape: str, dtype: str, target: str, extra=()) -> str:
    args = ["search", "--op", "matmul", "--chip", chip, "--shape", shape, "--dtype", dtype]
    code = main([*args, *extra, "--target", target, "--emit", target])
    out = capsys.readouterr()
    assert code == 0, f"tiler {' '.join(args)} --target {target} --emit {target}: exit {code}\n{out.err}"
    assert out.out.strip(), f"--emit {target} printed nothing"
    return out.out


@pytest.mark.parametrize("case", list(CASES))
def test_emitted_catlass_fragment_compiles(cxx, tmp_path, capsys, case):
    chip, shape, dtype, extra = CASES[case]
    fragment = emit(capsys, chip, shape, dtype, "catlass", extra)
    lines = [s.strip() for s in fragment.splitlines() if s.strip()]
    includes = [i for i, s in enumerate(lines) if s.startswith("#include")]
    assert includes == list(range(len(includes))), f"#include lines come first:\n{fragment}"
    for alias in CATLASS_ALIASES:
        assert any(s.startswith(f"using {alias} = ") for s in lines), f"no `using {alias} = ...`:\n{fragment}"
    element = ELEMENT[dtype]
    checks = [
        f"static_assert(std::is_same_v<AType::Element, {element}> && std::is_same_v<BType::Element, {element}>, "
        f'"case: {dtype} inputs are {element}");'
    ]
    if "split_k=8" in extra:
        checks.append(
            "static_assert(tiler_check::is_splitk_swizzle<BlockScheduler>::value, "
            '"case: split_k=8 is emitted as the split-K kernel (SplitkGemmIdentityBlockSwizzle)");'
        )
    proc, source = compile_catlass(cxx, tmp_path, fragment, "\n".join(checks) + "\n")
    assert_compiles(proc, source)


@pytest.mark.parametrize("case", list(CASES))
def test_emitted_ascendc_fragment_compiles_and_sets_every_field_once(cxx, tmp_path, capsys, case):
    from tiler.hardware import load_chip
    from tiler.ops.matmul.views import check_tcube
    from tiler.problem import parse_problem

    chip_id, shape, dtype, _ = CASES[case]
    fragment = emit(capsys, chip_id, shape, dtype, "ascendc")
    proc, run, source = run_ascendc(cxx, tmp_path, fragment)
    assert_compiles(proc, source)
    assert run.returncode == 0, f"{run.stderr}\n--- fragment ---\n{fragment}"
    values = reported_values(run)
    dims = dict(kv.split("=") for kv in shape.split(","))
    assert (values["M"], values["N"], values["Ka"], values["Kb"]) == tuple(
        int(dims[k]) for k in ("M", "N", "K", "K")
    )
    chip = load_chip(chip_id)
    assert 1 <= values["usedCoreNum"] <= chip.cores
    # the struct's own rules (capacity, coverage: usedCoreNum = the per-core blocks), read back from the run
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
