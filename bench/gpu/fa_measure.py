"""Measure the project's flash-attention kernel on the GPU machine: a grid of tilings on attention shapes.

    python -m bench.gpu.fa_measure --out $OUT [--budget 480] [--shapes held|cal|all] [--wide] [--jobs 12] [--only 3,4,5]
        [--loads 1]

For every shape: torch's scaled_dot_product_attention (the anchor), then every tiling of the grid (the knobs of
bench/data/h200_fa_cal.csv: BLOCK_M, BLOCK_N in 32/64/128 (and 16 for short S1), num_stages 2-4, num_warps 4/8,
ORDER 0/1 under the causal mask), each checked against SDPA (max |error| < 2e-2) and timed with
triton.testing.do_bench (median, L2 flushed, random inputs). A tiling that does not compile or launch is written
with an empty `ms` and `fail`. Rows go to h200_fa_measured.csv as they are measured; the run stops cleanly at the
budget. The kernel file is loaded by path, so nothing of tiler but that file is needed there.

`--shapes cal` times the six shapes of bench/data/h200_fa_cal.csv (the fit's), `all` both sets (rows labelled
`cal` / `held`). `--wide` adds the tilings the first grids never timed though the space holds them: 256 query rows
on 8 warps, 256 key rows per step, and 5 stages on the 128-row blocks (the large tiles a long prefill may want).
`--jobs N` compiles every (shape, tiling) first in N spawned processes, one launch each, into Triton's on-disk
cache, so the timing loop does not wait on the compiler. `--loads 1` times every tiling with the kernel's LOADS 1
(K and V through TMA descriptors) and adds a LOADS column; without it the configs carry no LOADS (the pointer
kernel) and the table its usual columns.
"""

from __future__ import annotations

import argparse
import csv
import itertools
import os
import time
from pathlib import Path

from bench.gpu.gpu_measure import load_module  # noqa: E402  (the matmul bench's helpers; no tiler import)

HERE = Path(__file__).resolve().parents[2]
COLUMNS = [
    "set",
    "B",
    "heads",
    "kv_heads",
    "S1",
    "S2",
    "D",
    "causal",
    "impl",
    "BLOCK_M",
    "BLOCK_N",
    "num_stages",
    "num_warps",
    "ORDER",
    "ms",
    "tflops",
    "max_abs_err",
]
# held-out attention shapes (none of bench/data/h200_fa_cal.csv's six): GQA and MHA, D 64/128, causal and not,
# chunked prefill (S1 < S2), short S1, ragged S and heads
HELD = [
    (2, 32, 8, 2048, 2048, 128, 1),
    (4, 16, 16, 1024, 1024, 64, 1),
    (2, 32, 32, 4096, 4096, 64, 0),
    (8, 32, 8, 256, 4096, 128, 1),
    (1, 64, 8, 2048, 2048, 128, 0),
    (16, 32, 8, 16, 8192, 128, 1),
    (4, 28, 4, 1024, 1024, 128, 1),
    (2, 40, 40, 1536, 1536, 128, 0),
    (1, 32, 8, 8192, 8192, 128, 1),
    (8, 12, 12, 1024, 1024, 64, 0),
]


# the six shapes bench/data/h200_fa_cal.csv was fitted on
CAL = [
    (1, 32, 8, 512, 8192, 128, 1),
    (1, 32, 8, 4096, 4096, 128, 1),
    (1, 32, 32, 16384, 16384, 128, 1),
    (4, 32, 8, 1024, 1024, 128, 1),
    (8, 16, 16, 2048, 2048, 64, 0),
    (16, 12, 12, 512, 512, 64, 0),
]


def load_kernels():
    return load_module("fa_kernels", HERE / "tiler/ops/flash_attention/triton_kernels.py")


def configs(S1: int, causal: int, wide: bool = False, loads: int = 0):
    blocks_m = (16, 32, 64) if S1 <= 64 else (32, 64, 128)
    grid = [
        (bm, bn, st, w)
        for bm, bn, st, w in itertools.product(blocks_m, (32, 64, 128), (2, 3, 4), (4, 8))
        if not (bm <= 32 and w == 8)
    ]
    if wide and S1 > 64:
        grid += [(256, bn, st, 8) for bn in (32, 64, 128) for st in (2, 3, 4)]
        grid += [(bm, 256, st, w) for bm in (64, 128) for w in (4, 8) for st in (2, 3)]
        grid += [(128, bn, 5, 8) for bn in (64, 128)]
    out = []
    for bm, bn, st, w in grid:
        for order in (0, 1) if causal else (0,):
            out.append(dict(BLOCK_M=bm, BLOCK_N=bn, num_stages=st, num_warps=w, ORDER=order))
            if loads:
                out[-1]["LOADS"] = loads
    return out


def _compile_task(task):
    """One launch of a (shape, tiling) in a spawned worker: Triton compiles it into its on-disk cache."""
    shape, cfg = task
    t = time.perf_counter()
    try:
        tk = load_kernels()
        q, k, v = tk.inputs(*(shape[f] for f in ("B", "heads", "kv_heads", "S1", "S2", "D")))
        tk.attention(q, k, v, cfg, bool(shape["causal"]))
        return True, time.perf_counter() - t
    except Exception:  # noqa: BLE001 - the timing loop meets the same failure and records it
        return False, time.perf_counter() - t


