"""Exhaustive (proven) flash-attention search time, in one process, and a bound-free check.

    python -m bench.fa_search_speed [--chips h200,ascend910b3] [--repeat 3] [--no-verify]

Shapes: causal prefill of a GQA model (32 query heads, 8 K/V heads, D = 128) at 4K, 8K, 32K and 128K tokens (64
heads at 128K), full attention on a batch of 2K sequences, decode (one query against an 8K cache, batch 64), and
an odd causal 1000 x 3000 at D = 64. Per chip and shape, the median search time over `--repeat` runs, each from a
cold start of the model's caches (schedule.clear_caches()), with the candidates the search scored (`evaluated`)
and the feasible ones it enumerated. The check (default on): every feasible tiling scored with no bound, its
top-5 times and tilings equal to the search's.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]

from tiler.hardware import load_chip  # noqa: E402
from tiler.model.schedule import clear_caches  # noqa: E402
from tiler.operator import get_operator, tie_preference  # noqa: E402
from tiler.problem import parse_problem  # noqa: E402
from tiler.search import search  # noqa: E402
from tiler.search.proven import enumerate_feasible  # noqa: E402
from tiler.search.result import top_distinct  # noqa: E402
from tiler.space import load_space  # noqa: E402

SHAPES = (
    dict(B=1, heads=32, kv_heads=8, S1=4096, S2=4096, D=128, causal=1),
    dict(B=1, heads=32, kv_heads=8, S1=8192, S2=8192, D=128, causal=1),
    dict(B=1, heads=32, kv_heads=8, S1=32768, S2=32768, D=128, causal=1),
    dict(B=1, heads=64, kv_heads=8, S1=131072, S2=131072, D=128, causal=1),
    dict(B=16, heads=32, kv_heads=8, S1=2048, S2=2048, D=128, causal=0),
    dict(B=64, heads=32, kv_heads=8, S1=1, S2=8192, D=128, causal=0),
    dict(B=2, heads=16, kv_heads=16, S1=1000, S2=3000, D=64, causal=1),
)


def label(s: dict) -> str:
    return f"{s['B']}x{s['heads']}x{s['kv_heads']}x{s['S1']}x{s['S2']} D={s['D']}{' causal' if s['causal'] else ''}"


def unbounded_top(p, chip, space, model, top: int = 5):
    """Top-`top` times and tilings from scoring every feasible tiling (no bound)."""
    c, _, _ = enumerate_feasible(p, chip, space, model, None)
    t = model.estimate(p, chip, c)["time_us"]
    order = top_distinct(c, t, space.names, top, tie_preference(model, p, chip, c))
    return t[order], {k: c[k][order] for k in space.names}


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--chips", default="h200,ascend910b3")
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--no-verify", action="store_true")
    args = ap.parse_args(argv)
    differ = 0
    for chip_id in args.chips.split(","):
        chip = load_chip(chip_id)
        space = load_space("flash_attention", chip.family)
        model = get_operator("flash_attention", chip.family)
        search(parse_problem("flash_attention", SHAPES[0]), chip, space)  # imports, first calls
        print(f"== {chip_id}")
        for s in SHAPES:
            p = parse_problem("flash_attention", s)
            times = []
            for _ in range(args.repeat):
                clear_caches()
                t0 = time.perf_counter()
                res = search(p, chip, space, top=5)
                times.append(time.perf_counter() - t0)
            line = f"  {label(s):42s} {statistics.median(times):7.3f} s  scored {res.evaluated:5d} of {res.feasible:5d}"
            if not args.no_verify:
                t, cands = unbounded_top(p, chip, space, model)
                same = np.array_equal(t, res.est["time_us"]) and all(
                    np.array_equal(cands[k], res.cands[k]) for k in space.names
                )
                differ += not same
                line += "  top-5 as unbounded: " + ("yes" if same else "NO")
            print(line, flush=True)
    return 1 if differ else 0


if __name__ == "__main__":
    sys.exit(main())
