"""Measure GEMM tilings on the GPU machine: run this THERE (it needs torch, triton and a CUDA device).

    PYTHONUNBUFFERED=1 python -m bench.gpu.gpu_measure --out $OUT/h200_matmul_new.csv [--candidates extra.csv]

What it does, within a wall-clock budget (--budget-s, default 440 s from start):

1. Records the machine (GPU, driver, torch, triton) in ``<out dir>/h200_env.json`` and measures two
   ceilings once into ``<out dir>/h200_ceilings.csv``: a 2 GiB device-to-device copy (GB/s counting
   bytes read plus bytes written) and an 8192^3 torch.matmul in fp16 and bf16 (TFLOP/s).
2. Compiles every (config, specialisation) it will time in a pool of worker processes first, into
   Triton's on-disk cache, so that the timing loop does not wait on the compiler.
3. For each shape of SHAPES (none of them is in bench/data/h200_matmul_cal.csv), times torch.matmul
   (impl=torch, source=cublas) and every config of GRID (impl=triton, source=grid), plus the rows of
   --candidates for that shape (source from its column, default 'model'). Each row: median of
   triton.testing.do_bench(warmup=25, rep=100) with L2 flushed, after a correctness check against an
   fp32 reference on poisoned output. Rows are written and flushed as they come, so a timeout leaves data.

Columns are those of h200_matmul_cal.csv. A config that cannot run (out of shared memory, compile
error) is skipped with a line on stderr. A summary table ends the output.
"""

from __future__ import annotations

import argparse
import csv
import json
import math
import os
import platform
import statistics
import subprocess
import sys
import time
from datetime import UTC, datetime
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]

COLUMNS = [
    "M",
    "N",
    "K",
    "impl",
    "source",
    "BLOCK_M",
    "BLOCK_N",
    "BLOCK_K",
    "num_stages",
    "num_warps",
    "GROUP_M",
    "ORDER",
    "SPLIT_K",
    "ms",
    "tflops",
    "rel_err",
]
KNOBS = ("BLOCK_M", "BLOCK_N", "BLOCK_K", "num_stages", "num_warps", "GROUP_M", "ORDER", "SPLIT_K")

