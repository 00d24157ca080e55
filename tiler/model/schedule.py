"""The multi-core schedule: traversal order of output tiles, tile-to-core assignment, L2 reuse between rounds.

Shared by every family: Ascend assigns task i to core i mod cores (AscendC block index); a GPU grid assigns
program i to whichever SM frees first, which for equal tiles is the same round-robin by waves. The functions here
work on one schedule at a time (one tile grid and one traversal), vectorised over the tiles of that grid, and are
cached: the operator models group their candidates by schedule and call these once per distinct schedule.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import lru_cache

import numpy as np

# Columns of a core's work vector (CoreWork.vectors): tiles of the 8 types in full rounds (type = 2*edge_m +
# edge_n + 4*reuse_b), sub-tiles of the 4 edge types from a re-cut last round, and 1 when the core runs anything.
TILE_TYPES = 8
SUB_TYPES = 4
WORK_COLUMNS = TILE_TYPES + SUB_TYPES + 1
# Largest tile walk the L2 simulation runs; bigger walks are simulated on a prefix of whole slices or whole
# groups of tile rows (the steady state repeats), see panel_hits.
SIM_TILES = 2048


@lru_cache(maxsize=1024)
def traversal(
    tm: int, tn: int, offset: int = 1, direction: int = 0, serpentine: bool = False
) -> tuple[np.ndarray, np.ndarray]:
    """Tile (row, col) indices in the order the kernel walks them.

    direction 0: groups of `offset` tile-rows; inside a group, walk column by column, and inside a column the rows
    of the group (CATLASS GemmIdentityBlockSwizzle "Zn", Triton's GROUP_M). direction 1 is the transpose.
    `serpentine` reverses the walk of every odd group, so the next group starts where the last one ended and the
    panels just used are still in L2. offset=1, direction=0, serpentine=False is plain row-major raster.
    Cached (the same walk serves the core assignment and the L2 simulation); the arrays are read-only.
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
    r.flags.writeable = c.flags.writeable = False  # cached: shared by every caller
    return r, c


def same_walk(gm, gn, tiles, cores, offset, direction, serpentine, domains: dict) -> np.ndarray:
    """Rows whose traversal costs exactly what another traversal in `domains` costs (its twin), by three facts
    of `traversal` and the round-robin assignment (arrays broadcast):

    - a 1-D grid (one tile row or one tile column) is walked in order by every traversal;
    - one group (offset at least the tile rows, or columns for direction 1) is the same walk for every such
      offset, and serpentine reverses nothing;
    - when every tile runs in the first round, each core runs one tile whatever the order: the same multiset of
      tile types, no B reuse, first-touch L2 hits.

    The twin is the smallest offset that gives the same walk, direction 0 and serpentine off where the walk does
    not depend on them, each only if that value is in `domains` (the space, maybe pinned).
    """
    offs = np.array(sorted(domains["swizzle_offset"]))
    d0 = 0 in domains["swizzle_direction"]
    s0 = 0 in domains["serpentine"]
    along = np.where(direction == 1, gn, gm)  # tile rows (columns) the groups are made of
    any_walk = (gm == 1) | (gn == 1) | (tiles <= cores)
    one_group = offset >= along
    # the smallest offset in the domain that makes one group
    first_fit = offs[np.minimum(np.searchsorted(offs, along), offs.size - 1)]
    twin_offset = np.where(any_walk, offs[0], np.where(one_group & (first_fit >= along), first_fit, offset))
    twin_direction = np.where(any_walk & d0, 0, direction)
    twin_serpentine = np.where((any_walk | one_group) & s0, 0, serpentine)
    return (twin_offset != offset) | (twin_direction != direction) | (twin_serpentine != serpentine)


@dataclass(frozen=True)
class CoreWork:
    """What each core runs under one schedule, independent of the per-tile pipeline.

    vectors: (D, WORK_COLUMNS) the per-core work vectors (see WORK_COLUMNS) that can finish last: distinct, and
    not covered by another core's (at or above it in every column). The makespan is the largest of
    `vectors @ cost` for any non-negative per-column cost, so these are the only cores it needs.
    total: (WORK_COLUMNS,) the sum of all cores' vectors (for averages and chip-wide byte totals).
    cores_used: cores that run at least one tile or sub-tile.
    """

    vectors: np.ndarray
    total: np.ndarray
    cores_used: int
    padded: (
        np.ndarray
    )  # float32 `vectors` padded to a power-of-two count by repeating the first (same maximum)


@lru_cache(maxsize=8192)
def core_work(
    tm: int,
    tn: int,
    splits: int,
    batch: int,
    cores: int,
    offset: int,
    direction: int,
    serpentine: bool,
    pieces: int,
    edge_m: bool,
    edge_n: bool,
) -> CoreWork:
    """Assign `batch*splits*tm*tn` tiles to `cores` in traversal order (tile i -> core i % cores).

    Args:
        tm, tn: tile grid; splits: split-K slices (each slice is a separate tile); batch: independent products.
        pieces: tail re-split factor; >= 2 re-cuts each tile of a partial last round into that many sub-tiles,
            sub-tile j going to core j.
        edge_m, edge_n: whether the last tile row / column is smaller than the others.

    Batch and split-K slices are outer loops around the same 2-D walk, so one walk of `tm*tn` tiles gives every
    slice's tile types; slice j starts on core (j*tm*tn) mod cores. A tile reuses its core's B panel when the
    core's previous tile (i - cores) had the same column in the same slice.
    """
    r, c = traversal(tm, tn, offset, direction, serpentine)
    per = tm * tn
    outer = splits * batch
    n = per * outer
    etype = 2 * (edge_m & (r == tm - 1)) + (edge_n & (c == tn - 1))
    reuse = np.zeros(per, dtype=np.int64)
    if per > cores:
        reuse[cores:] = c[cores:] == c[:-cores]
    ttype = etype + 4 * reuse
    # per position residue, then every slice shifted by its starting core
    by_residue = np.bincount(
        (np.arange(per) % cores) * TILE_TYPES + ttype, minlength=cores * TILE_TYPES
    ).reshape(cores, TILE_TYPES)
    starts = np.bincount((np.arange(outer, dtype=np.int64) * per) % cores, minlength=cores)
    counts = np.zeros((cores, TILE_TYPES))
    for shift in np.nonzero(starts)[0]:
        counts += starts[shift] * np.roll(by_residue, shift, axis=0)
    subs = np.zeros((cores, SUB_TYPES))
    rem = n % cores
    if rem and pieces >= 2:  # the partial last round leaves `counts` and is re-cut
        pos = np.arange(n - rem, n) % per  # its tiles' positions in the walk; tile k runs on core k
        np.subtract.at(counts, (np.arange(rem), ttype[pos]), 1)
        sub_type = np.repeat(etype[pos], pieces)[:cores]
        subs[np.arange(sub_type.size), sub_type] = 1
    has_work = (counts.sum(axis=1) + subs.sum(axis=1)) > 0
    vectors = np.concatenate([counts, subs, has_work[:, None]], axis=1)
    distinct = np.array(sorted(set(map(tuple, vectors.tolist()))))  # few rows: faster than unique(axis=0)
    # a core whose counts are all at or below another's never finishes last (costs are non-negative)
    covered = (distinct[None, :, :] >= distinct[:, None, :]).all(axis=2)
    np.fill_diagonal(covered, False)
    busiest = distinct[~covered.any(axis=1)]
    d = len(busiest)
    padded = np.concatenate([busiest, busiest[:1].repeat((1 << (d - 1).bit_length()) - d, axis=0)])
    return CoreWork(busiest, vectors.sum(axis=0), int(has_work.sum()), padded.astype(np.float32))


def first_touch_only(tiles, slots, footprint_bytes, l2_bytes):
    """Where each A and B panel comes from HBM exactly once whatever the order (hit rates 1 - 1/gn and 1 - 1/gm):
    every tile runs in the first round, or all panels of the problem fit in L2 together. Scalars or arrays."""
    return (tiles <= slots) | (footprint_bytes <= l2_bytes)


@lru_cache(maxsize=8192)
def panel_hits(
    tm: int,
    tn: int,
    splits: int,
    batch: int,
    slots: int,
    offset: int,
    direction: int,
    serpentine: bool,
    a_panel_bytes: float,
    b_panel_bytes: float,
    l2_bytes: float,
) -> tuple[float, float]:
    """L2 hit rates of A and B panel loads when tiles run `slots` at a time in traversal order.

    Two cases need no walk: when every tile runs in the first round, and when all panels of the problem fit in L2
    together; in both each panel comes from HBM exactly once (its first touch), whatever the order. Walks longer
    than SIM_TILES are simulated on a prefix (whole slices, or whole groups of tile rows of the first slice).
    """
    loads = tm * tn * splits * batch
    if first_touch_only(loads, slots, (tm * a_panel_bytes + tn * b_panel_bytes) * splits * batch, l2_bytes):
        return 1.0 - 1.0 / tn, 1.0 - 1.0 / tm
    per = tm * tn
    if loads > SIM_TILES:
        if per <= SIM_TILES:  # whole slices: every slice walks the same order over its own K range
            splits, batch = max(1, SIM_TILES // per), 1
        elif direction == 0:  # whole groups of tile rows of the first slice
            rows = -(-SIM_TILES // tn)
            tm = min(tm, -(-rows // offset) * offset)
            splits, batch = 1, 1
        else:  # whole groups of tile columns
            cols = -(-SIM_TILES // tm)
            tn = min(tn, -(-cols // offset) * offset)
            splits, batch = 1, 1
    r, c = traversal(tm, tn, offset, direction, serpentine)
    outer = np.repeat(np.arange(batch * splits, dtype=np.int64), tm * tn)
    a_id = outer * tm + np.tile(r, batch * splits)
    b_id = outer * tn + np.tile(c, batch * splits)
    rnd = np.arange(a_id.size) // slots
    return _hit_rates(rnd, a_id, b_id, a_panel_bytes, b_panel_bytes, l2_bytes)


def _hit_rates(rnd, a_id, b_id, a_bytes, b_bytes, l2_bytes) -> tuple[float, float]:
    """L2 hit rates of A and B panel loads under an LRU-like capacity rule.

    A round is the set of tiles running at once. In a round, each distinct panel is fetched once from HBM unless it
    was touched in an earlier round and the bytes of distinct panels touched since then (the rounds in between plus
    this one) fit in L2; every other load of it in the round is an L2 hit (a core reads what another just fetched).
    """
    nr = int(rnd[-1]) + 1
    # distinct (panel, round) pairs, sorted by panel then round (the walk visits rounds in order)
    pairs = []
    for ids in (a_id, b_id):
        width = int(ids.max()) + 1
        seen = np.zeros(width * nr, dtype=bool)
        seen[ids * nr + rnd] = True
        pairs.append(np.divmod(np.flatnonzero(seen), nr))
    foot = np.bincount(pairs[0][1], minlength=nr) * a_bytes + np.bincount(pairs[1][1], minlength=nr) * b_bytes
    cum = np.concatenate(([0.0], np.cumsum(foot)))  # cum[r] = bytes of rounds < r
    rates = []
    for pid, pr in pairs:
        same = np.zeros(pr.size, dtype=bool)
        same[1:] = pid[1:] == pid[:-1]
        prev = np.roll(pr, 1)
        # bytes touched from the round after the previous touch up to and including this round
        between = cum[pr + 1] - cum[np.where(same, prev + 1, pr)]
        misses = pr.size - int((same & (between <= l2_bytes)).sum())
        rates.append(1.0 - misses / a_id.size)
    return rates[0], rates[1]


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
