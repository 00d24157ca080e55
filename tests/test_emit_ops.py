"""The code the Ascend targets of flash attention, depthwise convolution and softmax emit compiles, runs and sets
every field of its host tiling data exactly once with the exported view's value; their dispatch-unit entries do
the same; the Triton targets' entries are the triton.Config they print; `ascendc_conv`'s check rejects broken
views.

The C++ is compiled with a stock C++17 compiler against stand-ins of CANN's `register/tilingdata_base.h` (the
TILING_DATA macros: a class whose setters count their calls) and `register/op_def_registry.h` (a TilingContext that
records the block dim and the workspace) in tests/cpp/include/register/. The expected values are derived here from
the exported view and problem, by this file's own spelling rule and word codes (docs/targets/*.md), not by the
emitter's code. Hand-broken fragments (a misspelt setter, a field set twice or not at all, a value that does not
fit, a missing SetBlockDim) show that the harness fails when the code is wrong. Skipped without g++, clang++ or c++.
"""

from __future__ import annotations

import ast
import json
import re
import shutil
import subprocess
import textwrap
from dataclasses import dataclass
from pathlib import Path

import pytest

from tiler.cli import main
from tiler.errors import TilerError
from tiler.hardware import load_chip
from tiler.operator import get_operator
from tiler.problem import parse_problem

INCLUDE = Path(__file__).resolve().parent / "cpp" / "include"
CXX = next((path for name in ("g++", "clang++", "c++") if (path := shutil.which(name))), None)
# -Wconversion, -Wsign-conversion: a value that does not fit a field's unsigned type does not compile.
FLAGS = ["-std=c++17", "-Wall", "-Wextra", "-Wconversion", "-Wsign-conversion", "-Werror"]

# The Ascend target of each operator, the view fields its tiling data does not carry (constants, or a shape the
# other fields give), the words a view writes and the codes the tiling data holds (the space files' codes for
# knobs), and the fields a view of one scheme leaves out (0 in the tiling data).
ASCEND = {
    "flash_attention": "ascendc_fa",
    "depthwise_conv": "ascendc_conv",
    "softmax": "ascendc_softmax",
}
NOT_CARRIED = {"layout", "weight_expanded_shape"}
CODES = {
    "layout": {"nchw": 0, "nhwc": 1, "nc1hwc0": 2},  # depthwise_conv's problem layout
    "mask": {"none": 0, "causal_bottom_right": 1},
    "core_split": {"plain": 0, "balanced": 1},
    "scheme": {"group_loop": 0, "group_opt": 1, "vector": 2},
    "weight_expand": {"offline": 0, "per_call": 1},
}
SCHEME_FIELDS = {
    "depthwise_conv": {"base_m", "base_k", "base_n", "l0a_bytes", "l0b_bytes", "l0c_bytes", "l1_bytes"}
    | {"weight_expand", "ub_bytes", "vector_cores"}
}
WORKSPACE = {"ascendc_fa": "workspace_bytes"}

# (op, chip, shape, extra search flags): prefill, decode with a kv split and a coupled chip; every depthwise
# scheme and the per-call weight expansion; softmax rows that fit and do not fit one UB chunk.
CASES = {
    "fa-910b3-prefill-causal-gqa": (
        "flash_attention",
        "ascend910b3",
        "B=1,heads=32,kv_heads=8,S1=4096,S2=4096,D=128,causal=1",
        [],
    ),
    "fa-910b4-decode": ("flash_attention", "ascend910b4", "B=8,heads=32,kv_heads=8,S1=1,S2=8192,D=128", []),
    "fa-310p3-coupled": (
        "flash_attention",
        "ascend310p3",
        "B=2,heads=16,kv_heads=16,S1=1024,S2=1024,D=64",
        [],
    ),
    "dw-910b3-convnext-7x7": ("depthwise_conv", "ascend910b3", "N=16,C=96,H=56,W=56,kh=7,kw=7,pad=3", []),
    "dw-910b3-mamba-conv1d": ("depthwise_conv", "ascend910b3", "N=8,C=4096,H=2048,W=1,kh=4,kw=1,pad=3", []),
    "dw-910b3-vector": (
        "depthwise_conv",
        "ascend910b3",
        "N=2,C=96,H=28,W=28,kh=3,kw=3,pad=1",
        ["--fix", "scheme=vector"],
    ),
    "dw-910b3-group-loop": (
        "depthwise_conv",
        "ascend910b3",
        "N=2,C=96,H=28,W=28,kh=3,kw=3,pad=1",
        ["--fix", "scheme=group_loop"],
    ),
    "dw-910b3-per-call": (
        "depthwise_conv",
        "ascend910b3",
        "N=2,C=96,H=28,W=28,kh=3,kw=3,pad=1",
        ["--fix", "scheme=group_opt", "--fix", "weight_expand=per_call"],
    ),
    "softmax-910b3-long-rows": ("softmax", "ascend910b3", "rows=4096,d=32768", []),
    "softmax-910b3-short-rows": ("softmax", "ascend910b3", "rows=32768,d=128", []),
    "softmax-310p3-one-row": ("softmax", "ascend310p3", "rows=1,d=1000", []),
}


