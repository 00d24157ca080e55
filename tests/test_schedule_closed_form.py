"""The schedule counted without walking the grid (issue 33): walk_counts, point_types and the closed-form path of
core work and B reuse give what counting the walk gives, and big grids cost memory by the cores, not the tiles."""

from __future__ import annotations

import tracemalloc
from contextlib import contextmanager

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from tiler.model import schedule
from tiler.model.schedule import (
    TILE_TYPES,
    max_b_reuse,
    panel_hits_many,
    point_types,
    traversal,
    walk_counts,
)
from tiler.model.schedule.work import _core_work

grids = st.integers(1, 48)
cores = st.sampled_from([1, 2, 3, 4, 5, 7, 8, 20, 24, 30, 32, 40, 64])
walk = st.tuples(st.sampled_from([1, 2, 3, 4, 5, 8, 16]), st.integers(0, 1), st.booleans())


@contextmanager
def closed_form():
    """Count every grid in closed form (no grid is small enough to walk)."""
    keep = schedule.work.WALK_TILES
    schedule.work.WALK_TILES = 0
    try:
        yield
    finally:
        schedule.work.WALK_TILES = keep


def counted_on_the_walk(tm, tn, k, offset, direction, snake, edge_m, edge_n) -> np.ndarray:
    """Tiles of each type per core, counted one walk position at a time (position p runs on core p mod k)."""
    r, c = (x.astype(np.int64) for x in traversal(tm, tn, offset, direction, snake))
    etype = 2 * ((r == tm - 1) & edge_m) + ((c == tn - 1) & edge_n)
    reuse = np.zeros(r.size, dtype=np.int64)
    reuse[k:] = c[k:] == c[:-k]
    out = np.zeros((k, TILE_TYPES), dtype=np.int64)
    np.add.at(out, (np.arange(r.size) % k, etype + 4 * reuse), 1)
    return out


@settings(max_examples=400, deadline=None)
@given(grids, grids, cores, walk, st.booleans(), st.booleans())
def test_walk_counts_equal_the_walk(tm, tn, k, w, edge_m, edge_n):
    got = walk_counts(tm, tn, k, *w, edge_m, edge_n)
    assert np.array_equal(got, counted_on_the_walk(tm, tn, k, *w, edge_m, edge_n))


@settings(max_examples=200, deadline=None)
@given(grids, grids, cores, walk, st.booleans(), st.booleans(), st.data())
def test_point_types_equal_the_walk(tm, tn, k, w, edge_m, edge_n, data):
    r, c = (x.astype(np.int64) for x in traversal(tm, tn, *w))
    pos = np.array(data.draw(st.lists(st.integers(0, tm * tn - 1), min_size=1, max_size=20)))
    etype = 2 * ((r[pos] == tm - 1) & edge_m) + ((c[pos] == tn - 1) & edge_n)
    reuse = (pos >= k) & (c[pos] == c[np.maximum(pos - k, 0)])
    assert np.array_equal(point_types(tm, tn, k, *w, edge_m, edge_n, pos), etype + 4 * reuse)


@settings(max_examples=150, deadline=None)
@given(
    grids,
    grids,
    cores,
    st.integers(1, 3),
    st.integers(1, 2),
    st.booleans(),
    st.booleans(),
    st.lists(st.tuples(walk, st.integers(1, 4)), min_size=1, max_size=4),
)
def test_core_work_closed_form_equals_the_walk(tm, tn, k, splits, batch, edge_m, edge_n, sets):
    setting = np.array([(o, d, int(s), pieces) for (o, d, s), pieces in sets], dtype=np.int64)
    walked = _core_work(tm, tn, splits, batch, k, edge_m, edge_n, setting)
    with closed_form():
        closed = _core_work(tm, tn, splits, batch, k, edge_m, edge_n, setting)
    for a, b in zip(walked, closed, strict=True):
        assert np.array_equal(a.vectors, b.vectors)
        assert np.array_equal(a.total, b.total)
        assert np.array_equal(a.padded, b.padded)
        assert a.cores_used == b.cores_used


