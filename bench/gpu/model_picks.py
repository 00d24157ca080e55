"""Write the cuda model's top-k tilings per shape as a candidates CSV for bench/gpu/gpu_measure.py.

    python -m bench.gpu.model_picks --chip h200 --top 8 --out bench/data/model_picks_h200.csv 2048x6144x4096 ...

The rows carry source=model and the model's rank and predicted time, so the measured file shows the model's
picks beside the fixed grid.
"""

from __future__ import annotations

import argparse
import csv

from tiler.hardware import load_chip
from tiler.problem import parse_problem
from tiler.search import search
from tiler.space import load_space

KNOBS = ("BLOCK_M", "BLOCK_N", "BLOCK_K", "num_stages", "num_warps", "GROUP_M", "ORDER", "SPLIT_K")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--chip", default="h200")
    ap.add_argument("--top", type=int, default=8)
    ap.add_argument("--out", required=True)
    ap.add_argument("shapes", nargs="+", help="MxNxK")
    a = ap.parse_args()
    chip = load_chip(a.chip)
    space = load_space("matmul", chip.family)
    with open(a.out, "w", newline="") as f:
        w = csv.writer(f)
        w.writerow(["M", "N", "K", *KNOBS, "source", "model_rank", "predicted_us"])
        for s in a.shapes:
            M, N, K = (int(x) for x in s.split("x"))
            res = search(parse_problem("matmul", {"M": M, "N": N, "K": K}), chip, space, top=a.top)
            for i in range(len(res.est["time_us"])):
                row = [int(res.cands[k][i]) for k in KNOBS]
                w.writerow([M, N, K, *row, "model", i + 1, round(float(res.est["time_us"][i]), 3)])
            print(s, res.tiling(0), f"{res.row(0)['time_us']:.1f} us")


if __name__ == "__main__":
    main()
