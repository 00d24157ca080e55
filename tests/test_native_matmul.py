"""Target-native names for matmul (Target.native): a CATLASS config or a TCubeTiling written in the target's own
names reads back as the Ascend matmul knobs it determines, so a user can score a config they already have.

The answers are checked against real searches: the view a `--target` search exports reads back as the very knobs
of the tiling that search found (`res.tiling(0)`), and the view rebuilt from those knobs is the exported view (the
inverse both ways). Partial configs give only the knobs they fix; configs whose fields contradict one another raise
TilerError with one line naming the fields.
"""

from __future__ import annotations

import pytest

import tiler
from tiler.errors import TilerError
from tiler.ops.matmul import views
from tiler.problem import parse_problem

# (chip, shape, dtype, fix): plain, transposed and NZ operands, int8 and fp32, split-K, a resident B panel, batch.
CATLASS_SEARCHES = [
    ("ascend910b3", "M=4096,N=4096,K=4096", "fp16", None),
    ("ascend910b4", "M=1,N=4096,K=4096,layout=nt", "bf16", None),
    ("ascend910b3", "M=1000,N=768,K=512", "int8", None),
    ("ascend910b2", "M=64,N=64,K=65536", "fp16", {"split_k": 8}),
    ("ascend910b1", "M=2048,N=1024,K=3072,layout=tn,b_format=nz", "fp16", None),
    ("ascend910b3", "M=512,N=512,K=512", "fp32", None),
]
ASCENDC_SEARCHES = [
    *CATLASS_SEARCHES,
    ("ascend910a", "M=1024,N=4096,K=2048", "fp16", None),
    ("ascend910b3", "M=512,N=512,K=1024", "fp16", {"weight_resident": 1}),
    ("ascend910b3", "M=256,N=256,K=16384", "bf16", {"split_k": 4}),
    ("ascend910b3", "M=512,N=512,K=1024,batch=4", "fp16", None),
]
TARGETS = {"catlass": views.CATLASS, "ascendc": views.ASCENDC}


def _search(target: str, chip: str, shape: str, dtype: str, fix):
    return tiler.search(op="matmul", chip=chip, shape=shape, dtype=dtype, target=target, fix=fix, top=1)


def _problem(shape: str, dtype: str):
    return parse_problem("matmul", dict(kv.split("=") for kv in shape.split(",")), dtype)


@pytest.mark.parametrize(
    "target, case",
    [("catlass", c) for c in CATLASS_SEARCHES] + [("ascendc", c) for c in ASCENDC_SEARCHES],
    ids=lambda x: x if isinstance(x, str) else f"{x[0]}-{x[1]}-{x[2]}",
)
def test_exported_view_reads_back_as_the_searched_tiling(target, case):
    """native(view) gives back the knobs of the tiling the `--target` search found: every knob, except the one a
    resident B panel's TCubeTiling does not keep (its step_kb); and the view rebuilt from the answer is the view."""
    chip, shape, dtype, fix = case
    res = _search(target, chip, shape, dtype, fix)
    view = res.document()["targets"][target]
    tiling = res.tiling(0)
    knobs = TARGETS[target].native(view, _problem(shape, dtype))
    assert knobs == {k: tiling[k] for k in knobs}
    lost = {"step_kb"} if target == "ascendc" and tiling["weight_resident"] == 1 else set()
    assert set(knobs) == set(tiling) - lost
    # the answer alone rebuilds the view (with the searched step_kb where the struct does not keep it)
    rebuilt = TARGETS[target].view(
        res.problem, res.chip, {**{k: tiling[k] for k in lost}, **knobs}, res.row(0)
    )
    assert rebuilt == view


def test_targets_declare_their_native_names_and_dispatch_entry():
    """Both C++ targets name what they read and what a dispatch unit includes; the names cover the view's keys."""
    res = _search("catlass", "ascend910b3", "M=1024,N=1024,K=1024", "fp16", None)
    for target in TARGETS.values():
        assert target.language == "cpp" and target.includes and target.entry and target.native
        assert len(set(target.native_names)) == len(target.native_names)
    assert set(res.document()["targets"]["catlass"]) <= set(views.CATLASS_NATIVE_NAMES)
    asc = _search("ascendc", "ascend910b3", "M=1024,N=1024,K=1024", "fp16", None).document()["targets"][
        "ascendc"
    ]
    assert set(asc) <= set(views.ASCENDC_NATIVE_NAMES)
    assert set(asc["TCubeTiling"]) <= set(views.ASCENDC_NATIVE_NAMES)


