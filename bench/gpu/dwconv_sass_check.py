"""Does the CPU compile of bench/dwconv_sass.py give the registers the GPU machine's compile gives? Run THERE.

    python -m bench.gpu.dwconv_sass_check [--n 40]

Compiles `--n` kernels of bench/data/h200_dwconv_nhwc_sass.csv (a fixed random sample) the way the timed runs do
(`triton_kernels.precompile`, real pointers and integers on the GPU) and prints each kernel's registers and spills
beside the table's, then how many agree (same registers, and both spill or neither).
"""

from __future__ import annotations

import argparse
import csv
import random

from bench.gpu.dwconv_measure import PROBLEM_KEYS, load_kernels
from bench.gpu.gpu_measure import ROOT

TABLE = ROOT / "bench" / "data" / "h200_dwconv_nhwc_sass.csv"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--n", type=int, default=40)
    args = ap.parse_args()
    km = load_kernels()
    rows = list(csv.DictReader(TABLE.open()))
    random.Random(0).shuffle(rows)
    same = 0
    for r in rows[: args.n]:
        problem = {k: int(r[k]) for k in PROBLEM_KEYS} | {"layout": "nhwc"}
        cfg = {k: int(r[k]) for k in ("groups_per_op", "BLOCK_P", "num_warps")}
        cfg |= {"scheme": 2, "BLOCK_K": 16, "num_stages": 1}
        k = km.precompile(problem, cfg, "fp16")
        k._init_handles()
        ok = int(k.n_regs) == int(r["n_regs"]) and (int(k.n_spills) > 0) == (int(r["stack_bytes"]) > 0)
        same += ok
        print(
            f"{r['kh']}x{r['kw']} G{cfg['groups_per_op']} P{cfg['BLOCK_P']} w{cfg['num_warps']}: GPU machine "
            f"{k.n_regs} registers, {k.n_spills} spilled; table {r['n_regs']}, stack {r['stack_bytes']} B"
            + ("" if ok else "  DIFFERENT")
        )
    print(f"{same} of {args.n} agree")


if __name__ == "__main__":
    main()
