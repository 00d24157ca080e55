"""What the Triton compiler gives each flash-attention tiling on the GPU machine: registers, spills, shared memory.

    python -m bench.gpu.fa_registers --out $OUT

Compiles the project's kernel (tiler/ops/flash_attention/triton_kernels.py) for every tiling of the measurement
grid (BLOCK_M and BLOCK_N 16-128, num_stages 2-4, num_warps 4 and 8, D 64 and 128, causal) by launching it once on
tiny inputs, and writes h200_fa_registers.csv: n_regs, n_spills and shared bytes per tiling (a tiling that does
not compile: `fail`). The model's register and shared-memory estimates are fitted to this table (docs/model_cuda.md
section 10), so the occupancy it predicts is the compiler's.
"""

from __future__ import annotations

import argparse
import csv
import itertools
import os
from pathlib import Path

from bench.gpu.gpu_measure import load_module  # noqa: E402  (the matmul bench's helpers; no tiler import)

HERE = Path(__file__).resolve().parents[2]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", type=Path, default=Path(os.environ.get("OUT", "out")))
    args = ap.parse_args()
    tk = load_module("fa_kernels", HERE / "tiler/ops/flash_attention/triton_kernels.py")
    args.out.mkdir(parents=True, exist_ok=True)
    with (args.out / "h200_fa_registers.csv").open("w", newline="") as f:
        w = csv.writer(f)
        w.writerow(
            [
                "D",
                "BLOCK_M",
                "BLOCK_N",
                "num_stages",
                "num_warps",
                "n_regs",
                "n_spills",
                "shared_bytes",
                "status",
            ]
        )
        for D in (64, 128):
            q, k, v = tk.inputs(1, 2, 1, 64, 64, D)
            o = q.new_empty(q.shape)
            for bm, bn, st, nw in itertools.product((16, 32, 64, 128), (16, 32, 64, 128), (2, 3, 4), (4, 8)):
                if bm < 4 * nw:
                    continue
                cfg = dict(BLOCK_M=bm, BLOCK_N=bn, num_stages=st, num_warps=nw, ORDER=0)
                try:
                    kern = tk.attention_kernel(q, k, v, cfg, True, o)
                    w.writerow([D, bm, bn, st, nw, kern.n_regs, kern.n_spills, kern.metadata.shared, "ok"])
                except Exception as exc:  # out of shared memory or registers at compile time
                    w.writerow([D, bm, bn, st, nw, "", "", "", f"fail: {type(exc).__name__}"])
            f.flush()
            print(f"D={D} done", flush=True)


if __name__ == "__main__":
    main()