# What every emitted fragment opens with (after its comment lines): the stand-ins' two headers, in this order.
STANDINS = '#include "register/op_def_registry.h"\n#include "register/tilingdata_base.h"\n'


@dataclass(frozen=True)
class Cxx:
    """The compiler, and a folder whose register/op_def_registry.h.gch is STANDINS precompiled with FLAGS (g++
    only; None without one)."""

    path: str
    pch: Path | None


@pytest.fixture(scope="module")
def cxx(tmp_path_factory) -> Cxx:
    """The compiler, once it has shown it takes C++17 (else the C++ tests skip), with the stand-ins precompiled."""
    if CXX is None:
        pytest.skip("no C++ compiler (g++, clang++ or c++) on PATH")
    folder = tmp_path_factory.mktemp("cxx")
    probe = folder / "probe.cpp"
    probe.write_text("#include <type_traits>\nstatic_assert(std::is_same_v<int, int>);\nint main() {}\n")
    proc = subprocess.run([CXX, "-std=c++17", "-fsyntax-only", str(probe)], capture_output=True, text=True)
    if proc.returncode != 0:
        pytest.skip(f"{CXX} does not compile C++17: {proc.stderr.strip()[:200]}")
    return Cxx(CXX, _precompiled_standins(folder / "pch"))


def _precompiled_standins(folder: Path) -> Path | None:
    """`folder` with STANDINS precompiled as register/op_def_registry.h.gch, or None (not g++, or it failed).

    Every fragment compiles those two headers first (most of a compile's parsing: <string>, <vector>, ...). g++
    takes an include's .gch in an earlier -I folder in place of the header when it is the translation unit's first
    include and the flags match (else it reads the header), and the second header's guard is then already defined:
    the same declarations as reading both. build_and_run passes the folder only for a source that opens with exactly
    STANDINS, so a fragment that omits or reorders them is compiled from the headers as it is written."""
    version = subprocess.run([CXX, "--version"], capture_output=True, text=True).stdout
    if "Free Software Foundation" not in version:  # clang reads a .gch only for -include, not for #include
        return None
    (folder / "register").mkdir(parents=True)
    (folder / "standins.h").write_text(STANDINS)
    gch = folder / "register" / "op_def_registry.h.gch"
    cmd = [CXX, *FLAGS, "-I", str(INCLUDE), "-x", "c++-header", str(folder / "standins.h"), "-o", str(gch)]
    return folder if subprocess.run(cmd, capture_output=True).returncode == 0 else None


def _opens_with_standins(source: str) -> bool:
    """Whether `source` opens with // comment lines (none continued by a backslash) and then exactly STANDINS."""
    lines = source.splitlines(keepends=True)
    i = 0
    while i < len(lines) and lines[i].startswith("//") and not lines[i].rstrip("\r\n").endswith("\\"):
        i += 1
    return "".join(lines[i : i + 2]) == STANDINS


def search(op: str, chip: str, shape: str, extra: list[str], target: str, tmp_path: Path, capsys):
    """`tiler search ... --emit target --export FILE`: (the emitted text, the exported document)."""
    path = tmp_path / "t.json"
    argv = [
        "search",
        "--op",
        op,
        "--chip",
        chip,
        "--shape",
        shape,
        *extra,
        "--emit",
        target,
        "--export",
        str(path),
    ]
    code = main(argv)
    out = capsys.readouterr()
    assert code == 0, f"tiler {' '.join(argv)}: exit {code}\n{out.err}"
    return out.out, json.loads(path.read_text())


def snake(name: str) -> str:
    """The view or problem name a tiling-data field holds (the docs' rule read backwards: camelCase ->
    snake_case); a name without a lower-to-upper step (`B`, `S1`, `tasks`) is itself."""
    return re.sub(r"(?<=[a-z0-9])([A-Z])", lambda m: "_" + m.group(1).lower(), name)


