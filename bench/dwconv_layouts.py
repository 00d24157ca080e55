"""Depthwise convolution in both memory layouts on the H200: the fit of the CUDA model's constants on the NCHW and
NHWC grids together, and the model's picks against the vendor's faster format.

    python -m bench.dwconv_layouts fit [--out hardware/h200.toml]
    python -m bench.dwconv_layouts grid
    python -m bench.dwconv_layouts report [--picks bench/data/h200_dwconv_layout_picks.csv]

`fit` joins bench/data/h200_dwconv.csv (every scheme, NCHW) and bench/data/h200_dwconv_nhwc.csv (the NHWC vector
kernel's grid) and runs `tiler calibrate` on the shapes of examples/shapes/depthwise_conv.csv not marked
`heldout`, in both layouts; the held-out shapes (both layouts) are reported apart, never fitted. With --out it
writes the profile (the shipped one was written so).

`grid` scores the shipped profile on both grids: per shape and layout, the measured time of the model's
fastest-predicted grid row over the best measured (top-1) and Spearman; geomeans over the fitted and the held-out
shapes.

`report` reads one measured run of the model's picks (bench/gpu/dwconv_picks.py --layout L, timed by
bench/gpu/dwconv_measure.py --candidates ... --layout L: each shape's torch rows in both formats and the picks
on the same values) and prints per shape the model's top-1 and best of its top-4 over the faster torch format,
and their geomeans over the CNN layers and the 1-D (Mamba) convolutions, per layout and for the held-out shapes.
"""

from __future__ import annotations

import argparse
import sys
import tempfile
from pathlib import Path

import numpy as np
import pandas as pd

from tiler.api import calibrate
from tiler.calibrate import write_profile
from tiler.problem import parse_problem

DATA = Path(__file__).resolve().parent / "data"
SHAPES = Path(__file__).resolve().parents[1] / "examples" / "shapes" / "depthwise_conv.csv"
# the NHWC grid: strips of one pixel (h200_dwconv_nhwc.csv) and of 2 and 4 columns (measured in a later run)
GRIDS = {
    "nchw": (DATA / "h200_dwconv.csv",),
    "nhwc": (DATA / "h200_dwconv_nhwc.csv", DATA / "h200_dwconv_nhwc_strip_grid.csv"),
}
FIELDS = ("N", "C", "H", "W", "kh", "kw", "stride", "pad", "dilation")
JOINED = "h200_dwconv_both_layouts.csv"  # the name the fitted values' source gives the joined table


def geomean(x) -> float:
    x = np.asarray(list(x), dtype=float)
    return float(np.exp(np.log(x).mean())) if x.size else float("nan")


def _labels(shapes: pd.DataFrame) -> list[str]:
    out = []
    for _, r in shapes.iterrows():
        for layout in GRIDS:
            fields = {**{k: int(r[k]) for k in FIELDS}, "layout": layout}
            out.append(parse_problem("depthwise_conv", fields, str(r["dtype"])).label())
    return out


def read_grid(layout: str) -> pd.DataFrame:
    """The measured Triton rows of a layout's grid files, one table (strip 1 where a file predates the knob)."""
    out = []
    for path in GRIDS[layout]:
        g = pd.read_csv(path)
        g = g[g["impl"] == "triton"].copy()
        g["layout"] = g["layout"].fillna(layout) if "layout" in g else layout
        g["STRIP"] = g["STRIP"].fillna(1).astype(int) if "STRIP" in g else 1
        out.append(g)
    return pd.concat(out, ignore_index=True)


def fit(out: str | None) -> int:
    grids = [read_grid(layout) for layout in GRIDS]
    shapes = pd.read_csv(SHAPES)
    with tempfile.TemporaryDirectory() as tmp:
        joined = Path(tmp) / JOINED
        pd.concat(grids, ignore_index=True).to_csv(joined, index=False)
        res = calibrate(
            "depthwise_conv",
            "h200",
            str(joined),
            fit_shapes=_labels(shapes[shapes["heldout"] == 0]),
            note="joined from h200_dwconv.csv (nchw), h200_dwconv_nhwc.csv and h200_dwconv_nhwc_strip_grid.csv "
            "(nhwc); held out for testing: the 6 "
            "shapes marked heldout in examples/shapes/depthwise_conv.csv, in both layouts",
        )
    print(res.summary())
    if out:
        write_profile(res, out)
        print(f"wrote {out}", file=sys.stderr)
    return 0


