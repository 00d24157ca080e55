"""The caches and shortcuts behind issue 15's model throughput: every one returns what a cold, plain computation
returns, bit for bit. The Ascend schedule-work table is shared by every problem of a batch and core count (keyed
by the tile grid and its edges, not the shape), the cuda matmul keeps L2 hit rates per problem and chip, and the
cuda estimate scores one row of each set of launch orders with equal hit rates. A stale or too-coarse entry would
make a warm answer differ from the cold one; these tests warm the tables on one problem or chip and compare on
another that shares codes with it but differs in what the table depends on."""

from __future__ import annotations

import numpy as np
import pytest
from conftest import same_estimates

from tiler.hardware import load_chip
from tiler.model import common
from tiler.model.schedule import clear_caches, pack_codes
from tiler.operator import get_operator
from tiler.ops.matmul import ascend as ascend_mm
from tiler.ops.matmul import cuda as cuda_mm
from tiler.ops.matmul.cuda import hits as cuda_hits
from tiler.problem import parse_problem
from tiler.search.proven import enumerate_feasible
from tiler.space import length, load_space, product, take


def _search_rows(p, chip, space, model, tilings: int, seed: int) -> dict:
    """A search's batch: some feasible tilings times every schedule setting."""
    sched = space.product([k for k in model.SCHEDULE_KNOBS if k in space.knobs])
    table, _, _ = enumerate_feasible(p, chip, space, model)
    rows = take(table, np.random.default_rng(seed).permutation(length(table))[:tilings])
    return product(rows, sched)


def _cold(model, p, chip, c) -> dict:
    clear_caches()
    return model.estimate(p, chip, c)


# --------------------------------------------------------------------------------------------------- Ascend
# Pairs of problems whose tilings give the same tile grids (tiles along M and N) but differ in what a schedule's
# core work depends on: the partial last tile row or column (edges), the batch, or nothing at all (a pure share).
ASCEND_PAIRS = [
    (dict(M=1024, N=1024, K=512), dict(M=1000, N=1024, K=512)),  # same grid, A's edge differs
    (dict(M=1024, N=1024, K=512), dict(M=1024, N=1010, K=777)),  # same grid, B's edge differs
    (dict(M=512, N=768, K=256), dict(M=512, N=768, K=256, batch=3)),  # the batch differs
    (dict(M=640, N=384, K=4096), dict(M=640, N=384, K=1000, layout="nt")),  # same grid and edges: shared
]


@pytest.mark.parametrize("first,second", ASCEND_PAIRS)
def test_ascend_work_table_shared_across_problems_serves_no_stale_entry(first, second):
    chip = load_chip("ascend910b3")
    model = get_operator("matmul", "ascend")
    space = load_space("matmul", "ascend")
    p1, p2 = parse_problem("matmul", first), parse_problem("matmul", second)
    c1, c2 = _search_rows(p1, chip, space, model, 30, 0), _search_rows(p2, chip, space, model, 30, 1)
    # the second problem's rows on a cold table, then on a table warmed by the first problem
    cold = _cold(model, p2, chip, c2)
    clear_caches()
    model.estimate(p1, chip, c1)
    model.estimate(p1, chip, c2)  # the second problem's tilings on the first problem: their grids enter too
    same_estimates(model.estimate(p2, chip, c2), cold)
    same_estimates(cold, model.estimate_reference(p2, chip, c2))


def test_ascend_tables_keep_chips_apart():
    """910B3 (20 cores) and 910B1 (24 cores), and a 910B3 profile with a smaller L2: warm tables of one chip never
    answer for another."""
    model = get_operator("matmul", "ascend")
    space = load_space("matmul", "ascend")
    b3, b1 = load_chip("ascend910b3"), load_chip("ascend910b1")
    small_l2 = b3.with_values({"l2_bytes": b3["l2_bytes"] / 16})
    p = parse_problem("matmul", dict(M=3000, N=2048, K=1024))
    c = _search_rows(p, b3, space, model, 40, 2)
    colds = {id(ch): _cold(model, p, ch, c) for ch in (b3, b1, small_l2)}
    clear_caches()
    for _ in range(2):
        for ch in (b3, b1, small_l2):
            got = model.estimate(p, ch, c)
            same_estimates(got, colds[id(ch)])
            same_estimates(got, model.estimate_reference(p, ch, c))
    assert not np.array_equal(colds[id(b3)]["time_us"], colds[id(small_l2)]["time_us"])


def test_ascend_work_table_codes_fit_a_sweep_of_random_shapes():
    """Random shapes (as bench/sweep_rate.py draws them) one after another on one warm table: each estimate equal
    to the reference formulation."""
    chip = load_chip("ascend910b3")
    model = get_operator("matmul", "ascend")
    space = load_space("matmul", "ascend")
    rng = np.random.default_rng(5)
    clear_caches()
    for i in range(6):
        m, n, k = np.rint(np.exp(rng.uniform(0, np.log(16384), 3))).astype(int).clip(1, 16384)
        p = parse_problem("matmul", dict(M=int(m), N=int(n), K=int(k)))
        c = _search_rows(p, chip, space, model, 12, i)
        if length(c):
            same_estimates(model.estimate(p, chip, c), model.estimate_reference(p, chip, c))