# The fixed candidate grid: the distinct configs of the source=grid rows of bench/data/h200_matmul_cal.csv,
# in their order there (100 configs). Tuples follow KNOBS.
GRID = [
    (128, 256, 64, 3, 8, 8, 1, 1),
    (64, 256, 32, 4, 4, 8, 1, 1),
    (128, 128, 32, 4, 4, 8, 1, 1),
    (128, 64, 32, 4, 4, 8, 1, 1),
    (64, 128, 32, 4, 4, 8, 1, 1),
    (128, 32, 32, 4, 4, 8, 1, 1),
    (64, 32, 32, 5, 2, 8, 1, 1),
    (32, 64, 32, 5, 2, 8, 1, 1),
    (128, 256, 64, 4, 8, 8, 1, 1),
    (256, 128, 64, 3, 8, 8, 1, 1),
    (128, 128, 64, 4, 8, 8, 1, 1),
    (128, 128, 64, 3, 4, 8, 1, 1),
    (128, 128, 64, 5, 4, 8, 1, 1),
    (64, 128, 64, 5, 4, 8, 1, 1),
    (64, 64, 64, 4, 4, 8, 1, 1),
    (64, 64, 128, 3, 4, 8, 1, 1),
    (64, 128, 32, 2, 4, 8, 1, 1),
    (64, 64, 64, 5, 4, 8, 1, 1),
    (256, 64, 32, 5, 8, 8, 1, 1),
    (128, 64, 64, 2, 4, 8, 1, 1),
    (64, 64, 64, 2, 8, 8, 1, 1),
    (64, 64, 128, 5, 4, 8, 1, 1),
    (64, 256, 32, 5, 8, 8, 1, 1),
    (128, 64, 32, 5, 8, 8, 1, 1),
    (64, 64, 64, 2, 4, 8, 1, 1),
    (64, 128, 32, 5, 4, 8, 1, 1),
    (64, 64, 64, 3, 8, 8, 1, 1),
    (128, 128, 32, 3, 4, 8, 1, 1),
    (256, 64, 64, 2, 4, 8, 1, 1),
    (64, 64, 32, 5, 8, 8, 1, 1),
    (64, 256, 32, 2, 8, 8, 1, 1),
    (64, 64, 64, 5, 8, 8, 1, 1),
    (128, 128, 64, 4, 4, 8, 1, 1),
    (64, 256, 64, 3, 8, 8, 1, 1),
    (128, 128, 32, 5, 4, 8, 1, 1),
    (64, 256, 128, 2, 4, 8, 1, 1),
    (128, 128, 32, 4, 8, 8, 1, 1),
    (64, 256, 64, 2, 8, 8, 1, 1),
    (64, 64, 32, 5, 4, 8, 1, 1),
    (64, 256, 64, 4, 4, 8, 1, 1),
    (64, 64, 32, 4, 8, 8, 1, 1),
    (128, 128, 32, 3, 8, 8, 1, 1),
    (64, 64, 128, 2, 8, 8, 1, 1),
    (64, 128, 64, 4, 8, 8, 1, 1),
    (256, 64, 32, 4, 4, 8, 1, 1),
    (256, 64, 64, 4, 8, 8, 1, 1),
    (128, 128, 32, 2, 8, 8, 1, 1),
    (64, 256, 64, 4, 8, 8, 1, 1),
    (256, 64, 32, 4, 8, 8, 1, 1),
    (64, 128, 64, 5, 8, 8, 1, 1),
    (64, 256, 64, 5, 8, 8, 1, 1),
    (128, 128, 128, 3, 8, 8, 1, 1),
    (64, 64, 128, 5, 8, 8, 1, 1),
    (64, 64, 64, 4, 8, 8, 1, 1),
    (64, 256, 32, 5, 4, 8, 1, 1),
    (256, 128, 32, 4, 8, 8, 1, 1),
    (256, 64, 64, 4, 4, 8, 1, 1),
    (128, 64, 32, 2, 8, 8, 1, 1),
    (256, 64, 64, 5, 4, 8, 1, 1),
    (256, 64, 32, 2, 4, 8, 1, 1),
    (256, 64, 32, 3, 8, 8, 1, 1),
    (64, 256, 64, 5, 4, 8, 1, 1),
    (64, 256, 64, 2, 4, 8, 1, 1),
    (128, 128, 64, 3, 8, 8, 1, 1),
    (64, 128, 32, 3, 4, 8, 1, 1),
    (128, 64, 128, 2, 8, 8, 1, 1),
    (128, 128, 32, 2, 4, 8, 1, 1),
    (64, 256, 128, 2, 8, 8, 1, 1),
    (64, 128, 128, 2, 4, 8, 1, 1),
    (128, 64, 64, 4, 8, 8, 1, 1),
    (128, 256, 64, 2, 8, 8, 1, 1),
    (128, 64, 64, 4, 4, 8, 1, 1),
    (128, 256, 64, 3, 8, 1, 0, 1),
    (128, 256, 64, 3, 8, 1, 2, 1),
    (128, 256, 64, 3, 8, 4, 1, 1),
    (128, 256, 64, 3, 8, 16, 1, 1),
    (128, 128, 64, 4, 8, 1, 0, 1),
    (128, 128, 64, 4, 8, 1, 2, 1),
    (128, 128, 64, 4, 8, 4, 1, 1),
    (128, 128, 64, 4, 8, 16, 1, 1),
    (128, 128, 32, 4, 4, 1, 0, 1),
    (128, 128, 32, 4, 4, 1, 2, 1),
    (128, 128, 32, 4, 4, 4, 1, 1),
    (128, 128, 32, 4, 4, 16, 1, 1),
    (256, 128, 64, 3, 8, 1, 0, 1),
    (256, 128, 64, 3, 8, 1, 2, 1),
    (256, 128, 64, 3, 8, 4, 1, 1),
    (256, 128, 64, 3, 8, 16, 1, 1),
    (128, 128, 64, 4, 8, 8, 1, 2),
    (128, 128, 64, 4, 8, 8, 1, 4),
    (128, 128, 64, 4, 8, 8, 1, 8),
    (64, 128, 64, 5, 4, 8, 1, 2),
    (64, 128, 64, 5, 4, 8, 1, 4),
    (64, 128, 64, 5, 4, 8, 1, 8),
    (64, 64, 128, 5, 4, 8, 1, 2),
    (64, 64, 128, 5, 4, 8, 1, 4),
    (64, 64, 128, 5, 4, 8, 1, 8),
    (128, 256, 64, 3, 8, 8, 1, 2),
    (128, 256, 64, 3, 8, 8, 1, 4),
    (128, 256, 64, 3, 8, 8, 1, 8),
]

