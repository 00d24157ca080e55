"""How tight the exhaustive search's per-tiling bound is, and how many tilings it cannot prune (issue 15).

    python -m bench.archive.bound_tightness [--chip ascend910b3] [--shapes 12] [--seed 1] [--max-tilings 60000]
    python -m bench.archive.bound_tightness --incumbent 80 [--seed 0]

For seeded random matmul shapes (M, N, K log-uniform in 1..16384, fp16), every feasible tiling of the level-wise
enumeration (no prefix bound; at most --max-tilings, sampled) gets its lower bound (max of quick_bound and bound,
over every schedule) and its exact best time over every schedule. Prints per shape: bound / best time (median and
10th percentile), how many tilings have a bound at or below the optimum (the branch and bound must score them
whatever the incumbent), and how many of those are within 10 % of the optimum (near-ties a proven search cannot
skip). `--incumbent N`: instead, N random shapes are searched (tiler.search, exhaustive, top 1) twice, plainly and
with the optimum's own time given as the incumbent from the start (the most any warm start could give; the
search's incumbent function is replaced for that run), and the two total times are printed. A bench reports; it
asserts nothing.
"""

from __future__ import annotations

import argparse
import os
import sys

for _v in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS"):
    os.environ[_v] = "1"

import numpy as np  # noqa: E402

from tiler.hardware import load_chip  # noqa: E402
from tiler.operator import get_operator  # noqa: E402
from tiler.problem import parse_problem  # noqa: E402
from tiler.search.proven import _expand, enumerate_feasible  # noqa: E402
from tiler.space import length, load_space, take  # noqa: E402


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--chip", default="ascend910b3")
    ap.add_argument("--shapes", type=int, default=12)
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--max-tilings", type=int, default=60000)
    ap.add_argument(
        "--incumbent", type=int, default=0, help="time N searches with and without a perfect incumbent"
    )
    a = ap.parse_args(argv)
    if a.incumbent:
        return incumbent_gain(a.chip, a.incumbent, a.seed)
    chip = load_chip(a.chip)
    space = load_space("matmul", chip.family)
    model = get_operator("matmul", chip.family)
    names = [k for k in model.SCHEDULE_KNOBS if k in space.knobs]
    sched, doms = space.product(names), space.domains(names)
    rng = np.random.default_rng(a.seed)
    mnk = np.rint(np.exp(rng.uniform(0.0, np.log(16384), size=(a.shapes, 3)))).astype(int).clip(1, 16384)
    under_all = []
    for m, n, k in mnk.tolist():
        p = parse_problem("matmul", {"M": m, "N": n, "K": k}, dtype="fp16")
        table, _, _ = enumerate_feasible(p, chip, space, model, None)
        count = length(table)
        if count > a.max_tilings:
            table = take(table, np.random.default_rng(0).choice(count, a.max_tilings, replace=False))
            count = a.max_tilings
        lb = model.quick_bound(p, chip, table)
        full = model.bound(p, chip, table, doms)
        lb = lb if full is None else np.maximum(lb, full)
        best = model.estimate(p, chip, _expand(table, sched))["time_us"].reshape(count, -1).min(axis=1)
        opt = best.min()
        ratio, under = lb / best, lb <= opt
        under_all.append(int(under.sum()))
        print(
            f"{m}x{n}x{k}: {count} tilings; bound / best over schedules median {np.median(ratio):.3f}, p10 "
            f"{np.quantile(ratio, 0.1):.3f}; bound <= optimum on {int(under.sum())} ({under.mean():.1%}), of those "
            f"{(best[under] <= 1.1 * opt).mean():.0%} within 10 % of it",
            flush=True,
        )
    print(
        f"tilings a proven search must score (bound <= optimum), median over shapes: {int(np.median(under_all))}"
    )
    return 0


def incumbent_gain(chip_id: str, shapes: int, seed: int) -> int:
    import time

    from tiler.search import proven, search

    chip = load_chip(chip_id)
    space = load_space("matmul", chip.family)
    rng = np.random.default_rng(seed)
    mnk = np.rint(np.exp(rng.uniform(0.0, np.log(16384), size=(shapes, 3)))).astype(int).clip(1, 16384)
    plain_incumbent = proven._incumbent
    plain = seeded = 0.0
    try:
        for m, n, k in mnk.tolist():
            p = parse_problem("matmul", {"M": m, "N": n, "K": k}, dtype="fp16")
            proven._incumbent = plain_incumbent
            t = time.perf_counter()
            opt = float(search(p, chip, space, top=1).est["time_us"][0])
            plain += time.perf_counter() - t
            proven._incumbent = lambda best, top, opt=opt: min(plain_incumbent(best, top), opt)
            t = time.perf_counter()
            again = float(search(p, chip, space, top=1).est["time_us"][0])
            seeded += time.perf_counter() - t
            assert again == opt
    finally:
        proven._incumbent = plain_incumbent
    print(
        f"{shapes} shapes on {chip_id}: plain {plain:.2f} s, with the optimum as incumbent {seeded:.2f} s "
        f"({1 - seeded / plain:.0%} less)"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
