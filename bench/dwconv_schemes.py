"""Predicted speed-up of depthwise convolution's group_opt scheme over group_loop on Ascend, per shape.

    python -m bench.dwconv_schemes [--chips ascend910b3,ascend910b4] [--shapes examples/shapes/depthwise_conv.csv]

For every shape of the suite (examples/shapes/depthwise_conv.csv: 17 depthwise layers of MobileNetV2,
EfficientNet-B0, ConvNeXt-T, DeepLabV3 and Mamba/Mamba2, each row naming its source) and every chip, the proven
best tiling of each scheme (an exhaustive search with the scheme pinned) and the best overall. Prints one row per
(chip, shape): the best time of each scheme, group_opt's packing factor, useful-MAC fractions, the speed-up
group_loop / group_opt and the bound of each; then the geomean speed-up per chip, all measured in this one run.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

import numpy as np
import pandas as pd

ROOT = Path(__file__).resolve().parents[1]

from tiler.hardware import load_chip  # noqa: E402
from tiler.problem import parse_problem  # noqa: E402
from tiler.search import search  # noqa: E402
from tiler.space import load_space  # noqa: E402

FIELDS = ("N", "C", "H", "W", "kh", "kw", "stride", "pad", "dilation")
SCHEMES = ("group_loop", "group_opt", "vector")


def best_per_scheme(problem, chip, space) -> dict:
    out = {}
    for s in SCHEMES:
        r = search(problem, chip, space.pin({"scheme": s}), top=1)
        out[s] = (r.tiling(0), r.row(0))
    return out


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--chips", default="ascend910b3,ascend910b4")
    ap.add_argument("--shapes", default=str(ROOT / "examples" / "shapes" / "depthwise_conv.csv"))
    args = ap.parse_args(argv)
    shapes = pd.read_csv(args.shapes)
    rows = []
    t0 = time.perf_counter()
    for chip_id in args.chips.split(","):
        chip = load_chip(chip_id)
        space = load_space("depthwise_conv", chip.family)
        for _, s in shapes.iterrows():
            p = parse_problem("depthwise_conv", {k: int(s[k]) for k in FIELDS}, str(s["dtype"]))
            best = best_per_scheme(p, chip, space)
            loop, opt, vec = (best[k][1] for k in SCHEMES)
            rows.append(
                {
                    "chip": chip_id,
                    "shape": s["name"],
                    "loop_us": loop["time_us"],
                    "opt_us": opt["time_us"],
                    "vector_us": vec["time_us"],
                    "G": best["group_opt"][0]["groups_per_op"],
                    "useful_loop": loop["useful_mac_fraction"],
                    "useful_opt": opt["useful_mac_fraction"],
                    "speedup": loop["time_us"] / opt["time_us"],
                    "bound_loop": loop["bound"],
                    "bound_opt": opt["bound"],
                    "best": min(SCHEMES, key=lambda k: best[k][1]["time_us"]),
                }
            )
    df = pd.DataFrame(rows)
    pd.set_option("display.width", 200)
    print(df.to_string(index=False, float_format=lambda v: f"{v:.3g}"))
    for chip_id, d in df.groupby("chip", sort=False):
        geo = float(np.exp(np.log(d["speedup"]).mean()))
        print(
            f"{chip_id}: group_loop / group_opt geomean {geo:.2f}x over {len(d)} shapes "
            f"(min {d['speedup'].min():.2f}, max {d['speedup'].max():.2f}); best scheme counts "
            + ", ".join(f"{k} {v}" for k, v in d["best"].value_counts().items())
        )
    print(
        f"{len(df)} (chip, shape) pairs x 3 schemes searched exhaustively in {time.perf_counter() - t0:.1f} s"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
