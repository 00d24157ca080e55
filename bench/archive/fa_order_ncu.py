"""One flash-attention launch to profile with Nsight Compute (GPU machine): compile and run once, then the launch
ncu is told to profile (--launch-skip 1 --launch-count 1).

    ncu --kernel-name regex:fa_forward --launch-skip 1 --launch-count 1 --section ... \
        python -m bench.archive.fa_order_ncu S D kv_heads BLOCK_M BLOCK_N num_stages num_warps ORDER
"""

from __future__ import annotations

import sys

from bench.gpu.fa_measure import load_kernels


def main() -> None:
    S, D, kvh, bm, bn, st, w, order = (int(x) for x in sys.argv[1:9])
    tk = load_kernels()
    q, k, v = tk.inputs(1, 32, kvh, S, S, D)
    cfg = dict(BLOCK_M=bm, BLOCK_N=bn, num_stages=st, num_warps=w, ORDER=order)
    o = q.new_empty(q.shape)
    for _ in range(2):
        tk.attention(q, k, v, cfg, True, o)
    import torch

    torch.cuda.synchronize()


if __name__ == "__main__":
    main()