def expected(doc: dict, target: str) -> dict[str, int]:
    """snake name -> the value the tiling data must hold: every problem field, then every view field the tiling
    data carries, words as their codes."""
    view = doc["targets"][target]
    out = {k: CODES[k][v] if isinstance(v, str) else int(v) for k, v in doc["problem"]["shape"].items()}
    for k, v in view.items():
        if k not in NOT_CARRIED:
            out[k] = CODES[k][v] if isinstance(v, str) else int(v)
    return out


# ------------------------------------------------------------------------------------------------- the harness

FRAGMENT_MAIN = textwrap.dedent(
    """
    // ---- appended by tests/test_emit_ops.py ----
    #include <cstdio>
    int main() {
        gert::TilingContext context;
        if (optiling::TilingFunc(&context) != ge::GRAPH_SUCCESS) {
            std::fprintf(stderr, "TilingFunc failed\\n");
            return 2;
        }
        for (const auto &r : tiler_standin::registered()) std::printf("#registered %s %s\\n", r.first, r.second);
        std::printf("#block_dim %u %d\\n", context.GetBlockDim(), context.BlockDimCalls());
        std::printf("#workspace_calls %d\\n", context.WorkspaceCalls());
        for (std::size_t w : context.Workspaces()) std::printf("#workspace %zu\\n", w);
        std::printf("#raw_size %zu\\n", context.GetRawTilingData()->GetDataSize());
        std::printf("#saves %zu\\n", tiler_standin::saved().size());
        int bad = 0;
        for (const auto &rows : tiler_standin::saved()) bad += tiler_standin::ReportRows(rows, stdout);
        return bad == 0 ? 0 : 1;
    }
    """
)


def _numbered(source: str) -> str:
    return "\n".join(f"{i:4} | {line}" for i, line in enumerate(source.splitlines(), 1))


def build_and_run(cxx: Cxx, tmp_path: Path, source: str, include: Path | None = None):
    """Compile and link `source`; run it when that worked. (compile process, run process or None)."""
    tu, exe = tmp_path / "tu.cpp", tmp_path / "tu"
    tu.write_text(source)
    pch = ["-I", str(cxx.pch)] if cxx.pch is not None and _opens_with_standins(source) else []
    cmd = (
        [cxx.path, *FLAGS, *pch, "-I", str(INCLUDE)]
        + (["-I", str(include)] if include else [])
        + [str(tu), "-o", str(exe)]
    )
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=120)
    if proc.returncode != 0:
        return proc, None
    return proc, subprocess.run([str(exe)], capture_output=True, text=True, timeout=60)


def run_fragment(cxx: Cxx, tmp_path: Path, fragment: str):
    """The fragment as a translation unit, with a main that runs its TilingFunc on a stand-in context."""
    source = fragment + FRAGMENT_MAIN
    proc, run = build_and_run(cxx, tmp_path, source)
    assert proc.returncode == 0, f"does not compile:\n{proc.stderr[-4000:]}\n--- TU ---\n{_numbered(source)}"
    return run


def parse_run(stdout: str) -> tuple[dict[str, list[list[str]]], list[tuple[str, int, int]]]:
    """(#-lines by key, field rows (name, value, calls) in the class's order)."""
    meta: dict[str, list[list[str]]] = {}
    rows = []
    for line in stdout.splitlines():
        if line.startswith("#"):
            key, *rest = line[1:].split()
            meta.setdefault(key, []).append(rest)
        elif line.strip():
            name, value, calls = line.split()
            rows.append((name, int(value), int(calls)))
    return meta, rows


def field_problems(rows, want: dict[str, int], op: str) -> list[str]:
    """What is wrong with the rows a run reported, against the values the view and problem give."""
    bad = []
    got = {snake(name): (value, calls) for name, value, calls in rows}
    if len(got) != len(rows):
        bad.append("two fields spell the same name")
    for key, value in want.items():
        if key not in got:
            bad.append(f"no field for {key}")
        elif got[key] != (value, 1):
            bad.append(f"{key}: {got[key][0]} set {got[key][1]} times, want {value} once")
    for key, (value, calls) in got.items():
        if key not in want and (key not in SCHEME_FIELDS.get(op, ()) or (value, calls) != (0, 1)):
            bad.append(f"{key}: a field the view does not name ({value} set {calls} times)")
    return bad


