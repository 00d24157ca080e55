"""The shared schedule pieces against brute force: core work vectors, L2 hits, row grouping."""

from __future__ import annotations

import numpy as np
import pytest

from tiler.model.common import ceil_div, group_rows
from tiler.model.schedule import core_work, panel_hits, traversal
from tiler.model.schedule.l2 import _hit_rates


def brute_core_vectors(tm, tn, splits, batch, cores, offset, direction, serpentine, pieces, edge_m, edge_n):
    """Walk every tile one by one (tile i -> core i % cores) and build each core's work vector directly."""
    r, c = traversal(tm, tn, offset, direction, serpentine)
    tiles = [(s, int(r[i]), int(c[i])) for s in range(splits * batch) for i in range(tm * tn)]
    n = len(tiles)
    vec = np.zeros((cores, 13))
    rem = n % cores if pieces >= 2 else 0
    last = []
    for i, (s, row, col) in enumerate(tiles):
        etype = 2 * int(edge_m and row == tm - 1) + int(edge_n and col == tn - 1)
        reuse = i >= cores and tiles[i - cores][0] == s and tiles[i - cores][2] == col
        if i >= n - rem:
            last.append(etype)
        else:
            vec[i % cores, etype + 4 * reuse] += 1
    subs = [t for t in last for _ in range(pieces)][:cores]
    for j, t in enumerate(subs):
        vec[j, 8 + t] += 1
    vec[:, 12] = vec[:, :12].sum(axis=1) > 0
    return vec


def naive_walk(tm, tn, offset, direction, serpentine):
    """The traversal written as the loops a kernel runs: groups of `offset` rows, column by column inside."""
    if direction == 1:
        return [(r, c) for c, r in naive_walk(tn, tm, offset, 0, serpentine)]
    out = []
    for g, top in enumerate(range(0, tm, offset)):
        rows = range(top, min(top + offset, tm))
        cols = range(tn - 1, -1, -1) if serpentine and g % 2 == 1 else range(tn)
        out += [(r, c) for c in cols for r in rows]
    return out


@pytest.mark.parametrize("tm,tn", [(1, 1), (1, 7), (7, 1), (5, 6), (16, 16), (9, 13)])
def test_traversal_matches_the_kernel_loops(tm, tn):
    for offset in (1, 2, 3, 4, 8, 20):
        for direction in (0, 1):
            for serpentine in (False, True):
                r, c = traversal(tm, tn, offset, direction, serpentine)
                assert list(zip(r.tolist(), c.tolist(), strict=True)) == naive_walk(
                    tm, tn, offset, direction, serpentine
                )


CASES = [
    (7, 5, 1, 1, 20, 1, 0, False, 1, True, True),
    (7, 5, 1, 1, 20, 3, 1, True, 2, True, False),
    (16, 16, 1, 1, 20, 4, 0, True, 1, False, False),
    (3, 9, 4, 1, 24, 2, 0, False, 3, False, True),
    (5, 6, 3, 2, 8, 8, 1, False, 2, True, True),
    (1, 40, 1, 1, 20, 1, 1, True, 4, False, True),
    (2, 3, 1, 1, 32, 1, 0, False, 5, True, True),
]


@pytest.mark.parametrize("case", CASES)
def test_core_work_matches_walking_every_tile(case):
    """The busiest core under any non-negative tile costs, the totals and the cores used equal brute force."""
    brute = brute_core_vectors(*case)
    work = core_work(*case)
    np.testing.assert_allclose(work.total, brute.sum(axis=0))
    assert work.cores_used == int(brute[:, 12].sum())
    rng = np.random.default_rng(0)
    for cost in rng.random((50, 13)):
        assert np.isclose((work.vectors @ cost).max(), (brute @ cost).max())
        assert np.isclose((work.padded @ cost.astype(np.float32)).max(), (brute @ cost).max(), rtol=1e-5)


def test_first_touch_closed_form_equals_the_walk_when_panels_fit():
    """When every panel fits L2 at once, the walked simulation gives exactly 1 - 1/gn and 1 - 1/gm."""
    for tm, tn, off, d, sp in [(12, 9, 2, 0, True), (6, 30, 4, 1, False), (25, 25, 3, 0, False)]:
        walked = _hit_rates(tm, tn, 1, 20, np.array([[off, d, int(sp)]]), 1.0, 1.0, 1e12)[0]
        closed = panel_hits(tm, tn, 1, 1, 20, off, d, sp, 1.0, 1.0, 1e12)
        assert np.allclose(walked, closed)
        assert np.allclose(closed, (1 - 1 / tn, 1 - 1 / tm))


