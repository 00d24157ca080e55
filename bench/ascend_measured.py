"""The Ascend model against real kernel times from public sources: measured time over the model's best.

    python -m bench.ascend_measured [--data bench/data/ascend_measured_public.csv] [--chip-prefix ascend]

The rows (bench/data/ascend_measured_public.csv, a copy of the project's shared data; its sources are named per row
in `source_id` and described in bench/archive/LOG.md) are kernel times measured on Ascend chips whose tiling was chosen
by the library (CATLASS examples, torch.matmul through CANN), so the comparison is the model's optimum (a proven
exhaustive search, default flags, runnable=False) against the measured total: a faithful model's optimum cannot be
much slower than a tuned library's kernel, nor many times faster than a hand-written one.

Prints one line per row (measured, model best, ratio = measured / model, the model's bound), then per source and
chip: the geometric mean of the ratio and the share of rows whose ratio lies in [0.8, 1.25] (the band of issue
29's acceptance), and the model's bound at 4096^3 fp16. fp32 rows run through the cube in HF32 on these chips and
are reported apart.
"""

from __future__ import annotations

import argparse
import math
import sys
from collections import defaultdict
from pathlib import Path

import pandas as pd

ROOT = Path(__file__).resolve().parents[1]

import tiler  # noqa: E402

BAND = (0.8, 1.25)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--data", default=str(ROOT / "bench" / "data" / "ascend_measured_public.csv"))
    ap.add_argument("--chip-prefix", default="ascend")
    args = ap.parse_args(argv)
    rows = pd.read_csv(args.data)
    groups = defaultdict(list)
    print(
        f"{'source':6} {'chip':8} {'M':>6} {'N':>6} {'K':>6} {'dtype':5} {'measured':>10} {'model':>10} {'ratio':>7} bound"
    )
    for r in rows.itertuples():
        chip = args.chip_prefix + str(r.chip).lower()
        res = tiler.search(
            op="matmul", chip=chip, shape=f"M={r.M},N={r.N},K={r.K}", dtype=r.dtype, top=1, runnable=False
        )
        model = float(res.row(0)["time_us"])
        ratio = float(r.time_us) / model
        kind = "fp32 (HF32)" if r.dtype == "fp32" else "fp16/bf16"
        groups[(r.source_id, r.chip, kind)].append(ratio)
        print(
            f"{r.source_id:6} {r.chip:8} {r.M:>6} {r.N:>6} {r.K:>6} {r.dtype:5} {r.time_us:>10.1f} {model:>10.1f} "
            f"{ratio:>7.3f} {res.row(0)['bound']}  {str(r.notes)[:48]}"
        )
    print()
    every = []
    for (src, chip, kind), ratios in groups.items():
        inside = sum(BAND[0] <= x <= BAND[1] for x in ratios)
        geo = math.exp(sum(map(math.log, ratios)) / len(ratios))
        every += ratios
        print(
            f"{src} {chip} {kind}: {len(ratios)} rows, geomean measured/model {geo:.3f}, {inside}/{len(ratios)} in {BAND}"
        )
    inside = sum(BAND[0] <= x <= BAND[1] for x in every)
    geo = math.exp(sum(map(math.log, every)) / len(every))
    print(f"all: {len(every)} rows, geomean {geo:.3f}, {inside}/{len(every)} in {BAND}")
    big = tiler.search(op="matmul", chip="ascend910b2", shape="M=4096,N=4096,K=4096", top=1, runnable=False)
    print(f"model bound at 4096^3 fp16 on the 910B2: {big.row(0)['bound']} ({big.row(0)['time_us']:.1f} us)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
