"""Is the H200 power-capped on flash attention, so that a better-balanced launch order buys no time? (GPU machine)

    python -m bench.archive.fa_order_power --out $OUT

For two tilings of the causal 1x32x8x8192 D=128 shape (64x64 s3 w4, where do_bench finds ORDER 0 faster, and
128x32 s3 w4, where it finds ORDER 1 faster) and both ORDERs, three ways of timing the same launch:
  sustained  `--loops` launches back to back, CUDA events around the whole loop (time per launch), while
             nvidia-smi samples the SM clock and the board power every 20 ms
  isolated   launches 0.2 s apart (the board idles between them), CUDA events around each, median
  do_bench   triton.testing.do_bench as time_config runs it (L2 flushed before each launch), median
Writes h200_fa_order_power.csv (one row per tiling, order and way: ms, and for `sustained` the median SM clock
in MHz and power in W over its samples) and prints it.
"""

from __future__ import annotations

import argparse
import csv
import os
import statistics
import subprocess
import time
from pathlib import Path

import torch
import triton

from bench.gpu.fa_measure import load_kernels

SHAPE = (1, 32, 8, 8192, 8192, 128)
TILINGS = [(64, 64, 3, 4), (128, 32, 3, 4)]


def sample_smi() -> subprocess.Popen:
    """nvidia-smi sampling the SM clock and board power every 20 ms until terminated."""
    return subprocess.Popen(
        ["nvidia-smi", "--query-gpu=clocks.sm,power.draw", "--format=csv,noheader,nounits", "-lms", "20"],
        stdout=subprocess.PIPE,
        text=True,
    )


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", type=Path, default=Path(os.environ.get("OUT", "out")))
    ap.add_argument("--loops", type=int, default=1500)
    ap.add_argument("--isolated", type=int, default=20)
    args = ap.parse_args()
    tk = load_kernels()
    q, k, v = tk.inputs(*SHAPE)
    o = q.new_empty(q.shape)
    rows = []
    for blocks in TILINGS:
        for order in (0, 1):
            cfg = dict(
                BLOCK_M=blocks[0], BLOCK_N=blocks[1], num_stages=blocks[2], num_warps=blocks[3], ORDER=order
            )
            run = lambda cfg=cfg: tk.attention(q, k, v, cfg, True, o)  # noqa: E731
            run()
            torch.cuda.synchronize()
            time.sleep(1.0)
            smi = sample_smi()
            time.sleep(0.1)
            a, b = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            a.record()
            for _ in range(args.loops):
                run()
            b.record()
            torch.cuda.synchronize()
            smi.terminate()
            samples = [
                tuple(float(x) for x in ln.split(",")) for ln in smi.communicate()[0].splitlines() if ln
            ]
            busy = [s for s in samples if s[1] > 150] or samples
            rows.append(
                dict(
                    BLOCK_M=blocks[0],
                    BLOCK_N=blocks[1],
                    num_stages=blocks[2],
                    num_warps=blocks[3],
                    ORDER=order,
                    way="sustained",
                    ms=a.elapsed_time(b) / args.loops,
                    sm_mhz=statistics.median(s[0] for s in busy),
                    power_w=statistics.median(s[1] for s in busy),
                )
            )
            iso = []
            for _ in range(args.isolated):
                time.sleep(0.2)
                a.record()
                run()
                b.record()
                torch.cuda.synchronize()
                iso.append(a.elapsed_time(b))
            rows.append(dict(rows[-1], way="isolated", ms=statistics.median(iso), sm_mhz="", power_w=""))
            ms = triton.testing.do_bench(run, warmup=5, rep=25, return_mode="median")
            rows.append(dict(rows[-1], way="do_bench", ms=ms))
            print(rows[-3], rows[-2]["ms"], rows[-1]["ms"], flush=True)
    args.out.mkdir(parents=True, exist_ok=True)
    with (args.out / "h200_fa_order_power.csv").open("w", newline="") as f:
        w = csv.DictWriter(f, fieldnames=list(rows[0]))
        w.writeheader()
        w.writerows(rows)


if __name__ == "__main__":
    main()
