"""Sweep throughput: distinct shapes searched per second with --jobs 1 and --jobs 2, and the scaling ratio.

    python -m bench.sweep_throughput [--shapes examples/shapes/llama3_8b.csv] [--chip ascend910b3]
                                      [--rows N] [--jobs 1,2] [--strategy exhaustive]

Both runs call `tiler.sweep.run_sweep` in this process (no CLI start-up, imports warmed by one small search),
with the exhaustive strategy (proven optimum, nothing weakened), on the same rows, each with a fresh journal in a
temporary folder and cold schedule caches, and the two output tables are checked to be identical. "Shapes" are distinct (chip, problem) searches: rows that repeat a
shape (gate_proj and up_proj) are searched once. The issue's target is >= 20 matmul shapes/s per process.
"""

from __future__ import annotations

import argparse
import json
import os
import sqlite3
import statistics
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def run(shapes, chip: str, jobs: int, strategy: str, folder: Path):
    from tiler.model.schedule import clear_caches
    from tiler.sweep import run_sweep

    out = folder / f"jobs{jobs}.csv"
    clear_caches()  # every run starts cold (forked workers would otherwise inherit the last run's simulations)
    t0 = time.perf_counter()
    rep = run_sweep(shapes, "matmul", chip, out, jobs=jobs, strategy=strategy, quiet=True)
    wall = time.perf_counter() - t0
    db = sqlite3.connect(str(rep.journal))
    per = [
        json.loads(r)["search"]["elapsed_s"]
        for (r,) in db.execute("SELECT result FROM results WHERE status='ok'")
    ]
    db.close()
    return rep, wall, per, out.read_bytes()


def warm_up(chip: str) -> None:
    """Import everything a search touches (numpy submodules load lazily), so no run pays for it."""
    from tiler.hardware import load_chip
    from tiler.problem import parse_problem
    from tiler.search import search
    from tiler.space import load_space

    search(
        parse_problem("matmul", {"M": 64, "N": 64, "K": 64}), load_chip(chip), load_space("matmul", "ascend")
    )


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--shapes", default=str(ROOT / "examples" / "shapes" / "llama3_8b.csv"))
    ap.add_argument("--chip", default="ascend910b3")
    ap.add_argument("--rows", type=int, default=0, help="only the first N rows (0: all)")
    ap.add_argument("--jobs", default="1,2", help="comma-separated job counts; the first is the baseline")
    ap.add_argument("--strategy", default="exhaustive")
    args = ap.parse_args(argv)

    import pandas as pd

    df = pd.read_csv(args.shapes, dtype=str, keep_default_na=False)
    if args.rows:
        df = df.head(args.rows)
    jobs_list = [int(j) for j in args.jobs.split(",")]
    print(
        f"sweep throughput: {Path(args.shapes).name} ({len(df)} rows), chip {args.chip}, strategy {args.strategy}, "
        f"{os.cpu_count()} CPUs, load average {os.getloadavg()[0]:.1f}"
    )
    results = {}
    warm_up(args.chip)
    with tempfile.TemporaryDirectory() as tmp:
        for jobs in jobs_list:
            rep, wall, per, data = run(df, args.chip, jobs, args.strategy, Path(tmp))
            shapes = rep.computed
            rate = shapes / wall
            results[jobs] = (rate, data)
            if not per:
                print(f"  --jobs {jobs}: no row succeeded; first error: {rep.frame['error'].iloc[0]}")
                return 1
            print(
                f"  --jobs {jobs}: {shapes} shapes ({len(rep.frame)} rows, {rep.failed} failed) in {wall:7.1f} s = "
                f"{rate:6.3f} shapes/s ({rate / jobs:6.3f} per process); per-shape search time median "
                f"{statistics.median(per):.2f} s, max {max(per):.2f} s"
            )
    base = jobs_list[0]
    for jobs in jobs_list[1:]:
        ratio = results[jobs][0] / results[base][0]
        same = results[jobs][1] == results[base][1]
        print(
            f"  scaling --jobs {jobs} / --jobs {base}: {ratio:.2f}x (ideal {jobs / base:.0f}x); "
            f"outputs identical: {same}"
        )
    best = max(r for r, _ in results.values())
    print(
        f"  target >= 20 shapes/s per process: {'met' if results[base][0] / base >= 20 else 'NOT met'} "
        f"(best {best:.3f} shapes/s)"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
