"""Model throughput and exhaustive-search time, measured in one run (one process).

    python -m bench.model_throughput

Prints candidates/s for the full estimate and for the lower bound the search prunes with, the exhaustive
search wall time per shape from a cold start (the schedule caches cleared before each search; the issue's
target: 4096^3 on ascend910b3 under 5 s), and line counts per module.
"""

from __future__ import annotations

import time
from pathlib import Path

import numpy as np

from tiler.hardware import load_chip
from tiler.model.schedule import clear_caches
from tiler.model.schedule import work as schedule_work
from tiler.operator import get_operator
from tiler.problem import parse_problem
from tiler.search import enumerate_feasible, search
from tiler.space import load_space, product, take


def feasible_sample(p, chip, space, model, n, seed=0):
    rng = np.random.default_rng(seed)
    cand = {k: rng.choice(np.array(kn.values, dtype=np.int64), size=n * 4) for k, kn in space.knobs.items()}
    ok = np.logical_and.reduce(list(model.feasible(p, chip, cand).values()))
    return take(cand, np.nonzero(ok)[0][:n])


def rate(fn, n, repeat=3):
    best = np.inf
    for _ in range(repeat):
        t = time.perf_counter()
        fn()
        best = min(best, time.perf_counter() - t)
    return n / best, best


def main():
    chip = load_chip("ascend910b3")
    space = load_space("matmul", "ascend")
    model = get_operator("matmul", "ascend")
    p = parse_problem("matmul", {"M": 4096, "N": 4096, "K": 4096})
    print("== model throughput (ascend910b3, matmul 4096^3, one process) ==")
    # The workload the exhaustive search gives the model: inner tilings expanded by every schedule setting.
    table, _, _ = enumerate_feasible(p, chip, space, model)
    lb = model.bound(p, chip, table)
    rows = take(table, np.argsort(lb, kind="stable")[:2000])
    full = product(rows, space.product(list(model.SCHEDULE_KNOBS)))
    n = len(full["base_m"])
    clear_caches()
    r_cold, t_cold = rate(lambda: model.estimate(p, chip, full), n, repeat=1)
    sims = len(schedule_work._WORK)
    r_est, t_est = rate(lambda: model.estimate(p, chip, full), n)
    print(
        f"  search workload: {n:,} candidates (2,000 tilings x 40 schedules): estimate {r_est:,.0f}/s ({t_est:.2f} s)"
        f" with its {sims:,} (grid, traversal) simulations cached; {r_cold:,.0f}/s ({t_cold:.2f} s) from cold"
    )
    r_lb, t_lb = rate(lambda: model.bound(p, chip, table), len(table["base_m"]))
    print(f"  lower bound over the {len(table['base_m']):,} enumerated tilings: {r_lb:,.0f}/s ({t_lb:.2f} s)")
    r_feas, _ = rate(lambda: model.feasible(p, chip, table), len(table["base_m"]))
    print(f"  capacity rules: {r_feas:,.0f}/s")
    # Worst case: random tilings, nearly every one with its own tile grid and schedule to simulate.
    cand = feasible_sample(p, chip, space, model, 5000)
    n = len(cand["base_m"])
    r_rand, t_rand = rate(lambda: model.estimate(p, chip, cand), n, repeat=1)
    print(
        f"  random tilings (each its own schedule): {n:,} candidates: estimate {r_rand:,.0f}/s ({t_rand:.2f} s)"
    )
    print(f"  ratio search-workload / target 1,000,000 per s: {r_est / 1e6:.2f}")
    print("== exhaustive search (wall time, proven optimum) ==")
    shapes = [
        (4096, 4096, 4096),
        (8192, 8192, 8192),
        (1000, 1000, 1000),
        (128, 128, 131072),
        (16, 4096, 4096),
        (2048, 14336, 4096),
        (4096, 4097, 4096),
    ]
    for chip_id in ("ascend910b3", "ascend910b1"):
        chip = load_chip(chip_id)
        for s in shapes:
            p = parse_problem("matmul", dict(zip("MNK", s, strict=True)))
            clear_caches()
            t = time.perf_counter()
            r = search(p, chip, space)
            dt = time.perf_counter() - t
            print(
                f"  {chip_id:12} {str(s):20} {dt:6.2f} s   scored {r.evaluated:>8,}  bounded {r.bounded:>8,}  "
                f"time {r.row(0)['time_us']:10.2f} us  {r.row(0)['bound']:7}  proven={r.proven_optimal}"
            )
    print("== lines per module ==")
    root = Path(__file__).resolve().parent.parent / "tiler"
    for f in sorted(root.rglob("*.py")):
        print(f"  {len(f.read_text().splitlines()):5}  {f.relative_to(root.parent)}")


if __name__ == "__main__":
    main()
