"""Matmul operand layouts (`layout` nn/nt/tn/tt) and B formats (`b_format` nd/nz): parsing, keys, the models'
directions, the bounds, the searches, the sweep and the Triton runner (GPU parts skip without a GPU)."""

from __future__ import annotations

import numpy as np
import pytest
from conftest import CATLASS_DEFAULT, read_only

from tiler.cli import main
from tiler.errors import ProblemError, TilerError
from tiler.hardware import load_chip
from tiler.operator import get_operator
from tiler.ops.matmul import ascend as A
from tiler.ops.matmul import cuda as C
from tiler.ops.matmul import triton_runner as tm
from tiler.problem import parse_problem, parse_shape_text
from tiler.search import enumerate_feasible, search
from tiler.space import load_space, product, take

LAYOUTS = ("nn", "nt", "tn", "tt")


def mm(M, N, K, layout="nn", b_format="nd", dtype="fp16"):
    return parse_problem("matmul", {"M": M, "N": N, "K": K, "layout": layout, "b_format": b_format}, dtype)


@pytest.fixture(scope="module")
def b3():
    return load_chip("ascend910b3")


@pytest.fixture(scope="module")
def h200():
    return load_chip("h200")


def _one(knobs: dict) -> dict:
    return {k: np.array([v], dtype=np.int64) for k, v in knobs.items()}


def _time(chip, p, knobs: dict | None = None) -> float:
    """The estimate of one tiling (Ascend: the CATLASS default with `knobs` changed), or the search's best."""
    model = get_operator("matmul", chip.family)
    if knobs is None:
        return float(search(p, chip, load_space("matmul", chip.family), top=1).row(0)["time_us"])
    cand = _one({**CATLASS_DEFAULT, **knobs} if chip.family == "ascend" else knobs)
    assert all(m[0] for m in model.feasible(p, chip, cand).values())
    return float(model.estimate(p, chip, cand)["time_us"][0])


# --- the problem fields --------------------------------------------------------------------------------------


def test_shape_text_parses_layout_and_b_format():
    p = parse_problem("matmul", parse_shape_text("M=64,N=128,K=256,layout=NT, b_format = nz"))
    assert (p.layout, p.b_format, p.b_transposed, p.a_transposed, p.b_nz) == ("nt", "nz", True, False, True)
    quant = {"scale": "none", "out_dtype": "auto", "b_dtype": "auto", "dequant": "auto"}  # the defaults
    assert p.shape() == {"M": 64, "N": 128, "K": 256, "batch": 1, "layout": "nt", "b_format": "nz", **quant}
    d = parse_problem("matmul", {"M": 64, "N": 128, "K": 256})
    assert (d.layout, d.b_format) == ("nn", "nd") and d == mm(64, 128, 256)


@pytest.mark.parametrize(
    "field, value, message",
    [
        ("layout", "xy", "layout: must be one of nn, nt, tn, tt, got 'xy'"),
        ("layout", 1, "layout: must be one of nn, nt, tn, tt, got 1"),
        ("b_format", "nc1hwc0", "b_format: must be one of nd, nz, got 'nc1hwc0'"),
    ],
)
def test_bad_choice_is_one_problem_error_naming_the_field_and_the_values(field, value, message):
    with pytest.raises(ProblemError) as err:
        parse_problem("matmul", {"M": 8, "N": 8, "K": 8, field: value})
    assert str(err.value) == message


@pytest.mark.parametrize(
    "chip, shape, needle",
    [
        ("ascend910b3", "M=64,N=64,K=64,layout=xy", "layout: must be one of nn, nt, tn, tt, got 'xy'"),
        ("h200", "M=64,N=64,K=64,b_format=zz", "b_format: must be one of nd, nz"),
        (
            "h200",
            "M=64,N=64,K=64,b_format=nz",
            "b_format: nz is an Ascend (NZ fractal) format; the cuda family takes nd",
        ),
    ],
)
def test_cli_exit_2_with_one_line(chip, shape, needle, capsys):
    code = main(["search", "--op", "matmul", "--chip", chip, "--shape", shape])
    err = capsys.readouterr().err.strip().splitlines()
    assert code == 2 and len(err) == 1 and needle in err[0] and "Traceback" not in err[0], err