# New shapes (none is in h200_matmul_cal.csv), most informative first, since a timeout cuts the tail.
SHAPES = [
    (2048, 6144, 4096),  # Llama-3-8B fused QKV projection, 2048 tokens
    (32, 4096, 4096),  # decode-like skinny M
    (3000, 3000, 3000),  # odd: sizes not multiples of 16 (rows 16-byte aligned, but Triton cannot know)
    (256, 256, 65536),  # K-heavy, tiny MN: wants SPLIT_K
    (2000, 2000, 1001),  # K = 1001: A's row stride (2002 bytes) is not a multiple of 16 bytes
    (1024, 50257, 768),  # GPT-2 LM head: N = 50257 odd, B and C rows unaligned
    (4095, 4095, 4095),  # odd everywhere, no row aligned
    (1536, 1536, 1536),  # small square
    (2048, 4096, 14336),  # Llama-3-8B MLP down projection
    (64, 8192, 8192),  # decode-like skinny M, larger layer
    (1024, 1024, 16384),  # K-heavy, medium MN
    (8192, 8192, 2048),  # large MN, short K
    (1024, 14336, 4096),  # Llama-3-8B MLP up/gate, 1024 tokens
    (512, 11008, 4096),  # Llama-2-7B MLP up/gate, 512 tokens
    (6144, 6144, 6144),  # large square, compute-bound
    (32, 14336, 4096),  # decode-like MLP up/gate
]


def log(msg: str) -> None:
    print(msg, file=sys.stderr, flush=True)


def load_module(name: str, path: Path):
    """A module loaded from its file, once (the GPU benches load the kernel files without importing tiler)."""
    import importlib.util

    mod = sys.modules.get(name)
    if mod is None:
        spec = importlib.util.spec_from_file_location(name, path)
        mod = importlib.util.module_from_spec(spec)
        sys.modules[name] = mod
        spec.loader.exec_module(mod)
    return mod


def cfg_dict(t) -> dict:
    return dict(zip(KNOBS, (int(x) for x in t), strict=True))


def cfg_str(c: dict) -> str:
    return (
        f"{c['BLOCK_M']}x{c['BLOCK_N']}x{c['BLOCK_K']} s{c['num_stages']} w{c['num_warps']} "
        f"g{c['GROUP_M']} o{c['ORDER']} sk{c['SPLIT_K']}"
    )


def spec_class(M: int, N: int, K: int) -> tuple:
    """What Triton specialises on for a contiguous problem: which sizes/strides are multiples of 16 or 1."""
    return tuple((v % 16 == 0, v == 1) for v in (M, N, K))


# --- compile pool (workers only fill Triton's on-disk cache) -------------------------------------------


def _worker_init(root: str) -> None:
    os.environ.setdefault("PYTHONUNBUFFERED", "1")
    try:  # pay the imports and the CUDA context once per worker, not in the first task's compile time
        import torch

        import tiler.ops.matmul.triton_runner  # noqa: F401

        torch.empty(1, device="cuda")
    except Exception:  # noqa: BLE001 - the tasks report it
        pass


