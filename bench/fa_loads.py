"""Issue 30 (attention): how well the model picks LOADS (K/V through pointers, 0, or TMA descriptors, 1) on the H200.

    python -m bench.fa_loads                  # fit the LOADS constant on 8 shapes, score the 8 held out
    python -m bench.fa_loads --fit all        # fit on all 16 (what the shipped profile holds), score them all
    python -m bench.fa_loads --fit profile    # no fit: the profile's constants as shipped, all 16 scored
    python -m bench.fa_loads candidates       # bench/data/fa_loads_candidates.csv: the model's diverse top 4, LOADS too

Data: bench/data/h200_fa_tma.csv (bench/gpu/fa_tma.py run: 220 tilings x LOADS 0/1 on the 16 shapes of
bench.gpu.fa_vs_sdpa, the fastest SDPA backend beside). The fit is `tiler.calibrate.calibrate` (the code of `tiler
calibrate`) on FIT_SHAPES with only the LOADS constant(s) free (every other constant as the profile has it), on
same-tiling ratios: each LOADS 1 row's time is its LOADS 0 twin's predicted time x the measured LOADS 1 / LOADS 0
ratio, so a row's residual is the error of the predicted ratio and the model's error common to both LOADS (what
the earlier constants were fitted for) does not pull the new one.

Per scored shape: whether the model's fastest measured tiling has the LOADS of the measured fastest (`loads_ok`),
the share of tilings whose faster LOADS the model predicts (`pairs_ok`), the median |log(predicted/measured)| at
LOADS 0 and at LOADS 1 and of the ratio, and the fastest SDPA over the measured time of the model's top-1 among all
the measured rows (`top1`) and among the LOADS 0 rows only (`top1_0`: the model without the knob); above 1 the
kernel is faster.
"""

from __future__ import annotations

import argparse
import time
from pathlib import Path

import numpy as np
import pandas as pd

from tiler.calibrate import calibrate, load_measurements
from tiler.hardware import load_chip
from tiler.operator import get_operator

DATA = Path(__file__).resolve().parent / "data"
TABLE = DATA / "h200_fa_tma.csv"
FIELDS = ["B", "heads", "kv_heads", "S1", "S2", "D", "causal"]
KNOBS = ["BLOCK_M", "BLOCK_N", "num_stages", "num_warps", "ORDER"]
PARAMS = ["fa_tma_program_cycles"]
# every other shape of the run's order (the order of bench.gpu.fa_vs_sdpa.shapes): 5 causal and 3 not fitted, 6 and
# 2 held out; each half has shapes where LOADS 1 wins and where it loses
FIT_SHAPES = [
    "2x32x8x2048x2048x128_causal1",
    "2x32x32x4096x4096x64",
    "1x64x8x2048x2048x128",
    "4x28x4x1024x1024x128_causal1",
    "1x32x8x8192x8192x128_causal1",
    "1x32x8x4096x4096x128_causal1",
    "8x16x16x2048x2048x64",
    "16x12x12x512x512x64",
]


def ratio_table(d: pd.DataFrame, chip, model) -> pd.DataFrame:
    """The table with each LOADS 1 row's ms replaced by its LOADS 0 twin's prediction (ms) x the measured ratio."""
    zero = d[d.LOADS == 0]
    pred0 = predict(zero, chip, model)
    twin = zero.assign(pred0=pred0 * 1e-3)[[*FIELDS, *KNOBS, "ms", "pred0"]].rename(columns={"ms": "ms0"})
    one = d[d.LOADS == 1].merge(twin, on=[*FIELDS, *KNOBS], how="inner")
    one["ms"] = one.pred0 * one.ms / one.ms0
    return pd.concat([zero, one.drop(columns=["ms0", "pred0"])], ignore_index=True)


def predict(d: pd.DataFrame, chip, model) -> np.ndarray:
    """Predicted µs of every row of d, in d's order (load_measurements groups rows by shape: put them back)."""
    data = load_measurements(chip, "flash_attention", d.reset_index(drop=True))
    pred = model.timing(data.prepared, chip, model.constants(chip))["time_us"]
    out = np.full(len(d), np.nan)
    out[data.table["row"].to_numpy() - 1] = pred
    return out


def score(d: pd.DataFrame, chip, model) -> pd.DataFrame:
    """One row per shape of d: the figures of the module docstring."""
    d = d.reset_index(drop=True).assign(pred=predict(d, chip, model), us=lambda x: x.ms * 1e3)
    rows = []
    for _, s in d.groupby(FIELDS, sort=False):
        label = "x".join(str(int(s[f].iloc[0])) for f in FIELDS[:6]) + (" causal" if s.causal.iloc[0] else "")
        wide = s.pivot_table(index=KNOBS, columns="LOADS", values=["us", "pred"]).dropna()
        meas_r = np.log(wide[("us", 1)] / wide[("us", 0)])
        pred_r = np.log(wide[("pred", 1)] / wide[("pred", 0)])
        err = {lo: float(np.median(np.abs(np.log(wide[("pred", lo)] / wide[("us", lo)])))) for lo in (0, 1)}
        top = s.loc[s.pred.idxmin()]
        zero = s[s.LOADS == 0]
        fast = float(s.fastest_ms.iloc[0]) * 1e3
        rows.append(
            {
                "shape": label,
                "best": int(s.loc[s.us.idxmin(), "LOADS"]),
                "model": int(top.LOADS),
                "loads_ok": bool(int(top.LOADS) == int(s.loc[s.us.idxmin(), "LOADS"])),
                "pairs_ok": float(np.mean(np.sign(meas_r) == np.sign(pred_r))),
                "err0": err[0],
                "err1": err[1],
                "err_ratio": float(np.median(np.abs(pred_r - meas_r))),
                "top1": fast / float(top.us),
                "top1_0": fast / float(zero.loc[zero.pred.idxmin(), "us"]),
                "best_both": fast / float(s.us.min()),
            }
        )
    return pd.DataFrame(rows)


