"""Fit an Ascend profile from measured kernel totals (the library's tiling unknown) and report the k-fold.

    python -m bench.ascend_fit [--data bench/data/ascend_measured_public.csv] [--folds 4] [--seed 0]
                               [--out PROFILE.toml] [--more bench/data/ascend_measured_more.csv] [--more-only]
                               [--fit-mix] [--l2 warm|cold]

The rows (bench/data/ascend_measured_public.csv; sources in bench/archive/LOG.md) are library kernels whose tiling was not
published, so the fit is `tiler calibrate` from totals (tiler.calibrate_totals): the model's best tiling stands in
for the library's, search <-> fit in rounds. fp16/bf16 rows are fitted; fp32 rows (the framework runs them in HF32,
a mode the profile's fp32 rate does not describe) are only evaluated, apart. One fit per chip of the table. The
rows are evaluated with warm L2 inputs (WARM_L2; --l2 cold: every panel's first touch from HBM, as until session 18).

Prints per row: measured, the model's optimum before the fit (the profile as shipped), after it (fitted on all
rows), held out (the k-fold by shape: fitted without the row's shape), the ratios measured / model and the bound;
then per source and chip the geometric mean of measured / model and the share in [0.8, 1.25], held out and
in-sample; the squares' worst model / measured (the model's optimum may be at most 5% slower than the library); and
the bound at 4096^3 fp16; CATLASS example 00's rows at that example's own tiling (known from its source). --out
writes the fitted profile (tiler.calibrate.write_profile).

Then, apart (never fitted: --more, default bench/data/ascend_measured_more.csv, sources in bench/data/README.md), the
further published kernel times against the shipped profiles of their chips: per row the model's optimum for the
problem as tiler could state it before quantised matmul existed (plain int8 -> int32) and as the quantised problem
its `tiler=` note names (scales, output dtype: the dequant terms), the ratios measured / model, per source the
geometric mean and the share in the band, the fastest kernel of each problem, and CATLASS 12_quant_matmul's rows at
that example's own tiling (its source: L1 128x256x512, L0 128x256x128, PreloadAsync, swizzle 3). --more-only skips
the fit. --fit-mix only fits the MIX launch (mix_head_us) on those quantised rows and reports it held out by source.
"""

from __future__ import annotations

import argparse
import math
import sys
from pathlib import Path

import numpy as np
import pandas as pd

ROOT = Path(__file__).resolve().parents[1]

import tiler.api as api  # noqa: E402
from tiler.calibrate import write_profile  # noqa: E402
from tiler.calibrate_totals import BAND  # noqa: E402
from tiler.hardware import load_chip  # noqa: E402
from tiler.ops.matmul.ascend import WARM_START  # noqa: E402

OP = "matmul"
# The fit's starting points (tiler.calibrate_totals keeps the one that matches best; the optimum jumps between
# tilings as the constants move, so one start can stop in a local minimum): the profile as shipped, and the same with
# the L2 feeding the cores above their ports' sum (S5's ~7 TB/s mixed L2 bandwidth of a 192 MB-L2 A2 part over the
# profile's 4752 GB/s, the figure docs/model.md section 8 uses for attention): L2 not the limit, the port is.
STARTS = [{}, {"l2_efficiency": 1.47}]
# The fit starts from the profile's values before any fit (the shipped estimates until issue 29), so that the
# figures do not depend on what the profile holds now (the fitted values): "before" is the uncalibrated model.
ESTIMATES = {"mac_efficiency": 0.95, "l2_efficiency": 0.8, "hbm_efficiency": 0.85, "head_base_us": 1.0}
# The L2 state the public rows ran under (docs/model.md section 11, "Warm L2"): S04 times torch.matmul as the mean
# of 30 back-to-back calls on the same tensors after 10 warm-up calls, so operands that fit the L2 are resident from
# the previous call when the next starts. The fit evaluates every row of the table so (model.ascend_epilogue's
# warm_inputs: only where A and B fit the usable L2 together; of S01's rows only 2048x4096x4000, 49 MB).
WARM_L2 = (
    "S04: 30 back-to-back calls on the same inputs after 10 warm-ups; operands that fit the L2 stay resident "
    "between calls"
)
# Shapes evaluated under the fit but kept out of it (--fit-all fits them too), each with its reason.
NOT_FITTED = {
    (2048, 4096, 80000): "both CATLASS examples run 3-10x below the model's optimum and 4-7x below their own "
    "K=40000 rate (80 and 23 TFLOP/s; the data's README flags it): a long-K path the model does not describe, "
    "which would drag every efficiency down",
}


