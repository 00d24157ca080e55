"""msprof ingest and Ascend calibration: the round trip, the manifest, and malformed profiler files."""

from __future__ import annotations

import json
import re

import numpy as np
import pandas as pd
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tiler import msprof
from tiler.calibrate import calibrate
from tiler.cli import main
from tiler.errors import ProblemError, TilerError
from tiler.hardware import load_chip
from tiler.operator import get_operator
from tiler.ops.matmul.problem import Matmul
from tiler.problem import parse_problem, profiler_dims
from tiler.search import search
from tiler.space import load_space

SHAPES = [(1024, 2048, 512), (4096, 4096, 4096), (512, 512, 8192), (2048, 1024, 4096), (128, 4096, 4096),
          (3000, 3000, 1000), (768, 768, 768), (16, 8192, 4096)]  # fmt: skip
PIPES = ("mac", "scalar", "mte1", "mte2", "fixpipe")


def _op_summary(chip_truth, chip_search, shapes=SHAPES, per_shape=5) -> pd.DataFrame:
    """An msprof-shaped op_summary of the model's own predictions under `chip_truth` for the top tilings the
    search finds under `chip_search` (8 shapes x 5 tilings = 40 rows), the tiling in a `tiling` column."""
    model, space = get_operator("matmul", "ascend"), load_space("matmul", "ascend")
    rows = []
    for M, N, K in shapes:
        p = parse_problem("matmul", {"M": M, "N": N, "K": K})
        res = search(p, chip_search, space, top=per_shape)
        est = model.estimate(p, chip_truth, res.cands)
        for i in range(len(est["time_us"])):
            rows.append(
                {
                    "Op Name": f"MatMul_{len(rows)}",
                    "OP Type": "MatMulV2",
                    "Task Type": "AI_CORE",
                    "Task Duration(us)": est["time_us"][i],
                    "Block Dim": est["cores_used"][i],
                    "Input Shapes": f"{M},{K};{K},{N}",
                    "Input Data Types": "DT_FLOAT16;DT_FLOAT16",
                    "Input Formats": "ND;ND",
                    "Output Shapes": f"{M},{N}",
                    **{f"aic_{pp}_time(us)": est[f"{pp}_us"][i] for pp in PIPES},
                    "tiling": json.dumps(space.decode(res.cands, i)),
                }
            )
    return pd.DataFrame(rows).astype(str)


@pytest.fixture(scope="module")
def b3():
    return load_chip("ascend910b3")


def test_round_trip_recovers_the_scaled_mte2_constant(b3):
    """The model's predictions with the GM->L1 port 20% slower (MTE2 1.25x slower where the port binds), written
    as an op_summary and calibrated from the shipped profile: the port comes back within 5%, every other constant
    stays within 1%, and the fitted model predicts the rows within 3%."""
    port = b3["gm_to_l1_bytes_per_cycle"]
    truth = b3.with_values({"gm_to_l1_bytes_per_cycle": port * 0.8})
    got = msprof.ingest(_op_summary(truth, b3), "matmul")
    assert len(got.table) == 40 and not got.unmatched
    assert {f"{pp}_us" for pp in PIPES} <= set(got.table.columns)
    res = calibrate(b3, "matmul", got.table, folds=0)
    assert res.values["gm_to_l1_bytes_per_cycle"] == pytest.approx(port * 0.8, rel=0.05)
    for k, v in res.values.items():
        if k != "gm_to_l1_bytes_per_cycle":
            assert v == pytest.approx(res.start[k], rel=0.01), k
    model = get_operator("matmul", "ascend")
    from tiler.calibrate import load_measurements

    data = load_measurements(res.chip, "matmul", got.table)
    pred = model.timing(data.prepared, res.chip, model.constants(res.chip))["time_us"] * 1e-6
    assert np.max(np.abs(pred / data.seconds - 1)) < 0.03
    # before the fit the MTE2 pipe is off where the port binds: the fit had something to recover
    before = model.timing(data.prepared, b3, model.constants(b3))["mte2_us"] * 1e-6
    assert np.max(data.pipes["mte2"] / before) > 1.1


