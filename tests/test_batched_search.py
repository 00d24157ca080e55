"""The exhaustive search's batched branch and bound (few large estimate/bound calls) against brute force: on small
spaces its top-N tilings and times are those of scoring its whole candidate set (every feasible, non-dominated
tiling with every schedule) in one batch."""

from __future__ import annotations

import numpy as np
import pytest
from conftest import mm, restrict

from tiler.hardware import load_chip
from tiler.operator import get_operator, tie_preference
from tiler.search import enumerate_feasible, search, top_distinct
from tiler.space import product, take

SMALL = {
    "base_m": [16, 64, 128],
    "base_n": [16, 32, 128, 256],
    "base_k": [16, 32, 64],
    "step_m": [1, 2],
    "step_ka": [1, 4],
    "step_kb": [1, 2],
    "swizzle_offset": [1, 3],
    "split_k": [1, 4],
}


def _brute_force(problem, chip, space, top):
    """The search's own candidate set scored in one batch: every feasible, non-dominated tiling (the enumeration,
    no prefix or bound pruning) with every schedule that is not the twin of another: (the top-`top` rows in
    top_distinct's order, their times)."""
    model = get_operator(space.op, space.family)
    table, _, _ = enumerate_feasible(problem, chip, space, model)
    sched = [k for k in model.SCHEDULE_KNOBS if k in space.knobs]
    full = product(table, space.product(sched))
    full = take(full, ~model.dominated(problem, chip, full, space.domains()))
    t = model.estimate(problem, chip, full)["time_us"]
    order = top_distinct(full, t, space.names, top, tie_preference(model, problem, chip, full))
    return take(full, order), t[order]


@pytest.mark.parametrize("chip_id", ["ascend910b3", "ascend310p3"])
@pytest.mark.parametrize(
    "shape", [(12, 2, 1), (1, 5, 5286), (256, 512, 1024), (1000, 300, 4096), (64, 64, 65536), (3000, 77, 640)]
)
@pytest.mark.parametrize("top", [1, 5])
def test_batched_search_equals_brute_force(ascend_space, chip_id, shape, top):
    """Same top-`top` tilings and times as scoring the whole candidate set at once: the bounds, the batching and
    the prefix cuts lose nothing, exact ties included (rows whose bound equals the incumbent are still scored)."""
    chip = load_chip(chip_id)
    space = restrict(ascend_space, SMALL)
    p = mm(*shape)
    want_c, want_t = _brute_force(p, chip, space, top)
    res = search(p, chip, space, top=top)
    assert res.proven_optimal
    np.testing.assert_allclose(res.est["time_us"], want_t, rtol=1e-9, atol=0)
    for k in space.names:
        np.testing.assert_array_equal(res.cands[k], want_c[k], err_msg=k)
