"""Matmul on Ascend, the fast estimate's memo engine: schedule work and L2 hit-rate tables kept across calls,
and the tile costs of the distinct tile-cost rows in the layout the busiest-core pick reads."""

from __future__ import annotations

import numpy as np

from ...model.common import (
    ceil_div,
    round_up,
)
from ...model.schedule import (
    WORK_COLUMNS,
    CodeTable,
    GrowingRows,
    PairTable,
    block_grid,
    block_work,
    core_work_many,
    on_clear,
    panel_hits_many,
    unpack_codes,
)
from .ascend_knobs import KNOBS, SCHEDULE_KNOBS
from .ascend_tile import F32_CEILING, _clamp32, tile_cost
from .problem import Matmul

# ---------------------------------------------------------------- the fast estimate's tables and tile costs
# Packed codes (field widths in bits, most significant first) of a schedule: tiles along M (gm) and N (gn), splits,
# partial last tile row and column (edges), swizzle offset, direction, serpentine, tail pieces, block split (with
# the batch and the cores, all a schedule's core work depends on: its table is shared by every problem of a batch
# and a core count, e.g. the shapes of a sweep); and of an L2 walk: tm, tn, splits, offset, direction,
# serpentine, base_k (with the problem, base_k and splits give the K slice; one table per problem and L2). A row
# whose values do not fit is scored by estimate_reference (no feasible tiling comes near these limits).
_SCHED_BITS = (18, 18, 6, 1, 1, 6, 1, 1, 8, 1)  # 61 bits: grids up to 2^18 tiles a side (M = 2^22 at base 16)
_HIT_BITS = (16, 16, 6, 6, 1, 1, 13)
_TABLES: dict = {}
_TABLES_MAX = 16  # hit-rate tables (problems) kept before all start over
_WORK_TABLES: dict = {}
# work tables (batch and core counts) kept before all start over: apart from the hit-rate tables, so that a
# sweep's stream of new problems does not start the shared work table over
_WORK_TABLES_MAX = 8
_SMALL = 2048  # tile-cost rows scored in one pass; larger tables are split by the work columns they need
_BUCKET_MIN = 256  # rows a work-column pattern needs for a pass of its own
# rows per tile_cost call: its (columns, rows) temporaries (150 or so) stay near the cache, and a search page-faults
# less (the 310P3 65537 x 2^20 x 127 search: some 30 % fewer faults, some 10 % less CPU)
TILE_ROWS = 2048


class _WorkTable(CodeTable):
    """CoreWork of schedules (schedule.core_work_many / block_work) of one batch and core count, by id: cores
    used, the work-vector totals, the padded work vectors grouped by their count (depth), and the block split's
    shape of the schedule's grid (schedule.block_grid: um, un, bm, bn)."""

    def __init__(self):
        super().__init__()
        # each column grows in a GrowingRows buffer; the attributes are views of the rows so far
        self._grow = {
            "used": GrowingRows(),
            "total": GrowingRows((WORK_COLUMNS,)),
            "depth": GrowingRows((), np.int64),
            "slot": GrowingRows((), np.int64),
            "blocks": GrowingRows((4,), np.int64),
        }
        for name, rows in self._grow.items():
            setattr(self, name, rows.filled)
        self._bucket_rows: dict[int, GrowingRows] = {}
        self.buckets: dict[int, np.ndarray] = {}  # depth -> (schedules, depth, WORK_COLUMNS) float32

    def _add(self, new: tuple) -> None:
        works, blocks = new
        depth = np.array([len(w.padded) for w in works], dtype=np.int64)
        slot = np.empty(len(works), dtype=np.int64)
        for d in np.unique(depth).tolist():
            new = np.flatnonzero(depth == d)
            rows = self._bucket_rows.setdefault(d, GrowingRows((d, WORK_COLUMNS), np.float32))
            slot[new] = rows.size + np.arange(new.size)
            self.buckets[d] = rows.append(np.stack([works[i].padded for i in new.tolist()]))
        added = {
            "used": [float(w.cores_used) for w in works],
            "total": np.stack([w.total for w in works]),
            "depth": depth,
            "slot": slot,
            "blocks": blocks,
        }
        for name, rows in added.items():
            setattr(self, name, self._grow[name].append(rows))


on_clear(_TABLES.clear)  # schedule.clear_caches() starts the tables over too
on_clear(_WORK_TABLES.clear)


def _table(store: dict, most: int, key: tuple, kind):
    table = store.get(key)
    if table is None:
        if len(store) >= most:
            store.clear()
        table = store[key] = kind()
    return table


