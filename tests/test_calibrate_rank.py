"""rank_candidates on measured tables; calibrate and write_profile."""

from __future__ import annotations

import math
import tomllib
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from tiler.calibrate import calibrate, load_measurements, replace_section, shape_quality, write_profile
from tiler.errors import TilerError
from tiler.hardware import load_chip, load_profile
from tiler.ops.matmul import Matmul
from tiler.ops.matmul import cuda as mc
from tiler.rank import rank_candidates

ROOT = Path(__file__).resolve().parent.parent
DATA = ROOT / "tests" / "data" / "h200_matmul_cal.csv"


@pytest.fixture(scope="module")
def data():
    # the pointer kernel's measurements (before the templates): TEMPLATE 0 and TAIL_SPLIT 1 on the Triton rows
    d = pd.read_csv(DATA)
    triton = d.impl == "triton"
    return d.assign(TEMPLATE=np.where(triton, 0, np.nan), TAIL_SPLIT=np.where(triton, 1, np.nan))


@pytest.fixture(scope="module")
def chip():
    return load_chip("h200")


@pytest.fixture(scope="module")
def raw_chip(chip):
    """The h200 profile with the model's uncalibrated defaults in place of any fitted constant."""
    return chip.with_values({k: mc.DEFAULTS[k] for k in mc.FITTABLE}, tag="estimated", source="model default")


# ---------------------------------------------------------------- rank
def test_rank_the_shared_csv(chip, data):
    ranked, rejected = rank_candidates(Matmul(4096, 4096, 4096), chip, data)
    assert len(rejected) == 0
    assert len(ranked) == 104  # the triton rows of that shape; torch rows and other shapes are ignored
    assert (ranked["impl"] == "triton").all() and (ranked["M"] == 4096).all()
    assert ranked["rank"].min() == 1 and ranked["rank"].is_monotonic_increasing
    assert ranked["predicted_us"].is_monotonic_increasing
    assert {"row", "ms", "source", "bound"} <= set(ranked.columns)
    # row numbers count data rows from 1 in file order: row r is line r + 1 of the CSV
    r = ranked.iloc[0]
    assert data.iloc[int(r["row"]) - 1]["ms"] == r["ms"]
    # ranking quality on a measured shape
    q = shape_quality(ranked["predicted_us"].to_numpy(), ranked["ms"].to_numpy())
    assert q["spearman"] > 0.7 and q["top4"] > 0.9


def test_rank_without_shape_columns_takes_every_row(chip):
    df = pd.DataFrame(
        {
            "BLOCK_M": [128, 64],
            "BLOCK_N": [128, 64],
            "BLOCK_K": [64, 32],
            "num_stages": [3, 4],
            "num_warps": [8, 4],
            "GROUP_M": [8, 8],
            "ORDER": ["grouped", 1],
            "SPLIT_K": [1, 1],
            "note": ["a", "b"],
        }
    )
    ranked, rejected = rank_candidates(Matmul(2048, 2048, 2048), chip, df)
    assert len(ranked) == 2 and len(rejected) == 0
    assert sorted(ranked["rank"]) == [1, 2] and "note" in ranked.columns


def test_rank_of_a_file_with_no_row_for_the_problem_says_so(chip, data):
    """A file whose rows are all for other shapes (or are cuBLAS rows) is an error naming the shapes it holds, not
    an empty ranking that reads like "nothing feasible"."""
    with pytest.raises(
        TilerError, match=r"none of the \d+ rows is a triton tiling for 4096x4096x4097.*M=\d+"
    ):
        rank_candidates(Matmul(4096, 4096, 4097), chip, data)
    torch_only = data[data.impl != "triton"]
    with pytest.raises(TilerError, match="none of the"):
        rank_candidates(Matmul(4096, 4096, 4096), chip, torch_only)


def test_cli_rank_notes_the_rows_it_skipped(tmp_path):
    from click.testing import CliRunner

    from tiler.cli import cli

    shape = "M=4096,N=4096,K=4096"
    res = CliRunner().invoke(
        cli,
        [
            "rank",
            "--op",
            "matmul",
            "--chip",
            "h200",
            "--shape",
            shape,
            "--candidates",
            str(DATA),
            "--top",
            "1",
        ],
    )
    assert res.exit_code == 0, res.output
    df = pd.read_csv(DATA)
    mine = ((df.M == 4096) & (df.N == 4096) & (df.K == 4096) & (df.impl == "triton")).sum()
    assert f"note: {len(df) - mine} of {len(df)} rows skipped" in res.stderr


def test_rank_reports_infeasible_and_out_of_domain_rows(chip, data):
    df = data[(data.M == 1024) & (data.N == 1024) & (data.K == 1024)].copy().reset_index(drop=True)
    df.loc[3, ["BLOCK_M", "BLOCK_N", "BLOCK_K", "num_stages"]] = [256, 256, 128, 4]  # 512 KiB of stages
    df.loc[5, "ORDER"] = 5
    df.loc[7, "BLOCK_M"] = 48  # open knob, but not a power of two
    ranked, rejected = rank_candidates(Matmul(1024, 1024, 1024), chip, df)
    assert len(ranked) == len(df) - 3 - (df.impl != "triton").sum()
    got = dict(zip(rejected["row"], rejected["rule"], strict=True))
    assert got == {4: "smem", 6: "domain", 8: "pow2"}
    assert "ORDER" in rejected.set_index("row").loc[6, "reason"]


