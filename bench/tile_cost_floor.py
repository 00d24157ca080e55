"""What a proven 910B3 search must compute, and what that costs per shape (issue 15's sweep and estimate targets).

    python -m bench.tile_cost_floor [--shapes 200] [--chip ascend910b3] [--seed 0] [--random-rows 20000]
                                     [--profile N] [--gaps 0.01,0.03,0.1]

Runs the sweep bench's seeded random shapes (bench/sweep_rate.py's CSV: M, N, K log-uniform in 1..16384, fp16) one
by one through the exhaustive search (top 1, as `tiler sweep` asks) in this process, and counts per shape:

* the rows each model call received (masks, dominated, resolve, quick_bound, bound, estimate) and its time, with
  a least-squares split of each call's time into a part per call and a part per row (the part per call is what
  running several shapes' searches in one model call could save; the estimate's includes the first simulation
  of each new schedule grid);
* the tile-cost elements (`tile_cost` evaluations: one tile type of one tiling at one L2 hit rate, core count and
  B residency), which every bound and estimate is built on, and their time;
* the tilings whose floor (max of quick_bound and bound) is at or below the shape's optimum: any proven search
  with these bounds must score them.

`--random-rows N`: the estimate on N random feasible rows of each of estimate_rate.py's 10 shapes (the estimate-rate
figure's case), with tile_cost's share. `--profile N`: a cProfile of the searches, N functions by cumulative time.

With numba installed (not a dependency of tiler; `pip install numba`), it also times a scalar transcription of
`tile_cost` compiled by numba on the very inputs the searches passed, and checks that it gives the same bits. The
transcription (below) is a measuring device, not used by tiler: it answers "what would a compiled model core
save", the step issue 15 allows once numpy is measured short.

It prints the floor: tile-cost elements per shape times the time per element (numpy, and compiled), against the
10 ms per shape that 100 shapes/s allows.

`--gaps 0.01,0.03,0.1`: the same shapes again (no counting) with a relative optimality gap, as MIP solvers offer: a
row or prefix is cut once its bound exceeds incumbent / (1 + gap) (the search's incumbent scaled for the run:
`proven._incumbent` wrapped), so the result is proven within that gap instead of exact. Printed per gap: time per
shape against the exact search in the same run, rows scored, and how far the found times are from the exact ones.
It measures how much of the search's work is spent separating near-ties. A bench reports; it asserts nothing.
"""

from __future__ import annotations

import os

for _v in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS", "NUMEXPR_NUM_THREADS"):
    os.environ[_v] = "1"

import argparse  # noqa: E402
import statistics  # noqa: E402
import sys  # noqa: E402
import tempfile  # noqa: E402
import time  # noqa: E402
from pathlib import Path  # noqa: E402

import numpy as np  # noqa: E402

BUDGET_MS = 10.0  # 100 shapes/s at --jobs 1
CALLS = ("masks", "dominated", "resolve", "quick_bound", "bound", "estimate")
# tile_cost's outputs, in the order the compiled kernel writes them
OUTPUTS = tuple("busy fill drain mac scalar mte1 mte2 fixpipe mte2_bw l2_read hbm_read".split())


