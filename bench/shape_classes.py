"""Issue 16's shape classes on the H200: the shapes, the tilings to measure, and the figures on the held-out third.

Four classes of 6 fp16 GEMMs, none measured before (bench/data/README.md, "Shape classes"):
  misaligned   a dimension that is not a multiple of 16 (Triton then cannot prove 16-element strides or bounds)
  tall_skinny  N <= 64 with M in the tens of thousands and a small K
  mid_m        M of a few hundred to a thousand with large N and K
  llm          ordinary LLM linear layers (prefill, decode, GQA projections)
The held-out third (two per class, the 2nd and 5th of each list, fixed before anything was measured) is never
used for fitting: tiler calibrate gets only the other 16 (see FIT_SHAPES / HELD_OUT).

    python3 bench/shape_classes.py candidates --out bench/data/gpu_run10_candidates.csv
        the tilings to measure beside the fixed grid: the model's plain top-8 and diverse top-8, NVIDIA's top-4
        (bench/nvidia_picks.py; needs the `peers` extra) and 24 random feasible tilings of the whole space
    python3 bench/shape_classes.py eval [--data FILE.csv ...]
        the acceptance figures on the held-out shapes from the measured file(s)
"""

from __future__ import annotations

import argparse
import csv
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "bench"))

CLASSES = {
    "misaligned": [
        "3000x1000x1000",
        "777x4096x4096",
        "2000x3000x1500",
        "1200x1200x4100",
        "4000x2500x1000",
        "6000x6000x1000",
    ],
    "tall_skinny": [
        "32768x64x256",
        "65536x32x128",
        "16384x64x512",
        "32768x48x768",
        "50000x64x1024",
        "131072x16x64",
    ],
    "mid_m": [
        "384x8192x8192",
        "512x14336x4096",
        "768x11008x4096",
        "640x12288x5120",
        "896x16384x4096",
        "320x28672x8192",
    ],
    "llm": [
        "4096x12288x4096",
        "2048x4096x11008",
        "8192x1024x4096",
        "8x4096x4096",
        "4096x28672x8192",
        "2048x2048x2048",
    ],
}
HELD_OUT = {s for shapes in CLASSES.values() for s in (shapes[1], shapes[4])}
FIT_SHAPES = [s for shapes in CLASSES.values() for s in shapes if s not in HELD_OUT]
CLASS_OF = {s: c for c, shapes in CLASSES.items() for s in shapes}
KNOBS = ("BLOCK_M", "BLOCK_N", "BLOCK_K", "num_stages", "num_warps", "GROUP_M", "ORDER", "SPLIT_K")
RANDOM_PER_SHAPE = 24


def dims(s: str) -> tuple[int, int, int]:
    M, N, K = (int(x) for x in s.split("x"))
    return M, N, K


def candidates(out: str, seed: int = 16) -> None:
    """Write the tilings to measure (columns M,N,K,KNOBS,source,model_rank,predicted_us)."""
    from estimate_rate import feasible_table
    from nvidia_picks import nvidia_top

    from tiler.hardware import load_chip
    from tiler.operator import get_operator
    from tiler.problem import parse_problem
    from tiler.search import search
    from tiler.space import load_space

    chip = load_chip("h200")
    space = load_space("matmul", chip.family)
    model = get_operator("matmul", chip.family)
    rows = []
    for i, s in enumerate(CLASS_OF):
        M, N, K = dims(s)
        p = parse_problem("matmul", {"M": M, "N": N, "K": K})
        for source, diverse in (("model_plain", False), ("model_diverse", True)):
            res = search(p, chip, space, top=8, diverse=diverse)
            for r in range(len(res.est["time_us"])):
                knobs = [int(res.cands[k][r]) for k in KNOBS]
                rows.append([M, N, K, *knobs, source, r + 1, round(float(res.est["time_us"][r]), 3)])
        for r, pk in enumerate(nvidia_top(M, N, K, 4)):
            rows.append([M, N, K, *(pk[k] for k in KNOBS), "peer", r + 1, round(pk["predicted_us"], 3)])
        rnd = feasible_table(p, chip, space, model, RANDOM_PER_SHAPE, seed + i)
        t = model.estimate(p, chip, rnd)["time_us"]
        for r in range(len(t)):
            rows.append([M, N, K, *(int(rnd[k][r]) for k in KNOBS), "random", "", round(float(t[r]), 3)])
        print(f"{s:>16} {CLASS_OF[s]:<11} {'held out' if s in HELD_OUT else 'fit'}", file=sys.stderr)
    with open(out, "w", newline="") as f:
        w = csv.writer(f)
        w.writerow(["M", "N", "K", *KNOBS, "source", "model_rank", "predicted_us"])
        w.writerows(rows)
    print(f"{len(rows)} rows -> {out}", file=sys.stderr)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    sub = ap.add_subparsers(dest="cmd", required=True)
    c = sub.add_parser("candidates")
    c.add_argument("--out", required=True)
    c.add_argument("--seed", type=int, default=16)
    a = ap.parse_args(argv)
    if a.cmd == "candidates":
        candidates(a.out, a.seed)
    return 0


if __name__ == "__main__":
    sys.exit(main())
