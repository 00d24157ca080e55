"""How well the cuda matmul model ranks real tilings: every measured shape, fitted and held-out apart.

Measured data (all fp16 on the same H200; the same kernel and timing protocol):

  bench/data/h200_matmul_cal.csv        the shared calibration set: 16 shapes x ~104 tilings (grid + peer)
  bench/data/h200_matmul_new.csv        16 new shapes x the fixed 100-config grid
  bench/data/h200_model_picks_run1.csv  measured times of the model's top-8 picks, 23 shapes
  bench/data/h200_matmul_extra.csv      7 extra shapes x the grid, and the 23 shapes' picks again
  bench/data/h200_model_picks_refit_run.csv  the re-fitted model's picks, 15 held-out shapes
  bench/data/h200_matmul_run4.csv       run 4: old top-4 and new top-8 picks, 28 shapes; the grid on 6 new shapes
  bench/data/h200_matmul_run5.csv       run 5: the distinct-time top-8 picks not measured before, same 28 shapes
  bench/data/h200_matmul_run6.csv       run 6: 10 new shapes x the grid, and the v4 picks (tie orders) of them
  bench/data/h200_matmul_run6b.csv      run 6: the v4 picks not measured before of 18 of the 28 earlier shapes
  bench/data/h200_matmul_run9.csv       run 9: 12 more new shapes x the grid, and the final model's picks of them
  bench/data/h200_matmul_run10[ab].csv  run 10: issue 16's 24 shape-class GEMMs (bench/shape_classes.py) x the grid,
                                        the model's plain and diverse top-8, NVIDIA's top-4 and 24 random tilings
  bench/data/h200_matmul_run11.csv      run 11: the re-fitted (short-row) model's top-8 picks of those 24 shapes
                                        not measured in run 10
  bench/data/h200_matmul_run12.csv      run 12: the picks of the model with shared memory as allocated not measured
                                        before (28)

A (shape, tiling) measured more than once is one row with the median time. Two views per shape:

(a) ranking: the model (the profile as it is now) ranks every measured Triton tiling of the shape. Its top picks
  are taken as the search reports them: one per distinct predicted time (exact ties, e.g. orders the model cannot
  tell apart, take one slot: the plainest setting, search.top_distinct); the summary also gives best-of-top-4
  with exact ties broken the worst way, slowest measured first.
  top-1   best measured / measured time of the model's top pick            (1.0 = it picked the fastest)
  top-4   best measured / best measured time among the model's top 4
  rho     Spearman rank correlation of predicted and measured times
  peer    top-1 of nvMatmulHeuristics (the first `source=peer` row of a shape is its top pick), where present

(b) the model's own picks, fixed history: bench/data/model_picks_h200.csv holds the top-8 of an exhaustive
  search over the whole space made with the profile *of that day* (2026-11-30, before any re-fit); their measured
  times are in the picks files. pick1 = best measured (grid and picks) / measured time of its rank-1 pick, pick4
  the same over its ranks 1-4. These figures do not change when the profile changes.

(c) the profile as it is now searches the whole space again: now1 = best measured / measured time of its rank-1
  pick *if* that tiling was measured (else empty, and `now_measured` says how many of its top 4 were).

Shapes whose rows were used to fit the profile's [efficiency] constants are read from the profile's source
strings ("... shapes AxBxC, ...") and summarised apart from the held-out ones. Prints tables and a summary;
always exits 0.

    python -m bench.fidelity [--chip h200] [--data FILE.csv ...] [--picks FILE.csv] [--no-search]
"""

from __future__ import annotations

import argparse
import re
import sys
from pathlib import Path

import numpy as np
import pandas as pd

ROOT = Path(__file__).resolve().parent.parent

from tiler.calibrate import shape_quality  # noqa: E402
from tiler.hardware import load_chip  # noqa: E402
from tiler.operator import get_operator, tie_preference  # noqa: E402
from tiler.ops.matmul import Matmul  # noqa: E402
from tiler.rank import rank_candidates  # noqa: E402
from tiler.search import top_distinct  # noqa: E402

