"""`tiler report`: a sweep table or a search document drawn as one self-contained HTML page (roofline, per-row
predicted time by bound, one row's pipes), the one-line refusal without plotly, and a real headless browser
opening the page (skipped where none is installed)."""

from __future__ import annotations

import contextlib
import io
import json
import re
import sys
from pathlib import Path

import pytest

from tiler.cli import main

# small pinned spaces: each search takes a fraction of a second
PINS = [
    "base_m=64",
    "base_n=128",
    "base_k=64",
    "step_m=1",
    "step_n=1",
    "BLOCK_M=64",
    "BLOCK_N=64",
    "BLOCK_K=64",
    "num_stages=3",
    "num_warps=4",
]


def figures(page: str) -> dict[str, list[dict]]:
    """The traces of each chart in the page, by its div id (plotly.newPlot("ID", [traces], ...))."""
    out = {}
    for m in re.finditer(r'Plotly\.newPlot\(\s*"([^"]+)",\s*(\[.*?\])\s*,\s*\{', page, re.S):
        out[m.group(1)] = json.loads(m.group(2))
    return out


def assert_self_contained(page: str) -> None:
    assert page.startswith("<!DOCTYPE html>")
    assert not re.search(r"<script[^>]*\bsrc\s*=", page, re.I)  # nothing loaded from anywhere
    assert not re.search(r"<link[^>]*\bhref\s*=\s*[\"']?https?:", page, re.I)
    assert "plotly.js" in page.lower() or "Plotly" in page  # the library itself is inline
    assert len(page) > 1_000_000


@pytest.fixture(scope="module")
def sweep_csv(tmp_path_factory):
    from tiler.sweep import run_sweep

    tmp = tmp_path_factory.mktemp("report")
    shapes = tmp / "shapes.csv"
    shapes.write_text(
        "name,M,N,K,dtype\nsmall,256,256,256,fp16\nwide,128,4096,1024,bf16\nbroken,inf,1,1,fp16\n"
    )
    out = tmp / "sweep.csv"
    rep = run_sweep(shapes, "matmul", "ascend910b3,h200", out, fix=PINS)
    assert rep.failed == 2  # the broken row, on each chip
    return out


