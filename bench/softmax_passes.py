"""What the online (2-pass) softmax gains over the 3-pass one, by row length: the models' predictions on the 910B3
and the H200 beside the H200 measurements (bench/data/h200_softmax.csv).

    python -m bench.softmax_passes                     # the table (about 2 s)
    python -m bench.softmax_passes --write-picks FILE  # also: the H200 model's top-4 tilings per measured shape

For each d (rows so that x is 128 MB of fp16, as measured), per chip:

* `best`: the best tiling with passes = 3 over the best with passes = 2, each searched over the whole space.
  A row that fits one chunk is read once whatever the passes, so where the best tiling holds the whole row
  this is 1.000.
* `chunked`: the same with the chunk forced below d (block_d / BLOCK_D < d): the gain of the online form when
  the row must be read more than once.
* H200 measured: the best chunked 3-pass tiling over the best 2-pass one, the median over the (BLOCK_D, ROWS,
  num_warps) pairs measured both ways, and the best tiling overall (any kernel) against torch.softmax.

Rows of the CSV whose shape is not on the row-length list (few rows, a vocabulary row) are printed after it.
"""

from __future__ import annotations

import argparse
import csv
import statistics
import sys
from dataclasses import replace
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]

import pandas as pd  # noqa: E402

from tiler.hardware import load_chip  # noqa: E402
from tiler.problem import parse_problem  # noqa: E402
from tiler.search import search  # noqa: E402
from tiler.space import load_space  # noqa: E402

DATA = ROOT / "bench" / "data" / "h200_softmax.csv"
DS = (1024, 2048, 4096, 8192, 16384, 32768, 65536, 131072, 262144)
CHUNK = {"ascend": "block_d", "cuda": "BLOCK_D"}


def best_time(p, chip, space, passes: int, chunked: bool) -> float:
    """The best predicted time with `passes` pinned (and, when `chunked`, the chunk below d)."""
    sp = space.pin({"passes": passes})
    if chunked:
        k = CHUNK[chip.family]
        kn = sp.knobs[k]
        sp = replace(sp, knobs={**sp.knobs, k: replace(kn, values=tuple(v for v in kn.values if v < p.d))})
    return float(search(p, chip, sp, top=1).row(0)["time_us"])


def predicted(chip_id: str, d: int, rows: int) -> dict:
    chip = load_chip(chip_id)
    space = load_space("softmax", chip.family)
    p = parse_problem("softmax", {"rows": rows, "d": d})
    out = {}
    for chunked in (False, True):
        t2, t3 = (best_time(p, chip, space, n, chunked) for n in (2, 3))
        out["chunked" if chunked else "best"] = t3 / t2
    return out


def measured(df: pd.DataFrame, name: str) -> dict:
    g = df[df["name"] == name]
    tri = g[g.impl == "triton"]
    on, th = tri[tri.kernel == "online"], tri[tri.kernel == "3pass"]
    key = ["BLOCK_D", "ROWS", "num_warps"]
    pairs = on.merge(th, on=key, suffixes=("_2", "_3"))
    torch_ms = float(g[g.impl == "torch"].ms.iloc[0])
    return {
        "best_3p_2p": float(th.ms.min() / on.ms.min()) if len(on) and len(th) else float("nan"),
        "median_pair": statistics.median(pairs.ms_3 / pairs.ms_2) if len(pairs) else float("nan"),
        "best_us": float(tri.ms.min() * 1e3),
        "best_kernel": str(tri.loc[tri.ms.idxmin(), "kernel"]),
        "torch_us": torch_ms * 1e3,
    }


def write_picks(df: pd.DataFrame, path: Path, top: int = 4) -> None:
    """The H200 model's top `top` tilings per measured shape (whole space), as rows to measure."""
    chip, space = load_chip("h200"), load_space("softmax", "cuda")
    out = []
    for name, g in df.groupby("name", sort=False):
        p = parse_problem("softmax", {"rows": int(g.rows.iloc[0]), "d": int(g.d.iloc[0])})
        res = search(p, chip, space, top=top)
        for i in range(min(top, len(res.est["time_us"]))):
            t = res.tiling(i)
            out.append(
                {
                    "name": name,
                    **{k: t[k] for k in space.names},
                    "source": f"model{i + 1}",
                    "predicted_us": f"{float(res.est['time_us'][i]):.2f}",
                }
            )
    with open(path, "w", newline="") as f:
        w = csv.DictWriter(f, fieldnames=list(out[0]))
        w.writeheader()
        w.writerows(out)
    print(f"wrote {len(out)} picks to {path}")


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--data", default=str(DATA))
    ap.add_argument("--write-picks", metavar="FILE", help="write the H200 model's top-4 tilings per shape")
    args = ap.parse_args(argv)
    df = pd.read_csv(args.data)
    shapes = df.drop_duplicates("name")[["name", "rows", "d"]]
    by_d = {int(r.d): r for r in shapes.itertuples() if (int(r.rows) * int(r.d)) == 64 << 20}
    print(
        f"{'d':>7} {'rows':>6} | {'910B3 best':>10} {'chunked':>8} | {'H200 best':>9} {'chunked':>8} | "
        f"{'measured':>8} {'pairs':>6} {'best us':>8} {'kernel':>7} {'torch us':>8}"
    )
    print(
        "        (time of 3-pass / time of 2-pass)                     measured: best chunked 3-pass / 2-pass"
    )
    rows = [(d, (64 << 20) // d, by_d.get(d)) for d in DS]
    used = {r.name for r in by_d.values()}
    rows += [(int(r.d), int(r.rows), r) for r in shapes.itertuples() if r.name not in used]
    for d, n, rec in rows:
        a, h = predicted("ascend910b3", d, n), predicted("h200", d, n)
        m = measured(df, rec.name) if rec is not None else None
        tail = (
            f"{m['best_3p_2p']:8.3f} {m['median_pair']:6.3f} {m['best_us']:8.1f} {m['best_kernel']:>7} "
            f"{m['torch_us']:8.1f}"
            if m
            else "       -      -        -       -        -"
        )
        print(
            f"{d:>7} {n:>6} | {a['best']:10.3f} {a['chunked']:8.3f} | {h['best']:9.3f} {h['chunked']:8.3f} | {tail}"
        )
    if args.write_picks:
        write_picks(df, Path(args.write_picks))
    return 0


if __name__ == "__main__":
    sys.exit(main())
