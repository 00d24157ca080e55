"""Issue 30: the TMA templates' epilogue, C through a TMA descriptor against masked pointer stores, head to head.

For each shape (those whose C rows Triton cannot prove 16-element aligned, e.g. N = 3000, and controls), the model's
top-1 TMA tiling of bench/data/matmul_template_picks_fitted_plan.csv is timed with the epilogue's two stores in
alternating rounds (do_bench median, L2 flushed, random inputs), beside cuBLAS (torch.matmul), each output checked
against an fp32 product. Writes $OUT/h200_tma_store_ab.csv.

    python -m bench.gpu.tma_store_ab --out $OUT      # GPU machine
"""

from __future__ import annotations

import argparse
import csv
import os
from pathlib import Path

from tiler.ops.matmul.cuda.constants import KNOBS  # the CUDA matmul knobs, TEMPLATE included

DATA = Path(__file__).resolve().parents[1] / "data"
SHAPES = [
    (3000, 3000, 3000),
    (3000, 5000, 2000),
    (2500, 7000, 3000),
    (8192, 1000, 1000),
    (1000, 3000, 5000),
    (4000, 12000, 1000),
    (1000, 1000, 1000),
    (6000, 2000, 1500),
    (4096, 4096, 4096),  # control: C rows provably aligned
    (2048, 28672, 4096),  # control
]


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", type=Path, default=Path(os.environ.get("OUT", "results")))
    ap.add_argument("--rounds", type=int, default=3)
    a = ap.parse_args()
    import torch
    import triton

    from tiler.ops.matmul import triton_runner as tm
    from tiler.ops.matmul.triton_tma import launcher

    plan = {}
    with open(DATA / "matmul_template_picks_fitted_plan.csv") as f:
        for r in csv.DictReader(f):
            key = (int(r["M"]), int(r["N"]), int(r["K"]))
            if int(r["TEMPLATE"]) > 0 and int(r["SPLIT_K"]) == 1 and key not in plan:
                plan[key] = {k: int(r[k]) for k in KNOBS}
    sms = torch.cuda.get_device_properties(0).multi_processor_count
    a.out.mkdir(parents=True, exist_ok=True)
    rows = []
    g = torch.Generator(device="cuda")
    for M, N, K in SHAPES:
        cfg = plan.get((M, N, K))
        if cfg is None:
            continue
        g.manual_seed(M + N + K)
        x, y = tm.operands(torch, M, N, K, "nn", g, "cuda", torch.float16)
        ref = torch.matmul(x.float(), y.float())
        fns = {}
        # the TMA store stages the C tile in shared memory: fewer K stages where the pick's would not fit
        limit = torch.cuda.get_device_properties(0).shared_memory_per_block_optin
        per_stage = (cfg["BLOCK_M"] + cfg["BLOCK_N"]) * cfg["BLOCK_K"] * 2
        fit = (limit - 1024 - cfg["BLOCK_M"] * cfg["BLOCK_N"] * 2) // per_stage
        small = dict(cfg, num_stages=int(max(1, min(cfg["num_stages"], fit))))
        for store, c in (("pointer", cfg), ("pointer_same_stages", small), ("tma", small)):
            out = torch.full((M, N), float("nan"), dtype=torch.float16, device="cuda")
            fn = launcher(x, y, out, c, sms, c_desc=store == "tma")
            fn()
            torch.cuda.synchronize()
            err = (torch.linalg.vector_norm(out.float() - ref) / torch.linalg.vector_norm(ref)).item()
            fns[store] = (fn, err)
        fns["cublas"] = (lambda x=x, y=y: torch.matmul(x, y), 0.0)
        for r in range(a.rounds):
            for name, (fn, err) in fns.items():
                ms = float(triton.testing.do_bench(fn, warmup=25, rep=100, return_mode="median"))
                rows.append({"M": M, "N": N, "K": K, **cfg, "tma_stages": small["num_stages"], "store": name,
                             "round": r, "ms": ms, "rel_err": err})  # fmt: skip
        med = {n: sorted(r["ms"] for r in rows if (r["M"], r["N"], r["K"]) == (M, N, K) and r["store"] == n)[1]
               for n in fns}  # fmt: skip
        print(f"{M}x{N}x{K} T{cfg['TEMPLATE']} s{cfg['num_stages']}->{small['num_stages']}: pointer same stages "
              f"{med['pointer_same_stages'] * 1e3:.1f} us; pointer {med['pointer'] * 1e3:.1f} us, tma {med['tma'] * 1e3:.1f} "
              f"us, cuBLAS {med['cublas'] * 1e3:.1f} us; cuBLAS/tma {med['cublas'] / med['tma']:.3f}, "
              f"cuBLAS/pointer {med['cublas'] / med['pointer']:.3f}; rel_err {fns['tma'][1]:.1e}", flush=True)  # fmt: skip
    with open(a.out / "h200_tma_store_ab.csv", "w", newline="") as f:
        w = csv.DictWriter(f, fieldnames=list(rows[0]))
        w.writeheader()
        w.writerows(rows)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