@settings(max_examples=100, deadline=None)
@given(grids, grids, cores, st.integers(1, 3), st.integers(1, 2))
def test_max_b_reuse_closed_form_equals_the_walk(tm, tn, k, splits, batch):
    args = (tm, tn, splits, batch, k, (1, 2, 4, 8), (0, 1), (0, 1))
    max_b_reuse.cache_clear()
    walked = max_b_reuse(*args)
    max_b_reuse.cache_clear()
    with closed_form():
        closed = max_b_reuse(*args)
    max_b_reuse.cache_clear()
    assert walked == closed


def test_a_grid_of_billions_of_tiles_costs_memory_by_the_cores():
    """65536 x 65536 tiles (2^32: a walk would hold 32 GB of indices) on 20 cores: every tile counted once, each
    core within one tile of the others, in a few MB."""
    schedule.clear_caches()
    tracemalloc.start()
    work = _core_work(
        65536, 65536, 1, 1, 20, True, True, np.array([[1, 0, 0, 1], [8, 1, 1, 2], [3, 0, 1, 1]])
    )
    peak = tracemalloc.get_traced_memory()[1]
    tracemalloc.stop()
    assert peak < 16 << 20
    for w in work:
        assert w.total[:-1].sum() == 65536 * 65536 or w.total[TILE_TYPES:-1].sum() > 0
        assert w.total[:TILE_TYPES].sum() <= 65536 * 65536
    plain = work[0]
    per_core = plain.vectors[:, :TILE_TYPES].sum(axis=1)
    assert per_core.max() == -(-(65536 * 65536) // 20)


def test_l2_walk_of_a_long_grid_is_bounded():
    """A walk along 2^16 tile columns on one core: the simulated walk is cut (schedule._prefix), so the L2 hit
    rates come back in a few MB, and they are rates."""
    schedule.clear_caches()
    tracemalloc.start()
    hits = panel_hits_many(8, 65536, 1, 1, 1, [[1, 0, 0], [8, 0, 1], [2, 1, 1]], 4096.0, 4096.0, 1e6)
    peak = tracemalloc.get_traced_memory()[1]
    tracemalloc.stop()
    assert peak < 64 << 20
    assert ((hits >= 0) & (hits <= 1)).all()


@settings(max_examples=300, deadline=None)
@given(
    st.lists(st.tuples(st.integers(1, 9), st.integers(1, 90)), min_size=1, max_size=8),
    st.integers(1, 24),
)
def test_deal_of_equal_runs_adds_whole_rounds_exactly(runs, slots):
    """flash attention's CUDA deal adds whole rounds of a run of equal programs at once: the same counts and
    finish times as dealing them chunk by chunk."""
    from tiler.ops.flash_attention.cuda import deal

    durations = np.concatenate([np.full(n, float(d)) for d, n in runs])
    count, free = deal(durations, slots)
    want_count, want_free = deal(durations, slots, whole_rounds=False)
    assert np.array_equal(count, want_count)
    assert np.array_equal(free, want_free)


def test_search_scoring_in_row_chunks_finds_the_same_top(monkeypatch):
    """The proven search estimates at most ESTIMATE_ROWS candidates per call (bounded memory): cutting every batch
    into 64-row calls leaves the top tilings and their times unchanged."""
    from tiler.hardware import load_chip
    from tiler.problem import parse_problem
    from tiler.search import proven, search
    from tiler.space import load_space

    chip = load_chip("ascend910b3")
    p = parse_problem("matmul", {"M": 300, "N": 700, "K": 500}, "fp16")
    space = load_space("matmul", chip.family)
    whole = search(p, chip, space, top=3)
    monkeypatch.setattr(proven, "ESTIMATE_ROWS", 64)
    cut = search(p, chip, space, top=3)
    for i in range(3):
        assert cut.tiling(i) == whole.tiling(i)
        assert float(cut.row(i)["time_us"]) == float(whole.row(i)["time_us"])


def test_flash_attention_deal_of_many_programs_is_sampled_within_one_program(monkeypatch):
    """Past DEAL_MAX programs the CUDA flash-attention deal deals a sample of the heads and spreads the rest evenly:
    every slot's load then stays within one program of what dealing them all gives (the greedy deal keeps the
    slots within one program of each other, and the total is the same)."""
    from tiler.ops.flash_attention import cuda
    from tiler.problem import parse_problem

    p = parse_problem(
        "flash_attention", dict(B=4, heads=8, kv_heads=8, S1=4096, S2=4096, D=64, causal=1), "fp16"
    )
    longest = float(cuda.program_steps(p, 64, 64).max()) + 1.0
    for order in (0, 1):
        cuda.slot_profile.cache_clear()
        full, _ = cuda.slot_profile(p, 64, 64, order, 2, 16)
        monkeypatch.setattr(cuda, "DEAL_MAX", 256)  # 4 of the 32 heads dealt
        cuda.slot_profile.cache_clear()
        sampled, _ = cuda.slot_profile(p, 64, 64, order, 2, 16)
        monkeypatch.undo()
        busiest = lambda pairs: float((pairs[:, 0] + pairs[:, 1]).max())  # noqa: E731
        assert abs(busiest(full) - busiest(sampled)) <= longest
    cuda.slot_profile.cache_clear()


@settings(max_examples=150, deadline=None)
@given(
    st.integers(1, 5000),
    st.integers(1, 5000),
    st.sampled_from([16, 32, 64, 128]),
    st.sampled_from([16, 64, 128, 256]),
    st.integers(1, 8),
)
def test_flash_attention_ascend_work_total_without_mask_equals_every_task(s1, s2, bs1, bs2, ks):
    """Without the mask, the Ascend flash-attention work total is n1 - 1 times one s1 block's tasks plus the last
    block's: the same as summing every task."""
    from tiler.ops.flash_attention import ascend
    from tiler.problem import parse_problem

    p = parse_problem("flash_attention", dict(B=2, heads=8, kv_heads=2, S1=s1, S2=s2, D=64), "fp16")
    kinds, _ = ascend._kinds(p, bs1, bs2, ks)
    want = kinds.sum(axis=0) * int(ascend.geometry(p, bs1, bs2, ks)["copies"])
    ascend.work_total.cache_clear()
    assert np.array_equal(ascend.work_total(p, bs1, bs2, ks), want)


@settings(max_examples=200, deadline=None)
@given(
    st.integers(1, 5000),
    st.integers(0, 3000),
    st.sampled_from([16, 32, 64, 128]),
    st.sampled_from([16, 64, 128, 256]),
    st.integers(1, 16),
    st.booleans(),
)
def test_flash_attention_ascend_block_sums_equal_every_task(s1, extra, bs1, bs2, ks, causal):
    """The per-s1-block sums of the work columns over the kv chunks (closed form) equal summing _kinds' tasks of
    each block, with and without the mask; so the work total is the sum of every task."""
    from tiler.ops.flash_attention import ascend
    from tiler.problem import parse_problem

    fields = dict(B=2, heads=8, kv_heads=2, S1=s1, S2=s1 + extra, D=64, causal=int(causal))
    p = parse_problem("flash_attention", fields, "fp16")
    kinds, _ = ascend._kinds(p, bs1, bs2, ks)
    n1 = int(ascend.geometry(p, bs1, bs2, ks)["n1"])
    assert np.array_equal(ascend._block_sums(p, bs1, bs2, ks), kinds.reshape(n1, ks, -1).sum(axis=1))
    want = kinds.sum(axis=0) * int(ascend.geometry(p, bs1, bs2, ks)["copies"])
    ascend.work_total.cache_clear()
    assert np.array_equal(ascend.work_total(p, bs1, bs2, ks), want)


def _deal_plain_walk(kinds, copies, cores):
    """Every task t = j * U + u on core t mod cores, counted one by one (the deals' reference)."""
    U = kinds.shape[0]
    t = np.arange(U * copies)
    out = np.zeros((cores, kinds.shape[1]))
    np.add.at(out, t % cores, kinds[t % U])
    return out


def _deal_snake_walk(kinds, weight, copies, cores):
    """Tasks sorted heaviest first, copies of a kind together, dealt 0..K-1, K-1..0, ... one by one."""
    order = np.repeat(np.argsort(-weight, kind="stable"), copies)
    q = np.arange(order.size)
    core = np.where((q // cores) % 2 == 0, q % cores, cores - 1 - q % cores)
    out = np.zeros((cores, kinds.shape[1]))
    np.add.at(out, core, kinds[order])
    return out


@settings(max_examples=150, deadline=None)
@given(
    st.integers(1, 700),
    st.integers(0, 700),
    st.sampled_from([16, 64, 128]),
    st.sampled_from([16, 64, 128, 256]),
    st.integers(1, 8),
    st.booleans(),
    st.integers(1, 40),
    st.integers(1, 9),
)
def test_flash_attention_ascend_deals_equal_dealing_every_task(
    s1, extra, bs1, bs2, ks, causal, cores, copies
):
    """Both core splits' per-core work (closed forms by residue) equal dealing every task one by one."""
    from tiler.ops.flash_attention import ascend
    from tiler.problem import parse_problem

    fields = dict(B=1, heads=1, kv_heads=1, S1=s1, S2=s1 + extra, D=64, causal=int(causal))
    p = parse_problem("flash_attention", fields, "fp16")
    kinds, weight = ascend._kinds(p, bs1, bs2, ks)
    assert np.array_equal(ascend._deal_plain(kinds, copies, cores), _deal_plain_walk(kinds, copies, cores))
    assert np.array_equal(
        ascend._deal_snake(kinds, weight, copies, cores), _deal_snake_walk(kinds, weight, copies, cores)
    )


@settings(max_examples=300, deadline=None)
@given(
    st.integers(1, 40),
    st.integers(1, 40),
    st.integers(1, 3),
    st.integers(1, 5000),
    st.integers(1, 5000),
    st.integers(1, 60000),
    st.integers(1, 60000),
    st.booleans(),
)
def test_serial_l2_hit_rates_equal_the_walk(tm, tn, outer, a_bytes, b_bytes, cap_a, cap_b, shared):
    """One tile a round (a single-core chip): the closed-form L2 hit rates equal walking every traversal, bit for
    bit, with one L2 capacity or one per panel kind (the cut walk's shares)."""
    from tiler.model import schedule

    settings_ = np.array([(o, d, s) for o in (1, 2, 3, 4, 8, 64) for d in (0, 1) for s in (0, 1)])
    caps = float(cap_a) if shared else (cap_a * 0.75, float(cap_b))
    got = schedule.l2._serial_hit_rates(tm, tn, outer, settings_, float(a_bytes), float(b_bytes), caps)
    schedule.l2._TOUCHES.clear()
    real = schedule.l2._serial_hit_rates
    try:
        schedule.l2._serial_hit_rates = lambda *a: None
        want = schedule.l2._hit_rates(tm, tn, outer, 1, settings_, float(a_bytes), float(b_bytes), caps)
    finally:
        schedule.l2._serial_hit_rates = real
    assert got is not None and np.array_equal(got, want)


@settings(max_examples=200, deadline=None)
@given(
    st.one_of(st.integers(1, 300), st.integers(1, 70000)),
    st.one_of(st.integers(1, 300), st.integers(1, 70000)),
    st.sampled_from([1, 2, 4]),
    st.integers(1, 3),
    st.integers(1, 400),
    st.integers(1, 400),
    st.floats(1e3, 1e8),
)
def test_serial_hit_ceiling_is_the_best_walk(tm, tn, splits, batch, a_bytes, b_bytes, cap):
    """The single-core L2 hit ceiling over walk settings (closed form, every setting at once) equals the highest
    hit rate of each kind that panel_hits_many gives over those settings (prefixes, cut walks and their shares
    included), bit for bit."""
    from tiler.model import schedule

    offs, dirs, snakes = (1, 2, 3, 4, 8), (0, 1), (0, 1)
    settings_ = np.array([(o, d, s) for o in offs for d in dirs for s in snakes])
    a, b = float(a_bytes * 64), float(b_bytes * 64)
    schedule.clear_caches()
    hits = panel_hits_many(tm, tn, splits, batch, 1, settings_, a, b, cap)
    got = schedule.serial_hit_ceiling(tm, tn, splits, batch, a, b, cap, offs, dirs, snakes)
    assert float(got[0]) == hits[:, 0].max() and float(got[1]) == hits[:, 1].max()
    # rows: the same values per row (repeated rows computed once, a first-touch row at its ceiling)
    rows = schedule.serial_hit_ceiling([tm, 1, tm], [tn, 1, tn], splits, batch, a, b, cap, offs, dirs, snakes)
    assert rows[0][0] == rows[0][2] == got[0] and rows[1][0] == rows[1][2] == got[1]
    assert (rows[0][1], rows[1][1]) == (0.0, 0.0)
    # the front: pairs of settings, and every setting's pair at or below one of them on both kinds
    fa, fb = schedule.serial_hit_ceiling(tm, tn, splits, batch, a, b, cap, offs, dirs, snakes, front=True)
    pairs = {(float(x), float(y)) for x, y in zip(fa, fb, strict=True)}
    assert pairs <= {(float(x), float(y)) for x, y in hits}
    assert all(any(x <= fx and y <= fy for fx, fy in pairs) for x, y in hits)


@settings(max_examples=150, deadline=None)
@given(
    st.one_of(st.integers(1, 64), st.integers(1, 70000)),
    st.one_of(st.integers(1, 64), st.integers(1, 70000)),
    st.sampled_from([1, 2, 3]),
    st.integers(1, 2),
    st.sampled_from([2, 3, 8, 20, 24, 30, 32]),
    st.integers(1, 400),
    st.integers(1, 400),
    st.floats(1e4, 1e7),
)
def test_round_hit_front_covers_every_walk(tm, tn, splits, batch, slots, a_bytes, b_bytes, cap):
    """Several tiles a round: every walk setting's L2 hit rates (panel_hits_many: prefixes, cut walks and their
    shares included) are at or below one of round_hit_front's pairs on both kinds, and where the rounds do not
    overflow L2 the front is the ceiling alone (or None)."""
    offs, dirs, snakes = (1, 2, 3, 4, 8), (0, 1), (0, 1)
    settings_ = np.array([(o, d, s) for o in offs for d in dirs for s in snakes])
    a, b = float(a_bytes * 64), float(b_bytes * 64)
    schedule.clear_caches()
    front = schedule.round_hit_front(tm, tn, splits, batch, slots, a, b, cap, offs, dirs)
    overflow = bool(schedule.rounds_overflow(tm * tn * splits * batch, slots, a, b, cap))
    if front is None:
        return
    assert overflow
    pairs = list(zip(front[0].ravel(), front[1].ravel(), strict=True))
    # at most a hair (the front's float margin) above the ceiling
    assert all(x <= 1.0 - 1.0 / tn + 1e-9 and y <= 1.0 - 1.0 / tm + 1e-9 for x, y in pairs)
    hits = panel_hits_many(tm, tn, splits, batch, slots, settings_, a, b, cap)
    assert all(any(x <= fx and y <= fy for fx, fy in pairs) for x, y in hits)


def test_round_hit_front_is_below_the_ceiling_where_rounds_overflow():
    """A 20-core walk of 64 MB panels in a 96 MB L2: only the round's own loads share panels, so the front's
    best pair is well below the ceiling (each panel missing once), and rows that fit keep the ceiling."""
    fa, fb = schedule.round_hit_front(
        [4096, 4096], [33, 33], 1, 1, 20, [64e6, 1e3], [64e6, 1e3], 96e6, (1, 2, 4, 8), (0, 1)
    )
    assert fa.shape[1] == 2 and np.all(fa[:, 1] == 1.0 - 1.0 / 33) and np.all(fb[:, 1] == 1.0 - 1.0 / 4096)
    # the pairs' miss-rate products: near 1/20 (a round's 20 tiles share at most 20 panel pairs), within the
    # corners' ratio; the ceiling's is 1 / (33 * 4096)
    miss = (1.0 - fa[:, 0]) * (1.0 - fb[:, 0])
    assert np.all(miss >= 0.9 / 20 / schedule.ROUND_RATIO)


@settings(max_examples=300, deadline=None)
@given(grids, grids, st.lists(walk, min_size=1, max_size=6))
def test_serial_b_reuse_equals_the_walk(tm, tn, ws):
    """One core: serial_b_reuse's count per walk setting (closed form, every setting at once) is the number of
    tiles of the walk whose previous tile has the same column, as counting the walk gives (walk_counts' reuse
    types of a one-core walk, checked against the walk above)."""
    offs, dirs, snakes = {o for o, _, _ in ws}, {d for _, d, _ in ws}, {int(s) for _, _, s in ws}
    got = schedule.serial_b_reuse(tm, tn, offs, dirs, snakes)
    for row, (o, d, s) in zip(got, schedule.walk_settings(offs, dirs, snakes).tolist(), strict=True):
        assert int(row[0]) == counted_on_the_walk(tm, tn, 1, o, d, s, False, False)[:, 4:].sum()


def test_front_rows_cover_every_setting():
    """front_rows keeps settings that no other beats on every quantity; every setting is at or below a kept one."""
    rng = np.random.default_rng(3)
    vals = [rng.integers(0, 4, size=(12, 50)).astype(float) for _ in range(3)]
    front = schedule.front_rows(*vals)
    for r in range(50):
        kept = {tuple(f[k, r] for f in front) for k in range(front[0].shape[0])}
        allv = [tuple(v[s, r] for v in vals) for s in range(12)]
        assert kept <= set(allv)
        assert all(any(all(x <= y for x, y in zip(a, k, strict=True)) for k in kept) for a in allv)
        # none kept is beaten by another setting on every quantity with one strictly
        assert not any(
            any(all(x >= y for x, y in zip(a, k, strict=True)) and a != k for a in allv) for k in kept
        )


def touches_by_sorting(tm, tn, outer, slots, settings_):
    """_touches' result by sorting the (setting, panel, round) triples of the walk (the reference): per kind the
    distinct panels per round, each setting's first touches, and the repeats as sorted (setting, hi, lo) rows."""
    r, c = schedule.walks(tm, tn, settings_)
    n_set, per = r.shape
    loads = per * outer
    slice_ = np.repeat(np.arange(outer), per)
    rnd = np.arange(loads) // slots
    nr = int(rnd[-1]) + 1
    out = []
    for ids, width in (
        (slice_ * tm + np.tile(r, outer), tm * outer),
        (slice_ * tn + np.tile(c, outer), tn * outer),
    ):
        code = np.unique(((np.arange(n_set)[:, None] * width + ids) * nr + rnd).ravel())
        pid, pr = np.divmod(code, nr)
        which = pid // width
        counts = np.bincount(which * nr + pr, minlength=n_set * nr).reshape(n_set, nr)
        same = np.zeros(pr.size, dtype=bool)
        same[1:] = pid[1:] == pid[:-1]
        rep = np.flatnonzero(same)
        base = which[rep] * (nr + 1)
        first = np.bincount(which[~same], minlength=n_set)
        rows = np.stack([which[rep], base + pr[rep] + 1, base + pr[rep - 1] + 1], axis=1)
        out.append((counts, first, rows[np.lexsort(rows.T[::-1])]))
    return out


@settings(max_examples=300, deadline=None)
@given(
    st.integers(1, 40),
    st.integers(1, 40),
    st.integers(1, 4),
    st.sampled_from([1, 2, 3, 5, 8, 20, 24, 30]),
    st.lists(walk, min_size=1, max_size=5),
)
def test_touches_equal_sorting_the_walk(tm, tn, outer, slots, walks_):
    """The L2 simulation's touches from each panel's previous touch in closed form (no sort) equal sorting the
    walk's (setting, panel, round) triples: the same counts per round, first touches and repeats (as a set)."""
    settings_ = np.array([(o, d, int(s)) for o, d, s in walks_], dtype=np.int64)
    schedule.l2._TOUCHES.clear()
    counts, kinds = schedule.l2._touches(tm, tn, outer, slots, settings_)
    for cnt, (first, hi, lo, which), (want_cnt, want_first, want_rows) in zip(
        counts, kinds, touches_by_sorting(tm, tn, outer, slots, settings_), strict=True
    ):
        assert np.array_equal(cnt, want_cnt) and np.array_equal(first, want_first)
        rows = np.stack([which, hi, lo], axis=1)
        assert np.array_equal(rows[np.lexsort(rows.T[::-1])], want_rows)
