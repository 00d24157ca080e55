"""Issue 30 item 1: split-K on the last wave only (`TAIL_SPLIT`, tiler/ops/matmul/triton_tma.py) against the
persistent template without it and cuBLAS, on the H200.

A persistent grid of one program per SM runs whole waves of tiles; where the tiles are not a multiple of the SMs,
the last wave leaves SMs idle (3000^3 in 128x256 tiles: 288 tiles = 2 waves + 24 tiles on 24 of 132 SMs).
TAIL_SPLIT = s splits each tile of that last wave into s K slices, which the idle SMs take; the slices add into an
fp32 workspace of the tail tiles, and a second kernel writes those tiles of C.

    python -m bench.gpu.matmul_tail plan     # here: bench/data/matmul_tail_plan.csv
    python -m bench.gpu.matmul_templates run --plan bench/data/matmul_tail_plan.csv --out $OUT   # GPU machine
    python -m bench.gpu.matmul_tail report [CSV]   # default bench/data/h200_matmul_tail.csv

`plan` takes, per shape of the template picks run (bench/data/h200_matmul_template_picks_cstore.csv), its two
fastest persistent tilings without split-K (each a model pick of then), each at TAIL_SPLIT 1, 2, 4 and 8.
`run` times them with the project's runner (do_bench median, L2 flushed, every output checked against an fp32
product) beside cuBLAS in the same run. `report` prints, per shape and tiling, the time at each split over the
time at 1 and cuBLAS over the best, and the geomeans.
"""

from __future__ import annotations

import argparse
import math
from pathlib import Path

from bench.gpu.matmul_templates import KNOBS

DATA = Path(__file__).resolve().parents[1] / "data"
SOURCE = DATA / "h200_matmul_template_picks_cstore.csv"
PLAN = DATA / "matmul_tail_plan.csv"
SPLITS = (1, 2, 4, 8)
TILING = tuple(k for k in KNOBS if k != "SPLIT_K")  # a persistent tiling (SPLIT_K is 1 with a split)
SMS = 132  # the H200's SMs: the persistent grid's size


def plan(out: Path) -> int:
    import pandas as pd

    d = pd.read_csv(SOURCE)
    t = d[(d["TEMPLATE"] == 2) & (d["SPLIT_K"] == 1)].dropna(subset=["ms"])
    t = t.sort_values("ms").drop_duplicates(["M", "N", "K", *TILING])
    t = t.groupby(["M", "N", "K"], sort=True).head(2)
    rows = []
    for _, r in t.iterrows():
        tiles = math.ceil(r["M"] / r["BLOCK_M"]) * math.ceil(r["N"] / r["BLOCK_N"])
        for s in SPLITS:
            rows.append(
                {
                    "M": int(r["M"]),
                    "N": int(r["N"]),
                    "K": int(r["K"]),
                    "group": r["group"],
                    "source": f"tail{s}",
                    **{k: int(r[k]) for k in TILING},
                    "SPLIT_K": 1,
                    "TEMPLATE": 2,
                    "TAIL_SPLIT": s,
                    "tiles": tiles,
                    "tail_tiles": tiles % SMS if s > 1 else 0,
                }
            )
    pd.DataFrame(rows).to_csv(out, index=False)
    print(
        f"wrote {out}: {len(rows)} timings of {len(t)} tilings on {t.groupby(['M', 'N', 'K']).ngroups} shapes"
    )
    return 0


def report(path: Path) -> int:
    import numpy as np
    import pandas as pd

    d = pd.read_csv(path)
    cublas = d[d["source"] == "cublas"].set_index(["M", "N", "K"])["ms"]
    t = d[d["source"] != "cublas"].dropna(subset=["ms"]).copy()
    t["TAIL_SPLIT"] = t["TAIL_SPLIT"].fillna(1).astype(int)
    bad = t[t["rel_err"] > 1e-2]
    wide = t.pivot_table(index=["M", "N", "K", *TILING], columns="TAIL_SPLIT", values="ms").dropna()
    for s in wide.columns:
        wide[f"x{s}"] = wide[1] / wide[s]
    wide["best"] = wide[list(SPLITS)].min(axis=1)
    wide["cublas_over_1"] = [cublas[k[:3]] / v for k, v in zip(wide.index, wide[1], strict=True)]
    wide["cublas_over_best"] = [cublas[k[:3]] / v for k, v in zip(wide.index, wide["best"], strict=True)]
    pred = _predicted(wide.index.to_frame(index=False))
    for s in SPLITS[1:]:
        wide[f"model_x{s}"] = pred[1] / pred[s]
    with pd.option_context("display.width", 240, "display.max_rows", 500):
        print(wide.round(4).to_string())
    g = lambda x: float(np.exp(np.log(np.asarray(x, dtype=float)).mean()))  # noqa: E731
    print(f"\n{len(wide)} tilings; speed-up over TAIL_SPLIT 1 (geomean): "
          + ", ".join(f"{s}: {g(wide[f'x{s}']):.3f}" for s in SPLITS[1:])
          + f"; best split {g(wide[1] / wide['best']):.3f}; cuBLAS / tiling: at 1 {g(wide['cublas_over_1']):.3f}, "
          f"best split {g(wide['cublas_over_best']):.3f}; outputs off by > 1e-2: {len(bad)}")  # fmt: skip
    for s in SPLITS[1:]:
        m, x = np.log(wide[f"x{s}"]), np.log(wide[f"model_x{s}"])
        print(f"split {s}: the model (shipped h200 profile) predicts {g(wide[f'model_x{s}']):.3f}; faster or not "
              f"as measured on {int(((m > 0) == (x > 0)).sum())} of {len(wide)}; median |log(model/measured)| of "
              f"the speed-up {float(np.median(np.abs(x - m))):.3f}")  # fmt: skip
    return 0


def _predicted(t) -> dict:
    """The shipped model's time of each (M, N, K, tiling) at each split: {split: array}."""
    import numpy as np

    from tiler.hardware import load_chip
    from tiler.operator import get_operator
    from tiler.problem import parse_problem

    chip, op = load_chip("h200"), get_operator("matmul", "cuda")
    out = {s: np.empty(len(t)) for s in SPLITS}
    for (m, n, k), rows in t.groupby(["M", "N", "K"]).groups.items():
        p = parse_problem("matmul", {"M": int(m), "N": int(n), "K": int(k)}, "fp16")
        c = {key: t.loc[rows, key].to_numpy(np.int64) for key in TILING}
        c |= {"SPLIT_K": np.ones(len(rows), np.int64), "TEMPLATE": np.full(len(rows), 2)}
        for s in SPLITS:
            idx = t.index.get_indexer(rows)
            out[s][idx] = op.estimate(p, chip, {**c, "TAIL_SPLIT": np.full(len(rows), s)})["time_us"]
    return out


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    sub = ap.add_subparsers(dest="cmd", required=True)
    sub.add_parser("plan").add_argument("--out", type=Path, default=PLAN)
    sub.add_parser("report").add_argument("csv", type=Path, nargs="?", default=DATA / "h200_matmul_tail.csv")
    a = ap.parse_args(argv)
    return plan(a.out) if a.cmd == "plan" else report(a.csv)


if __name__ == "__main__":
    raise SystemExit(main())
