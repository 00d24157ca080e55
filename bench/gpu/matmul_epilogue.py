"""Issue 30 item 1: epilogue subtiling (`EPILOGUE_SUBTILE` 2, tiler/ops/matmul/triton_tma.py) against one bulk copy
of C, on the H200.

A TMA template stores a finished C tile through C's descriptor: the tile is staged in shared memory beside the K
loop's buffers, then copied out in bulk (`triton_tma.tma_c_store` decides where it fits). Subtiled, the tile goes out
as two copies of BLOCK_N / 2 columns, each staged in half the shared memory: the second half's conversion can overlap
the first's copy, and a tiling whose whole C tile did not fit beside its stages (so stored through masked pointers)
now stores through the descriptor.

    python -m bench.gpu.matmul_epilogue plan     # here: bench/data/matmul_epilogue_plan.csv
    python -m bench.gpu.matmul_templates run --plan bench/data/matmul_epilogue_plan.csv --out $OUT  # GPU machine
    python -m bench.gpu.matmul_epilogue report [CSV]     # default bench/data/h200_matmul_epilogue.csv

`plan` takes the TMA-template rows without split-K (tma, persistent; TAIL_SPLIT 1) of the model's picks in
bench/data/h200_matmul_template_picks_tail_ab.csv (new-space rows), one per distinct tiling and shape, at most
PER_CLASS of each class (C through the descriptor at 1 and at 2), each at EPILOGUE_SUBTILE 1 and 2; `run` times them
with the project's runner (do_bench median, L2 flushed, every output checked against an fp32 product) beside cuBLAS.
`report` prints, per tiling, whether C goes through the descriptor at 1 and at 2, the speed-up of 2 over 1, and the
geomeans by that class.
"""

from __future__ import annotations

import argparse
from pathlib import Path

from bench.gpu.matmul_templates import KNOBS

DATA = Path(__file__).resolve().parents[1] / "data"
SOURCE = DATA / "h200_matmul_template_picks_tail_ab.csv"
PLAN = DATA / "matmul_epilogue_plan.csv"
TILING = (*KNOBS, "TEMPLATE")  # the tiling a picks row names
KEY = ["M", "N", "K", *TILING]
PER_CLASS = 30
SMEM_LIMIT = 232448  # the H200's shared memory a block may opt into (torch: shared_memory_per_block_optin)


def plan(out: Path) -> int:
    import pandas as pd

    from tiler.ops.matmul.triton_tma import tma_c_store

    d = pd.read_csv(SOURCE)
    d = d[~d["source"].str.startswith("old_") & (d["source"] != "cublas")].dropna(subset=["ms"])
    d = d[(d["TEMPLATE"] >= 1) & (d["SPLIT_K"] == 1) & (d["TAIL_SPLIT"].fillna(1) == 1)]
    d = d.drop_duplicates(KEY).astype({k: int for k in KEY})
    rows_ok = (d["N"] * 2) % 16 == 0  # fp16 C rows of 16-byte multiples
    for s in (1, 2):
        d[f"desc{s}"] = tma_c_store(
            rows_ok, d["BLOCK_M"], d["BLOCK_N"], d["BLOCK_K"], d["num_stages"], 1, 2, 2, SMEM_LIMIT, s
        )
    d = d.groupby(["desc1", "desc2"]).head(PER_CLASS)
    t = pd.concat([d[KEY + ["desc1", "desc2"]].assign(EPILOGUE_SUBTILE=s, source=f"epi{s}") for s in (1, 2)])
    t.assign(group="picks").to_csv(out, index=False)
    print(f"wrote {out}: {len(t)} timings of {len(d)} tilings")
    return 0


def report(path: Path) -> int:
    import numpy as np
    import pandas as pd

    d = pd.read_csv(path)
    p = pd.read_csv(PLAN).drop_duplicates(KEY)
    t = d[d["source"] != "cublas"].copy()
    t["EPILOGUE_SUBTILE"] = t["EPILOGUE_SUBTILE"].fillna(1).astype(int)
    w = t.pivot_table(index=KEY, columns="EPILOGUE_SUBTILE", values="ms").dropna()
    w = w.join(p.set_index(KEY)[["desc1", "desc2"]])
    w["x2"] = w[1] / w[2]
    g = lambda x: float(np.exp(np.log(np.asarray(x, dtype=float)).mean())) if len(x) else float("nan")  # noqa: E731
    with pd.option_context("display.width", 220, "display.max_rows", 300):
        print(w.round(4).to_string())
    print(f"\n{len(w)} tilings, max rel_err {t['rel_err'].max():.2e}; speed-up of EPILOGUE_SUBTILE 2 over 1 (geomean):"
          f" all {g(w['x2']):.3f}, faster on {int((w['x2'] > 1).sum())}")  # fmt: skip
    for (a, b), h in w.groupby(["desc1", "desc2"]):
        print(f"  C through the descriptor at 1: {a}, at 2: {b} ({len(h)}): {g(h['x2']):.3f}")
    return 0


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    sub = ap.add_subparsers(dest="cmd", required=True)
    sub.add_parser("plan").add_argument("--out", type=Path, default=PLAN)
    sub.add_parser("report").add_argument(
        "csv", type=Path, nargs="?", default=DATA / "h200_matmul_epilogue.csv"
    )
    a = ap.parse_args(argv)
    return plan(a.out) if a.cmd == "plan" else report(a.csv)


if __name__ == "__main__":
    raise SystemExit(main())
