"""The diverse top-k (docs/search.md, "Diverse top-k"): the best tiling per distinct tile shape, with the best
tile's runner-up 4th, measured first."""

from __future__ import annotations

import io

import numpy as np
import optuna
import pandas as pd
import pytest

from tiler.cli import main
from tiler.hardware import load_chip
from tiler.operator import get_operator
from tiler.problem import parse_problem
from tiler.search import diverse_order, diverse_top, search
from tiler.space import load_space

SHAPE = ("BLOCK_M", "BLOCK_N", "BLOCK_K", "SPLIT_K")


@pytest.fixture(scope="module")
def h200():
    return load_chip("h200"), load_space("matmul", "cuda")


def problem(M=4096, N=4096, K=4096):
    return parse_problem("matmul", {"M": M, "N": N, "K": K})


def shapes(res):
    return [tuple(int(res.cands[k][i]) for k in SHAPE) for i in range(len(res.est["time_us"]))]


def test_operators_name_their_shape_knobs(h200):
    assert get_operator("matmul", "cuda").SHAPE_KNOBS == SHAPE
    for op in ("matmul", "flash_attention", "softmax", "depthwise_conv"):
        for family in ("cuda", "ascend"):
            model = get_operator(op, family)
            assert model.SHAPE_KNOBS and set(model.SHAPE_KNOBS) <= set(model.KNOBS), (op, family)


def test_plain_top4_repeats_a_tile_the_diverse_top4_does_not(h200):
    chip, space = h200
    p = problem()
    plain = search(p, chip, space, "exhaustive", top=4)
    div = search(p, chip, space, "exhaustive", top=4, diverse=True)
    assert len(set(shapes(plain))) < 3  # one tile with several stage counts
    # three distinct tiles, then the best tile again with its second-best schedule (its runner-up)
    assert len(set(shapes(div)[:3])) == 3 and len(div.est["time_us"]) == 4
    assert shapes(div)[3] == shapes(div)[0] and div.tiling(3) != div.tiling(0)
    assert div.tiling(3) == plain.tiling(1)  # the plain runner-up is the best tile's here
    assert div.tiling(0) == plain.tiling(0) and div.est["time_us"][0] == plain.est["time_us"][0]
    gap = div.est["gap"]
    assert gap[0] == pytest.approx(1.0) and np.all(gap >= 1) and np.all(np.diff(gap[:3]) >= 0)
    assert np.allclose(gap, div.est["time_us"] / plain.est["time_us"][0])
    assert any("diverse top-4" in n for n in div.notes)
    # the default (no guided search) is the plain ranking: existing outputs do not change
    assert shapes(search(p, chip, space, "exhaustive", top=4)) == shapes(plain)


def test_diverse_order_rule():
    cands = {"a": np.array([1, 1, 2, 1, 3, 2]), "b": np.array([0, 0, 0, 1, 0, 0])}
    t = np.array([1.0, 1.1, 1.2, 1.3, 1.4, 1.5])
    order, gap = diverse_order(cands, t, ("a", "b"))
    # best per shape in predicted order (0, 2, 3, 4), the best shape's runner-up (1) 4th, then the rest
    assert list(order) == [0, 2, 3, 1, 4, 5]
    assert np.allclose(gap, t[order] / 1.0)
    order, _ = diverse_order({"a": np.array([1, 1, 2, 2, 1])}, t[:5], ("a",))
    assert list(order) == [0, 2, 1, 3, 4]  # two shapes only: the runner-up right after them
    order, _ = diverse_order({"a": np.array([1, 2, 3, 4, 5])}, t[:5], ("a",))
    assert list(order) == [0, 1, 2, 3, 4]  # the best shape has no second tiling: nothing moves
    order, _ = diverse_order(cands, t, ())  # no shape knobs: the plain ranking
    assert list(order) == list(range(6))


def test_guided_search_measures_the_diverse_order_first(h200):
    chip, space = h200
    p = problem(2048, 2048, 2048)
    want = diverse_top(p, chip, space, 4)
    storage = optuna.storages.InMemoryStorage()
    r = search(
        p,
        chip,
        space,
        "tpe",
        seed=0,
        trials=5,
        storage=storage,
        study_name="d",
        guided=4,
        measure=lambda doc: doc["estimate"]["time_us"],
    )
    trials = optuna.load_study(study_name="d", storage=storage).trials
    assert [t.user_attrs.get("source") for t in trials[:4]] == ["guided"] * 4
    got = [tuple(t.user_attrs["tiling"][k] for k in SHAPE) for t in trials[:4]]
    assert got == shapes(want) and len(set(got)) == 3 and got[3] == got[0]
    assert any(n.startswith("guided: model diverse top-4 measured first") for n in r.notes)
    # --plain: the model's plain top-4
    storage = optuna.storages.InMemoryStorage()
    search(
        p,
        chip,
        space,
        "tpe",
        seed=0,
        trials=4,
        storage=storage,
        study_name="p",
        guided=4,
        diverse=False,
        measure=lambda doc: doc["estimate"]["time_us"],
    )
    plain = search(p, chip, space, "exhaustive", top=4)
    trials = optuna.load_study(study_name="p", storage=storage).trials
    got = [tuple(t.user_attrs["tiling"][k] for k in space.names if k != "ORDER") for t in trials[:4]]
    assert got == [tuple(int(plain.cands[k][i]) for k in space.names if k != "ORDER") for i in range(4)]


def test_rank_diverse_from_the_cli(h200, tmp_path, capsys):
    chip, space = h200
    res = search(problem(), chip, space, "exhaustive", top=20)
    rows = pd.DataFrame([res.tiling(i) for i in range(20)])
    path = tmp_path / "c.csv"
    rows.to_csv(path, index=False)
    args = ["rank", "--op", "matmul", "--chip", "h200", "--shape", "M=4096,N=4096,K=4096"]
    args += ["--candidates", str(path), "--top", "4", "--format", "json"]
    assert main(args) == 0
    plain = pd.read_json(io.StringIO(capsys.readouterr().out))
    assert len(plain) == 4 and "gap" not in plain
    assert main(args + ["--diverse"]) == 0
    div = pd.read_json(io.StringIO(capsys.readouterr().out))
    assert len(div) == 4 and len({tuple(r[k] for k in SHAPE) for _, r in div.head(3).iterrows()}) == 3
    assert len({tuple(r[k] for k in SHAPE) for _, r in plain.iterrows()}) < 3
    assert div["row"].iloc[0] == plain["row"].iloc[0] and div["row"].iloc[3] == plain["row"].iloc[1]
    assert div["gap"].iloc[0] == pytest.approx(1.0) and (div["gap"].head(3).diff().dropna() >= 0).all()
    # tiler search --diverse shows the gap
    assert (
        main(
            ["search", "--op", "matmul", "--chip", "h200", "--shape", "M=4096,N=4096,K=4096"]
            + ["--top", "4", "--diverse"]
        )
        == 0
    )
    assert " x1.0" in capsys.readouterr().out