def test_nz_is_an_ascend_format(h200, b3):
    """The cuda operator refuses NZ before any search; the Ascend one takes it."""
    with pytest.raises(ProblemError, match="b_format: nz is an Ascend"):
        get_operator("matmul", "cuda").check(mm(64, 64, 64, b_format="nz"), h200)
    get_operator("matmul", "ascend").check(mm(64, 64, 64, "tt", "nz"), b3)


def test_keys_and_labels_of_default_problems_are_unchanged():
    p = mm(4096, 4096, 4096)
    assert p.key() == "matmul:M=4096,N=4096,K=4096,batch=1:fp16" and p.label() == "4096x4096x4096"
    batch = parse_problem("matmul", {"M": 8, "N": 8, "K": 8, "batch": 4}, "bf16")
    assert batch.label() == "8x8x8_batch4:bf16" and batch.key() == "matmul:M=8,N=8,K=8,batch=4:bf16"


def test_non_default_layouts_appear_in_keys_and_labels():
    nt = mm(4096, 4096, 4096, "nt")
    assert nt.label() == "4096x4096x4096_layoutnt"
    assert nt.key() == "matmul:M=4096,N=4096,K=4096,batch=1,layout=nt:fp16"
    tnz = mm(64, 32, 16, "tn", "nz", "int8")
    assert tnz.label() == "64x32x16_layouttn_b_formatnz:int8"
    assert tnz.key() == "matmul:M=64,N=32,K=16,batch=1,layout=tn,b_format=nz:int8"
    keys = {mm(64, 32, 16, lay, bf).key() for lay in LAYOUTS for bf in ("nd", "nz")}
    labels = {mm(64, 32, 16, lay, bf).label() for lay in LAYOUTS for bf in ("nd", "nz")}
    assert len(keys) == len(labels) == 8


def test_to_dict_layout_is_meaningful_and_stable_for_depthwise():
    assert mm(8, 8, 8, "tn").to_dict() == {
        "shape": {
            "M": 8,
            "N": 8,
            "K": 8,
            "batch": 1,
            "layout": "tn",
            "b_format": "nd",
            "scale": "none",
            "out_dtype": "auto",
            "b_dtype": "auto",
            "dequant": "auto",
        },
        "dtype": "fp16",
        "layout": "tn",
    }
    dw = parse_problem("depthwise_conv", {"N": 1, "C": 16, "H": 8, "W": 8, "kh": 3, "kw": 3})
    assert dw.to_dict()["layout"] == "nchw"


# --- Ascend --------------------------------------------------------------------------------------------------


def test_ascend_row_strides_and_contiguous_axes():
    """A `n` rows run along K (stride K), `t` along M (stride M); B `n` along N (stride N), `t` along K."""
    assert A._row_strides(mm(100, 200, 300, "nn")) == (600, 400)
    assert A._row_strides(mm(100, 200, 300, "tt")) == (200, 600)
    assert A._row_strides(mm(100, 200, 300, "tn")) == (200, 400)


def test_transposed_b_is_faster_when_k_rows_are_burst_aligned_and_n_rows_are_not(b3):
    """K*2 = 8192 B is a multiple of the 512-B burst, N*2 = 8000 B only of 32 B: a B-heavy shape (M = 128) moves
    B at the misaligned-stride rate as K x N (nn) and at full rate as N x K (nt). A toy roofline sees the same
    bytes either way."""
    nn, nt = mm(128, 4000, 4096, "nn"), mm(128, 4000, 4096, "nt")
    assert _time(b3, nt) < 0.9 * _time(b3, nn)
    assert _time(b3, nt, {}) < _time(b3, nn, {})
    # and A: rows along M (tn) with M*2 = 8000 B misaligned, an A-heavy shape, is slower than along K
    assert _time(b3, mm(4000, 128, 4096, "tn")) > 1.1 * _time(b3, mm(4000, 128, 4096, "nn"))


