"""Scoring what the user has: partial tilings completed by the model, target-native names, a document's dtype."""

from __future__ import annotations

import json

import pandas as pd
import pytest

import tiler
from tiler.cli import main
from tiler.errors import TilerError

SHAPE = "M=4096,N=4096,K=4096"


def test_partial_tiling_is_completed_with_the_best_choice_given_the_rest():
    given = {"BLOCK_SIZE_M": 64, "BLOCK_N": 64, "num_warps": 4}
    ex = tiler.explain(op="matmul", chip="h200", shape=SHAPE, tiling=given)
    assert ex.tiling["BLOCK_M"] == 64 and ex.tiling["BLOCK_N"] == 64 and ex.tiling["num_warps"] == 4
    assert ex.completed == [k for k in ex.space.names if k not in ("BLOCK_M", "BLOCK_N", "num_warps")]
    # the completion is the pinned space's optimum: no completion of the same given knobs is predicted faster
    pinned = tiler.search(
        op="matmul",
        chip="h200",
        shape=SHAPE,
        fix={"BLOCK_M": 64, "BLOCK_N": 64, "num_warps": 4},
        top=50,
        runnable=False,
    )
    assert ex.row["time_us"] == pytest.approx(min(pinned.est["time_us"]))
    free = tiler.search(op="matmul", chip="h200", shape=SHAPE, top=1, runnable=False)
    assert ex.row["time_us"] > free.row(0)["time_us"]  # 64x64 tiles are not the best tile on this shape


def test_whole_tiling_is_not_completed_and_keeps_its_values():
    best = tiler.search(op="matmul", chip="ascend910b3", shape=SHAPE, top=1, runnable=False)
    ex = tiler.explain(op="matmul", chip="ascend910b3", shape=SHAPE, tiling=best.document()["tiling"])
    assert ex.completed == [] and ex.tiling == best.tiling(0)
    assert ex.row["time_us"] == pytest.approx(best.row(0)["time_us"])


def test_unknown_name_in_a_partial_tiling_is_refused(capsys):
    with pytest.raises(TilerError, match=r"unknown name\(s\) 'bas_m'"):
        tiler.explain(op="matmul", chip="ascend910b3", shape=SHAPE, tiling={"bas_m": 128, "base_n": 128})
    assert (
        main(["explain", "--op", "matmul", "--chip", "h200", "--shape", SHAPE, "--tiling", '{"BLOK_M": 64}'])
        == 2
    )
    err = capsys.readouterr().err
    assert err.startswith("error: --tiling: unknown name(s) 'BLOK_M'") and err.count("\n") == 1


def test_a_completion_that_cannot_fit_says_so():
    # a 256x256 fp32 accumulator needs 256 KiB of L0C: no completion of these knobs fits a 910B3
    with pytest.raises(TilerError, match="no completion of the given knobs"):
        tiler.explain(op="matmul", chip="ascend910b3", shape=SHAPE, tiling={"base_m": 256, "base_n": 256})


def test_explain_uses_the_documents_dtype(tmp_path, capsys):
    doc = tiler.search(
        op="matmul", chip="ascend910b3", shape="M=512,N=512,K=512", dtype="bf16", top=1
    ).document()
    ex = tiler.explain(op="matmul", chip="ascend910b3", shape="M=512,N=512,K=512", tiling=doc)
    assert ex.problem.dtype == "bf16"
    with pytest.raises(TilerError, match="dtype: the tiling document is for bf16"):
        tiler.explain(op="matmul", chip="ascend910b3", shape="M=512,N=512,K=512", tiling=doc, dtype="fp16")
    path = tmp_path / "t.json"
    path.write_text(json.dumps(doc))
    args = ["explain", "--op", "matmul", "--chip", "ascend910b3", "--shape", "M=512,N=512,K=512"]
    assert main([*args, "--tiling", str(path), "--format", "json"]) == 0
    assert json.loads(capsys.readouterr().out)["problem"]["dtype"] == "bf16"


def test_rank_completes_missing_columns_per_row():
    rows = pd.DataFrame(
        {"BLOCK_SIZE_M": [128, 64, 128], "BLOCK_SIZE_N": [128, 64, 256], "num_warps": [4, 4, 8]}
    )
    ranked, rejected = tiler.rank(op="matmul", chip="h200", shape=SHAPE, candidates=rows)
    assert len(ranked) == 3 and len(rejected) == 0
    assert set(ranked["completed"]) == {"BLOCK_K num_stages GROUP_M ORDER SPLIT_K TEMPLATE TAIL_SPLIT"}
    for _, r in ranked.iterrows():  # each row is its own given knobs' best completion
        ex = tiler.explain(
            op="matmul",
            chip="h200",
            shape=SHAPE,
            tiling={"BLOCK_M": r["BLOCK_SIZE_M"], "BLOCK_N": r["BLOCK_SIZE_N"], "num_warps": r["num_warps"]},
        )
        assert r["predicted_us"] == pytest.approx(ex.row["time_us"])
    assert list(ranked["rank"]) == [1, 2, 3]


def test_a_catlass_view_scores_as_the_catlass_search_found_it():
    """The CATLASS view a search exported, read back in CATLASS's names, is that tiling: explained, it predicts
    the catlass search's time, and its completion stays inside what CATLASS runs."""
    res = tiler.search(
        op="matmul", chip="ascend910b3", shape="M=2048,N=6144,K=4096,layout=nt", target="catlass", top=1
    )
    view = res.document()["targets"]["catlass"]
    ex = tiler.explain(op="matmul", chip="ascend910b3", shape="M=2048,N=6144,K=4096,layout=nt", tiling=view)
    assert list(ex.native) == ["catlass"] and "L1TileShape" in ex.native["catlass"]
    assert ex.row["time_us"] == pytest.approx(res.row(0)["time_us"])
    assert "catlass" in ex.document()["targets"]


def test_a_partial_catlass_config_is_completed_within_catlass():
    given = {
        "L1TileShape": [128, 256, 128],
        "L0TileShape": [128, 256, 64],
        "L1_STAGES": 2,
        "PRELOAD_STAGES": 1,
    }
    ex = tiler.explain(op="matmul", chip="ascend910b3", shape=SHAPE, tiling=given)
    assert (
        ex.completed and "catlass" in ex.document()["targets"]
    )  # the completed tiling still runs on CATLASS
    t = ex.tiling
    assert (t["base_m"], t["base_n"], t["base_k"], t["step_ka"], t["l1_stages"]) == (128, 256, 64, 2, 2)


def test_tcube_names_and_mixed_names():
    ex = tiler.explain(
        op="matmul",
        chip="ascend910b3",
        shape=SHAPE,
        target="ascendc",
        tiling={"baseM": 128, "baseN": 256, "baseK": 64, "stepKa": 4, "stepKb": 4},
    )
    assert (ex.tiling["base_m"], ex.tiling["step_ka"], ex.tiling["core_split"]) == (128, 4, "block")
    assert "ascendc" in ex.native and ex.completed
    with pytest.raises(TilerError, match="names of two targets mixed"):
        tiler.explain(
            op="matmul", chip="ascend910b3", shape=SHAPE, tiling={"baseM": 128, "L1TileShape": [64, 256, 128]}
        )
