"""Sweep throughput for issue 15: a 1,000-row random matmul shape CSV swept on one chip at --jobs 1.

    python -m bench.sweep_rate [--rows 1000] [--chips ascend910b3,h200] [--seed 0]

Writes a seeded random CSV (M, N, K each log-uniform in 1..16384, fp16) to a temporary folder, then calls
`tiler.sweep.run_sweep(csv, "matmul", chip, out, jobs=1)` in this process (exhaustive strategy, the default;
fresh journal, cold schedule caches) once per chip, and prints shapes/s (distinct shapes searched / wall time)
and the ratio to the issue's target (>= 100 shapes/s per core at --jobs 1), with the process's CPU time beside the
wall time (on a shared machine the wall time includes waiting for a core). BLAS threads are pinned to 1. A bench
reports; it asserts nothing.
"""

from __future__ import annotations

import os

for _v in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS", "NUMEXPR_NUM_THREADS"):
    os.environ[_v] = "1"

import argparse  # noqa: E402
import sys  # noqa: E402
import tempfile  # noqa: E402
import time  # noqa: E402
from pathlib import Path  # noqa: E402

import numpy as np  # noqa: E402

TARGET = 100.0


def write_csv(path: Path, rows: int, seed: int) -> None:
    rng = np.random.default_rng(seed)
    mnk = np.rint(np.exp(rng.uniform(0.0, np.log(16384), size=(rows, 3)))).astype(np.int64).clip(1, 16384)
    lines = ["name,M,N,K,dtype"] + [f"r{i},{m},{n},{k},fp16" for i, (m, n, k) in enumerate(mnk)]
    path.write_text("\n".join(lines) + "\n")


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rows", type=int, default=1000)
    ap.add_argument("--chips", default="ascend910b3,h200")
    ap.add_argument("--seed", type=int, default=0)
    args = ap.parse_args(argv)

    from tiler.hardware import load_chip
    from tiler.model.schedule import clear_caches
    from tiler.problem import parse_problem
    from tiler.search import search
    from tiler.space import load_space
    from tiler.sweep import run_sweep

    print(
        f"sweep throughput: {args.rows} random matmul rows (seed {args.seed}, M/N/K log-uniform 1..16384, fp16), "
        f"--jobs 1, exhaustive, {os.cpu_count()} CPUs, load {os.getloadavg()[0]:.1f}"
    )
    out_lines = []
    with tempfile.TemporaryDirectory() as tmp:
        csv = Path(tmp) / "shapes.csv"
        write_csv(csv, args.rows, args.seed)
        for chip_id in args.chips.split(","):
            chip = load_chip(chip_id)
            # warm the imports (numpy submodules load lazily) with one small search, outside the timing
            search(
                parse_problem("matmul", {"M": 64, "N": 64, "K": 64}), chip, load_space("matmul", chip.family)
            )
            clear_caches()
            t, cpu = time.perf_counter(), time.process_time()
            rep = run_sweep(csv, "matmul", chip_id, Path(tmp) / f"{chip_id}.csv", jobs=1, quiet=True)
            wall, cpu = time.perf_counter() - t, time.process_time() - cpu
            rate = rep.computed / wall
            line = (
                f"  {chip_id:12} {rep.computed} shapes ({len(rep.frame)} rows, {rep.failed} failed) in {wall:7.1f} s"
                f" (cpu {cpu:7.1f} s) = {rate:7.2f} shapes/s; ratio to 100/s target: {rate / TARGET:.3f}"
                f" ({'met' if rate >= TARGET else 'NOT met'})"
            )
            print(line, flush=True)
            out_lines.append(line)
    return 0


if __name__ == "__main__":
    sys.exit(main())