DATA_DIR = ROOT / "bench" / "data"
DATA = [
    DATA_DIR / "h200_matmul_cal.csv",
    DATA_DIR / "h200_matmul_new.csv",
    DATA_DIR / "h200_model_picks_run1.csv",
    DATA_DIR / "h200_matmul_extra.csv",
    DATA_DIR / "h200_model_picks_refit_run.csv",
    DATA_DIR / "h200_matmul_run4.csv",
    DATA_DIR / "h200_matmul_run5.csv",
    DATA_DIR / "h200_matmul_run6.csv",
    DATA_DIR / "h200_matmul_run6b.csv",
    DATA_DIR / "h200_matmul_run9.csv",
    DATA_DIR / "h200_matmul_run10a.csv",
    DATA_DIR / "h200_matmul_run10b.csv",
    DATA_DIR / "h200_matmul_run11.csv",
    DATA_DIR / "h200_matmul_run12.csv",
]
PICKS = DATA_DIR / "model_picks_h200.csv"
KNOBS = ["BLOCK_M", "BLOCK_N", "BLOCK_K", "num_stages", "num_warps", "GROUP_M", "ORDER", "SPLIT_K"]
SHAPE = ["M", "N", "K"]


def fitted_shapes(chip) -> set[str]:
    """Shapes named by the sources of the profile's fitted matmul values (the depthwise constants, fitted on
    their own data, are not this bench's)."""
    from tiler.ops.matmul import cuda as matmul_cuda

    out: set[str] = set()
    for k, tag in chip.tags.items():
        if tag == "fitted" and (k in matmul_cuda.FITTABLE or k in matmul_cuda.TIE_KEYS):
            m = re.search(r"shapes ([0-9x, :a-z]+?)\)", chip.sources.get(k, ""))
            if m:
                out |= {s.strip() for s in m.group(1).split(",") if s.strip()}
    return out


def merge_measured(frames: list[tuple[str, pd.DataFrame]]) -> pd.DataFrame:
    """Triton rows of all files, one per (shape, tiling): the median time of its measurements.

    `source` is the first one seen (files in the order given: grid/peer before model), `n` the number of
    measurements, `data` the file of the first one.
    """
    parts = []
    for name, df in frames:
        tri = df[df["impl"].astype(str) == "triton"] if "impl" in df.columns else df
        tri = tri.assign(data=name)
        if "source" not in tri.columns:
            tri = tri.assign(source="")
        parts.append(tri[[*SHAPE, *KNOBS, "ms", "source", "data"]])
    allr = pd.concat(parts, ignore_index=True)
    for k in (*SHAPE, *KNOBS):
        allr[k] = allr[k].astype(np.int64)
    return allr.groupby([*SHAPE, *KNOBS], sort=False, as_index=False).agg(
        ms=("ms", "median"), n=("ms", "size"), source=("source", "first"), data=("data", "first")
    )


def _key(m, n, k) -> str:
    return f"{int(m)}x{int(n)}x{int(k)}"


def evaluate(chip, measured: pd.DataFrame) -> pd.DataFrame:
    """(a): the model ranks every measured tiling of each shape."""
    rows = []
    for (m, n, k), d in measured.groupby(SHAPE, sort=False):
        p = Matmul(int(m), int(n), int(k))
        ranked, rejected = rank_candidates(p, chip, d)
        best = float(d["ms"].min())
        q = shape_quality(ranked["predicted_us"].to_numpy() / 1e3, ranked["ms"].to_numpy())
        # the model's top picks as the search reports them: one per distinct predicted time (search.top_distinct)
        names = [k for k in KNOBS if k in ranked]
        cands = {k: ranked[k].to_numpy(dtype=np.int64) for k in names}
        prefer = tie_preference(get_operator("matmul", chip.family), p, chip, cands)
        pick = ranked["ms"].to_numpy()[
            top_distinct(cands, ranked["predicted_us"].to_numpy(), names, 4, prefer)
        ]
        q["top1"] = best / float(pick[0])  # against every measured row, rejected ones too
        q["top4"] = best / float(pick.min())
        # the same if exact ties were broken the worst way (their slowest measured first): what ties can cost
        worst = ranked.sort_values(["predicted_us", "ms"], ascending=[True, False], kind="stable")
        q["top4_worst_ties"] = best / float(worst["ms"].iloc[:4].min())
        peer = d[d["source"].astype(str) == "peer"]
        rows.append(
            {
                "data": str(d["data"].iloc[0]),
                "shape": _key(m, n, k),
                "rows": len(d),
                "rejected": len(rejected),
                "best_ms": best,
                "pick_ms": float(pick[0]),
                "pred_ms": float(ranked["predicted_us"].iloc[0]) / 1e3,
                "top1": q["top1"],
                "top4": q["top4"],
                "top4_worst_ties": q["top4_worst_ties"],
                "rho": q["spearman"],
                "err": q["err"],
                "peer": best / float(peer["ms"].iloc[0]) if len(peer) else np.nan,
            }
        )
    return pd.DataFrame(rows)