def test_manifest_matches_op_name_and_reports_other_kernels(tmp_path, b3, capsys):
    """`tiler search --manifest` writes the launch name; an op_summary whose rows carry that name (and rows of
    other kernels) calibrates from the CLI; the other rows are reported on one stderr line, not guessed."""
    man = tmp_path / "manifest.csv"
    for shape in ("M=1024,N=2048,K=512", "M=2048,N=1024,K=4096"):
        assert (
            main(
                [
                    "search",
                    "--op",
                    "matmul",
                    "--chip",
                    "ascend910b3",
                    "--shape",
                    shape,
                    "--manifest",
                    str(man),
                ]
            )
            == 0
        )
    names = [
        ln.split(" as ")[-1].strip() for ln in capsys.readouterr().err.splitlines() if "launch this" in ln
    ]
    manifest = msprof.read_manifest(man)
    assert list(manifest["op_name"]) == names and len(names) == 2
    rows = [
        {"Op Name": n, "OP Type": "MatMulV2", "Task Duration(us)": "50.0", "aic_mte2_time(us)": "40"}
        for n in names
    ]
    rows.append(
        {"Op Name": "aclnnAdd_1", "OP Type": "Add", "Task Duration(us)": "3.0", "aic_mte2_time(us)": ""}
    )
    prof = tmp_path / "op_summary_0.csv"
    pd.DataFrame(rows).to_csv(prof, index=False)
    out = tmp_path / "ascend910b3.toml"
    code = main(["calibrate", "--chip", "ascend910b3", "--op", "matmul", "--measurements", str(prof),
                 "--manifest", str(man), "--out", str(out), "--folds", "0"])  # fmt: skip
    err = capsys.readouterr().err
    assert code == 0 and out.is_file()
    assert "op_summary_0.csv: 1 row(s) not used (lines 4): Op Name not in the manifest" in err
    # the written profile is a profile: --hardware-dir finds it under its id
    assert load_chip("ascend910b3", tmp_path).tags["gm_to_l1_bytes_per_cycle"] in ("fitted", "confirmed")


def test_from_profiler_reads_matmul_input_shapes():
    assert Matmul.from_profiler("1024,512;512,2048", "DT_FLOAT16;DT_FLOAT16", "ND;ND") == (
        {"M": 1024, "N": 2048, "K": 512, "batch": 1, "layout": "nn", "b_format": "nd"},
        "fp16",
    )
    fields, dtype = Matmul.from_profiler("8,1,4096;8,11008,4096", "BF16;BF16", "ND;FRACTAL_NZ")
    assert (fields["batch"], fields["layout"], fields["b_format"], dtype) == (8, "nt", "nz", "bf16")
    assert Matmul.from_profiler("3,4", "FLOAT16") is None  # one operand: not a matmul
    assert Matmul.from_profiler("3,4;5,6", "FLOAT16") is None  # no common K


@pytest.mark.parametrize(
    "content, words",
    [
        ("", "empty file"),
        ("Op Name,OP Type\nmm,MatMul\n", "Task Duration(us)"),  # no duration column
        ("Name,Task Duration (us)\nmm,3\n", "Op Name"),  # another version's header
        (
            "Op Name,Task Duration(us),tiling\nmm,fast,{}\n",
            "line 2: column 'Task Duration(us)'",
        ),  # not a number
        (
            "Op Name,Task Duration(us),tiling\nAdd_1,3.0,\n",
            "no row is a matmul kernel",
        ),  # other operators only
        ("Op Name,Task Duration(us)\nmm,3\n", "no manifest"),  # nothing to match rows with
    ],
    ids=["empty", "no-duration", "other-version", "non-numeric", "other-operators", "unmatchable"],
)
def test_malformed_profiler_files_are_one_line_exit_2_and_write_nothing(tmp_path, capsys, content, words):
    prof = tmp_path / "op_summary.csv"
    prof.write_text(content)
    out = tmp_path / "out.toml"
    code = main(
        [
            "calibrate",
            "--chip",
            "ascend910b3",
            "--op",
            "matmul",
            "--measurements",
            str(prof),
            "--out",
            str(out),
        ]
    )
    err = capsys.readouterr().err.strip().splitlines()
    assert code == 2 and len(err) == 1 and words in err[0] and "Traceback" not in err[0], err
    assert not out.exists()


