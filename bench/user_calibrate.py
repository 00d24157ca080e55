"""Issue 28: `tiler calibrate` on a user's measurements of 3 shapes, checked on the user's other shapes.

The data are the full autotune tables of bench/gpu/user_autotune.py on the H200 (every config of the user's kernel timed
by @triton.autotune on 14 shapes): bench/data/user_autotune_configs.csv (the tutorial GEMM, 76 configs) and
bench/data/user_autotune_attention_configs.csv (the tutorial flash attention, 94 configs). For each kernel, TRIPLES
random triples of its shapes (seeded) are fitted with tiler.calibrate (every FITTABLE constant of the CUDA model,
no k-fold), and the model before and after the fit is compared on the 11 shapes outside the triple: the median
|log(predicted/measured)| and the top-1 (best measured / measured time of the model's pick, geomean over shapes).
The same fits with half and twice the prior's spread, and without the prior on the constants (prior_sigma = inf),
are shown beside: the default (tiler.calibrate.PRIOR_SIGMA, a factor e) was set before these data were seen, and is
not chosen on them.

    python -m bench.user_calibrate [--triples 8] [--seed 0]
"""

from __future__ import annotations

import argparse
import math
import random
import sys
import time
from pathlib import Path

import numpy as np
import pandas as pd

ROOT = Path(__file__).resolve().parent.parent
DATA = ROOT / "bench" / "data"
KERNELS = {  # kernel -> (file, operator)
    "gemm": ("user_autotune_configs.csv", "matmul"),
    "attention": ("user_autotune_attention_configs.csv", "flash_attention"),
}


def measurements(kernel: str) -> tuple[pd.DataFrame, str]:
    """The kernel's measured rows (its own columns: the user's names) and the operator."""
    file, op = KERNELS[kernel]
    df = pd.read_csv(DATA / file)
    df = df[(df["impl"] == "triton") & df["ms"].notna()]
    return df.drop(columns=["model_rank", "predicted_us"]), op


def outside_figures(res) -> tuple[float, float, float, float]:
    """(median |log| before, after, top-1 geomean before, after) on the shapes outside the fit."""
    b, a = res.outside["before"], res.outside["after"]
    return b.median_abs_log_error, a.median_abs_log_error, 1 / b.top1_regret, 1 / a.top1_regret


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--triples", type=int, default=8)
    ap.add_argument("--seed", type=int, default=0)
    args = ap.parse_args(argv)

    from tiler.calibrate import PRIOR_SIGMA, calibrate
    from tiler.hardware import load_chip

    chip = load_chip("h200")
    for kernel in KERNELS:
        df, op = measurements(kernel)
        shapes = list(dict.fromkeys(df["shape"]))
        rng = random.Random(args.seed)
        triples = [sorted(rng.sample(range(len(shapes)), 3)) for _ in range(args.triples)]
        print(f"{kernel} ({op}): {len(df)} rows, {len(shapes)} shapes; {len(triples)} triples fitted, each checked "
              f"on the other {len(shapes) - 3} shapes")  # fmt: skip
        full = pd.read_csv(DATA / KERNELS[kernel][0])
        full = full[(full["impl"] == "triton") & full["ms"].notna()]
        err = np.log(full["predicted_us"] / (full["ms"] * 1e3)).groupby(full["shape"]).median()
        if (
            "causal" in full.columns
        ):  # the shipped model's bias per mask: median over shapes of the shape's median
            mask = full.groupby("shape")["causal"].first()
            print(f"  shipped model, median over shapes of the median log(predicted/measured): causal "
                  f"{err[mask == 1].median():+.3f}, not causal {err[mask == 0].median():+.3f}")  # fmt: skip
        rows = []
        for tri in triples:
            for prior in (PRIOR_SIGMA, PRIOR_SIGMA / 2, PRIOR_SIGMA * 2, math.inf):
                t0 = time.perf_counter()
                fit = df[df["shape"].isin([shapes[i] for i in tri])]
                res = calibrate(chip, op, df, folds=0, fit_shapes=_labels(chip, op, fit), prior_sigma=prior)
                e0, e1, t1_0, t1_1 = outside_figures(res)
                rows.append(dict(triple=tri, prior=prior, err_before=e0, err_after=e1, top1_before=t1_0,
                                 top1_after=t1_1, s=time.perf_counter() - t0))  # fmt: skip
        out = pd.DataFrame(rows)
        for prior, d in out.groupby("prior", sort=False):
            name = f"prior sigma {prior:g}" if math.isfinite(prior) else "no prior"
            print(f"  {name}:")
            for r in d.itertuples(index=False):
                print(
                    f"    fit on {','.join(str(i) for i in r.triple):>8s}: outside median |log| {r.err_before:.3f} -> "
                    f"{r.err_after:.3f}; top-1 {r.top1_before:.4f} -> {r.top1_after:.4f}"
                )
            better = int((d["err_after"] < d["err_before"]).sum())
            kept = int((d["top1_after"] >= d["top1_before"] - 1e-9).sum())
            print(
                f"    => median |log| improves on {better}/{len(d)} triples (median over triples "
                f"{d['err_before'].median():.3f} -> {d['err_after'].median():.3f}); top-1 not lowered on "
                f"{kept}/{len(d)} (geomean over triples {np.exp(np.log(d['top1_before']).mean()):.4f} -> "
                f"{np.exp(np.log(d['top1_after']).mean()):.4f}, worst change "
                f"{(d['top1_after'] / d['top1_before']).min():.4f})"
            )
    return 0


def _labels(chip, op: str, rows: pd.DataFrame) -> list[str]:
    """The model's shape labels (Problem.label()) of the rows' problems."""
    from tiler.calibrate import load_measurements

    return list(load_measurements(chip, op, rows).shapes)


if __name__ == "__main__":
    sys.exit(main())