def test_rank_rejects_malformed_tables_with_the_row_and_column(chip, data):
    df = data.copy()
    df["BLOCK_K"] = df["BLOCK_K"].astype(object)
    df.loc[10, "BLOCK_K"] = "sixty-four"
    with pytest.raises(TilerError, match=r"row 11: column 'BLOCK_K'"):
        rank_candidates(Matmul(16, 4096, 4096), chip, df)
    # a missing knob column of a table of tilings is completed per row with the model's best choice
    # (tiler.search.complete); in a measured table it is an error naming the knob and the flag (num_warps has no
    # default: every kernel has warps), since the model's choice would change what was measured
    ranked, _ = rank_candidates(Matmul(16, 4096, 4096), chip, data.drop(columns=["num_warps", "ms"]))
    assert set(ranked["completed"]) == {"num_warps"} and ranked["num_warps"].notna().all()
    with pytest.raises(TilerError, match=r"^--candidates: missing column 'num_warps'"):
        rank_candidates(Matmul(16, 4096, 4096), chip, data.drop(columns=["num_warps"]))
    # an empty knob on a triton row is malformed too (torch rows have empty knobs and are skipped)
    df = data.copy()
    df.loc[2, "SPLIT_K"] = np.nan
    with pytest.raises(TilerError, match=r"row 3: column 'SPLIT_K'"):
        rank_candidates(Matmul(16, 4096, 4096), chip, df)
    # other shapes are not read: the bad cell is in a 16x4096x4096 row, so 128x6144x4096 ranks all its triton rows
    ranked, rejected = rank_candidates(Matmul(128, 6144, 4096), chip, df)
    assert len(ranked) == 104 and len(rejected) == 0
    assert (ranked["M"] == 128).all() and (ranked["N"] == 6144).all() and (ranked["K"] == 4096).all()


# ---------------------------------------------------------------- calibrate
FIT = ["1024x1024x1024", "512x512x32768", "4096x4096x4096", "16x4096x4096", "896x2432x4096"]
HELD = ["2048x4096x4096", "256x8192x8192", "640x3328x2048", "3072x768x3072"]


def test_calibration_on_a_fold_improves_held_out_error(raw_chip, data):
    res = calibrate(
        raw_chip, "matmul", data, folds=0, fit_shapes=FIT, data_name="h200_matmul_cal.csv", date="2026-11-30"
    )
    held = load_measurements(raw_chip, "matmul", data).take(HELD)
    start = mc.efficiency(raw_chip)
    after = dict(start, **res.values)
    t0 = mc.timing(held.prepared, raw_chip, start)["time_us"] * 1e-6
    t1 = mc.timing(held.prepared, raw_chip, after)["time_us"] * 1e-6
    err0 = np.median(np.abs(np.log(t0 / held.seconds)))
    err1 = np.median(np.abs(np.log(t1 / held.seconds)))
    assert err1 < 0.8 * err0, (err0, err1)
    # fitted values carry their tag and a source naming the data, its shapes and the date
    assert set(res.values) == set(mc.FITTABLE)
    k = "latency_scale"
    assert res.chip.tags[k] == "fitted"
    assert "h200_matmul_cal.csv" in res.chip.sources[k] and "1024x1024x1024" in res.chip.sources[k]
    assert "2026-11-30" in res.chip.sources[k]
    # every fitted constant stays inside its physical box
    for name, v in res.values.items():
        lo, hi = mc.FITTABLE[name]
        assert lo * 0.999 <= v <= hi * 1.001


def test_kfold_by_shape_reports_held_out_quality(raw_chip, data):
    """Held out by shape, the fitted model predicts closer and ranks better than the defaults, and its pick is far
    better than a typical tiling (the median row's best/measured, computed here from the measurements)."""
    shapes = FIT + HELD
    res = calibrate(raw_chip, "matmul", data, folds=3, seed=1, fit_shapes=shapes)
    assert sorted(res.folds["shape"]) == sorted(shapes)  # every shape held out exactly once
    m = res.metrics
    assert m["cv_error_after"] < m["cv_error_before"]
    assert m["cv_spearman"] > max(m["cv_spearman_before"], 0.8)
    # the reported geomean is that of the per-shape held-out top-1 rows
    assert m["cv_top1_geomean"] == pytest.approx(np.exp(np.log(res.folds["top1"]).mean()))
    meas = load_measurements(raw_chip, "matmul", data).take(shapes)
    typical = []
    for i in range(len(meas.shapes)):
        sec = meas.seconds[meas.shape_of == i]
        typical.append(np.median(sec.min() / sec))
    baseline = float(np.exp(np.log(typical).mean()))  # ~0.57 on this data
    assert baseline < 0.75 and m["cv_top1_geomean"] > 0.9, (baseline, m["cv_top1_geomean"])
    assert "k-fold" in res.summary()
    # the held-out agreement figures (tiler.agreement) are the same per-shape figures, as regrets
    after = res.agreement["after"]
    assert after.problems == len(shapes) and after.spearman == pytest.approx(m["cv_spearman"])
    assert after.top1_regret == pytest.approx(1 / m["cv_top1_geomean"])
    assert after.best_of_k[4] == pytest.approx(1 / m["cv_top4_geomean"])
    assert after.worst_top1_regret == pytest.approx(1 / m["cv_top1_min"])
    assert after.median_abs_log_error == pytest.approx(m["cv_error_after"])
    assert res.agreement["before"].spearman == pytest.approx(m["cv_spearman_before"])
    assert "held-out agreement" in res.summary() and "best-of-k regret (k=1..8)" in res.summary()