def _compile_one(task):
    M, N, K, knobs, dtype = task
    t = time.perf_counter()
    try:
        from tiler.ops.matmul.triton_runner import precompile

        precompile(M, N, K, cfg_dict(knobs), dtype=dtype)
        return task, True, "", time.perf_counter() - t
    except Exception as e:  # noqa: BLE001 - reported, the main process skips the config
        return (
            task,
            False,
            f"{type(e).__name__}: {str(e).splitlines()[0] if str(e) else ''}",
            time.perf_counter() - t,
        )


def precompile_all(tasks, jobs: int, deadline: float) -> dict:
    """Compile tasks in `jobs` spawned processes until done or `deadline` (time.time()); returns stats."""
    import multiprocessing as mp

    stats = {"tasks": len(tasks), "done": 0, "failed": 0, "seconds": [], "wall_s": 0.0, "cut": False}
    if not tasks or jobs < 1:
        return stats
    t0 = time.time()
    ctx = mp.get_context("spawn")
    pool = ctx.Pool(jobs, initializer=_worker_init, initargs=(str(ROOT),))
    try:
        it = pool.imap_unordered(_compile_one, tasks, chunksize=1)
        while stats["done"] + stats["failed"] < len(tasks):
            left = deadline - time.time()
            if left <= 0:
                stats["cut"] = True
                log(
                    f"[compile] deadline reached after {stats['done'] + stats['failed']}/{len(tasks)}; "
                    "the rest compiles on first use"
                )
                break
            try:
                task, ok, msg, sec = it.next(timeout=left)
            except mp.TimeoutError:
                continue
            stats["seconds"].append(sec)
            if ok:
                stats["done"] += 1
            else:
                stats["failed"] += 1
                log(f"[compile] {task[0]}x{task[1]}x{task[2]} {cfg_str(cfg_dict(task[3]))}: {msg}")
            n = stats["done"] + stats["failed"]
            if n % 50 == 0 or n == len(tasks):
                log(f"[compile] {n}/{len(tasks)} in {time.time() - t0:.0f}s")
    finally:
        pool.terminate()
        pool.join()
    stats["wall_s"] = time.time() - t0
    return stats


# --- machine and ceilings --------------------------------------------------------------------------


def machine_info() -> dict:
    import torch
    import triton

    info = {
        "date_utc": datetime.now(UTC).strftime("%Y-%m-%d %H:%M:%S"),
        "python": platform.python_version(),
        "torch": torch.__version__,
        "torch_cuda": torch.version.cuda,
        "triton": triton.__version__,
    }
    p = torch.cuda.get_device_properties(0)
    info.update(
        {
            "gpu": p.name,
            "sm_count": p.multi_processor_count,
            "capability": f"{p.major}.{p.minor}",
            "memory_gib": round(p.total_memory / 2**30, 1),
            "l2_mb": round(getattr(p, "L2_cache_size", 0) / 1e6, 1) or None,
        }
    )
    info["nvidia_smi"] = smi_state()
    return info


def smi_state() -> str | None:
    try:
        r = subprocess.run(
            [
                "nvidia-smi",
                "--query-gpu=name,driver_version,clocks.sm,clocks.max.sm,clocks.mem,temperature.gpu,"
                "power.draw,power.limit",
                "--format=csv,noheader",
            ],
            capture_output=True,
            text=True,
            timeout=20,
        )
        return r.stdout.strip() or r.stderr.strip()
    except Exception as e:  # noqa: BLE001
        return f"nvidia-smi failed: {e}"