def fragment_problems(run, doc: dict, target: str) -> list[str]:
    """Everything a run of an emitted fragment must show: it ran, saved one tiling-data object whose every field
    was set once with the view's (or the problem's) value, registered one class, set the block dim once to the
    view's, and asked for the view's workspace (when it has one) and no other."""
    if run.returncode != 0:
        return [f"the run failed (exit {run.returncode}): {run.stderr.strip()}"]
    meta, rows = parse_run(run.stdout)
    view = doc["targets"][target]
    bad = field_problems(rows, expected(doc, target), doc["op"])
    if meta.get("saves") != [["1"]]:
        bad.append(f"SaveToBuffer called {meta.get('saves')} times, want once")
    if len(meta.get("registered", [])) != 1:
        bad.append(f"registered {meta.get('registered')}, want one class")
    if meta.get("block_dim") != [[str(view["block_dim"]), "1"]]:
        bad.append(f"SetBlockDim {meta.get('block_dim')}: want {view['block_dim']} once")
    if int(meta["raw_size"][0][0]) < 4 * len(rows):
        bad.append(f"SetDataSize({meta['raw_size'][0][0]}) is less than the fields' {4 * len(rows)} bytes")
    ws = WORKSPACE.get(target)
    want_ws = ([["1"]], [[str(view[ws])]]) if ws else ([["0"]], None)
    if (meta.get("workspace_calls"), meta.get("workspace")) != want_ws:
        bad.append(f"workspace {meta.get('workspace_calls')} {meta.get('workspace')}, want {want_ws}")
    return bad


# ------------------------------------------------------------------------------------- the tool's fragments


@pytest.mark.parametrize("case", list(CASES))
def test_emitted_fragment_compiles_runs_and_sets_every_field_once(cxx, tmp_path, capsys, case):
    op, chip, shape, extra = CASES[case]
    target = ASCEND[op]
    fragment, doc = search(op, chip, shape, extra, target, tmp_path, capsys)
    lines = fragment.splitlines()
    assert lines[0].startswith("// tiler ") and f"on {chip} " in lines[0] and "predicted" in lines[0], lines[
        0
    ]
    # the predicted time of the view's own tiling (the target's runnable tiling where the document has one)
    time_us = doc.get("runnable", {}).get(target, {}).get("time_us", doc["estimate"]["time_us"])
    assert f"predicted {time_us:.2f} us" in lines[0], lines[0]
    run = run_fragment(cxx, tmp_path, fragment)
    assert fragment_problems(run, doc, target) == [], (
        f"{run.stdout}\n{run.stderr}\n--- fragment ---\n{fragment}"
    )
    # the view the values came from is one its target accepts
    problem = parse_problem(op, doc["problem"]["shape"], doc["problem"]["dtype"])
    chip_obj = load_chip(chip)
    assert get_operator(op, "ascend").TARGETS[target].broken(doc["targets"][target], chip_obj, problem) == []


# --------------------------------------------------------------------------------- the harness can fail

FA_CASE = CASES["fa-910b3-prefill-causal-gqa"]


@pytest.fixture(scope="module")
def fa_fragment(tmp_path_factory):
    """The emitted flash-attention fragment and its document (one search for the negative cases)."""
    path = tmp_path_factory.mktemp("fa") / "t.json"
    op, chip, shape, _ = FA_CASE
    assert main(["search", "--op", op, "--chip", chip, "--shape", shape, "--export", str(path)]) == 0
    doc = json.loads(path.read_text())
    from tiler.export import emit_code

    return emit_code(doc, "ascendc_fa"), doc


def _one_set_line(fragment: str, field: str) -> str:
    (line,) = [s for s in fragment.splitlines() if s.strip().startswith(f"tiling.set_{field}(")]
    return line


def test_a_fragment_setting_a_field_twice_fails(cxx, tmp_path, fa_fragment):
    fragment, doc = fa_fragment
    line = _one_set_line(fragment, "s2Base")
    run = run_fragment(cxx, tmp_path, fragment.replace(line, line + "\n" + line))
    assert run.returncode != 0 and "s2Base set 2 times" in run.stderr, run.stderr
    assert fragment_problems(run, doc, "ascendc_fa")


def test_a_fragment_leaving_a_field_unset_fails(cxx, tmp_path, fa_fragment):
    fragment, doc = fa_fragment
    run = run_fragment(cxx, tmp_path, fragment.replace(_one_set_line(fragment, "kvSplit") + "\n", ""))
    assert run.returncode != 0 and "kvSplit set 0 times" in run.stderr, run.stderr
    assert fragment_problems(run, doc, "ascendc_fa")


def test_a_fragment_with_a_wrong_value_fails_the_comparison(cxx, tmp_path, fa_fragment):
    """The run itself passes (each field set once); the comparison with the view catches the value."""
    fragment, doc = fa_fragment
    line = _one_set_line(fragment, "tasks")
    run = run_fragment(cxx, tmp_path, fragment.replace(line, "    tiling.set_tasks(7);"))
    assert run.returncode == 0, run.stderr
    bad = fragment_problems(run, doc, "ascendc_fa")
    assert bad == [f"tasks: 7 set 1 times, want {doc['targets']['ascendc_fa']['tasks']} once"], bad