def test_calibrate_rejects_bad_input(raw_chip, data):
    with pytest.raises(TilerError, match="no time column"):
        calibrate(raw_chip, "matmul", data.drop(columns=["ms"]), folds=0)
    with pytest.raises(TilerError, match="no measured rows for shape"):
        calibrate(raw_chip, "matmul", data, folds=0, fit_shapes=["7x7x7"])
    with pytest.raises(TilerError, match="cannot fit"):
        calibrate(raw_chip, "matmul", data, folds=0, params=["cores"])


def test_write_profile_keeps_the_file_and_rewrites_efficiency(raw_chip, data, tmp_path):
    res = calibrate(
        raw_chip,
        "matmul",
        data,
        folds=0,
        fit_shapes=["1024x1024x1024", "512x512x32768"],
        data_name="h200_matmul_cal.csv",
        date="2026-11-30",
    )
    path = tmp_path / "h200.toml"
    path.write_text((ROOT / "hardware" / "h200.toml").read_text())
    write_profile(res, path)
    text = path.read_text()
    assert text.startswith("# NVIDIA H200")  # comments and layout of the existing profile survive
    back = load_profile(path)
    for k, v in res.values.items():
        assert back[k] == pytest.approx(v) and back.tags[k] == "fitted"
    assert back["cores"] == 132 and back.tags["cores"] == "confirmed"
    raw = tomllib.loads(text)
    assert raw["efficiency"]["latency_scale"]["tag"] == "fitted"
    # a new file is written whole from the schema
    new = tmp_path / "sub" / "other.toml"
    write_profile(res, new)
    assert load_profile(new)["latency_scale"] == pytest.approx(res.values["latency_scale"])


def test_replace_section_appends_when_missing():
    out = replace_section('id = "x"\n[compute]\na = 1\n', "efficiency", ["b = 2"])
    assert out.endswith("[efficiency]\nb = 2\n")
    out2 = replace_section(out, "efficiency", ["c = 3"])
    assert "b = 2" not in out2 and out2.endswith("[efficiency]\nc = 3\n")
    out3 = replace_section("[efficiency]\nold = 1\n[overhead]\nz = 1\n", "efficiency", ["n = 2"])
    assert out3 == "[efficiency]\nn = 2\n\n[overhead]\nz = 1\n"


def test_shipped_h200_profile_is_calibrated_on_part_of_the_shared_data(chip):
    """Every fitted constant of the shipped profile is one an operator declares, fitted on measured data with
    part of it held out: matmul's on the shared matmul data, depthwise_conv's on the depthwise runs, flash attention's
    on the shared attention table."""
    from tiler.ops.depthwise_conv import cuda as dw
    from tiler.ops.flash_attention import cuda as fa
    from tiler.ops.softmax import cuda as sm

    fitted = [k for k, t in chip.tags.items() if t == "fitted"]
    assert set(fitted) == set(mc.FITTABLE) | set(mc.TIE_KEYS) | set(dw.FITTABLE) | set(fa.FITTABLE) | set(
        sm.FITTABLE
    )
    src = chip.sources["mma_efficiency_v3"]
    assert "h200_matmul_cal.csv" in src and "held out" in src
    src = chip.sources["dw_tap_lanes"]
    assert "h200_dwconv.csv" in src and "held out" in src
    src = chip.sources["fa_softmax_lanes"]
    assert "h200_fa_cal.csv" in src and "held out" in src
    src = chip.sources["sm_exp_lanes"]
    assert "h200_softmax.csv" in src and "held out" in src


# ---------------------------------------------------------------- launch order of exact ties
def _order_table(fast_code: int, shapes=("2048x2048x2048", "4096x2048x1024")) -> pd.DataFrame:
    """Measured-looking rows: each tiling in five orders, the order `fast_code` 10% faster than the others.

    Orders never change the model's prediction on these shapes (every panel fits L2), so every tiling is one
    group of exact ties."""
    rows = []
    tilings = [
        (128, 128, 64, 4, 8),
        (128, 256, 64, 3, 8),
        (64, 128, 64, 4, 4),
        (128, 64, 32, 4, 4),
        (64, 64, 64, 4, 4),
    ]
    orders = [(1, 0), (1, 2), (4, 1), (8, 1), (16, 1)]  # (GROUP_M, ORDER)
    for s in shapes:
        m, n, k = (int(x) for x in s.split("x"))
        for bm, bn, bk, st, w in tilings:
            for gm, order in orders:
                code = -1 if order == 2 else (gm if order == 1 and gm > 1 else 0)
                ms = 0.1 * (0.9 if code == fast_code else 1.0) * (1 + bm / 1000 + bn / 3000)
                rows.append(
                    dict(
                        M=m,
                        N=n,
                        K=k,
                        BLOCK_M=bm,
                        BLOCK_N=bn,
                        BLOCK_K=bk,
                        num_stages=st,
                        num_warps=w,
                        GROUP_M=gm,
                        ORDER=order,
                        SPLIT_K=1,
                        impl="triton",
                        ms=ms,
                    )
                )
    return pd.DataFrame(rows)