def summary(out: pd.DataFrame, name: str) -> str:
    g = lambda s: float(np.exp(np.log(s).mean()))  # noqa: E731
    return (
        f"{name}: {len(out)} shapes; model's LOADS = measured best's on {int(out.loads_ok.sum())}/{len(out)}; faster "
        f"LOADS of a tiling right on {out.pairs_ok.mean():.3f} of tilings (mean); median |log| error LOADS 0 "
        f"{out.err0.median():.3f}, LOADS 1 {out.err1.median():.3f}, ratio {out.err_ratio.median():.3f}; fastest SDPA "
        f"over the model's top-1 {g(out.top1):.3f} (LOADS 0 only {g(out.top1_0):.3f}, best measured of both "
        f"{g(out.best_both):.3f}; above 1 the kernel is faster)"
    )


def candidates(out: Path) -> int:
    """The shipped model's diverse top 4 (the search of bench.gpu.fa_vs_sdpa.picks) with LOADS, for the 16 shapes of
    the fa_tma run, written as a plan of bench.gpu.fa_tma (`source` model, `rank`, the knobs, `predicted_us`; `LOADS`
    the model's choice, which fa_tma's run does not read: it times every tiling at both LOADS). A tiling the top 4
    holds at both LOADS is one row, at its better rank. Confirmation on the GPU machine:
    `python -m bench.gpu.fa_tma run --plan bench/data/fa_loads_candidates.csv --out $OUT`, then here
    `python -m bench.fa_loads --fit profile --csv $OUT/h200_fa_tma.csv` (the model's top-1 among the timed rows)."""
    import tiler
    from bench.gpu.fa_vs_sdpa import label

    d = pd.read_csv(TABLE)
    rows = []
    for shape in d[FIELDS].drop_duplicates().to_dict("records"):
        shape = {k: int(v) for k, v in shape.items()}
        res = tiler.search(op="flash_attention", chip="h200", shape=shape, dtype="fp16", top=4, diverse=True)
        seen, picked = set(), []
        for i in range(min(4, len(res.est["time_us"]))):
            t = res.tiling(i)
            knobs = {k: {"natural": 0, "heavy_first": 1}.get(t[k], t[k]) for k in (*KNOBS, "LOADS")}
            picked.append(knobs["LOADS"])
            key = tuple(knobs[k] for k in KNOBS)
            if key not in seen:
                seen.add(key)
                pred = round(float(res.est["time_us"][i]), 3)
                rows.append({**shape, "source": "model", "rank": i + 1, **knobs, "predicted_us": pred})
        print(f"{label(shape):>32s}  top 4 LOADS {picked}, {len(seen)} distinct tilings")
    pd.DataFrame(rows).to_csv(out, index=False)
    print(f"wrote {out}: {len(rows)} tilings on {len(d[FIELDS].drop_duplicates())} shapes")
    return 0


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("what", nargs="?", choices=["score", "candidates"], default="score")
    ap.add_argument("--fit", choices=["held", "all", "profile"], default="held")
    ap.add_argument("--csv", type=Path, default=TABLE)
    a = ap.parse_args(argv)
    if a.what == "candidates":
        return candidates(DATA / "fa_loads_candidates.csv")
    t0 = time.perf_counter()
    d = pd.read_csv(a.csv)
    d = d[d.ms.notna()]
    chip = load_chip("h200")
    model = get_operator("flash_attention", "cuda")
    fit = {"held": FIT_SHAPES, "all": None, "profile": []}[a.fit]
    if fit != []:
        # from the model's guess, not the profile's value (fitted on all 16 shapes: it has seen the held-out ones)
        chip = chip.with_values({k: model.CONSTANTS[k] for k in PARAMS}, tag="guess", source="cuda.DEFAULTS")
        res = calibrate(
            chip,
            "flash_attention",
            ratio_table(d, chip, model),
            folds=0,
            fit_shapes=fit,
            params=PARAMS,
            data_name=a.csv.name,
            note="same-tiling LOADS 1 / LOADS 0 ratios (python -m bench.fa_loads)",
        )
        print(res.summary())
        chip = res.chip
    print(", ".join(f"{k} = {model.constants(chip)[k]:.5g}" for k in PARAMS))
    out = score(d, chip, model)
    labels = {"x".join(s.split("x")[:6]).split("_")[0] for s in FIT_SHAPES}
    out["fitted"] = out["shape"].str.split(" ").str[0].isin(labels) if fit is not None else True
    print(out.to_string(index=False, float_format=lambda v: f"{v:.3f}"))
    if a.fit == "held":
        print(summary(out[out.fitted], "fitted"))
        print(summary(out[~out.fitted], "held out"))
    else:
        print(summary(out, "all"))
    print(f"({time.perf_counter() - t0:.1f} s)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