def _work_table(p: Matmul, cores: int) -> _WorkTable:
    return _table(_WORK_TABLES, _WORK_TABLES_MAX, (p.batch, cores), _WorkTable)


def _hit_table(p: Matmul, cores: int, cap: float) -> PairTable:
    key = (p.M, p.N, p.K, p.batch, p.in_bytes, cores, float(cap))
    return _table(_TABLES, _TABLES_MAX, key, PairTable)


def _new_work(p: Matmul, cores: int, codes: np.ndarray) -> tuple[list, np.ndarray]:
    """The CoreWork of each schedule code (estimate_reference's simulation: one pass per tile grid), and the
    block split's shape of its grid (um, un, bm, bn). Reads only the codes, the batch and the cores.

    The block shape is solved for the block split's codes only; a walked code's row is 0 (estimate reads it only
    where the block split runs), so a search or a check of walked schedules (CATLASS's swizzle) skips block_grid,
    about an eighth of this function's time on a new grid."""
    fields = unpack_codes(codes, _SCHED_BITS)
    blocks = np.zeros((codes.size, 4), dtype=np.int64)
    at = np.flatnonzero(fields[-1])
    if at.size:
        blocks[at] = np.stack(block_grid(fields[0][at], fields[1][at], fields[2][at], cores), axis=1)
    gm, gn, splits, edge_m, edge_n, off, dirn, snake, pieces, block = (f.tolist() for f in fields)
    works: list = [None] * len(gm)
    grids: dict = {}
    for i, key in enumerate(zip(gm, gn, splits, edge_m, edge_n, strict=True)):
        grids.setdefault(key, []).append(i)
    for (a, b, s, em, en), idx in grids.items():
        grid = (a, b, s, p.batch, cores, bool(em), bool(en))
        walked = [i for i in idx if not block[i]]
        if walked:
            setting = np.array([(off[i], dirn[i], snake[i], pieces[i]) for i in walked], dtype=np.int64)
            for i, w in zip(walked, core_work_many(*grid, setting), strict=True):
                works[i] = w
        for i in idx:
            if block[i]:
                works[i] = block_work(*grid, shape=blocks[i].tolist())
    return works, blocks


