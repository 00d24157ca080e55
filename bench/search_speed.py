"""Exhaustive (proven) search time, in one process, over 30 LLM GEMMs per chip; and a bound-free check.

    python -m bench.search_speed [--chips ascend910b3,ascend910b1,ascend310p3,h200] [--repeat 3]
                                  [--verify 3] [--layout nt] [--dtype fp16] [--per-shape]
                                  [--clock wall|cpu]

The 30 shapes are bench/target_cost.py's (each of three LLMs' four linear-layer GEMMs at M = 16 and 2048, plus six
more: M = 1 decode and 128 / 512 / 8192-token prefills), layout nt (x · Wᵀ) and fp16 by default. Per chip, each
shape is searched `--repeat` times in this process, the schedule caches cleared before each search (a cold start
for the model's caches, a warm interpreter: one search runs first to import everything); the shape's time is the
median of its repeats. Printed per chip: the median, 90th percentile and largest search time over the shapes, and
the medians of the candidates scored with the full model (`evaluated`), given the full per-tiling bound
(`bounded`), the feasible count the search enumerated, and how many first-level prefixes the prefix bound cut
before enumeration (the search's note). Issue 15's target: a median of at most 0.2 s on every chip.

Bound-free check (`--verify N` shapes per chip, spread over the list): every feasible tiling that the level-wise
enumeration yields (its rules, dominated twins and closed-form RESOLVED knobs as in the search, but no prefix
bound) is scored with every schedule setting, with no quick_bound, bound or prefix_bound; its best time must
equal the search's best (relative 1e-9). On the cuda family this is the whole space (15-20 thousand tilings x 12
launch orders); on Ascend it can be millions of candidates (seconds per shape). Exit code 1 when one differs.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]

from bench.target_cost import load_shapes  # noqa: E402
from tiler.hardware import load_chip  # noqa: E402
from tiler.model.schedule import clear_caches  # noqa: E402
from tiler.operator import get_operator  # noqa: E402
from tiler.problem import parse_problem  # noqa: E402
from tiler.search import enumerate_feasible, search  # noqa: E402
from tiler.space import length, load_space, product, take  # noqa: E402

CHIPS = ("ascend910b3", "ascend910b1", "ascend310p3", "h200")
CHUNK = 1 << 17  # candidates per estimate call in the bound-free run
TARGET_S = 0.2


def bound_free_best(p, chip, space, model) -> tuple[float, int]:
    """The best time over every enumerated tiling x every schedule, scored without any bound; and the count."""
    table, _, _ = enumerate_feasible(p, chip, space, model)
    names = [k for k in model.SCHEDULE_KNOBS if k in space.knobs]
    sched = space.product(names) if names else {}
    per = length(sched) if sched else 1
    best, scored = np.inf, 0
    step = max(1, CHUNK // per)
    for lo in range(0, length(table), step):
        rows = take(table, slice(lo, lo + step))
        full = product(rows, sched) if sched else rows
        t = model.estimate(p, chip, full)["time_us"]
        best, scored = min(best, float(np.min(t))), scored + length(full)
    return best, scored


def cut_prefixes(notes: list[str]) -> int:
    """How many first-level prefixes the search's prefix bound cut (from its note; 0 without one)."""
    for n in notes:
        if "first-level prefixes" in n:
            return int(n.split()[0])
    return 0


def run_chip(chip_id: str, shapes: list[dict], args) -> tuple[list[dict], int]:
    chip = load_chip(chip_id)
    space = load_space("matmul", chip.family)
    model = get_operator("matmul", chip.family)
    problems = [
        parse_problem("matmul", {"M": s["M"], "N": s["N"], "K": s["K"], "layout": args.layout}, args.dtype)
        for s in shapes
    ]
    search(problems[0], chip, space, top=1)  # warm the interpreter (imports, first numpy calls)
    clock = time.process_time if args.clock == "cpu" else time.perf_counter
    rows = []
    for s, p in zip(shapes, problems, strict=True):
        times = []
        for _ in range(args.repeat):
            clear_caches()
            t0 = clock()
            res = search(p, chip, space, top=1)
            times.append(clock() - t0)
        rows.append(
            {
                **s,
                "p": p,
                "s": statistics.median(times),
                "evaluated": res.evaluated,
                "bounded": res.bounded,
                "feasible": res.feasible,
                "cut": cut_prefixes(res.notes),
                "best_us": float(res.row(0)["time_us"]),
                "tiling": res.tiling(0),
            }
        )
    ts = np.array([r["s"] for r in rows])
    med = lambda k: int(statistics.median(r[k] for r in rows))  # noqa: E731
    print(
        f"{chip_id:12} ({chip.family}): search median {np.median(ts):.3f} s, p90 {np.percentile(ts, 90):.3f} s, "
        f"max {ts.max():.3f} s ({'meets' if np.median(ts) <= TARGET_S else 'misses'} the {TARGET_S} s target); "
        f"medians: evaluated {med('evaluated'):,}, bounded {med('bounded'):,}, feasible {med('feasible'):,}, "
        f"prefixes cut {med('cut'):,}"
    )
    if args.per_shape:
        for r in rows:
            print(
                f"    {r['model']:11} {r['layer']:13} "
                f"{r['M']:>5}x{r['N']:>6}x{r['K']:>6}  {r['s']:.3f} s  evaluated {r['evaluated']:>8,}  "
                f"bounded {r['bounded']:>7,}  feasible {r['feasible']:>9,}  cut {r['cut']:>4}  "
                f"best {r['best_us']:10.3f} us"
            )
    failures = 0
    if args.verify:
        pick = np.unique(np.linspace(0, len(rows) - 1, args.verify).round().astype(int))
        for i in pick:
            r = rows[int(i)]
            t0 = time.perf_counter()
            free, scored = bound_free_best(r["p"], chip, space, model)
            ok = abs(free - r["best_us"]) <= 1e-9 * free
            failures += not ok
            print(
                f"    bound-free check {r['M']}x{r['N']}x{r['K']}: search {r['best_us']:.6f} us, bound-free "
                f"{free:.6f} us over {scored:,} candidates ({time.perf_counter() - t0:.1f} s): "
                f"{'equal' if ok else 'DIFFERENT'}"
            )
    return rows, failures


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--chips", default=",".join(CHIPS))
    ap.add_argument("--repeat", type=int, default=3, help="searches per shape (the median is kept)")
    ap.add_argument("--verify", type=int, default=3, help="shapes per chip checked against a bound-free run")
    ap.add_argument("--layout", default="nt")
    ap.add_argument("--dtype", default="fp16")
    ap.add_argument(
        "--clock",
        choices=("wall", "cpu"),
        default="wall",
        help="time each search by the wall clock or by this process's CPU time (steadier on a shared machine)",
    )
    ap.add_argument("--per-shape", action="store_true", help="print every shape's figures")
    args = ap.parse_args()
    shapes = load_shapes(False)
    print(
        f"{len(shapes)} LLM GEMMs, {args.dtype}, layout={args.layout}; exhaustive search in one process, "
        f"median of {args.repeat} per shape (schedule caches cleared before each)"
    )
    t0 = time.perf_counter()
    failures = 0
    for chip_id in args.chips.split(","):
        failures += run_chip(chip_id.strip(), shapes, args)[1]
    print(f"elapsed {time.perf_counter() - t0:.1f} s; bound-free mismatches: {failures}")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