@pytest.mark.parametrize("layout", LAYOUTS)
def test_nz_b_is_never_slower_and_strictly_faster_when_the_nd_stride_is_misaligned(b3, layout):
    """NZ moves whole 512-B fractals at full rate (no ND->NZ conversion on the way in): at least as fast as ND
    for every tiling, strictly where B's ND row stride is not burst-aligned (N = 4000 for nn, K = 1000 for nt)."""
    model = get_operator("matmul", "ascend")
    space = load_space("matmul", "ascend")
    for M, N, K, misaligned in ((512, 4096, 4096, False), (512, 4000, 1000, True)):
        nd, nz = mm(M, N, K, layout, "nd"), mm(M, N, K, layout, "nz")
        table, _, _ = enumerate_feasible(nd, b3, space, model)
        rows = take(table, np.random.default_rng(1).choice(len(table["base_m"]), 300, replace=False))
        rows = product(rows, _one({k: CATLASS_DEFAULT[k] for k in model.SCHEDULE_KNOBS}))
        t_nd, t_nz = (model.estimate(q, b3, rows)["time_us"] for q in (nd, nz))
        assert np.all(t_nz <= t_nd * (1 + 1e-12))
        if misaligned:
            assert np.all(t_nz < t_nd) and _time(b3, nz) < 0.95 * _time(b3, nd)


def test_nz_moves_whole_fractals(b3):
    """An NZ B panel is padded to whole 16 x C0 fractals: K = 1000 moves 1008 rows (B `n`), N = 100 with int8
    (C0 = 32) 128 columns; the padded bytes show in the L2 traffic."""
    assert A._b_elems(mm(8, 100, 1000, "nn", "nz"), 100, 1000) == 112 * 1008
    assert A._b_elems(mm(8, 100, 1000, "nn", "nz", "int8"), 100, 1000) == 128 * 1008
    assert A._b_elems(mm(8, 100, 1000, "nt", "nz", "int8"), 100, 1000) == 112 * 1024
    assert A._b_elems(mm(8, 100, 1000, "nt", "nd"), 100, 1000) == 100 * 1000


def test_l1_sizes_follow_tcube_tiling_per_layout():
    """AL1 pads base_m to C0 only when A is transposed; BL1 pads base_n to C0 only when B is not (int8: C0 = 32,
    so a 16-wide block takes 32 there)."""
    c = {k: np.array([v]) for k, v in CATLASS_DEFAULT.items()}
    c.update(base_m=np.array([16]), base_n=np.array([16]), base_k=np.array([32]), l1_stages=np.array([1]))
    c.update(step_m=np.array([1]), step_n=np.array([1]), step_ka=np.array([1]), step_kb=np.array([1]))
    c["weight_resident"] = np.array([0])
    kc = np.array([4096])
    size = {lay: int(A._l1_bytes(mm(64, 64, 4096, lay, dtype="int8"), c, kc)[0]) for lay in LAYOUTS}
    a_n, a_t, b_n, b_t = 16 * 32, 32 * 32, 32 * 32, 16 * 32
    assert size == {"nn": a_n + b_n, "nt": a_n + b_t, "tn": a_t + b_n, "tt": a_t + b_t}
    assert len({int(A._l1_bytes(mm(64, 64, 4096, lay), c, kc)[0]) for lay in LAYOUTS}) == 1  # fp16: C0 = 16


@pytest.mark.parametrize(
    "chip_id, dtype", [("ascend910b3", "fp16"), ("ascend910b3", "int8"), ("ascend310p3", "fp16")]
)
@pytest.mark.parametrize("shape", [(17, 999, 333), (128, 4000, 4096), (3000, 200, 64)])
def test_bounds_stay_below_the_best_schedule_for_every_layout(chip_id, dtype, shape):
    """quick_bound and bound <= the exact time of the best schedule, prefix_bound <= quick_bound, under every
    layout and B format (the floors take each operand's contiguous axis, and NZ's full rate)."""
    chip = load_chip(chip_id)
    model = get_operator("matmul", "ascend")
    space = load_space("matmul", "ascend")
    for layout in LAYOUTS:
        for b_format in ("nd", "nz"):
            p = mm(*shape, layout, b_format, dtype)
            table, _, _ = enumerate_feasible(p, chip, space, model)
            rng = np.random.default_rng(sum(shape))
            rows = take(table, rng.choice(len(table["base_m"]), min(60, len(table["base_m"])), replace=False))
            exact = model.estimate(p, chip, product(rows, space.product(list(model.SCHEDULE_KNOBS))))[
                "time_us"
            ]
            best = exact.reshape(len(rows["base_m"]), -1).min(axis=1)
            quick = model.quick_bound(p, chip, rows)
            assert np.all(quick <= best * (1 + 1e-9)), (layout, b_format)
            assert np.all(model.bound(p, chip, rows) <= best * (1 + 1e-9)), (layout, b_format)
            prefix = model.prefix_bound(p, chip, {k: rows[k] for k in model.LEVELS[0]}, space.domains())
            assert np.all(prefix <= quick * (1 + 1e-9)), (layout, b_format)