def precompile(tasks: list, jobs: int, deadline: float) -> None:
    """Compile every task's kernel in `jobs` spawned processes before `deadline` (time.time()); one task per
    distinct specialisation (D, causal, tiling, S1 and S2 divisible by 16)."""
    import multiprocessing as mp

    seen, todo = set(), []
    for shape, cfg in tasks:
        key = (shape["D"], shape["causal"], shape["S1"] % 16 == 0, shape["S2"] % 16 == 0, tuple(cfg.values()))
        if key not in seen:
            seen.add(key)
            todo.append((shape, cfg))
    t0, done = time.time(), 0
    with mp.get_context("spawn").Pool(jobs) as pool:
        it = pool.imap_unordered(_compile_task, todo, chunksize=1)
        while done < len(todo):
            try:
                it.next(timeout=max(0.1, deadline - time.time()))
            except mp.TimeoutError:
                print(f"[compile] deadline reached after {done}/{len(todo)}")
                pool.terminate()
                break
            done += 1
    print(f"[compile] {done}/{len(todo)} kernels in {time.time() - t0:.0f} s ({jobs} processes)", flush=True)


def pairs(S1, S2, causal):
    return S1 * (S2 - S1) + S1 * (S1 + 1) / 2 if causal else S1 * S2


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", type=Path, default=Path(os.environ.get("OUT", "out")))
    ap.add_argument("--budget", type=float, default=480.0, help="seconds; stops between tilings")
    ap.add_argument("--shapes", choices=("held", "cal", "all"), default="held")
    ap.add_argument("--wide", action="store_true", help="add 256-row blocks, 256-key steps and 5 stages")
    ap.add_argument("--jobs", type=int, default=0, help="compile first in this many processes (0: as timed)")
    ap.add_argument("--only", help="comma-separated positions in the chosen shape list (e.g. 3,4,5)")
    ap.add_argument("--loads", type=int, choices=(0, 1), default=0, help="the kernel's LOADS knob (1: TMA)")
    args = ap.parse_args()
    sets = {"held": [("held", s) for s in HELD], "cal": [("cal", s) for s in CAL]}
    todo = sets["cal"] + sets["held"] if args.shapes == "all" else sets[args.shapes]
    if args.only:
        todo = [todo[int(i)] for i in args.only.split(",")]
    import torch
    import triton

    tk = load_kernels()
    t0 = time.time()
    args.out.mkdir(parents=True, exist_ok=True)
    props = torch.cuda.get_device_properties(0)
    print(
        f"device {props.name} sms={props.multi_processor_count} triton={triton.__version__} torch={torch.__version__}"
    )
    with (args.out / "h200_fa_measured.csv").open("w", newline="") as f:
        w = csv.writer(f)
        extra = ["LOADS"] if args.loads else []
        loads_col = [args.loads] if args.loads else []
        w.writerow(COLUMNS + extra)
        if args.jobs:
            names = ("B", "heads", "kv_heads", "S1", "S2", "D", "causal")
            tasks = [
                (dict(zip(names, s, strict=True)), cfg)
                for _, s in todo
                for cfg in configs(s[3], s[6], args.wide, args.loads)
            ]
            precompile(tasks, args.jobs, t0 + 0.5 * args.budget)
        for label, (B, H, KVH, S1, S2, D, causal) in todo:
            if time.time() - t0 > args.budget:
                print("budget reached")
                break
            shape = dict(B=B, heads=H, kv_heads=KVH, S1=S1, S2=S2, D=D, causal=causal)
            flop = 4.0 * B * H * pairs(S1, S2, causal) * D
            q, k, v = tk.inputs(B, H, KVH, S1, S2, D)

            def sdpa(q=q, k=k, v=v, causal=causal):
                return tk.reference(q, k, v, bool(causal))

            ms = triton.testing.do_bench(sdpa, warmup=10, rep=40, return_mode="median")
            base = [label, B, H, KVH, S1, S2, D, causal]
            w.writerow(
                [*base, "torch_sdpa", "", "", "", "", "", f"{ms:.5f}", f"{flop / ms / 1e9:.2f}", ""]
                + [""] * len(extra)
            )
            best = (float("inf"), None)
            for cfg in configs(S1, causal, args.wide, args.loads):
                if time.time() - t0 > args.budget:
                    break
                knobs = [cfg[k] for k in ("BLOCK_M", "BLOCK_N", "num_stages", "num_warps", "ORDER")]
                try:
                    res = tk.time_config(shape, cfg)
                except Exception as exc:  # does not compile, launch, or is wrong: recorded as a failure
                    print(f"FAIL {shape} {cfg}: {type(exc).__name__}: {str(exc).splitlines()[0][:120]}")
                    w.writerow([*base, "triton", *knobs, "", "", "fail", *loads_col])
                    continue
                w.writerow(
                    [
                        *base,
                        "triton",
                        *knobs,
                        f"{res['ms']:.5f}",
                        f"{flop / res['ms'] / 1e9:.2f}",
                        f"{res['max_abs_err']:.2e}",
                        *loads_col,
                    ]
                )
                if res["ms"] < best[0]:
                    best = (res["ms"], cfg)
            f.flush()
            print(
                f"[{time.time() - t0:6.1f}s] {shape}: sdpa {ms:.4f} ms, best {best[0]:.4f} ms {best[1]} "
                f"(sdpa / best {ms / best[0]:.3f}: above 1, the tiling is faster)",
                flush=True,
            )


if __name__ == "__main__":
    main()
