"""Does the launch order change the compiled code? PTX of one tiling in three orders, opcode counts that differ.

Run on the GPU machine (it compiles for the device):

    python -m bench.archive.ptx_orders DIR      (writes DIR/rm.ptx, g1.ptx, g8.ptx; prints the counts)

4095^3 (A and B rows misaligned), 128x128x64 s4 w8: row-major (ORDER 0), grouped by 1 (ORDER 1, GROUP_M 1: the
same walk as row-major, other index math) and grouped by 8. GROUP_M and ORDER are constexprs of the kernel, so
each order is its own compiled kernel.
"""

import collections
import re
import sys
from pathlib import Path

from tiler.ops.matmul.triton_runner import precompile  # noqa: E402

M, N, K = 4095, 4095, 4095
BASE = dict(BLOCK_M=128, BLOCK_N=128, BLOCK_K=64, num_stages=4, num_warps=8, SPLIT_K=1)
ORDERS = {"rm": (1, 0), "g1": (1, 1), "g8": (8, 1)}  # name -> (GROUP_M, ORDER)


def main(out_dir: str) -> int:
    counts = {}
    for name, (gm, order) in ORDERS.items():
        ptx = precompile(M, N, K, dict(BASE, GROUP_M=gm, ORDER=order)).asm["ptx"]
        counts[name] = collections.Counter(re.findall(r"^\s*(?:@%p\d+\s+)?([a-z][a-z0-9_.]*)", ptx, re.M))
        Path(out_dir, f"{name}.ptx").write_text(ptx)
    print("opcode".ljust(40), *[n.rjust(6) for n in counts])
    for op in sorted(set().union(*counts.values())):
        vals = [counts[n].get(op, 0) for n in counts]
        if len(set(vals)) > 1:
            print(op.ljust(40), *[str(v).rjust(6) for v in vals])
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1]))
