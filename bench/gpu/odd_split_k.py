"""Issue 30 (matmul, the odd-shape class): does splitting K pay on shapes whose dimensions are not multiples of 16?

The model picks SPLIT_K 3 on 1111x2222x3333 (its rows' strides are not 16-byte aligned, so it prices the loads as
one element wide and synchronous, and more programs as more latency hidden); the issue says no split is fastest
there. For each odd shape below, in one process on the GPU machine: the model's best tiling with SPLIT_K pinned to
each of 1, 2, 3, 4 (`tiler.search(fix=...)`, h200, fp16, nn), each timed with the project's Triton kernel
(tiler.ops.matmul.triton_runner.time_config: do_bench median, L2 flushed, checked against an fp32 product), and
cuBLAS beside it in the same run. The table says, per shape, which split the model prefers (lowest predicted) and
which ran fastest.

    python -m bench.gpu.odd_split_k run --out $OUT    # GPU machine, about 2 minutes
    python -m bench.gpu.odd_split_k report [CSV]                   # default bench/data/h200_odd_split_k.csv
    python -m bench.gpu.odd_split_k fit                            # unaligned_atomic_gelems_per_s from FIT_SHAPES

`fit` fits the one constant of the unaligned split-K epilogue (unaligned_atomic_gelems_per_s: fp32 atomic adds
into an output whose rows are not provably 16-B aligned) with tiler.calibrate on the unaligned shapes of
FIT_SHAPES and reports the others (never fitted) before and after.
"""

from __future__ import annotations

import argparse
import math
import os
import sys
import time
from pathlib import Path

from bench.gpu.table import write_rows

ROOT = Path(__file__).resolve().parents[2]
DATA = ROOT / "bench" / "data"
SPLITS = (1, 2, 3, 4)
SHAPES = [  # (M, N, K): odd in every dimension, odd in one, and two aligned controls
    (1111, 2222, 3333),
    (3000, 5000, 2000),
    (1000, 1000, 1000),
    (777, 4097, 1999),
    (2049, 2049, 8191),
    (4096, 4096, 4095),
    (511, 12289, 4096),
    (8192, 1000, 1000),
    (2048, 2048, 2048),
    (1024, 4096, 8192),
]


# the unaligned shapes (N not a multiple of 16) the fit sees; the other shapes are held out
FIT_SHAPES = ("1111x2222x3333", "1000x1000x1000", "2049x2049x8191", "8192x1000x1000")
FIT_PARAM = "unaligned_atomic_gelems_per_s"


def fit(path: Path) -> int:
    import pandas as pd

    from tiler.calibrate import calibrate
    from tiler.hardware import load_chip

    df = pd.read_csv(path).dropna(subset=["ms"])
    chip = load_chip("h200")
    res = calibrate(chip, "matmul", df, folds=0, fit_shapes=list(FIT_SHAPES), params=[FIT_PARAM],
                    data_name=f"bench/data/{path.name}")  # fmt: skip
    print(res.summary())
    b, a = res.outside["before"], res.outside["after"]
    print(
        f"held out ({a.problems} shapes): median |log(pred/measured)| {b.median_abs_log_error:.3f} -> "
        f"{a.median_abs_log_error:.3f}; top-1 regret {b.top1_regret:.3f} -> {a.top1_regret:.3f}"
    )
    print(f"source: {res.source}")
    return 0