@pytest.mark.parametrize("fast", [8, 0, -1])
def test_calibrate_chooses_the_order_measured_fastest_among_ties(raw_chip, fast):
    res = calibrate(raw_chip, "matmul", _order_table(fast), folds=0, params=["latency_scale"])
    tie = {t.key: t for t in res.choices}
    assert tie["tie_order_async"].code == fast  # these shapes are 16-B aligned
    assert tie["tie_order_async"].score[fast] == pytest.approx(1.0)
    assert res.chip["tie_order_async"] == fast and res.chip.tags["tie_order_async"] == "fitted"
    # no misaligned rows: the synchronous path keeps the profile's value
    assert tie["tie_order_sync"].code == tie["tie_order_sync"].was and tie["tie_order_sync"].groups == 0
    assert "tie_order_async" in res.summary()


def test_the_search_and_rank_report_the_preferred_order_of_a_tie(chip):
    from tiler.operator import get_operator
    from tiler.search import search
    from tiler.space import load_space

    space = load_space("matmul", "cuda")
    p = Matmul(2048, 2048, 2048)
    pref_async = int(chip["tie_order_async"])
    for want in {0, 8, pref_async}:
        c = chip.with_values({"tie_order_async": float(want)}, source="test")
        best = search(p, c, space, top=1).tiling(0)
        got = 0 if best["ORDER"] == "row" else -1 if best["ORDER"] == "serpentine" else int(best["GROUP_M"])
        assert got == want, (want, best)
    # rank: the tied rows come back with the preferred order first
    df = _order_table(8, shapes=("2048x2048x2048",))
    c = chip.with_values({"tie_order_async": 16.0}, source="test")
    ranked, _ = rank_candidates(p, c, df)
    top = ranked[ranked["rank"] == 1]
    assert len(top) > 1 and int(top.iloc[0]["GROUP_M"]) == 16 and int(top.iloc[0]["ORDER"]) == 1
    # the preference follows the load path: misaligned rows take tie_order_sync
    model = get_operator("matmul", "cuda")
    cands = {k: df[k].to_numpy() for k in mc.KNOBS if k in df}
    c2 = chip.with_values({"tie_order_async": 8.0, "tie_order_sync": 0.0}, source="test")
    aligned = model.tie_rank(Matmul(2048, 2048, 2048), c2, cands)
    misaligned = model.tie_rank(Matmul(2048, 2048, 2047), c2, cands)
    assert set(df[aligned == 0]["GROUP_M"]) == {8} and set(df[aligned == 0]["ORDER"]) == {1}
    assert set(df[misaligned == 0]["ORDER"]) == {0}


def test_tie_order_is_validated_in_a_profile(chip, tmp_path):
    text = (ROOT / "hardware" / "h200.toml").read_text()
    bad = text.replace("tie_order_async = { value = 8.0", "tie_order_async = { value = -3.0")
    assert bad != text
    f = tmp_path / "h200.toml"
    f.write_text(bad)
    from tiler.api import _chip
    from tiler.operator import check_constants

    chip = load_profile(f)  # a profile is data: the operators check the constants they read (issue 32)
    with pytest.raises(TilerError, match="tie_order_async"):
        check_constants(chip)
    with pytest.raises(TilerError, match="tie_order_async"):  # as every use case does after loading a chip
        _chip(str(f))


def test_rank_and_explain_accept_the_triton_tutorials_spellings(capsys):
    """BLOCK_SIZE_M / BLOCK_SIZE_N / BLOCK_SIZE_K / GROUP_SIZE_M (the Triton tutorial's names, declared as aliases in
    search_spaces/matmul.toml) rank, explain and pin like BLOCK_M / ... ; the h200 export counts its programs as
    tiles."""
    import json

    from tiler.cli import main
    from tiler.space import load_space

    chip, p = load_chip("h200"), Matmul(2048, 2048, 2048)
    tutorial = pd.DataFrame(
        [
            dict(
                BLOCK_SIZE_M=128,
                BLOCK_SIZE_N=256,
                BLOCK_SIZE_K=64,
                num_stages=3,
                num_warps=8,
                GROUP_SIZE_M=8,
                ORDER=1,
                SPLIT_K=1,
            ),
            dict(
                BLOCK_SIZE_M=64,
                BLOCK_SIZE_N=64,
                BLOCK_SIZE_K=32,
                num_stages=4,
                num_warps=4,
                GROUP_SIZE_M=8,
                ORDER=1,
                SPLIT_K=1,
            ),
        ]
    )
    ours = tutorial.rename(columns=lambda c: c.replace("_SIZE", ""))
    a, _ = rank_candidates(p, chip, tutorial)
    b, _ = rank_candidates(p, chip, ours)
    assert len(a) == 2 and np.allclose(a["predicted_us"], b["predicted_us"])
    code = main(
        [
            "explain",
            "--op",
            "matmul",
            "--chip",
            "h200",
            "--shape",
            "M=2048,N=2048,K=2048",
            "--format",
            "json",
            "--tiling",
            json.dumps({k: int(v) for k, v in tutorial.iloc[0].items()}),
        ]
    )
    doc = json.loads(capsys.readouterr().out)
    assert code == 0 and doc["tiling"]["BLOCK_M"] == 128 and doc["launch"]["tiles"] == 16 * 8
    pinned = load_space("matmul", "cuda").pin({"BLOCK_SIZE_M": "64"})
    assert pinned.knobs["BLOCK_M"].values == (64,)