def _new_hits(p: Matmul, cores: int, cap: float, codes: np.ndarray) -> np.ndarray:
    """L2 hit rates (A, B) of each walk code (schedule.panel_hits_many, one pass per grid and panel size)."""
    tm, tn, splits, off, dirn, snake, bk = (f.tolist() for f in unpack_codes(codes, _HIT_BITS))
    out = np.empty((len(tm), 2))
    groups: dict = {}
    for i in range(len(tm)):
        steps = -(-p.K // bk[i])
        kc = min(-(-steps // splits[i]) * bk[i], p.K)
        grid = (-(-p.M // tm[i]), -(-p.N // tn[i]), splits[i], p.batch, cores)
        panels = (float(tm[i] * kc * p.in_bytes), float(tn[i] * kc * p.in_bytes), float(cap))
        groups.setdefault((grid, panels), []).append(i)
    for (grid, panels), idx in groups.items():
        setting = np.array([(off[i], dirn[i], snake[i]) for i in idx], dtype=np.int64)
        out[idx] = panel_hits_many(*grid, setting, *panels)
    return out


def _buckets(need: np.ndarray) -> list[tuple[np.ndarray | None, np.ndarray]]:
    """Passes over the tile-cost rows: (rows or None for all, work columns), so that a row is costed on the
    columns it needs (bit j of `need`) and a few more: one pass for a small table, else one per pattern of
    columns shared by enough rows, and one for the rest on the union of their columns."""

    def columns(bits: int) -> np.ndarray:
        return np.flatnonzero((bits >> np.arange(WORK_COLUMNS - 1)) & 1)

    if need.size <= _SMALL:
        return [(None, columns(int(np.bitwise_or.reduce(need))))]
    counts = np.bincount(need, minlength=1 << (WORK_COLUMNS - 1))
    pats = np.flatnonzero(counts)
    if pats.size == 1:
        return [(None, columns(int(pats[0])))]
    order = need.astype(np.uint16).argsort(kind="stable")  # a radix sort: rows grouped by pattern
    groups = np.split(order, np.cumsum(counts[pats])[:-1])
    out, rest, rest_bits = [], [], 0
    for pat, rows in zip(pats.tolist(), groups, strict=True):
        if rows.size >= _BUCKET_MIN:
            out.append((rows, columns(pat)))
        else:
            rest.append(rows)
            rest_bits |= pat
    if rest:
        out.append((np.concatenate(rest), columns(rest_bits)))
    return out


_PER_KEYS = ("mac", "scalar", "mte1", "mte2_bw", "fixpipe", "drain")  # _per_core's pipes, in its order
_SUM_KEYS = ("l2_read", "hbm_read")
# the knobs tile_cost reads (the schedule knobs never reach a tile)
_TILE_KNOBS = tuple(k for k in KNOBS if k not in SCHEDULE_KNOBS)


def _tile_costs(p: Matmul, chip, c: dict, at_c, g: dict, need, pieces, hit_a, hit_b, active, cores, cols):
    """tile_cost of the work columns `cols` (of schedule.WORK_COLUMNS but the last: 4 tile types, the same after a
    B-panel reuse, 4 re-cut sub-tile types) of the distinct tile-cost rows (row u is candidate `at_c[u]` of `c`
    and of the geometry `g`; the other arguments are per row u), in the layout _per_core_table reads:
    ({"busy": (U, k) float64, "per": (U, 6, k) float32 of _PER_KEYS, "sums": (U, 2, k) float32 of _SUM_KEYS,
    "fill0", "drain0": (U,) the type-0 column}, order), the rows in `order` (None: as given). Only the columns a
    row needs (bit j of `need`) are computed; the others are 0 or a copy (their work is 0 in every schedule of
    the row).

    A tile after a B-panel reuse costs what the tile does unless its B panel is resident (weight_resident), so
    such rows need the tile's column instead. The arguments of tile_cost are estimate_reference's, element for
    element (the tile sizes as float64, as its where() makes them), and each value is cast to float32 as
    _per_core casts it, so the costs are the same bit for bit."""
    kind = np.arange(WORK_COLUMNS - 1) // 4  # 0: tile, 1: tile after a B-panel reuse, 2: re-cut sub-tile
    quad = np.arange(WORK_COLUMNS - 1) % 4  # the tile type: 0 interior, 1 last column, 2 last row, 3 corner
    wr = c["weight_resident"][at_c] == 1
    need = np.where(wr, need, (need & 0xF0F) | ((need >> 4) & 0xF))
    passes = _buckets(need)
    order = None if len(passes) == 1 else np.concatenate([r for r, _ in passes])
    if order is not None:  # every per-row input in pass order, once: each pass is then a contiguous slice
        at_c, wr, pieces, hit_a, hit_b, active = (x[order] for x in (at_c, wr, pieces, hit_a, hit_b, active))
    u, k = at_c.size, cols.size
    # tile_cost runs on (columns, rows) arrays, the per-row values as (rows,) broadcast along the columns: numpy's
    # inner loop then runs along the rows (long) rather than along the few columns (several times faster)
    knobs = {key: c[key][at_c] for key in _TILE_KNOBS if key in c}
    tm, tn, m_last, n_last, kc = (np.asarray(g[key])[at_c] for key in ("tm", "tn", "m_last", "n_last", "kc"))
    ms = np.stack([tm, tm, m_last, m_last])  # (4, U): _sizes
    ns = np.stack([tn, n_last, tn, n_last])
    along_m = tm >= tn
    busy = np.zeros((u, k))
    per = np.zeros((u, len(_PER_KEYS), k), dtype=np.float32)
    sums = np.zeros((u, len(_SUM_KEYS), k), dtype=np.float32)
    fill0, drain0 = np.empty(u), np.empty(u)
    # each pass in pieces of at most TILE_ROWS rows (element-wise: the same values)
    spans, lo = [], 0
    for rows, bcols in passes:
        hi = lo + (u if rows is None else rows.size)
        spans += [(a, min(a + TILE_ROWS, hi), bcols) for a in range(lo, hi, TILE_ROWS)]
        lo = hi
    for lo, hi, bcols in spans:
        s = slice(lo, hi)
        kd, q = kind[bcols], quad[bcols]
        mt, nt = ms[q, s].astype(np.float64), ns[q, s].astype(np.float64)  # (k, rows)
        sub = np.flatnonzero(kd == 2)
        if sub.size:  # estimate_reference's sub_m / sub_n, for the re-cut columns
            pu, am = pieces[s], along_m[s]
            x, y = ms[q[sub], s], ns[q[sub], s]
            mt[sub] = np.where(am, np.minimum(round_up(ceil_div(x, pu), 16), x), x)
            nt[sub] = np.where(am, y, np.minimum(round_up(ceil_div(y, pu), 16), y))
        cost = tile_cost(
            p,
            chip,
            {key: v[s] for key, v in knobs.items()},
            mt,
            nt,
            kc[s],
            hit_a[s],
            hit_b[s],
            wr[s] & (kd == 1)[:, None],
            np.where((kd == 2)[:, None], cores, active[s]),
        )
        cost = {key: v.T for key, v in cost.items()}  # (rows, k), the layout of the tables below
        # each output column from the pass's: itself, else (a reuse column) the tile's, else none (0)
        pos = np.full(WORK_COLUMNS - 1, bcols.size)
        pos[bcols] = np.arange(bcols.size)
        src = pos[cols]
        reuse = (src == bcols.size) & (kind[cols] == 1)
        src[reuse] = pos[cols[reuse] - 4]
        have = src < bcols.size
        dst = None if have.all() else np.flatnonzero(have)
        src = src if dst is None else src[dst]
        direct = dst is None and src.size == bcols.size and bool((src == np.arange(bcols.size)).all())
        if direct:
            busy[s] = cost["busy"]
            for j, key in enumerate(_PER_KEYS):
                per[s, j] = cost[key]
            for j, key in enumerate(_SUM_KEYS):
                sums[s, j] = cost[key]
        elif dst is None:
            busy[s] = cost["busy"][:, src]
            for j, key in enumerate(_PER_KEYS):
                per[s, j] = cost[key][:, src]
            for j, key in enumerate(_SUM_KEYS):
                sums[s, j] = cost[key][:, src]
        else:
            busy[s, dst] = cost["busy"][:, src]
            for j, key in enumerate(_PER_KEYS):
                per[s, j, dst] = cost[key][:, src]
            for j, key in enumerate(_SUM_KEYS):
                sums[s, j, dst] = cost[key][:, src]
        p0 = pos[0]  # type 0 (the fill) is computed in every pass (need | 1), and is cols[0]
        fill0[s] = cost["fill"][:, p0]
        drain0[s] = cost["drain"][:, p0]
    if not per.max(initial=0.0) <= F32_CEILING:  # _clamp32's ceiling, as the reference's per-core sums see it
        np.minimum(per, F32_CEILING, out=per)
    return {"busy": busy, "per": per, "sums": sums, "fill0": fill0, "drain0": drain0}, order


def _per_core_table(cost: dict, ui: np.ndarray, gi: np.ndarray, works: _WorkTable, sid, cols) -> dict:
    """_per_core with the schedules' work from a _WorkTable (`sid`: the table id of each distinct schedule) and
    the tile costs in _tile_costs' layout: the same arrays in the same operations, so the same results bit for
    bit."""
    n = ui.size
    total = works.total[sid][:, cols]
    depth = works.depth[sid]
    slot = works.slot[sid]
    at = np.empty((n, cols.size), dtype=np.float32)
    busy = np.take(cost["busy"], ui, axis=0)
    busy32 = _clamp32(busy)
    row_depth = depth[gi]
    for d in np.unique(depth).tolist():
        groups = np.flatnonzero(depth == d)
        local = np.zeros(sid.size, dtype=np.int64)
        local[groups] = np.arange(groups.size)
        rows = np.flatnonzero(row_depth == d) if len(groups) < sid.size else np.arange(n)
        if d == 1:  # one core can finish last: it is the busiest (argmax of one is 0), no product needed
            at[rows] = np.take(works.buckets[d][slot[groups], 0][:, cols], local[gi[rows]], axis=0)
            continue
        w = np.take(works.buckets[d][slot[groups]][:, :, cols], local[gi[rows]], axis=0)  # (rows, d, k)
        crit = np.matmul(w, busy32[rows][:, :, None])[:, :, 0].argmax(axis=1)
        at[rows] = w[np.arange(rows.size), crit]
    out = {"busy": np.einsum("rk,rk->r", busy, at)}
    per = np.take(cost["per"], ui, axis=0)
    out.update(zip(_PER_KEYS, np.einsum("rpk,rk->pr", per, at).astype(np.float64), strict=True))
    tot = np.take(total.astype(np.float32), gi, axis=0)
    out["busy_sum"] = np.einsum("rk,rk->r", busy, tot)
    sums = np.take(cost["sums"], ui, axis=0)
    out["l2_read"], out["hbm_read"] = np.einsum("rpk,rk->pr", sums, tot).astype(np.float64)
    return out