def run(out: Path) -> int:
    import tiler
    from tiler.ops.matmul.triton_runner import time_config

    out.mkdir(parents=True, exist_ok=True)
    path = out / "h200_odd_split_k.csv"
    rows: list[dict] = []
    t0 = time.perf_counter()
    for M, N, K in SHAPES:
        vendor_ms = math.nan
        for s in SPLITS:
            shape = {"M": M, "N": N, "K": K}
            res = tiler.search(op="matmul", chip="h200", shape=shape, dtype="fp16", fix={"SPLIT_K": s}, top=1)
            t = res.tiling(0)
            cfg = {k: t[k] for k in ("BLOCK_M", "BLOCK_N", "BLOCK_K", "GROUP_M", "num_warps", "num_stages")}
            cfg["ORDER"] = res.space.knobs["ORDER"].parse(t["ORDER"])
            cfg["SPLIT_K"] = s
            try:
                m = time_config(M, N, K, cfg, vendor=(s == 1))
                ms, err, fail = m["ms"], m["rel_err"], ""
                if s == 1:
                    vendor_ms = m["vendor"]["ms"]
            except Exception as exc:  # noqa: BLE001 - a config that does not run is a row
                ms, err, fail = math.nan, math.nan, f"{type(exc).__name__}: {str(exc)[:120]}"
            rows.append({"M": M, "N": N, "K": K, "SPLIT_K": s, **{k: v for k, v in cfg.items() if k != "SPLIT_K"},
                         "predicted_us": float(res.est["time_us"][0]), "ms": ms, "rel_err": err, "fail": fail,
                         "cublas_ms": vendor_ms})  # fmt: skip
        print(f"[{time.perf_counter() - t0:4.0f}s] {M}x{N}x{K} done", flush=True)
        write_rows(path, rows)
    return report(path)


def _predicted_now(df):
    """Today's model's time of each measured row's tiling (tiler.rank on the row's knobs)."""
    import numpy as np
    import pandas as pd

    from tiler.hardware import load_chip
    from tiler.problem import parse_problem
    from tiler.rank import rank_candidates

    chip = load_chip("h200")
    out = pd.Series(np.nan, index=df.index)
    for (M, N, K), d in df.groupby(["M", "N", "K"], sort=False):
        ranked, _ = rank_candidates(parse_problem("matmul", {"M": M, "N": N, "K": K}, "fp16"), chip, d)
        out.loc[d.index[ranked["row"].to_numpy() - 1]] = ranked["predicted_us"].to_numpy()
    return out


def report(path: Path) -> int:
    import pandas as pd

    if not path.exists():
        print(f"no {path}")
        return 1
    df = pd.read_csv(path)
    df["predicted_now_us"] = _predicted_now(df)
    agree = 0
    n = 0
    for (M, N, K), d in df.groupby(["M", "N", "K"], sort=False):
        d = d.set_index("SPLIT_K")
        pred = int(d["predicted_now_us"].idxmin())
        then = int(d["predicted_us"].idxmin())
        ran = d["ms"].dropna()
        fast = int(ran.idxmin())
        agree += pred == fast
        n += 1
        per = "  ".join(
            f"s{s}: {d.loc[s, 'predicted_now_us']:7.1f} pred ({d.loc[s, 'predicted_us']:.1f} at the run) / "
            f"{d.loc[s, 'ms'] * 1e3:7.1f} us"
            for s in d.index
        )
        print(
            f"{M}x{N}x{K}: model prefers split {pred} (at the run: {then}), fastest split {fast} (its pick at "
            f"{ran.min() / d.loc[pred, 'ms']:.3f} of the fastest); cuBLAS {d['cublas_ms'].iloc[0] * 1e3:.1f} us, "
            f"fastest/cuBLAS speed {d['cublas_ms'].iloc[0] / ran.min():.2f}\n    {per}"
        )
    print(f"the model's preferred split (today's model) is the fastest on {agree} of {n} shapes")
    return 0


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    sub = ap.add_subparsers(dest="cmd", required=True)
    r = sub.add_parser("run")
    r.add_argument("--out", type=Path, default=Path(os.environ.get("OUT", "results")))
    for name in ("report", "fit"):
        sub.add_parser(name).add_argument("csv", type=Path, nargs="?", default=DATA / "h200_odd_split_k.csv")
    a = ap.parse_args(argv)
    return run(a.out) if a.cmd == "run" else report(a.csv) if a.cmd == "report" else fit(a.csv)


if __name__ == "__main__":
    sys.exit(main())