def test_segment_ceiling_is_the_best_segment_of_any_shorter_row():
    x = np.arange(1, 1200)
    seg = A.segment_efficiency(x)
    best = np.maximum.accumulate(seg)
    assert np.allclose(A._segment_ceiling(x), best)
    assert np.array_equal(A._segment_ceiling(x[x % 32 == 0]), seg[x % 32 == 0])


@pytest.fixture(scope="module")
def small_space():
    """A small Ascend space and every point of it (4.7 M rows: built once for the module, not once per problem;
    read-only: the model reads candidates, never writes them)."""
    from dataclasses import replace

    base = load_space("matmul", "ascend")
    small = {"base_m": [16, 64, 128], "base_n": [32, 128, 256], "base_k": [32, 64], "step_ka": [1, 4],
             "step_kb": [1, 2], "swizzle_offset": [1, 3], "split_k": [1, 4]}  # fmt: skip
    knobs = {k: replace(kn, values=tuple(small[k])) if k in small else kn for k, kn in base.knobs.items()}
    space = replace(base, knobs=knobs)
    return space, read_only(space.product(space.names))


@pytest.mark.slow
@pytest.mark.parametrize("layout", ["nt", "tn", "tt"])
def test_ascend_search_equals_brute_force_on_a_small_space_for_every_layout(b3, small_space, layout):
    """The pruning (bounds, prefix floors, twins) stays exact under another layout and NZ."""
    space, cand = small_space
    model = get_operator("matmul", "ascend")
    for p in (mm(1000, 300, 4096, layout), mm(256, 520, 1000, layout, "nz")):
        ok = np.logical_and.reduce(list(model.feasible(p, b3, cand).values()))
        best = float(model.estimate(p, b3, take(cand, ok))["time_us"].min())
        res = search(p, b3, space)
        assert res.proven_optimal and res.row(0)["time_us"] == pytest.approx(best, rel=1e-9)


# --- CUDA ----------------------------------------------------------------------------------------------------


def test_cuda_contiguous_axes_decide_the_load_path(h200):
    """A `t` is contiguous along M, B `t` along K: an odd M misaligns tn, an odd K misaligns nn (A) and nt
    (both), an odd N misaligns only row-major B (and C)."""
    assert C.contiguous_lengths(mm(1001, 4096, 2048, "tn")) == (1001, 4096)
    assert C.contiguous_lengths(mm(1001, 4096, 2048, "nt")) == (2048, 2048)
    cand = _one(
        dict(BLOCK_M=128, BLOCK_N=128, BLOCK_K=64, num_stages=3, num_warps=8, GROUP_M=8, ORDER=1, SPLIT_K=1)
    )

    def unaligned(p):
        g = C.prepare(p, h200, cand)
        return int(g["unal_a"][0]), int(g["unal_b"][0]), int(g["unal_c"][0])

    assert unaligned(mm(1001, 4096, 4096, "nn")) == (0, 0, 0)
    assert unaligned(mm(1001, 4096, 4096, "tn")) == (1, 0, 0)
    assert unaligned(mm(4096, 4096, 1001, "nn")) == (1, 0, 0)
    assert unaligned(mm(4096, 4096, 1001, "tn")) == (0, 0, 0)
    assert unaligned(mm(4096, 4096, 1001, "nt")) == (1, 1, 0)
    assert unaligned(mm(4096, 1001, 4096, "nt")) == (0, 0, 1)
    assert C.synchronous_loads(mm(1001, 64, 64, "tn")) and not C.synchronous_loads(mm(1001, 64, 64, "nn"))