def test_a_fragment_without_set_block_dim_fails_the_comparison(cxx, tmp_path, fa_fragment):
    fragment, doc = fa_fragment
    (line,) = [s for s in fragment.splitlines() if "SetBlockDim" in s]
    run = run_fragment(cxx, tmp_path, fragment.replace(line + "\n", ""))
    bad = fragment_problems(run, doc, "ascendc_fa")
    assert len(bad) == 1 and bad[0].startswith("SetBlockDim"), bad


@pytest.mark.parametrize(
    "old, new, message",
    [
        ("tiling.set_s1Base(", "tiling.set_s1Bsae(", "set_s1Bsae"),  # misspelt setter
        ("tiling.set_tasks(", "tiling.set_tasks(4294967296 + ", "4294967296"),  # does not fit uint32_t
        ("tiling.set_preload(", "tiling.set_preload(-1 * ", "conversion"),  # negative into an unsigned field
        (
            "TILING_DATA_FIELD_DEF(uint32_t, D);",
            "TILING_DATA_FIELD_DEF(double, D);",
            "int8_t .. uint64_t or float",
        ),
    ],
    ids=["misspelt", "out_of_uint32", "negative", "field_type"],
)
def test_a_broken_fragment_does_not_compile(cxx, tmp_path, fa_fragment, old, new, message):
    fragment, _ = fa_fragment
    assert old in fragment
    source = fragment.replace(old, new, 1) + FRAGMENT_MAIN
    proc, _ = build_and_run(cxx, tmp_path, source)
    assert proc.returncode != 0, f"compiled, but should not:\n{_numbered(source)}"
    assert message in proc.stderr, proc.stderr[-3000:]


# ------------------------------------------------------------------------------------- dispatch-unit entries


def class_header(fragment: str) -> str:
    """The tiling-data class block of an emitted fragment: from CANN's macro header to the end of its namespace
    (what a project keeps in op_host/<op>_tiling.h, and what a dispatch unit includes)."""
    lines = fragment.splitlines()
    start = lines.index('#include "register/tilingdata_base.h"')
    end = lines.index("}  // namespace optiling", start)
    return "\n".join(lines[start : end + 1]) + "\n"


# Two problems per operator on the 910B3 for a library (different views: a prefill and a decode, two depthwise
# layers, long and short softmax rows).
UNIT_SHAPES = {
    "flash_attention": [
        "B=1,heads=32,kv_heads=8,S1=4096,S2=4096,D=128,causal=1",
        "B=8,heads=32,kv_heads=8,S1=1,S2=8192,D=128,causal=0",
    ],
    "depthwise_conv": [
        "N=16,C=96,H=56,W=56,kh=7,kw=7,stride=1,pad=3,dilation=1",
        "N=2,C=96,H=28,W=28,kh=3,kw=3,stride=1,pad=1,dilation=1",
    ],
    "softmax": ["rows=4096,d=32768", "rows=32768,d=128"],
}

UNIT_MAIN = """
// ---- appended by tests/test_emit_ops.py ----
#include <cstdio>
int main() {{
    using namespace {ns};
    int bad = 0;
{queries}
    return bad == 0 ? 0 : 1;
}}
"""
UNIT_QUERY = """    {{
        Query q;
{fields}
        const int row = Select(q);
        std::printf("#entry {i} %d\\n", row);
        if (!Dispatch(VariantOf(row), [&](auto v) {{
                using V = decltype(v);
                optiling::{cls} tiling;
                V::Fill(tiling);
                std::printf("#block_dim %u\\n", static_cast<unsigned>(V::kBlockDim));
{workspace}                bad += tiling.Report(stdout);
            }}))
            bad += 1;
    }}
"""


