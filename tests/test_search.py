"""The exhaustive search against brute force: dominance, resolved knobs and the bound must never lose the optimum."""

from __future__ import annotations

import numpy as np
import pytest
from conftest import mm, read_only, restrict

from tiler.errors import InfeasibleError, SpaceError
from tiler.operator import get_operator
from tiler.search import enumerate_feasible, search
from tiler.space import load_space, take

SMALL = {
    "base_m": [16, 64, 128],
    "base_n": [32, 128, 256],
    "base_k": [32, 64],
    "step_ka": [1, 4],
    "step_kb": [1, 2],
    "swizzle_offset": [1, 3],
    "split_k": [1, 4],
}


def _brute_force(problem, chip, space, cand):
    """The best time over every feasible point of `cand` (every point of `space`), and how many are feasible."""
    model = get_operator(space.op, space.family)
    ok = np.logical_and.reduce(list(model.feasible(problem, chip, cand).values()))
    cand = take(cand, ok)
    est = model.estimate(problem, chip, cand)
    return float(est["time_us"].min()), len(cand["base_m"])


@pytest.fixture(scope="module")
def small_space(ascend_space):
    """The SMALL space and every point of it (4.7 M rows: built once for the module's brute-force tests, not once
    per shape; read-only: the model reads candidates, never writes them)."""
    space = restrict(ascend_space, SMALL)
    return space, read_only(space.product(space.names))


@pytest.mark.parametrize("shape", [(256, 512, 1024), (1000, 300, 4096), (64, 64, 65536), (2048, 2048, 512)])
def test_exhaustive_equals_brute_force(b3, small_space, shape):
    """Same optimum as scoring every point of a small space one by one (the pruning is exact)."""
    space, every = small_space
    p = mm(*shape)
    best, n = _brute_force(p, b3, space, every)
    res = search(p, b3, space)
    assert res.proven_optimal
    assert res.row(0)["time_us"] == pytest.approx(best, rel=1e-9)
    assert res.evaluated < n  # the bound pruned something


def test_pinned_knobs_respected(b3, ascend_space):
    res = search(mm(2048, 2048, 2048), b3, ascend_space.pin({"base_m": "64", "tail_split": "auto"}), top=3)
    for i in range(len(res.est["time_us"])):
        assert res.tiling(i)["base_m"] == 64 and res.tiling(i)["tail_split"] == "auto"


def test_search_is_deterministic(b3, ascend_space):
    a = search(mm(1536, 2560, 1024), b3, ascend_space, top=3)
    b = search(mm(1536, 2560, 1024), b3, ascend_space, top=3)
    assert [a.tiling(i) for i in range(3)] == [b.tiling(i) for i in range(3)]


def test_results_sorted_and_report_counts(b3, ascend_space):
    res = search(mm(4096, 4096, 4096), b3, ascend_space, top=5)
    t = res.est["time_us"]
    assert np.all(np.diff(t) >= 0)
    assert res.space_size == ascend_space.size() and res.feasible > res.evaluated > 0


def test_empty_space_names_the_rule(b3, ascend_space):
    with pytest.raises(InfeasibleError, match="l0c"):
        search(mm(4096, 4096, 4096), b3, ascend_space.pin({"base_m": "256", "base_n": "256"}))


def test_bad_pins(ascend_space):
    with pytest.raises(SpaceError, match="unknown knob 'bm'"):
        ascend_space.pin({"bm": 1})
    with pytest.raises(SpaceError, match="tail_split: must be one of off, auto"):
        ascend_space.pin({"tail_split": "sometimes"})
    with pytest.raises(SpaceError, match="l1_stages"):
        ascend_space.pin({"l1_stages": "7"})


@pytest.mark.parametrize(
    "shape", [(1, 4096, 4096), (17, 999, 333), (3000, 200, 64), (2048, 4096, 4096), (128, 128, 65536)]
)
def test_bounds_never_exceed_the_best_schedule(b3, ascend_space, shape):
    """quick_bound and bound are both <= the exact time of the best schedule, on random enumerated tilings."""
    from tiler.space import product

    model = get_operator("matmul", "ascend")
    p = mm(*shape)
    table, _, _ = enumerate_feasible(p, b3, ascend_space, model)
    rng = np.random.default_rng(sum(shape))
    rows = take(table, rng.choice(len(table["base_m"]), size=min(200, len(table["base_m"])), replace=False))
    sched = list(model.SCHEDULE_KNOBS)
    exact = model.estimate(p, b3, product(rows, ascend_space.product(sched)))["time_us"].reshape(
        len(rows["base_m"]), -1
    )
    best = exact.min(axis=1)
    quick = model.quick_bound(p, b3, rows)
    assert np.all(quick <= best * (1 + 1e-9))
    assert np.all(model.bound(p, b3, rows) <= best * (1 + 1e-9))
    # the prefix floor holds for every completion of a row's base sizes and split_k: it is at most its quick bound
    prefix = {k: rows[k] for k in model.LEVELS[0]}
    assert np.all(model.prefix_bound(p, b3, prefix, ascend_space.domains()) <= quick * (1 + 1e-9))