# ---------------------------------------------------------------- the user's columns (issue 28)
TUTORIAL = {
    "BLOCK_M": "BLOCK_SIZE_M",
    "BLOCK_N": "BLOCK_SIZE_N",
    "BLOCK_K": "BLOCK_SIZE_K",
    "GROUP_M": "GROUP_SIZE_M",
}


def _tutorial(data, shapes=None) -> pd.DataFrame:
    """The shared measurements as a Triton-tutorial kernel's table: its names, no ORDER, no SPLIT_K and no TEMPLATE
    (its rows: the grouped launch of the pointer kernel without split-K), and the cuBLAS rows kept (their empty knob cells make pandas read the knob
    columns as floats)."""
    keep = (data.impl == "torch") | ((data.ORDER == 1) & (data.SPLIT_K == 1))
    if shapes is not None:
        keep &= data.apply(lambda r: f"{r.M}x{r.N}x{r.K}" in shapes, axis=1)
    return (
        data[keep]
        .drop(columns=["ORDER", "SPLIT_K", "TEMPLATE", "TAIL_SPLIT"])
        .rename(columns=TUTORIAL)
        .reset_index(drop=True)
    )


def test_measured_rows_take_the_absent_defaults_not_the_models_choice(chip, data):
    """A measured table without ORDER and SPLIT_K (the tutorial kernel has neither) is ranked as the kernel ran:
    grouped by its GROUP_SIZE_M, no split-K; the same rows without their times are completed by the model, which
    picks another order for some of them."""
    p = Matmul(4096, 4096, 4096)
    tut = _tutorial(data)
    ranked, rejected = rank_candidates(p, chip, tut)
    assert len(ranked) > 50 and len(rejected) == 0
    assert set(ranked["defaulted"]) == {"ORDER SPLIT_K TEMPLATE TAIL_SPLIT"} and "completed" not in ranked
    assert set(ranked["ORDER"]) == {"grouped"} and set(ranked["SPLIT_K"]) == {1}
    # the same predictions as the rows written out whole
    whole = data[(data.ORDER == 1) & (data.SPLIT_K == 1)]
    want, _ = rank_candidates(p, chip, whole)
    got = ranked.set_index(
        ["BLOCK_SIZE_M", "BLOCK_SIZE_N", "BLOCK_SIZE_K", "num_stages", "num_warps", "GROUP_SIZE_M"]
    )
    want = want.set_index(["BLOCK_M", "BLOCK_N", "BLOCK_K", "num_stages", "num_warps", "GROUP_M"])
    assert np.allclose(got["predicted_us"].sort_index(), want["predicted_us"].sort_index())
    # without the times the model completes the order: not what these rows measured
    completed, _ = rank_candidates(p, chip, tut.drop(columns=["ms"]))
    assert (
        set(completed["completed"]) == {"ORDER SPLIT_K TEMPLATE TAIL_SPLIT"}
        and (completed["ORDER"] != "grouped").any()
    )


def test_a_kernel_without_a_group_size_launches_row_major(chip, data):
    from tiler.operator import get_operator
    from tiler.rank import absent_defaults

    model = get_operator("matmul", "cuda")
    assert absent_defaults(model, {"BLOCK_M", "GROUP_M"}) == {
        "ORDER": "grouped",
        "SPLIT_K": "1",
        "TEMPLATE": "pointer",
        "TAIL_SPLIT": "1",
    }
    assert absent_defaults(model, {"BLOCK_M"}) == {
        "ORDER": "row",
        "GROUP_M": "1",
        "SPLIT_K": "1",
        "TEMPLATE": "pointer",
        "TAIL_SPLIT": "1",
    }
    assert absent_defaults(model, set(mc.KNOBS)) == {}
    tut = _tutorial(data).drop(columns=["GROUP_SIZE_M"])
    ranked, _ = rank_candidates(Matmul(4096, 4096, 4096), chip, tut)
    assert set(ranked["defaulted"]) == {"GROUP_M ORDER SPLIT_K TEMPLATE TAIL_SPLIT"}
    assert set(ranked["ORDER"]) == {"row"} and set(ranked["GROUP_M"]) == {1}


def test_every_absent_default_is_a_value_of_its_knob():
    """ABSENT_DEFAULTS name knobs of the operator's space, and each value (both sides of an "A if KNOB else B")
    parses as one of the knob's values."""
    import re

    from tiler.operator import get_operator, known_ops
    from tiler.space import load_space

    seen = 0
    for op, family in known_ops():
        model, space = get_operator(op, family), load_space(op, family)
        for knob, value in model.ABSENT_DEFAULTS.items():
            assert knob in space.knobs, (op, family, knob)
            m = re.fullmatch(r"(\S+) if (\S+) else (\S+)", value)
            for v in (m.group(1), m.group(3)) if m else (value,):
                space.knobs[knob].parse(v)
            if m:
                assert m.group(2) in space.knobs
            seen += 1
    assert seen >= 3  # CUDA matmul declares ORDER, GROUP_M, SPLIT_K