@pytest.mark.parametrize("op", list(ASCEND))
def test_a_dispatch_unit_of_a_library_fills_the_class(cxx, tmp_path, capsys, op):
    """`tiler emit LIBRARY --target T` for a two-problem library: the unit includes the target's `includes` (the
    second is the project's class header, written here from the emitted fragment), and for each library problem
    its Select -> Dispatch -> Variant::Fill sets every field once with that entry's view and problem values,
    `kBlockDim` is the view's block dim and `kWorkspaceBytes` its workspace."""
    import tiler

    target = get_operator(op, "ascend").TARGETS[ASCEND[op]]
    assert target.language == "cpp" and target.entry is not None
    shapes = [dict(kv.split("=") for kv in s.split(",")) for s in UNIT_SHAPES[op]]
    csv = tmp_path / "shapes.csv"
    csv.write_text(",".join(shapes[0]) + "\n" + "".join(",".join(s.values()) + "\n" for s in shapes))
    lib = tmp_path / "lib.json"
    argv = ["sweep", str(csv), "--op", op, "--chip", "ascend910b3", "--library", str(lib)]
    assert main([*argv, "--out", str(tmp_path / "out.csv")]) == 0, capsys.readouterr().err
    unit = tiler.emit(lib, target=target.name, out=tmp_path)
    assert unit.entries == 2 and not unit.skipped, unit
    fragment, _ = search(op, "ascend910b3", UNIT_SHAPES[op][0], [], target.name, tmp_path, capsys)
    header = target.includes[-1]
    assert f"op_host/{header}" in fragment, "the fragment names the header the unit includes"
    (tmp_path / header).write_text(class_header(fragment))
    cls = re.search(r"BEGIN_TILING_DATA_DEF\((\w+)\)", fragment).group(1)
    ws = WORKSPACE.get(target.name)
    queries = "".join(
        UNIT_QUERY.format(
            i=i,
            cls=cls,
            fields="\n".join(f"        q.{k} = {v};" for k, v in shape.items()),
            workspace=(
                '                std::printf("#workspace %llu\\n", static_cast<unsigned long long>'
                "(V::kWorkspaceBytes));\n"
                if ws
                else ""
            ),
        )
        for i, shape in enumerate(shapes)
    )
    source = f'#include "{unit.name}"\n' + UNIT_MAIN.format(ns=unit.name.removesuffix(".h"), queries=queries)
    proc, run = build_and_run(cxx, tmp_path, source, include=tmp_path)
    assert proc.returncode == 0, f"does not compile:\n{proc.stderr[-4000:]}\n--- TU ---\n{_numbered(source)}"
    assert run.returncode == 0, run.stderr
    library = json.loads(lib.read_text())["entries"]
    sections = run.stdout.split("#entry ")[1:]
    assert len(sections) == len(shapes)
    for section, shape in zip(sections, shapes, strict=True):
        (entry,) = [e for e in library if all(str(e["problem"]["shape"][k]) == v for k, v in shape.items())]
        meta, rows = parse_run("#" + section)
        view = entry["targets"][target.name]
        assert meta["block_dim"] == [[str(view["block_dim"])]], meta
        assert meta.get("workspace") == ([[str(view[ws])]] if ws else None), meta
        assert field_problems(rows, expected(entry, target.name), op) == [], section


def test_an_entry_with_a_misspelt_setter_does_not_compile(cxx, tmp_path, capsys):
    op, chip, shape, extra = CASES["softmax-910b3-long-rows"]
    target = get_operator(op, "ascend").TARGETS[ASCEND[op]]
    fragment, doc = search(op, chip, shape, extra, target.name, tmp_path, capsys)
    (tmp_path / target.includes[-1]).write_text(class_header(fragment))
    entry = target.entry(doc["targets"][target.name], doc).replace("set_blockD(", "set_blockd(")
    source = (
        "".join(f'#include "{h}"\n' for h in target.includes)
        + f"struct Entry {{\n{entry}}};\nint main() {{}}\n"
    )
    proc, _ = build_and_run(cxx, tmp_path, source, include=tmp_path)
    assert proc.returncode != 0 and "set_blockd" in proc.stderr, proc.stderr[-3000:]


def test_a_value_outside_its_field_type_is_one_tiler_error(tmp_path, capsys):
    """The emitter refuses a view value the field's C type cannot hold (a hand-edited view), in one line."""
    op, chip, shape, extra = CASES["softmax-910b3-long-rows"]
    target = get_operator(op, "ascend").TARGETS[ASCEND[op]]
    _, doc = search(op, chip, shape, extra, target.name, tmp_path, capsys)
    view = dict(doc["targets"][target.name], ub_bytes=2**32)
    for write in (target.emit, target.entry):
        with pytest.raises(TilerError) as err:
            write(view, doc)
        assert "ubBytes" in str(err.value) and "uint32_t" in str(err.value) and "\n" not in str(err.value)


# ----------------------------------------------------------------------------------------- Triton entries

CUDA_CASES = {
    "flash_attention": "B=1,heads=32,kv_heads=8,S1=4096,S2=4096,D=128,causal=1",
    "depthwise_conv": "N=16,C=96,H=56,W=56,kh=7,kw=7,pad=3",
    "softmax": "rows=4096,d=32768",
}
KERNEL_CONSTEXPRS = {  # the view's constexpr arguments, where the view keeps them
    "flash_attention": lambda v: v["kwargs"],
    "softmax": lambda v: v["kwargs"],
    "depthwise_conv": lambda v: {k: v[k] for k in ("groups_per_op", "BLOCK_P", "BLOCK_K", "STRIP")},
}


