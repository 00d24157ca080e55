"""Registers, spills and shared memory of the compiled Triton matmul, per tiling and load path: run this on the
GPU machine (it compiles for the device; nothing is timed).

    python -m bench.gpu.gpu_registers --out $OUT/h200_registers.csv [--configs FILE.csv]
    python -m bench.gpu.gpu_registers --compare bench/data/h200_registers.csv      (here: the model against it)

For each of four problems that differ only in which row strides are multiples of 16 elements (4096^3 aligned;
K = 4095: A rows misaligned; N = 4095: B and C rows misaligned; 4095^3: both), every tiling of the fixed grid
(bench/gpu/gpu_measure.py GRID) and of --configs (any CSV with the knob columns, e.g. every measured file) is compiled
in a pool of spawned workers and Triton's compiled kernel is read: `n_regs` (registers per thread after ptxas),
`n_spills` (spilled registers) and `shared` (bytes). The launch order knobs do not change the code, so each tiling
is compiled once per problem with GROUP_M = 1, ORDER = 0. These numbers check the model's register estimate
(tiler/ops/matmul/cuda/resources.py, _registers) against the compiler.
"""

from __future__ import annotations

import argparse
import csv
import os
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]

from bench.gpu.gpu_measure import GRID, KNOBS, _worker_init, cfg_dict, log  # noqa: E402

PROBLEMS = [(4096, 4096, 4096), (4096, 4096, 4095), (4096, 4095, 4096), (4095, 4095, 4095)]
COLUMNS = ["M", "N", "K", *KNOBS, "n_regs", "n_spills", "shared", "error"]


def _census_one(task):
    M, N, K, knobs = task
    try:
        from tiler.ops.matmul.triton_runner import precompile

        k = precompile(M, N, K, cfg_dict(knobs))
        init = getattr(k, "_init_handles", None)
        if init is not None:
            init()
        return task, int(k.n_regs), int(k.n_spills), int(k.metadata.shared), ""
    except Exception as e:  # noqa: BLE001 - one row says why
        return task, -1, -1, -1, f"{type(e).__name__}: {str(e).splitlines()[0] if str(e) else ''}"[:200]


def read_configs(path: str) -> set[tuple]:
    out = set()
    with open(path, newline="") as f:
        for row in csv.DictReader(f):
            if row.get("impl", "triton") not in ("", "triton"):
                continue
            try:
                out.add(tuple(int(float(row[k])) for k in KNOBS))
            except (KeyError, ValueError):
                continue
    return out


def compare(path: str, chip_id: str = "h200"):
    """The model's register estimate against ptxas, per load path: a table and a summary per path.

    ptxas' demand is n_regs + n_spills; a kernel spills when the model's estimate is above the per-thread cap
    (the model) or n_spills > 0 (ptxas)."""
    import numpy as np
    import pandas as pd

    from tiler.hardware import load_chip
    from tiler.ops.matmul import Matmul
    from tiler.ops.matmul import cuda as mc

    chip = load_chip(chip_id)
    d = pd.read_csv(path)
    d = d[d["n_regs"] >= 0]
    parts = []
    for (m, n, k), g in d.groupby(["M", "N", "K"]):
        prep = mc.prepare(Matmul(int(m), int(n), int(k)), chip, {x: g[x].to_numpy() for x in mc.KNOBS})
        path_name = (
            "aligned" if k % 16 == 0 and n % 16 == 0 else "sync " + "A" * bool(k % 16) + "B" * bool(n % 16)
        )
        parts.append(g.assign(path=path_name, model=prep["regs"], cap=prep["reg_cap"]))
    d = pd.concat(parts, ignore_index=True)
    d["demand"] = d["n_regs"] + d["n_spills"]
    rows = []
    for name, g in d.groupby("path", sort=False):
        model_spills, ptxas_spills = g["model"] > g["cap"], g["n_spills"] > 0
        rows.append(
            {
                "load path": name,
                "tilings": len(g),
                "ptxas spills": int(ptxas_spills.sum()),
                "spill call agrees": float((model_spills == ptxas_spills).mean()),
                "median |model - demand|": float(np.median(np.abs(g["model"] - g["demand"]))),
                "median model - demand": float(np.median(g["model"] - g["demand"])),
            }
        )
    return pd.DataFrame(rows)


def main(argv=None) -> int:
    import multiprocessing as mp

    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--compare", help="a census CSV: print the model's estimate against it (no GPU needed)")
    ap.add_argument("--out")
    ap.add_argument("--configs", nargs="*", default=[], help="CSV files whose knob columns add tilings")
    ap.add_argument("--jobs", type=int, default=max(1, min(15, (os.cpu_count() or 2) - 1)))
    ap.add_argument("--budget-s", type=float, default=400.0)
    ap.add_argument(
        "--keep-order", action="store_true", help="compile each launch order as given (a constexpr)"
    )
    ap.add_argument("--no-grid", action="store_true", help="only the tilings of --configs")
    args = ap.parse_args(argv)
    if args.compare:
        print(compare(args.compare).to_string(index=False, float_format=lambda v: f"{v:.3f}"))
        return 0
    if not args.out:
        ap.error("--out is required to take a census")
    t0 = time.time()
    tilings = set() if args.no_grid else {tuple(g) for g in GRID}
    for f in args.configs:
        tilings |= read_configs(f)
    order = KNOBS.index("GROUP_M"), KNOBS.index("ORDER")
    plain = (
        sorted(tilings)
        if args.keep_order
        else sorted(
            {
                tuple(1 if i == order[0] else 0 if i == order[1] else v for i, v in enumerate(t))
                for t in tilings
            }
        )
    )
    tasks = [(M, N, K, t) for (M, N, K) in PROBLEMS for t in plain]
    log(
        f"[census] {len(plain)} tilings x {len(PROBLEMS)} problems = {len(tasks)} compiles on {args.jobs} workers"
    )
    ctx = mp.get_context("spawn")
    pool = ctx.Pool(args.jobs, initializer=_worker_init, initargs=(str(ROOT),))
    done = 0
    with open(args.out, "w", newline="") as f:
        w = csv.writer(f)
        w.writerow(COLUMNS)
        try:
            it = pool.imap_unordered(_census_one, tasks, chunksize=1)
            while done < len(tasks):
                left = t0 + args.budget_s - time.time()
                if left <= 0:
                    log(f"[census] budget reached after {done}/{len(tasks)}")
                    break
                try:
                    (M, N, K, t), regs, spills, shared, err = it.next(timeout=left)
                except mp.TimeoutError:
                    continue
                w.writerow([M, N, K, *t, regs, spills, shared, err])
                f.flush()
                done += 1
                if done % 100 == 0:
                    log(f"[census] {done}/{len(tasks)} in {time.time() - t0:.0f}s")
        finally:
            pool.terminate()
            pool.join()
    log(f"[census] wrote {done} rows to {args.out} in {time.time() - t0:.0f}s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
