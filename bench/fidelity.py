"""How well the cuda matmul model ranks real tilings: every measured shape, fitted and held-out apart.

For each shape of the measured tables (bench/data/h200_matmul_cal.csv, the shared calibration set, and
bench/data/h200_matmul_new.csv when present) the model ranks the measured Triton tilings (tiler.rank) and we
report, from the measured times of that shape:

  top-1   best measured / measured time of the model's top pick            (1.0 = it picked the fastest)
  top-4   best measured / best measured time among the model's top 4
  rho     Spearman rank correlation of predicted and measured times
  peer    top-1 of nvMatmulHeuristics (the first `source=peer` row of a shape is its top pick), where present

Shapes whose rows were used to fit the profile's [efficiency] constants are read from the profile's source
strings ("... shapes AxBxC, ...") and summarised apart from the held-out ones. Prints a table and a summary;
always exits 0.

    python3 bench/fidelity.py [--chip h200] [--data FILE.csv ...]
"""

from __future__ import annotations

import argparse
import re
import sys
from pathlib import Path

import numpy as np
import pandas as pd

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from tiler.calibrate import shape_quality  # noqa: E402
from tiler.hardware import load_chip  # noqa: E402
from tiler.problem import Matmul  # noqa: E402
from tiler.rank import rank_candidates  # noqa: E402

DATA = [ROOT / "bench" / "data" / "h200_matmul_cal.csv", ROOT / "bench" / "data" / "h200_matmul_new.csv"]


def fitted_shapes(chip) -> set[str]:
    """Shapes named by the sources of the profile's fitted values."""
    out: set[str] = set()
    for k, tag in chip.tags.items():
        if tag == "fitted":
            m = re.search(r"shapes ([0-9x, :a-z]+?)\)", chip.sources.get(k, ""))
            if m:
                out |= {s.strip() for s in m.group(1).split(",") if s.strip()}
    return out


def evaluate(chip, frames: list[tuple[str, pd.DataFrame]]) -> pd.DataFrame:
    rows = []
    for name, df in frames:
        tri = df[df["impl"].astype(str) == "triton"] if "impl" in df.columns else df
        for (m, n, k), d in tri.groupby(["M", "N", "K"], sort=False):
            p = Matmul(int(m), int(n), int(k))
            ranked, rejected = rank_candidates(p, chip, d)
            best = float(d["ms"].min())
            q = shape_quality(ranked["predicted_us"].to_numpy() / 1e3, ranked["ms"].to_numpy())
            q["top1"] = best / float(ranked["ms"].iloc[0])  # against every measured row, rejected ones too
            q["top4"] = best / float(ranked["ms"].iloc[:4].min())
            peer = d[d["source"].astype(str) == "peer"] if "source" in d.columns else d.iloc[:0]
            rows.append(
                {
                    "data": name,
                    "shape": f"{p.M}x{p.N}x{p.K}",
                    "rows": len(d),
                    "rejected": len(rejected),
                    "best_ms": best,
                    "pick_ms": float(ranked["ms"].iloc[0]),
                    "pred_ms": float(ranked["predicted_us"].iloc[0]) / 1e3,
                    "top1": q["top1"],
                    "top4": q["top4"],
                    "rho": q["spearman"],
                    "err": q["err"],
                    "peer": best / float(peer["ms"].iloc[0]) if len(peer) else np.nan,
                }
            )
    return pd.DataFrame(rows)


def _geo(x: pd.Series) -> float:
    x = x.dropna()
    return float(np.exp(np.log(x).mean())) if len(x) else float("nan")


def summary(res: pd.DataFrame) -> str:
    lines = []
    for label, g in (("fitted", res[res.fit]), ("held-out", res[~res.fit]), ("all", res)):
        if not len(g):
            continue
        peer = g.dropna(subset=["peer"])
        peer_txt = (
            (
                f"; peer top-1 geomean {_geo(peer.peer):.3f} (ours on the same {len(peer)} shapes "
                f"{_geo(peer.top1):.3f})"
            )
            if len(peer)
            else ""
        )
        lines.append(
            f"{label:9s} {len(g):2d} shapes: top-1 geomean {_geo(g.top1):.3f} min {g.top1.min():.3f} | "
            f"best-of-top-4 geomean {_geo(g.top4):.3f} min {g.top4.min():.3f} | Spearman mean "
            f"{g.rho.mean():.3f} min {g.rho.min():.3f} | median |log(pred/meas)| {g.err.median():.3f}"
            + peer_txt
        )
    return "\n".join(lines)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--chip", default="h200")
    ap.add_argument(
        "--data", nargs="*", default=None, help="measured CSV files (default: bench/data/h200_matmul_*.csv)"
    )
    args = ap.parse_args(argv)
    try:
        chip = load_chip(args.chip)
        files = [Path(f) for f in args.data] if args.data else [f for f in DATA if f.is_file()]
        frames = [(f.name, pd.read_csv(f)) for f in files]
        res = evaluate(chip, frames)
        fit = fitted_shapes(chip)
        res["fit"] = res["shape"].isin(fit) & (res["data"] == DATA[0].name)
        pd.set_option("display.width", 200)
        show = res.assign(fit=np.where(res.fit, "fit", "held")).drop(columns=["rows"])
        print(show.to_string(index=False, float_format=lambda v: f"{v:.3f}"))
        print()
        print(
            f"profile {chip.id}: {len(fit)} shapes used in the fit"
            if fit
            else f"profile {chip.id}: no fitted constants (every shape is held out)"
        )
        print(summary(res))
    except Exception as exc:  # a benchmark report: say what went wrong, never fail the caller
        print(f"fidelity: {type(exc).__name__}: {exc}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
