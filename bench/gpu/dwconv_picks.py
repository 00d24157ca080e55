"""Write the depthwise model's own picks for the H200 (top-N distinct predictions from the whole space, per shape)
as a candidates CSV for bench/gpu/dwconv_measure.py --candidates.

    python -m bench.gpu.dwconv_picks --top 4 --out bench/data/dwconv_model_picks.csv
    python -m bench.gpu.dwconv_picks --top 4 --layout nhwc --out bench/data/dwconv_model_picks_nhwc.csv
    python -m bench.gpu.dwconv_picks --top 2 --scheme group_loop --scheme group_opt --out FILE   # each scheme's own best

Run it with the profile whose constants were fitted on the shapes not held out (hardware/h200.toml); the picks of
the held-out shapes, measured on the GPU, are the model's own top-1 efficiency test (bench/dwconv_fidelity.py).
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import pandas as pd

ROOT = Path(__file__).resolve().parents[2]

from tiler.hardware import load_chip  # noqa: E402
from tiler.problem import parse_problem  # noqa: E402
from tiler.search import search  # noqa: E402
from tiler.space import load_space  # noqa: E402

FIELDS = ("N", "C", "H", "W", "kh", "kw", "stride", "pad", "dilation")


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--top", type=int, default=4)
    ap.add_argument("--chip", default="h200")
    ap.add_argument("--shapes", default=str(ROOT / "examples" / "shapes" / "depthwise_conv.csv"))
    ap.add_argument("--out", required=True)
    ap.add_argument("--layout", default="nchw", help="the problems' memory layout (nchw, nhwc)")
    ap.add_argument(
        "--scheme", action="append", default=None, help="pin the scheme (repeatable: one search each)"
    )
    args = ap.parse_args(argv)
    chip = load_chip(args.chip)
    space = load_space("depthwise_conv", chip.family)
    rows = []
    for _, s in pd.read_csv(args.shapes).iterrows():
        fields = {**{k: int(s[k]) for k in FIELDS}, "layout": args.layout}
        p = parse_problem("depthwise_conv", fields, str(s["dtype"]))
        for scheme in args.scheme or [None]:
            res = search(p, chip, space.pin({"scheme": scheme}) if scheme else space, top=args.top)
            tag = f"model_{scheme}" if scheme else "model"
            for i in range(len(res.est["time_us"])):
                t, us = res.tiling(i), res.row(i)["time_us"]
                rows.append({"name": s["name"], **t, "source": f"{tag}{i + 1}", "predicted_us": us})
    pd.DataFrame(rows).to_csv(args.out, index=False)
    print(f"wrote {len(rows)} picks to {args.out}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
