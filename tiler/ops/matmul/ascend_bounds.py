"""Matmul on Ascend, the search's lower bounds: whole-kernel floors (quick_bound, prefix_bound) and the bound
over every schedule (bound, _bound_split), as a mixin of the operator (docs/model.md, "exhaustive search")."""

from __future__ import annotations

import numpy as np

from ...model.common import (
    ceil_div,
    group_rows,
    segment_efficiency,
)
from ...model.schedule import (
    b_reuse_ceiling,
    block_grid,
    front_rows,
    max_b_reuse,
    round_hit_front,
    rounds_overflow,
    serial_b_reuse,
    serial_hit_ceiling,
)
from .ascend_epilogue import _fix_elem_bytes, _head_us, _reduction_us, _write_share
from .ascend_tile import (
    _chip_rates,
    _geometry,
    _k0,
    _k_slice,
    _segment_ceiling,
    _segment_floor,
    _sizes,
    _stride_floor,
    _tail,
    _type_counts,
    tile_cost,
)
from .problem import Matmul

REUSE_EXACT = 2048  # tile grids up to this size (several cores) get the exact weight-reuse maximum in bound()
# rows of (tiling, L2 hit pair) bounded per call when bound() takes its smallest over several hit pairs (its work
# arrays: a few KB a row)
BOUND_ROWS = 1 << 14
# full rounds a walk needs before bound() takes its L2 misses from overflowing rounds (round_hit_front, a tile
# cost per corner pair): fewer, and the ceiling hit rates (it costs more to bound than it saves in scoring)
ROUND_TILES = 256


def _write_floor(p: Matmul, chip, c: dict, active) -> np.ndarray:
    """Core-seconds the fixpipe spends writing the output, summed over tiles (every output element once per
    split-K slice; split-K writes fp32 with atomic adds: 8 B read-modify-write). Reads and writes run on separate
    channels (tile_cost: busy >= max(MTE2, fixpipe)), so this is a floor beside the MTE2 floor, not added to it."""
    out_bytes = (
        float(p.batch * p.M * p.N) * c["split_k"] * np.where(c["split_k"] > 1, 8, _fix_elem_bytes(p, chip))
    )
    share = _write_share(p, chip, _chip_rates(p, chip), active, c["split_k"] > 1)
    return out_bytes / np.minimum(chip["fixpipe_bytes_per_cycle"] * chip.clock_hz, share)


def _load_floor(counts: np.ndarray, extra: np.ndarray, reuse: np.ndarray) -> np.ndarray:
    """The least time weight residency's B loads add to a row's work: `counts` (n, T) tiles per type, `extra`
    (n, T) what a B load adds to one tile of each type, at most `reuse` (n,) tiles reusing their panel (no load).

    Every other tile loads. The least total puts the reuses on the tiles whose load costs most (a fractional
    knapsack: types by falling extra, each filled up to its count until `reuse` runs out): a floor of every
    schedule's loads, whichever tiles it reuses on, and at least (tiles - reuse) times the cheapest extra."""
    extra = np.where(counts > 0, extra, 0.0)
    order = np.argsort(-extra, axis=1, kind="stable")
    n_t, e_t = np.take_along_axis(counts, order, axis=1), np.take_along_axis(extra, order, axis=1)
    before = np.cumsum(n_t, axis=1) - n_t  # tiles of the costlier types
    reused = np.clip(reuse[:, None] - before, 0, n_t)
    return ((n_t - reused) * e_t).sum(axis=1)