@pytest.fixture(scope="module")
def search_json(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("report")
    path = tmp / "search.json"
    args = ["search", "--op", "matmul", "--chip", "h200", "--shape", "M=512,N=1024,K=2048", "--top", "4"]
    assert main([*args, "--fix", "num_warps=4", "--export", str(path)]) == 0
    doc = json.loads(path.read_text())
    # the --format json document carries the alternatives too: keep both in one file as `search --format json`
    # (run in this process, its stdout taken: the text a shell gets, without starting Python and tiler again)
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        assert main([*args, "--fix", "num_warps=4", "--format", "json"]) == 0
    full = json.loads(out.getvalue())
    assert full["tiling"] == doc["tiling"] and len(full["alternatives"]) == 3
    path.write_text(out.getvalue())
    return path


def test_sweep_table_report_has_the_three_charts(sweep_csv, tmp_path, capsys):
    pytest.importorskip("plotly")
    out = tmp_path / "deep" / "r.html"
    assert main(["report", str(sweep_csv), "--out", str(out)]) == 0
    assert f"wrote {out}" in capsys.readouterr().err
    page = out.read_text()
    assert_self_contained(page)
    figs = figures(page)
    assert set(figs) == {"tiler-roofline", "tiler-times", "tiler-pipes"}
    # (a) roofline: one line per chip and dtype, every ok row placed (4 = 2 shapes x 2 chips)
    roof = figs["tiler-roofline"]
    lines = sorted(t["name"] for t in roof if t["name"].startswith("roofline "))
    assert lines == [
        "roofline ascend910b3 bf16",
        "roofline ascend910b3 fp16",
        "roofline h200 bf16",
        "roofline h200 fp16",
    ]
    points = [k for t in roof if t["name"].startswith("bound: ") for k in t["customdata"]]
    keys = {"matmul:M=256,N=256,K=256,batch=1:fp16", "matmul:M=128,N=4096,K=1024,batch=1:bf16"}
    assert sorted(points) == sorted([*keys, *keys])
    # the intensity of a point is the problem's FLOPs / compulsory bytes: 2*256^3 / (3 * 256^2 * 2 bytes)
    small = [
        x
        for t in roof
        if t["name"].startswith("bound: ")
        for x, k in zip(t["x"], t["customdata"], strict=True)
        if "M=256," in k
    ]
    assert small == pytest.approx([2 * 256**3 / (3 * 256 * 256 * 2)] * 2)
    # (b) the time bars: a trace per bound, every row labelled with its name and chip (the other traces of the
    # chart are the per-target markers, when the sweep names the targets that can run each row)
    bars = [t for t in figs["tiler-times"] if t["type"] == "bar"]
    assert bars and all(t["name"].startswith("bound: ") for t in bars)
    assert all(t["name"].startswith("target ") for t in figs["tiler-times"] if t["type"] != "bar")
    labels = {y for t in bars for y in t["y"]}
    assert labels == {"#0 small @ ascend910b3", "#1 small @ h200", "#2 wide @ ascend910b3", "#3 wide @ h200"}
    # (c) the slowest row's pipes; the broken rows are listed, not drawn
    pipes = figs["tiler-pipes"][0]
    slowest = max((x, y) for t in bars for x, y in zip(t["x"], t["y"], strict=True))[1]
    assert slowest in page.split('id="tiler-pipes"')[1]
    assert set(pipes["x"]) in (
        {"mac", "vec", "scalar", "mte1", "mte2", "mte3", "fixpipe"},
        {"tensor", "alu", "issue", "smem", "load", "store"},
    )
    assert "Rows not drawn (2)" in page and "broken" in page


def test_row_option_picks_the_breakdown_and_is_bounded(sweep_csv, tmp_path, capsys):
    pytest.importorskip("plotly")
    out = tmp_path / "r.html"
    assert main(["report", str(sweep_csv), "--out", str(out), "--row", "1"]) == 0
    pipes = figures(out.read_text())["tiler-pipes"][0]
    assert set(pipes["x"]) == {"tensor", "alu", "issue", "smem", "load", "store"}  # row #1 is on the h200
    assert "#1 small @ h200" in out.read_text().split('id="tiler-pipes"')[1]
    capsys.readouterr()
    assert main(["report", str(sweep_csv), "--out", str(out), "--row", "4"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "--row: must be a row number 0..3" in err


def test_search_document_report(search_json, tmp_path):
    pytest.importorskip("plotly")
    out = tmp_path / "s.html"
    assert main(["report", str(search_json), "--out", str(out)]) == 0
    page = out.read_text()
    assert_self_contained(page)
    figs = figures(page)
    key = "matmul:M=512,N=1024,K=2048,batch=1:fp16"
    roof = figs["tiler-roofline"]
    assert [t["name"] for t in roof if t["name"].startswith("roofline ")] == ["roofline h200 fp16"]
    assert [k for t in roof if t["name"].startswith("bound: ") for k in t["customdata"]] == [key] * 4
    labels = {y for t in figs["tiler-times"] if t["type"] == "bar" for y in t["y"]}
    assert labels == {"#0 best", "#1 alternative 1", "#2 alternative 2", "#3 alternative 3"}
    # the slowest is an alternative: its pipes are scored again by the model (the document has only its time)
    pipes = figs["tiler-pipes"][0]
    assert set(pipes["x"]) == {"tensor", "alu", "issue", "smem", "load", "store"} and max(pipes["y"]) > 0
    # default --out: RESULT with the suffix .html
    assert main(["report", str(search_json)]) == 0
    assert search_json.with_suffix(".html").exists()


def test_bad_results_are_one_line(tmp_path, capsys):
    pytest.importorskip("plotly")
    cases = {
        "not_a_sweep.csv": "a,b\n1,2\n",
        "list.json": "[1, 2]",
        "bad.json": "{",
        "other.json": '{"schema": "x"}',
        "binary.csv": b"\xff\xfe\x00\x01",
    }
    for name, text in cases.items():
        p = tmp_path / name
        p.write_bytes(text if isinstance(text, bytes) else text.encode())
        assert main(["report", str(p), "--out", str(tmp_path / "o.html")]) == 2, name
        err = capsys.readouterr().err
        assert err.startswith("error: RESULT: ") and err.count("\n") == 1, (name, err)
    assert main(["report", str(tmp_path / "missing.csv"), "--out", str(tmp_path / "o.html")]) == 2
    assert not (tmp_path / "o.html").exists()


def test_without_plotly_says_which_extra_in_one_line(tmp_path, capsys, monkeypatch):
    for mod in ("plotly", "plotly.graph_objects"):
        monkeypatch.setitem(sys.modules, mod, None)  # import plotly -> ImportError
    p = tmp_path / "r.json"
    p.write_text("{}")
    assert main(["report", str(p)]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "pip install 'tiler[report]'" in err


def test_page_renders_in_a_headless_browser(sweep_csv, tmp_path):
    """The page opened by a real Chromium from its file:// URL, offline: plotly draws every chart (an SVG with its
    title, the roofline's points and lines, a bar per row, the pipes), no JavaScript or console error, no request
    off the file (plotly.js is inline). Skipped, with the reason, without Chromium or playwright
    (tests/browser_checks.py, which this check is shared with, writes docs/images/report.png)."""
    pytest.importorskip("plotly")
    import browser_checks as shot  # tests/browser_checks.py

    why = shot.missing(dashboard=False)
    if why:
        pytest.skip(why)
    out = tmp_path / "r.html"
    assert main(["report", str(sweep_csv), "--out", str(out)]) == 0
    with shot.browser() as ctx:
        drawn = shot.check_report(ctx, out, shot=tmp_path / "report.png")
    assert set(drawn) == {"tiler-roofline", "tiler-times", "tiler-pipes"}
    assert drawn["tiler-roofline"]["points"] == 4  # 2 shapes x 2 chips; the broken rows are not drawn
    assert drawn["tiler-roofline"]["lines"] == 4  # a roofline per chip and dtype
    assert drawn["tiler-times"]["bars"] == 4
    assert drawn["tiler-pipes"]["bars"] in (6, 7)  # the pipes of the slowest row (cuda: 6, ascend: 7)
    assert (tmp_path / "report.png").stat().st_size > 10_000


# ------------------------------------------------------------ the choices: tilings, targets, code, families


def plots(page: str) -> dict[str, tuple[list[dict], dict]]:
    """(traces, layout) of each chart in the page, by its div id: newPlot("ID", [traces], {layout}, ...)."""
    dec = json.JSONDecoder()
    out = {}
    for m in re.finditer(r'Plotly\.newPlot\(\s*"([^"]+)",\s*', page):
        data, end = dec.raw_decode(page, m.end())
        layout, _ = dec.raw_decode(page, page.index("{", end))
        out[m.group(1)] = (data, layout)
    return out


def table_rows(page: str) -> list[tuple[str, str, str]]:
    """(row number, family, the row's HTML) of each row of the page's tables, in page order."""
    return re.findall(r'<tr data-row="(\d+)" data-family="([^"]*)">(.*?)</tr>', page, re.S)


CUDA_TILING = {
    "BLOCK_M": 64,
    "BLOCK_N": 128,
    "BLOCK_K": 64,
    "num_stages": 3,
    "num_warps": 4,
    "GROUP_M": 8,
    "ORDER": "grouped",
    "SPLIT_K": 1,
}


def synthetic_sweep(path: Path, rows: list[dict], named: bool, targets: bool) -> Path:
    """A sweep table as `tiler sweep` writes it, on the h200: each row's BLOCK_M is 16 << its input index
    (mod 8: so a row's own tiling can be told apart); `targets`: with the `runnable` and `<T>_time_us`/
    `<T>_gap` columns (catlass and triton: catlass never runs on the h200)."""
    import pandas as pd

    from tiler.problem import parse_problem

    recs = []
    for i, r in enumerate(rows):
        shape = {k: r[k] for k in ("M", "N", "K", "layout") if k in r}
        rec = {"name": r.get("name", "")} if named else {}
        rec.update(shape, dtype="bf16", chip="h200", status="ok", error="", input_row=i + 1)
        rec["key"] = parse_problem("matmul", shape, "bf16").key()
        rec.update(CUDA_TILING, BLOCK_M=16 << (i % 8), time_us=r["time_us"], bound="tensor")
        rec.update({f"{p}_us": r["time_us"] / 2 for p in ("tensor", "alu", "issue", "smem", "load", "store")})
        if targets:
            rec["runnable"] = r["runnable"]
            rec.update(catlass_time_us="", catlass_gap="")
            rec.update(triton_time_us=r.get("triton", ""), triton_gap=r.get("gap", ""))
        recs.append(rec)
    pd.DataFrame(recs).to_csv(path, index=False)
    return path


def tiling_of(i: int) -> str:
    return " ".join(f"{k}={16 << (i % 8) if k == 'BLOCK_M' else v}" for k, v in CUDA_TILING.items())


NAMED = [  # input order interleaves the two families; times from microseconds to tens of milliseconds
    dict(
        name="layers.0.qkv_proj",
        M=4096,
        N=6144,
        K=4096,
        time_us=30000.0,
        runnable="triton",
        triton=30000.0,
        gap=1.0,
    ),
    dict(name="layers.0.mlp.down_proj", M=1, N=4096, K=14336, time_us=2.5, runnable=""),
    dict(name="layers.1.qkv_proj", M=1, N=6144, K=4096, time_us=3.0, runnable="triton", triton=3.6, gap=1.2),
    dict(
        name="layers.0.mlp.down_proj",
        M=4096,
        N=4096,
        K=14336,
        time_us=25000.0,
        runnable="triton",
        triton=25000.0,
        gap=1.0,
    ),
    dict(
        name="layers.1.qkv_proj", M=128, N=6144, K=4096, time_us=40.0, runnable="triton", triton=44.0, gap=1.1
    ),
]
# page order: the qkv family (seen first) by M, then down_proj by M; as input indices
NAMED_ORDER = [2, 4, 0, 1, 3]


@pytest.mark.parametrize("targets", [False, True], ids=["no-runnable-columns", "runnable-columns"])
def test_sweep_rows_grouped_by_name_family_on_a_log_axis(tmp_path, targets):
    pytest.importorskip("plotly")
    src = synthetic_sweep(tmp_path / "named.csv", NAMED, named=True, targets=targets)
    out = tmp_path / "named.html"
    assert main(["report", str(src), "--out", str(out)]) == 0
    page = out.read_text()
    assert_self_contained(page)
    data, layout = plots(page)["tiler-times"]
    # the time axis is logarithmic and holds every bar (2.5 us .. 30 ms)
    assert layout["xaxis"]["type"] == "log"
    lo, hi = layout["xaxis"]["range"]
    assert 10**lo < 2.5 and 10**hi > 30000
    # rows numbered and drawn in the page's order: family by family (layer numbers stripped), by M inside one
    labels = [f"#{j} {NAMED[i]['name']} @ h200" for j, i in enumerate(NAMED_ORDER)]
    assert layout["yaxis"]["categoryarray"] == labels[::-1]  # top to bottom
    bars = {y: x for t in data if t["type"] == "bar" for x, y in zip(t["x"], t["y"], strict=True)}
    assert [bars[label] for label in labels] == [NAMED[i]["time_us"] for i in NAMED_ORDER]
    # each family named beside its first row (category j of 5 sits at 4 - j): rows #0 and #3
    notes = {a["text"]: a["y"] for a in layout["annotations"]}
    assert notes == {"layers.qkv_proj": 4, "layers.mlp.down_proj": 1}
    # the table: the same order, one family after the other, each row with its own tiling
    rows = table_rows(page)
    assert [(n, f) for n, f, _ in rows] == [
        (str(j), "layers.qkv_proj" if j < 3 else "layers.mlp.down_proj") for j in range(5)
    ]
    for (_, _, cells), i in zip(rows, NAMED_ORDER, strict=True):
        assert f"<code>{tiling_of(i)}</code>" in cells
        assert f"{NAMED[i]['M']},N={NAMED[i]['N']}" in cells
    # the selected (slowest) row and the next slowest, detailed
    assert page.count('data-which="selected"') == 1 and page.count('data-which="slow"') == 4
    custom = [('class="custom"' in cells) for _, _, cells in rows]
    markers = [t for t in data if t["type"] != "bar"]
    if not targets:
        assert not markers and not any(custom) and "targets (best predicted time" not in page
        return
    # targets: a marker per row a target can run, at its best predicted time (catlass runs none: no trace)
    assert [t["name"] for t in markers] == ["target triton"]
    runs = [i for i in NAMED_ORDER if NAMED[i]["runnable"]]
    assert markers[0]["x"] == [NAMED[i]["triton"] for i in runs]
    assert markers[0]["y"] == [labels[NAMED_ORDER.index(i)] for i in runs]
    # custom kernel: no target can run the row (input row 1), or none reaches the best (gap > 1: rows 2 and 4)
    assert custom == [NAMED[i]["runnable"] == "" or NAMED[i].get("gap", 1) > 1 for i in NAMED_ORDER]
    assert custom == [True, True, False, True, False]
    assert "triton</b> 3.600 us, 1.200x" in rows[0][2] and ">none<" in rows[3][2]


def test_sweep_details_name_a_command_that_prints_the_code(tmp_path, capsys):
    pytest.importorskip("plotly")
    src = synthetic_sweep(tmp_path / "named.csv", NAMED, named=True, targets=True)
    out = tmp_path / "named.html"
    assert main(["report", str(src), "--out", str(out), "--row", "4"]) == 0
    page = out.read_text()
    selected = re.search(
        r'<details class="row" data-row="4" data-which="selected" open>(.*?)</details>', page, re.S
    )
    assert selected and f"<code>{tiling_of(3)}</code>" in selected.group(1)
    cmd = re.search(r"<code>(tiler search [^<]*--target triton --emit triton)</code>", selected.group(1))
    assert cmd and "--shape M=4096,N=4096,K=14336,batch=1 --dtype bf16" in cmd.group(1)
    capsys.readouterr()
    assert main(cmd.group(1).split()[1:]) == 0
    assert "triton.Config" in capsys.readouterr().out


def test_sweep_rows_grouped_by_shape_without_names(tmp_path):
    """No `name` column: a family is the shape with M free (same N, K, layout and dtype), ordered by M."""
    pytest.importorskip("plotly")
    rows = [
        dict(M=128, N=4096, K=4096, time_us=30.0),
        dict(M=1, N=14336, K=4096, time_us=9.0),
        dict(M=1, N=4096, K=4096, time_us=5.0),
        dict(M=4096, N=4096, K=4096, layout="nt", time_us=900.0),
        dict(M=4096, N=4096, K=4096, time_us=800.0),
        dict(M=16, N=4096, K=4096, layout="nt", time_us=7.0),
    ]
    src = synthetic_sweep(tmp_path / "shapes.csv", rows, named=False, targets=False)
    out = tmp_path / "shapes.html"
    assert main(["report", str(src), "--out", str(out)]) == 0
    page = out.read_text()
    order = [2, 0, 4, 1, 5, 3]
    fams = ["N=4096,K=4096,batch=1 bf16 (M varies)"] * 3 + ["N=14336,K=4096,batch=1 bf16 (M varies)"]
    fams += ["N=4096,K=4096,batch=1,layout=nt bf16 (M varies)"] * 2
    got = table_rows(page)
    assert [f for _, f, _ in got] == fams
    assert all(f"<code>{tiling_of(i)}</code>" in cells for (_, _, cells), i in zip(got, order, strict=True))
    _, layout = plots(page)["tiler-times"]
    keys = [layout["yaxis"]["categoryarray"][::-1][j].split(" ")[1] for j in range(6)]
    assert [k.split(":")[1].split(",")[0] for k in keys] == [f"M={rows[i]['M']}" for i in order]
    assert [a["text"] for a in layout["annotations"]] == list(dict.fromkeys(fams))


def test_hundreds_of_rows_fold_by_family(tmp_path):
    """A sweep of hundreds of rows: every row in the table once, families folded, six rows detailed."""
    pytest.importorskip("plotly")
    rows = [
        dict(name=f"layers.{k}.{n}", M=m, N=4096, K=4096, time_us=m * (k + 1) / 10)
        for k in range(35)
        for n in ("q_proj", "o_proj")
        for m in (1, 128, 4096)
    ]
    src = synthetic_sweep(tmp_path / "big.csv", rows, named=True, targets=False)
    out = tmp_path / "big.html"
    assert main(["report", str(src), "--out", str(out)]) == 0
    page = out.read_text()
    got = table_rows(page)
    assert [n for n, _, _ in got] == [str(j) for j in range(210)]
    assert [f for _, f, _ in got] == ["layers.q_proj"] * 105 + ["layers.o_proj"] * 105
    assert (
        page.count('<details class="family" data-family=') == 2 and '<details class="family" open' not in page
    )
    assert page.count('<details class="row"') == 1 + 5


def test_a_large_sweep_page_aggregates_families_and_lists_the_slowest_rows(tmp_path, monkeypatch):
    """Above LARGE_ROWS rows (issue 31): the time chart is one distribution per family (quartiles computed here,
    matching the rows), the roofline has no per-point text, the table is a summary per family (its counts, fastest
    and slowest) plus the TABLE_ROWS slowest rows, slowest first; a page below the limit keeps a bar per row."""
    pytest.importorskip("plotly")
    import tiler.report.rows as report  # the page-size limits and the time format

    rows = [
        dict(name=f"layers.{k}.{n}", M=m, N=4096, K=4096, time_us=m * (k + 1) / 10 + (n == "o_proj"))
        for k in range(20)
        for n in ("q_proj", "o_proj")
        for m in (1, 128, 4096)
    ]
    src = synthetic_sweep(tmp_path / "big.csv", rows, named=True, targets=False)
    monkeypatch.setattr(report, "LARGE_ROWS", 100)
    monkeypatch.setattr(report, "TABLE_ROWS", 7)
    out = tmp_path / "big.html"
    assert main(["report", str(src), "--out", str(out)]) == 0
    page = out.read_text()
    traces, _ = plots(page)["tiler-times"]
    assert [t["type"] for t in traces] == ["box"]
    for fam, want in (("layers.q_proj", [r["time_us"] for r in rows if "q_proj" in r["name"]]),):
        j = traces[0]["y"].index(f"{fam} (60)")
        assert traces[0]["lowerfence"][j] == min(want) and traces[0]["upperfence"][j] == max(want)
    roof, _ = plots(page)["tiler-roofline"]
    assert all("text" not in t for t in roof if t["type"] == "scattergl")
    summary = re.findall(r'<tr data-family="([^"]*)"><td>[^<]*</td><td>(\d+)</td>', page)
    assert sorted(summary) == [("layers.o_proj", "60"), ("layers.q_proj", "60")]
    assert "120 rows: a summary per family, then the 7 slowest rows (every row is in big.csv itself)" in page
    listed = table_rows(page)
    times = sorted((r["time_us"] for r in rows), reverse=True)[:7]
    assert len(listed) == 7
    assert [re.search(r'class="t">([^<]+)', h).group(1) for _, _, h in listed] == [
        report._us(t) for t in times
    ]
    monkeypatch.setattr(report, "LARGE_ROWS", 2000)
    assert main(["report", str(src), "--out", str(out)]) == 0
    assert {t["type"] for t in plots(out.read_text())["tiler-times"][0]} == {"bar"}


def test_name_families():
    from tiler.report import name_family

    assert name_family("layers.0.qkv_proj") == "layers.qkv_proj"
    assert name_family("model.layers.31.mlp.down_proj") == "model.layers.mlp.down_proj"
    assert name_family("blk3.attn_q") == "blk.attn_q"
    assert name_family("mlp.fc1") != name_family("mlp.fc2")  # two shapes: the last word keeps its number
    assert name_family("h_12_attn") == "h_attn"
    assert name_family("17") == ""


@pytest.fixture(scope="module")
def catlass_doc():
    import tiler

    doc = tiler.search(
        op="matmul", chip="ascend910b3", shape="M=512,N=1024,K=1024", target="catlass"
    ).document()
    assert "catlass" in doc["targets"]
    return doc


def _report(doc: dict, path: Path) -> str:
    path.write_text(json.dumps(doc))
    out = path.with_suffix(".html")
    assert main(["report", str(path), "--out", str(out)]) == 0
    return out.read_text()


def _choices(page: str) -> str:
    return page.split('<h2 id="tiler-code">', 1)[1]


def test_document_shows_its_tiling_and_the_emitted_code(catlass_doc, tmp_path):
    import html

    from tiler.export import emit_code

    pytest.importorskip("plotly")
    page = _report(catlass_doc, tmp_path / "doc.json")
    assert_self_contained(page)
    text = " ".join(f"{k}={v}" for k, v in catlass_doc["tiling"].items())
    (num, _, cells), *_ = table_rows(page)
    assert num == "0" and f"<code>{text}</code>" in cells
    assert f"<code>{text}</code>" in _choices(page)
    code = emit_code(catlass_doc, "catlass")
    assert html.escape(code) in _choices(page) and "Catlass::GemmShape&lt;" in page
    custom = catlass_doc.get("custom_kernel", not catlass_doc["targets"])
    assert ('class="custom"' in page) is custom
    data, _ = plots(page)["tiler-times"]
    markers = {t["name"]: t["x"] for t in data if t["type"] != "bar"}
    runnable = catlass_doc.get("runnable")
    if runnable is not None:  # each target at its own best predicted time
        assert markers == {f"target {t}": [r["time_us"]] for t, r in runnable.items()}


def test_document_without_runnable_fields(catlass_doc, tmp_path):
    """A document written before `runnable`/`custom_kernel`: its views are of its own tiling (its time,
    gap 1)."""
    import html

    from tiler.export import emit_code

    pytest.importorskip("plotly")
    doc = {k: v for k, v in catlass_doc.items() if k not in ("runnable", "custom_kernel", "no_view")}
    page = _report(doc, tmp_path / "old.json")
    assert html.escape(emit_code(doc, "catlass")) in _choices(page)
    assert 'class="custom"' not in page
    data, _ = plots(page)["tiler-times"]
    assert {t["name"]: t["x"] for t in data if t["type"] != "bar"} == {
        "target catlass": [doc["estimate"]["time_us"]]
    }
    assert "1.000x the best, bound" in _choices(page) and "the best tiling itself" in _choices(page)
    # no view at all: nothing runs it as exported
    page = _report({**doc, "targets": {}}, tmp_path / "none.json")
    assert 'class="custom"' in page and "No target has a view of this tiling." in page


def test_custom_kernel_document_says_so(catlass_doc, tmp_path):
    pytest.importorskip("plotly")
    own = dict(catlass_doc["tiling"], base_k=catlass_doc["tiling"]["base_k"] * 2)
    t = catlass_doc["estimate"]["time_us"]
    doc = {
        **catlass_doc,
        "custom_kernel": True,
        "runnable": {
            "catlass": {
                "tiling": own,
                "time_us": t * 1.25,
                "gap": 1.25,
                "bound": "mte2",
                "same_as_best": False,
            }
        },
        "no_view": {"ascendc": "no tiling of its space fits"},
    }
    page = _report(doc, tmp_path / "custom.json")
    (_, _, cells), *_ = table_rows(page)
    assert 'class="custom"' in cells and ">custom kernel<" in cells
    choices = _choices(page)
    assert ">custom kernel</span>: no target's code generator can run this tiling as exported" in choices
    own_text = " ".join(f"{k}={v}" for k, v in own.items())
    assert f"its tiling: <code>{own_text}</code>" in choices and "1.250x the best" in choices
    assert "ascendc</b>: cannot run it (no tiling of its space fits)" in choices
    # and a document whose tiling runs says nothing of the kind
    page = _report({**doc, "custom_kernel": False}, tmp_path / "runs.json")
    assert 'class="custom"' not in page


def test_target_without_emitter_or_bad_view_shows_the_view_json(catlass_doc, tmp_path, monkeypatch):
    import dataclasses
    import html

    from tiler.operator import get_operator

    pytest.importorskip("plotly")
    # a target with a view and no emitter (catlass's emitter taken away for this test): its view as JSON
    targets = type(get_operator("matmul", "ascend")).TARGETS
    with monkeypatch.context() as m:
        m.setitem(targets, "catlass", dataclasses.replace(targets["catlass"], emit=None))
        page = _report(catlass_doc, tmp_path / "noemit.json")
    view = json.dumps(catlass_doc["targets"]["catlass"], indent=2)
    assert html.escape(view) in _choices(page) and "the catlass target has no code emitter" in _choices(page)
    assert "Catlass::GemmShape&lt;" not in page
    # a view emit_code refuses (its target's schema): its JSON and why
    bad = json.loads(json.dumps(catlass_doc))
    bad["targets"]["catlass"]["L1TileShape"] = "bogus"
    page = _report(bad, tmp_path / "bad.json")
    assert "no code emitted (export: targets/catlass/L1TileShape" in _choices(page)
    assert html.escape(json.dumps(bad["targets"]["catlass"], indent=2)) in _choices(page)