def pasted_config(text: str) -> dict:
    """The triton.Config line of an emitted text, read as a call: {"kwargs", "num_warps", "num_stages"}."""
    (line,) = [s for s in text.splitlines() if s.startswith("triton.Config(")]
    call = ast.parse(line, mode="eval").body
    assert isinstance(call, ast.Call) and len(call.args) == 1
    return {
        "kwargs": ast.literal_eval(call.args[0]),
        **{k.arg: ast.literal_eval(k.value) for k in call.keywords},
    }


@pytest.mark.parametrize("op", list(CUDA_CASES))
def test_triton_entry_is_the_config_the_target_prints(tmp_path, capsys, op):
    """A Python dispatch unit's entry is JSON, holds the view's constexprs and launch options, and is exactly
    the triton.Config that `--emit triton` prints for the same view."""
    target = get_operator(op, "cuda").TARGETS["triton"]
    assert target.language == "python"
    text, doc = search(op, "h200", CUDA_CASES[op], [], "triton", tmp_path, capsys)
    view = doc["targets"]["triton"]
    entry = target.entry(view, doc)
    assert json.loads(json.dumps(entry)) == entry
    assert entry == {
        "kwargs": KERNEL_CONSTEXPRS[op](view),
        "num_warps": view["num_warps"],
        "num_stages": view["num_stages"],
    }
    assert pasted_config(text) == entry


# ---------------------------------------------------------------------------------- ascendc_conv's check


@pytest.fixture(scope="module")
def conv_views(tmp_path_factory):
    """A group_opt (per-call weight) view and a vector view of one layer on the 910B3, with the problem."""
    out = {}
    for scheme, fixes in (("group_opt", ["weight_expand=per_call"]), ("vector", [])):
        path = tmp_path_factory.mktemp(scheme) / "t.json"
        argv = [
            "search",
            "--op",
            "depthwise_conv",
            "--chip",
            "ascend910b3",
            "--shape",
            CASES["dw-910b3-vector"][2],
        ]
        argv += [
            "--fix",
            f"scheme={scheme}",
            *[a for f in fixes for a in ("--fix", f)],
            "--export",
            str(path),
        ]
        assert main(argv) == 0
        doc = json.loads(path.read_text())
        out[scheme] = doc["targets"]["ascendc_conv"]
        out["problem"] = parse_problem("depthwise_conv", doc["problem"]["shape"], doc["problem"]["dtype"])
    return out


def conv_broken(view: dict, problem) -> list[str]:
    return (
        get_operator("depthwise_conv", "ascend")
        .TARGETS["ascendc_conv"]
        .broken(view, load_chip("ascend910b3"), problem)
    )


def test_the_searched_conv_views_pass_their_check(conv_views):
    for scheme in ("group_opt", "vector"):
        assert conv_broken(conv_views[scheme], conv_views["problem"]) == [], scheme


def _edit(view: dict, **changes) -> dict:
    out = {k: v for k, v in view.items() if changes.get(k, ...) is not None}
    out.update({k: v for k, v in changes.items() if v is not None})
    return out


CONV_BREAKS = {
    # (scheme of the view, changes (None drops the field), words the broken rule's line holds)
    "group_opt_with_one_channel": ("group_opt", dict(enlarge=1), "group_opt at least 2"),
    "more_channels_than_the_layer": ("vector", dict(enlarge=128, group_ops=1), "at most the layer's C"),
    "group_ops_do_not_cover_c": ("group_opt", dict(group_ops=2), "group_ops = ceil(C / enlarge)"),
    "tile_off_the_fractal": ("vector", dict(tile_m=1000, m_tiles=2), "a multiple of 16"),
    "m_tiles_do_not_cover_the_pixels": ("group_opt", dict(m_tiles=1), "m_tiles = ceil"),
    "more_cores_than_tiles": ("group_opt", dict(block_dim=7), "block_dim = 7"),
    "base_k_not_the_packed_taps": ("group_opt", dict(base_k=256), "base_m, base_k, base_n"),
    "l0c_over_capacity": ("group_opt", dict(tile_m=2048, base_m=2048, m_tiles=1), "l0c_bytes: a tile needs"),
    "l1_bytes_misstated": ("group_opt", dict(l1_bytes=1000), "l1_bytes = 1000: a tile fills"),
    "ub_bytes_misstated": ("vector", dict(ub_bytes=10**6), "ub_bytes = 1000000: a tile fills"),
    "ub_over_capacity": ("vector", dict(tile_m=4096, m_tiles=1), "ub_bytes: a tile needs"),
    "vector_cores_of_another_chip": ("vector", dict(vector_cores=48), "vector_cores = 48"),
    "cube_view_without_its_buffers": ("group_opt", dict(l0a_bytes=None), "needs l0a_bytes"),
    "vector_view_with_cube_buffers": ("vector", dict(l1_bytes=4096), "fills no l1_bytes"),
    "expanded_weight_of_another_shape": ("group_opt", dict(weight_expanded_shape=[1, 2, 3]), "= [group_ops"),
    "group_opt_without_weight_expand": ("group_opt", dict(weight_expand=None), "names its weight_expand"),
    "vector_with_a_weight_to_expand": ("vector", dict(weight_expand="offline"), "no block-diagonal weight"),
}