def test_a_bad_manifest_is_refused(tmp_path, capsys):
    man = tmp_path / "m.csv"
    man.write_text("op_name,op\nx,matmul\n")
    prof = tmp_path / "p.csv"
    prof.write_text("Op Name,Task Duration(us)\nx,3\n")
    code = main(["calibrate", "--chip", "ascend910b3", "--op", "matmul", "--measurements", str(prof),
                 "--manifest", str(man), "--out", str(tmp_path / "o.toml")])  # fmt: skip
    assert code == 2 and "missing column(s) chip, dtype, tiling" in capsys.readouterr().err


# --- profiler files as they are (issue 31) ---


@pytest.fixture(scope="module")
def rows(b3):
    """Six valid op_summary rows (2 shapes x 3 tilings) as dicts of text cells."""
    return _op_summary(b3, b3, shapes=SHAPES[:2], per_shape=3).to_dict("records")


def _calibrate_rows(tmp_path, capsys, rows, raw=None):
    prof = tmp_path / "op_summary_0.csv"
    text = pd.DataFrame(rows).to_csv(index=False)
    prof.write_text(raw(text) if raw else text, encoding="utf-8")
    out = tmp_path / "fit.toml"
    code = main(["calibrate", "--chip", "ascend910b3", "--op", "matmul", "--measurements", str(prof),
                 "--out", str(out), "--folds", "0"])  # fmt: skip
    captured = capsys.readouterr()
    return code, captured.out, captured.err, out


def _with(rows, line, **cells):
    """`rows` with cells of the row on file line `line` replaced (a callable cell maps the old value)."""
    out = [dict(r) for r in rows]
    for k, v in cells.items():
        out[line - 2][k] = v(out[line - 2][k]) if callable(v) else v
    return out


def _tiling(**change):
    def edit(text):
        t = json.loads(text)
        t.update(change)
        return json.dumps({k: v for k, v in t.items() if v is not None})

    return edit


@pytest.mark.parametrize(
    "line, cells, column, words",
    [
        (3, {"Input Shapes": "1024.0,512;512,2048"}, "Input Shapes", "'1024.0' is not a dimension"),
        (2, {"Input Shapes": "[1024,512];[512,2048]"}, "Input Shapes", "'[1024' is not a dimension"),
        (4, {"Input Shapes": "1024x512;512x2048"}, "Input Shapes", "'1024x512' is not a dimension"),
        (2, {"Input Shapes": "1" * 5000 + ",512;512,2048"}, "Input Shapes", "(5000 characters)"),
        (
            3,
            {"Input Shapes": "4,1024,512;2,512,2048"},
            "Input Shapes",
            "batch dimensions [4] of A and [2] of B",
        ),
        (2, {"tiling": "[" * 100_000 + "]" * 100_000}, "tiling", "at most 10000"),
        (2, {"tiling": "[" * 3000 + "]" * 3000}, "tiling", "not JSON"),
        (5, {"tiling": _tiling(row=3)}, "tiling", "sets 'row', which is not a knob"),
        (2, {"tiling": _tiling(M=7)}, "tiling", "sets 'M', which is not a knob"),
        (
            2,
            {"tiling": lambda t: re.sub(r'"base_k": \d+', '"base_k": ' + "9" * 5000, t)},
            "tiling",
            "not JSON",
        ),
        (3, {"tiling": _tiling(base_k=None)}, "tiling", "the tiling has no 'base_k'"),
        (3, {"tiling": _tiling(base_k=64.5)}, "tiling", "knob 'base_k' must be an integer or a label"),
        (3, {"tiling": _tiling(base_k="64")}, "tiling", "knob 'base_k' must be an integer, got '64'"),
        (3, {"tiling": _tiling(iterate_order="q")}, "tiling", "knob 'iterate_order' must be one of"),
        (3, {"tiling": "{not json"}, "tiling", "not JSON"),
        (6, {"Task Duration(us)": "fast"}, "Task Duration(us)", "got 'fast'"),
        (6, {"Task Duration(us)": "1e400"}, "Task Duration(us)", "must be a number of microseconds"),
        (7, {"aic_mte2_time(us)": "-3"}, "aic_mte2_time(us)", "got '-3'"),
    ],
    ids=[
        "float-dim",
        "brackets",
        "x-dims",
        "5000-digits",
        "batch-mismatch",
        "deep-long",
        "deep",
        "row-key",
        "problem-key",
        "huge-int",
        "missing-knob",
        "fraction",
        "string-number",
        "bad-label",
        "not-json",
        "duration-word",
        "duration-inf",
        "pipe-negative",
    ],  # fmt: skip
)
def test_a_bad_cell_names_the_file_line_and_the_column_as_written(
    tmp_path, capsys, rows, line, cells, column, words
):
    code, out, err, fit = _calibrate_rows(tmp_path, capsys, _with(rows, line, **cells))
    lines = err.strip().splitlines()
    assert code == 2 and len(lines) == 1 and not fit.exists(), err
    assert f"op_summary_0.csv: line {line}: column {column!r}" in lines[0] and words in lines[0], lines[0]
    assert "Traceback" not in err and "np.float64" not in err


