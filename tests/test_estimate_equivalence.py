"""The fast Ascend matmul estimate (tables per problem, tile costs per needed work column) against its plain
reference formulation (`estimate_reference`): every column equal bit for bit, on random feasible candidates and on
a search's batches (tilings times schedules), for every Ascend chip, layout, B format and dtype; and the pieces the
fast path changed (common.classify_bound, schedule.block_grid) against their definitions."""

from __future__ import annotations

import warnings

import numpy as np
import pytest
from conftest import same_estimates

from tiler.hardware import load_chip
from tiler.model import common, schedule
from tiler.operator import get_operator
from tiler.problem import parse_problem
from tiler.search.proven import _contenders, enumerate_feasible
from tiler.search.result import top_distinct
from tiler.space import length, load_space, product, take

CHIPS = ("ascend910b3", "ascend910b1", "ascend310p3", "ascend310b1")
SHAPES = (
    dict(M=1, N=6144, K=4096),
    dict(M=8192, N=28672, K=8192),
    dict(M=3000, N=1000, K=777, layout="tn"),
    dict(M=2048, N=6144, K=4096, layout="nt"),
    dict(M=100, N=300, K=5000, layout="nt", b_format="nz"),
    dict(M=333, N=555, K=999, batch=3),
    dict(M=16384, N=16, K=1024, layout="tt"),
    dict(M=8, N=8, K=8),
)


def _random_feasible(p, chip, model, space, rows: int, seed: int) -> dict:
    """About `rows` random candidates that pass every rule (the resolved knobs set by resolve())."""
    rng = np.random.default_rng(seed)
    free = [k for k in space.names if k not in model.RESOLVED]
    c = {k: rng.choice(np.asarray(space.knobs[k].values, dtype=np.int64), 8 * rows) for k in free}
    c = model.resolve(p, chip, c, space.domains(list(model.RESOLVED)))
    ok = np.logical_and.reduce([np.broadcast_to(m, (8 * rows,)) for m in model.masks(p, chip, c).values()])
    return take(c, np.flatnonzero(ok)[:rows])


@pytest.mark.slow
@pytest.mark.parametrize("chip_id", CHIPS)
@pytest.mark.parametrize("dtype", ["fp16", "int8"])
def test_fast_estimate_is_the_reference_bit_for_bit(chip_id, dtype):
    chip = load_chip(chip_id)
    model = get_operator("matmul", "ascend")
    space = load_space("matmul", "ascend")
    for i, shape in enumerate(SHAPES):
        p = parse_problem("matmul", shape, dtype=dtype)
        # 3000 rows: the fast path splits its tile costs by work-column pattern; 300: one pass
        for rows in (3000, 300):
            c = _random_feasible(p, chip, model, space, rows, seed=i)
            if length(c):
                same_estimates(model.estimate(p, chip, c), model.estimate_reference(p, chip, c))


@pytest.mark.parametrize("chip_id", ["ascend910b3", "ascend310b1"])
def test_fast_estimate_on_search_batches(chip_id):
    """A search scores tilings times every schedule setting: the same results as the reference, whatever the
    tables already hold (a second pass finds every schedule known)."""
    chip = load_chip(chip_id)
    model = get_operator("matmul", "ascend")
    space = load_space("matmul", "ascend")
    sched = space.product([k for k in model.SCHEDULE_KNOBS if k in space.knobs])
    for shape in (dict(M=4096, N=4608, K=3584), dict(M=77, N=1234, K=333, layout="nt")):
        p = parse_problem("matmul", shape)
        table, _, _ = enumerate_feasible(p, chip, space, model)
        rows = take(table, np.random.default_rng(0).permutation(length(table))[:40])
        full = product(rows, sched)
        for _ in range(2):
            same_estimates(model.estimate(p, chip, full), model.estimate_reference(p, chip, full))


