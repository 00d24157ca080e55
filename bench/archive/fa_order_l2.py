"""Does the launch order's K/V working set decide ORDER? Causal attention pairs head to head (GPU machine).

    python -m bench.archive.fa_order_l2 --out $OUT [--rounds 5]

On the one held-out causal shape where the model picks the wrong ORDER (1x32x8x8192, 64x64 s3 w4: natural 5 %
faster, predicted heavy-first 5.6 % faster) the two launch orders differ in what runs together: ORDER 0 runs the
query blocks of one or two heads at a time (their K/V, 4 MB per KV head at S = 8192, D = 128), ORDER 1 the same
query block of every head (the K/V of all KV heads at once). The question is whether ORDER 1 loses when the K/V of
all KV heads outgrows the L2 (50 MB on the H200, in two halves). This times the same four tilings with ORDER 0
and 1 on causal shapes that vary only the K/V bytes (kv_heads 1 to 32 at S = 8192; S 4096 and 16384; D 64),
in `rounds` interleaved rounds, each checked against SDPA. One row per measurement in h200_fa_order_l2.csv
(fa_measure's columns plus `round`).
"""

from __future__ import annotations

import argparse
import csv
import os
import time
from pathlib import Path

from bench.gpu.fa_measure import COLUMNS, load_kernels, pairs

# (B, heads, kv_heads, S1, S2, D, causal): K/V bytes of all KV heads = 2 * kv_heads * S * D * 2
SHAPES = [
    (1, 32, 1, 8192, 8192, 128, 1),
    (1, 32, 2, 8192, 8192, 128, 1),
    (1, 32, 4, 8192, 8192, 128, 1),
    (1, 32, 8, 8192, 8192, 128, 1),
    (1, 32, 16, 8192, 8192, 128, 1),
    (1, 32, 32, 8192, 8192, 128, 1),
    (1, 32, 8, 4096, 4096, 128, 1),
    (1, 32, 8, 16384, 16384, 128, 1),
    (1, 32, 8, 8192, 8192, 64, 1),
]
TILINGS = [(64, 64, 3, 4), (64, 32, 3, 4), (128, 32, 3, 4), (128, 64, 3, 8)]
BLOCKS = ("BLOCK_M", "BLOCK_N", "num_stages", "num_warps")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", type=Path, default=Path(os.environ.get("OUT", "out")))
    ap.add_argument("--rounds", type=int, default=5)
    args = ap.parse_args()
    tk = load_kernels()
    t0 = time.time()
    args.out.mkdir(parents=True, exist_ok=True)
    with (args.out / "h200_fa_order_l2.csv").open("w", newline="") as f:
        w = csv.writer(f)
        w.writerow([*COLUMNS, "round"])
        for r in range(args.rounds):
            for B, H, KVH, S1, S2, D, causal in SHAPES:
                shape = dict(B=B, heads=H, kv_heads=KVH, S1=S1, S2=S2, D=D, causal=causal)
                flop = 4.0 * B * H * pairs(S1, S2, causal) * D
                for blocks in TILINGS:
                    for order in (0, 1):
                        c = {**dict(zip(BLOCKS, blocks, strict=True)), "ORDER": order}
                        try:
                            res = tk.time_config(shape, c)
                            ms, err = f"{res['ms']:.5f}", f"{res['max_abs_err']:.2e}"
                            tf = f"{flop / res['ms'] / 1e9:.2f}"
                        except Exception as e:  # a tiling that does not compile or launch: an empty ms
                            print(f"fail {shape} {c}: {type(e).__name__}: {str(e)[:120]}", flush=True)
                            ms, err, tf = "", "fail", ""
                        w.writerow(
                            ["l2", B, H, KVH, S1, S2, D, causal, "triton", *blocks, order, ms, tf, err, r]
                        )
            f.flush()
            print(f"[{time.time() - t0:6.1f}s] round {r + 1}/{args.rounds}", flush=True)


if __name__ == "__main__":
    main()