@pytest.mark.parametrize("name", list(CONV_BREAKS))
def test_a_broken_conv_view_fails_its_check(conv_views, name):
    scheme, changes, words = CONV_BREAKS[name]
    assert conv_broken(conv_views[scheme], conv_views["problem"]) == []
    bad = conv_broken(_edit(conv_views[scheme], **changes), conv_views["problem"])
    assert any(words in line for line in bad), bad


def test_tiler_check_runs_the_conv_check_on_a_file(conv_views, tmp_path, capsys):
    """`tiler check` on an exported file: exit 0 as exported, 1 naming the rule once a field is broken."""
    path = tmp_path / "t.json"
    argv = [
        "search",
        "--op",
        "depthwise_conv",
        "--chip",
        "ascend910b3",
        "--shape",
        CASES["dw-910b3-vector"][2],
    ]
    assert main([*argv, "--fix", "scheme=vector", "--export", str(path)]) == 0
    capsys.readouterr()
    assert main(["check", str(path)]) == 0
    doc = json.loads(path.read_text())
    doc["targets"]["ascendc_conv"]["m_tiles"] += 1
    path.write_text(json.dumps(doc))
    assert main(["check", str(path)]) == 1
    out = capsys.readouterr().out
    assert "targets/ascendc_conv: m_tiles = ceil" in out, out


@pytest.mark.parametrize(
    "chip_id, shape",
    [
        ("ascend910b3", "N=2,C=96,H=28,W=28,kh=3,kw=3,pad=1"),
        ("ascend310p3", "N=1,C=40,H=112,W=112,kh=5,kw=5,pad=2,stride=2"),
        ("ascend910b3", "N=8,C=4096,H=2048,W=1,kh=4,kw=1,pad=3"),
    ],
)
def test_the_conv_check_accepts_exactly_what_the_search_rules_allow(chip_id, shape):
    """Over a grid of tilings, feasible and not (tiles off the fractal, packings the scheme forbids, buffers over
    the chip's): the view of a tiling passes the check re-derived from the view alone exactly when the model's
    rules (all but the dtype's, which is the operator's check) pass it. Either side being wrong shows here."""
    import itertools

    import numpy as np

    from tiler.space import load_space

    model = get_operator("depthwise_conv", "ascend")
    target = model.TARGETS["ascendc_conv"]
    knobs = load_space("depthwise_conv", "ascend").knobs
    chip = load_chip(chip_id)
    p = parse_problem("depthwise_conv", dict(kv.split("=") for kv in shape.split(",")), "fp16")
    grid = {
        "scheme": [0, 1, 2],
        "groups_per_op": [1, 2, 8, 32, 128],
        "tile_m": [64, 100, 1024, 16384],
        "double_buffer": [0, 1],
        "weight_expand": [0, 1],
    }
    rows = list(itertools.product(*(grid[k] for k in model.KNOBS)))
    cands = {k: np.array([r[i] for r in rows]) for i, k in enumerate(model.KNOBS)}
    rules = model.feasible(p, chip, cands)
    allowed = np.logical_and.reduce([m for r, m in rules.items() if r != "dtype"])
    est = model.estimate(p, chip, cands)
    assert 0 < allowed.sum() < len(rows)
    wrong = []
    for i in range(len(rows)):
        tiling = {k: knobs[k].label(cands[k][i]) for k in model.KNOBS}
        row = {k: np.asarray(v)[i] for k, v in est.items()}
        bad = target.broken(target.view(p, chip, tiling, row), chip, p)
        if (not bad) != bool(allowed[i]):
            wrong.append(f"{tiling}: rules {'pass' if allowed[i] else 'fail'}, check {bad}")
    assert not wrong, "\n".join(wrong[:5])