@pytest.mark.parametrize("target", ["catlass", "ascendc"])
def test_emit_places_the_dispatch_entry_verbatim(target):
    """The single-tiling emit and a dispatch unit's entry are one implementation: the emitted code holds the
    entry's text (indented inside its struct) and the target's includes."""
    res = _search(target, "ascend910b3", "M=2048,N=1024,K=4096", "fp16", None)
    doc = res.document()
    t = TARGETS[target]
    entry = t.entry(doc["targets"][target], doc)
    emitted = t.emit(doc["targets"][target], doc)
    assert views._indent(entry) in emitted
    assert all(f'#include "{h}"' in emitted for h in t.includes)
    assert "kBlockDim = " in entry


FLAT_CATLASS = {
    "L1TileShape": [128, 256, 256],
    "L0TileShape": [128, 256, 64],
    "PRELOAD_STAGES": 1,
    "L1_STAGES": 2,
    "L0A_STAGES": 2,
    "L0B_STAGES": 2,
    "L0C_STAGES": 1,
    "ENABLE_UNIT_FLAG": True,
    "SwizzleOffset": 3,
    "SwizzleDirection": 0,
    "splitkFactor": 1,
}
FP16 = _problem("M=4096,N=4096,K=4096", "fp16")


def test_flat_catlass_names_give_the_knobs():
    """CATLASS's own spelling (the 00_basic_matmul-like config, flat): the tile, stage and swizzle knobs."""
    knobs = views.catlass_native(FLAT_CATLASS, FP16)
    want = dict(
        base_m=128, base_n=256, base_k=64, step_ka=4, step_kb=4, l1_stages=2, preload=1, l0_pingpong=1
    )
    want.update(swizzle_offset=3, swizzle_direction=0, split_k=1)
    assert {k: knobs[k] for k in want} == want


def test_partial_configs_give_only_what_they_fix():
    """A partial config: the knobs its fields fix and the target's pinned ones, nothing else."""
    pinned_catlass = {k for k, v in views.CATLASS_DOMAINS.items() if len(v) == 1}
    knobs = views.catlass_native({"L1TileShape": [128, 256, 256]}, FP16)
    assert set(knobs) == pinned_catlass | {"base_m", "base_n"} and (knobs["base_m"], knobs["base_n"]) == (
        128,
        256,
    )
    pinned_ascendc = {k for k, v in views.ASCENDC_DOMAINS.items() if len(v) == 1}
    knobs = views.ascendc_native({"baseM": 128, "baseK": 64, "iterateOrder": 1}, FP16)
    assert knobs == {
        **{k: knobs[k] for k in pinned_ascendc},
        "base_m": 128,
        "base_k": 64,
        "iterate_order": "n",
    }
    assert set(knobs) == pinned_ascendc | {"base_m", "base_k", "iterate_order"}


def test_ascendc_split_k_from_single_core_k():
    """singleCoreK is one split-K slice in whole baseK steps: 4096 / 4 = 1024 with baseK 64 is split_k 4; without
    baseK, ceil(Ka / singleCoreK)."""
    assert views.ascendc_native({"singleCoreK": 1024, "baseK": 64}, FP16)["split_k"] == 4
    assert views.ascendc_native({"singleCoreK": 4096}, FP16)["split_k"] == 1
    assert views.ascendc_native({"singleCoreK": 512}, FP16)["split_k"] == 8


def _contradiction(fn, fields: dict, problem, *names: str) -> None:
    with pytest.raises(TilerError) as err:
        fn(fields, problem)
    message = str(err.value)
    assert "\n" not in message and all(n in message for n in names), message