def test_a_measured_table_without_a_knob_that_has_no_default_names_knob_and_flag(chip, data):
    """Ascend matmul declares no absent default: a measured table must give every knob; the error names the knob
    and the flag, here and in calibrate (which used to name --candidates)."""
    from tiler.hardware import load_chip as load
    from tiler.problem import parse_problem
    from tiler.search import search
    from tiler.space import load_space

    b3 = load("ascend910b3")
    p = parse_problem("matmul", {"M": 1024, "N": 1024, "K": 1024})
    res = search(p, b3, load_space("matmul", "ascend"), top=3)
    rows = pd.DataFrame([res.tiling(i) for i in range(3)]).assign(us=[30.0, 31.0, 32.0])
    with pytest.raises(TilerError, match=r"^--candidates: missing column 'serpentine' .*needs every knob"):
        rank_candidates(p, b3, rows.drop(columns=["serpentine"]))
    with pytest.raises(TilerError, match=r"^--measurements: missing column 'num_warps'"):
        calibrate(chip, "matmul", data.drop(columns=["num_warps"]), folds=0)


def test_a_target_with_a_narrower_labelled_domain_ranks_labels(chip):
    """A labelled knob whose domain a target narrows (AscendC takes one tail_split) reads its labels by their codes
    (it used to fail on zip(values, labels))."""
    from tiler.hardware import load_chip as load
    from tiler.problem import parse_problem
    from tiler.search import search
    from tiler.space import load_space

    b3 = load("ascend910b3")
    p = parse_problem("matmul", {"M": 1024, "N": 1024, "K": 1024})
    space = load_space("matmul", "ascend").for_target("ascendc")
    res = search(p, b3, space, top=2)
    rows = pd.DataFrame([res.tiling(i) for i in range(2)])
    ranked, rejected = rank_candidates(p, b3, rows, space)
    assert len(ranked) == 2 and len(rejected) == 0 and set(ranked["tail_split"]) == {"off"}
    assert ranked["predicted_us"].to_numpy() == pytest.approx(res.est["time_us"][:2])


def test_knob_columns_come_back_as_integers_and_labels_as_labels(chip, data, tmp_path):
    """Float knob columns (the cuBLAS rows' empty cells make them floats) print as integers in csv, json and table;
    a categorical knob given by label keeps its labels, given by code keeps its codes."""
    import json

    from click.testing import CliRunner

    from tiler.cli import cli

    tut = _tutorial(data)
    assert tut["BLOCK_SIZE_M"].dtype == np.float64  # what the file reads as
    ranked, _ = rank_candidates(Matmul(4096, 4096, 4096), chip, tut)
    for col in (
        "BLOCK_SIZE_M",
        "BLOCK_SIZE_N",
        "BLOCK_SIZE_K",
        "num_stages",
        "num_warps",
        "GROUP_SIZE_M",
        "SPLIT_K",
    ):
        assert ranked[col].dtype == np.int64, col
    codes = data[(data.impl == "triton") & (data.M == 1024) & (data.N == 1024) & (data.K == 1024)]
    by_code, _ = rank_candidates(Matmul(1024, 1024, 1024), chip, codes)
    assert by_code["ORDER"].dtype == np.int64 and by_code["BLOCK_M"].dtype == np.int64
    labelled = codes.assign(ORDER=codes["ORDER"].map({0: "row", 1: "grouped", 2: "serpentine"}))
    by_label, _ = rank_candidates(Matmul(1024, 1024, 1024), chip, labelled)
    assert set(by_label["ORDER"]) <= {"row", "grouped", "serpentine"}
    assert list(by_label["row"]) == list(by_code["row"])
    # the command line's three formats
    path = tmp_path / "tut.csv"
    tut.to_csv(path, index=False)
    assert "128.0" in path.read_text()
    base = [
        "rank",
        "--op",
        "matmul",
        "--chip",
        "h200",
        "--shape",
        "M=4096,N=4096,K=4096",
        "--candidates",
        str(path),
    ]
    out = {f: CliRunner().invoke(cli, [*base, "--format", f]) for f in ("csv", "json", "table")}
    assert all(r.exit_code == 0 for r in out.values()), {f: r.output for f, r in out.items()}
    head, first = out["csv"].stdout.splitlines()[:2]
    cells = dict(zip(head.split(","), first.split(","), strict=True))
    assert cells["BLOCK_SIZE_M"] in {"16", "32", "64", "128", "256"} and cells["ORDER"] == "grouped"
    rec = json.loads(out["json"].stdout)["ranked"][0]
    assert isinstance(rec["BLOCK_SIZE_M"], int) and isinstance(rec["SPLIT_K"], int)
    head, first = out["table"].stdout.splitlines()[:2]
    cells = dict(zip(head.split(), first.split(), strict=False))  # aligned up to the first cell with a space
    assert all(cells[c].isdigit() for c in ("BLOCK_SIZE_M", "BLOCK_SIZE_N", "num_warps", "GROUP_SIZE_M")), (
        cells
    )
    # which knobs took defaults is said on stderr
    assert "ORDER=grouped, SPLIT_K=1" in out["csv"].stderr


