"""Tile walks and the work each core gets: traversal orders, tile-to-core assignment, per-core work vectors.

Ascend assigns task i to core i mod cores (AscendC block index); a GPU grid assigns program i to whichever SM
frees first, which for equal tiles is the same round-robin by waves. Walks and core work are cached per (grid,
setting); grids above WALK_TILES are counted in closed form (walk_counts), not walked.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from functools import lru_cache

import numpy as np

from ..common import group_rows

# Columns of a core's work vector (CoreWork.vectors): tiles of the 8 types in full rounds (type = 2*edge_m +
# edge_n + 4*reuse_b), sub-tiles of the 4 edge types from a re-cut last round, and 1 when the core runs anything.
TILE_TYPES = 8
SUB_TYPES = 4
WORK_COLUMNS = TILE_TYPES + SUB_TYPES + 1
# Largest tile grid (one slice) whose core work is counted on its walk; larger ones are counted in closed form
# (walk_counts: the same counts, faster beyond this size, and without a table sized by the tiles).
WALK_TILES = 1 << 14


# Caches, each bounded (a long sweep starts them over): walks by (tm, tn, offset, direction, serpentine), core work
# by (grid, setting); the L2 hit rates (l2.py) use the same bounds.
_WALKS: dict = {}
_WALK_ELEMS = 0
_WALK_ELEMS_MAX = 1 << 23  # tile indices kept before the walk cache starts over (about 64 MB)
_WORK: dict = {}
_CACHE_ROWS = 1 << 17  # entries kept in _WORK, _HITS and _COUNTS before each starts over
_COUNTS: dict = {}  # walk_counts by walk


def walks(tm: int, tn: int, settings: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """traversal() for each (offset, direction, serpentine) row of `settings`: (S, tm*tn) rows and columns.

    Cached per walk (the core assignment and the L2 simulation walk the same grids); the cache is bounded by the
    number of tile indices it holds."""
    global _WALK_ELEMS
    keys = [(tm, tn, *row) for row in np.asarray(settings, dtype=np.int64).tolist()]
    # a full cache starts over before the lookup, so every key this call needs is there after it
    if _WALK_ELEMS > _WALK_ELEMS_MAX:
        _WALKS.clear()
        _WALK_ELEMS = 0
    todo = sorted({k for k in keys if k not in _WALKS})
    if todo:
        r, c = _compute_walks(tm, tn, np.array([k[2:] for k in todo], dtype=np.int64))
        for k, rr, cc in zip(todo, r, c, strict=True):
            rr.flags.writeable = cc.flags.writeable = False
            _WALKS[k] = (rr, cc)
        _WALK_ELEMS += r.size
    if len(keys) == 1:  # one walk (a new grid's single setting): views of the cached arrays, not copies
        r, c = _WALKS[keys[0]]
        return r[None], c[None]
    return np.stack([_WALKS[k][0] for k in keys]), np.stack([_WALKS[k][1] for k in keys])


def _compute_walks(tm: int, tn: int, settings: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """The walks of `settings`, computed position by position (no sort, no scatter): every group before the one
    holding position p is full (offset rows of the whole width), so p's group is p // (offset*width); inside its
    group of height h the walk goes column by column, so p is column (p - start) // h, row (p - start) % h."""
    per = tm * tn
    it = np.int32 if per < 1 << 31 else np.int64  # half the memory traffic of int64
    out_r = np.empty((len(settings), per), dtype=it)
    out_c = np.empty_like(out_r)
    p = np.arange(per, dtype=it)[None, :]
    for d in (0, 1):
        sel = np.flatnonzero(settings[:, 1] == d)
        if not sel.size:
            continue
        if sel.size == len(settings):  # every walk in this direction: slices, no gathered copies
            sel = slice(None)
        a, b = (tm, tn) if d == 0 else (tn, tm)  # direction 1 walks the transposed grid
        off = np.minimum(settings[sel, 0], a)[:, None].astype(it)
        group = p // (off * b)
        height = np.minimum(off, a - group * off)
        q = p - group * off * b
        col = q // height
        row = group * off + (q - col * height)
        col = np.where((settings[sel, 2][:, None] == 1) & (group % 2 == 1), b - 1 - col, col)
        out_r[sel], out_c[sel] = (row, col) if d == 0 else (col, row)
    return out_r, out_c


def traversal(
    tm: int, tn: int, offset: int = 1, direction: int = 0, snake: bool = False
) -> tuple[np.ndarray, np.ndarray]:
    """Tile (row, col) indices in the order the kernel walks them.

    direction 0: groups of `offset` tile-rows; inside a group, walk column by column, and inside a column the rows
    of the group (CATLASS GemmIdentityBlockSwizzle "Zn", Triton's GROUP_M). direction 1 is the transpose.
    `snake` (serpentine) reverses the walk of every odd group, so the next group starts where the last one ended and the
    panels just used are still in L2. offset=1, direction=0, snake=False is plain row-major raster.
    One row of `walks` (cached; the arrays are read-only).
    """
    walks(tm, tn, np.array([[offset, direction, int(snake)]]))
    return _WALKS[tm, tn, offset, direction, int(snake)]