class AscendBounds:
    """The Ascend matmul's lower bounds of time_us; MatmulAscend inherits them (it gives `target`)."""

    def quick_bound(self, p: Matmul, chip, c: dict) -> np.ndarray:
        """A cheaper, looser lower bound than bound(): whole-kernel floors that no schedule can beat.

        Each core's busy time is at least its MAC time, its MTE2 byte time and its scalar time (every formula in
        tile_cost takes a max over them), so the makespan is at least each total over the cores: all MMAD
        fractals over the cube rate; the GM->L1 bytes the tile shape forces (A re-streamed per L0 column block
        unless its K slice fits L1, B likewise unless resident: then only its compulsory panel bytes) over the
        best bandwidth one core can reach (port and L2 share, stride and row-segment penalties) plus the
        transfers' latency `l1_stages` at a time; the issued
        instructions over the scalar rate; the output writes (fixpipe) over the write channel (a floor beside the
        MTE2 one: reads and writes overlap on separate channels, tile_cost's t_gm). The search runs it first and computes bound() only where it is
        below the best time found.
        """
        fl = self._floors(p, chip, c)
        mte2 = np.maximum(
            np.maximum(fl["bytes"], (fl["latency"] + fl["bytes"]) / c["l1_stages"]), fl["writes"]
        )
        make = (
            np.maximum(np.maximum(fl["mac"], mte2), fl["scalar"]) / chip.cores
        )  # core-seconds over the cores
        return make * 1e6 + fl["head_us"] + _reduction_us(p, chip, c)

    def prefix_bound(self, p: Matmul, chip, c: dict, domains: dict) -> np.ndarray:
        """A floor of quick_bound over every completion of first-level rows (base sizes and split_k).

        quick_bound is max(MAC, MTE2, scalar) over the cores plus head and reduction, with MTE2 at least its
        byte time. Each term is bounded below over every setting of the steps, residency and load mode in
        `domains` (only the MDL rule is used: steps above 1 need the operand's whole K slice in L1):
        A is re-read at least once per column of the widest tiles, B once if residency is allowed else once per
        row of the tallest tiles (sums of per-tile block counts are at least the tile counts); the best row
        segment and port any completion can reach; the L0 blocks at least ceil(M/base_m)*ceil(N/base_n); the
        fewest cores a completion can leave busy for the head. tests/test_search.py checks the floor against
        quick_bound on completions.
        """
        r = _chip_rates(p, chip)
        f, b, k0, cores = r["f"], p.in_bytes, _k0(p), chip.cores
        bm, bn, bk = c["base_m"], c["base_n"], c["base_k"]
        kc = _k_slice(p, c)
        s = c["split_k"] * p.batch
        mac = ceil_div(p.M, 16) * ceil_div(p.N, 16) * ceil_div(kc, k0) * s * r["mac_cycle"] / f
        # MDL: step_m > 1 needs A's whole K slice in one L1 chunk (base_k * step_ka >= kc), step_n B's
        a_whole = bk * max(domains["step_ka"]) >= kc
        b_whole = bk * max(domains["step_kb"]) >= kc
        step_m = np.where(a_whole, max(domains["step_m"]), 1)
        step_n = np.where(b_whole, max(domains["step_n"]), 1)
        gm_min, gn_min = ceil_div(p.M, bm * step_m), ceil_div(p.N, bn * step_n)
        b_passes = 1 if 1 in domains["weight_resident"] else gm_min
        active = np.minimum(cores, gm_min * gn_min * s)
        if 1 in domains.get("core_split", (0,)):  # the block split may launch as few as one core per slice
            active = np.minimum(active, c["split_k"])
        port = np.minimum(r["core_gm"], r["l2"] / active)
        eff = _stride_floor(p, chip)
        # the best row segment of any completion (quick_bound's segments): along K, MDL moves
        # ka = min(base_k*step_ka, kc) per row and Norm one whole base_k block; along M or N, rows of at most
        # base_m (base_n) times the largest step
        along_k = [segment_efficiency(bk * b)]
        seg_a = np.max(
            along_k + [segment_efficiency(np.minimum(bk * v, kc) * b) for v in domains["step_ka"]], axis=0
        )
        seg_b = np.max(
            along_k + [segment_efficiency(np.minimum(bk * v, kc) * b) for v in domains["step_kb"]], axis=0
        )
        if p.a_transposed:
            seg_a = _segment_ceiling(bm * max(1, *domains["step_m"]) * b)
        if not p.b_transposed:
            seg_b = _segment_ceiling(bn * max(1, *domains["step_n"]) * b)
        if p.b_nz:
            seg_b = np.ones_like(seg_b)
        t_bytes = p.M * kc * b * s * gn_min / (port * eff[0] * seg_a) + p.N * kc * b * s * b_passes / (
            port * eff[1] * seg_b
        )
        mmads = ceil_div(p.M, bm) * ceil_div(p.N, bn) * ceil_div(kc, bk) * s
        scalar = mmads * (3 * chip["scalar_cycles_per_instr"] + chip["scalar_cycles_per_loop"]) / f
        make = (
            np.maximum(np.maximum(mac, np.maximum(t_bytes, _write_floor(p, chip, c, active))), scalar) / cores
        )
        return make * 1e6 + _head_us(chip, active) + _reduction_us(p, chip, c)

    def _fewest_active(self, chip, g: dict, schedules: dict | None = None) -> np.ndarray:
        """The fewest cores any allowed schedule keeps loading at once (each gets the largest share of HBM and L2)
        and launches (the head): the walk fills min(cores, tiles); the block split (when the target or
        `schedules` allows it) only its blocks, block_grid's um*un per slice."""
        walk = np.minimum(chip.cores, g["tiles"])
        if not self._block_allowed(schedules):
            return walk
        gm, gn, sk = (np.asarray(g[k], dtype=np.int64) for k in ("gm", "gn", "splits"))
        first, inv = group_rows([gm, gn, sk])
        um, un, _, _ = block_grid(gm[first], gn[first], sk[first], chip.cores)
        return np.minimum(walk, np.minimum(um * un * sk[first], chip.cores)[inv])

    def _block_allowed(self, schedules: dict | None) -> bool:
        """Whether some allowed schedule is the block split (the target's domain and `schedules`' values)."""
        return self._split_allowed(schedules, 1)

    def _split_allowed(self, schedules: dict | None, split: int) -> bool:
        """Whether some allowed schedule has core_split `split` (0 walk, 1 block; the target's domain and
        `schedules`' values)."""
        allowed = set((schedules or {}).get("core_split", (0, 1)))
        if self.target is not None and "core_split" in self.target.domains:
            allowed &= {1 if v == "block" else 0 for v in self.target.domains["core_split"]}
        return split in allowed

    def _floors(self, p: Matmul, chip, c: dict) -> dict:
        """quick_bound's whole-kernel floors (core-seconds summed over the chip): MAC; MTE2 bytes over the best
        bandwidth and the transfers' latency; scalar issue; and the head (us)."""
        r = _chip_rates(p, chip)
        f, b, k0 = r["f"], p.in_bytes, _k0(p)
        g = _geometry(p, c)
        bm, bn, bk = c["base_m"], c["base_n"], c["base_k"]
        s = g["splits"] * p.batch
        kc = g["kc"]
        mac = ceil_div(p.M, 16) * ceil_div(p.N, 16) * ceil_div(kc, k0) * s * r["mac_cycle"] / f
        ka, kb = np.minimum(bk * c["step_ka"], kc), np.minimum(bk * c["step_kb"], kc)
        nbn, nbm = ceil_div(g["tn"], bn), ceil_div(g["tm"], bm)
        # L0 blocks summed over a row (column) of tiles, the edge tile at its real size
        nbn_sum = (g["gn"] - 1) * nbn + ceil_div(g["n_last"], bn)
        nbm_sum = (g["gm"] - 1) * nbm + ceil_div(g["m_last"], bm)
        res = c["weight_resident"] == 1
        a_bytes = p.M * kc * b * s * np.where(ka >= kc, g["gn"], nbn_sum)
        b_bytes = p.N * kc * b * s * np.where(res, 1, np.where(kb >= kc, g["gm"], nbm_sum))
        active = self._fewest_active(chip, g)
        port = np.minimum(r["core_gm"], r["l2"] / active)  # the best one core's MTE2 can see
        eff = _stride_floor(p, chip)
        ml = c["multi_load"] == 1
        seg_a, seg_b = _segment_floor(p, c, g["tm"], g["tn"], ka, kb)
        t_bytes = a_bytes / (port * eff[0] * seg_a) + b_bytes / (port * eff[1] * seg_b)
        # transfers issued (B's at least once per panel when resident), each waiting one latency; count them
        # with every tile at its smallest (edge) block count, a valid floor
        tiles = g["tiles"]
        nbn_min, nbm_min = (
            ceil_div(np.minimum(g["n_last"], g["tn"]), bn),
            ceil_div(np.minimum(g["m_last"], g["tm"]), bm),
        )
        xa = ceil_div(kc, ka) * np.where(ka >= kc, 1, nbn_min) * np.where(ml, 1, nbm_min * ceil_div(ka, bk))
        xb = (
            ceil_div(kc, kb)
            * np.where((kb >= kc) | res, 1, nbm_min)
            * np.where(ml, 1, nbn_min * ceil_div(kb, bk))
        )
        xfers = tiles * xa + np.where(res, g["gn"] * s, tiles) * xb
        mmads = nbm_sum * nbn_sum * ceil_div(kc, bk) * s
        return {
            "mac": mac,
            "bytes": t_bytes,
            "writes": _write_floor(p, chip, c, active),
            "latency": xfers * r["lat"],
            "scalar": mmads * (3 * chip["scalar_cycles_per_instr"] + chip["scalar_cycles_per_loop"]) / f,
            "head_us": _head_us(chip, active),
        }

    def bound(self, p: Matmul, chip, c: dict, schedules: dict | None = None) -> np.ndarray:
        """Lower bound of time_us over every value of SCHEDULE_KNOBS (see docs/model.md, "exhaustive search").

        Hit rates at their ceiling (every panel misses at least once), weight residency everywhere it is on,
        makespan at least the average busy time and at least the full rounds every core must run.
        `schedules` gives the schedule knobs' domains (default: the whole space file's); with weight residency
        on, only as many tiles as the best of those traversals lets reuse a B panel get the resident cost.
        """
        schedules = schedules or {
            "swizzle_offset": (1, 2, 3, 4, 8),
            "swizzle_direction": (0, 1),
            "serpentine": (0, 1),
        }
        splits = [v for v in (0, 1) if self._split_allowed(schedules, v)]
        if len(splits) < 2:
            return self._bound_split(p, chip, c, schedules, block=splits == [1])
        # both splits: one floor for every schedule (the fewest cores either split keeps loading), and where that
        # mixes the two (the block split loads on fewer cores than the walk fills: faster tiles, yet the walk's
        # sharing over every core) or a single core's walk is simulated (its hit rates below the ceiling), the
        # walk and the block split bounded apart, each with its own cores, the smaller of the two; a schedule is
        # one or the other, so the larger of that and the common floor holds
        out = self._bound_split(p, chip, c, schedules, block=False)
        g = _geometry(p, c)
        apart = self._fewest_active(chip, g, schedules) < np.minimum(chip.cores, g["tiles"])
        if chip.cores == 1:  # where some walk setting falls below the ceiling on every best pair
            a_panel, b_panel = g["tm"] * g["kc"] * p.in_bytes, g["tn"] * g["kc"] * p.in_bytes
            walks = [schedules[k] for k in ("swizzle_offset", "swizzle_direction", "serpentine")]
            cap = chip["l2_bytes"] * chip["l2_usable_fraction"]
            fa, fb = serial_hit_ceiling(
                g["gm"], g["gn"], g["splits"], p.batch, a_panel, b_panel, cap, *walks, front=True
            )
            apart |= ~((fa == 1.0 - 1.0 / g["gn"]) & (fb == 1.0 - 1.0 / g["gm"])).any(axis=0)
            # with residency, where the walks' B-panel reuse differs (a 2-D grid): each with its own hit rates
            first, inv = group_rows([g["gm"], g["gn"]])
            reuse = serial_b_reuse(g["gm"][first], g["gn"][first], *walks)
            apart |= (c["weight_resident"] == 1) & (reuse.min(axis=0) < reuse.max(axis=0))[inv]
        else:  # where a walk's full rounds overflow L2 (round_hit_front) and are many (where it pays)
            a_panel, b_panel = g["tm"] * g["kc"] * p.in_bytes, g["tn"] * g["kc"] * p.in_bytes
            cap = chip["l2_bytes"] * chip["l2_usable_fraction"]
            many = g["tiles"] > ROUND_TILES * chip.cores
            apart |= many & rounds_overflow(g["tiles"], chip.cores, a_panel, b_panel, cap)
        rows = np.flatnonzero(apart)
        if rows.size:
            sub = {k: v[rows] for k, v in c.items()}
            walk = self._bound_split(p, chip, sub, {**schedules, "core_split": (0,)}, block=False)
            block = self._bound_split(p, chip, sub, {**schedules, "core_split": (1,)}, block=True)
            out[rows] = np.maximum(out[rows], np.minimum(walk, block))
        return out

    def _bound_split(
        self, p: Matmul, chip, c: dict, schedules: dict, block: bool, hits: tuple | None = None
    ) -> np.ndarray:
        """bound() over the schedules of `schedules`; `block`: they are all the block split, whose cores used
        (block_grid's um * un per slice, the cores loading at once) share all the work: the busiest core runs at
        least their mean (no re-cut there).

        L2 hit rates: at their ceiling (each panel misses once), except where every schedule of the kind has
        them in closed form: the block split's are estimate()'s exactly (B once per panel, A once or once per
        block column); a walk of one tile a round (one core): the smallest bound over the (A, B) hit rates of the
        walk settings no other setting beats on both (schedule.serial_hit_ceiling's front: the simulation's own
        counts in closed form, for every row at once), with weight residency the front over (A hits, B hits, B
        reuse) of each setting (schedule.serial_b_reuse); several tiles a round whose panels overflow L2: the
        corners of schedule.round_hit_front. Every walk is at or below one of them (`hits`: one such pair, or
        triple, per row)."""
        g = _geometry(p, c)
        cores = chip.cores
        hit_a = 1.0 - 1.0 / g["gn"]
        hit_b = 1.0 - 1.0 / g["gm"]
        cap = chip["l2_bytes"] * chip["l2_usable_fraction"]
        a_panel, b_panel = g["tm"] * g["kc"] * p.in_bytes, g["tn"] * g["kc"] * p.in_bytes
        if block:
            gm, gn, sk = (np.asarray(g[k], dtype=np.int64) for k in ("gm", "gn", "splits"))
            _, un, _, bn_t = block_grid(gm, gn, sk, cores)
            fits = gm * a_panel + un * b_panel <= cap
            hit_a = 1.0 - np.where(fits, 1.0, bn_t) / g["gn"]
        elif hits is None and not self._split_allowed(schedules, 1):
            return self._bound_walks(p, chip, c, schedules, g, (hit_a, hit_b))
        if hits is not None:
            hit_a, hit_b = hits[:2]
        active = self._fewest_active(chip, g, schedules)
        res = c["weight_resident"] == 1
        counts = np.stack(_type_counts(g, p.batch), axis=1)  # (n, 4)
        # residency saves a B load only on tiles whose core just ran the same panel: at most `reuse_max`
        reuse_max = self._reuse_max(p, chip, c, schedules, g, hits)
        # the tile types present (type 0 always: it gives the fill) side by side; with residency also each type
        # with its B panel loaded
        types = np.flatnonzero((counts > 0).any(axis=0) | (np.arange(4) == 0))
        counts = counts[:, types]
        ms, ns = (np.stack(x, axis=1)[:, types] for x in _sizes(g))
        col = {k: v[:, None] for k, v in c.items()}
        hit = (hit_a[:, None], hit_b[:, None])
        cost = tile_cost(p, chip, col, ms, ns, g["kc"][:, None], *hit, res[:, None], active[:, None])
        busy = cost["busy"]
        work = (counts * busy).sum(axis=1)
        cheapest = np.where(counts > 0, busy, np.inf).min(axis=1)
        fill0 = cost["fill"][:, 0]
        if res.any():
            r = np.flatnonzero(res)
            loaded = tile_cost(
                p,
                chip,
                {k: v[r] for k, v in col.items()},
                ms[r],
                ns[r],
                g["kc"][r, None],
                hit[0][r],
                hit[1][r],
                False,
                active[r, None],
            )["busy"]
            work[r] += _load_floor(counts[r], np.maximum(loaded - busy[r], 0.0), reuse_max[r])
        # cores that can share the work: every core in full rounds; in a partial last round only the tiles
        # there, each re-cut into at most cores // last pieces (tail_split) of at least 16 rows/columns
        last, pieces = _tail(g, cores)
        if tuple(schedules.get("tail_split", (0, 1))) == (0,):
            pieces = np.ones_like(pieces)
        sharing = np.where(last > 0, np.minimum(cores, (g["tiles"] - last) + last * pieces), cores)
        if block:
            sharing = active
        make = np.maximum(work / sharing, (g["tiles"] // cores) * cheapest)
        return (make + fill0) * 1e6 + _head_us(chip, active) + _reduction_us(p, chip, c)

    def _bound_walks(self, p: Matmul, chip, c: dict, schedules: dict, g: dict, ceiling: tuple) -> np.ndarray:
        """_bound_split over walk schedules only (no block split allowed), where the hit rates of every walk are
        known in closed form: the smallest bound over the front of (A hits, B hits[, B reuse]) of the walk
        settings (one core: schedule.serial_hit_ceiling, with residency serial_b_reuse; several: the corners of
        schedule.round_hit_front), else at the `ceiling` hit pair."""
        cores, block = chip.cores, False
        cap = chip["l2_bytes"] * chip["l2_usable_fraction"]
        a_panel, b_panel = g["tm"] * g["kc"] * p.in_bytes, g["tn"] * g["kc"] * p.in_bytes
        walks = [schedules[k] for k in ("swizzle_offset", "swizzle_direction", "serpentine")]
        grid = (g["gm"], g["gn"], g["splits"], p.batch)
        res = c["weight_resident"] == 1
        if cores == 1 and res.any():
            # one walk gives both its hit rates and its B-panel reuse (weight residency's saved loads): the
            # front over (A hits, B hits, reuse) of every setting, not the best of each from different walks
            # once per distinct (grid, panel bytes, residency): the front depends on nothing else
            a_bits, b_bits = (np.asarray(x, dtype=np.float64).view(np.int64) for x in (a_panel, b_panel))
            first, inv = group_rows([g["gm"], g["gn"], g["splits"], a_bits, b_bits, res])
            one = tuple(x[first] for x in (g["gm"], g["gn"], g["splits"], a_panel, b_panel))
            every = serial_hit_ceiling(*one[:3], p.batch, *one[3:], cap, *walks, every=True)
            reuse = serial_b_reuse(*one[:2], *walks) * (one[2] * p.batch * res[first])
            front = tuple(f[:, inv] for f in front_rows(*every, reuse.astype(np.float64)))
        elif cores == 1:
            front = serial_hit_ceiling(*grid, a_panel, b_panel, cap, *walks, front=True)
        else:
            front = round_hit_front(*grid, cores, a_panel, b_panel, cap, *walks[:2], ROUND_TILES)
        if front is None:
            return self._bound_split(p, chip, c, schedules, block, ceiling)
        out = self._bound_split(p, chip, c, schedules, block, tuple(f[0] for f in front))
        # the further pairs, only on rows with another pair there, stacked into few calls of BOUND_ROWS rows
        pair, rows = np.nonzero(np.logical_or.reduce([f[1:] != f[0] for f in front]))
        for lo in range(0, rows.size, BOUND_ROWS):
            k, r = pair[lo : lo + BOUND_ROWS] + 1, rows[lo : lo + BOUND_ROWS]
            sub = {key: v[r] for key, v in c.items()}
            more = self._bound_split(p, chip, sub, schedules, block, tuple(f[k, r] for f in front))
            np.minimum.at(out, r, more)
        # a walk's own hit rates and reuse can make this its exact time but for the float order of the
        # sums: a relative hair below, so that rounding never lifts it above
        return out * (1.0 - 1e-12)

    def _reuse_max(self, p: Matmul, chip, c: dict, schedules: dict, g: dict, hits) -> np.ndarray:
        """The most tiles on which weight residency saves a B-panel load (their core just ran the same panel), per
        row: one walk setting's own reuse when `hits` carries it, else the most over the allowed walks (exact, or a
        closed-form ceiling on large grids of several cores) and the block split."""
        cores = chip.cores
        res = c["weight_resident"] == 1
        reuse_max = np.zeros(len(c["base_m"]))
        if hits is not None and len(hits) > 2:  # one walk setting's own reuse (serial_b_reuse)
            reuse_max = np.asarray(hits[2], dtype=np.float64)
        elif res.any():
            # the most over the allowed walks (one core: serial_b_reuse, exact; several: max_b_reuse, exact, on
            # grids up to REUSE_EXACT tiles, b_reuse_ceiling's closed-form ceiling beyond) and the block split,
            # once per distinct grid
            rows = np.flatnonzero(res)
            first, inv = group_rows([g[k][rows] for k in ("gm", "gn", "splits")])
            gm, gn, sk = (g[k][rows][first].astype(np.int64) for k in ("gm", "gn", "splits"))
            best = np.zeros(first.size, dtype=np.int64)
            if self._split_allowed(schedules, 0):
                walks = tuple(
                    tuple(schedules[k]) for k in ("swizzle_offset", "swizzle_direction", "serpentine")
                )
                if cores == 1:  # a core's previous tile is the walk's previous one
                    best = serial_b_reuse(gm, gn, *walks).max(axis=0) * sk * p.batch
                else:
                    best = b_reuse_ceiling(gm, gn, cores, *walks).max(axis=0) * sk * p.batch
                    small = np.flatnonzero(gm * gn * sk * p.batch <= REUSE_EXACT)
                    best[small] = [
                        max_b_reuse(int(gm[i]), int(gn[i]), int(sk[i]), p.batch, cores, *walks) for i in small
                    ]
            if self._block_allowed(schedules):  # the block split reuses all but each block column's first
                um = block_grid(gm, gn, sk, cores)[0]
                best = np.maximum(best, p.batch * sk * gn * (gm - um))
            reuse_max[rows] = best[inv]
        return reuse_max