# --------------------------------------------------------------------------------------------------- cuda
def _cuda_plain(p, chip, c) -> dict:
    """The cuda estimate as formulated: timing(prepare(...)) on every row, cold hit-rate tables."""
    clear_caches()
    return cuda_mm.timing(cuda_mm.prepare(p, chip, c), chip, cuda_mm.efficiency(chip))


def _cuda_random(p, chip, space, model, rows: int, seed: int) -> dict:
    rng = np.random.default_rng(seed)
    c = {k: rng.choice(np.asarray(space.knobs[k].values, dtype=np.int64), 6 * rows) for k in space.names}
    ok = np.logical_and.reduce([np.broadcast_to(m, (6 * rows,)) for m in model.masks(p, chip, c).values()])
    return take(c, np.flatnonzero(ok)[:rows])


CUDA_SHAPES = (
    dict(M=1, N=6144, K=4096),
    dict(M=2048, N=4096, K=14336),
    dict(M=333, N=777, K=2050, layout="tn"),
    dict(M=4097, N=4096, K=4096, batch=2),
)


@pytest.mark.parametrize("shape", CUDA_SHAPES)
def test_cuda_estimate_shares_launch_orders_bit_for_bit(shape):
    chip = load_chip("h200")
    model = get_operator("matmul", "cuda")
    space = load_space("matmul", "cuda")
    p = parse_problem("matmul", shape)
    for c in (_cuda_random(p, chip, space, model, 5000, 0), _search_rows(p, chip, space, model, 60, 1)):
        want = _cuda_plain(p, chip, c)
        same_estimates(model.estimate(p, chip, c), want)  # cold tables
        same_estimates(model.estimate(p, chip, c), want)  # warm tables
        same_estimates(
            model.estimate(p, chip, take(c, slice(0, 500))), take(want, slice(0, 500))
        )  # too few to share


def test_cuda_hit_tables_keep_problems_and_chips_apart():
    """Warm hit-rate tables of one problem or chip never answer for another: shapes whose rows give the same
    codes (tile sizes, slots, orders) but other panel sizes, and an H200 profile with a smaller L2."""
    model = get_operator("matmul", "cuda")
    space = load_space("matmul", "cuda")
    h200 = load_chip("h200")
    small_l2 = h200.with_values({"l2_bytes": h200["l2_bytes"] / 32})
    probs = [parse_problem("matmul", dict(M=4096, N=4096, K=k)) for k in (4096, 1024)]
    c = _search_rows(probs[0], h200, space, model, 200, 3)
    assert length(c) >= cuda_hits._HIT_TABLE_MIN  # enough rows for the tables
    colds = {(i, id(ch)): _cuda_plain(p, ch, c) for i, p in enumerate(probs) for ch in (h200, small_l2)}
    clear_caches()
    for _ in range(2):
        for i, p in enumerate(probs):
            for ch in (h200, small_l2):
                same_estimates(model.estimate(p, ch, c), colds[i, id(ch)])
    assert len(cuda_hits._HIT_TABLES) == 4  # one table per problem and chip L2, each warm on the second pass
    assert not np.array_equal(colds[0, id(h200)]["l2_hit_rate"], colds[0, id(small_l2)]["l2_hit_rate"])


# --------------------------------------------------------------------------------------------------- helpers
def test_unique_inverse_and_group_rows_any_match_numpy():
    rng = np.random.default_rng(7)
    for n in (0, 1, 2, 50, 3000):
        code = rng.integers(-5, 40, n)
        vals, inv, rep = common.unique_inverse(code)
        want_vals, want_inv = np.unique(code, return_inverse=True)
        assert np.array_equal(vals, want_vals) and np.array_equal(inv, want_inv.ravel())
        assert np.array_equal(code[rep], vals)
        cols = [rng.integers(0, 3, n), rng.integers(10, 13, n), rng.integers(0, 1 << 40, n) % 5]
        if n:
            first, ginv = common.group_rows(cols)
            any_first, any_inv = common.group_rows_any(cols)
            assert np.array_equal(ginv, any_inv)
            for col in cols:  # a representative of each group holds the group's values
                assert np.array_equal(col[any_first], col[first])


