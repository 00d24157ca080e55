"""Why does 128x256x64 with 3 stages beat 4 stages, 32-wide K steps and 2 stages on large GEMMs? (GPU machine)

    python -m bench.archive.stage_probe --out $OUT [--rounds 5] [--no-ncu]

On large compute-bound fp16 GEMMs the measured tables (bench/data/h200_matmul_*.csv) put 128x256 w8 with BLOCK_K=64
and 3 stages first, 4 stages about 2-5 % behind, BLOCK_K=32 with 5-8 stages 3-5 % behind, BLOCK_K=16 about 20 %
and 2 stages about 30 % behind, where the model ranks more stages monotonically better. This probe collects, for
the 128x256 w8 grouped (GROUP_M 8) tilings of those variants:

  ptx.csv    per tiling, what the compiled loop does: counts of wgmma issues and waits (with their depth),
             cp.async commits and waits (with their depth), CTA barriers, mbarrier waits; registers and shared
             memory (Triton's compiled kernel); ttgir_<tiling>.txt holds the TTGIR of two of them
  times.csv  do_bench medians (default 25/100 ms) of every tiling on three shapes, `--rounds` interleaved rounds
  ncu.csv    Nsight Compute (--clock-control none, one launch after a warm-up launch, bench/gpu/matmul_ncu.py) on
             4096x14336x4096: duration, SM clock, tensor-pipe activity, issue activity, warp stall reasons
"""

from __future__ import annotations

import argparse
import re
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]

from bench.gpu.matmul_ncu import known_metrics, profile, write_rows  # noqa: E402

# (BLOCK_K, num_stages) of 128x256 w8: every one fits in 227 KB of shared memory
VARIANTS = [(64, 2), (64, 3), (64, 4), (32, 3), (32, 4), (32, 6), (32, 8), (16, 8), (128, 2)]
SHAPES = [(4096, 14336, 4096), (2048, 6144, 4096), (896, 16384, 4096)]
NCU_SHAPE = SHAPES[0]
NCU_METRICS = [
    "gpu__time_duration.sum",
    "sm__cycles_elapsed.avg.per_second",
    "sm__cycles_active.avg",
    "sm__inst_executed.avg.per_cycle_active",
    "sm__pipe_tensor_op_gmma_cycles_active.avg.pct_of_peak_sustained_active",
    "sm__pipe_shared_cycles_active.avg.pct_of_peak_sustained_active",
    "smsp__warps_active.avg.per_cycle_active",
    "l1tex__data_bank_conflicts_pipe_lsu_mem_shared.sum",
    "lts__t_sector_hit_rate.pct",
    "dram__bytes_read.sum",
    "smsp__average_warp_latency_issue_stalled_barrier",
    "smsp__average_warp_latency_issue_stalled_long_scoreboard",
    "smsp__average_warp_latency_issue_stalled_wait",
    "smsp__average_warp_latency_issue_stalled_math_pipe_throttle",
    "smsp__average_warp_latency_issue_stalled_mio_throttle",
    "smsp__average_warp_latency_issue_stalled_lg_throttle",
    "smsp__average_warp_latency_issue_stalled_short_scoreboard",
    "smsp__average_warp_latency_issue_stalled_membar",
    "smsp__average_warp_latency_issue_stalled_sleeping",
    "smsp__average_warp_latency_issue_stalled_dispatch_stall",
    "smsp__average_warp_latency_issue_stalled_selected",
    "smsp__average_warp_latency_issue_stalled_not_selected",
    "smsp__average_warp_latency_issue_stalled_misc",
    "smsp__average_warp_latency_issue_stalled_no_instruction",
    "smsp__average_warp_latency_issue_stalled_branch_resolving",
]


def cfg(bk: int, st: int) -> dict:
    return dict(
        BLOCK_M=128, BLOCK_N=256, BLOCK_K=bk, num_stages=st, num_warps=8, GROUP_M=8, ORDER=1, SPLIT_K=1
    )


def log(msg: str) -> None:
    print(f"[{time.strftime('%H:%M:%S')}] {msg}", file=sys.stderr, flush=True)