CATLASS_CONTRADICTIONS = {
    "l1_l0_m_differ": (
        {"L1TileShape": [128, 256, 256], "L0TileShape": [64, 256, 64]},
        ("L1TileShape", "L0TileShape"),
    ),
    "l1_k_not_multiple": (
        {"L1TileShape": [128, 256, 96], "L0TileShape": [128, 256, 64]},
        ("L1TileShape K", "64"),
    ),
    "l0a_l0b_stages_differ": ({"L0A_STAGES": 2, "L0B_STAGES": 1}, ("L0A_STAGES", "L0B_STAGES")),
    "split_named_twice": ({"splitkFactor": 4, "split_k": 2}, ("splitkFactor", "split_k")),
    "splitk_scheduler_without_split": (
        {"BlockScheduler": {"name": "SplitkGemmIdentityBlockSwizzle", "SwizzleOffset": 1}, "splitkFactor": 1},
        ("SplitkGemmIdentityBlockSwizzle", "splitkFactor"),
    ),
    "pingpong_with_three_l1_stages": (
        {"DispatchPolicy": "MmadAtlasA2Pingpong", "L1_STAGES": 3},
        ("L1_STAGES", "MmadAtlasA2Pingpong"),
    ),
    "a_element_not_the_problems": (
        {"AType": {"element": "int8_t", "layout": "RowMajor"}},
        ("AType.element",),
    ),
    "b_layout_not_the_problems": ({"BType": {"element": "half", "layout": "ColumnMajor"}}, ("BType.layout",)),
    "unknown_name": ({"L1TileShap": [128, 256, 256]}, ("L1TileShap", "L1TileShape")),
    "swizzle_direction_two": ({"SwizzleDirection": 2}, ("SwizzleDirection",)),
}


@pytest.mark.parametrize("name", list(CATLASS_CONTRADICTIONS))
def test_catlass_contradictions_are_one_line_errors(name):
    fields, names = CATLASS_CONTRADICTIONS[name]
    _contradiction(views.catlass_native, fields, FP16, *names)


ASCENDC_CONTRADICTIONS = {
    "depth_a1_not_a_multiple": ({"depthA1": 12, "stepM": 1, "stepKa": 8}, ("depthA1", "stepM*stepKa")),
    "depth_a1_three_buffers": ({"depthA1": 24, "stepM": 1, "stepKa": 8}, ("depthA1",)),
    "l1_buffers_differ": (
        {
            "depthA1": 16,
            "stepM": 1,
            "stepKa": 8,
            "depthB1": 2,
            "stepN": 1,
            "stepKb": 2,
            "baseK": 64,
            "singleCoreK": 4096,
        },
        ("depthA1/(stepM*stepKa)", "depthB1/(stepN*stepKb)"),
    ),
    "db_l0_differ": ({"dbL0A": 2, "dbL0B": 1}, ("dbL0A", "dbL0B")),
    "m_not_the_problems": ({"M": 2048}, ("M = 2048",)),
    "used_cores_not_the_blocks": (
        {"usedCoreNum": 20, "singleCoreM": 1024, "singleCoreN": 1024, "singleCoreK": 4096},
        ("usedCoreNum", "singleCoreM/N/K"),
    ),
    "preload_against_order": ({"doMTE2Preload": 2, "iterateOrder": 0}, ("doMTE2Preload", "iterateOrder")),
    "split_k_flag_off": (
        {"singleCoreK": 1024, "enableMultiCoreSplitK": False},
        ("enableMultiCoreSplitK", "singleCoreK"),
    ),
    "single_core_k_no_split": ({"singleCoreK": 1000, "baseK": 64}, ("singleCoreK = 1000",)),
    "bias": ({"isBias": 1}, ("isBias",)),
    "transposed_a_for_nn": (
        {"MatmulType": {"A": {"type": "half", "format": "ND", "isTrans": True}}},
        ("MatmulType.A.isTrans",),
    ),
    "field_twice": ({"baseM": 128, "TCubeTiling": {"baseM": 64}}, ("baseM",)),
    "unknown_field": ({"baseMM": 128}, ("baseMM", "baseM")),
}


@pytest.mark.parametrize("name", list(ASCENDC_CONTRADICTIONS))
def test_ascendc_contradictions_are_one_line_errors(name):
    fields, names = ASCENDC_CONTRADICTIONS[name]
    _contradiction(views.ascendc_native, fields, FP16, *names)