def test_prefixes_without_feasible_completion_are_skipped(b3, ascend_space):
    """Some first-level rows (base sizes, split_k) have no completion that fits L1 (K=3584, M=1); enumerating one
    alone yields an empty table, and the search over all of them still proves its optimum."""
    from tiler.search import proven as S

    space = ascend_space
    model = get_operator("matmul", "ascend")
    p = mm(1, 4608, 3584)
    pre, _ = S.first_level(p, b3, space, model)
    empty = [
        i
        for i in range(len(pre["base_m"]))
        if S.enumerate_feasible(p, b3, space, model, take(pre, slice(i, i + 1)))[2] == 0
    ]
    assert empty, "expected some prefixes with no feasible completion"
    table, _, feasible = S.enumerate_feasible(p, b3, space, model, take(pre, np.array(empty)))
    assert feasible == 0 and len(table.get("base_m", [])) == 0
    assert search(p, b3, space).proven_optimal


def test_schedule_twins_cost_exactly_the_same(b3, ascend_space):
    """Every schedule dominated() drops as a twin has the same estimate as some schedule it keeps (a 1-D grid,
    one group, one round, nothing to re-cut): dropping them loses nothing."""
    from tiler.space import product

    model = get_operator("matmul", "ascend")
    sched = ascend_space.product(list(model.SCHEDULE_KNOBS))
    domains = ascend_space.domains()
    for shape in [(1, 4096, 4096), (256, 4096, 1024), (4096, 4096, 4096), (300, 700, 2000)]:
        p = mm(*shape)
        table, _, _ = enumerate_feasible(p, b3, ascend_space, model)
        rows = take(table, np.random.default_rng(0).choice(len(table["base_m"]), 30, replace=False))
        full = product(rows, sched)
        t = model.estimate(p, b3, full)["time_us"].reshape(30, -1)
        twin = model.dominated(p, b3, full, domains).reshape(30, -1)
        assert twin.any(axis=1).sum() > 0, shape  # every shape has twins to drop, so the checks below bite
        for i in range(30):
            kept = set(np.round(t[i, ~twin[i]], 9))
            assert all(v in kept for v in np.round(t[i, twin[i]], 9))
            assert np.isclose(t[i].min(), t[i, ~twin[i]].min())


def test_pinning_a_twin_value_keeps_the_space(b3, ascend_space):
    """--fix iterate_order=n (moot when K spans several base_k steps) keeps the optimum of the free space, and with
    one block per transfer (every step 1, where Norm and MDL are twins) --fix multi_load=0 keeps the optimum of
    that space: dominance only drops a row when its twin's value is in the (pinned) domain."""
    p = mm(4096, 4096, 4096)
    free = search(p, b3, ascend_space).row(0)["time_us"]
    pinned = search(p, b3, ascend_space.pin({"iterate_order": "n"})).row(0)["time_us"]
    assert np.isclose(pinned, free)
    one_xfer = {"step_m": "1", "step_n": "1", "step_ka": "1", "step_kb": "1"}
    either = search(p, b3, ascend_space.pin(one_xfer)).row(0)["time_us"]
    norm = search(p, b3, ascend_space.pin(dict(one_xfer, multi_load="0"))).row(0)["time_us"]
    assert np.isclose(norm, either)


def test_prefix_floor_holds_when_k_is_shorter_than_a_base_block():
    """K = 1 with int8 (C0 = 32) on 310P3: Norm moves whole base_k blocks, MDL only the K there is; the prefix
    floor must take the better of the two row segments (it once took only MDL's and rose above quick_bound)."""
    from tiler.hardware import load_chip

    chip = load_chip("ascend310p3")
    model = get_operator("matmul", "ascend")
    space = load_space("matmul", "ascend")
    p = mm(8192, 8192, 1, dtype="int8")
    table, _, _ = enumerate_feasible(p, chip, space, model)
    quick = model.quick_bound(p, chip, table)
    prefix = model.prefix_bound(p, chip, {k: table[k] for k in model.LEVELS[0]}, space.domains())
    assert np.all(prefix <= quick * (1 + 1e-9))


