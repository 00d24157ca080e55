"""What Triton compiles for a short K loop: run on the GPU machine (torch, triton, CUDA).

    python -m bench.archive.short_k_census --out $OUT

For 32768x32x128 (2 K steps of 64) and 32768x32x1024 (16 steps), tilings 256x32x64 and 128x32x64 with 4 warps
and 1-4 stages: registers, spills, shared memory and the PTX census of bench/archive/stage_probe.py (wgmma and cp.async
issues, commits and waits with their depths) into short_k_ptx.csv, and the PTX of 256x32x64 with 2 and 3 stages
at K=128 as text. Nothing is timed; bench/gpu/gpu_measure.py times the same tilings (run 16).
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]

from bench.archive.stage_probe import ptx_counts  # noqa: E402
from bench.gpu.matmul_ncu import write_rows  # noqa: E402

SHAPES = ((32768, 32, 128), (32768, 32, 1024))
TILES = ((256, 32, 64), (128, 32, 64))


def main(argv=None) -> int:
    from tiler.ops.matmul.triton_runner import precompile

    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", required=True)
    out = Path(ap.parse_args(argv).out)
    out.mkdir(parents=True, exist_ok=True)
    rows = []
    for M, N, K in SHAPES:
        for bm, bn, bk in TILES:
            for st in (1, 2, 3, 4):
                cfg = dict(
                    BLOCK_M=bm,
                    BLOCK_N=bn,
                    BLOCK_K=bk,
                    num_stages=st,
                    num_warps=4,
                    GROUP_M=8,
                    ORDER=1,
                    SPLIT_K=1,
                )
                k = precompile(M, N, K, cfg)
                init = getattr(k, "_init_handles", None)
                if init is not None:
                    init()
                ptx = k.asm["ptx"]
                row = {"M": M, "N": N, "K": K, **cfg, "n_regs": int(k.n_regs), "n_spills": int(k.n_spills)}
                row.update(shared=int(k.metadata.shared), ptx_lines=ptx.count("\n"), **ptx_counts(ptx))
                rows.append(row)
                print(row, file=sys.stderr, flush=True)
                if K == 128 and bm == 256 and st in (2, 3):
                    (out / f"ptx_{M}x{N}x{K}_{bm}x{bn}x{bk}_s{st}.ptx").write_text(ptx)
    write_rows(out / "short_k_ptx.csv", rows)
    return 0


if __name__ == "__main__":
    sys.exit(main())
