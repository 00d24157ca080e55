"""Diverse top-k rules compared on every measured H200 matmul shape of bench/fidelity.py (no GPU needed).

    python -m bench.diverse_rules [--chip h200] [--pool 32]

For each shape, the model ranks every measured tiling (tiler.rank.rank_candidates); one tiling per distinct
predicted time is kept (as the search reports them), and each rule orders the model's top `--pool` of those:

  hedge      tiler.search.diverse_order, the shipped rule (session 11 on): the best tiling of each distinct tile
             shape, with a pipeline-depth hedge in the 4th slot (the fewest stages among the two best tiles'
             tilings predicted within HEDGE_GAP of the best); hedge@x: the same with the gap x (0.03 to 0.12:
             how the gap was chosen, on the fit shapes only)
  runner-up  the rule of session 10: the best tiling of each distinct tile shape, with the top tile's second-best
             tiling in the 4th slot (diverse_order without a depth knob)
  distinct   the rule before session 10: the best tiling of each distinct tile shape, then the rest
  plain      the predicted order

Printed per rule and k (2, 3, 4, 8), over the fit and the held-out shapes apart (the profile's source strings
say which shapes were fitted): the geometric mean of best measured / best measured among the first k, and on how
many shapes that reaches 0.99.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import numpy as np
import pandas as pd

ROOT = Path(__file__).resolve().parent.parent

from bench.fidelity import DATA, SHAPE, fitted_shapes, merge_measured  # noqa: E402
from tiler.hardware import load_chip  # noqa: E402
from tiler.ops.matmul import Matmul  # noqa: E402
from tiler.ops.matmul.cuda import MatmulCuda  # noqa: E402
from tiler.rank import rank_candidates  # noqa: E402
from tiler.search import diverse_order  # noqa: E402
from tiler.search.result import HEDGE_GAP  # noqa: E402

KS = (2, 3, 4, 8)


def distinct_order(cands: dict, time_us: np.ndarray, shape_knobs) -> np.ndarray:
    """The diverse rule shipped before session 10: the best tiling of each distinct tile shape in predicted order,
    then the rest (diverse_order without the runner-up move). `cands` are ranked best first."""
    key = np.stack([np.asarray(cands[k]) for k in shape_knobs], axis=1)
    _, first = np.unique(key, axis=0, return_index=True)
    lead = np.zeros(len(key), dtype=bool)
    lead[first] = True
    return np.concatenate([np.nonzero(lead)[0], np.nonzero(~lead)[0]])


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--chip", default="h200")
    ap.add_argument("--pool", type=int, default=32)
    args = ap.parse_args(argv)
    chip = load_chip(args.chip)
    fit = fitted_shapes(chip)
    measured = merge_measured([(p.name, pd.read_csv(p)) for p in DATA])
    knobs, depth = MatmulCuda.SHAPE_KNOBS, MatmulCuda.DEPTH_KNOB
    rows = []
    for (m, n, k), d in measured.groupby(SHAPE, sort=False):
        ranked, _ = rank_candidates(Matmul(int(m), int(n), int(k)), chip, d)
        ranked = ranked.drop_duplicates(subset=["predicted_us"]).head(args.pool)
        cands = {key: ranked[key].to_numpy(dtype=np.int64) for key in (*knobs, depth)}
        t = ranked["predicted_us"].to_numpy()
        ms = ranked["ms"].to_numpy()
        best = float(d["ms"].min())
        orders = {
            "hedge": diverse_order(cands, t, knobs, depth)[0],
            **{
                f"hedge@{x}": diverse_order(cands, t, knobs, depth, x)[0]
                for x in (0.03, 0.05, 0.08, 0.12)
                if x != HEDGE_GAP
            },
            "runner-up": diverse_order(cands, t, knobs)[0],
            "distinct": distinct_order(cands, t, knobs),
            "plain": np.arange(t.size),
        }
        shape = f"{int(m)}x{int(n)}x{int(k)}"
        for rule, o in orders.items():
            for kk in KS:
                rows.append(
                    {
                        "fit": shape in fit,
                        "shape": shape,
                        "rule": rule,
                        "k": kk,
                        "q": best / float(ms[o[:kk]].min()),
                    }
                )
    res = pd.DataFrame(rows)
    for fitted, label in ((True, "fit"), (False, "held-out")):
        part = res[res["fit"] == fitted]
        shapes = part["shape"].nunique()
        print(f"{label} ({shapes} shapes): geomean of best / best among the first k (shapes at >= 0.99)")
        for rule, g in part.groupby("rule", sort=False):
            cells = []
            for kk, q in g.groupby("k")["q"]:
                cells.append(f"k={kk} {np.exp(np.log(q).mean()):.4f} ({int((q >= 0.99).sum())})")
            print(f"  {rule:10s} " + "  ".join(cells))
    return 0


if __name__ == "__main__":
    sys.exit(main())