def _measured_time(measured: pd.DataFrame, shape, cfg: dict) -> float:
    m = (
        (measured["M"] == shape[0])
        & (measured["N"] == shape[1])
        & (measured["K"] == shape[2])
        & np.logical_and.reduce([measured[k] == int(cfg[k]) for k in KNOBS])
    )
    return float(measured.loc[m, "ms"].iloc[0]) if m.any() else float("nan")


def picks_history(measured: pd.DataFrame, picks: pd.DataFrame) -> pd.DataFrame:
    """(b): efficiency of the model's recorded picks (model_picks_h200.csv), from their measured times."""
    rows = []
    for (m, n, k), d in picks.groupby(SHAPE, sort=False):
        d = d.sort_values("model_rank")
        best = float(measured.loc[(measured.M == m) & (measured.N == n) & (measured.K == k), "ms"].min())
        t = [_measured_time(measured, (m, n, k), r) for _, r in d.head(4).iterrows()]
        rows.append(
            {
                "shape": _key(m, n, k),
                "pick1": best / t[0] if np.isfinite(t[0]) else np.nan,
                "pick4": best / np.nanmin(t) if np.isfinite(t).any() else np.nan,
                "pick_cfg": "{}x{}x{} s{} w{} g{} o{} sk{}".format(*(int(d.iloc[0][k_]) for k_ in KNOBS)),
                "pick_pred_ms": float(d.iloc[0]["predicted_us"]) / 1e3,
                "pick_ms": t[0],
            }
        )
    return pd.DataFrame(rows)