class Census:
    """Wraps the Ascend matmul model's calls, tile_cost and _tile_costs, counting rows, elements (by the model call
    they serve) and time; `close()` restores them."""

    def __init__(self, keep_inputs: int = 0):
        from tiler.ops.matmul import ascend

        self.ascend = ascend
        self.rows = dict.fromkeys(CALLS, 0)
        self.secs = dict.fromkeys(CALLS, 0.0)
        self.each: dict[str, list[tuple[int, float]]] = {name: [] for name in CALLS}  # (rows, s) per call
        self.elements, self.tile_secs, self.tile_calls = 0, 0.0, 0
        self.elements_of = dict.fromkeys(CALLS, 0)  # tile_cost elements by the model call they serve
        self.cost_rows = self.cost_tilings = 0  # the estimate's distinct tile-cost rows, and their tilings
        self.lower: list[np.ndarray] = []  # this shape's branch-and-bound floors, max(quick_bound, bound)
        self.needed = (
            0  # tilings whose floor is at or below their shape's optimum: a proven search scores them
        )
        self.inputs: list = []  # the first `keep_inputs` tile_cost calls' arguments and outputs
        self.keep = keep_inputs
        self._stack: list[str] = []
        self._saved = {name: getattr(ascend.MatmulAscend, name) for name in CALLS}
        self._tile_cost, self._tile_costs = ascend.tile_cost, ascend._tile_costs
        for name in CALLS:
            setattr(ascend.MatmulAscend, name, self._wrap(name, self._saved[name]))
        self._patch(self._tile, self._costs)

    def _patch(self, tile, costs) -> None:
        """tile_cost in every module of the model that calls it (the operator, its bounds, its tables), and
        _tile_costs where the estimate calls it."""
        from tiler.ops.matmul import ascend_bounds, ascend_tables

        for module in (self.ascend, ascend_bounds, ascend_tables):
            module.tile_cost = tile
        self.ascend._tile_costs = costs

    def _wrap(self, name, fn):
        def call(model, p, chip, c, *args, **kw):
            self._stack.append(name)
            t = time.perf_counter()
            try:
                out = fn(model, p, chip, c, *args, **kw)
            finally:
                self._stack.pop()
            secs = time.perf_counter() - t
            rows = int(np.size(next(iter(c.values())))) if c else 0
            self.secs[name] += secs
            self.rows[name] += rows
            self.each[name].append((rows, secs))
            if name == "bound":  # the search's floor of these rows (its quick bound recomputed, not counted)
                self.lower.append(np.maximum(self._saved["quick_bound"](model, p, chip, c), out))
            return out

        return call

    def _tile(self, p, chip, c, mt, nt, kc, hit_a, hit_b, b_resident, active):
        t = time.perf_counter()
        out = self._tile_cost(p, chip, c, mt, nt, kc, hit_a, hit_b, b_resident, active)
        self.tile_secs += time.perf_counter() - t
        self.elements += out["busy"].size
        if self._stack:
            self.elements_of[self._stack[-1]] += out["busy"].size
        self.tile_calls += 1
        if len(self.inputs) < self.keep:
            self.inputs.append((p, chip, c, mt, nt, kc, hit_a, hit_b, b_resident, active, out))
        return out

    def _costs(self, p, chip, c, at_c, *args):
        from tiler.model.common import group_rows_any

        self.cost_rows += at_c.size
        self.cost_tilings += group_rows_any([c[k][at_c] for k in self.ascend._TILE_KNOBS if k in c])[0].size
        return self._tile_costs(p, chip, c, at_c, *args)

    def shape_done(self, optimum: float) -> None:
        """Count this shape's tilings whose floor is at or below its optimum, and start the next shape."""
        self.needed += sum(int((lb <= optimum).sum()) for lb in self.lower)
        self.lower = []

    def close(self) -> None:
        for name, fn in self._saved.items():
            setattr(self.ascend.MatmulAscend, name, fn)
        self._patch(self._tile_cost, self._tile_costs)


