"""Board power, SM clock and instructions of Triton GEMM tilings under sustained load (GPU machine).

    python -m bench.archive.matmul_power --out $OUT [--seconds 1.0] [--no-ncu] [--no-sustained]
        [--ncu-shapes 4096x14336x4096,...]

Every do_bench measurement in bench/data/ is a sustained stream of launches, and Nsight Compute shows the SM clock
of one 4096x14336x4096 launch anywhere from 1.49 to 1.78 GHz depending on the tiling (bench/archive/stage_probe.py): the
busier the tensor cores, the lower the clock. This run asks whether the H200 sits at its power cap on GEMMs and
what each tiling's energy is made of. For each shape and tiling (fp16, `nn`; the operands of all but 8192x8192x1024,
32 MB, exceed the 60 MB L2, so back-to-back launches re-read them from HBM):

  power.csv  `sustained`: launches back to back for --seconds after a 0.3 s warm-up, CUDA events around the loop
             (ms per launch), nvidia-smi sampling the SM clock and board power every 20 ms (medians over the loop);
             one `idle` row: the board with nothing running
  inst.csv   Nsight Compute on one launch of each tiling of the --ncu-shapes (default: the first shape): warp
             instructions executed, SM cycles, clock, DRAM and L2 bytes, shared-memory wavefronts (what a per-event
             energy would multiply), and the activity of the tensor, shared-memory and issue pipes (what a clock
             model under the power cap would read)
"""

from __future__ import annotations

import argparse
import statistics
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]

from bench.gpu.matmul_ncu import known_metrics, profile, write_rows  # noqa: E402

SHAPES = [(4096, 14336, 4096), (896, 16384, 4096), (512, 14336, 4096), (16, 14336, 4096), (8192, 8192, 1024)]
# (BLOCK_M, BLOCK_N, BLOCK_K, num_stages, num_warps), GROUP_M 8, grouped order
TILINGS = [
    (128, 256, 64, 3, 8),
    (128, 256, 64, 4, 8),
    (128, 256, 64, 2, 8),
    (128, 256, 32, 4, 8),
    (128, 256, 32, 8, 8),
    (128, 256, 16, 8, 8),
    (128, 256, 128, 2, 8),
    (256, 128, 64, 3, 8),
    (128, 128, 64, 4, 4),
    (128, 128, 64, 4, 8),
    (64, 256, 64, 4, 4),
    (64, 128, 64, 4, 4),
    (128, 64, 64, 4, 4),
    (64, 64, 64, 4, 4),
    (16, 64, 128, 6, 4),
]
NCU_METRICS = [
    "gpu__time_duration.sum",
    "sm__cycles_elapsed.avg.per_second",
    "sm__cycles_active.avg",
    "sm__inst_executed.sum",
    "smsp__inst_executed_op_shared_ld.sum",
    "l1tex__data_pipe_lsu_wavefronts_mem_shared.sum",
    "lts__t_bytes.sum",
    "dram__bytes_read.sum",
    "dram__bytes_write.sum",
    "sm__pipe_tensor_op_gmma_cycles_active.avg.pct_of_peak_sustained_active",
    "sm__pipe_tensor_op_hmma_cycles_active.avg.pct_of_peak_sustained_active",
    "sm__pipe_shared_cycles_active.avg.pct_of_peak_sustained_active",
    "sm__inst_issued.avg.per_cycle_active",
    "smsp__issue_active.avg.pct_of_peak_sustained_active",
]


KEYS = ("M", "N", "K", "BLOCK_M", "BLOCK_N", "BLOCK_K", "num_stages", "num_warps")


def key(M: int, N: int, K: int, t) -> dict:
    """The row key of a shape and a tiling (t: BLOCK_M, BLOCK_N, BLOCK_K, num_stages, num_warps)."""
    return dict(zip(KEYS, (M, N, K, *t), strict=True))


def cfg(t) -> dict:
    bm, bn, bk, st, w = t
    return dict(BLOCK_M=bm, BLOCK_N=bn, BLOCK_K=bk, num_stages=st, num_warps=w, GROUP_M=8, ORDER=1, SPLIT_K=1)


def log(msg: str) -> None:
    print(f"[{time.strftime('%H:%M:%S')}] {msg}", file=sys.stderr, flush=True)


def smi_fields() -> str:
    """power.draw.instant where this driver has it (power.draw is a 1-s average on recent drivers)."""
    q = "clocks.sm,power.draw.instant,power.draw"
    res = subprocess.run(
        ["nvidia-smi", f"--query-gpu={q}", "--format=csv,noheader,nounits"], capture_output=True, text=True
    )
    return (
        q
        if res.returncode == 0 and "N/A" not in res.stdout and "nvalid" not in res.stdout
        else "clocks.sm,power.draw,power.draw"
    )