def picks_now(chip, measured: pd.DataFrame, shapes: list[tuple[int, int, int]]) -> pd.DataFrame:
    """(c): the current profile's exhaustive top 4, scored where those tilings were measured."""
    from tiler.search import search
    from tiler.space import load_space

    space = load_space("matmul", chip.family)
    rows = []
    for m, n, k in shapes:
        res = search(Matmul(int(m), int(n), int(k)), chip, space, top=4)
        best = float(measured.loc[(measured.M == m) & (measured.N == n) & (measured.K == k), "ms"].min())
        t = [
            _measured_time(measured, (m, n, k), {kk: res.cands[kk][i] for kk in KNOBS})
            for i in range(len(res.est["time_us"]))
        ]
        rows.append(
            {
                "shape": _key(m, n, k),
                "now1": best / t[0] if np.isfinite(t[0]) else np.nan,
                "now_measured": int(np.isfinite(t).sum()),
                "now_cfg": "{}x{}x{} s{} w{} g{} o{} sk{}".format(*(int(res.cands[kk][0]) for kk in KNOBS)),
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
            f"best-of-top-4 geomean {_geo(g.top4):.3f} min {g.top4.min():.3f} (ties broken the worst way "
            f"{_geo(g.top4_worst_ties):.3f}) | Spearman mean "
            f"{g.rho.mean():.3f} min {g.rho.min():.3f} | median |log(pred/meas)| {g.err.median():.3f}"
            + peer_txt
        )
    return "\n".join(lines)


def picks_summary(hist: pd.DataFrame) -> str:
    lines = []
    for label, g in (("fitted", hist[hist.fit]), ("held-out", hist[~hist.fit]), ("all", hist)):
        g = g.dropna(subset=["pick1"])
        if not len(g):
            continue
        lines.append(
            f"{label:9s} {len(g):2d} shapes: pick top-1 geomean {_geo(g.pick1):.3f} min {g.pick1.min():.3f} "
            f"({g.loc[g.pick1.idxmin(), 'shape']}) | pick best-of-top-4 geomean {_geo(g.pick4):.3f} "
            f"min {g.pick4.min():.3f}"
        )
    return "\n".join(lines)


def now_summary(now: pd.DataFrame) -> str:
    lines = []
    for label, g in (("fitted", now[now.fit]), ("held-out", now[~now.fit])):
        if not len(g):
            continue
        got = g.dropna(subset=["now1"])
        lines.append(
            f"{label:9s} {len(g):2d} shapes: rank-1 pick measured on {len(got)}"
            + (f", top-1 geomean there {_geo(got.now1):.3f} min {got.now1.min():.3f}" if len(got) else "")
        )
    return "\n".join(lines)


def tie_check(chip, measured: pd.DataFrame, fit: set[str]) -> str:
    """The profile's tie orders checked on the held-out shapes: the scores calibrate's choice is made from."""
    from tiler.calibrate import load_measurements
    from tiler.operator import get_operator

    keys = measured[SHAPE].astype(str).agg("x".join, axis=1)
    held = measured[~keys.isin(fit)].assign(impl="triton")
    data = load_measurements(chip, "matmul", held)
    lines = [
        "tie orders on the held-out shapes (geomean of group best / time, groups of exactly tied orders):"
    ]
    model = get_operator("matmul", "cuda")
    for t in model.choices(chip, data, model.constants(chip)):
        lines.append(f"  profile {t.key} = {int(chip.get(t.key, 0))}; held-out: {t}")
    return "\n".join(lines)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--chip", default="h200")
    ap.add_argument("--data", nargs="*", default=None, help="measured CSV files (default: the four above)")
    ap.add_argument(
        "--picks", default=str(PICKS), help="the model's recorded picks (model_rank, predicted_us)"
    )
    ap.add_argument("--no-search", action="store_true", help="skip (c), the current profile's own search")
    args = ap.parse_args(argv)
    try:
        chip = load_chip(args.chip)
        files = [Path(f) for f in args.data] if args.data else [f for f in DATA if f.is_file()]
        measured = merge_measured([(f.name, pd.read_csv(f)) for f in files])
        fit = fitted_shapes(chip)
        pd.set_option("display.width", 220)
        fmt = lambda v: f"{v:.3f}"  # noqa: E731
        print(
            f"measured: {len(measured)} distinct (shape, tiling) rows from {', '.join(f.name for f in files)}"
        )
        print(f"  {int((measured.n > 1).sum())} measured more than once (median taken)\n")

        res = evaluate(chip, measured)
        res["fit"] = res["shape"].isin(fit)
        print("(a) ranking of every measured tiling, by the profile as it is now")
        show = res.assign(fit=np.where(res.fit, "fit", "held"))
        print(show.to_string(index=False, float_format=fmt))
        print()
        print(
            f"profile {chip.id}: {len(fit)} shapes used in the fit: {', '.join(sorted(fit))}"
            if fit
            else f"profile {chip.id}: no fitted constants (every shape is held out)"
        )
        print(summary(res))
        print(tie_check(chip, measured, fit))

        picks_file = Path(args.picks)
        if picks_file.is_file():
            picks = pd.read_csv(picks_file)
            hist = picks_history(measured, picks)
            hist["fit"] = hist["shape"].isin(fit)
            print()
            print(
                f"(b) the model's own picks, FIXED HISTORY: {picks_file.name} was searched with the profile of "
                "2026-11-30 (before any re-fit); fit/held below refer to the profile as it is now"
            )
            print(hist.assign(fit=np.where(hist.fit, "fit", "held")).to_string(index=False, float_format=fmt))
            print(picks_summary(hist))
            if not args.no_search:
                shapes = list(picks.groupby(SHAPE, sort=False).groups)
                now = picks_now(chip, measured, shapes)
                now["fit"] = now["shape"].isin(fit)
                print()
                print(
                    "(c) the profile as it is now searches the whole space again (top 4); scored only where those "
                    "tilings were measured"
                )
                print(
                    now.assign(fit=np.where(now.fit, "fit", "held")).to_string(index=False, float_format=fmt)
                )
                print(now_summary(now))
        print()
        print("reproduce: python -m bench.fidelity --chip", args.chip)
    except Exception as exc:  # a benchmark report: say what went wrong, never fail the caller
        print(f"fidelity: {type(exc).__name__}: {exc}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
