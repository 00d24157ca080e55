"""A/B of two flash-attention kernel files on the GPU machine (run THERE): the same configs, inputs and timing.

    python -m bench.gpu.fa_ab --before OLD.py [--after tiler/ops/flash_attention/triton_kernels.py] \
        [--picks bench/data/h200_fa_vs_sdpa.csv] [--rank 1] --out $OUT/h200_fa_ab.csv

For each shape of --picks, its configs of rank <= --rank run with both kernel files on the same inputs, each
checked against torch's SDPA and timed (do_bench median, L2 flushed), before and after alternating; the output
has both times and before/after (above 1: the after file is faster).
"""

from __future__ import annotations

import argparse
import csv
import math
import sys
from pathlib import Path

from bench.gpu.gpu_measure import load_module, log

ROOT = Path(__file__).resolve().parents[2]
FIELDS = ("B", "heads", "kv_heads", "S1", "S2", "D", "causal")
KNOBS = ("BLOCK_M", "BLOCK_N", "num_stages", "num_warps", "ORDER")


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--before", required=True)
    ap.add_argument("--after", default=str(ROOT / "tiler" / "ops" / "flash_attention" / "triton_kernels.py"))
    ap.add_argument("--picks", default=str(ROOT / "bench" / "data" / "h200_fa_vs_sdpa.csv"))
    ap.add_argument("--rank", type=int, default=1)
    ap.add_argument("--out", required=True)
    args = ap.parse_args(argv)
    import triton

    kern = {
        "before": load_module("fa_before", Path(args.before)),
        "after": load_module("fa_after", Path(args.after)),
    }
    with open(args.picks, newline="") as f:
        picks = [r for r in csv.DictReader(f) if int(r["rank"]) <= args.rank]
    rows, ratios = [], []
    for r in picks:
        shape = {k: int(r[k]) for k in FIELDS}
        cfg = {k: int(r[k]) for k in KNOBS}
        q, k, v = kern["after"].inputs(*(shape[f] for f in FIELDS[:-1]))
        causal = bool(shape["causal"])
        ref = kern["after"].reference(q, k, v, causal).float()
        ms = {}
        for name in ("before", "after", "before", "after"):
            o = q.new_empty(q.shape)
            kern[name].attention(q, k, v, cfg, causal, o)
            err = float((o.float() - ref).abs().max())
            if not err < 2e-2:
                raise ArithmeticError(f"{name} {shape} {cfg}: max |error| {err:.3g}")
            t = triton.testing.do_bench(
                lambda m=kern[name], a=(q, k, v, cfg, causal, o): m.attention(*a),
                warmup=5,
                rep=25,
                return_mode="median",
            )
            ms[name] = min(ms.get(name, math.inf), float(t))
        ratios.append(ms["before"] / ms["after"])
        rows.append({**shape, **cfg, "rank": r["rank"], "before_ms": ms["before"], "after_ms": ms["after"]})
        log(f"{shape} {cfg}: before {ms['before']:.4f} after {ms['after']:.4f} ms ({ratios[-1]:.3f}x)")
    with open(args.out, "w", newline="") as f:
        w = csv.DictWriter(f, fieldnames=list(rows[0]))
        w.writeheader()
        w.writerows(rows)
    g = math.exp(sum(math.log(x) for x in ratios) / len(ratios))
    print(f"{len(rows)} configs: before/after geomean {g:.3f} (min {min(ratios):.3f}, max {max(ratios):.3f})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
