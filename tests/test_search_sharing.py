"""Work the exhaustive search shares across its calls (issue 15's sweep rate), against the plain formulation it
replaces: the schedule twins of a tiling table times the schedule product computed on a broadcast
(`dominated_product`) equal `dominated` of the product row for row; `space.product_rows` equals a take of the
product; the model's code tables (schedule.CodeTable, GrowingRows) give the ids and rows a plain dict and
np.concatenate give, over many calls and a table that starts over."""

from __future__ import annotations

import numpy as np
import pytest

from tiler.hardware import load_chip
from tiler.model.schedule import CodeTable, GrowingRows, PairTable
from tiler.operator import get_operator
from tiler.problem import parse_problem
from tiler.search.proven import enumerate_feasible
from tiler.space import length, load_space, product, product_rows, take

SHAPES = (
    dict(M=1, N=6144, K=4096),
    dict(M=77, N=1234, K=333, layout="nt"),
    dict(M=4096, N=4608, K=3584),
    dict(M=333, N=555, K=999, batch=3),
    dict(M=7, N=13, K=29),
)


@pytest.mark.parametrize("chip_id", ["ascend910b3", "ascend310p3", "h200"])
def test_dominated_product_is_dominated_of_the_product(chip_id):
    chip = load_chip(chip_id)
    model = get_operator("matmul", chip.family)
    space = load_space("matmul", chip.family)
    pinned = {"ascend": {"tail_split": "auto", "serpentine": "1"}, "cuda": {}}[chip.family]
    for sp in (space, space.pin(pinned)) if pinned else (space,):
        sched = sp.product([k for k in model.SCHEDULE_KNOBS if k in sp.knobs])
        domains = sp.domains()
        for shape in SHAPES:
            p = parse_problem("matmul", shape)
            table, _, _ = enumerate_feasible(p, chip, sp, model)
            rows = take(table, np.random.default_rng(1).permutation(length(table))[:60])
            want = model.dominated(p, chip, product(rows, sched), domains)
            got = model.dominated_product(p, chip, rows, sched, domains)
            assert got.shape == want.shape and np.array_equal(got, want), (chip_id, shape)


def test_product_rows_is_a_take_of_the_product():
    a = {"x": np.arange(5), "y": np.arange(5) * 10}
    b = {"s": np.array([7, 8, 9])}
    idx = np.array([0, 2, 3, 14, 7])
    full = take(product(a, b), idx)
    got = product_rows(a, b, idx)
    assert list(got) == list(full) and all(np.array_equal(got[k], full[k]) for k in full)


def test_growing_rows_equal_concatenation():
    grow = GrowingRows((3,), np.float32)
    plain = np.empty((0, 3), dtype=np.float32)
    rng = np.random.default_rng(0)
    for n in (0, 1, 5, 70, 3, 200, 0, 9):
        block = rng.random((n, 3))
        plain = np.concatenate([plain, block.astype(np.float32)])
        rows = grow.append(block)
        assert rows.dtype == np.float32 and np.array_equal(rows, plain)
    assert np.array_equal(grow.filled, plain)


class _Echo(PairTable):
    """A PairTable whose row for a code is (code, code + 0.5): every id must find its own code's row."""


def test_code_table_ids_over_many_calls_and_a_restart():
    table = _Echo()
    table.MAX_ROWS = 300  # small: the table starts over during the calls below
    rng = np.random.default_rng(2)
    for _ in range(40):
        codes = np.unique(rng.integers(0, 1000, rng.integers(1, 60)))
        computed = []

        def compute(missing, computed=computed):
            computed.append(missing.copy())
            return np.stack([missing, missing + 0.5], axis=1).astype(np.float64)

        ids = table.ids(codes, compute)
        assert np.array_equal(table.values[ids], np.stack([codes, codes + 0.5], axis=1))
        assert np.all(np.diff(table.codes) > 0) and table.codes.size == table.count
        if computed:  # only codes the table did not hold were computed, once each
            assert np.unique(computed[0]).size == computed[0].size


def test_code_table_unsorted_missing_codes():
    """Codes given out of order still get their own rows (the merge sorts what it inserts)."""
    table = _Echo()
    for codes in (np.array([50, 10, 30]), np.array([40, 5, 60, 10])):
        ids = table.ids(codes, lambda m: np.stack([m, m + 0.5], axis=1).astype(np.float64))
        assert np.array_equal(table.values[ids][:, 0], codes)
    assert isinstance(table, CodeTable) and np.array_equal(table.codes, [5, 10, 30, 40, 50, 60])