def measure_ceilings(path: Path) -> list[dict]:
    import torch
    import triton

    rows = []
    n = 1 << 30  # 2^30 fp16 = 2 GiB
    src = torch.empty(n, dtype=torch.float16, device="cuda").normal_()
    dst = torch.empty_like(src)
    ms = triton.testing.do_bench(lambda s=src, d=dst: d.copy_(s), warmup=25, rep=200, return_mode="median")
    rows.append(
        {
            "metric": "copy_bandwidth",
            "value": f"{2 * n * 2 / (ms * 1e-3) / 1e9:.0f}",
            "unit": "GB/s",
            "detail": f"dst.copy_(src) of 2 GiB fp16 device-to-device, bytes read+written, median {ms:.4f} ms",
        }
    )
    del src, dst
    torch.cuda.empty_cache()
    for name, dt in (("fp16", torch.float16), ("bf16", torch.bfloat16)):
        s = 8192
        g = torch.Generator(device="cuda")
        g.manual_seed(1)
        a = torch.randn((s, s), generator=g, device="cuda").to(dt)
        b = torch.randn((s, s), generator=g, device="cuda").to(dt)
        c = torch.empty((s, s), dtype=dt, device="cuda")
        ms = triton.testing.do_bench(
            lambda a=a, b=b, c=c: torch.matmul(a, b, out=c), warmup=25, rep=200, return_mode="median"
        )
        rows.append(
            {
                "metric": f"{name}_matmul_8192",
                "value": f"{2 * s**3 / (ms * 1e-3) / 1e12:.1f}",
                "unit": "TFLOP/s",
                "detail": f"torch.matmul {name} 8192x8192x8192 random normal, median {ms:.4f} ms",
            }
        )
        del a, b, c
    torch.cuda.empty_cache()
    with open(path, "w", newline="") as f:
        w = csv.DictWriter(f, fieldnames=["metric", "value", "unit", "detail"])
        w.writeheader()
        w.writerows(rows)
    return rows


# --- the run -----------------------------------------------------------------------------------------


def read_candidates(path: str) -> list[tuple]:
    """[(M, N, K, source, knobs)] from a CSV with columns M,N,K,BLOCK_M..SPLIT_K and optionally source."""
    out = []
    with open(path, newline="") as f:
        for i, r in enumerate(csv.DictReader(f), start=2):
            try:
                M, N, K = int(r["M"]), int(r["N"]), int(r["K"])
                knobs = tuple(int(float(r[k])) for k in KNOBS)
            except (KeyError, TypeError, ValueError) as e:
                log(f"[candidates] {path}:{i} skipped: {e}")
                continue
            out.append((M, N, K, (r.get("source") or "model").strip() or "model", knobs))
    return out