def test_rank_prints_agreement_with_measured_times(chip, data, tmp_path):
    """With a time column, rank gives Spearman, top-1 and best-of-k regret and the median |log error| over every
    ranked row (not only --top's), computed here from the ranked table by hand."""
    import json

    from click.testing import CliRunner

    from tiler.cli import cli
    from tiler.rank import measured_agreement

    p = Matmul(4096, 4096, 4096)
    ranked, _ = rank_candidates(p, chip, data)
    col, a = measured_agreement(ranked)
    ms = ranked["ms"].to_numpy()
    assert col == "ms" and a.pairs == len(ranked)
    assert a.top1_regret == pytest.approx(ms[0] / ms.min())  # ranked is in the model's order
    assert a.best_of_k[4] == pytest.approx(ms[:4].min() / ms.min())
    assert a.spearman == pytest.approx(ranked["predicted_us"].rank().corr(ranked["ms"].rank()))
    assert a.median_abs_log_error == pytest.approx(
        np.median(np.abs(np.log(ranked["predicted_us"] / (ms * 1e3))))
    )
    # no time column: no agreement
    assert measured_agreement(ranked.drop(columns=["ms"])) is None

    path = tmp_path / "m.csv"
    data[(data.M == 4096) & (data.N == 4096) & (data.K == 4096)].to_csv(path, index=False)
    base = [
        "rank",
        "--op",
        "matmul",
        "--chip",
        "h200",
        "--shape",
        "M=4096,N=4096,K=4096",
        "--candidates",
        str(path),
    ]
    js = CliRunner().invoke(cli, [*base, "--format", "json", "--top", "1"])
    assert js.exit_code == 0, js.output
    doc = json.loads(js.stdout)
    assert len(doc["ranked"]) == 1 and doc["agreement"]["pairs"] == len(ranked)
    assert doc["agreement"]["measured_column"] == "ms"
    assert doc["agreement"]["top1_regret"] == pytest.approx(a.top1_regret)
    assert sorted(doc["agreement"]["best_of_k_regret"], key=int) == [str(k) for k in range(1, 9)]
    assert "Spearman" in js.stderr
    csv = CliRunner().invoke(cli, [*base, "--format", "csv"])
    assert "Spearman" in csv.stderr and "Spearman" not in csv.stdout
    assert len(pd.read_csv(__import__("io").StringIO(csv.stdout))) == len(ranked)
    table = CliRunner().invoke(cli, [*base, "--format", "table"])
    block = table.stdout.rstrip().splitlines()
    assert any(line.startswith("  median |log(predicted/measured)|") for line in block[-3:])
    assert "top-1 regret" in table.stdout and "Spearman" not in table.stderr
    # a table of tilings without times: the list as before, nothing said
    data[(data.M == 4096) & (data.N == 4096) & (data.K == 4096)].drop(columns=["ms"]).to_csv(
        path, index=False
    )
    plain = CliRunner().invoke(cli, [*base, "--format", "json"])
    assert isinstance(json.loads(plain.stdout), list) and "Spearman" not in plain.stderr


def test_calibrate_takes_the_users_columns(raw_chip, data, tmp_path, capsys):
    """Calibrating the tutorial kernel's table (no ORDER, no SPLIT_K, the tutorial's names) fits what the same rows
    written out whole fit, and says which knobs took defaults."""
    from tiler.cli import main

    shapes = ["1024x1024x1024", "4096x4096x4096", "16x4096x4096"]
    tut = _tutorial(data, shapes)
    whole = data[(data.impl == "torch") | ((data.ORDER == 1) & (data.SPLIT_K == 1))]
    a = calibrate(raw_chip, "matmul", tut, folds=0, fit_shapes=shapes, date="2026-01-01")
    b = calibrate(raw_chip, "matmul", whole, folds=0, fit_shapes=shapes, date="2026-01-01")
    assert (
        a.values == b.values
        and a.defaulted
        == {"ORDER": ["grouped"], "SPLIT_K": ["1"], "TEMPLATE": ["pointer"], "TAIL_SPLIT": ["1"]}
        and not b.defaulted
    )
    assert "ORDER=grouped, SPLIT_K=1" in a.summary() and "default" not in b.summary()
    # the command line: the error names --measurements
    path = tmp_path / "m.csv"
    tut.drop(columns=["num_warps"]).to_csv(path, index=False)
    out = tmp_path / "o.toml"
    args = ["calibrate", "--chip", "h200", "--op", "matmul", "--measurements", str(path), "--out", str(out)]
    assert main(args) == 2
    err = capsys.readouterr().err
    assert f"--measurements: {path}: missing column 'num_warps'" in err and "--candidates" not in err
    assert len(err.strip().splitlines()) == 1 and not out.exists()


