"""How well the flash-attention model picks tilings on H200 shapes it was not fitted on.

    python -m bench.fa_fidelity [--fit cal|profile]
    python -m bench.fa_fidelity --residuals    # the shipped model's bias by warps and rows per warpgroup

Fits the `fa_` constants on the six shapes of bench/data/h200_fa_cal.csv (`tiler.calibrate`, the same code as
`tiler calibrate`), then scores the ten held-out shapes of bench/data/h200_fa_measured.csv (the project's kernel,
measured by bench/gpu/fa_measure.py) that no fit has seen. Per shape: the measured time of the model's top-1 pick over
the best measured tiling, the best of its top 4, Spearman over the grid, whether it picks the faster ORDER (causal
shapes with more than one query block per head; with one, both grids launch the same programs in the same order and
the model predicts them equal: `moot`), and beside it a fixed tiling (the one best on average over the fit shapes)
and torch's SDPA.
`--fit profile` scores the profile's constants as shipped instead of refitting.

Then the ORDER pairs re-measured head to head (bench/archive/fa_order_h2h.py), per file of H2H: is the model's faster ORDER
the faster median, over every pair and for the blocks of each causal shape's pick. The files differ in the clock
regime they measure: 25-ms bursts at boost clock (two machines) and the power-capped steady state
(bench/data/README.md, "ORDER and the SM clock").
"""

from __future__ import annotations

import argparse
import time
from pathlib import Path

import numpy as np
import pandas as pd

from tiler.calibrate import calibrate, load_measurements, shape_quality
from tiler.hardware import load_chip
from tiler.operator import get_operator
from tiler.problem import parse_problem

DATA = Path(__file__).resolve().parent / "data"
FIELDS = ["B", "heads", "kv_heads", "S1", "S2", "D", "causal"]
KNOBS = ["BLOCK_M", "BLOCK_N", "num_stages", "num_warps", "ORDER"]
# head-to-head ORDER files and the clock regime each measured
H2H = {
    "h200_fa_order_h2h.csv": "bursts (do_bench 25 ms, boost clock), session 7",
    "h200_fa_order_h2h_b.csv": "bursts (do_bench 25 ms, boost clock), session 8 (same protocol, a fresh machine)",
    "h200_fa_order_h2h_steady.csv": "steady (do_bench 1 s after 0.3 s, power-capped clock), session 8",
    "h200_fa_order_h2h_steady_c.csv": "steady, again on another H200 (2 rounds), session 8",
}


def fixed_best(cal: pd.DataFrame) -> tuple:
    """The tiling with the best geomean of (shape's best / its time) over the fit shapes where it ran."""
    tri = cal[(cal.impl == "triton") & cal.ms.notna()].copy()
    tri["eff"] = tri.groupby(FIELDS).ms.transform("min") / tri.ms
    g = tri.groupby(KNOBS).eff.agg(["count", lambda s: float(np.exp(np.log(s).mean()))])
    g = g[g["count"] == g["count"].max()]
    return tuple(int(v) for v in g.iloc[:, 1].idxmax())


RESIDUAL_TABLES = {  # every H200 attention table with tilings: (file, the kernel's ORDER when the file has none)
    "fit (cal)": ("h200_fa_cal.csv", None),
    "held out": ("h200_fa_measured.csv", None),
    "wide tilings": ("h200_fa_wide_a.csv", None),
    "user kernel": ("user_autotune_attention_configs.csv", 0),
}