def fmt_row(M, N, K, impl, source, cfg, res) -> dict:
    row = {"M": M, "N": N, "K": K, "impl": impl, "source": source}
    for k in KNOBS:
        row[k] = "" if cfg is None else cfg[k]
    row["ms"] = f"{res['ms']:.6g}"
    row["tflops"] = f"{res['tflops']:.2f}"
    row["rel_err"] = "" if res["rel_err"] is None else f"{res['rel_err']:.2e}"
    return row


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--out", required=True, help="CSV of measured rows")
    ap.add_argument("--ceilings", help="ceilings CSV (default: h200_ceilings.csv beside --out)")
    ap.add_argument("--env", help="machine JSON (default: h200_env.json beside --out)")
    ap.add_argument("--candidates", help="extra configs: CSV with M,N,K,BLOCK_M..SPLIT_K[,source]")
    ap.add_argument("--dtype", default="fp16", choices=["fp16", "bf16"])
    ap.add_argument(
        "--budget-s", type=float, default=440.0, help="stop timing after this many seconds from start"
    )
    ap.add_argument("--compile-budget-s", type=float, default=170.0, help="compile pool deadline, from start")
    ap.add_argument("--jobs", type=int, default=max(1, min(15, (os.cpu_count() or 2) - 1)))
    ap.add_argument("--shapes", help="only these shapes, e.g. 32x4096x4096,3000x3000x3000")
    ap.add_argument("--no-grid", action="store_true", help="time only torch and the candidates")
    ap.add_argument("--max-configs", type=int, default=0, help="first N grid configs only (smoke runs)")
    ap.add_argument("--no-ceilings", action="store_true")
    ap.add_argument("--warmup-ms", type=float, default=25.0, help="do_bench warm-up per measurement")
    ap.add_argument(
        "--rep-ms",
        type=float,
        default=100.0,
        help="do_bench timed span (300/1000: the power-capped steady state)",
    )
    ap.add_argument(
        "--rounds",
        type=int,
        default=1,
        help="time each shape's tilings this many times in interleaved rounds (all of them once, then again): "
        "one row per measurement, so that clock drift between tilings averages out (fidelity.merge_measured "
        "takes the median)",
    )
    args = ap.parse_args(argv)
    t_start = time.time()

    import torch

    from tiler.errors import TilerError
    from tiler.ops.matmul.triton_runner import Problem

    out_path = Path(args.out)
    out_path.parent.mkdir(parents=True, exist_ok=True)
    ceil_path = Path(args.ceilings) if args.ceilings else out_path.parent / "h200_ceilings.csv"
    env_path = Path(args.env) if args.env else out_path.parent / "h200_env.json"

    if not torch.cuda.is_available():
        log("no CUDA device visible")
        return 2
    info = machine_info()
    log("[env] " + json.dumps(info))
    env_path.write_text(json.dumps(info, indent=2) + "\n")

    # the work list: shape -> [(source, knobs)]
    shapes = list(SHAPES)
    if args.shapes:
        shapes = [tuple(int(x) for x in s.lower().split("x")) for s in args.shapes.split(",")]
    grid = GRID[: args.max_configs] if args.max_configs else GRID
    work: dict[tuple, list] = {s: ([] if args.no_grid else [("grid", g) for g in grid]) for s in shapes}
    if args.candidates:
        for M, N, K, source, knobs in read_candidates(args.candidates):
            work.setdefault((M, N, K), []).append((source, knobs))
    n_rows = sum(len(v) + 1 for v in work.values())
    log(
        f"[plan] {len(work)} shapes, {n_rows} rows (torch + triton), budget {args.budget_s:.0f}s, dtype {args.dtype}"
    )

    if not args.no_ceilings:
        t = time.time()
        ceilings = measure_ceilings(ceil_path)
        for r in ceilings:
            log(f"[ceiling] {r['metric']}: {r['value']} {r['unit']} ({r['detail']})")
        log(f"[ceiling] {time.time() - t:.1f}s")

    # compile every (specialisation class, config) once, in parallel, before timing
    tasks, seen = [], set()
    for (M, N, K), items in work.items():
        for _, knobs in items:
            key = (spec_class(M, N, K), knobs)
            if key not in seen:
                seen.add(key)
                tasks.append((M, N, K, knobs, args.dtype))
    log(
        f"[compile] {len(tasks)} kernels ({len({spec_class(*s) for s in work})} specialisations) on {args.jobs} workers"
    )
    cstats = precompile_all(tasks, args.jobs, t_start + args.compile_budget_s)
    secs = cstats.pop("seconds")
    if secs:
        cstats.update(
            per_kernel_median_s=round(statistics.median(secs), 2),
            per_kernel_max_s=round(max(secs), 2),
            cpu_s=round(sum(secs), 1),
        )
    log(f"[compile] {json.dumps(cstats)}")
    info["compile"] = cstats
    env_path.write_text(json.dumps(info, indent=2) + "\n")

    summary = []
    n_ok = n_fail = 0
    stopped = None
    with open(out_path, "w", newline="") as f:
        w = csv.DictWriter(f, fieldnames=COLUMNS)
        w.writeheader()
        f.flush()
        for (M, N, K), items in work.items():
            if time.time() - t_start > args.budget_s:
                stopped = f"budget reached before {M}x{N}x{K}"
                break
            t_shape = time.time()
            try:
                prob = Problem(
                    M, N, K, dtype=args.dtype, seed=0, warmup_ms=args.warmup_ms, rep_ms=args.rep_ms
                )
                res = prob.measure_torch()
            except Exception as e:  # noqa: BLE001
                log(f"[{M}x{N}x{K}] torch.matmul failed: {type(e).__name__}: {e}")
                n_fail += 1
                continue
            w.writerow(fmt_row(M, N, K, "torch", "cublas", None, res))
            f.flush()
            n_ok += 1
            torch_ms = res["ms"]
            timed, fails = [], 0
            for source, knobs in [it for _ in range(max(args.rounds, 1)) for it in items]:
                if time.time() - t_start > args.budget_s:
                    stopped = f"budget reached inside {M}x{N}x{K}"
                    break
                cfg = cfg_dict(knobs)
                try:
                    res = prob.measure(cfg)
                except Exception as e:  # noqa: BLE001 - skip the config, keep going
                    fails += 1
                    n_fail += 1
                    msg = str(e).splitlines()[0] if str(e) else ""
                    log(f"[{M}x{N}x{K}] skip {source} {cfg_str(cfg)}: {type(e).__name__}: {msg[:300]}")
                    if "CUDA error" in msg or "illegal" in msg.lower():
                        stopped = "CUDA error: the context is unusable"
                        break
                    if not isinstance(e, TilerError):
                        torch.cuda.synchronize()
                    continue
                w.writerow(fmt_row(M, N, K, "triton", source, cfg, res))
                f.flush()
                n_ok += 1
                timed.append((res["ms"], source, cfg))
            del prob
            torch.cuda.empty_cache()
            timed.sort(key=lambda x: x[0])
            ms_list = [t[0] for t in timed]
            s = {
                "shape": f"{M}x{N}x{K}",
                "torch_ms": torch_ms,
                "n": len(timed),
                "fail": fails,
                "best_ms": ms_list[0] if ms_list else math.nan,
                "best": cfg_str(timed[0][2]) if timed else "-",
                "median_ms": statistics.median(ms_list) if ms_list else math.nan,
                "worst_ms": ms_list[-1] if ms_list else math.nan,
                "tflops_best": 2 * M * N * K / (ms_list[0] * 1e-3) / 1e12 if ms_list else math.nan,
            }
            summary.append(s)
            log(
                f"[{M}x{N}x{K}] {len(timed)} ok, {fails} skipped, {time.time() - t_shape:.1f}s; cublas "
                f"{torch_ms:.4f} ms, best {s['best_ms']:.4f} ms ({s['best']}), median {s['median_ms']:.4f}, "
                f"worst {s['worst_ms']:.4f}; elapsed {time.time() - t_start:.0f}s"
            )
            if stopped and stopped.startswith("CUDA"):
                break

    if stopped:
        log(f"[stop] {stopped}")
    info["after"] = smi_state()
    info["rows_ok"], info["rows_failed"], info["elapsed_s"] = n_ok, n_fail, round(time.time() - t_start, 1)
    info["stopped"] = stopped
    env_path.write_text(json.dumps(info, indent=2) + "\n")

    print(
        f"\n{'shape':>18} {'cublas ms':>10} {'best ms':>9} {'med ms':>9} {'worst ms':>9} {'best/cub':>8} "
        f"{'TF best':>8} {'n':>4} {'skip':>4}  best config"
    )
    for s in summary:
        print(
            f"{s['shape']:>18} {s['torch_ms']:10.4f} {s['best_ms']:9.4f} {s['median_ms']:9.4f} {s['worst_ms']:9.4f} "
            f"{s['best_ms'] / s['torch_ms']:8.2f} {s['tflops_best']:8.1f} {s['n']:4d} {s['fail']:4d}  {s['best']}"
        )
    print(
        f"rows written: {n_ok}, skipped: {n_fail}, elapsed {time.time() - t_start:.0f}s"
        + (f", stopped: {stopped}" if stopped else "")
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
