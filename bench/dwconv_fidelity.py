"""How well the depthwise CUDA model ranks H200 measurements, on the shapes fitted and the shapes held out.

    python -m bench.dwconv_fidelity [--picks bench/data/h200_dwconv_picks_v3.csv]

Reads the grid (bench/data/h200_dwconv.csv: every scheme on the 17 shapes of examples/shapes/depthwise_conv.csv)
and the measured model picks, scores them with the shipped h200 profile (its dw_* constants were fitted by
`tiler calibrate` on the 11 shapes not marked `heldout`), and prints per shape and as geomeans over the fitted
and the held-out shapes:

* view (a), the grid: median |log(predicted / measured)|, Spearman, top-1 efficiency (best measured time over
  the measured time of the model's fastest-predicted grid row) and best-of-top-4;
* the scheme: the measured-fastest scheme against the model's (its exhaustive search over the whole space), and
  the pairwise choice the issue is about, group_opt against group_loop (each scheme's best measured — over the
  grid, the picks and each scheme's own top-2 picks, `--scheme-picks` — against each scheme's best predicted, from
  the search with the scheme pinned);
* view (b), the model's own pick: its top-1 tiling from the whole space, measured, over the best time measured
  for the shape (every file), with the best of its top-4 and torch's F.conv2d for reference.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import numpy as np
import pandas as pd

ROOT = Path(__file__).resolve().parents[1]

from tiler.calibrate import shape_quality  # noqa: E402
from tiler.hardware import load_chip  # noqa: E402
from tiler.problem import parse_problem  # noqa: E402
from tiler.rank import rank_candidates  # noqa: E402
from tiler.search import search  # noqa: E402
from tiler.space import load_space  # noqa: E402

FIELDS = ("N", "C", "H", "W", "kh", "kw", "stride", "pad", "dilation")
KNOBS = ("scheme", "groups_per_op", "BLOCK_P", "BLOCK_K", "num_warps", "num_stages")


def geomean(x) -> float:
    x = np.asarray(list(x), dtype=float)
    return float(np.exp(np.log(x).mean())) if x.size else float("nan")


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--grid", default=str(ROOT / "bench" / "data" / "h200_dwconv.csv"))
    ap.add_argument("--picks", default=str(ROOT / "bench" / "data" / "h200_dwconv_picks_v3.csv"))
    ap.add_argument(
        "--scheme-picks",
        default=str(ROOT / "bench" / "data" / "h200_dwconv_picks_schemes.csv"),
        help="each tensor-core scheme's own model picks, measured (joins the grid for the pairwise choice)",
    )
    ap.add_argument("--shapes", default=str(ROOT / "examples" / "shapes" / "depthwise_conv.csv"))
    args = ap.parse_args(argv)
    chip = load_chip("h200")
    space = load_space("depthwise_conv", "cuda")
    grid, picks = pd.read_csv(args.grid), pd.read_csv(args.picks)
    every = pd.concat([grid, picks, pd.read_csv(args.scheme_picks)], ignore_index=True)
    every = every[every["impl"] == "triton"]
    rows = []
    for _, s in pd.read_csv(args.shapes).iterrows():
        p = parse_problem("depthwise_conv", {k: int(s[k]) for k in FIELDS}, str(s["dtype"]))
        g = grid[(grid["name"] == s["name"]) & (grid["impl"] == "triton")]
        ranked, _ = rank_candidates(p, chip, g)
        q = shape_quality(ranked["predicted_us"].to_numpy(), ranked["ms"].to_numpy() * 1e3)
        pk = picks[(picks["name"] == s["name"]) & (picks["impl"] == "triton")]
        torch_ms = float(grid[(grid["name"] == s["name"]) & (grid["impl"] == "torch")]["ms"].min())
        measured = every[every["name"] == s["name"]]
        best = measured["ms"].min()
        # the model's own choice per scheme, from the whole space
        own = {
            sc: search(p, chip, space.pin({"scheme": sc}), top=1)
            for sc in ("group_loop", "group_opt", "vector")
        }
        model_scheme = min(own, key=lambda sc: own[sc].row(0)["time_us"])
        meas = measured.groupby("scheme")["ms"].min()  # each scheme's best: grid, picks and its own picks
        rows.append(
            {
                "shape": s["name"],
                "held": int(s["heldout"]),
                "err": q["err"],
                "spearman": q["spearman"],
                "top1_grid": q["top1"],
                "top4_grid": q["top4"],
                "scheme_meas": meas.idxmin(),
                "scheme_model": model_scheme,
                "opt_vs_loop_meas": "group_opt" if meas["group_opt"] < meas["group_loop"] else "group_loop",
                "opt_over_loop_meas": meas["group_opt"] / meas["group_loop"],
                "opt_vs_loop_model": "group_opt"
                if own["group_opt"].row(0)["time_us"] < own["group_loop"].row(0)["time_us"]
                else "group_loop",
                "pick1": best / float(pk[pk["source"] == "model1"]["ms"].iloc[0]),
                "pick4": best / float(pk["ms"].min()),
                "pick1_vs_torch": torch_ms / float(pk[pk["source"] == "model1"]["ms"].iloc[0]),
            }
        )
    df = pd.DataFrame(rows)
    pd.set_option("display.width", 220)
    print(df.to_string(index=False, float_format=lambda v: f"{v:.3f}"))
    for held, d in df.groupby("held"):
        label = "held-out" if held else "fitted"
        print(
            f"{label} ({len(d)} shapes): median |log ratio| {d['err'].median():.3f}, Spearman {d['spearman'].mean():.3f}; "
            f"grid top-1 geomean {geomean(d['top1_grid']):.3f} (min {d['top1_grid'].min():.3f}), best-of-top-4 "
            f"{geomean(d['top4_grid']):.3f}; model's own pick {geomean(d['pick1']):.3f} (min {d['pick1'].min():.3f}), "
            f"best of its top-4 {geomean(d['pick4']):.3f}; fastest scheme right on {(d['scheme_meas'] == d['scheme_model']).sum()}"
            f"/{len(d)}, group_opt vs group_loop right on {(d['opt_vs_loop_meas'] == d['opt_vs_loop_model']).sum()}/{len(d)}; "
            f"own pick vs torch F.conv2d geomean {geomean(d['pick1_vs_torch']):.2f}x"
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