def sample(fields: str) -> subprocess.Popen:
    return subprocess.Popen(
        ["nvidia-smi", f"--query-gpu={fields}", "--format=csv,noheader,nounits", "-lms", "20"],
        stdout=subprocess.PIPE,
        text=True,
    )


def read(proc: subprocess.Popen) -> list[tuple[float, ...]]:
    proc.terminate()
    out = []
    for ln in proc.communicate()[0].splitlines():
        try:
            out.append(tuple(float(x) for x in ln.split(",")))
        except ValueError:
            continue
    return out


def sustained(out_dir: Path, seconds: float) -> None:
    import torch

    from tiler.ops.matmul.triton_runner import Problem, _plan

    fields = smi_fields()
    log(f"nvidia-smi fields: {fields}")
    time.sleep(2.0)
    proc = sample(fields)
    time.sleep(1.5)
    idle = read(proc)
    rows = [
        dict(
            **dict.fromkeys(KEYS, ""),
            way="idle",
            ms="",
            launches="",
            sm_mhz=statistics.median(s[0] for s in idle),
            power_w=statistics.median(s[1] for s in idle),
            power_avg_w=statistics.median(s[2] for s in idle),
            samples=len(idle),
        )
    ]
    for M, N, K in SHAPES:
        prob = Problem(M, N, K)
        for t in TILINGS:
            try:
                prob.measure(cfg(t), check=True)  # compiles, checks the result against torch
                fn, _ = _plan(prob.a, prob.b, cfg(t))
            except Exception as e:  # noqa: BLE001 - a tiling that does not run here is skipped, said why
                log(f"{M}x{N}x{K} {t}: {type(e).__name__}: {str(e)[:160]}")
                continue
            a, b = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            a.record()
            for _ in range(3):
                fn()
            b.record()
            torch.cuda.synchronize()
            per = max(a.elapsed_time(b) / 3, 1e-3)
            warm = int(300 / per) + 1
            loops = int(seconds * 1e3 / per) + 1
            for _ in range(warm):
                fn()
            torch.cuda.synchronize()
            proc = sample(fields)
            a.record()
            for _ in range(loops):
                fn()
            b.record()
            torch.cuda.synchronize()
            smp = read(proc)
            busy = smp[5:] if len(smp) > 10 else smp
            rows.append(
                dict(
                    **key(M, N, K, t),
                    way="sustained",
                    ms=a.elapsed_time(b) / loops,
                    launches=loops,
                    sm_mhz=statistics.median(s[0] for s in busy),
                    power_w=statistics.median(s[1] for s in busy),
                    power_avg_w=statistics.median(s[2] for s in busy),
                    samples=len(busy),
                )
            )
            log(
                f"{M}x{N}x{K} {t}: {rows[-1]['ms']:.4f} ms {rows[-1]['sm_mhz']:.0f} MHz {rows[-1]['power_w']:.0f} W"
            )
            time.sleep(0.5)
        del prob
        torch.cuda.empty_cache()
    write_rows(out_dir / "power.csv", rows)


def instructions(out_dir: Path, shapes: list[tuple[int, int, int]]) -> None:
    metrics = known_metrics(NCU_METRICS)
    log(f"ncu metrics known here: {len(metrics)} of {len(NCU_METRICS)}")
    rows = []
    for M, N, K in shapes:
        for t in TILINGS:
            got = profile(M, N, K, (*t, 8, 1), metrics)
            if isinstance(got, str):
                log(f"ncu {M}x{N}x{K} {t}: {got}")
                continue
            rows.append({**key(M, N, K, t), **got})
            log(f"ncu {M}x{N}x{K} {t}: {got.get('sm__inst_executed.sum')} instructions")
    write_rows(out_dir / "inst.csv", rows)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", required=True, type=Path)
    ap.add_argument("--seconds", type=float, default=1.0)
    ap.add_argument("--no-ncu", action="store_true")
    ap.add_argument("--no-sustained", action="store_true", help="Nsight Compute only")
    ap.add_argument("--ncu-shapes", default="x".join(map(str, SHAPES[0])), help="MxNxK,... to profile")
    a = ap.parse_args(argv)
    a.out.mkdir(parents=True, exist_ok=True)
    if not a.no_sustained:
        sustained(a.out, a.seconds)
    if not a.no_ncu:
        instructions(a.out, [tuple(int(x) for x in s.split("x")) for s in a.ncu_shapes.split(",")])
    return 0


if __name__ == "__main__":
    sys.exit(main())