# ----------------------------------------------------------------------------------- the compiled transcription
def _compiled():
    """tile_cost as one scalar loop per element, compiled by numba (None without numba). Every expression is
    tile_cost's, in its order and dtypes (float64 sizes, integer knobs), so the results match bit for bit."""
    try:
        import numba
    except ImportError:
        return None

    @numba.njit(cache=False)
    def seg_eff(x):
        seg = max(float(x), 1.0)
        return seg / (np.ceil(seg / 32) * 32 + 32)

    @numba.njit(cache=False)
    def b_elems(nz, bt, k0, nt, k):
        if not nz:
            return nt * k
        if bt:
            return (np.ceil(nt / 16) * 16) * (np.ceil(k / k0) * k0)
        return (np.ceil(nt / k0) * k0) * (np.ceil(k / 16) * 16)

    @numba.njit(cache=False)
    def kernel(sc, flags, knobs, mt, nt, kc, hit_a, hit_b, bres, active, out):
        f, b, ob, k0, hbm, l2, core_gm, lat, mac_cycle = (
            sc[0],
            sc[1],
            sc[2],
            sc[3],
            sc[4],
            sc[5],
            sc[6],
            sc[7],
            sc[8],
        )
        l1a, l1b, sync, fixbw, l0c, spi, spl, stride_a, stride_b = (
            sc[9], sc[10], sc[11], sc[12], sc[13], sc[14], sc[15], sc[16], sc[17],
        )  # fmt: skip
        at, bt, nz = flags[0], flags[1], flags[2]
        cols, rows = mt.shape
        for j in range(cols):
            for i in range(rows):
                bm, bn, bk = knobs[0, i], knobs[1, i], knobs[2, i]
                ska, skb, wres, ml_k = knobs[3, i], knobs[4, i], knobs[5, i], knobs[6, i]
                stages, io, ppk, pre, split_k = (
                    knobs[7, i],
                    knobs[8, i],
                    knobs[9, i],
                    knobs[10, i],
                    knobs[11, i],
                )
                step_m, step_n = knobs[12, i], knobs[13, i]
                m, n, k = mt[j, i], nt[j, i], kc[i]
                br, act = bres[j, i], active[j, i]
                nbm, nbn = np.ceil(m / bm), np.ceil(n / bn)
                nk = np.ceil(k / bk)
                ka, kb = min(bk * ska, k), min(bk * skb, k)
                wr = wres == 1
                res_a = ka >= k
                res_b = (kb >= k) or wr
                pass_a = 1.0 if res_a else nbn
                pass_b = 1.0 if res_b else nbm
                a_first = m * k * b
                a_bytes = a_first * pass_a
                b_first = 0.0 if br else b_elems(nz, bt, k0, n, k) * b
                b_bytes = b_first * pass_b
                hbm_share, l2_share = hbm / act, l2 / act
                ml = ml_k == 1
                if at:
                    seg_a = min(m, bm * step_m if ml else bm)
                else:
                    seg_a = ka if ml else bk
                if bt:
                    seg_b = kb if ml else bk
                else:
                    seg_b = min(n, bn * step_n if ml else bn)
                eff_a = stride_a * seg_eff(seg_a * b)
                eff_b = 1.0 if nz else stride_b * seg_eff(seg_b * b)
                ha = (a_first * hit_a[i] + (a_bytes - a_first)) / max(a_bytes, 1) if a_bytes > 0 else 1.0
                hb = (b_first * hit_b[i] + (b_bytes - b_first)) / max(b_bytes, 1) if b_bytes > 0 else 1.0
                bw_a = min(core_gm, 1.0 / (ha / l2_share + (1.0 - ha) / hbm_share)) * eff_a
                bw_b = min(core_gm, 1.0 / (hb / l2_share + (1.0 - hb) / hbm_share)) * eff_b
                t_a, t_b = a_bytes / bw_a, b_bytes / bw_b
                chunks_a = np.ceil(k / ka) * pass_a
                chunks_b = 0.0 if br else np.ceil(k / kb) * pass_b
                pca = 1.0 if ml else nbm * np.ceil(ka / bk)
                pcb = 1.0 if ml else nbn * np.ceil(kb / bk)
                xfers = chunks_a * pca + chunks_b * pcb
                t_ab = t_a + t_b
                t_mte2 = max(t_ab, (xfers * lat + t_a + t_b) / stages)
                m16, n16 = np.ceil(m / 16), np.ceil(n / 16)
                mt16, nt16, kcp = m16 * 16, n16 * 16, np.ceil(k / k0) * k0
                one_k = nk == 1
                a_l0 = mt16 * kcp * b * (1.0 if (one_k and io == 1) else nbn)
                b_l0 = nt16 * kcp * b * (1.0 if (one_k and io == 0) else nbm)
                t_mte1 = (a_l0 / l1a + b_l0 / l1b) / f
                mmads = nbm * nbn * nk
                small = (bm // 16) * (bn // 16) < 10
                mn16 = m16 * n16
                t_mac = (mn16 * (kcp // k0) * mac_cycle + (mmads * sync if small else 0.0)) / f
                t_fix = m * n * (8.0 if split_k > 1 else ob) / min(fixbw * f, hbm_share)
                l0c_db = bm * bn * 4 * 2 <= l0c
                blocks = nbm * nbn
                instr = mmads * 3 + xfers + blocks
                loops = mmads + chunks_a + chunks_b
                t_scalar = (instr * spi + loops * spl) / f
                pp = ppk == 1
                steps = max(mmads, 1.0)
                inner = max(t_mte1, t_mac) + min(t_mte1, t_mac) / steps if pp else t_mte1 + t_mac
                t_comp = inner + (t_fix / max(blocks, 1.0) if l0c_db else t_fix)
                t_gm = t_mte2 + t_fix
                k_first = min(min(ka, kb), k)
                l_chunk = (
                    m * ka * b / bw_a
                    + (0.0 if br else b_elems(nz, bt, k0, n, kb) * b / bw_b)
                    + (pca + (0.0 if br else pcb)) * lat / stages
                )
                step_mac = mn16 * (bk / k0) * mac_cycle / f
                step_mte1 = (mt16 * bk * b / l1a + nt16 * bk * b / l1b) / f
                step = max(step_mac, step_mte1) if pp else step_mac + step_mte1
                c_chunk = np.ceil(k_first / bk) * step
                slowest = max(max(max(t_mte2, t_comp), t_scalar), t_gm)
                hidden = min(l_chunk, c_chunk) if pre >= 1 else 0.0
                piped = slowest + min(l_chunk, c_chunk) - hidden
                serial = max(t_mte2 + t_comp, max(t_scalar, t_gm))
                two = stages >= 2
                out[0, j, i] = piped if two else serial
                out[1, j, i] = l_chunk if two else 0.0
                out[2, j, i] = hidden
                out[3, j, i] = t_mac
                out[4, j, i] = t_scalar
                out[5, j, i] = t_mte1
                out[6, j, i] = t_mte2
                out[7, j, i] = t_fix
                out[8, j, i] = t_ab
                out[9, j, i] = a_bytes + b_bytes
                out[10, j, i] = a_first * (1 - hit_a[i]) + b_first * (1 - hit_b[i])

    return kernel


KNOB_ORDER = (
    "base_m", "base_n", "base_k", "step_ka", "step_kb", "weight_resident", "multi_load", "l1_stages",
    "iterate_order", "l0_pingpong", "preload", "split_k", "step_m", "step_n",
)  # fmt: skip


def kernel_args(ascend, p, chip, c, mt, nt, kc, hit_a, hit_b, b_resident, active):
    """The compiled kernel's arguments for one tile_cost call, every array as (columns, rows)."""
    r = ascend._chip_rates(p, chip)
    mt = np.asarray(mt, dtype=np.float64)
    if mt.ndim == 1:
        mt = mt[None, :]
    cols, rows = mt.shape
    nt = np.broadcast_to(np.asarray(nt, dtype=np.float64), (cols, rows))
    burst, mis = chip["gm_burst_bytes"], chip["gm_misaligned_efficiency"]
    stride_a, stride_b = (ascend._stride_scalar(s, burst, mis) for s in ascend._row_strides(p))
    sc = np.array(
        [
            r["f"], p.in_bytes, p.out_bytes, ascend._k0(p), r["hbm"], r["l2"], r["core_gm"], r["lat"], r["mac_cycle"],
            chip["l1_to_l0a_bytes_per_cycle"], chip["l1_to_l0b_bytes_per_cycle"], chip["sync_cycles"],
            chip["fixpipe_bytes_per_cycle"], chip["l0c_bytes"], chip["scalar_cycles_per_instr"],
            chip["scalar_cycles_per_loop"], stride_a, stride_b,
        ],
        dtype=np.float64,
    )  # fmt: skip
    flags = np.array([p.a_transposed, p.b_transposed, p.b_nz], dtype=np.bool_)
    knobs = np.stack([np.broadcast_to(np.asarray(c[k]).reshape(-1), (rows,)) for k in KNOB_ORDER]).astype(
        np.int64
    )
    per_row = (
        np.broadcast_to(np.asarray(x, dtype=np.float64).reshape(-1), (rows,)) for x in (kc, hit_a, hit_b)
    )
    kc, hit_a, hit_b = (np.ascontiguousarray(x) for x in per_row)
    bres = np.ascontiguousarray(np.broadcast_to(np.asarray(b_resident, dtype=np.bool_), (cols, rows)))
    act = np.ascontiguousarray(np.broadcast_to(np.asarray(active, dtype=np.float64), (cols, rows)))
    out = np.empty((len(OUTPUTS), cols, rows))
    return (
        sc,
        flags,
        knobs,
        np.ascontiguousarray(mt),
        np.ascontiguousarray(nt),
        kc,
        hit_a,
        hit_b,
        bres,
        act,
        out,
    )


def _rows_layout(call) -> bool:
    """Whether a captured call is in the (columns, rows) layout the kernel takes (the fast estimate's
    tile_cost calls); bound() and estimate_reference pass (rows, columns), which the kernel would read
    transposed."""
    p, chip, c, mt = call[:4]
    return (
        np.ndim(mt) == 2
        and np.ndim(next(iter(c.values()))) == 1
        and np.shape(mt)[1] == np.size(next(iter(c.values())))
    )


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--shapes", type=int, default=200)
    ap.add_argument("--chip", default="ascend910b3")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--keep", type=int, default=400, help="tile_cost calls kept for the compiled comparison")
    ap.add_argument("--gaps", default="", help="relative optimality gaps to time, e.g. 0.01,0.03,0.1")
    ap.add_argument("--random-rows", type=int, default=20000, help="random feasible rows per shape (0: skip)")
    ap.add_argument("--profile", type=int, default=0, help="cProfile the searches, print this many functions")
    args = ap.parse_args(argv)

    import pandas as pd

    from bench.sweep_rate import write_csv
    from tiler.hardware import load_chip
    from tiler.model.schedule import clear_caches
    from tiler.problem import parse_problem
    from tiler.search import search
    from tiler.space import load_space

    chip = load_chip(args.chip)
    space = load_space("matmul", chip.family)
    with tempfile.TemporaryDirectory() as tmp:
        csv = Path(tmp) / "shapes.csv"
        write_csv(csv, args.shapes, args.seed)
        frame = pd.read_csv(csv)
    problems = [
        parse_problem("matmul", {"M": int(r.M), "N": int(r.N), "K": int(r.K)}, dtype="fp16")
        for r in frame.itertuples()
    ]
    search(parse_problem("matmul", {"M": 64, "N": 64, "K": 64}), chip, space)  # warm the imports
    clear_caches()
    census = Census(args.keep)
    scored = bounded = 0
    t0 = time.perf_counter()
    try:
        for p in problems:
            res = search(p, chip, space, top=1)
            scored, bounded = scored + res.evaluated, bounded + res.bounded
            census.shape_done(float(res.est["time_us"][0]))
    finally:
        census.close()
    wall = time.perf_counter() - t0
    n = len(problems)
    per = wall / n * 1e3
    print(
        f"{args.chip}: {n} random shapes (seed {args.seed}), exhaustive top 1, one by one: {per:.1f} ms per shape "
        f"({1e3 / per:.1f} shapes/s with the counting on), load {os.getloadavg()[0]:.1f}"
    )
    print(
        f"  {'call':12} {'rows/shape':>11} {'ms/shape':>9} {'us/row':>7} {'calls/shape':>12}"
        "   least-squares fit over the calls: ms per call + us per row -> ms per shape fixed + per row"
    )
    for name in CALLS:
        rows, secs = census.rows[name] / n, census.secs[name] / n * 1e3
        each = np.array(census.each[name], dtype=np.float64)
        calls = each.shape[0] / n
        fixed, per_row = np.linalg.lstsq(np.c_[np.ones(len(each)), each[:, 0]], each[:, 1], rcond=None)[0]
        print(
            f"  {name:12} {rows:11,.0f} {secs:9.2f} {secs * 1e3 / max(rows, 1):7.3f} {calls:12.1f}"
            f"   {fixed * 1e3:6.3f} ms + {per_row * 1e6:6.3f} us -> {calls * fixed * 1e3:6.2f} + "
            f"{rows * per_row * 1e3:6.2f} ms"
        )
    print(
        f"  scored rows (tiling x schedule) per shape {scored / n:,.0f}, of {census.cost_tilings / n:,.0f} tilings; "
        f"tilings bounded per shape {bounded / n:,.0f}, of which {census.needed / n:,.0f} have a floor at or below "
        "the optimum (every proven search with these bounds scores them)"
    )
    ns_numpy = census.tile_secs / max(census.elements, 1) * 1e9
    el = census.elements / n
    print(
        f"  tile_cost elements per shape: bound {census.elements_of['bound'] / n:,.0f} "
        f"({census.elements_of['bound'] / max(census.rows['bound'], 1):.2f} per tiling bounded), estimate "
        f"{census.elements_of['estimate'] / n:,.0f} (on {census.cost_rows / n:,.0f} distinct tile-cost rows of "
        f"{census.cost_tilings / n:,.0f} distinct tilings per shape: each L2 hit rate is a row of its own)"
    )
    print(
        f"  tile_cost: {el:,.0f} elements per shape in {census.tile_calls / n:.1f} calls, "
        f"{census.tile_secs / n * 1e3:.2f} ms per shape ({ns_numpy:.0f} ns per element, numpy)"
    )
    print(
        f"  floor from tile_cost alone, numpy: {el * ns_numpy / 1e6:.2f} ms per shape against the {BUDGET_MS:.0f} ms "
        f"that 100 shapes/s allows ({el * ns_numpy / 1e6 / BUDGET_MS:.2f} of it)"
    )
    if args.random_rows:
        _random_rows(chip, space, args.random_rows)
    if args.profile:
        _profile(problems, chip, space, args.profile)
    if args.gaps:
        _gaps(problems, chip, space, [float(g) for g in args.gaps.split(",")])
    kernel = _compiled()
    if kernel is None:
        print("  compiled comparison: numba is not installed (pip install numba), skipped")
        return 0
    calls = [call for call in census.inputs if _rows_layout(call)]
    prepared = [kernel_args(census.ascend, *call[:10]) for call in calls]
    kernel(*prepared[0])  # compile outside the timing
    same = 0
    for call, kargs in zip(calls, prepared, strict=True):
        kernel(*kargs)
        ref = call[10]
        out = kargs[-1]
        same += all(
            np.array_equal(np.asarray(ref[k], dtype=np.float64), out[j]) for j, k in enumerate(OUTPUTS)
        )
    elements = sum(a[3].size for a in prepared)

    def numpy_pass():
        for call in calls:
            census.ascend.tile_cost(*call[:10])

    def kernel_pass():
        for kargs in prepared:
            kernel(*kargs)

    t_np = statistics.median(_timed(numpy_pass) for _ in range(5))
    t_jit = statistics.median(_timed(kernel_pass) for _ in range(5))
    ns_np, ns_jit = t_np / elements * 1e9, t_jit / elements * 1e9
    print(
        f"  compiled comparison on {len(calls)} captured estimate calls ({elements:,} elements; bit-identical on "
        f"{same} of {len(calls)} calls, all 11 outputs): numpy {ns_np:.0f} ns, numba {ns_jit:.0f} ns per element "
        f"({ns_np / ns_jit:.2f}x)"
    )
    print(
        f"  floor from tile_cost alone, compiled: {el * ns_jit / 1e6:.2f} ms per shape "
        f"({el * ns_jit / 1e6 / BUDGET_MS:.2f} of the budget); the rest of the search, "
        f"{per - census.tile_secs / n * 1e3:.1f} ms per shape, is not in tile_cost"
    )
    return 0


def _random_rows(chip, space, rows: int) -> None:
    """The estimate on `rows` random feasible rows of each of estimate_rate.py's 10 shapes (nearly every row its
    own tiling: the estimate-rate figure's case): tile_cost elements per row and their share of the time."""
    from bench.estimate_rate import SHAPES, feasible_table
    from tiler.operator import get_operator
    from tiler.problem import parse_problem

    model = get_operator("matmul", chip.family)
    tables = []
    for i, (_, m, n, k) in enumerate(SHAPES):
        p = parse_problem("matmul", {"M": m, "N": n, "K": k}, dtype="fp16")
        tables.append((p, feasible_table(p, chip, space, model, rows, seed=i)))
    for p, c in tables:  # warm: the estimate-rate bench times warm calls too
        model.estimate(p, chip, c)
    census = Census()
    try:
        for p, c in tables:
            model.estimate(p, chip, c)
    finally:
        census.close()
    total = census.rows["estimate"]
    per_row = census.secs["estimate"] / total * 1e9
    tile = census.tile_secs / total * 1e9
    print(
        f"  estimate on {total:,} random feasible rows ({len(tables)} shapes): {per_row:.0f} ns per row "
        f"({1e3 / per_row:.2f} M rows/s), of which tile_cost {tile:.0f} ns ({census.elements / total:.2f} "
        f"elements per row, {census.tile_secs / max(census.elements, 1) * 1e9:.0f} ns each); 2 M/s allows 500 ns"
    )


def _profile(problems, chip, space, lines: int) -> None:
    """cProfile of the searches (cold schedule caches): the functions with the most cumulative time."""
    import cProfile
    import pstats

    from tiler.model.schedule import clear_caches
    from tiler.search import search

    clear_caches()
    prof = cProfile.Profile()
    prof.enable()
    for p in problems:
        search(p, chip, space, top=1)
    prof.disable()
    print(f"  cProfile of the {len(problems)} searches, by cumulative time:")
    pstats.Stats(prof, stream=sys.stdout).sort_stats("cumulative").print_stats(lines)


def _gaps(problems, chip, space, gaps: list[float], rounds: int = 3) -> None:
    """Each gap's search time (median of `rounds` rounds, the gaps interleaved in each: this machine's speed
    drifts by 10-30 % within minutes), rows scored and distance from the exact times; gap 0 is the exact search."""
    from tiler.model.schedule import clear_caches
    from tiler.search import proven, search

    exact_incumbent = proven._incumbent
    gaps = [0.0, *gaps]
    secs: dict[float, list[float]] = {g: [] for g in gaps}
    found: dict[float, list] = {}
    try:
        for _ in range(rounds):
            for gap in gaps:
                proven._incumbent = lambda best, top, g=gap: exact_incumbent(best, top) / (1.0 + g)
                clear_caches()
                t = time.perf_counter()
                found[gap] = [search(p, chip, space, top=1) for p in problems]
                secs[gap].append((time.perf_counter() - t) / len(problems) * 1e3)
    finally:
        proven._incumbent = exact_incumbent
    base = np.array([float(r.est["time_us"][0]) for r in found[0.0]])
    base_ms = statistics.median(secs[0.0])
    for gap in gaps:
        ms = statistics.median(secs[gap])
        times = np.array([float(r.est["time_us"][0]) for r in found[gap]])
        scored = statistics.mean(r.evaluated for r in found[gap])
        print(
            f"  gap {gap:5.3f}: {ms:6.1f} ms per shape (median of {rounds}; {base_ms / ms:.2f}x the exact search), "
            f"scored rows {scored:,.0f}, found time / exact: worst {np.max(times / base):.4f}, equal on "
            f"{np.mean(times == base):.1%} of shapes"
        )


def _timed(fn) -> float:
    t = time.perf_counter()
    fn()
    return time.perf_counter() - t


if __name__ == "__main__":
    sys.exit(main())