@pytest.mark.parametrize("chip_id", ["ascend910a", "ascend310b1", "ascend310p3", "ascend910b4"])
@pytest.mark.parametrize(
    "shape", [(4097, 4097, 1), (300, 5000, 777), (2048, 96, 8192), (3000, 2000, 1 << 20)]
)
def test_bound_of_each_core_split_stays_below_its_best_schedule(chip_id, shape):
    """bound() takes the smaller of a walk bound and a block-split bound (each with its own cores at work): on
    random enumerated tilings of several chips it stays at or below the best schedule, and with one core split
    pinned at or below that split's best schedule."""
    from tiler.hardware import load_chip
    from tiler.space import product

    chip = load_chip(chip_id)
    space = load_space("matmul", "ascend")
    model = get_operator("matmul", "ascend")
    p = mm(*shape)
    table, _, _ = enumerate_feasible(p, chip, space, model)
    rng = np.random.default_rng(sum(shape))
    rows = take(table, rng.choice(len(table["base_m"]), size=min(150, len(table["base_m"])), replace=False))
    names = list(model.SCHEDULE_KNOBS)
    sched = space.product(names)
    exact = model.estimate(p, chip, product(rows, sched))["time_us"].reshape(len(rows["base_m"]), -1)
    assert np.all(model.bound(p, chip, rows, space.domains(names)) <= exact.min(axis=1) * (1 + 1e-9))
    for split in (0, 1):
        cols = sched["core_split"] == split
        doms = {**space.domains(names), "core_split": (split,)}
        assert np.all(model.bound(p, chip, rows, doms) <= exact[:, cols].min(axis=1) * (1 + 1e-9))


@pytest.mark.parametrize("chip_id", ["ascend910b4", "ascend310p3"])
def test_walk_bound_rises_where_rounds_overflow_l2(chip_id, monkeypatch):
    """K = 2^20: a tile's A and B panels (tm or tn x kc) are tens of MB, so a round of the cores' tiles overflows
    L2 and only the round's own loads share panels (schedule.round_hit_front). The walk bound then rises well
    above the one at the ceiling hit rates on some tilings, and stays at or below each tiling's best walk."""
    from tiler.hardware import load_chip
    from tiler.ops.matmul import ascend_bounds
    from tiler.space import product

    chip = load_chip(chip_id)
    space = load_space("matmul", "ascend")
    model = get_operator("matmul", "ascend")
    p = mm(1 << 17, 4097, 1 << 20)
    table, _, _ = enumerate_feasible(p, chip, space, model)
    rows = take(table, np.random.default_rng(7).choice(len(table["base_m"]), size=150, replace=False))
    names = list(model.SCHEDULE_KNOBS)
    doms = {**space.domains(names), "core_split": (0,)}
    sched = space.product(names)
    walk = sched["core_split"] == 0
    exact = model.estimate(p, chip, product(rows, take(sched, np.flatnonzero(walk))))["time_us"]
    best = exact.reshape(len(rows["base_m"]), -1).min(axis=1)
    tight = model.bound(p, chip, rows, doms)
    assert np.all(tight <= best * (1 + 1e-9))
    monkeypatch.setattr(ascend_bounds, "round_hit_front", lambda *a: None)
    ceiling = model.bound(p, chip, rows, doms)
    assert np.all(tight >= ceiling * (1 - 1e-9)) and np.mean(tight > 1.2 * ceiling) > 0.5


def test_single_core_walk_bound_pairs_each_walks_reuse_with_its_hit_rates():
    """310B1 (one core), 4097^3, weight residency on: the walk bound takes each walk setting's B-panel reuse
    (schedule.serial_b_reuse) with that setting's own L2 hit rates; on random tilings it stays at or below the
    best walk schedule of each (a reuse or hit rate above what a walk gives would lift it over)."""
    from tiler.hardware import load_chip
    from tiler.space import product

    chip = load_chip("ascend310b1")
    space = load_space("matmul", "ascend")
    model = get_operator("matmul", "ascend")
    p = mm(4097, 4097, 4097)
    table, _, _ = enumerate_feasible(p, chip, space, model)
    res = np.flatnonzero(table["weight_resident"] == 1)
    rows = take(table, np.random.default_rng(11).choice(res, size=200, replace=False))
    names = list(model.SCHEDULE_KNOBS)
    sched = space.product(names)
    walk = take(sched, np.flatnonzero(sched["core_split"] == 0))
    best = model.estimate(p, chip, product(rows, walk))["time_us"].reshape(200, -1).min(axis=1)
    bound = model.bound(p, chip, rows, {**space.domains(names), "core_split": (0,)})
    assert np.all(bound <= best * (1 + 1e-9))
    # each walk's reuse with its own hit rates: median best / bound 1.02 here; the most reuse of any walk with
    # each walk's hit rates gave 1.16
    assert np.median(best / bound) < 1.08
