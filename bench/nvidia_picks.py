"""NVIDIA's analytic heuristic (nvMatmulHeuristics) as a peer: its top-k Triton configs for a GEMM on the H200.

The shared calibration set's `source=peer` rows are nvMatmulHeuristics' top-4 for the TRITON target and the
H200_SXM profile. With the PERF_MODEL_BASED_AUTO_TUNING flag this script gives exactly those rows for the shared
shapes (checked on 16x4096x4096 and 4096x4096x4096), so new shapes get the peer's picks made the same way.

Mapping of a returned configuration to the project's Triton knobs: BLOCK_M/N/K = the CTA tile, num_stages =
stages, num_warps = (cta_m / warp_m) * (cta_n / warp_n), SPLIT_K = split_k, GROUP_M = the swizzle factor and
ORDER = 1 (grouped) when that factor is above 1, else 0 (row-major).

Needs `pip install nvidia-matmul-heuristics` (a CPU library; the `peers` extra). Used by bench/shape_classes.py.

    python -m bench.nvidia_picks 16x4096x4096 4096x4096x4096
"""

from __future__ import annotations

import sys

KNOBS = ("BLOCK_M", "BLOCK_N", "BLOCK_K", "num_stages", "num_warps", "GROUP_M", "ORDER", "SPLIT_K")


def nvidia_top(M: int, N: int, K: int, k: int = 4) -> list[dict]:
    """The heuristic's top-k for fp16 row-major A (MxK) @ B (KxN), as dicts of KNOBS plus its predicted us."""
    import nvMatmulHeuristics as nv

    h = nv.NvMatmulHeuristicsInterfaceEx(
        backend=nv.NvMatmulHeuristicsTarget.TRITON,
        flags=nv.NvMatmulHeuristicsFlags.PERF_MODEL_BASED_AUTO_TUNING,
        gpu=nv.NvMatmulHeuristicsNvidiaGpu.H200_SXM,
    )
    layout = nv.boolsToNvMatmulHeuristicsLayout(False, False)
    out = []
    for c in h.get(h.makeNvMatmulHeuristicsProblem(M, N, K, layout), k, "HSH"):
        g = c["kernel"]
        warps = (g.cta_tile_m // g.warp_tile_m) * (g.cta_tile_n // g.warp_tile_n)
        out.append(
            {
                "BLOCK_M": g.cta_tile_m,
                "BLOCK_N": g.cta_tile_n,
                "BLOCK_K": g.cta_tile_k,
                "num_stages": g.stages,
                "num_warps": warps,
                "GROUP_M": g.swizzle_factor,
                "ORDER": 1 if g.swizzle_factor > 1 else 0,
                "SPLIT_K": g.split_k,
                "predicted_us": c["runtime"] * 1e6,
            }
        )
    return out


if __name__ == "__main__":
    for s in sys.argv[1:]:
        M, N, K = (int(x) for x in s.lower().split("x"))
        for i, r in enumerate(nvidia_top(M, N, K)):
            print(s, i + 1, " ".join(f"{k}={r[k]}" for k in KNOBS), f"{r['predicted_us']:.2f} us")
