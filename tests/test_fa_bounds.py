"""The flash-attention models' branch-and-bound floors (quick_bound of tiler/ops/flash_attention/cuda.py and
ascend.py).

A floor above the estimate of one candidate could cut the optimum, so, on every feasible tiling of shapes that cover
causal and full attention, decode (one query), grouped K/V heads, sequences not a multiple of the blocks and long
causal prefill, on four GPUs and four Ascend chips, with the shipped constants and with constants drawn across the
boxes `tiler calibrate` fits them in (Ascend: its guessed constants scaled 4x either way):

* quick_bound <= the estimate of every candidate;
* the exhaustive search (which now runs the branch and bound for this operator) returns the same top tilings and
  times as scoring every feasible tiling, and on a long causal grid it scores only part of them.
"""

from __future__ import annotations

import numpy as np
import pytest

from tiler.hardware import load_chip
from tiler.operator import get_operator, tie_preference
from tiler.ops.flash_attention import ascend as fa_ascend
from tiler.ops.flash_attention import cuda as fa
from tiler.problem import parse_problem
from tiler.search import search
from tiler.search.proven import enumerate_feasible
from tiler.search.result import top_distinct
from tiler.space import load_space, take

CHIPS = ("h200", "h100", "a100", "h20")
# (B, heads, kv_heads, S1, S2, D, causal); the second group has grids of a few programs per slot, whose deal ends
# with a long tail at lower residency: a floor that took full residency throughout would exceed their estimates
SHAPES = (
    (1, 32, 8, 4096, 4096, 128, 1),
    (2, 16, 16, 1000, 3000, 64, 1),
    (64, 32, 8, 1, 8192, 128, 0),
    (4, 40, 8, 333, 333, 128, 0),
    (1, 64, 8, 16384, 16384, 128, 1),
    (8, 8, 1, 100, 100, 16, 1),
    (16, 32, 32, 2048, 2048, 64, 0),
    (16, 1, 1, 512, 512, 64, 0),
    (2, 32, 8, 333, 2048, 64, 1),
    (2, 64, 2, 64, 64, 128, 0),
    (16, 16, 8, 333, 333, 64, 1),
    (1, 64, 8, 333, 333, 64, 1),
)
FIELDS = ("B", "heads", "kv_heads", "S1", "S2", "D", "causal")
MODEL = get_operator("flash_attention", "cuda")
SPACE = load_space("flash_attention", "cuda")
ASCEND = ("ascend910b3", "ascend910b1", "ascend310p3", "ascend910a")
EPS = 1e-12  # float slack only: the floor is already scaled down by 1e-9


def _problem(shape):
    return parse_problem("flash_attention", dict(zip(FIELDS, shape, strict=True)))


def _constants(chip, rng) -> dict:
    """Constants drawn log-uniformly in the boxes calibration fits them in (cuda); the Ascend model's guessed
    constants (it fits none) each scaled up to 4x either way."""
    if chip.family == "cuda":
        return {k: float(np.exp(rng.uniform(np.log(lo), np.log(hi)))) for k, (lo, hi) in fa.FITTABLE.items()}
    return {k: v * float(np.exp(rng.uniform(-1.4, 1.4))) for k, v in fa_ascend.CONSTANTS.items()}


@pytest.mark.slow
@pytest.mark.parametrize("chip_id", CHIPS + ASCEND)
def test_quick_bound_never_exceeds_the_estimate(chip_id):
    """cuda: the busiest slot's floor; Ascend: both core splits deal the same total work, so the busiest core is
    at least the mean one."""
    rng = np.random.default_rng(len(chip_id))
    checked = 0
    # each shape with the shipped constants, then at once again with other constants (drawn in the shapes' order):
    # the second estimate of a shape reuses the deal of its grids (the deal does not read the constants), which
    # the model keeps for its latest grids only
    for shape, other in ((shape, other) for shape in SHAPES for other in (False, True)):
        chip = load_chip(chip_id)
        if other:
            chip = chip.with_values(_constants(chip, rng))
        model = get_operator("flash_attention", chip.family)
        p = _problem(shape)
        c, _, _ = enumerate_feasible(p, chip, load_space("flash_attention", chip.family), model, None)
        if not len(next(iter(c.values()))):
            continue
        t = model.estimate(p, chip, c)["time_us"]
        q = model.quick_bound(p, chip, c)
        bad = np.flatnonzero(q > t * (1 + EPS))
        assert bad.size == 0, (shape, chip_id, {k: v[bad[0]] for k, v in c.items()}, q[bad[0]], t[bad[0]])
        assert np.all(q > 0)
        checked += t.size
    assert checked > 5000