@pytest.mark.parametrize(
    "cell, fields",
    [
        ('"1024,512;512,2048"', {"M": 1024, "N": 2048, "K": 512, "batch": 1}),  # msprof's literal quotes
        (" 1024 , 512 ; 512 , 2048 ", {"M": 1024, "N": 2048, "K": 512, "batch": 1}),  # blanks
        ("4,1024,512;4,512,2048", {"M": 1024, "N": 2048, "K": 512, "batch": 4}),  # batch dims
        ("2,3,1024,512;2,3,512,2048", {"M": 1024, "N": 2048, "K": 512, "batch": 6}),
        ("1,1024,512;512,2048", {"M": 1024, "N": 2048, "K": 512, "batch": 1}),  # a batch of one
        ("1024,512;512,2048;2048", {"M": 1024, "N": 2048, "K": 512, "batch": 1}),  # a bias
        ("1024,512;512,2048;1,2048", {"M": 1024, "N": 2048, "K": 512, "batch": 1}),
    ],
)
def test_shape_cells_are_read_as_the_profiler_writes_them(cell, fields):
    got, dtype = Matmul.from_profiler(cell, '"DT_FLOAT16;DT_FLOAT16"', "ND;ND")
    assert {k: got[k] for k in fields} == fields and dtype == "fp16"


def test_a_broadcast_operand_is_named_not_fitted_as_a_batch():
    for cell in ("4,1024,512;512,2048", "1024,512;4,512,2048"):
        why = Matmul.from_profiler(cell, "DT_FLOAT16;DT_FLOAT16")
        assert isinstance(why, str) and "broadcast" in why


def test_unusable_rows_are_counted_and_named_in_one_line(tmp_path, capsys, rows):
    """A broadcast operand, a tiling a capacity rule rejects, an unknown dtype and another operator's kernel:
    each row is counted and named by its file line in one summary line; the other rows are fitted."""
    bad = _with(rows, 2, **{"Input Shapes": "4,1024,512;512,2048"})
    bad = _with(bad, 3, tiling=_tiling(base_m=512, base_n=512, base_k=512))
    bad = _with(bad, 5, **{"Input Data Types": "DT_COMPLEX64;DT_COMPLEX64"})
    bad = _with(bad, 6, tiling="")
    code, out, err, fit = _calibrate_rows(tmp_path, capsys, bad)
    assert code == 0 and fit.is_file(), err
    summary = [ln for ln in err.splitlines() if "not used" in ln]
    assert len(summary) == 1
    assert "4 row(s) not used (lines 2, 3, 5, 6)" in summary[0]
    for words in ("broadcast B", "l0a", "COMPLEX64", "no tiling"):
        assert words in summary[0]


def test_a_fit_without_usable_rows_names_them(tmp_path, capsys, rows):
    bad = [dict(r, tiling=_tiling(base_m=512, base_n=512, base_k=512)(r["tiling"])) for r in rows]
    code, out, err, fit = _calibrate_rows(tmp_path, capsys, bad)
    assert code == 2 and not fit.exists()
    assert "no feasible rows" in err and "6 row(s) not used (lines 2, 3, 4, 5, 6, 7)" in err


def test_headers_in_another_language_are_named(tmp_path, capsys, rows):
    def chinese(text):
        return text.replace("Op Name", "算子名称").replace("Task Duration(us)", "任务耗时(us)")

    code, out, err, fit = _calibrate_rows(tmp_path, capsys, rows, raw=chinese)
    assert code == 2 and "missing column 'Op Name'" in err and "'算子名称'" in err and "M, N, K" not in err


