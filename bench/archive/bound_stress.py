"""Stress the exhaustive search's bounds: on random shapes, chips and dtypes, every bound must stay at or below the
exact time of the best schedule of each tiling, and the search's optimum at or below every scored tiling's best.

    python -m bench.archive.bound_stress [--seed 7] [--cases 30]

For each case: enumerate the feasible tilings, take up to 100 at random, score each with every schedule, and
compare quick_bound, bound and prefix_bound (on the tilings' base sizes and split_k) with the best schedule's
time (tolerance 1e-6: the estimate picks the busiest core in float32). Prints each violation and a count.
"""

from __future__ import annotations

import argparse
import sys

import numpy as np

from tiler.hardware import load_chip  # noqa: E402
from tiler.operator import get_operator  # noqa: E402
from tiler.problem import parse_problem  # noqa: E402
from tiler.search import enumerate_feasible, search  # noqa: E402
from tiler.space import load_space, product, take  # noqa: E402

CHIPS = ("ascend910b3", "ascend910b1", "ascend910_9392", "ascend310p3", "ascend910a")
SIZES = (1, 16, 37, 128, 300, 1000, 2048, 4097, 8192)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--seed", type=int, default=7)
    ap.add_argument("--cases", type=int, default=30)
    args = ap.parse_args()
    space, model = load_space("matmul", "ascend"), get_operator("matmul", "ascend")
    sched = space.product(list(model.SCHEDULE_KNOBS))
    rng = np.random.default_rng(args.seed)
    checked = violations = 0
    for _ in range(args.cases):
        chip = load_chip(str(rng.choice(CHIPS)))
        M, N, K = (int(x) for x in rng.choice(SIZES, 3))
        dtype = str(rng.choice(["fp16", "int8"])) if chip.id == "ascend310p3" else "fp16"
        p = parse_problem("matmul", {"M": M, "N": N, "K": K, "dtype": dtype})
        table, _, _ = enumerate_feasible(p, chip, space, model)
        n = len(table.get("base_m", ()))
        if not n:
            continue
        rows = take(table, rng.choice(n, size=min(100, n), replace=False))
        k = len(rows["base_m"])
        best = model.estimate(p, chip, product(rows, sched))["time_us"].reshape(k, -1).min(axis=1)
        floors = {
            "quick_bound": model.quick_bound(p, chip, rows),
            "bound": model.bound(p, chip, rows),
            "prefix_bound": model.prefix_bound(
                p, chip, {c: rows[c] for c in model.LEVELS[0]}, space.domains()
            ),
        }
        for name, v in floors.items():
            if np.any(v > best * (1 + 1e-6)):
                violations += 1
                print(
                    f"VIOLATION {name} {chip.id} {M}x{N}x{K} {dtype}: {float((v / best).max()):.6f} x the best"
                )
        found = float(search(p, chip, space).est["time_us"][0])
        if found > best.min() * (1 + 1e-6):
            violations += 1
            print(f"SEARCH MISSED {chip.id} {M}x{N}x{K} {dtype}: {found} > {best.min()}")
        checked += 1
    print(f"seed {args.seed}: {checked} cases checked ({args.cases} drawn), {violations} violations")
    return 1 if violations else 0


if __name__ == "__main__":
    sys.exit(main())
