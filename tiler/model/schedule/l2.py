"""L2 reuse between rounds: hit rates of A and B panel loads along a tile walk, simulated or in closed form.

A round is the set of tiles running at once; the simulation is bounded (SIM_TILES, SIM_MAX: a prefix of whole
slices or groups of tile rows, or a cut walk) so no table grows with the tile count. Hit rates are cached per
(grid, panel bytes, setting).
"""

from __future__ import annotations

import math

import numpy as np

from ..common import group_rows
from .work import _CACHE_ROWS, _WALK_ELEMS_MAX, walk_settings, walks

# Largest tile walk the L2 simulation runs; bigger walks are simulated on a prefix of whole slices or whole
# groups of tile rows (the steady state repeats), see panel_hits.
SIM_TILES = 2048
SIM_MAX = 1 << 15  # largest prefix of whole groups simulated; beyond, the walk is cut (see _prefix)
# Largest ratio between consecutive corners of round_hit_front (the bound's L2 miss rates on a walk whose rounds
# overflow L2): more corners, a tighter bound, a tile cost each
ROUND_RATIO = 1.5

_HITS: dict = {}  # L2 hit rates by (grid, panel bytes, setting)


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


def _setting_hit_rates(tm, tn, splits, batch, a_panel, b_panel, l2_bytes, offsets, directions, snakes):
    """serial_hit_ceiling's closed form for rows that are walked: the (A, B) hit rates of every walk setting
    (walk_settings' order) on every row, (S, rows) each; the rows are 1-D int64 (tm, tn, splits, batch) and
    float64 (a_panel, b_panel) arrays of whole bytes."""
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
    return all_a, all_b


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
    all_a, all_b = _setting_hit_rates(
        tm, tn, splits, batch, a_panel, b_panel, l2_bytes, offsets, directions, snakes
    )
    hit_a, hit_b = all_a, all_b  # (settings, rows)
    if every:
        return hit_a.reshape(-1, *shape), hit_b.reshape(-1, *shape)
    if not front:
        return hit_a.max(axis=0).reshape(shape), hit_b.max(axis=0).reshape(shape)
    return tuple(x.reshape(-1, *shape) for x in front_rows(hit_a, hit_b))


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
    setting and the cum-footprint indices (hi, lo) and setting of each repeat. Cached; bounded by elements.

    Per kind, the distinct (setting, panel, round) triples are flagged in a table of every possible one where that
    table is small against the walk (_flagged_touches); else (rounds and panels many: few slots on a long walk)
    each touch's previous touch of its panel is found in closed form (_chained_touches), no sort. The repeats'
    order differs between the two: _hit_rates only counts them."""
    global _TOUCH_ELEMS
    key = (tm, tn, outer, slots, np.asarray(settings, dtype=np.int64).tobytes())
    hit = _TOUCHES.get(key)
    if hit is not None:
        return hit
    r, c = walks(tm, tn, settings)
    n_set, per = r.shape
    loads = per * outer
    nr = (loads - 1) // slots + 1
    counts, kinds, chains = [], [], None
    for j, (ids, width) in enumerate(((r, tm), (c, tn))):
        if n_set * width * outer * nr <= 16 * n_set * loads:
            cnt, kind = _flagged_touches(ids, width, outer, slots, nr)
        else:
            if chains is None:
                chains = _previous_touch(tm, tn, r, c, np.asarray(settings, dtype=np.int64))
            cnt, kind = _chained_touches(chains[j], outer, slots, nr)
        counts.append(cnt)
        kinds.append(kind)
    size = sum(x.size for k in kinds for x in k) + 2 * n_set * nr
    if _TOUCH_ELEMS + size > _WALK_ELEMS_MAX:
        _TOUCHES.clear()
        _TOUCH_ELEMS = 0
    _TOUCHES[key] = (tuple(counts), kinds)
    _TOUCH_ELEMS += size
    return _TOUCHES[key]


def _flagged_touches(ids, width: int, outer: int, slots: int, nr: int) -> tuple[np.ndarray, tuple]:
    """_touches of one panel kind (`ids`: (S, tiles) the panel of each walk position, `width` panels a slice) by
    a flag per possible (setting, panel, round) triple: the distinct ones in sorted order, no sort."""
    n_set, per = ids.shape
    loads = per * outer
    slice_ = np.repeat(np.arange(outer, dtype=np.int64), per)
    rnd = np.arange(loads) // slots
    wide = width * outer  # panels are numbered per slice
    code = ((np.arange(n_set)[:, None] * wide + (slice_ * width + np.tile(ids, outer))) * nr + rnd).ravel()
    seen = np.zeros(n_set * wide * nr, dtype=bool)
    seen[code] = True
    code = np.flatnonzero(seen)
    pid, pr = np.divmod(code, nr)
    which = pid // wide
    counts = np.bincount(which * nr + pr, minlength=n_set * nr).reshape(n_set, nr)
    same = np.zeros(pr.size, dtype=bool)
    same[1:] = pid[1:] == pid[:-1]
    rep = np.flatnonzero(same)
    base = which[rep] * (nr + 1)
    first = np.bincount(which[~same], minlength=n_set).astype(np.float64)
    return counts, (first, base + pr[rep] + 1, base + pr[rep - 1] + 1, which[rep])


def _chained_touches(prev, outer: int, slots: int, nr: int) -> tuple[np.ndarray, tuple]:
    """_touches of one panel kind from each walk position's previous touch of its panel (`prev`, (S, tiles), -1
    for none; _previous_touch): a touch is its panel's first in its round exactly when the previous touch lies
    in an earlier round, a repeat when there is one. The repeats in walk order."""
    n_set, per = prev.shape
    loads = per * outer
    at = np.arange(loads, dtype=np.int64)
    rnd = at // slots
    if outer > 1:  # every slice walks the same order with its own panels: no touch crosses slices
        prev = np.tile(prev, outer)
        prev = np.where(prev >= 0, prev + (at - at % per), -1)
    setting = np.arange(n_set, dtype=np.int64)[:, None]
    has = prev >= 0
    prev_rnd = np.where(has, prev, 0) // slots
    new = ~has | (prev_rnd < rnd)  # the panel's first touch in this round
    rep = new & has  # ... after a touch in an earlier round
    which = np.broadcast_to(setting, new.shape)
    counts = np.bincount((setting * nr + rnd)[new], minlength=n_set * nr).reshape(n_set, nr)
    first = np.bincount(which[~has], minlength=n_set).astype(np.float64)
    who = which[rep]
    base = who * (nr + 1) + 1  # cum's row of the setting: index 1 + round is the bytes up to that round
    return counts, (first, base + np.broadcast_to(rnd, rep.shape)[rep], base + prev_rnd[rep], who)


def _previous_touch(tm, tn, r, c, settings) -> tuple[np.ndarray, np.ndarray]:
    """For each walk position (S, tm*tn) of the walks (r, c) of `settings` (offset, direction, serpentine), the
    position of the previous touch of its A panel (tile row) and of its B panel (tile column), -1 for none.

    In walk space (direction 1 walks the transposed grid) a group of `off` walk rows is walked column by column:
    a walk row's panel is touched once per walk column of its group, `h` (the group's height) positions apart,
    and only in that group; a walk column's panel is touched by the walk rows in increasing order (rows inside
    a group, groups in order, serpentine or not), so its previous touch is the tile one walk row up."""
    n_set, per = r.shape
    pos = np.empty(n_set * per, dtype=np.int64)  # the walk position of each tile (row-major tile index)
    tile = r.astype(np.int64) * tn + c
    flat = tile + (np.arange(n_set, dtype=np.int64) * per)[:, None]
    pos[flat.ravel()] = np.tile(np.arange(per, dtype=np.int64), n_set)
    d1 = settings[:, 1:2] == 1
    # walk column: the tile one walk row up (row - 1 for direction 0, column - 1 for direction 1)
    up = np.where(d1, 1, tn)
    valid = np.where(d1, c > 0, r > 0)
    up_pos = pos[np.where(valid, flat - up, flat)]
    col_prev = np.where(valid, up_pos, -1)
    # walk row: h positions back, inside the group
    a = np.where(d1, tn, tm)
    b = np.where(d1, tm, tn)
    off = np.minimum(settings[:, :1], a)
    p = np.arange(per, dtype=np.int64)[None, :]
    group = p // (off * b)
    height = np.minimum(off, a - group * off)
    back = p - height
    row_prev = np.where(back >= group * off * b, back, -1)
    # A is the walk row's panel for direction 0, the walk column's for direction 1
    return np.where(d1, col_prev, row_prev), np.where(d1, row_prev, col_prev)