def same_walk(gm, gn, tiles, cores, offset, direction, snake, offsets, directions, snakes) -> np.ndarray:
    """Rows whose traversal costs exactly what another traversal in `domains` costs (its twin), by three facts
    of `traversal` and the round-robin assignment (arrays broadcast):

    - a 1-D grid (one tile row or one tile column) is walked in order by every traversal;
    - one group (offset at least the tile rows, or columns for direction 1) is the same walk for every such
      offset, and serpentine reverses nothing;
    - when every tile runs in the first round, each core runs one tile whatever the order: the same multiset of
      tile types, no B reuse, first-touch L2 hits.

    The twin is the smallest offset that gives the same walk, direction 0 and serpentine off where the walk does
    not depend on them, each only if that value is in its domain (`offsets`, `directions`, `snakes`: the space's
    values, maybe pinned).
    """
    offs = np.array(sorted(offsets))
    d0 = 0 in directions
    s0 = 0 in snakes
    along = np.where(direction == 1, gn, gm)  # tile rows (columns) the groups are made of
    any_walk = (gm == 1) | (gn == 1) | (tiles <= cores)
    one_group = offset >= along
    # the smallest offset in the domain that makes one group
    first_fit = offs[np.minimum(np.searchsorted(offs, along), offs.size - 1)]
    twin_offset = np.where(any_walk, offs[0], np.where(one_group & (first_fit >= along), first_fit, offset))
    twin_direction = np.where(any_walk & d0, 0, direction)
    twin_snake = np.where((any_walk | one_group) & s0, 0, snake)
    return (twin_offset != offset) | (twin_direction != direction) | (twin_snake != snake)


def walk_points(tm: int, tn: int, offset, direction, snake, p) -> tuple[np.ndarray, np.ndarray]:
    """Tile (row, col) at walk positions `p` (an int64 array): one position of `traversal` in closed form, as
    _compute_walks computes every position, so any position of a walk of billions of tiles costs O(1). The
    walk settings may be arrays too (one per position: walk_counts_many types many walks' positions at once)."""
    p = np.asarray(p, dtype=np.int64)
    d0 = np.asarray(direction) == 0
    a, b = np.where(d0, tm, tn), np.where(d0, tn, tm)
    off = np.minimum(offset, a)
    group = p // (off * b)
    height = np.minimum(off, a - group * off)
    q = p - group * off * b
    col = q // height
    row = group * off + (q - col * height)
    col = np.where(np.asarray(snake, dtype=bool) & (group % 2 == 1), b - 1 - col, col)
    return np.where(d0, row, col), np.where(d0, col, row)


def point_types(tm, tn, cores, offset, direction, snake, edge_m, edge_n, p) -> np.ndarray:
    """The tile type (TILE_TYPES) at walk positions `p` of one slice: edge bits of the tile, plus 4 when the
    core's previous tile (position p - cores) has the same column (walk_points; no walk). The walk settings may
    be arrays, one per position."""
    p = np.asarray(p, dtype=np.int64)
    r, c = walk_points(tm, tn, offset, direction, snake, p)
    out = 2 * ((r == tm - 1) & bool(edge_m)) + ((c == tn - 1) & bool(edge_n))
    before = p >= cores
    _, c0 = walk_points(tm, tn, offset, direction, snake, np.where(before, p - cores, 0))
    return out + 4 * (before & (c0 == c))


def _residue_hist(start, stride, n, cores: int) -> np.ndarray:
    """How many of start + j*stride, j in [0, n), have each residue mod `cores`, (R, cores) for R rows of
    (start, stride, n) arrays: the residues repeat every cores / gcd(stride, cores) terms, so one period is
    counted, weighted by how often it recurs (whole periods, plus one for the rest)."""
    start, stride, n = (np.atleast_1d(np.asarray(x, dtype=np.int64)) for x in (start, stride, n))
    period = cores // np.gcd(stride % cores, cores)  # gcd(0, cores) = cores: period 1
    whole, rest = np.divmod(n, period)
    j = np.arange(cores, dtype=np.int64)
    weight = (j < np.minimum(period, n)[:, None]) * (whole[:, None] + (j < rest[:, None]))
    t = np.arange(start.size)[:, None]
    return np.bincount(
        (t * cores + (start[:, None] + j * stride[:, None]) % cores).ravel(),
        weights=weight.ravel(),
        minlength=start.size * cores,
    ).reshape(start.size, cores)