def ptx_counts(ptx: str) -> dict:
    """What the compiled kernel's PTX issues: instruction counts, each wait with its depth."""
    out = {
        "wgmma_issue": len(re.findall(r"\bwgmma\.mma_async", ptx)),
        "wgmma_commit": len(re.findall(r"\bwgmma\.commit_group", ptx)),
        "cp_async": len(re.findall(r"\bcp\.async\.c[ag]\.", ptx)),
        "cp_async_commit": len(re.findall(r"\bcp\.async\.commit_group", ptx)),
        "bar_sync": len(re.findall(r"\bbar\.sync\b|\bbarrier\.sync\b", ptx)),
        "mbarrier_wait": len(re.findall(r"\bmbarrier\.try_wait", ptx)),
        "tma_load": len(re.findall(r"\bcp\.async\.bulk\.tensor", ptx)),
        "fence_proxy_async": len(re.findall(r"\bfence\.proxy\.async", ptx)),
    }
    for name, pat in (
        ("wgmma_wait", r"wgmma\.wait_group\.sync\.aligned\s+(\d+)"),
        ("cp_wait", r"cp\.async\.wait_group\s+(\d+)"),
    ):
        depths = re.findall(pat, ptx)
        out[name] = " ".join(f"{d}:{depths.count(d)}" for d in sorted(set(depths), key=int))
    return out


def census(out_dir: Path) -> None:
    from tiler.ops.matmul.triton_runner import precompile

    rows = []
    M, N, K = NCU_SHAPE
    for bk, st in VARIANTS:
        k = precompile(M, N, K, cfg(bk, st))
        init = getattr(k, "_init_handles", None)
        if init is not None:
            init()
        row = {"BLOCK_K": bk, "num_stages": st, "n_regs": int(k.n_regs), "n_spills": int(k.n_spills)}
        row["shared"] = int(k.metadata.shared)
        row.update(ptx_counts(k.asm["ptx"]))
        rows.append(row)
        if (bk, st) in ((64, 2), (64, 3)):
            (out_dir / f"ttgir_128x256x{bk}_s{st}.txt").write_text(k.asm["ttgir"])
        log(f"compiled 128x256x{bk} s{st}: {row}")
    write_rows(out_dir / "ptx.csv", rows)


def timings(out_dir: Path, rounds: int) -> None:
    from tiler.ops.matmul.triton_runner import Problem

    rows = []
    for M, N, K in SHAPES:
        prob = Problem(M, N, K)
        for r in range(rounds):
            order = VARIANTS if r % 2 == 0 else VARIANTS[::-1]
            for bk, st in order:
                res = prob.measure(cfg(bk, st), check=(r == 0))
                rows.append(
                    {"M": M, "N": N, "K": K, "BLOCK_K": bk, "num_stages": st, "round": r, "ms": res["ms"]}
                )
        log(f"timed {M}x{N}x{K}")
        del prob
    write_rows(out_dir / "times.csv", rows)


def profile_all(out_dir: Path) -> None:
    M, N, K = NCU_SHAPE
    metrics = known_metrics(NCU_METRICS)
    log(f"ncu metrics not known here: {sorted(set(NCU_METRICS) - set(metrics))}")
    rows = []
    for bk, st in VARIANTS:
        got = profile(M, N, K, (128, 256, bk, st, 8, 8, 1), metrics)
        if isinstance(got, str):
            log(f"ncu 128x256x{bk} s{st}: {got}")
            continue
        rows.append({"BLOCK_K": bk, "num_stages": st, **got})
        log(f"ncu 128x256x{bk} s{st}: {got.get('gpu__time_duration.sum')} ns")
    write_rows(out_dir / "ncu.csv", rows)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", required=True, type=Path)
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--no-ncu", action="store_true")
    a = ap.parse_args(argv)
    a.out.mkdir(parents=True, exist_ok=True)
    census(a.out)
    timings(a.out, a.rounds)
    if not a.no_ncu:
        profile_all(a.out)
    return 0


if __name__ == "__main__":
    sys.exit(main())
