"""The multi-core schedule: traversal order of output tiles, tile-to-core assignment, L2 reuse between rounds.

Shared by every family: Ascend assigns task i to core i mod cores (AscendC block index); a GPU grid assigns
program i to whichever SM frees first, which for equal tiles is the same round-robin by waves. The functions here
work on one tile grid at a time, vectorised over its tiles and over the traversal settings asked for, and cache
their results per (grid, setting): the operator models group their candidates by schedule, and a search or a sweep
simulates each distinct schedule once. Grids above WALK_TILES are counted in closed form (walk_counts), not
walked, and the L2 walk is bounded (SIM_TILES, SIM_MAX): no table grows with the tile count.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from functools import lru_cache

import numpy as np

from .common import group_rows

# Columns of a core's work vector (CoreWork.vectors): tiles of the 8 types in full rounds (type = 2*edge_m +
# edge_n + 4*reuse_b), sub-tiles of the 4 edge types from a re-cut last round, and 1 when the core runs anything.
TILE_TYPES = 8
SUB_TYPES = 4
WORK_COLUMNS = TILE_TYPES + SUB_TYPES + 1
# Largest tile walk the L2 simulation runs; bigger walks are simulated on a prefix of whole slices or whole
# groups of tile rows (the steady state repeats), see panel_hits.
SIM_TILES = 2048
SIM_MAX = 1 << 15  # largest prefix of whole groups simulated; beyond, the walk is cut (see _prefix)
# Largest tile grid (one slice) whose core work is counted on its walk; larger ones are counted in closed form
# (walk_counts: the same counts, faster beyond this size, and without a table sized by the tiles).
WALK_TILES = 1 << 14
# Largest ratio between consecutive corners of round_hit_front (the bound's L2 miss rates on a walk whose rounds
# overflow L2): more corners, a tighter bound, a tile cost each
ROUND_RATIO = 1.5


# Caches, each bounded (a long sweep starts them over): walks by (tm, tn, offset, direction, serpentine), core work
# by (grid, setting), L2 hit rates by (grid, panel bytes, setting).
_WALKS: dict = {}
_WALK_ELEMS = 0
_WALK_ELEMS_MAX = 1 << 23  # tile indices kept before the walk cache starts over (about 64 MB)
_WORK: dict = {}
_HITS: dict = {}
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
    reuse = np.zeros_like(etype)
    if tm * tn > cores:
        reuse[:, cores:] = c[:, cores:] == c[:, :-cores]
    return etype + 4 * reuse


def _core_work(tm, tn, splits, batch, cores, edge_m, edge_n, settings: np.ndarray) -> list[CoreWork]:
    """Assign `batch*splits*tm*tn` tiles to `cores` in traversal order (tile i -> core i % cores), for every
    row (offset, direction, serpentine, pieces) of `settings`.

    Batch and split-K slices are outer loops around the same 2-D walk, so one walk of `tm*tn` tiles gives every
    slice's tile types; slice j starts on core (j*tm*tn) mod cores. A tile reuses its core's B panel when the
    core's previous tile (i - cores) had the same column in the same slice. `pieces` >= 2 re-cuts each tile of a
    partial last round into that many sub-tiles, sub-tile j going to core j.
    """
    # the walks (tail re-cut settings share them), then per walk: tile types by position, counts per core
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
        starts = np.bincount((np.arange(outer, dtype=np.int64) * per) % cores, minlength=cores).astype(
            np.float64
        )
        shifted = (np.arange(cores)[:, None] - np.arange(cores)[None, :]) % cores
        counts = np.einsum("k,sxkt->sxt", starts, by_residue[:, shifted])[walk_of]
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
    equal = ge & ge.transpose(0, 2, 1)
    later = np.arange(cores)[None, :, None] > np.arange(cores)[None, None, :]
    covered = ((ge & ~equal) | (equal & later)).any(axis=2)
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


def block_work(gm: int, gn: int, splits: int, batch: int, cores: int, edge_m: bool, edge_n: bool) -> CoreWork:
    """What each core runs under AscendC's block split (block_grid): its block of tiles walked column by column
    (all rows of a block column, then the next: a core's consecutive tiles share the B panel, the reuse types), once
    per batch. The last block row (column) is shorter when the blocks do not divide the grid, and holds the edge
    tile row (column) when there is one. Cached per grid."""
    key = ("block", gm, gn, splits, batch, cores, edge_m, edge_n)
    if key in _WORK:
        return _WORK[key]
    um, un, bm, bn = (int(x) for x in block_grid(gm, gn, splits, cores))
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


def first_touch_only(tiles, slots, footprint_bytes, l2_bytes):
    """Where each A and B panel comes from HBM exactly once whatever the order (hit rates 1 - 1/gn and 1 - 1/gm):
    every tile runs in the first round, or all panels of the problem fit in L2 together. Scalars or arrays."""
    return (tiles <= slots) | (footprint_bytes <= l2_bytes)


def panel_hits_many(
    tm: int,
    tn: int,
    splits: int,
    batch: int,
    slots: int,
    settings,
    a_panel_bytes: float,
    b_panel_bytes: float,
    l2_bytes: float,
) -> np.ndarray:
    """L2 hit rates (S, 2) of A and B panel loads when tiles run `slots` at a time in the traversal order of each
    (offset, direction, serpentine) row of `settings`.

    Two cases need no walk: when every tile runs in the first round, and when all panels of the problem fit in L2
    together; in both each panel comes from HBM exactly once (its first touch), whatever the order. Walks longer
    than SIM_TILES are simulated on a prefix (whole slices, or whole groups of tile rows of the first slice).
    """
    settings = [tuple(s) for s in np.asarray(settings, dtype=np.int64).tolist()]
    loads = tm * tn * splits * batch
    if first_touch_only(loads, slots, (tm * a_panel_bytes + tn * b_panel_bytes) * splits * batch, l2_bytes):
        return np.tile([1.0 - 1.0 / tn, 1.0 - 1.0 / tm], (len(settings), 1))
    key = (tm, tn, splits, batch, slots, float(a_panel_bytes), float(b_panel_bytes), float(l2_bytes))
    if len(_HITS) > _CACHE_ROWS:  # start over before looking up, so every key this call needs is there after
        _HITS.clear()
    todo = sorted({s for s in settings if (key, s) not in _HITS})
    # each setting's prefix grid; settings with the same one are walked together
    by_grid: dict[tuple, list] = {}
    for s in todo:
        by_grid.setdefault(_prefix(tm, tn, splits, batch, *s[:2]), []).append(s)
    for (t_m, t_n, spl, bat, *share), group in by_grid.items():
        l2 = (l2_bytes * share[0], l2_bytes * share[1])
        rates = _hit_rates(t_m, t_n, spl * bat, slots, np.array(group), a_panel_bytes, b_panel_bytes, l2)
        for s, rate in zip(group, rates, strict=True):
            _HITS[key, s] = rate
    return np.array([_HITS[key, s] for s in settings])


def panel_hits(
    tm: int,
    tn: int,
    splits: int,
    batch: int,
    slots: int,
    offset: int,
    direction: int,
    snake: bool,
    a_panel_bytes: float,
    b_panel_bytes: float,
    l2_bytes: float,
) -> tuple[float, float]:
    """panel_hits_many() for one traversal."""
    setting = ((offset, direction, int(snake)),)
    hits = panel_hits_many(tm, tn, splits, batch, slots, setting, a_panel_bytes, b_panel_bytes, l2_bytes)[0]
    return float(hits[0]), float(hits[1])


def _prefix(
    tm: int, tn: int, splits: int, batch: int, offset: int, direction: int
) -> tuple[int, int, int, int, float, float]:
    """The grid the L2 walk simulates, and the share of L2 each panel kind (A, B) is compared with there: all of
    it up to SIM_TILES tiles, else whole slices, else whole groups of tile rows (columns for direction 1) of the
    first slice (the steady state repeats), at the full L2.

    Where whole groups would pass SIM_MAX tiles (a walk along tens of thousands of tile columns), the walk is cut
    along its long side: two groups (both serpentine directions) of b' = SIM_TILES / (2 offset) walk columns, and
    the panels the walk columns are made of (B for direction 0, A for 1) compared with L2 * b' / b: the bytes
    between a panel's touches in consecutive groups grow with the walk columns, so the cut walk sees the same
    fraction of them fit (an approximation, docs/model.md)."""
    per = tm * tn
    if per * splits * batch <= SIM_TILES:
        return tm, tn, splits, batch, 1.0, 1.0
    if per <= SIM_TILES:
        return tm, tn, max(1, SIM_TILES // per), 1, 1.0, 1.0
    a, b = (tm, tn) if direction == 0 else (tn, tm)
    off = min(offset, a)
    need = -(-SIM_TILES // b)  # rows of tiles that reach SIM_TILES, then whole groups of them
    rows = min(a, -(-need // off) * off)
    if rows * b > SIM_MAX:
        cut = max(1, SIM_TILES // (2 * off))
        rows, b, share = min(a, 2 * off), cut, cut / b
    else:
        share = 1.0
    if direction == 0:
        return rows, b, 1, 1, 1.0, share
    return b, rows, 1, 1, share, 1.0


def _hit_rates(tm, tn, outer, slots, settings, a_bytes, b_bytes, l2_bytes) -> np.ndarray:
    """L2 hit rates (S, 2) of A and B panel loads under an LRU-like capacity rule, one row per traversal setting;
    l2_bytes: one capacity, or one for A's and one for B's panels (_prefix's cut walk).

    A round is the set of tiles running at once. In a round, each distinct panel is fetched once from HBM unless it
    was touched in an earlier round and the bytes of distinct panels touched since then (the rounds in between plus
    this one) fit in L2; every other load of it in the round is an L2 hit (a core reads what another just fetched).
    The touches do not depend on the panels' bytes (_touches, cached): only the footprint sums below do.
    """
    if slots == 1:
        serial = _serial_hit_rates(tm, tn, outer, settings, a_bytes, b_bytes, l2_bytes)
        if serial is not None:
            return serial
    counts, kinds = _touches(tm, tn, outer, slots, settings)
    n_set, nr = counts[0].shape
    loads = tm * tn * outer
    foot = np.zeros((n_set, nr))
    for cnt, size in zip(counts, (a_bytes, b_bytes), strict=True):
        foot += cnt * size
    cum = np.concatenate(
        [np.zeros((n_set, 1)), np.cumsum(foot, axis=1)], axis=1
    ).ravel()  # bytes of rounds < r
    out = np.empty((n_set, 2))
    caps = l2_bytes if isinstance(l2_bytes, tuple) else (l2_bytes, l2_bytes)
    for j, (first, hi, lo, which) in enumerate(kinds):
        # bytes touched from the round after the previous touch up to and including this round
        between = cum[hi] - cum[lo]
        misses = first + np.bincount(which, weights=between > caps[j], minlength=n_set)
        out[:, j] = 1.0 - misses / loads
    return out


def _serial_hit_rates(tm, tn, outer, settings, a_bytes, b_bytes, l2_bytes) -> np.ndarray | None:
    """_hit_rates for one tile a round (a single core), in closed form: the same miss counts, no walk.

    Each round touches one A and one B panel, so the bytes from a panel's previous touch up to this one are
    (rounds apart) x (A + B panel bytes), and a repeat touch misses when that exceeds the L2 (its kind's share).
    The walk of each (offset, direction, serpentine) is groups of `off` walk rows (the last one `h` rows), each
    group walked column by column: a walk row's panel is touched once per walk column of its group, `off` (or
    `h`) rounds apart; a walk column's panel is touched on consecutive rounds inside a group (1 apart) and then in
    the next group, its place there depending on the serpentine (a few kinds of group boundary, each counted once
    for every walk column at once). Slices repeat the same walk with their own panels (no reuse across them).

    The bytes are whole numbers, so the walk's running sums are exact and these products equal them: the result
    is _hit_rates' bit for bit. None where that does not hold (bytes not whole, or sums past 2^53)."""
    caps = l2_bytes if isinstance(l2_bytes, tuple) else (l2_bytes, l2_bytes)
    step = float(a_bytes) + float(b_bytes)
    loads = tm * tn * outer
    if not (float(a_bytes).is_integer() and float(b_bytes).is_integer()) or (loads + 1) * step >= 2.0**53:
        return None
    out = np.empty((len(settings), 2))
    for i, (offset, direction, snake) in enumerate(np.asarray(settings, dtype=np.int64).tolist()):
        a, b = (tm, tn) if direction == 0 else (tn, tm)
        off = min(offset, a)
        groups = -(-a // off)
        h_last = a - (groups - 1) * off
        row_kind, col_kind = (0, 1) if direction == 0 else (1, 0)  # A is the walk row's panel for direction 0
        miss = [0, 0]

        def over(gap, kind):
            return np.asarray(np.asarray(gap, dtype=np.float64) * step > caps[kind])

        # walk rows: every group's rows, each touched b times, h rounds apart
        miss[row_kind] += ((groups - 1) * off * (b - 1)) * int(over(off, row_kind)) + h_last * (b - 1) * int(
            over(h_last, row_kind)
        )
        # walk columns: h - 1 touches 1 round apart in each group, then the touch in the next group
        miss[col_kind] += b * (a - groups) * int(over(1, col_kind))
        y = np.arange(b, dtype=np.int64)
        # the group boundaries g -> g + 1 by kind, (parity of g for the serpentine, height of group g + 1) -> how
        # many: every group but the last has `off` walk rows, the last h_last
        bounds: dict = {}
        if groups >= 2:
            inner = groups - 2  # boundaries into a group that is not the last
            for par in (0, 1) if snake else (0,):
                bounds[par, off] = (inner + 1 - par) // 2 if snake else inner
            key = ((groups - 2) % 2 if snake else 0, h_last)
            bounds[key] = bounds.get(key, 0) + 1
        for (par, h_next), n in bounds.items():
            j = b - 1 - y if par == 0 and snake else y  # place in the next group (odd groups reversed)
            j_here = y if par == 0 else (b - 1 - y if snake else y)
            gap = off * b + j * h_next - j_here * off - off + 1
            miss[col_kind] += n * int(over(gap, col_kind).sum())
        first = (tm * outer, tn * outer)
        for kind in (0, 1):
            out[i, kind] = 1.0 - float(first[kind] + miss[kind] * outer) / loads
    return out


def _count_over(alpha, beta, n, limit):
    """How many y in [0, n) have alpha + beta*y > limit (integer arrays, broadcast): a line's count past a
    threshold, in closed form."""
    alpha, beta, n, limit = np.broadcast_arrays(
        *(np.asarray(x, dtype=np.int64) for x in (alpha, beta, n, limit))
    )
    out = np.where(alpha > limit, n, 0)
    up, down = beta > 0, beta < 0
    safe = np.where(beta == 0, 1, np.abs(beta))
    first_up = np.clip((limit - alpha) // safe + 1, 0, n)  # beta > 0: from this y on
    last_down = np.clip(-((limit - alpha) // safe), 0, n)  # beta < 0: y below ceil((alpha - limit) / -beta)
    return np.where(up, n - first_up, np.where(down, last_down, out))


def serial_hit_ceiling(
    tm,
    tn,
    splits,
    batch,
    a_panel,
    b_panel,
    l2_bytes,
    offsets,
    directions,
    snakes,
    front: bool = False,
    every: bool = False,
):
    """The highest L2 hit rates (A, B) any walk setting of the domains gives, each kind on its own, per row
    (arrays broadcast): panel_hits_many's with one tile a round (a single core), computed in closed form for every
    row and setting at once, no walk and no cache (the search bounds thousands of tilings with it).

    Per setting this is _prefix (the simulated grid and the L2 shares) and _serial_hit_rates' counts, each term
    a line in the walk column (alpha + beta*y) counted past the last whole gap that fits (_count_over). Rows
    where every panel's first touch is its only miss (first_touch_only) get 1 - 1/tn and 1 - 1/tm, as there. The
    bytes must be whole and their sums below 2^53 (panel_hits_many then gives these values bit for bit); a row
    where they are not gets the ceiling 1 - 1/tn, 1 - 1/tm.

    front: instead, the (A, B) pairs of the settings that no other setting beats on both kinds, (K, rows) each
    (a row with fewer repeats its first): every setting's pair is at or below one of them, so a cost that falls
    as hit rates rise is bounded below by its smallest over these K pairs.

    every: instead, every setting's pair, (S, rows) each, settings in walk_settings' order."""
    cols = np.broadcast_arrays(tm, tn, splits, batch, a_panel, b_panel)
    shape = cols[0].shape
    tm, tn, splits, batch = (np.asarray(x, dtype=np.int64).ravel() for x in cols[:4])
    a_panel, b_panel = (np.asarray(x, dtype=np.float64).ravel() for x in cols[4:])
    ceil_a, ceil_b = 1.0 - 1.0 / tn, 1.0 - 1.0 / tm
    slices_all = splits * batch
    whole = first_touch_only(tm * tn * slices_all, 1, (tm * a_panel + tn * b_panel) * slices_all, l2_bytes)
    exact = (a_panel == np.floor(a_panel)) & (b_panel == np.floor(b_panel))
    exact &= (np.minimum(tm * tn * slices_all, SIM_MAX * 2) + 1) * (a_panel + b_panel) < 2.0**53
    walked = np.flatnonzero(~whole & exact)  # the other rows keep the ceiling, as panel_hits_many gives it
    if walked.size == tm.size and tm.size > 1:  # rows of one grid and panel sizes are computed once
        first, inv = group_rows([tm, tn, splits, batch, a_panel.view(np.int64), b_panel.view(np.int64)])
        if first.size < tm.size:
            args = (tm, tn, splits, batch, a_panel, b_panel)
            got = serial_hit_ceiling(
                *(x[first] for x in args), l2_bytes, offsets, directions, snakes, front, every
            )
            return tuple(np.asarray(x)[..., inv].reshape(*np.shape(x)[:-1], *shape) for x in got)
    if walked.size < tm.size:
        out_a, out_b = (
            np.broadcast_to(ceil_a, (1, tm.size)).copy(),
            np.broadcast_to(ceil_b, (1, tm.size)).copy(),
        )
        if walked.size:
            args = (tm, tn, splits, batch, a_panel, b_panel)
            got = serial_hit_ceiling(
                *(x[walked] for x in args), l2_bytes, offsets, directions, snakes, front, every
            )
            got_a, got_b = (np.asarray(x).reshape(-1, walked.size) for x in got)
            out_a = np.repeat(out_a, got_a.shape[0], axis=0)
            out_b = np.repeat(out_b, got_b.shape[0], axis=0)
            out_a[:, walked], out_b[:, walked] = got_a, got_b
        if every:  # the ceiling for every setting
            n_set = len(walk_settings(offsets, directions, snakes))
            out_a, out_b = (
                np.broadcast_to(x, (n_set, tm.size)) if len(x) == 1 else x for x in (out_a, out_b)
            )
        elif not front:
            return out_a[0].reshape(shape), out_b[0].reshape(shape)
        return out_a.reshape(-1, *shape), out_b.reshape(-1, *shape)
    per = tm * tn
    step = a_panel + b_panel
    # every setting at once: (S, 1) settings against (rows,) columns
    grid = walk_settings(offsets, directions, snakes)
    offset, direction, snake = (grid[:, i, None] for i in range(3))
    d0 = direction == 0
    # the simulated grid (_prefix): whole, whole slices, whole groups, or cut along its long side
    a_all, b_all = np.where(d0, tm, tn), np.where(d0, tn, tm)
    off_all = np.minimum(offset, a_all)
    need = -(-SIM_TILES // b_all)
    rows = np.minimum(a_all, -(-need // off_all) * off_all)
    cut_walk = rows * b_all > SIM_MAX
    cut = np.maximum(1, SIM_TILES // (2 * off_all))
    small = per * splits * batch <= SIM_TILES
    slices = per <= SIM_TILES
    whole_grid = small | slices
    a = np.where(whole_grid, a_all, np.where(cut_walk, np.minimum(a_all, 2 * off_all), rows))
    b = np.where(whole_grid, b_all, np.where(cut_walk, cut, b_all))
    outer = np.where(
        small, splits * batch, np.where(slices, np.maximum(1, SIM_TILES // np.maximum(per, 1)), 1)
    )
    share = np.where(whole_grid | ~cut_walk, 1.0, cut / b_all)
    t_m, t_n = np.where(d0, a, b), np.where(d0, b, a)
    # the walk columns' panels (B for direction 0) are compared with L2 * share, the walk rows' with L2
    off = np.minimum(offset, a)
    groups = -(-a // off)
    h_last = a - (groups - 1) * off
    loads = t_m * t_n * outer

    def largest_gap(cap):
        """The largest whole gap (rounds) whose bytes fit: gap * step <= cap."""
        t = np.floor(cap / step).astype(np.int64)
        t = np.where((t + 1) * step <= cap, t + 1, t)
        return np.where(t * step > cap, t - 1, t)

    lim_row = largest_gap(np.float64(l2_bytes))
    lim_col = largest_gap(l2_bytes * share)
    miss_row = (groups - 1) * off * (b - 1) * (off > lim_row) + h_last * (b - 1) * (h_last > lim_row)
    miss_col = b * (a - groups) * (1 > lim_col)
    inner = np.maximum(groups - 2, 0)
    two = groups >= 2
    last_par = (groups - 2) % 2
    sn = snake == 1
    # group boundaries into a group of h' rows, gap = alpha + beta*y for walk column y:
    # plain: off*b + y*h' - y*off - off + 1; serpentine from an even group (the next reversed):
    # off*b + (b-1-y)*h' - y*off - off + 1; from an odd group: off*b + y*h' - (b-1-y)*off - off + 1
    for h_next, is_last in ((off, False), (h_last, True)):
        plain_n = np.where(two, 1 if is_last else inner, 0)
        plain = plain_n * _count_over(off * b - off + 1, h_next - off, b, lim_col)
        serp = 0
        for par in (0, 1):
            if is_last:
                count = np.where(two & (last_par == par), 1, 0)
            else:
                count = np.where(two, (inner + 1 - par) // 2, 0)
            if par == 0:
                alpha, beta = off * b + (b - 1) * h_next - off + 1, -(h_next + off)
            else:
                alpha, beta = off * b - (b - 1) * off - off + 1, h_next + off
            serp = serp + count * _count_over(alpha, beta, b, lim_col)
        miss_col = miss_col + np.where(sn, serp, plain)
    first_row, first_col = np.where(d0, t_m, t_n) * outer, np.where(d0, t_n, t_m) * outer
    hit_row = 1.0 - (first_row + miss_row * outer).astype(np.float64) / loads
    hit_col = 1.0 - (first_col + miss_col * outer).astype(np.float64) / loads
    all_a, all_b = np.where(d0, hit_row, hit_col), np.where(d0, hit_col, hit_row)
    hit_a, hit_b = all_a, all_b  # (settings, rows)
    if every:
        return hit_a.reshape(-1, *shape), hit_b.reshape(-1, *shape)
    if not front:
        return hit_a.max(axis=0).reshape(shape), hit_b.max(axis=0).reshape(shape)
    return tuple(x.reshape(-1, *shape) for x in front_rows(hit_a, hit_b))


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


def front_rows(*values: np.ndarray) -> tuple[np.ndarray, ...]:
    """Per column of (S, rows) arrays, the rows (settings) no other beats on every quantity (of equal ones the
    first), first; the rest of each column repeats its first: (K, rows) each. Every setting is at or below one of
    them on every quantity, so a cost that falls as each rises is bounded below by its smallest over these K."""
    vary = np.flatnonzero(np.logical_or.reduce([(v != v[:1]).any(axis=0) for v in values]))
    if vary.size < values[0].shape[1]:  # columns where every setting is the same: that one alone
        out = [v[:1].copy() for v in values]
        if vary.size:
            sub = front_rows(*(v[:, vary] for v in values))
            out = [np.repeat(o, sub[0].shape[0], axis=0) for o in out]
            for o, f in zip(out, sub, strict=True):
                o[:, vary] = f
        return tuple(out)
    ge = np.logical_and.reduce([v[:, None] >= v[None, :] for v in values])  # ge[t, s]: t at least s
    later = np.arange(len(values[0]))[None, :, None] > np.arange(len(values[0]))[:, None, None]  # s after t
    beaten = (ge & ~(ge.transpose(1, 0, 2) & ~later)).any(axis=0)  # beaten[s]: some t >= s, t != s's twin
    order = np.argsort(beaten, axis=0, kind="stable")
    width = int((~beaten).sum(axis=0).max())
    pick = np.where(np.arange(width)[:, None] < (~beaten).sum(axis=0), order[:width], order[:1])
    at = np.arange(values[0].shape[1])
    return tuple(v[pick, at] for v in values)


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


_TOUCHES: dict = {}
_TOUCH_ELEMS = 0


def rounds_overflow(tiles, slots: int, a_panel, b_panel, l2_bytes) -> np.ndarray:
    """Where every full round's panels alone exceed L2 (arrays broadcast): a round of `slots` tiles of one slice
    touches ra distinct A panels and rb distinct B panels with ra * rb >= slots (its tiles are distinct), so
    at least ra*A + rb*B >= 2 sqrt(slots A B) bytes (over several slices too: the square root is subadditive).
    There panel_hits_many's repeat touches in full rounds all miss (the bytes between include the round's own),
    and the walk needs simulating (more tiles than one round)."""
    return (tiles > slots) & (2.0 * np.sqrt(slots * np.asarray(a_panel) * b_panel) > l2_bytes)


def round_hit_front(
    tm, tn, splits, batch, slots: int, a_panel, b_panel, l2_bytes, offsets, directions, min_rounds: int = 0
):
    """L2 hit-rate pairs (A, B), (K, rows) each, such that every walk setting's panel_hits_many pair is at or
    below one of them, on rows where rounds_overflow holds (the others: one pair, the ceiling 1 - 1/tn,
    1 - 1/tm); None where no row has a pair below the ceiling. Rows of at most `min_rounds` rounds a core are
    left at the ceiling too (the caller's trade of bounding cost against scoring).

    Why: there a full round's touches all miss, so over the simulated walk (_prefix: L tiles, F = L // slots full
    rounds) the miss rates uA, uB (misses per load) satisfy uA >= 1/tn, uB >= 1/tm (each panel misses once;
    the prefix grid is a part of the grid), uA, uB >= F / L (a round touches at least one panel of each kind)
    and, round by round, ra * rb >= slots, so by the convexity of 1/x (sum rb >= F^2 slots / sum ra):
    uA * uB >= c = slots (F / L)^2, with F / L the smallest over the walk settings. The curve is covered by
    corners: uA on a geometric grid from its floor x_0 to x_m = c / (uB's floor) (ratio at most ROUND_RATIO);
    pair i (x_i, max(uB's floor, c / x_(i+1))) lies at or below every point with uA in [x_i, x_(i+1)), and
    (x_m, uB's floor) below those past x_m. The pair's product is c / ratio: the bound gives up at most that
    factor in the miss rates (a guess that it is small against the ceiling's 1/tn, 1/tm). With both floors
    near F / L the corners span a ratio of about `slots`: a handful of pairs."""
    cols = np.broadcast_arrays(tm, tn, splits, batch, a_panel, b_panel)
    tm, tn, splits, batch = (np.asarray(x, dtype=np.int64).ravel() for x in cols[:4])
    a_panel, b_panel = (np.asarray(x, dtype=np.float64).ravel() for x in cols[4:])
    tiles = tm * tn * splits * batch
    rows = np.flatnonzero(
        (tiles > min_rounds * slots) & rounds_overflow(tiles, slots, a_panel, b_panel, l2_bytes)
    )
    if not rows.size:
        return None
    first, inv = group_rows([tm[rows], tn[rows], splits[rows], batch[rows]])
    share = np.empty(first.size)  # F / L: the fewest full rounds per simulated tile over the settings
    for j, i in enumerate(rows[first].tolist()):
        fl = []
        for o in sorted(set(offsets)):
            for d in sorted(set(directions)):
                t_m, t_n, spl, bat, _, _ = _prefix(
                    int(tm[i]), int(tn[i]), int(splits[i]), int(batch[i]), o, d
                )
                n = t_m * t_n * spl * bat
                fl.append((n // slots) / n)
        share[j] = min(fl)
    q = np.zeros(tm.size)
    q[rows] = share[inv]
    # each panel misses at least once, and each full round at least one panel of each kind
    lo_a, lo_b = np.maximum(1.0 / tn, q), np.maximum(1.0 / tm, q)
    c = slots * q**2
    top = c / lo_b  # uA past which uB's own floor binds
    spread = np.where(top > lo_a * ROUND_RATIO, top / lo_a, 1.0)  # 1: a single pair, the floors
    steps = np.ceil(np.log(spread) / math.log(ROUND_RATIO)).astype(np.int64)
    k = int(steps.max())
    # (K, rows): a row with fewer steps repeats its last pair; a row with none, its floors (the ceiling where
    # the rounds do not overflow)
    i = np.minimum(np.arange(k + 1)[:, None], steps)
    span = np.where(steps > 0, top / lo_a, 1.0)
    x = lo_a * span ** np.divide(i, steps, out=np.zeros(i.shape), where=steps > 0)
    x_next = lo_a * span ** np.divide(i + 1, steps, out=np.ones(i.shape), where=steps > 0)
    u_b = np.where(i < steps, np.maximum(lo_b, c / x_next), lo_b)
    shrink = np.where(q > 0, 1.0 - 1e-9, 1.0)  # a hair below: float rounding never lifts a pair above
    return 1.0 - x * shrink, 1.0 - u_b * shrink


def _touches(tm, tn, outer, slots, settings) -> tuple[tuple, list]:
    """The panel touches of each setting's walk, by round: per kind (A, B) the distinct panels touched in each
    round (S, rounds), and of the touches after an earlier one (a repeat touch), the first-touch count per
    setting and the cum-footprint indices (hi, lo) and setting of each repeat. Cached; bounded by elements."""
    global _TOUCH_ELEMS
    key = (tm, tn, outer, slots, np.asarray(settings, dtype=np.int64).tobytes())
    hit = _TOUCHES.get(key)
    if hit is not None:
        return hit
    r, c = walks(tm, tn, settings)
    n_set, per = r.shape
    loads = per * outer
    slice_ = np.repeat(np.arange(outer, dtype=np.int64), per)
    rnd = np.arange(loads) // slots
    nr = int(rnd[-1]) + 1
    # distinct (setting, panel, round) triples, sorted by setting, panel, then round (the walk visits rounds in
    # order); panels are numbered per slice
    counts, kinds = [], []
    for ids, width in (
        (slice_ * tm + np.tile(r, outer), tm * outer),
        (slice_ * tn + np.tile(c, outer), tn * outer),
    ):
        code = ((np.arange(n_set)[:, None] * width + ids) * nr + rnd).ravel()
        if n_set * width * nr <= 16 * code.size:  # a flag per possible triple: no sort
            seen = np.zeros(n_set * width * nr, dtype=bool)
            seen[code] = True
            code = np.flatnonzero(seen)
        else:  # rounds many and panels many (few slots): sort the triples, memory by the loads
            code = np.unique(code)
        pid, pr = np.divmod(code, nr)
        which = pid // width
        counts.append(np.bincount(which * nr + pr, minlength=n_set * nr).reshape(n_set, nr))
        same = np.zeros(pr.size, dtype=bool)
        same[1:] = pid[1:] == pid[:-1]
        rep = np.flatnonzero(same)
        base = which[rep] * (nr + 1)
        first = np.bincount(which[~same], minlength=n_set).astype(np.float64)
        kinds.append((first, base + pr[rep] + 1, base + pr[rep - 1] + 1, which[rep]))
    size = sum(x.size for k in kinds for x in k) + 2 * n_set * nr
    if _TOUCH_ELEMS + size > _WALK_ELEMS_MAX:
        _TOUCHES.clear()
        _TOUCH_ELEMS = 0
    _TOUCHES[key] = (tuple(counts), kinds)
    _TOUCH_ELEMS += size
    return _TOUCHES[key]


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


# ---------------------------------------------------------------- packed-code tables (the models' own caches)
def pack_codes(columns, bits) -> np.ndarray | None:
    """One int64 code per row (the columns' values in `bits`-wide fields, the first most significant, so codes
    sort as the rows do), or None when a value does not fit its field."""
    code = None
    for col, b in zip(columns, bits, strict=True):
        col = np.asarray(col).astype(np.int64, copy=False)
        if col.size and (int(col.min()) < 0 or int(col.max()) >= 1 << b):
            return None
        code = col.copy() if code is None else (code << b) | col
    return code


def unpack_codes(code: np.ndarray, bits) -> list[np.ndarray]:
    """The fields of packed codes, in pack_codes' order."""
    out = []
    for b in reversed(bits):
        out.append(code & ((1 << b) - 1))
        code = code >> b
    return out[::-1]


class GrowingRows:
    """Rows appended at the end of an array kept in a buffer that doubles when full: appending k rows costs k rows'
    copy (amortised), where np.concatenate would copy the whole table each time (the model's tables grow by a few
    rows per estimate call over a whole sweep). `append` returns the rows so far, a view of the buffer."""

    def __init__(self, tail: tuple = (), dtype=np.float64):
        self._buf = np.empty((0, *tail), dtype=dtype)
        self.size = 0

    @property
    def filled(self) -> np.ndarray:
        """The rows so far (a view of the buffer)."""
        return self._buf[: self.size]

    def append(self, rows) -> np.ndarray:
        rows = np.asarray(rows, dtype=self._buf.dtype)
        end = self.size + len(rows)
        if end > len(self._buf):
            buf = np.empty((max(end, 2 * len(self._buf), 64), *self._buf.shape[1:]), dtype=self._buf.dtype)
            buf[: self.size] = self._buf[: self.size]
            self._buf = buf
        self._buf[self.size : end] = rows
        self.size = end
        return self.filled


class CodeTable:
    """Rows computed once per process and found again by their packed code (a sorted array and searchsorted:
    no Python per row once a row is known). Subclasses keep the rows' values by id (`_add`); a table holding
    MAX_ROWS rows starts over."""

    MAX_ROWS = 1 << 17

    def __init__(self):
        self.codes = np.empty(0, dtype=np.int64)  # sorted
        self.order = np.empty(0, dtype=np.int64)  # the id of each sorted code
        self.count = 0

    def _find(self, codes: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        pos = np.searchsorted(self.codes, codes)
        found = pos < self.codes.size
        found[found] = self.codes[pos[found]] == codes[found]
        return pos, found

    def ids(self, codes: np.ndarray, compute) -> np.ndarray:
        """Ids of sorted distinct `codes`; `compute(missing codes)` makes the rows not yet in the table.

        New codes are merged into the sorted ones at their searchsorted places (np.insert: one copy, no sort of
        the whole table); ids are given in the order of `missing`, the order `compute` made their rows in."""
        pos, found = self._find(codes)
        if not found.all():
            if self.count + codes.size > self.MAX_ROWS:  # start over; every code of this call is added again
                self.__init__()
                found = np.zeros(codes.size, dtype=bool)
            missing = codes[~found]
            self._add(compute(missing))
            ids = np.arange(self.count, self.count + missing.size)
            self.count += missing.size
            by_code = np.argsort(missing, kind="stable")  # already sorted when `codes` is: then a no-op order
            at = np.searchsorted(self.codes, missing[by_code])
            self.codes = np.insert(self.codes, at, missing[by_code])
            self.order = np.insert(self.order, at, ids[by_code])
            pos, _ = self._find(codes)
        return self.order[pos]


class PairTable(CodeTable):
    """A CodeTable whose rows are pairs of floats: the L2 hit rates (A, B) of a launch order's walk, by id (the
    Ascend and the cuda matmul models keep one per problem)."""

    def __init__(self):
        super().__init__()
        self._values = GrowingRows((2,))
        self.values = self._values.filled

    def _add(self, values: np.ndarray) -> None:
        self.values = self._values.append(values)


# clear functions of caches that models keep over this module's results (on_clear), run by clear_caches
_CLEARERS: list = []


def on_clear(fn) -> None:
    """Have clear_caches() also call `fn` (a model's own tables built from these simulations)."""
    if fn not in _CLEARERS:
        _CLEARERS.append(fn)


def clear_caches() -> None:
    """Forget every cached walk and simulation (benchmarks time a search from a cold start with this)."""
    global _WALK_ELEMS, _TOUCH_ELEMS
    max_b_reuse.cache_clear()
    for cache in (_WALKS, _WORK, _HITS, _TOUCHES, _COUNTS):
        cache.clear()
    _WALK_ELEMS = _TOUCH_ELEMS = 0
    for fn in _CLEARERS:
        fn()