def _band(ratios) -> str:
    r = np.asarray(ratios, dtype=float)
    r = r[np.isfinite(r)]
    if not r.size:
        return "-"
    inside = int(((r >= BAND[0]) & (r <= BAND[1])).sum())
    return f"geomean {math.exp(np.log(r).mean()):.3f}, {inside}/{r.size} in {BAND}"


def _evaluate(chip, rows: pd.DataFrame) -> pd.DataFrame:
    """Rows against the model's optimum under `chip` (evaluated, not fitted)."""
    out = []
    for r in rows.itertuples():
        res = api.search(
            op=OP, chip=chip, shape=f"M={r.M},N={r.N},K={r.K}", dtype=r.dtype, top=1, runnable=False
        )
        out.append((float(res.row(0)["time_us"]), str(res.row(0)["bound"])))
    rows = rows.copy()
    rows["model_us"] = [t for t, _ in out]
    rows["bound"] = [b for _, b in out]
    return rows


# CATLASS examples/12_quant_matmul/quant_matmul.cpp: L1TileShape<128, 256, 512>, L0TileShape<128, 256, 128>,
# MmadAtlasA2PreloadAsyncWithCallback<1, 2, 2, 2, 1>, GemmIdentityBlockSwizzle<3, 0 if m > n else 1>
QUANT_EXAMPLE_12 = dict(
    WARM_START, base_m=128, base_n=256, base_k=128, step_ka=4, step_kb=4, tail_split="off"
)


def _tiler_fields(notes: str) -> dict:
    """The problem fields a row's `tiler=k=v,k=v` note gives (the last `;`-part of the notes)."""
    for part in str(notes).split(";"):
        part = part.strip()
        if part.startswith("tiler="):
            return dict(kv.split("=", 1) for kv in part.removeprefix("tiler=").split(","))
    return {}