def test_h200_layout_whose_contiguous_axis_is_odd_is_slower(h200):
    """The model's best tiling of the pointer kernel (the kernel measured), per layout: an odd contiguous axis
    (1-element synchronous loads) costs several times the aligned one. Measured on the H200
    (bench/data/h200_matmul_layouts.csv), best of the measured tilings: 1001x4096x4096 nn 49.8 us, tn 140 us;
    4096x4096x1001 tn 60.0 us, nn 134 us; 4096x1001x4096 nt 67.2 us, nn 198 us. (The TMA templates stage such an
    operand instead: test_matmul_templates.)"""
    space = load_space("matmul", "cuda").pin({"TEMPLATE": "pointer"})

    def best(p):
        return float(search(p, h200, space, top=1).row(0)["time_us"])

    assert best(mm(1001, 4096, 4096, "tn")) > 2 * best(mm(1001, 4096, 4096, "nn"))
    assert best(mm(4096, 4096, 1001, "nn")) > 2 * best(mm(4096, 4096, 1001, "tn"))
    assert best(mm(4096, 1001, 4096, "nn")) > 2 * best(mm(4096, 1001, 4096, "nt"))


def test_h200_short_transposed_rows_cost_line_slots(h200):
    """B `t` tile rows are BLOCK_K elements: with BLOCK_K = 16 fp16 each is a 32-B quarter line, so a tile of
    B^T takes 4x the fill-port slots of B's 512-B rows (measured 512x11008x4096, 64x256x16 s7 w4: nn 98.9 us,
    nt 179 us)."""
    knobs = dict(
        BLOCK_M=64, BLOCK_N=256, BLOCK_K=16, num_stages=7, num_warps=4, GROUP_M=8, ORDER=1, SPLIT_K=1
    )
    g = {lay: C.prepare(mm(512, 11008, 4096, lay), h200, _one(knobs)) for lay in ("nn", "nt")}
    assert g["nt"]["b_lines"][0] == 4 * g["nn"]["b_lines"][0]
    assert _time(h200, mm(512, 11008, 4096, "nt"), knobs) > 1.2 * _time(
        h200, mm(512, 11008, 4096, "nn"), knobs
    )


@pytest.mark.parametrize("layout", LAYOUTS)
def test_search_runs_for_every_layout(b3, h200, layout):
    for chip in (b3, h200):
        res = search(mm(1000, 768, 512, layout), chip, load_space("matmul", chip.family), top=2)
        assert res.row(0)["time_us"] > 0 and res.row(0)["time_us"] >= res.row(0)["roofline_us"]
    assert search(mm(1000, 768, 512, layout, "nz"), b3, load_space("matmul", "ascend")).proven_optimal


# --- sweep, library, rank ------------------------------------------------------------------------------------


def test_sweep_csv_with_layout_columns(tmp_path):
    """A layout and a b_format column: every layout is its own problem (key), an empty cell is the default, an
    NZ row fails on the cuda chip only (one line naming the field), and the libraries look layouts up exactly."""
    import pandas as pd

    from tiler.library import load
    from tiler.sweep import run_sweep

    csv = tmp_path / "s.csv"
    csv.write_text(
        "M,N,K,layout,b_format\n512,1024,1024,,\n512,1024,1024,nt,\n512,1024,1024,tn,nd\n512,1024,1024,nt,nz\n"
    )
    fast = ["base_m=64", "base_n=128", "base_k=64", "step_m=1", "step_n=1", "step_ka=4", "step_kb=4"]
    out = tmp_path / "o.csv"
    lib = tmp_path / "lib.json"
    report = run_sweep(str(csv), "matmul", "ascend910b3,h200", out, library=lib, fix=fast)
    df = pd.read_csv(out, keep_default_na=False)
    assert report.failed == 1
    bad = df[df.status == "error"]
    assert list(bad.chip) == ["h200"] and "b_format: nz is an Ascend" in bad.error.iloc[0]
    assert df[df.chip == "ascend910b3"].key.nunique() == 4
    asc = load(tmp_path / "lib.ascend910b3.json")
    assert len(asc) == 4
    hit = asc.lookup("M=512,N=1024,K=1024,layout=nt")
    assert hit["exact"] and hit["problem"]["shape"]["layout"] == "nt" and hit["problem"]["layout"] == "nt"
    near = asc.lookup("M=500,N=1000,K=1000,layout=tn")
    assert not near["exact"] and near["problem"]["shape"]["layout"] == "tn"
    assert asc.lookup({"M": 500, "N": 1000, "K": 1000})["problem"]["shape"]["layout"] == "nn"
    gpu = load(tmp_path / "lib.h200.json")
    with pytest.raises(LookupError, match="b_format: no fp16 entry with b_format=nz"):
        gpu.lookup("M=500,N=1000,K=1000,layout=nt,b_format=nz")
    with pytest.raises(LookupError, match="layout: no fp16 entry with layout=tt"):
        gpu.lookup("M=512,N=1024,K=1024,layout=tt")


