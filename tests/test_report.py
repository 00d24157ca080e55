"""`tiler report`: a sweep table or a search document drawn as one self-contained HTML page (roofline, per-row
predicted time by bound, one row's pipes), the one-line refusal without plotly, and a real headless browser
opening the page (skipped where none is installed)."""

from __future__ import annotations

import importlib.util
import json
import re
import subprocess
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
    proc = subprocess.run(
        [sys.executable, "-m", "tiler", *args, "--fix", "num_warps=4", "--format", "json"],
        capture_output=True,
        text=True,
        check=True,
    )
    full = json.loads(proc.stdout)
    assert full["tiling"] == doc["tiling"] and len(full["alternatives"]) == 3
    path.write_text(proc.stdout)
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
    (bench/dashboard_screenshot.py, which this check is shared with, writes docs/images/report.png)."""
    pytest.importorskip("plotly")
    shot = _dashboard_screenshot()
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


def _dashboard_screenshot():
    """bench/dashboard_screenshot.py, the browser checks (it imports playwright only when one runs)."""
    path = Path(__file__).resolve().parents[1] / "bench" / "dashboard_screenshot.py"
    spec = importlib.util.spec_from_file_location("dashboard_screenshot", path)
    if spec.name in sys.modules:  # loaded already (the other test file): one module, its dataclasses need it
        return sys.modules[spec.name]
    mod = sys.modules[spec.name] = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod
