"""Runnable by default: for the 30 LLM GEMMs of bench/target_cost.py, in both layouts (nn, nt), on the 910B3,
910B2, 910B4 and H200, a default `tiler search` (no --target) is exported and checked.

    python -m bench.runnable_views [--chips ascend910b3,ascend910b2,ascend910b4,h200] [--dtype fp16]

Prints, per chip and layout: how many exports carry at least one runnable view, how many pass `tiler check`
(tiler.check.check_document, what the command runs), how often the unconstrained best needs a custom kernel, and per
target the geomean and worst gap (its best runnable tiling's predicted time over the unconstrained best); then the
seconds the searches took in all, against the same searches without the per-target answers (`runnable=False`), so
the ratio is the cost of runnable-by-default measured in one run. Exits 1 if any export has no view or fails
check.
"""

from __future__ import annotations

import argparse
import math
import sys
import time
from collections import defaultdict
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]

import tiler  # noqa: E402
from bench.target_cost import load_shapes  # noqa: E402
from tiler.check import check_document  # noqa: E402


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--chips", default="ascend910b3,ascend910b2,ascend910b4,h200")
    ap.add_argument("--dtype", default="fp16")
    args = ap.parse_args(argv)
    shapes = load_shapes(False)
    bad = 0
    seconds = {"runnable": 0.0, "plain": 0.0}
    for chip in args.chips.split(","):
        for layout in ("nn", "nt"):
            n = viewed = passed = custom = 0
            gaps = defaultdict(list)
            for s in shapes:
                shape = f"M={s['M']},N={s['N']},K={s['K']},layout={layout}"
                t0 = time.perf_counter()
                res = tiler.search(op="matmul", chip=chip, shape=shape, dtype=args.dtype, top=1)
                doc = res.document()
                seconds["runnable"] += time.perf_counter() - t0
                t0 = time.perf_counter()
                tiler.search(op="matmul", chip=chip, shape=shape, dtype=args.dtype, top=1, runnable=False)
                seconds["plain"] += time.perf_counter() - t0
                n += 1
                viewed += bool(doc["targets"])
                passed += not check_document(doc)[1]
                custom += doc["custom_kernel"]
                for t, c in doc["runnable"].items():
                    gaps[t].append(c["gap"])
                if not doc["targets"] or check_document(doc)[1]:
                    bad += 1
                    print(f"  FAIL {chip} {shape}: {doc.get('no_view')} {check_document(doc)[1]}")
            per = "  ".join(
                f"{t}: geomean x{math.exp(sum(map(math.log, g)) / len(g)):.3f} worst x{max(g):.3f} ({len(g)})"
                for t, g in gaps.items()
            )
            print(
                f"{chip:12} {layout}: {viewed}/{n} with a view, {passed}/{n} pass check, {custom} custom-kernel "
                f"bests   {per}"
            )
    ratio = seconds["runnable"] / seconds["plain"]
    print(
        f"searches: {seconds['runnable']:.1f} s with the per-target answers, {seconds['plain']:.1f} s without "
        f"(x{ratio:.2f})"
    )
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