def _runs_counts(runs: np.ndarray, slots: int, cores: int) -> np.ndarray:
    """Tiles per core of many runs, (slots, TILE_TYPES, cores): each run (slot, tile type, start, n, length,
    stride) is the positions start + j*stride + [0, length) for j in [0, n), counted per residue mod `cores`
    into its slot.

    Every run adds `length // cores` on every residue per start; each start residue (_residue_hist) then adds
    one to the `length % cores` residues after it (a circular window sum over the starts' histogram). Whole
    counts, in a few vectorised passes for all the runs."""
    out = np.zeros((slots, TILE_TYPES, cores))
    runs = runs[(runs[:, 3] > 0) & (runs[:, 4] > 0)]
    if not runs.size:
        return out.astype(np.int64)
    slot, ttype, start, n, length, stride = runs.T
    full, rem = np.divmod(length, cores)
    cell = slot * TILE_TYPES + ttype
    flat = out.reshape(slots * TILE_TYPES, cores)
    flat += np.bincount(cell, weights=full * n, minlength=slots * TILE_TYPES)[:, None]
    part = np.flatnonzero(rem)
    if part.size:
        hist = _residue_hist(start[part], stride[part], n[part], cores)
        t = np.arange(part.size)[:, None]
        cs = np.zeros((part.size, 2 * cores + 1))
        np.cumsum(np.concatenate([hist, hist], axis=1), axis=1, out=cs[:, 1:])
        x = np.arange(cores) + cores + 1
        win = cs[t, x] - cs[t, x - rem[part][:, None]]
        flat += np.bincount(
            (cell[part][:, None] * cores + x - cores - 1).ravel(), weights=win.ravel(), minlength=flat.size
        ).reshape(flat.shape)
    return np.rint(out).astype(np.int64)