def test_one_row_is_answered_as_in_a_table():
    """unique_inverse, group_rows_any and pack_codes on one row (their shortcuts: a check or a lookup estimates one
    row) answer what the row gets inside a table of several rows: the same values and dtypes, and None from
    pack_codes when a field does not fit."""
    rng = np.random.default_rng(9)
    bits = ascend_mm._SCHED_BITS
    for _ in range(200):
        row = [int(rng.integers(0, 1 << b)) for b in bits]
        if rng.random() < 0.3:  # a field out of its range: below 0 or at 2**bits
            j = int(rng.integers(len(bits)))
            row[j] = -1 if rng.random() < 0.5 else 1 << bits[j]
        table = [np.array([v, 0]) for v in row]
        # the flag fields come as bool columns too (the estimate's edges and block split)
        kinds = [bool if v in (0, 1) and rng.random() < 0.5 else np.int64 for v in row]
        one = pack_codes([np.array([v], dtype=k) for v, k in zip(row, kinds, strict=True)], bits)
        many = pack_codes(table, bits)
        assert (one is None) == (many is None)
        if one is not None:
            assert one.dtype == many.dtype and one.shape == (1,) and one[0] == many[0]
        code = np.array([int(rng.integers(-(1 << 40), 1 << 40))])
        got, want = common.unique_inverse(code), common.unique_inverse(np.repeat(code, 2))
        assert [(a.dtype, a.tolist()) for a in got] == [
            (want[0].dtype, want[0].tolist()),
            (want[1].dtype, [0]),
            (want[2].dtype, [0]),
        ]
        cols = [np.array([v]) for v in row[:4]]
        first, inv = common.group_rows_any(cols)
        first2, inv2 = common.group_rows_any([np.repeat(c, 2) for c in cols])
        assert (first.dtype, inv.dtype, first.tolist(), inv.tolist()) == (first2.dtype, inv2.dtype, [0], [0])
        assert inv2.tolist() == [0, 0]


def test_ascend_fast_path_packs_grids_not_shapes():
    """The schedule code holds the grid (tiles along M and N) and its edges: a shape that only the packed tile
    sizes could tell apart (same grid, other edges) gets another code."""
    bits = ascend_mm._SCHED_BITS
    a = pack_codes([np.array([8]), np.array([8]), np.array([1]), np.array([0]), np.array([1])], bits[:5])
    b = pack_codes([np.array([8]), np.array([8]), np.array([1]), np.array([1]), np.array([1])], bits[:5])
    assert a is not None and b is not None and a[0] != b[0]


def test_group_rows_any_with_wide_columns():
    """Columns spanning most of int64 (float bit patterns, as the cuda estimate groups hit rates by) group as
    np.unique over the rows does: no packed code overflows."""
    rng = np.random.default_rng(8)
    n = 4000
    a = rng.choice([0.0, 0.25, 0.5, 0.999, 1.0], n)
    b = rng.choice([0.0, 1e-300, 0.75, 1.0], n)
    t = rng.integers(0, 20000, n)
    first, inv = common.group_rows_any([t, a.view(np.int64), b.view(np.int64)])
    _, want = np.unique(
        np.stack([t, a.view(np.int64), b.view(np.int64)], axis=1), axis=0, return_inverse=True
    )
    assert np.array_equal(inv, want.ravel())
    for col in (t, a, b):  # each group's representative holds the group's values
        assert np.array_equal(col[first[inv]], col)


def _space_folder(folder, base_m: list[int]):
    """A user space folder whose matmul.toml is the shipped one with base_m narrowed to `base_m`."""
    folder.mkdir()
    text = _shipped_matmul_text()
    head, rest = text.split("[ascend.base_m]", 1)
    _, after = rest.split("values", 1)
    after = after.split("\n", 1)[1]
    (folder / "matmul.toml").write_text(f"{head}[ascend.base_m]\nvalues = {base_m}\n{after}")
    return folder


def _shipped_matmul_text() -> str:
    from tiler.space import shipped_space_file

    return shipped_space_file("matmul", "ascend").read_text()


def test_load_space_cache_serves_no_stale_space(tmp_path):
    """load_space keeps a parsed space by the file's identity (path as given, device, inode, size, times): a
    folder reached through a symbolic link that now leads elsewhere, and a file rewritten in place, are read
    again; an unchanged file is the same Space object."""
    one = _space_folder(tmp_path / "one", [64])
    two = _space_folder(tmp_path / "two", [128])
    link = tmp_path / "cur"
    link.symlink_to(one, target_is_directory=True)
    first = load_space("matmul", "ascend", link)
    assert first.knobs["base_m"].values == (64,)
    assert load_space("matmul", "ascend", link) is first
    link.unlink()
    link.symlink_to(two, target_is_directory=True)
    assert load_space("matmul", "ascend", link).knobs["base_m"].values == (128,)
    assert load_space("matmul", "ascend", one).knobs["base_m"].values == (64,)
    path = one / "matmul.toml"  # rewritten in place, one size longer (times may not move within a clock tick)
    path.write_text(path.read_text().replace("values = [64]", "values = [32, 64]"))
    assert load_space("matmul", "ascend", one).knobs["base_m"].values == (32, 64)