def test_quoted_profiler_file_fits_as_the_plain_one(tmp_path, capsys, rows):
    """The same rows with msprof's literal quotes and blanks in the shape cells give the same fitted profile."""
    code, _, err, fit = _calibrate_rows(tmp_path, capsys, rows)
    assert code == 0, err
    plain = fit.read_text()
    quoted = [dict(r, **{"Input Shapes": '"' + r["Input Shapes"].replace(";", " ; ") + '"'}) for r in rows]
    code, _, err, fit = _calibrate_rows(tmp_path, capsys, quoted)
    assert code == 0 and fit.read_text() == plain


# --- fuzzing: every cell of a profiler file and a manifest (issue 31)

cell_text = st.one_of(
    st.text(max_size=30),
    st.from_regex(r'\A"?[ 0-9,;.x\[\]-]{0,30}"?\Z'),
    st.integers(-(2**70), 2**70).map(str),
    st.floats(allow_nan=True).map(str),
)


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(dims=st.lists(st.lists(st.integers(1, 2**31 - 1), min_size=1, max_size=4), min_size=1, max_size=3),
       quoted=st.booleans(), blank=st.sampled_from(["", " ", "  "]))  # fmt: skip
def test_shape_cells_round_trip_with_quotes_and_blanks(dims, quoted, blank):
    cell = (";" + blank).join((", " if blank else ",").join(map(str, d)) for d in dims)
    cell = f'{blank}"{cell}"{blank}' if quoted else cell
    assert profiler_dims(cell) == dims


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(text=cell_text)
def test_any_shape_cell_is_dimensions_or_one_problem_error(text):
    try:
        dims = profiler_dims(text)
    except ProblemError as exc:
        assert "\n" not in str(exc) and len(str(exc)) < 300
        return
    assert all(isinstance(d, int) and 0 <= d <= 2**31 - 1 for part in dims for d in part)


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(data=st.data())
def test_any_profiler_cell_is_ingested_or_one_error_naming_line_and_column(rows, data):
    """Any cell of a valid op_summary (shapes, types, formats, duration, pipes, tiling, op name) replaced by any
    text: ingest returns a table (the row used, or set aside with a reason) or raises one TilerError line that
    names the file line and a column of the file; never another exception."""
    df = pd.DataFrame(rows)
    line = data.draw(st.integers(2, len(df) + 1), label="line")
    column = data.draw(st.sampled_from(list(df.columns)), label="column")
    df.loc[line - 2, column] = data.draw(cell_text, label="value")
    try:
        got = msprof.ingest(df.astype(str), "matmul", family="ascend", source="op.csv")
    except TilerError as exc:
        text = str(exc)
        assert "\n" not in text and text.startswith("op.csv: ")
        if "line " in text:
            assert f"line {line}: column {column!r}" in text, text
        return
    used = set(got.table["line"]) | {r for r, _ in got.unmatched}
    assert used == set(range(2, len(df) + 2))  # every row used or named, none dropped silently


@settings(max_examples=100, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(column=st.sampled_from(["op_name", "op", "M", "N", "K", "dtype", "tiling"]), value=cell_text)
def test_any_manifest_cell_is_read_or_one_error(tmp_path_factory, column, value):
    """A manifest (tiler search --manifest) with any cell replaced: read and used, or one TilerError line."""
    tmp = tmp_path_factory.mktemp("manifest")
    tiling = json.dumps({"base_m": 128})
    good = {"op_name": "tiler_matmul_0", "op": "matmul", "chip": "ascend910b3", "M": "64", "N": "64", "K": "64",
            "dtype": "fp16", "tiling": tiling}  # fmt: skip
    path = tmp / "m.csv"
    pd.DataFrame([{**good, column: value}]).to_csv(path, index=False)
    prof = pd.DataFrame([{"Op Name": "tiler_matmul_0", "Task Duration(us)": "5"}]).astype(str)
    try:
        msprof.ingest(prof, "matmul", msprof.read_manifest(path), family="ascend", source="op.csv")
    except TilerError as exc:
        assert "\n" not in str(exc)
