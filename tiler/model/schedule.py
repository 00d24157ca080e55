"""The multi-core schedule: traversal order of output tiles, tile-to-core assignment, L2 reuse between rounds.

Shared by every family: Ascend assigns task i to core i mod cores (AscendC block index); a GPU grid assigns
program i to whichever SM frees first, which for equal tiles is the same round-robin by waves. The functions here
work on one schedule at a time (one tile grid and one traversal), vectorised over the tiles of that grid; the
operator models group their candidates by schedule and call these once per distinct schedule.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import lru_cache

import numpy as np


def traversal(
    tm: int, tn: int, offset: int = 1, direction: int = 0, serpentine: bool = False
) -> tuple[np.ndarray, np.ndarray]:
    """Tile (row, col) indices in the order the kernel walks them.

    direction 0: groups of `offset` tile-rows; inside a group, walk column by column, and inside a column the rows
    of the group (CATLASS GemmIdentityBlockSwizzle "Zn", Triton's GROUP_M). direction 1 is the transpose.
    `serpentine` reverses the walk of every odd group, so the next group starts where the last one ended and the
    panels just used are still in L2. offset=1, direction=0, serpentine=False is plain row-major raster.
    """
    if direction == 1:  # transpose, walk, transpose back
        c, r = traversal(tn, tm, offset, 0, serpentine)
        return r, c
    rows, cols = np.divmod(np.arange(tm * tn, dtype=np.int64), tn)
    group = rows // offset
    height = np.minimum(offset, tm - group * offset)  # the last group may be shorter
    along = np.where(serpentine & (group % 2 == 1), tn - 1 - cols, cols)
    # position in the walk, computed directly (no sort): earlier groups are full, then column-major in the group
    pos = group * offset * tn + along * height + (rows - group * offset)
    r = np.empty_like(rows)
    c = np.empty_like(cols)
    r[pos], c[pos] = rows, cols
    return r, c


@dataclass(frozen=True)
class ScheduleStats:
    """What a schedule does to the cost, independent of the per-tile pipeline.

    counts[c, t]: tiles of type t run by core c in the full rounds (t = 2*edge_m + edge_n + 4*reuse_b, reuse_b: the
    core's previous tile had the same B panel, so a resident B panel need not be reloaded).
    last_types: the type (0..3) of each tile of a partial last round, in core order (empty when the last round is full
    or when it is kept in `counts`).
    a_hit, b_hit: fraction of A / B panel loads served by L2 (first touch of a panel in a round misses unless it
    was touched recently enough to still be in L2; later touches in the same round hit).
    """

    counts: np.ndarray
    last_types: np.ndarray
    a_hit: float
    b_hit: float
    rounds: int
    tiles: int


@lru_cache(maxsize=4096)
def schedule_stats(
    tm: int,
    tn: int,
    splits: int,
    batch: int,
    cores: int,
    offset: int,
    direction: int,
    serpentine: bool,
    split_last: bool,
    edge_m: bool,
    edge_n: bool,
    a_panel_bytes: float,
    b_panel_bytes: float,
    l2_bytes: float,
) -> ScheduleStats:
    """Simulate the assignment of `batch*splits*tm*tn` tiles to `cores` in traversal order (i -> core i % cores).

    Args:
        tm, tn: tile grid; splits: split-K slices (each slice is a separate tile); batch: independent products.
        split_last: keep a partial last round out of `counts` (tail re-splitting re-cuts it).
        edge_m, edge_n: whether the last tile row / column is smaller than the others.
        a_panel_bytes, b_panel_bytes: bytes of one A row panel / B column panel of one K slice.
        l2_bytes: L2 capacity available to the panels.
    """
    r, c = traversal(tm, tn, offset, direction, serpentine)
    per = tm * tn
    # batch and split-K slices are outer loops around the 2-D walk
    outer = np.repeat(np.arange(batch * splits, dtype=np.int64), per)
    r = np.tile(r, batch * splits)
    c = np.tile(c, batch * splits)
    n = r.size
    idx = np.arange(n)
    core = idx % cores
    rnd = idx // cores
    etype = 2 * (edge_m & (r == tm - 1)) + (edge_n & (c == tn - 1))
    reuse = np.zeros(n, dtype=bool)
    if n > cores:
        reuse[cores:] = (c[cores:] == c[:-cores]) & (outer[cores:] == outer[:-cores])
    ttype = etype + 4 * reuse
    full_rounds = n // cores
    partial = n % cores != 0 and split_last
    keep = rnd < full_rounds if partial else np.ones(n, dtype=bool)
    counts = (
        np.bincount(core[keep] * 8 + ttype[keep], minlength=cores * 8).reshape(cores, 8).astype(np.float64)
    )
    last = etype[~keep].astype(np.int64)
    a_hit = _hit_rate(rnd, outer * tm + r, outer * tn + c, a_panel_bytes, b_panel_bytes, l2_bytes, which=0)
    b_hit = _hit_rate(rnd, outer * tm + r, outer * tn + c, a_panel_bytes, b_panel_bytes, l2_bytes, which=1)
    return ScheduleStats(counts, last, a_hit, b_hit, int(-(-n // cores)), n)


def _hit_rate(rnd, a_id, b_id, a_bytes, b_bytes, l2_bytes, which: int) -> float:
    """L2 hit rate of A (which=0) or B (which=1) panel loads under an LRU-like capacity rule.

    A round is the set of tiles running at once. In a round, each distinct panel is fetched once from HBM unless it
    was touched in an earlier round and the bytes of distinct panels touched since then (the rounds in between plus
    this one) fit in L2; every other load of it in the round is an L2 hit (a core reads what another just fetched).
    """
    ids = a_id if which == 0 else b_id
    loads = ids.size
    # distinct (round, A panel) and (round, B panel) pairs -> per-round footprint in bytes
    ra = np.unique(rnd * (a_id.max() + 1) + a_id)
    rb = np.unique(rnd * (b_id.max() + 1) + b_id)
    nr = int(rnd.max()) + 1
    foot = (
        np.bincount(ra // (a_id.max() + 1), minlength=nr) * a_bytes
        + np.bincount(rb // (b_id.max() + 1), minlength=nr) * b_bytes
    )
    cum = np.concatenate(([0.0], np.cumsum(foot)))  # cum[r] = bytes of rounds < r
    pairs = ra if which == 0 else rb
    width = (a_id.max() + 1) if which == 0 else (b_id.max() + 1)
    pr, pid = np.divmod(pairs, width)
    order = np.lexsort((pr, pid))
    pr, pid = pr[order], pid[order]
    same = np.zeros(pr.size, dtype=bool)
    same[1:] = pid[1:] == pid[:-1]
    prev = np.roll(pr, 1)
    # bytes touched from the round after the previous touch up to and including this round
    between = cum[pr + 1] - cum[np.where(same, prev + 1, pr)]
    hit_pair = same & (between <= l2_bytes)
    misses = int(pr.size - hit_pair.sum())
    return float(1.0 - misses / loads) if loads else 0.0


@lru_cache(maxsize=8192)
def max_b_reuse(
    tm: int,
    tn: int,
    splits: int,
    batch: int,
    cores: int,
    offsets: tuple,
    directions: tuple,
    serpentines: tuple,
) -> int:
    """The most tiles, over the given traversals, whose core ran a tile of the same B panel just before.

    Weight residency can skip a B load only on such tiles; the lower bound uses this maximum.
    """
    best = 0
    per = tm * tn
    if batch * splits * per <= cores:
        return 0
    for off in offsets:
        for d in directions:
            for sp in serpentines:
                _, c = traversal(tm, tn, int(off), int(d), bool(sp))
                c = np.tile(c, batch * splits)
                outer = np.repeat(np.arange(batch * splits), per)
                same = (c[cores:] == c[:-cores]) & (outer[cores:] == outer[:-cores])
                best = max(best, int(same.sum()))
    return best