def grid() -> int:
    from tiler.hardware import load_chip
    from tiler.rank import rank_candidates

    chip = load_chip("h200")
    shapes = pd.read_csv(SHAPES).set_index("name")
    out = []
    for layout in GRIDS:
        g = read_grid(layout).drop(columns=["layout"])
        for name, rows in g.groupby("name", sort=False):
            s = shapes.loc[name]
            p = parse_problem("depthwise_conv", {**{k: int(s[k]) for k in FIELDS}, "layout": layout}, "fp16")
            ranked, _ = rank_candidates(p, chip, rows)
            rho = pd.Series(ranked["predicted_us"]).rank().corr(pd.Series(ranked["ms"]).rank())
            top1 = float(rows["ms"].min() / ranked["ms"].iloc[0])
            out.append(
                {"name": name, "layout": layout, "heldout": int(s["heldout"]), "top1": top1, "spearman": rho}
            )
    t = pd.DataFrame(out)
    print(t.to_string(index=False, float_format=lambda v: f"{v:.3f}"))
    for (layout, held), h in t.groupby(["layout", "heldout"], sort=False):
        print(
            f"{layout} {'held-out' if held else 'fitted'} ({len(h)}): top-1 {geomean(h['top1']):.3f} "
            f"(min {h['top1'].min():.3f}), Spearman mean {h['spearman'].mean():.3f}"
        )
    return 0


def report(picks: str) -> int:
    d = pd.read_csv(picks)
    shapes = pd.read_csv(SHAPES).set_index("name")
    rows = []
    for (name, layout), g in d.groupby(["name", "layout"], sort=False):
        torch = g[g["impl"] == "torch"]
        vendor = float(torch["ms"].min())
        fmt = str(torch.loc[torch["ms"].idxmin(), "source"])
        mine = g[g["impl"] == "triton"]
        top1 = mine[mine["source"] == "model1"]["ms"]
        if top1.empty:
            continue
        rank = mine["source"].str.extract(r"model(\d+)")[0].astype(float)
        best4 = float(mine[rank <= 4]["ms"].min())
        rows.append(
            {
                "name": name,
                "layout": layout,
                "heldout": int(shapes.loc[name, "heldout"]),
                "conv1d": int(shapes.loc[name, "kw"] == 1 or shapes.loc[name, "kh"] == 1),
                "vendor": fmt,
                "vendor_ms": vendor,
                "top1_ms": float(top1.iloc[0]),
                "top1_vs_vendor": vendor / float(top1.iloc[0]),
                "best4_vs_vendor": vendor / best4,
            }
        )
    t = pd.DataFrame(rows)
    with pd.option_context("display.width", 200, "display.max_rows", 200):
        print(t.to_string(index=False, float_format=lambda v: f"{v:.4g}"))
    print("\n(vendor time / tiling time: above 1, the tiling is faster than torch's faster memory format)")
    for layout, g in t.groupby("layout", sort=False):
        for kind, h in (("CNN layers", g[g["conv1d"] == 0]), ("conv1d", g[g["conv1d"] == 1])):
            held = h[h["heldout"] == 1]
            print(
                f"{layout} {kind} ({len(h)}): top-1 {geomean(h['top1_vs_vendor']):.3f}x, best of top-4 "
                f"{geomean(h['best4_vs_vendor']):.3f}x, top-1 ahead on {int((h['top1_vs_vendor'] > 1).sum())}; "
                f"held out ({len(held)}): top-1 {geomean(held['top1_vs_vendor']):.3f}x"
            )
    return 0


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    sub = ap.add_subparsers(dest="cmd", required=True)
    f = sub.add_parser("fit", help="calibrate the depthwise constants on both layouts' grids")
    f.add_argument("--out", help="write the fitted profile here (e.g. hardware/h200.toml)")
    sub.add_parser("grid", help="the shipped profile's top-1 and Spearman on both layouts' grids")
    r = sub.add_parser("report", help="the measured picks against torch's faster memory format")
    r.add_argument("--picks", default=str(DATA / "h200_dwconv_layout_picks.csv"))
    args = ap.parse_args(argv)
    if args.cmd == "fit":
        return fit(args.out)
    return grid() if args.cmd == "grid" else report(args.picks)


if __name__ == "__main__":
    sys.exit(main())