# ---------------------------------------------------------------- the prior and the shapes outside the fit
def _synthetic(raw_chip, data, scale: dict) -> pd.DataFrame:
    """The shared table's rows with times the model itself predicts once `scale` multiplies some constants: a
    truth the fit can reach exactly."""
    meas = load_measurements(raw_chip, "matmul", data)
    truth = dict(mc.efficiency(raw_chip))
    truth.update({k: truth[k] * f for k, f in scale.items()})
    out = meas.table.copy()
    out["us"] = mc.timing(meas.prepared, raw_chip, truth)["time_us"]
    for col in ("row", "ms", "time_ms", "time_us", "measured_us", "measured_ms", "defaulted"):
        out = out.drop(columns=[col], errors="ignore")
    return out


def test_a_fit_on_three_shapes_reports_the_others_and_the_prior_holds_constants(raw_chip, data):
    table = _synthetic(raw_chip, data, {"latency_scale": 1.6})
    shapes = list(load_measurements(raw_chip, "matmul", table).shapes)
    assert len(shapes) > 4
    fit = shapes[:3]
    loose = calibrate(raw_chip, "matmul", table, folds=0, fit_shapes=fit, prior_sigma=math.inf)
    # the shapes outside --fit-shapes are reported apart: the fitted model predicts them closer than the start
    assert loose.outside["after"].problems == len(shapes) - 3
    assert loose.outside["after"].median_abs_log_error < 0.5 * loose.outside["before"].median_abs_log_error
    assert "other shapes (outside --fit-shapes, never fitted)" in loose.summary()
    # a tight prior keeps every constant near its start; the loose fit moves latency_scale towards the truth
    start = mc.efficiency(raw_chip)
    tight = calibrate(raw_chip, "matmul", table, folds=0, fit_shapes=fit, prior_sigma=0.01)
    assert all(abs(math.log(v / start[k])) < 0.05 for k, v in tight.values.items()), tight.values
    assert loose.values["latency_scale"] > 1.3 * start["latency_scale"]
    # without fit_shapes there is nothing outside the fit
    assert calibrate(raw_chip, "matmul", table.head(400), folds=0).outside == {}


def test_select_rows_and_parse_knobs_read_untidy_cells_as_before():
    """select_rows (one mask, the frame cut once) and parse_knobs (text made only for labels and rejections) give
    the answers of the copy-per-field code they replaced on untidy cells: words in any case and padding, empty
    words and batches taking their defaults, numbers as text, a 400-digit number, another impl, a blank dtype."""
    from tiler.problem import parse_problem
    from tiler.rank import parse_knobs, select_rows
    from tiler.space import load_space

    df = pd.DataFrame(
        {
            "impl": ["triton", "Triton ", "torch", "triton", "triton", "triton", "triton", "triton"],
            "M": [64, 64, 64, "64", " 64", "9" * 400, 64, np.nan],
            "N": [64] * 8,
            "K": [64, 64, 64, 64, 64, 64, 32, 64],
            "batch": [1, np.nan, 1, "", 1, 1, 1, 1],
            "layout": ["nt", " NT", "nt", "", None, "nt", "nt", "tn"],
            "dtype": ["fp16", "", "fp16", "FP16 ", "bf16", "none", "fp16", "fp16"],
        }
    )
    for layout, impls, rows in [("nn", (), [4]), ("nt", (), [1, 2, 3]), ("nt", ("triton",), [1, 2])]:
        sel = select_rows(
            parse_problem("matmul", {"M": 64, "N": 64, "K": 64, "layout": layout}, "fp16"), df, impls
        )
        want = df.iloc[[r - 1 for r in rows]].copy()
        want.insert(0, "row", rows)
        pd.testing.assert_frame_equal(sel, want)

    knobs = pd.DataFrame(
        {
            "row": [1, 2, 3, 4, 5],
            "BLOCK_M": [64, 64.5, "128", 0, 64],
            "BLOCK_N": [64, 64, 64, 64, " 32 "],
            "BLOCK_K": [32] * 5,
            "num_stages": [3] * 5,
            "num_warps": [4, 4, 4, 4, 3],
            "GROUP_M": [8] * 5,
            "ORDER": ["grouped", " row", 2, "1", 5],
            "SPLIT_K": [1] * 5,
            "TEMPLATE": ["tma", 0, "persistent", 1, "pointer"],
            "TAIL_SPLIT": [1, 1, " 2", "4", 1.0],
        }
    )
    cols, ok, why = parse_knobs(knobs, load_space("matmul", "cuda"))
    assert {k: v.tolist() for k, v in cols.items()} == {
        "BLOCK_M": [64, 16, 128, 16, 64],
        "BLOCK_N": [64, 64, 64, 64, 32],
        "BLOCK_K": [32] * 5,
        "num_stages": [3] * 5,
        "num_warps": [4, 4, 4, 4, 3],
        "GROUP_M": [8] * 5,
        "ORDER": [1, 0, 2, 1, 0],
        "SPLIT_K": [1] * 5,
        "TEMPLATE": [1, 0, 2, 1, 0],
        "TAIL_SPLIT": [1, 1, 2, 4, 1],
    }
    block_m = "domain: BLOCK_M must be one of 16, 32, 64, 128, 256 (or any integer in 1..2147483647), got"
    assert ok.tolist() == [True, False, True, False, False]
    assert why == [
        "",
        f"{block_m} 64.5",
        "",
        f"{block_m} 0",
        "domain: ORDER must be one of row, grouped, serpentine, got 5",
    ]