def residuals() -> None:
    """Per table, log(measured / predicted) of every tiling less its shape's median, by num_warps and the query rows
    each warpgroup owns (BLOCK_M / warpgroups): where the shipped model is biased, class by class."""
    chip = load_chip("h200")
    model = get_operator("flash_attention", "cuda")
    for name, (file, order) in RESIDUAL_TABLES.items():
        df = pd.read_csv(DATA / file)
        df = df[(df.impl == "triton") & df.ms.notna()].copy()
        if order is not None:
            df["ORDER"] = order
        data = load_measurements(chip, "flash_attention", df)
        pred = model.timing(data.prepared, chip, model.constants(chip))["time_us"]
        t = data.table.reset_index(drop=True)
        r = pd.Series(np.log(data.seconds * 1e6 / pred))
        t["residual"] = r - r.groupby(data.shape_of).transform("median")
        t["rows_per_warpgroup"] = t.BLOCK_M / np.maximum(t.num_warps / 4, 1)
        by = t.groupby(["num_warps", "rows_per_warpgroup"]).residual.agg(["median", "count"])
        print(f"{name} ({file}, {len(t)} tilings): median log(measured/predicted) less the shape's median")
        print(by.round(3).T.to_string())


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--fit", choices=["cal", "profile"], default="cal")
    ap.add_argument(
        "--residuals",
        action="store_true",
        help="only the shipped profile's residuals by warps and rows per warpgroup, on every measured table",
    )
    args = ap.parse_args()
    if args.residuals:
        residuals()
        return
    t0 = time.perf_counter()
    cal = pd.read_csv(DATA / "h200_fa_cal.csv")
    held = pd.read_csv(DATA / "h200_fa_measured.csv")
    chip = load_chip("h200")
    model = get_operator("flash_attention", "cuda")
    if args.fit == "cal":
        res = calibrate(chip, "flash_attention", cal, folds=6, data_name="h200_fa_cal.csv")
        print(res.summary())
        chip = res.chip
    data = load_measurements(chip, "flash_attention", held)
    pred = model.timing(data.prepared, chip, model.constants(chip))["time_us"]
    fixed = fixed_best(cal)
    rows, picks = [], []
    for i, (label, p) in enumerate(zip(data.shapes, data.problems, strict=True)):
        m = data.shape_of == i
        q = shape_quality(pred[m], data.seconds[m])
        sub = data.table[m].reset_index(drop=True)
        meas = data.seconds[m]
        pick = int(np.argmin(pred[m]))
        row = {"shape": label, "top1": q["top1"], "top4": q["top4"], "spearman": q["spearman"]}
        if p.causal:  # for the picked blocks, is the model's ORDER the faster one measured?
            same = np.flatnonzero((sub[KNOBS[:4]] == sub.loc[pick, KNOBS[:4]]).all(axis=1).to_numpy())
            if same.size == 2 and pred[m][same[0]] == pred[m][same[1]]:
                # one query block per head: both grids launch the same programs in the same order (the search
                # drops ORDER=1 as a twin); the measured difference is noise, not a choice the model makes
                row["order_ok"] = "moot"
            elif same.size == 2:
                faster = same[np.argmin(meas[same])]
                row["order_ok"] = bool(sub.loc[pick, "ORDER"] == sub.loc[faster, "ORDER"])
                picks.append(
                    {**{k: int(v) for k, v in p.shape().items() if k in FIELDS}, **sub.loc[pick, KNOBS]}
                )
        fx = (sub[KNOBS].astype(int).apply(tuple, axis=1) == fixed).to_numpy()
        row["fixed"] = float(meas.min() / meas[fx][0]) if fx.any() else float("nan")
        sdpa = held[
            (held[FIELDS] == pd.Series(p.shape())[FIELDS].values).all(axis=1) & (held.impl == "torch_sdpa")
        ]
        row["sdpa"] = float(sdpa.ms.iloc[0] * 1e-3 / meas.min()) if len(sdpa) else float("nan")
        rows.append(row)
    out = pd.DataFrame(rows)
    print(out.to_string(index=False, float_format=lambda v: f"{v:.3f}"))
    g = lambda s: float(np.exp(np.log(s.dropna()).mean()))  # noqa: E731
    causal = out.dropna(subset=["order_ok"]) if "order_ok" in out else out.iloc[:0]
    moot = causal[causal.order_ok.astype(str) == "moot"]
    causal = causal[causal.order_ok.astype(str) != "moot"]
    print(
        f"held-out {len(out)} shapes: top-1 geomean {g(out.top1):.3f} (min {out.top1.min():.3f}), best-of-top-4 "
        f"{g(out.top4):.3f}, Spearman mean {out.spearman.mean():.3f}; faster ORDER picked on "
        f"{int(causal.order_ok.astype(bool).sum())}/{len(causal)} causal shapes where ORDER changes the launch order"
        f" ({len(moot)} with one query block per head: moot); fixed tiling {fixed} {g(out.fixed):.3f}; "
        f"torch SDPA time over the best measured tiling {g(out.sdpa):.3f} (>1: the kernel beats SDPA)"
    )
    for name, regime in H2H.items():
        if (DATA / name).exists():
            h2h = pd.read_csv(DATA / name)
            print(f"{name}: {regime}")
            print(order_pairs(h2h, chip, model))
            print(pick_orders(h2h, picks))
    print(f"({time.perf_counter() - t0:.1f} s)")


def order_pairs(h2h: pd.DataFrame, chip, model) -> str:
    """The ORDER pairs re-measured head to head (bench/archive/fa_order_h2h.py): per pair of blocks, is the model's faster
    ORDER the one whose median over the rounds is faster?"""
    med = h2h.groupby([*FIELDS, *KNOBS]).ms.median().unstack("ORDER").dropna().reset_index()
    right, lines = 0, []
    for _, r in med.iterrows():
        p = parse_problem("flash_attention", {k: int(r[k]) for k in FIELDS})
        c = {k: np.full(2, int(r[k]), dtype=np.int64) for k in KNOBS[:4]}
        c["ORDER"] = np.array([0, 1], dtype=np.int64)
        t = model.estimate(p, chip, c)["time_us"]
        ok = (t[0] < t[1]) == (r[0] < r[1])
        right += ok
        if not ok:
            blocks = "x".join(str(int(r[k])) for k in KNOBS[:2])
            lines.append(
                f"  wrong: {'x'.join(str(int(r[k])) for k in FIELDS[:6])} {blocks} s{int(r.num_stages)} "
                f"w{int(r.num_warps)}: measured ORDER 0 / 1 {r[0] / r[1]:.3f}, predicted {t[0] / t[1]:.3f}"
            )
    head = f"ORDER pairs head to head ({h2h.shape[0]} runs, median per pair): model's faster ORDER right on {right}/{len(med)}"
    return "\n".join([head, *lines])


def pick_orders(h2h: pd.DataFrame, picks: list[dict]) -> str:
    """For each causal shape's pick (its shape fields and knobs) whose blocks were re-measured head to head: is the
    pick's ORDER the one with the faster median?"""
    med = h2h.groupby([*FIELDS, *KNOBS]).ms.median().unstack("ORDER").dropna()
    right = seen = 0
    for pk in picks:
        key = tuple(int(pk[k]) for k in (*FIELDS, *KNOBS[:4]))
        if key in med.index:
            r = med.loc[key]
            seen += 1
            right += bool((r[0] < r[1]) == (int(pk["ORDER"]) == 0))
    return f"  the picks' ORDER, head to head: faster on {right}/{seen} causal shapes ({len(picks) - seen} not re-measured)"


if __name__ == "__main__":
    main()