def test_group_rows_matches_a_row_wise_unique():
    rng = np.random.default_rng(1)
    cols = [rng.integers(0, k, 5000) for k in (3, 1000, 7, 2**40, 5)]
    first, inv = group_rows(cols)
    table = np.stack(cols, axis=1)
    uniq, ref_inv = np.unique(table, axis=0, return_inverse=True)
    assert len(first) == len(uniq)
    np.testing.assert_array_equal(table[first][inv], table)  # every row maps to a group holding its values
    assert len(set(zip(inv.tolist(), ref_inv.ravel().tolist(), strict=True))) == len(uniq)  # a bijection


def test_caches_start_over_without_losing_what_a_call_needs(monkeypatch):
    """When a cache is full it is cleared before the lookup: a call that needs an entry cached earlier still
    gets it (a clear between lookup and return used to raise KeyError)."""
    from tiler.model import schedule

    traversal(6, 5, 2, 0, False)
    core_work(6, 5, 1, 1, 4, 2, 0, False, 1, True, True)
    monkeypatch.setattr(schedule.work, "_WALK_ELEMS_MAX", 0)
    monkeypatch.setattr(schedule.work, "_CACHE_ROWS", 0)
    r, _ = schedule.walks(6, 5, np.array([[2, 0, 0], [3, 1, 1]]))
    assert r.shape == (2, 30)
    assert core_work(6, 5, 1, 1, 4, 2, 0, False, 1, True, True).cores_used == 4
    assert len(schedule.core_work_many(6, 5, 1, 1, 4, True, True, [(2, 0, 0, 1), (3, 1, 1, 2)])) == 2


@pytest.mark.parametrize("cores", [1, 4, 20, 40])
def test_column_major_counts_are_core_works_in_closed_form(cores):
    """The closed-form per-core tile counts of a column-major walk equal core_work's simulation (same totals,
    same busiest core for any per-type cost), edges and weight reuse included."""
    import itertools

    from tiler.model.schedule import TILE_TYPES, column_major_counts, core_work

    rng = np.random.default_rng(cores)
    for gm, gn, em, en in itertools.product(
        [1, 3, 20, 21, 41, 64], [1, 2, 7, 16], [False, True], [False, True]
    ):
        sim = core_work(gm, gn, 1, 1, cores, 1, 1, False, 1, em, en)
        closed = column_major_counts(gm, gn, cores, em, en)
        assert np.allclose(closed.sum(axis=0), sim.total[:TILE_TYPES])
        assert int((closed.sum(axis=1) > 0).sum()) == sim.cores_used
        for cost in rng.random((4, TILE_TYPES)):
            assert (closed @ cost).max() == pytest.approx((sim.vectors[:, :TILE_TYPES] @ cost).max())


def test_column_major_counts_do_not_grow_with_the_tiles_or_columns():
    """Billions of tiles in billions of columns cost what thousands do: the call's peak memory (numpy's
    allocations, traced) stays within a megabyte, and the counts still sum to the grid."""
    import tracemalloc

    from tiler.model.schedule import column_major_counts

    tracemalloc.start()
    try:
        counts = column_major_counts(7, 2**31 - 1, 20, True, True)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert peak < 2**20, peak
    assert counts.sum() == 7 * (2**31 - 1)


def test_ceil_div_of_two_integers_is_the_array_value():
    """ceil_div on two Python integers (its scalar path) gives the float64 its array path gives, for sizes up to
    2**53 and past it, where the scalar path hands over to numpy."""
    rng = np.random.default_rng(5)
    bits = rng.integers(1, 63, size=(3000, 2))
    pairs = [(int(rng.integers(0, 1 << int(x))), int(rng.integers(1, 1 << int(y)))) for x, y in bits]
    pairs += [
        (0, 1),
        (1, 1),
        (7, 7),
        (8, 7),
        ((1 << 53) - 1, 3),
        (1 << 53, 3),
        ((1 << 62) + 1, (1 << 53) + 1),
    ]
    a = np.array([p[0] for p in pairs], dtype=np.int64)
    b = np.array([p[1] for p in pairs], dtype=np.int64)
    want = ceil_div(a, b)
    for i, (x, y) in enumerate(pairs):
        got = ceil_div(x, y)
        assert type(got) is np.float64 and got == want[i], (x, y, got, want[i])