def more_sources(path: Path) -> None:
    """The rows of `path` (kept apart, never fitted) against the shipped profiles: see the module's doc."""
    data = pd.read_csv(path)
    print(f"\n== further published kernel times, kept apart from the fit ({path.name}, {len(data)} rows) ==")
    print(
        f"{'source':6} {'chip':6} {'M':>5} {'N':>6} {'K':>6} {'kernel':32} {'measured':>8} {'plain':>7} {'ratio':>6} "
        f"{'quant':>7} {'ratio':>6} bound (quant)"
    )
    out = []
    for r in data.itertuples():
        f = _tiler_fields(r.notes)
        quant = {k: v for k, v in f.items() if k in ("scale", "out_dtype", "b_dtype", "dequant")}
        plain = f"M={r.M},N={r.N},K={r.K}" + "".join(f",{k}={v}" for k, v in f.items() if k not in quant)
        chip = "ascend" + str(r.chip).lower()
        before = api.search(op=OP, chip=chip, shape=plain, dtype=r.dtype, top=1, runnable=False).row(0)
        shape = plain + "".join(f",{k}={v}" for k, v in quant.items())
        after = api.search(op=OP, chip=chip, shape=shape, dtype=r.dtype, top=1, runnable=False).row(0)
        kernel = str(r.notes).split(";")[0].removeprefix("kernel=").split(" (")[0]
        b_us, a_us = float(before["time_us"]), float(after["time_us"])
        out.append((r.source_id, r.chip, (r.M, r.N, r.K), kernel, r.time_us, b_us, a_us, shape, plain))
        print(
            f"{r.source_id:6} {r.chip:6} {r.M:>5} {r.N:>6} {r.K:>6} {kernel[:32]:32} {r.time_us:>8.2f} {b_us:>7.2f} "
            f"{r.time_us / b_us:>6.2f} {a_us:>7.2f} {r.time_us / a_us:>6.2f} {after['bound']}"
        )
    t = pd.DataFrame(
        out, columns=["source", "chip", "mnk", "kernel", "measured", "plain", "quant", "shape", "problem"]
    )
    t["r_plain"], t["r_quant"] = t.measured / t.plain, t.measured / t.quant
    t["dtype"] = data["dtype"].values
    for (src, chip, dtype), g in t.groupby(["source", "chip", "dtype"], sort=True):
        if dtype == "int8":
            print(f"{src} {chip} int8: as plain int8 {_band(g.r_plain)}; quantised {_band(g.r_quant)}")
        else:
            print(f"{src} {chip} {dtype}: {_band(g.r_quant)}")
    q = t[t.dtype == "int8"]
    print(f"all int8: as plain int8 {_band(q.r_plain)}; quantised {_band(q.r_quant)}")
    print(f"all fp16/bf16: {_band(t.r_quant[t.dtype.isin(['fp16', 'bf16'])])}")
    # one problem: the same sizes, layout and B format (the output dtype of a quant kernel aside)
    fastest = t.groupby(["source", "problem", "dtype"])["measured"].transform("min") == t["measured"]
    print(
        f"  the fastest kernel of each int8 problem: as plain int8 {_band(q.r_plain[fastest])}; "
        f"quantised {_band(q.r_quant[fastest])}"
    )
    f16 = fastest & t.dtype.isin(["fp16", "bf16"])
    print(f"  the fastest kernel of each fp16/bf16 problem: {_band(t.r_quant[f16])}")
    own = t[t.kernel.str.startswith("CATLASS 12_quant_matmul")]  # int8 rows only
    if len(own):
        print("  CATLASS 12_quant_matmul at its own tiling (the example's source), quantised problem:")
        ratios = []
        for r in own.itertuples():
            m, n, _ = r.mnk
            tiling = dict(QUANT_EXAMPLE_12, swizzle_direction=0 if m > n else 1)
            ex = api.explain(
                op=OP, chip="ascend" + str(r.chip).lower(), shape=r.shape, dtype="int8", tiling=tiling
            )
            t_us = float(ex.row["time_us"])
            ratios.append(r.measured / t_us)
            print(
                f"    {r.source} {m}x{n}x{r.mnk[2]}: measured {r.measured:.2f} us, model {t_us:.2f} us, ratio "
                f"{r.measured / t_us:.2f} ({ex.row['bound']}-bound, vector side {float(ex.row['quant_us']):.2f} us)"
            )
        print(f"    {_band(ratios)}")


# The MIX launch (model.common.mix_launch_us) is fitted on the quantised rows of --more: the only rows of a kernel
# that starts both core types (the public rows are cube-only kernels, which cannot see it). Its grid: 0 to 40 us
# (S6's whole full-core head is 20-21 us) by 2 us, then +-2 us around the best by 0.5 us (finer moves no optimum's
# time by more than a few percent of these kernels' 18-80 us).
MIX_GRID = np.arange(0.0, 40.5, 2.0)


def _quant_problems(path: Path) -> pd.DataFrame:
    """The quantised (int8) rows of `path` that stand for their problem: the fastest kernel of each (what the
    model's optimum stands in for, as in the fit from totals), with the problem as tiler states it."""
    data = pd.read_csv(path)
    data = data[data["dtype"] == "int8"].copy()
    data["shape"] = [
        f"M={r.M},N={r.N},K={r.K}" + "".join(f",{k}={v}" for k, v in _tiler_fields(r.notes).items())
        for r in data.itertuples()
    ]
    # one problem: the same sizes, layout and scales (the output dtype of a quant kernel aside, as more_sources)
    data["problem"] = [s.rsplit(",out_dtype=", 1)[0] for s in data["shape"]]
    fastest = data.groupby(["source_id", "problem"])["time_us"].transform("min") == data["time_us"]
    return data[fastest]


def _mix_loss(rows: pd.DataFrame, mix: float) -> tuple[float, np.ndarray]:
    """Sum of squared log(measured / model optimum) over `rows` with `mix_head_us` = mix, and the ratios."""
    ratios = []
    for r in rows.itertuples():
        chip = load_chip("ascend" + str(r.chip).lower()).with_values({"mix_head_us": mix})
        res = api.search(op=OP, chip=chip, shape=r.shape, dtype="int8", top=1, runnable=False)
        ratios.append(r.time_us / float(res.row(0)["time_us"]))
    ratios = np.array(ratios)
    return float((np.log(ratios) ** 2).sum()), ratios


