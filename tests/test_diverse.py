"""The diverse top-k (docs/search.md, "Diverse top-k"): the best tiling per distinct tile shape, with a hedge on the
pipeline depth 4th (the best tile's runner-up for operators without a depth knob), measured first."""

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
from tiler.search import DIVERSE_FACTOR, diverse_order, diverse_top, search
from tiler.search.result import HEDGE_GAP
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
            # a depth knob is a knob of the operator and not part of the tile shape
            assert not model.DEPTH_KNOB or model.DEPTH_KNOB in set(model.KNOBS) - set(model.SHAPE_KNOBS)
    assert get_operator("matmul", "cuda").DEPTH_KNOB == "num_stages"


def test_plain_top4_repeats_a_tile_the_diverse_top4_does_not(h200):
    chip, space = h200
    p = problem()
    plain = search(p, chip, space, "exhaustive", top=4)
    div = search(p, chip, space, "exhaustive", top=4, diverse=True)
    assert len(set(shapes(plain))) < 3  # one tile with several stage counts
    # three distinct tiles, then the depth hedge: the fewest stages among the two best tiles' tilings of the pool
    # (the model's top 32) predicted within HEDGE_GAP of the best, not one already listed
    assert len(set(shapes(div)[:3])) == 3 and len(div.est["time_us"]) == 4
    pool = search(p, chip, space, "exhaustive", top=DIVERSE_FACTOR * 4)
    near = [
        i
        for i in range(len(pool.est["time_us"]))
        if shapes(pool)[i] in shapes(div)[:2]
        and pool.est["time_us"][i] <= pool.est["time_us"][0] * (1 + HEDGE_GAP)
    ]
    stages = [int(pool.cands["num_stages"][i]) for i in near]
    assert shapes(div)[3] in shapes(div)[:2] and div.tiling(3) not in [div.tiling(i) for i in range(3)]
    assert (
        div.tiling(3)["num_stages"] == min(stages) < max(stages)
    )  # a shallower pipeline than the model's best
    assert div.tiling(3)["num_stages"] < div.tiling(shapes(div).index(shapes(div)[3]))["num_stages"]
    assert div.tiling(3) != plain.tiling(1)  # not the runner-up of session 10's rule
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


def test_diverse_order_depth_hedge():
    # tiles a (rows 0, 1, 3), b (2, 4), c (5), d (6); stages per row
    cands = {"a": np.array([1, 1, 2, 1, 2, 3, 4]), "s": np.array([8, 7, 6, 3, 2, 1, 1])}
    t = np.array([1.0, 1.01, 1.02, 1.04, 1.06, 1.07, 1.08])
    order, gap = diverse_order(cands, t, ("a",), "s", hedge_gap=0.05)
    # shapes a, b, c; the hedge: the fewest stages among tiles a and b within 5 % (row 3: 3 stages; row 4 has 2
    # but is 6 % behind)
    assert list(order) == [0, 2, 5, 3, 6, 1, 4]  # then the 4th shape (d), then the rest
    assert np.allclose(gap, t[order])
    assert HEDGE_GAP > 0.06  # the shipped gap takes row 4
    assert list(diverse_order(cands, t, ("a",), "s")[0]) == [0, 2, 5, 4, 6, 1, 3]
    # the third tile (c, 1 stage) is not a hedge candidate; nothing within the gap: the runner-up
    assert list(diverse_order(cands, t, ("a",), "s", hedge_gap=0.005)[0]) == [0, 2, 5, 1, 6, 3, 4]
    # no depth knob (or not in the table): the runner-up, as before
    assert list(diverse_order(cands, t, ("a",))[0]) == [0, 2, 5, 1, 6, 3, 4]
    assert list(diverse_order({"a": cands["a"]}, t, ("a",), "s")[0]) == [0, 2, 5, 1, 6, 3, 4]
    # equal stages: the faster one
    same = {"a": cands["a"], "s": np.array([8, 3, 6, 3, 2, 1, 1])}
    assert list(diverse_order(same, t, ("a",), "s", hedge_gap=0.05)[0])[3] == 1


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
    assert got == shapes(want) and len(set(got)) == 3 and got[3] in got[:2]
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
    assert div["row"].iloc[0] == plain["row"].iloc[0]
    # the 4th: the depth hedge, a shallower pipeline of one of the two best tiles (the search's own diverse 4th)
    want = search(problem(), chip, space, "exhaustive", top=4, diverse=True).tiling(3)
    assert all(div[k].iloc[3] == want[k] for k in want if k != "ORDER")  # ORDER: a name there, a code here
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