def test_library_entries_written_before_the_fields_count_as_defaults():
    """An entry whose shape has no layout (written before the field existed) matches nn/nd queries only."""
    from tiler.library import Library

    old = {"key": "matmul:M=64,N=64,K=64,batch=1:fp16", "tiling": {}, "estimate": {}}
    old["problem"] = {
        "shape": {"M": 64, "N": 64, "K": 64, "batch": 1},
        "dtype": "fp16",
        "layout": "row_major",
    }
    lib = Library("matmul", {}, [old])
    assert lib.lookup("M=64,N=64,K=64")["exact"]
    assert not lib.lookup("M=60,N=64,K=64")["exact"]
    with pytest.raises(LookupError, match="layout"):
        lib.lookup("M=60,N=64,K=64,layout=nt")
    assert lib.problem(old["problem"]) == mm(64, 64, 64)


def test_rank_selects_rows_of_the_problem_layout():
    import pandas as pd

    from tiler.rank import select_rows

    df = pd.DataFrame({"M": [64] * 4, "N": [64] * 4, "K": [64] * 4, "layout": ["nn", "nt", "", "NT"]})
    assert list(select_rows(mm(64, 64, 64, "nt"), df)["row"]) == [2, 4]
    assert list(select_rows(mm(64, 64, 64), df)["row"]) == [1, 3]


def test_export_of_a_layout_validates_against_the_shipped_schema(b3):
    """problem.shape carries the words of the choice fields; problem.layout the matmul layout."""
    from tiler.export import tiling_document, validate

    p = mm(256, 256, 256, "tt", "nz")
    res = search(p, b3, load_space("matmul", "ascend"), top=1)
    doc = tiling_document(p, b3, res.tiling(0), res.row(0))
    validate(doc)
    assert doc["problem"]["shape"]["layout"] == "tt" and doc["problem"]["shape"]["b_format"] == "nz"
    assert doc["problem"]["layout"] == "tt"
    doc["problem"]["shape"]["layout"] = "T T"
    with pytest.raises(TilerError):
        validate(doc)


# --- the Triton runner ---------------------------------------------------------------------------------------


def test_runner_strides_and_layout_checks():
    assert tm.layout_strides(10, 20, 30, "nn") == (30, 1, 20, 1)
    assert tm.layout_strides(10, 20, 30, "nt") == (30, 1, 1, 30)
    assert tm.layout_strides(10, 20, 30, "tn") == (1, 10, 20, 1)
    assert tm.layout_strides(10, 20, 30, "TT") == (1, 10, 1, 30)
    with pytest.raises(TilerError, match="layout: must be one of nn, nt, tn, tt"):
        tm.check_layout("xy")
    doc = {"problem": {"shape": {"M": 8, "N": 8, "K": 8, "layout": "tn"}}}
    assert tm.layout_from_doc(doc) == "tn" and tm.layout_from_doc({"problem": {"shape": {}}}) == "nn"
    with pytest.raises(TilerError, match="b_format"):
        tm.layout_from_doc({"problem": {"shape": {"b_format": "nz"}}})


@pytest.mark.parametrize("layout", LAYOUTS)
def test_runner_every_layout_matches_torch_on_the_gpu(torch, layout):
    """Operands stored as the layout says, passed as transposed views (stride 1 along the stored rows); the
    result matches torch for aligned and misaligned shapes, with and without split-K."""
    cfg = dict(BLOCK_M=64, BLOCK_N=64, BLOCK_K=32, num_stages=3, num_warps=4, GROUP_M=4, ORDER=1, SPLIT_K=1)
    for M, N, K in ((256, 384, 512), (1001, 200, 77)):
        p = tm.Problem(M, N, K, layout=layout)
        want_a = (1, M) if layout[0] == "t" else (K, 1)
        want_b = (1, K) if layout[1] == "t" else (N, 1)
        assert (p.a.stride(), p.b.stride()) == (want_a, want_b)
        for sk in (1, 3):
            fn, out = tm._plan(p.a, p.b, dict(cfg, SPLIT_K=sk))
            out.fill_(float("nan"))
            fn()
            torch.cuda.synchronize()
            assert p.rel_err(out) <= tm.MAX_REL_ERR
