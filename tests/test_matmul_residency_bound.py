"""The Ascend matmul bound's weight-residency term: B loads on every tile but the most a schedule can reuse, those
reuses put on the tile types whose load costs most (ascend_bounds._load_floor), with the exact reuse maximum over
the allowed walks and the block split on every grid size."""

from __future__ import annotations

import numpy as np
import pytest
from conftest import mm

from tiler.hardware import load_chip
from tiler.operator import get_operator
from tiler.ops.matmul import ascend_bounds
from tiler.search import enumerate_feasible
from tiler.space import load_space, product, take


def _case(chip_id: str, shape: tuple, n: int = 120):
    """Random enumerated tilings with weight residency on, and each one's best time per core split."""
    chip = load_chip(chip_id)
    space = load_space("matmul", "ascend")
    model = get_operator("matmul", "ascend")
    p = mm(*shape)
    table, _, _ = enumerate_feasible(p, chip, space, model)
    res = np.flatnonzero(table["weight_resident"] == 1)
    rows = take(table, np.random.default_rng(sum(shape)).choice(res, size=min(n, res.size), replace=False))
    names = list(model.SCHEDULE_KNOBS)
    sched = space.product(names)
    exact = model.estimate(p, chip, product(rows, sched))["time_us"].reshape(len(rows["base_m"]), -1)
    best = {split: exact[:, sched["core_split"] == split].min(axis=1) for split in (0, 1)}
    return model, p, chip, rows, space.domains(names), best


def _bounds(model, p, chip, rows, doms) -> dict:
    return {split: model.bound(p, chip, rows, {**doms, "core_split": (split,)}) for split in (0, 1)}


# one row of tiles or a few (M below a block or two), an odd N (a last column one element wide), split-K: the
# class where the cheapest type's extra (that one-column tile's) once stood for every load
SHAPES = [
    ("ascend910b4", (127, 8193, 1024)),
    ("ascend910a", (127, 8193, 2048)),
    ("ascend910b4", (300, 5000, 777)),
]


@pytest.mark.parametrize("chip_id, shape", SHAPES)
def test_residency_bound_stays_below_each_splits_best_schedule(chip_id, shape):
    model, p, chip, rows, doms, best = _case(chip_id, shape)
    bounds = _bounds(model, p, chip, rows, doms)
    for split in (0, 1):
        assert np.all(bounds[split] <= best[split] * (1 + 1e-9)), split
    assert np.all(model.bound(p, chip, rows, doms) <= np.minimum(best[0], best[1]) * (1 + 1e-9))


def test_residency_bound_rises_over_the_cheapest_extra_and_fails_past_the_truth(monkeypatch):
    """The knapsack floor lifts the bound well above charging every load the cheapest type's extra on this class
    (so the search scores far fewer tilings), and the admissibility check above bites: with no reuse at all (every
    tile loading its B panel, more than a walk or block split that reuses pays) the bound rises above some best
    schedule."""
    model, p, chip, rows, doms, best = _case("ascend910b4", (127, 8193, 1024))
    tight = _bounds(model, p, chip, rows, doms)

    def cheapest(counts, extra, reuse):  # the former term: every load at the cheapest present type's extra
        low = np.where(counts > 0, extra, np.inf).min(axis=1)
        return np.maximum(counts.sum(axis=1) - reuse, 0) * np.where(np.isfinite(low), low, 0.0)

    with monkeypatch.context() as m:
        m.setattr(ascend_bounds, "_load_floor", cheapest)
        loose = _bounds(model, p, chip, rows, doms)
    for split in (0, 1):
        assert np.all(tight[split] >= loose[split] * (1 - 1e-12))
    assert np.mean(tight[1] > 1.5 * loose[1]) >= 0.1
    with monkeypatch.context() as m:
        m.setattr(type(model), "_reuse_max", lambda self, p, chip, c, *a: np.zeros(len(c["base_m"])))
        over = _bounds(model, p, chip, rows, doms)
    assert any(np.any(over[s] > best[s] * (1 + 1e-9)) for s in (0, 1))


def test_load_floor_puts_reuses_on_the_costliest_types():
    """Two types, 10 tiles of extra 1 and 5 of extra 4, 6 reuses: 5 on the costly type, 1 on the cheap one."""
    counts = np.array([[10.0, 5.0], [10.0, 5.0], [10.0, 0.0]])
    extra = np.array([[1.0, 4.0], [1.0, 4.0], [1.0, 9.0]])
    out = ascend_bounds._load_floor(counts, extra, np.array([6.0, 0.0, 20.0]))
    assert out.tolist() == [9.0, 30.0, 0.0]


def test_b_reuse_ceiling_is_at_or_above_every_walks_count():
    """schedule.b_reuse_ceiling on random grids and core counts: at or above the walk's own count of tiles whose
    core's previous tile (cores positions back) has the same column, for every setting; equal in direction 1
    (exact there) and on one-column grids; and its maximum over the settings at or above max_b_reuse's."""
    from tiler.model.schedule import b_reuse_ceiling, max_b_reuse, walk_settings, walks

    doms = ((1, 2, 3, 4, 8), (0, 1), (0, 1))
    settings = walk_settings(*doms)
    rng = np.random.default_rng(5)
    exact_somewhere = 0
    for _ in range(150):
        gm, gn = (int(x) for x in rng.integers(1, 50, 2))
        cores = int(rng.choice([2, 4, 8, 20, 24, 30, 32]))
        _, col = walks(gm, gn, settings)
        walked = (
            (col[:, cores:] == col[:, :-cores]).sum(axis=1) if gm * gn > cores else np.zeros(len(settings))
        )
        ceiling = b_reuse_ceiling(gm, gn, cores, *doms)[:, 0]
        assert np.all(ceiling >= walked), (gm, gn, cores)
        assert np.array_equal(ceiling[settings[:, 1] == 1], walked[settings[:, 1] == 1])
        if gn == 1:
            assert np.array_equal(ceiling, walked)
        assert ceiling.max() >= max_b_reuse(gm, gn, 1, 1, cores, *doms)
        exact_somewhere += ceiling.max() == walked.max()
    assert exact_somewhere > 75  # the ceiling is the walks' own maximum on most grids