def test_rows_beyond_the_table_codes_take_the_reference_path():
    """A pinned size too large for the packed codes is still scored (by the reference formulation)."""
    chip = load_chip("ascend910b3")
    model = get_operator("matmul", "ascend")
    p = parse_problem("matmul", dict(M=200000, N=64, K=64))
    one = {k: np.array([v]) for k, v in dict(base_m=16, base_n=16, base_k=16, step_m=5000, step_n=1).items()}
    rest = dict(step_ka=1, step_kb=1, l1_stages=1, preload=0, l0_pingpong=0, multi_load=1, weight_resident=0)
    rest |= dict(iterate_order=0, swizzle_offset=1, swizzle_direction=0, serpentine=0, tail_split=0)
    rest |= dict(split_k=1, core_split=0)
    c = one | {k: np.array([v]) for k, v in rest.items()}
    same_estimates(model.estimate(p, chip, c), model.estimate_reference(p, chip, c))


def test_classify_bound_labels():
    rng = np.random.default_rng(1)
    names = ("mac", "mte2", "mte1", "fixpipe", "scalar")
    for _ in range(50):
        n = int(rng.integers(0, 40))
        pipes_us = {k: rng.choice([0.0, 1.0, 2.0, float(rng.random())], n) for k in names}
        busy = rng.random(n) * 4
        stack = np.stack([pipes_us[k] for k in names])
        want = np.where(
            stack.max(axis=0) >= common.SATURATED * np.maximum(busy, 1e-12),
            np.array([common.BOUND_OF_PIPE_OF["ascend"][k] for k in names], dtype=object)[
                stack.argmax(axis=0)
            ],
            "latency",
        )
        got = common.classify_bound(pipes_us, busy)
        assert got.dtype == want.dtype and list(got) == list(want)


def test_block_grid_dedup_matches_one_by_one():
    rng = np.random.default_rng(2)
    gm, gn, sk = rng.integers(1, 40, 500), rng.integers(1, 40, 500), rng.choice([1, 2, 4, 8, 16], 500)
    whole = schedule.block_grid(gm, gn, sk, 20)
    for i in range(0, 500, 37):
        one = schedule.block_grid(gm[i : i + 1], gn[i : i + 1], sk[i : i + 1], 20)
        assert all(int(w[i]) == int(o[0]) for w, o in zip(whole, one, strict=True))


def test_contenders_keep_every_row_that_can_enter_the_top():
    """The search merges only a batch's contenders: the top it then keeps is the top of the whole batch."""
    rng = np.random.default_rng(3)
    filtered = 0
    for top in (1, 5):
        for distinct in (3000, 300, 30):  # exact ties, few to many
            t = rng.choice(np.round(rng.random(distinct), 6), 5000)
            c = {"a": rng.integers(0, 4, t.size), "b": rng.integers(0, 4, t.size)}
            keep = _contenders(t, top)
            if keep is None:  # too many ties among the fastest: the whole batch is merged
                continue
            filtered += 1
            full = top_distinct(c, t, ["a", "b"], top)
            part = keep[top_distinct(take(c, keep), t[keep], ["a", "b"], top)]
            assert np.array_equal(full, part)
    assert filtered >= 3


def test_busiest_core_pick_past_float32_range():
    """A calibration trial with a rate near 0 (mac_efficiency 1e-46: tile times past float32's 3.4e38 s). The
    busiest core is picked in float32, where such a time was inf, and inf times a work column the core does not
    run NaN ("invalid value encountered in matmul", seen in CI): the pick stays free of it, in the fast estimate
    and the reference alike, and the two stay equal bit for bit."""
    chip = load_chip("ascend910b2").with_values({"mac_efficiency": 1e-46}, tag="estimated")
    model = get_operator("matmul", "ascend")
    space = load_space("matmul", "ascend")
    p = parse_problem("matmul", dict(M=2048, N=2048, K=2048), "fp16")
    c = _random_feasible(p, chip, model, space, 3000, seed=0)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        fast = model.estimate(p, chip, c)
        ref = model.estimate_reference(p, chip, c)
    assert not [str(w.message) for w in caught if "invalid value" in str(w.message)]
    assert np.isfinite(fast["time_us"]).all()
    same_estimates(fast, ref)