def test_the_floor_is_close_where_the_deal_is_long():
    """The floor is useful, not only valid: on a long causal grid (hundreds of programs per slot, so every slot ends
    within a few per cent of the others) the fastest tiling's floor is within 10 % of its estimate; the floor without
    full residency (the least step_r) would be about half of it on two resident programs."""
    chip = load_chip("h200")
    p = _problem((1, 64, 8, 16384, 16384, 128, 1))
    c, _, _ = enumerate_feasible(p, chip, SPACE, MODEL, None)
    t = MODEL.estimate(p, chip, c)["time_us"]
    best = int(np.argmin(t))
    assert MODEL.quick_bound(p, chip, take(c, [best]))[0] > 0.9 * t[best]


@pytest.mark.parametrize("chip_id", ["h200", "ascend910b3"])
@pytest.mark.parametrize("shape", SHAPES[:5])
def test_search_equals_scoring_every_tiling(shape, chip_id):
    chip = load_chip(chip_id)
    model = get_operator("flash_attention", chip.family)
    space = load_space("flash_attention", chip.family)
    p = _problem(shape)
    c, _, _ = enumerate_feasible(p, chip, space, model, None)
    t = model.estimate(p, chip, c)["time_us"]
    order = top_distinct(c, t, space.names, 5, tie_preference(model, p, chip, c))
    res = search(p, chip, space, top=5)
    assert np.array_equal(res.est["time_us"], t[order])
    for k in space.names:
        assert np.array_equal(res.cands[k], c[k][order]), k
    assert res.evaluated < res.feasible  # the floor cuts part of the space


def test_a_long_causal_search_scores_part_of_the_space():
    """The branch and bound is in effect for this operator (it has no schedule knobs): rows whose floor is above
    the top-5 time are never scored, most of the space on a long causal grid."""
    chip = load_chip("h200")
    p = _problem((1, 64, 8, 16384, 16384, 128, 1))
    res = search(p, chip, SPACE, top=5)
    assert res.evaluated < 0.5 * res.feasible


def test_hull_is_the_upper_right_front_of_the_distinct_points():
    """fa.hull against its definition, on slot tallies with many repeated points (a greedy deal gives many slots the
    same count and steps): the distinct points (np.unique), sorted by count then steps, both descending, the points
    with more steps than every point of a larger count, the extremes and evenly spaced ones kept when there are
    more than HULL, padded by repeating the first."""

    def front(count, steps, k=fa.HULL):
        pts = np.unique(np.stack([count, steps], axis=1), axis=0)
        pts = pts[np.lexsort((-pts[:, 1], -pts[:, 0]))]
        keep = pts[np.r_[True, pts[1:, 1] > np.maximum.accumulate(pts[:-1, 1])]]
        if len(keep) > k:
            keep = keep[np.unique(np.linspace(0, len(keep) - 1, k).round().astype(int))]
        return np.concatenate([keep, np.repeat(keep[:1], k - len(keep), axis=0)])

    rng = np.random.default_rng(5)
    for n in (1, 2, 7, 132, 1056):
        for _ in range(40):
            count = rng.integers(1, 1 + int(rng.integers(1, 30)), n).astype(np.float64)
            steps = count * rng.integers(1, 6, n) + rng.integers(0, 3, n) * rng.integers(0, 2)
            got = fa.hull(count, steps)
            assert got.dtype == np.float64 and np.array_equal(got, front(count, steps)), (count, steps)
