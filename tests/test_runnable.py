"""Runnable by default: every search exports, beside the unconstrained best, the best tiling of each target that
can run the problem on the chip (tiler.search.runnable), and `tiler check` fails a document that has no view."""

from __future__ import annotations

import json

import numpy as np
import pandas as pd
import pytest

import tiler
from tiler.check import check_document
from tiler.cli import main

# LLM GEMMs (Llama-3-8B's q/k/v, gate/up and down projections) at decode, small-batch and prefill M, in both the
# row-major-B and the nn.Linear (B stored N x K) layouts
LLM = [(m, n, k) for m in (1, 16, 2048) for n, k in ((6144, 4096), (14336, 4096), (4096, 14336))]
CHIPS = ("ascend910b3", "ascend910b2", "ascend910b4", "h200")


def _shape(m, n, k, layout="nn"):
    return f"M={m},N={n},K={k},layout={layout}"


def test_the_issues_case_exports_a_runnable_view_per_target(tmp_path, capsys):
    """4096^3 fp16 on the 910B3: the unconstrained best needs a custom kernel (CATLASS has one L1 K, AscendC one
    block per core); the export carries CATLASS's and AscendC's own best tilings, each as its target's search
    finds it, no faster than the unconstrained best."""
    res = tiler.search(op="matmul", chip="ascend910b3", shape="M=4096,N=4096,K=4096", top=1)
    doc = res.document()
    assert doc["custom_kernel"] is True and set(doc["targets"]) == {"catlass", "ascendc"}
    best = doc["estimate"]["time_us"]
    for t in ("catlass", "ascendc"):
        own = tiler.search(op="matmul", chip="ascend910b3", shape="M=4096,N=4096,K=4096", target=t, top=1)
        r = doc["runnable"][t]
        assert r["time_us"] == pytest.approx(own.row(0)["time_us"]) and r["time_us"] >= best
        assert r["gap"] == pytest.approx(r["time_us"] / best) and not r["same_as_best"]
        assert doc["targets"][t] == own.document()["targets"][t]  # the view is of the target's own tiling
    assert check_document(doc)[1] == []
    path = tmp_path / "t.json"
    res.write(path)
    assert main(["check", str(path)]) == 0
    assert "ok (2 views checked" in capsys.readouterr().out
    assert main(["search", "--op", "matmul", "--chip", "ascend910b3", "--shape", "M=4096,N=4096,K=4096"]) == 0
    out = capsys.readouterr().out
    assert "needs a custom kernel" in out and "runnable as exported" in out and "catlass" in out


def test_a_document_without_views_fails_check(tmp_path, capsys):
    doc = tiler.search(op="matmul", chip="ascend910b3", shape="M=4096,N=4096,K=4096", top=1).document()
    doc["targets"], doc["runnable"] = {}, {}
    path = tmp_path / "none.json"
    path.write_text(json.dumps(doc))
    assert main(["check", str(path)]) == 1
    out = capsys.readouterr().out
    assert "no view for any target" in out and "custom kernel" in out


@pytest.mark.parametrize("chip", CHIPS)
@pytest.mark.parametrize("layout", ["nn", "nt"])
def test_llm_gemms_always_carry_a_runnable_view(chip, layout, tmp_path, capsys):
    """Default flags: every export carries at least one view, and each view passes tiler check."""
    paths = []
    for i, (m, n, k) in enumerate(LLM):
        path = tmp_path / f"{i}.json"
        tiler.search(op="matmul", chip=chip, shape=_shape(m, n, k, layout), top=1).write(path)
        doc = json.loads(path.read_text())
        assert doc["targets"], (chip, m, n, k, doc.get("no_view"))
        paths.append(str(path))
    assert main(["check", *paths]) == 0, capsys.readouterr().out


def test_the_shortcut_is_exact_against_each_targets_own_search():
    """Where the unconstrained best is expressible by a target, it stands for the target's search; elsewhere the
    target's own search runs. Either way the time is what `--target T` finds (random ragged shapes)."""
    rng = np.random.default_rng(3)
    same = searched = 0
    for _ in range(8):
        m, n, k = (int(x) for x in rng.integers(1, 5000, size=3))
        for chip in ("ascend910b3", "h200"):
            res = tiler.search(op="matmul", chip=chip, shape=f"M={m},N={n},K={k}", top=1)
            for t, c in res.runnable.choices.items():
                own = tiler.search(op="matmul", chip=chip, shape=f"M={m},N={n},K={k}", target=t, top=1)
                assert c.time_us == pytest.approx(own.row(0)["time_us"], rel=1e-12), (chip, m, n, k, t)
                same += c.same_as_best
                searched += not c.same_as_best
    assert same and searched  # both paths were taken


def test_target_search_reports_its_gap_to_the_unconstrained_best():
    res = tiler.search(op="matmul", chip="ascend910b3", shape="M=4096,N=4096,K=4096", target="catlass", top=1)
    doc = res.document()
    free = tiler.search(op="matmul", chip="ascend910b3", shape="M=4096,N=4096,K=4096", top=1, runnable=False)
    assert set(doc["runnable"]) == {"catlass"} and doc["custom_kernel"] is False
    assert doc["runnable"]["catlass"]["gap"] == pytest.approx(res.row(0)["time_us"] / free.row(0)["time_us"])


def test_targets_that_cannot_run_say_why():
    doc = tiler.search(op="matmul", chip="ascend910a", shape="M=1024,N=1024,K=1024", top=1).document()
    assert "catlass" not in doc["targets"] and "Atlas A2" in doc["no_view"]["catlass"]
    assert "ascendc" in doc["targets"]
    pinned = tiler.search(
        op="matmul", chip="ascend910b3", shape="M=1024,N=1024,K=1024", fix={"core_split": "walk"}, top=1
    ).document()
    assert "ascendc" in pinned["no_view"] and "core_split" in pinned["no_view"]["ascendc"]
    assert "catlass" in pinned["targets"]


def test_sweep_libraries_keep_each_targets_answer(tmp_path):
    shapes = pd.DataFrame([{"M": m, "N": n, "K": k, "layout": "nt"} for m, n, k in LLM[:4]])
    rep = tiler.sweep(
        shapes, op="matmul", chips="ascend910b3", out=tmp_path / "s.csv", library=tmp_path / "l.json"
    )
    table = rep.table()
    assert list(table["runnable"]) == ["catlass,ascendc"] * 4
    assert (table["catlass_gap"].astype(float) >= 1 - 1e-12).all()
    lib = json.loads((tmp_path / "l.json").read_text())
    for entry, (_, row) in zip(lib["entries"], table.iterrows(), strict=True):
        assert set(entry["targets"]) == set(entry["runnable"]) == {"catlass", "ascendc"}
        assert entry["runnable"]["catlass"]["time_us"] == pytest.approx(float(row["catlass_time_us"]))
    assert main(["check", str(tmp_path / "l.json")]) == 0
    hit = tiler.lookup(str(tmp_path / "l.json"), shape="M=20,N=6144,K=4096,layout=nt")
    assert set(hit["targets"]) == {"catlass", "ascendc"} and "runnable" in hit  # lookup keeps the views
