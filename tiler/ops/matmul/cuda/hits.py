"""L2 hit rates of A and B panel loads in each candidate's launch order, kept in tables per problem."""

from __future__ import annotations

import numpy as np

from ....model.common import (
    ceil_div,
    group_rows_any,
    unique_inverse,
)
from ....model.schedule import PairTable, on_clear, pack_codes, panel_hits_many, unpack_codes
from ..problem import Matmul
from .resources import _i

# L2 hit rates of the launch orders, kept per (problem, chip L2 and SMs) in tables found by a packed code of what
# else they depend on: BLOCK_M, BLOCK_N, SPLIT_K, the round's slots, the group width and serpentine (field widths
# in bits, most significant first). Rows whose values do not fit are simulated without the table.
_HIT_BITS = (12, 12, 10, 16, 8, 1)
_HIT_TABLES: dict = {}
_HIT_TABLES_MAX = 16  # tables (problems) kept before all start over
# rows from which a call looks its hit rates up in the tables (below: the table costs more)
_HIT_TABLE_MIN = 1024


on_clear(_HIT_TABLES.clear)  # schedule.clear_caches() starts the tables over too


def _panel_hit_rates(p: Matmul, chip, c: dict, tm, tn, sk, occ_eff, rows_a, bn):
    """L2 hit rates of A and B panel loads in each candidate's launch order (schedule.panel_hits), one
    simulation per distinct (grid, round, order, panel sizes), kept per problem and chip (a search or a repeated
    call pays no simulation and no Python per row once a setting is known)."""
    order, gm = _i(c, "ORDER"), _i(c, "GROUP_M")
    sms = chip.cores
    group = np.where(order == 1, gm, 1)
    serp = (order == 2).astype(np.int64)
    # a round is `occupancy` programs on every SM; for the L2 walk it is rounded down to a power of two (the
    # footprint of a round changes reuse only near the capacity edge; this keeps distinct walks few)
    slots = sms * (1 << np.floor(np.log2(occ_eff)).astype(np.int64))
    l2 = float(chip["l2_bytes"])
    if (
        np.size(order) < _HIT_TABLE_MIN
    ):  # a search's batch: simulated directly (the schedule caches the walks)
        return _simulated_hit_rates(p, l2, tm, tn, sk, slots, group, serp, rows_a, bn)
    code = pack_codes([_i(c, "BLOCK_M"), bn, sk, slots, group, serp], _HIT_BITS)
    if code is None:
        return _simulated_hit_rates(p, l2, tm, tn, sk, slots, group, serp, rows_a, bn)
    ucode, inv, _ = unique_inverse(code)
    key = (p.M, p.N, p.K, p.batch, p.in_bytes, sms, l2)
    table = _HIT_TABLES.get(key)
    if table is None:
        if len(_HIT_TABLES) >= _HIT_TABLES_MAX:
            _HIT_TABLES.clear()
        table = _HIT_TABLES[key] = PairTable()
    ids = table.ids(ucode, lambda missing: _hit_rates_of_codes(p, l2, missing))
    rates = table.values[ids[inv]]
    return rates[:, 0], rates[:, 1]


def _hit_rates_of_codes(p: Matmul, l2: float, codes: np.ndarray) -> np.ndarray:
    """(A, B) hit rates of packed codes (_HIT_BITS), by prepare()'s grid arithmetic on their fields."""
    bm, bn, sk, slots, group, serp = unpack_codes(codes, _HIT_BITS)
    tm, tn = ceil_div(p.M, bm), ceil_div(p.N, bn)
    a, b = _simulated_hit_rates(p, l2, tm, tn, sk, slots, group, serp, np.minimum(bm, p.M), bn)
    return np.stack([a, b], axis=1)


def _simulated_hit_rates(p: Matmul, l2: float, tm, tn, sk, slots, group, serp, rows_a, bn):
    """The hit rates by simulation: one panel_hits_many call per grid (tm, tn, splits, slots, panel sizes) with
    all of its launch orders."""
    b = p.in_bytes
    kslice = ceil_div(p.K, sk)
    a_panel = rows_a * kslice * b
    b_panel = np.minimum(bn, p.N) * kslice * b
    keys = [tm, tn, sk, slots, group, serp, a_panel, b_panel]
    keys = [np.broadcast_to(np.asarray(k, dtype=np.int64), np.shape(tm)) for k in keys]
    first, inv = group_rows_any(keys)
    uniq = np.stack([k[first] for k in keys], axis=1)
    hits = np.zeros((len(uniq), 2))
    grid_cols = [0, 1, 2, 3, 6, 7]
    gfirst, ginv = group_rows_any([uniq[:, j] for j in grid_cols])
    for gi, row in enumerate(gfirst):
        t_m, t_n, s_k, sl, _, _, ap, bp = (int(x) for x in uniq[row])
        members = np.flatnonzero(ginv == gi)
        settings = np.stack(
            [np.maximum(uniq[members, 4], 1), np.zeros(members.size, dtype=np.int64), uniq[members, 5]],
            axis=1,
        )
        hits[members] = panel_hits_many(t_m, t_n, s_k, p.batch, sl, settings, float(ap), float(bp), l2)
    return hits[inv, 0], hits[inv, 1]
