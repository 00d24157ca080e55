"""One GEMM launch to profile with Nsight Compute (GPU machine): the runner's kernel for one tiling, run once to
compile, then the launch ncu profiles (--launch-skip 1 --launch-count 1); prints the compiled kernel's registers and
shared memory.

    ncu --kernel-name regex:_gemm_tile_kernel --launch-skip 1 --launch-count 1 --section ... \
        python3 bench/matmul_ncu.py M N K BLOCK_M BLOCK_N BLOCK_K num_stages num_warps [GROUP_M ORDER]
"""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from tiler.ops.matmul.triton_runner import Problem, _plan  # noqa: E402


def main() -> None:
    M, N, K, bm, bn, bk, st, w = (int(x) for x in sys.argv[1:9])
    group, order = (int(x) for x in sys.argv[9:11]) if len(sys.argv) > 10 else (1, 0)
    cfg = dict(
        BLOCK_M=bm, BLOCK_N=bn, BLOCK_K=bk, num_stages=st, num_warps=w, GROUP_M=group, ORDER=order, SPLIT_K=1
    )
    prob = Problem(M, N, K, reference=False)
    fn, _ = _plan(prob.a, prob.b, cfg)
    for _ in range(2):
        fn()
    import torch

    torch.cuda.synchronize()


if __name__ == "__main__":
    main()