def _group_runs(tm, tn, cores, offset, direction, snake, edge_m, edge_n, g: int) -> tuple[int, int, list]:
    """Group g of the walk: its first position, how many positions to type one by one (its first `cores`), and
    the rest as runs (tile type, start, runs, run length, stride), for _runs_counts.

    Inside the group the walk runs `b` runs (walk columns) of `h` tiles; a position at least `cores` into the
    group has its core's previous tile in the same group: for direction 0 in the same run exactly when it is at
    least `cores` into the run (runs are distinct columns), for direction 1 exactly when h divides cores (the
    runs are rows, the tile `cores` back is in the same column only at the same place in its run). The first
    `cores` positions (whose previous tile may lie in earlier groups) are typed one by one (point_types)."""
    a, b = (tm, tn) if direction == 0 else (tn, tm)
    off = min(offset, a)
    h = min(off, a - g * off)
    start, size = g * off * b, h * b
    last = g == -(-a // off) - 1
    col_bit = (int(edge_n), 2 * int(edge_m))[direction]  # the type bit of walk column b - 1
    row_bit = (2 * int(edge_m), int(edge_n))[direction] if last else 0  # of walk row a - 1 (run place h - 1)
    runs: list = []  # (tile type, first start, runs, run length, stride h)
    if size > cores:
        edge_run = 0 if (snake and g % 2 == 1) else b - 1
        j0 = cores // h
        # (first run, runs, first place in the run) of the rest: run j0 from place cores - j0*h, then whole runs
        pieces = [(j0, 1, cores - j0 * h), (j0 + 1, b - j0 - 1, 0)]
        cuts = sorted({0, h, *((min(cores, h),) if direction == 0 else ()), *((h - 1,) if row_bit else ())})
        reuse_all = direction == 1 and cores % h == 0
        for j, n, lo in pieces:
            for js, ns in (
                (j, min(n, max(edge_run - j, 0))),
                (edge_run, 1),
                (edge_run + 1, j + n - edge_run - 1),
            ):
                js, je = max(js, j), min(js + ns, j + n)
                if je <= js:
                    continue
                kind = col_bit if js == edge_run else 0
                for e0, e1 in zip(cuts[:-1], cuts[1:], strict=True):
                    e0 = max(e0, lo)
                    if e1 <= e0:
                        continue
                    reuse = reuse_all or (direction == 0 and e0 >= cores)
                    ttype = kind + (row_bit if e0 >= h - 1 else 0) + 4 * reuse
                    runs.append((ttype, start + js * h + e0, je - js, e1 - e0, h))
    return start, min(cores, size), runs


def walk_counts(tm, tn, cores, offset, direction, snake, edge_m, edge_n) -> np.ndarray:
    """Tiles of each type (cores, TILE_TYPES) on each core when one slice of the `tm x tn` grid is walked in
    this traversal and position p runs on core p mod cores: what counting a walk gives, without the walk
    (walk_counts_many for one walk)."""
    return walk_counts_many(tm, tn, cores, [(offset, direction, snake)], edge_m, edge_n)[0]


def walk_counts_many(tm, tn, cores, walk_keys, edge_m, edge_n) -> np.ndarray:
    """walk_counts for each (offset, direction, serpentine) of `walk_keys`, (W, cores, TILE_TYPES).

    Every group but the last has `offset` rows, and a group whose first position is at least `cores` into the
    walk (all its tiles' previous tiles in full groups) gives the same counts as any other of its parity (the
    serpentine's direction), moved by its start's residue: those are counted once per parity and added for
    each start residue (_residue_hist), the first few groups and the last one on their own. The groups of every
    walk asked for are counted together (one point_types, one _runs_counts), so the numpy calls do not grow
    with the walks. Time and memory grow with the cores, not with the tiles. Cached per walk (a search meets
    the same grid at several K steps)."""
    keys = [
        (tm, tn, cores, int(o), int(d), bool(s), bool(edge_m), bool(edge_n))
        for o, d, s in np.asarray(walk_keys, dtype=np.int64).reshape(-1, 3).tolist()
    ]
    if (
        len(_COUNTS) > _CACHE_ROWS
    ):  # start over before looking up, so every key this call needs is there after
        _COUNTS.clear()
    todo = sorted({k for k in keys if k not in _COUNTS})
    if todo:
        for k, out in zip(todo, _walk_counts_many(tm, tn, cores, todo, edge_m, edge_n), strict=True):
            out.flags.writeable = False
            _COUNTS[k] = out
    return np.stack([_COUNTS[k] for k in keys])


def _walk_counts_many(tm, tn, cores, keys: list, edge_m, edge_n) -> np.ndarray:
    """walk_counts_many, computed for the walks of `keys` (walk_counts' cache keys)."""
    # the groups counted, each with its walk, the residue it starts at and how often it recurs by start residue
    # (a plain group: once, at its own start; a generic one: _residue_hist of its parity's starts)
    groups_of, walk_of, shift, rec = [], [], [], []
    heads, runs = [], []
    for w, (_, _, _, offset, direction, snake, _, _) in enumerate(keys):
        a, b = (tm, tn) if direction == 0 else (tn, tm)
        off = min(offset, a)
        groups, size = -(-a // off), off * b
        generic = min(
            -(-cores // size), groups - 1
        )  # the first group whose previous tiles are all in full groups
        step = 2 if snake else 1
        for g in [*range(generic), groups - 1, *range(generic, min(generic + step, groups - 1))]:
            groups_of.append(g)
            walk_of.append(w)
            shift.append(g * size % cores)
            recurs = generic <= g < groups - 1
            rec.append((g * size, step * size, -(-(groups - 1 - g) // step)) if recurs else None)
    settings = np.array([k[3:6] for k in keys], dtype=np.int64)
    for e, (w, g) in enumerate(zip(walk_of, groups_of, strict=True)):
        start, head, rs = _group_runs(tm, tn, cores, *keys[w][3:], g)
        heads.append((e, w, start, head))
        runs.extend((e, *r) for r in rs)
    n_grp = len(groups_of)
    # the first positions of each group, typed one by one, then the runs
    e, w, start, head = np.array(heads, dtype=np.int64).T
    first = np.repeat(np.cumsum(head) - head, head)
    pos = np.repeat(start, head) + np.arange(int(head.sum()), dtype=np.int64) - first
    pw = settings[np.repeat(w, head)]
    t = point_types(tm, tn, cores, pw[:, 0], pw[:, 1], pw[:, 2], edge_m, edge_n, pos)
    counts = np.bincount(
        (np.repeat(e, head) * TILE_TYPES + t) * cores + pos % cores, minlength=n_grp * TILE_TYPES * cores
    ).reshape(n_grp, TILE_TYPES, cores)
    if runs:
        counts += _runs_counts(np.array(runs, dtype=np.int64), n_grp, cores)
    gc = counts.transpose(0, 2, 1)  # (groups, cores, types)
    out = np.zeros((len(keys), cores, TILE_TYPES), dtype=np.int64)
    walk_of, shift = np.array(walk_of, dtype=np.int64), np.array(shift, dtype=np.int64)
    gen = np.array([r is not None for r in rec])
    np.add.at(out, walk_of[~gen], gc[~gen])  # the plain groups: once each, at their own start
    if gen.any():
        # a generic group recurs at start residues k (hist[k] times) and gives core x what its core
        # (x - k + shift) mod cores gets: a circulant (cores x cores) matrix times its counts
        rs, st, ns = np.array([r for r in rec if r is not None], dtype=np.int64).T
        hist = _residue_hist(rs, st, ns, cores).astype(np.int64)
        x, y = np.arange(cores)[:, None], np.arange(cores)[None, :]
        k = (x - y + shift[gen][:, None, None]) % cores  # (generic groups, cores x, cores y)
        circ = hist[np.arange(k.shape[0])[:, None, None], k]
        np.add.at(out, walk_of[gen], np.matmul(circ, gc[gen]))
    return out


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
    # float32 `vectors` padded to a power-of-two count by repeating the first (the maximum is the same)
    padded: np.ndarray


def core_work_many(
    tm: int, tn: int, splits: int, batch: int, cores: int, edge_m: bool, edge_n: bool, settings
) -> list[CoreWork]:
    """core_work() for several (offset, direction, serpentine, pieces) settings of one tile grid, computed in one
    vectorised pass for those not already cached."""
    grid = (tm, tn, splits, batch, cores, edge_m, edge_n)
    keys = [(grid, tuple(s)) for s in np.asarray(settings, dtype=np.int64).tolist()]
    if len(_WORK) > _CACHE_ROWS:  # start over before looking up, so every key this call needs is there after
        _WORK.clear()
    todo = sorted({k[1] for k in keys if k not in _WORK})
    if todo:
        for st, work in zip(todo, _core_work(*grid, np.array(todo, dtype=np.int64)), strict=True):
            _WORK[grid, st] = work
    return [_WORK[k] for k in keys]


def _walk_types(tm, tn, cores, walk_keys, edge_m, edge_n) -> np.ndarray:
    """Tile types (TILE_TYPES) by walk position, (W, tm*tn), of each walk (offset, direction, serpentine)."""
    r, c = walks(tm, tn, walk_keys)
    etype = np.zeros(r.shape, dtype=r.dtype)  # (W, per)
    if edge_m:
        etype += 2 * (r == tm - 1)
    if edge_n:
        etype += c == tn - 1
    if tm * tn > cores:  # the B-panel reuse adds 4 in place: no zero table of the reuse beside it
        etype[:, cores:] += 4 * (c[:, cores:] == c[:, :-cores])
    return etype


@lru_cache(maxsize=64)
def _core_tables(cores: int) -> tuple[np.ndarray, np.ndarray]:
    """_core_work's constants of a core count (built once, read-only): the circulant shift (x - s) mod cores,
    and later[i, j] = i > j."""
    x = np.arange(cores)
    shifted, later = (x[:, None] - x[None, :]) % cores, x[:, None] > x[None, :]
    shifted.flags.writeable = later.flags.writeable = False
    return shifted, later


def _core_work(tm, tn, splits, batch, cores, edge_m, edge_n, settings: np.ndarray) -> list[CoreWork]:
    """Assign `batch*splits*tm*tn` tiles to `cores` in traversal order (tile i -> core i % cores), for every
    row (offset, direction, serpentine, pieces) of `settings`.

    Batch and split-K slices are outer loops around the same 2-D walk, so one walk of `tm*tn` tiles gives every
    slice's tile types; slice j starts on core (j*tm*tn) mod cores. A tile reuses its core's B panel when the
    core's previous tile (i - cores) had the same column in the same slice. `pieces` >= 2 re-cuts each tile of a
    partial last round into that many sub-tiles, sub-tile j going to core j.
    """
    # the walks (tail re-cut settings share them), then per walk: tile types by position, counts per core
    if len(settings) == 1:  # one setting (a new grid in a check or a small sample): its own walk, no sort
        first, walk_of = np.zeros(1, dtype=np.int64), np.zeros(1, dtype=np.int64)
    else:
        code = (settings[:, 0] * 2 + settings[:, 1]) * 2 + settings[:, 2]  # (offset, direction, serpentine)
        _, first, walk_of = np.unique(code, return_index=True, return_inverse=True)
    walk_keys, walk_of = settings[first, :3], walk_of.ravel()
    n_walk, per = len(walk_keys), tm * tn
    n_set = len(settings)
    outer = splits * batch
    n = per * outer
    # per walk and position residue, the tiles of each type: counted on the walk for small grids, in closed
    # form beyond WALK_TILES (walk_counts: the same integers, in time and memory that grow with the cores)
    if per <= WALK_TILES:
        ttype = _walk_types(tm, tn, cores, walk_keys, edge_m, edge_n)
        slot = (np.arange(n_walk)[:, None] * cores + np.arange(per) % cores) * TILE_TYPES + ttype
        by_residue = np.bincount(slot.ravel(), minlength=n_walk * cores * TILE_TYPES).reshape(
            n_walk, cores, TILE_TYPES
        )
        types_at = lambda w, pos: ttype[w[:, None], pos]  # noqa: E731
    else:
        by_residue = walk_counts_many(tm, tn, cores, walk_keys, edge_m, edge_n)

        def types_at(w: np.ndarray, pos: np.ndarray) -> np.ndarray:  # (walks, positions), in closed form
            offset, direction, snake = walk_keys[w].T[:, :, None]
            return point_types(tm, tn, cores, offset, direction, snake, edge_m, edge_n, pos)

    # every slice shifted by its starting core:
    # counts[x] = sum over starting cores s of starts[s] * by_residue[(x - s) mod cores]
    if outer == 1:
        counts = by_residue[walk_of].astype(np.float64)  # (S, cores, types)
    else:
        starts = _residue_hist(0, per, outer, cores)[0]  # slices starting on each core: one period counted
        shifted = _core_tables(cores)[0]
        # as a circulant (cores x cores) matrix times each walk's counts: whole numbers far below 2**53, so
        # every order of the sums gives the same float64
        counts = np.matmul(starts[shifted], by_residue.astype(np.float64))[walk_of]
    subs = np.zeros((n_set, cores, SUB_TYPES))
    rem = n % cores
    recut = np.flatnonzero(settings[:, 3] >= 2) if rem else np.empty(0, dtype=np.int64)
    if recut.size:  # the partial last round is re-cut: its tiles' types once per walk
        pos = np.arange(n - rem, n) % per  # its tiles' positions in the walk; tile k runs on core k
        used = np.unique(walk_of[recut])
        last_types = dict(zip(used.tolist(), types_at(used, pos), strict=True))
    for i in recut:
        t = last_types[walk_of[i]]
        np.subtract.at(counts[i], (np.arange(rem), t), 1)
        sub_type = np.repeat(t % 4, settings[i, 3])[:cores]
        subs[i, np.arange(sub_type.size), sub_type] = 1
    has_work = (counts.sum(axis=2) + subs.sum(axis=2)) > 0
    vectors = np.concatenate([counts, subs, has_work[:, :, None]], axis=2)  # (S, cores, WORK_COLUMNS)
    # a core whose counts are all at or below another's never finishes last (costs are non-negative); of equal
    # cores the first is kept
    exact = np.int32 if vectors.max() < 1 << 31 else np.int64  # compact where the counts fit
    small = vectors[:, :, vectors.any(axis=(0, 1))].astype(exact)  # the columns in use, exact
    ge = (small[:, None, :, :] >= small[:, :, None, :]).all(axis=3)  # ge[s, i, j]: core j covers core i
    # covered by a core j that is strictly above it, or equal to it and earlier (i > j): (ge & ~equal) |
    # (equal & later) with equal = ge & ge.T, which is ge & (~ge.T | later)
    covered = (ge & (~ge.transpose(0, 2, 1) | _core_tables(cores)[1])).any(axis=2)
    # each setting's kept cores first (in core order), then its first kept core repeated up to a power of two
    kept = (~covered).sum(axis=1)
    size = 1 << np.ceil(np.log2(kept)).astype(np.int64)
    order = np.argsort(covered, axis=1, kind="stable")
    width = int(size.max())
    slots = np.arange(width)[None, :]
    index = np.where(slots < kept[:, None], order[:, np.minimum(slots[0], cores - 1)], order[:, :1])
    padded = vectors[np.arange(n_set)[:, None], index]  # (S, width, WORK_COLUMNS)
    padded32 = padded.astype(np.float32)
    totals, used = vectors.sum(axis=1), has_work.sum(axis=1).tolist()
    return [
        CoreWork(padded[i, :k], totals[i], used[i], padded32[i, :z])
        for i, (k, z) in enumerate(zip(kept.tolist(), size.tolist(), strict=True))
    ]


def core_work(
    tm: int,
    tn: int,
    splits: int,
    batch: int,
    cores: int,
    offset: int,
    direction: int,
    snake: bool,
    pieces: int,
    edge_m: bool,
    edge_n: bool,
) -> CoreWork:
    """What each of `cores` runs when the `batch*splits*tm*tn` tiles go to cores in traversal order (tile i ->
    core i % cores); see _core_work. edge_m, edge_n: the last tile row / column is smaller than the others."""
    setting = ((offset, direction, int(snake), pieces),)
    return core_work_many(tm, tn, splits, batch, cores, bool(edge_m), bool(edge_n), setting)[0]


def block_grid(gm, gn, splits, cores):
    """AscendC's multi-core split of a `gm x gn` tile grid (per split-K slice): each core takes one contiguous
    block of `bm x bn` tiles (singleCoreM = bm tiles, singleCoreN = bn tiles), `um x un` blocks per slice, every
    slice on its own cores (usedCoreNum = um*un*splits <= cores). The block shape minimises the most tiles one
    core runs, then the GM reads of the blocks (each block row re-reads B, each block column re-reads A: about
    un*gm + um*gn panel loads), then the cores used. Vectorised over candidates (arrays broadcast);
    returns (um, un, bm, bn) as int64 arrays. Slices that do not fit (splits > cores) get one core each.

    Each distinct (gm, gn, splits) is solved once (candidates share few grids)."""
    gm, gn, splits = np.broadcast_arrays(*(np.asarray(x, dtype=np.int64) for x in (gm, gn, splits)))
    if gm.size > 512:  # below this the direct pass is cheaper than finding the distinct grids
        first, inv = group_rows([gm.ravel(), gn.ravel(), splits.ravel()])
        if first.size < gm.size:
            flat = (gm.ravel()[first], gn.ravel()[first], splits.ravel()[first])
            return tuple(x[inv].reshape(gm.shape) for x in _block_grid(*flat, cores))
    return _block_grid(gm, gn, splits, cores)


def _block_grid(gm, gn, splits, cores):
    """block_grid on int64 arrays of one shape."""
    per = np.maximum(cores // np.maximum(splits, 1), 1)[..., None]  # cores per slice
    cm = np.arange(1, cores + 1, dtype=np.int64)  # candidate block rows, one column each
    ok = cm <= np.minimum(gm[..., None], per)
    cn = np.maximum(np.minimum(gn[..., None], per // cm), 1)
    bm = -(-gm[..., None] // cm)
    bn = -(-gn[..., None] // cn)
    um = -(-gm[..., None] // bm)
    un = -(-gn[..., None] // bn)
    big = np.int64(1) << 40
    # lexicographic key: most tiles per core, then panel loads, then cores (each term < 2**20 at these sizes)
    loads = np.minimum(un * gm[..., None] + um * gn[..., None], (1 << 20) - 1)
    key = np.where(ok, (bm * bn) * big + loads * (1 << 12) + um * un, np.iinfo(np.int64).max)
    i = np.argmin(key, axis=-1)[..., None]
    pick = lambda a: np.take_along_axis(a, i, axis=-1)[..., 0]  # noqa: E731
    return pick(um), pick(un), pick(bm), pick(bn)


def block_work(
    gm: int, gn: int, splits: int, batch: int, cores: int, edge_m: bool, edge_n: bool, shape=None
) -> CoreWork:
    """What each core runs under AscendC's block split (block_grid): its block of tiles walked column by column
    (all rows of a block column, then the next: a core's consecutive tiles share the B panel, the reuse types), once
    per batch. The last block row (column) is shorter when the blocks do not divide the grid, and holds the edge
    tile row (column) when there is one. Cached per grid. `shape`: block_grid's (um, un, bm, bn) of the grid when
    the caller has already solved it (a table's new codes are solved together), else it is solved here."""
    key = ("block", gm, gn, splits, batch, cores, edge_m, edge_n)
    if key in _WORK:
        return _WORK[key]
    um, un, bm, bn = (int(x) for x in (block_grid(gm, gn, splits, cores) if shape is None else shape))
    rows = [(bm, um - 1), (gm - (um - 1) * bm, 1)]  # (tile rows of a block, how many block rows have it)
    cols = [(bn, un - 1), (gn - (un - 1) * bn, 1)]
    vectors, counts = [], []
    for ri, (r, nr) in enumerate(rows):
        for ci, (q, nc) in enumerate(cols):
            if nr == 0 or nc == 0:
                continue
            em = int(edge_m and ri == 1)
            en = int(edge_n and ci == 1)
            v = np.zeros(WORK_COLUMNS)
            for en_c, ncol in ((0, q - en), (1, en)):
                if ncol <= 0:
                    continue
                first = (
                    2 * int(em and r == 1) + en_c
                )  # the first row of a block column: the B panel is loaded
                v[first] += ncol
                if r > 1:
                    v[en_c + 4] += (r - 1 - em) * ncol
                    v[2 + en_c + 4] += em * ncol
            # more slices than cores (AscendC cannot launch that; the walk deals them round-robin): a core runs
            # ceil(splits / cores) whole slices in turn
            v[:TILE_TYPES] *= batch * -(-splits // cores)
            v[-1] = 1
            vectors.append(v)
            counts.append(nr * nc * splits)
    vec = np.array(vectors)
    size = 1 << int(np.ceil(np.log2(len(vec))))
    padded = np.concatenate([vec, np.repeat(vec[:1], size - len(vec), axis=0)]).astype(np.float32)
    total = (vec * np.array(counts)[:, None]).sum(axis=0)
    if splits > cores:
        total[:TILE_TYPES] /= -(-splits // cores)
        total[-1] = cores
    work = CoreWork(vec, total, min(um * un * splits, cores), padded)
    if len(_WORK) > _CACHE_ROWS:
        _WORK.clear()
    _WORK[key] = work
    return work


def column_major_counts(gm: int, gn: int, cores: int, edge_m: bool, edge_n: bool) -> np.ndarray:
    """Tiles of each of the 8 types (TILE_TYPES: 2*edge_m + edge_n + 4*reuse) per core, (cores, 8), when the
    `gm x gn` grid is walked column by column (all rows of column 0, then column 1, ...; `core_work` with
    offset 1, direction 1) and tile i runs on core i mod cores: what `core_work` computes, in closed form.

    Memory and time grow with the cores, not with the tiles or columns (the columns' residues repeat), so grids of
    billions of tiles (a depthwise layer of many channels and pixels in small tiles) cost what small ones do. A tile reuses its core's B panel (the
    column's weight) when the core's previous tile, `cores` positions back, is in the same column: rows >= cores.
    """
    out = np.zeros((cores, TILE_TYPES), dtype=np.float64)
    k = np.arange(cores)

    def add(columns: range, lo: int, hi: int, ttype: int) -> None:
        """Rows [lo, hi) of each column in `columns`: per core, how many land on it (tile i = col*gm + row)."""
        if hi <= lo or not len(columns):
            return
        n = hi - lo
        # columns only differ by their start's residue (col*gm + lo) mod cores, which repeats every
        # cores / gcd(gm, cores) columns: count one period's residues, times the whole periods, plus the rest
        period = cores // math.gcd(gm, cores)
        first = columns.start + np.arange(min(period, len(columns)), dtype=np.int64)
        residues = (first * gm + lo) % cores
        whole, rest = divmod(len(columns), period)
        starts = whole * np.bincount(
            residues[: min(period, len(columns))] if whole else residues[:0], minlength=cores
        )
        starts = starts + np.bincount(residues[:rest], minlength=cores)
        rem = n % cores
        out[:, ttype] += (n // cores) * len(columns)
        if rem:  # the first `rem` residues after each start get one more
            extra = (k[None, :] - np.arange(cores)[:, None]) % cores < rem  # extra[start, core]
            out[:, ttype] += starts @ extra

    rows_full = gm - int(edge_m)
    for cols, en in ((range(gn - int(edge_n)), 0), (range(gn - 1, gn) if edge_n else range(0), 1)):
        add(cols, 0, min(cores, rows_full), en)  # first rows of a column: the core loads the column's weight
        add(cols, cores, rows_full, 4 + en)  # later rows: the core's previous tile had this column
        if edge_m:
            add(cols, gm - 1, gm, 2 + en + (4 if gm - 1 >= cores else 0))
    return out


def walk_settings(offsets, directions, snakes) -> np.ndarray:
    """Every (offset, direction, serpentine) of the domains, (S, 3), in sorted order (serial_hit_ceiling's and
    serial_b_reuse's rows)."""
    return np.array(
        [
            (o, d, s)
            for o in sorted(set(offsets))
            for d in sorted(set(directions))
            for s in sorted(set(snakes))
        ],
        dtype=np.int64,
    ).reshape(-1, 3)


def serial_b_reuse(gm, gn, offsets, directions, snakes) -> np.ndarray:
    """Tiles of one slice whose previous tile has the same tile column, one core (tile p after tile p - 1), for
    every walk setting (S, rows; walk_settings' order), in closed form: what walk_counts' reuse types count.

    Direction 0 walks each group of off rows column by column: a column run of h tiles reuses h - 1 times, so
    gn (gm - groups) in all, plus one per group boundary where the next group starts in the column the last
    ended (serpentine, or one column). Direction 1 walks each group of off columns row by row, across the
    group's columns: consecutive tiles share a column only in a group one column wide (off = 1: every group,
    gm - 1 each; else the last group when one column is left)."""
    grid = walk_settings(offsets, directions, snakes)
    offset, direction, snake = (grid[:, i, None] for i in range(3))
    gm, gn = (np.asarray(x, dtype=np.int64).ravel()[None, :] for x in (gm, gn))
    off0 = np.minimum(offset, gm)
    groups0 = -(-gm // off0)
    along = gn * (gm - groups0) + (groups0 - 1) * ((snake == 1) | (gn == 1))
    off1 = np.minimum(offset, gn)
    groups1 = -(-gn // off1)
    last1 = gn - (groups1 - 1) * off1
    across = (gm - 1) * np.where(off1 == 1, gn, last1 == 1)
    return np.where(direction == 0, along, across)


def b_reuse_ceiling(gm, gn, cores: int, offsets, directions, snakes) -> np.ndarray:
    """At least the tiles of one slice whose core's previous tile (position p - cores) has the same tile column,
    for every walk setting (S, rows; walk_settings' order), in closed form for many grids at once: max_b_reuse's
    count per slice, or above it (a ceiling, for the bound).

    Direction 1 walks each group of h columns row by row across them: p and p - cores share a column only inside
    one group (the groups' columns are disjoint) and exactly when cores is a multiple of h, so the count is
    exact: size - cores per such group. Direction 0 walks each group of h rows column by column: inside a group
    p and p - cores share a column exactly when cores < h (b (h - cores) a group); a pair across a group boundary
    (p among the first `cores` positions of its group) is counted as if it always matched. A one-column walk
    matches everywhere; no slice reuses more than its positions past the first `cores`."""
    grid = walk_settings(offsets, directions, snakes)
    offset, direction = grid[:, 0, None], grid[:, 1, None]
    gm, gn = (np.asarray(x, dtype=np.int64).ravel()[None, :] for x in (gm, gn))
    a, b = np.where(direction == 0, gm, gn), np.where(direction == 0, gn, gm)
    off = np.minimum(offset, a)
    groups = -(-a // off)
    last = a - (groups - 1) * off
    full = groups - 1  # groups of `off` rows (columns) before the last
    across = full * ((cores % off) == 0) * np.maximum(off * b - cores, 0) + (
        (cores % last) == 0
    ) * np.maximum(last * b - cores, 0)
    inside = full * b * np.maximum(off - cores, 0) + b * np.maximum(last - cores, 0)
    boundary = np.maximum(full - 1, 0) * np.minimum(cores, off * b) + (groups > 1) * np.minimum(
        cores, last * b
    )
    along = inside + boundary
    return np.minimum(np.where(direction == 0, along, across), np.maximum(a * b - cores, 0))


@lru_cache(maxsize=8192)
def max_b_reuse(
    tm: int,
    tn: int,
    splits: int,
    batch: int,
    cores: int,
    offsets: tuple,
    directions: tuple,
    snakes: tuple,
) -> int:
    """The most tiles, over the given traversals, whose core ran a tile of the same B panel just before.

    Weight residency can skip a B load only on such tiles; the lower bound uses this maximum. Tile i reuses when
    tile i - cores (its core's previous one) has the same tile column in the same slice: exactly when i's position
    in its slice is at least `cores`, and every slice walks the same order, so one slice's walk is counted and
    multiplied by the slices.
    """
    per = tm * tn
    if per <= cores:  # a core's previous tile is always in another slice (or there is none)
        return 0
    settings = np.array([(o, d, s) for o in offsets for d in directions for s in snakes], dtype=np.int64)
    if per > WALK_TILES:  # counted in closed form (walk_counts), not on the walk
        reuse = walk_counts_many(tm, tn, cores, settings, False, False)[:, :, 4:].sum(axis=(1, 2))
        return int(reuse.max()) * batch * splits
    _, c = walks(tm, tn, settings)
    same = c[:, cores:] == c[:, :-cores]
    return int(same.sum(axis=1).max()) * batch * splits