def _fit_mix(rows: pd.DataFrame) -> float:
    """The least-squares mix_head_us on `rows`: the best of MIX_GRID, refined by 0.5 us."""
    coarse = min(MIX_GRID, key=lambda v: _mix_loss(rows, float(v))[0])
    fine = np.arange(max(0.0, coarse - 1.5), coarse + 1.6, 0.5)
    return float(min(fine, key=lambda v: _mix_loss(rows, float(v))[0]))


def fit_mix(path: Path) -> None:
    """Fit mix_head_us (chip-generic on A2/A3) on the quantised rows of `path`, and report it held out by source
    (fitted on one chip's document, evaluated on the other's): see MIX_GRID."""
    rows = _quant_problems(path)
    print(f"\n== MIX launch (mix_head_us) from {len(rows)} quantised problems of {path.name} ==")
    best = _fit_mix(rows)
    _, ratios = _mix_loss(rows, best)
    print(f"fitted on all: mix_head_us = {best} us; in-sample {_band(ratios)}")
    for src in sorted(rows["source_id"].unique()):
        train, test = rows[rows["source_id"] != src], rows[rows["source_id"] == src]
        v = _fit_mix(train)
        _, held = _mix_loss(test, v)
        chips = ",".join(sorted(test["chip"].unique()))
        print(f"  held out {src} ({chips}): fitted on the others {v} us; {src} {_band(held)}")


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--data", default=str(ROOT / "bench" / "data" / "ascend_measured_public.csv"))
    ap.add_argument("--folds", type=int, default=4)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--out", default=None, help="write the fitted profile here (one chip in the table)")
    ap.add_argument("--fit-all", action="store_true", help="fit the NOT_FITTED shapes too")
    ap.add_argument(
        "--more",
        default=str(ROOT / "bench" / "data" / "ascend_measured_more.csv"),
        help="further published rows, evaluated apart ('' to skip)",
    )
    ap.add_argument(
        "--l2",
        choices=("warm", "cold"),
        default="cold",
        help="the L2 state the --data rows ran under (WARM_L2); cold: every first touch from HBM, as before",
    )
    ap.add_argument("--more-only", action="store_true", help="only the --more rows (no fit)")
    ap.add_argument(
        "--fit-mix", action="store_true", help="only the MIX launch's fit on the --more quantised rows"
    )
    args = ap.parse_args(argv)
    if args.fit_mix:
        fit_mix(Path(args.more))
        return 0
    if args.more_only:
        more_sources(Path(args.more))
        return 0
    # the layout column describes the operands in words; every row is row-major A and B (layout nn)
    data = pd.read_csv(args.data).rename(columns={"layout": "layout_text"})
    for chip_name, rows in data.groupby("chip", sort=True):
        chip_id = "ascend" + str(chip_name).lower()
        apart = (
            rows[["M", "N", "K"]].apply(tuple, axis=1).isin(set(NOT_FITTED) if not args.fit_all else set())
        )
        fit_rows = rows[(rows["dtype"] != "fp32") & ~apart]
        chip = load_chip(chip_id).with_values(ESTIMATES, tag="estimated")
        if args.l2 == "warm":
            chip = chip.with_values({"l2_warm_inputs": 1}, tag="measurement", source=WARM_L2)
        res = api.calibrate(
            OP,
            chip,
            fit_rows,
            folds=args.folds,
            seed=args.seed,
            starts=STARTS,
            data_name=Path(args.data).name,
        )
        print(res.summary())
        t = res.rows
        t["in_sample"] = t["measured_us"] / t["model_us"]
        t["held_out"] = t["measured_us"] / t["cv_model_us"]
        print(
            f"\n{'source':6} {'M':>6} {'N':>6} {'K':>6} {'dtype':5} {'measured':>9} {'before':>9} {'fitted':>9} "
            f"{'held-out':>9} {'ratio':>6} {'ratio':>6} bound (fitted)"
        )
        print(f"{'':49}{'us':>9} {'us':>9} {'us':>9} {'us':>9} {'in':>6} {'out':>6}")
        for r in t.itertuples():
            print(
                f"{r.source_id:6} {r.M:>6} {r.N:>6} {r.K:>6} {r.dtype:5} {r.measured_us:>9.1f} "
                f"{r.model_before_us:>9.1f} {r.model_us:>9.1f} {r.cv_model_us:>9.1f} {r.in_sample:>6.3f} "
                f"{r.held_out:>6.3f} {r.bound}  {str(r.notes)[:40]}"
            )
        print()
        for src, g in t.groupby("source_id", sort=True):
            print(
                f"{src} {chip_name} fp16/bf16 held out: {_band(g.held_out)}; in-sample: {_band(g.in_sample)}"
            )
        print(f"all {chip_name} fp16/bf16 held out: {_band(t.held_out)}; in-sample: {_band(t.in_sample)}")
        fastest = t.groupby("label")["measured_us"].transform("min") == t["measured_us"]
        print(
            f"  the fastest kernel of each problem (what the optimum stands in for): held out "
            f"{_band(t.held_out[fastest])}; in-sample {_band(t.in_sample[fastest])}"
        )
        sq = t[(t.M == t.N) & (t.N == t.K)]
        if len(sq):
            worst_in = (sq.model_us / sq.measured_us).max()
            worst_out = (sq.cv_model_us / sq.measured_us).max()
            print(
                f"  squares ({len(sq)} rows): worst model-optimum / measured {worst_in:.3f} in-sample, "
                f"{worst_out:.3f} held out (the target: <= 1.05)"
            )
        basic = rows[rows["notes"].astype(str).str.contains("00_basic_matmul")]
        if len(
            basic
        ):  # CATLASS example 00's tiling is in its source: the model at that tiling, not its optimum
            print(
                "  CATLASS example 00 at its own tiling (the example's source; tiler's WARM_START), fitted profile:"
            )
            for r in basic.itertuples():
                tiling = dict(WARM_START, swizzle_direction=1 if r.M < r.N else 0, tail_split="off")
                ex = api.explain(
                    op=OP, chip=res.chip, shape=f"M={r.M},N={r.N},K={r.K}", tiling=tiling, target="catlass"
                )
                t_us = float(ex.row["time_us"])
                print(
                    f"    {r.M}x{r.N}x{r.K}: measured {r.time_us:.0f} us, model {t_us:.0f} us, ratio "
                    f"{r.time_us / t_us:.3f} ({ex.row['bound']}-bound)"
                )
        kept = rows[(rows["dtype"] != "fp32") & apart]
        if len(kept):
            ev = _evaluate(res.chip, kept)
            ratio = ev.time_us / ev.model_us
            for r, x in zip(ev.itertuples(), ratio, strict=True):
                print(
                    f"  not fitted: {r.source_id} {r.M}x{r.N}x{r.K} {r.dtype} {r.time_us:.0f} us / model {r.model_us:.0f} us = {x:.3f}"
                )
            print(f"  not fitted ({'; '.join(NOT_FITTED.values())}): {_band(ratio)}")
            out = pd.concat([t.held_out, ratio])
            print(f"  every fp16/bf16 row out of its fit (held out or not fitted): {_band(out)}")
        hf = rows[rows["dtype"] == "fp32"]
        if len(hf):
            ev = _evaluate(res.chip, hf)
            print(
                f"  fp32 (HF32, not fitted) under the fitted profile: "
                f"{_band(ev.time_us / ev.model_us)}; bounds {', '.join(sorted(set(ev.bound)))}"
            )
        big = api.search(op=OP, chip=res.chip, shape="M=4096,N=4096,K=4096", top=1, runnable=False)
        print(
            f"  fitted model at 4096^3 fp16: {big.row(0)['time_us']:.1f} us, bound {big.row(0)['bound']} "
            f"(cube {big.row(0)['mac_us']:.1f} us, mte2 {big.row(0)['mte2_us']:.1f} us)\n"
        )
        if args.out:
            write_profile(res, args.out)
            print(f"wrote {args.out}")
    if args.more:
        more_sources(Path(args.more))
    return 0


if __name__ == "__main__":
    sys.exit(main())
