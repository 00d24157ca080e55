"""Measure the Triton row-softmax kernels on the GPU machine: run this THERE (torch, triton, a CUDA device).

    PYTHONUNBUFFERED=1 python -m bench.gpu.softmax_measure --out $OUT/h200_softmax.csv --budget-s 270

It loads the kernels by file path (tiler/ops/softmax/triton_kernels.py) and never imports the ``tiler``
package. Within a wall-clock budget (--budget-s, from start) it:

1. records the machine (GPU, driver, torch, triton) in ``<out stem>_env.json`` beside --out;
2. builds, per shape (SHAPES below: d from 1k to 256k elements, fp16, rows so that x is 16-128 MB), a grid
   of tilings: the whole-row kernel (BLOCK_D = next power of two >= d) with 1-16 rows per program and 1-32
   warps, and the chunked kernels with passes = 2 (online) and 3 at BLOCK_D 512-16384 with 1-4 rows per
   program and 2-32 warps (4-128 tile elements per thread); the two passes of one (BLOCK_D, ROWS, num_warps)
   are timed one after the other. Every distinct kernel is compiled first in a pool of worker processes
   (Triton's on-disk cache; each compile's registers and spills are recorded);
3. for each shape times torch.softmax(x, dim=-1) (impl=torch) and a device copy of x into y (impl=copy, the
   streaming ceiling for one read + one write), then every compiled tiling (impl=triton). Every triton row:
   output poisoned with NaN, one call, rel_err = ||y - ref|| / ||ref|| against torch.softmax of the fp32
   upcast input (> 1e-2 or NaN rejected), then the median of triton.testing.do_bench (warm-up, then timed
   calls each after a 256 MB L2 flush). Two input sets (seeds 0, 1; randn x 4) per shape, tilings alternate
   between them. Each shape gets an equal share of the time left, so a cut thins every shape;
4. checks every kernel once on bf16 and fp32 inputs (correctness only, not timed).

With --candidates FILE (name + BLOCK_D, passes, ROWS, num_warps, + source) it times those tilings instead of the
grid: bench/softmax_passes.py --write-picks FILE writes the H200 model's top 4 per shape.

The last lines printed are a table: per shape torch, the best whole-row, online and 3-pass tiling, and the
median over (BLOCK_D, ROWS, num_warps) pairs of time(3-pass) / time(2-pass).
"""

from __future__ import annotations

import argparse
import csv
import json
import os
import random
import statistics
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
from bench.gpu.compile_pool import machine_info, precompile_all  # noqa: E402  (no tiler import)
from bench.gpu.gpu_measure import load_module, log, smi_state  # noqa: E402

KERNELS_PATH = ROOT / "tiler" / "ops" / "softmax" / "triton_kernels.py"
KERNELS_MODULE = "softmax_triton_kernels"
CFG_KEYS = ("BLOCK_D", "passes", "ROWS", "num_warps")
COLUMNS = [
    "name",
    "rows",
    "d",
    "dtype",
    "heldout",
    "impl",
    "source",
    "kernel",
    *CFG_KEYS,
    "ms",
    "gbps",
    "rel_err",
    "regs",
    "spills",
]
# (name, rows, d, held out of the calibration fit)
SHAPES = [
    ("sm_1k", 65536, 1024, 0),
    ("sm_2k", 32768, 2048, 1),
    ("sm_4k", 16384, 4096, 0),
    ("sm_8k", 8192, 8192, 1),
    ("sm_16k", 4096, 16384, 0),
    ("sm_32k", 2048, 32768, 1),
    ("sm_64k", 1024, 65536, 0),
    ("sm_128k", 512, 131072, 1),
    ("sm_256k", 256, 262144, 0),
    ("vocab_50304", 1328, 50304, 1),
    ("few_256k", 32, 262144, 0),
    ("small_1k", 4096, 1024, 1),
]
KINDS = ("row", "online", "3pass")


def load_kernels():
    """The kernel module, loaded from its file (the tiler package is not imported)."""
    return load_module(KERNELS_MODULE, KERNELS_PATH)


def kind_of(cfg: dict, d: int) -> str:
    name = load_kernels().kernel_name(cfg, d)
    return {"_softmax_row_kernel": "row", "_softmax_online_kernel": "online"}.get(name, "3pass")


def cfg_str(c: dict) -> str:
    return f"D{c['BLOCK_D']} p{c['passes']} R{c['ROWS']} w{c['num_warps']}"


def _cfg(bd, passes, rows, nw) -> dict:
    return dict(BLOCK_D=bd, passes=passes, ROWS=rows, num_warps=nw, num_stages=1)


def grid_for(shape: dict, seed: int = 0) -> list[dict]:
    """The grid of one shape in timing order: whole-row tilings and (2-pass, 3-pass) pairs, each list shuffled
    (fixed seed) and interleaved in proportion, so that any prefix samples both evenly; a pair stays adjacent."""
    km = load_kernels()
    d, rows = shape["d"], shape["rows"]
    row_max = km.next_pow2(rows)
    whole = []
    bd = km.next_pow2(d)
    for r in (1, 2, 4, 8, 16):
        for nw in (1, 2, 4, 8, 16, 32):
            per = r * bd / (32 * nw)
            if r <= row_max and r * bd <= 65536 and 4 <= per <= km.MAX_THREAD_ELEMS:
                whole.append([_cfg(bd, 2, r, nw)])
    pairs = []
    for bd in (512, 1024, 2048, 4096, 8192, 16384):
        if bd >= d:
            continue
        for r in (1, 2, 4):
            for nw in (2, 4, 8, 16, 32):
                per = r * bd / (32 * nw)
                if r <= row_max and r * bd <= 16384 and 4 <= per <= km.MAX_THREAD_ELEMS:
                    pairs.append([_cfg(bd, 2, r, nw), _cfg(bd, 3, r, nw)])
    rng = random.Random(seed)
    lists = []
    for lst in (whole, pairs):
        lst = [g for g in lst if all(km.validate(c, d) is None for c in g)]
        rng.shuffle(lst)
        lists.append(lst)
    keyed = [((i + 0.5) / len(lst), j, g) for j, lst in enumerate(lists) for i, g in enumerate(lst)]
    keyed.sort(key=lambda t: (t[0], t[1]))
    return [c for _, _, g in keyed for c in g]


def read_candidates(path: Path) -> dict[str, list[dict]]:
    """--candidates: rows of name + the four knobs (+ source, default 'model'), grouped by shape name."""
    out: dict[str, list[dict]] = {}
    with open(path, newline="") as f:
        for r in csv.DictReader(f):
            cfg = _cfg(int(r["BLOCK_D"]), int(r["passes"]), int(r["ROWS"]), int(r["num_warps"]))
            cfg["source"] = r.get("source") or "model"
            out.setdefault(r["name"], []).append(cfg)
    return out


def spec_key(shape: dict, cfg: dict) -> tuple:
    """What makes a distinct compiled kernel: the kernel, its constexprs, launch options, Triton's
    specialisation of the runtime ints (multiple of 16, equal to 1) and the dtype."""
    ints = (shape["rows"], shape["d"])
    return (
        kind_of(cfg, shape["d"]),
        tuple((v % 16 == 0, v == 1) for v in ints),
        cfg["BLOCK_D"],
        cfg["ROWS"],
        cfg["num_warps"],
        shape["dtype"],
    )


def fmt_row(shape, impl, source, cfg, ms, gbps, err, res=None) -> dict:
    row = {k: shape[k] for k in ("name", "rows", "d", "dtype", "heldout")}
    row.update(impl=impl, source=source, kernel="" if cfg is None else kind_of(cfg, shape["d"]))
    for k in CFG_KEYS:
        row[k] = "" if cfg is None else cfg[k]
    row.update(ms=f"{ms:.6g}", gbps=f"{gbps:.1f}", rel_err="" if err is None else f"{err:.2e}")
    row.update(regs="" if not res else res[0], spills="" if not res else res[1])
    return row


def check_dtypes(km) -> list[str]:
    """One run of each kernel on bf16 and fp32 inputs (2 x 3 kernels, small rows): rel_err against fp32."""
    out = []
    for dtype in ("bf16", "fp32"):
        for cfg, d in ((_cfg(4096, 2, 2, 4), 3000), (_cfg(1024, 2, 1, 4), 5000), (_cfg(1024, 3, 1, 4), 5000)):
            try:
                prob = km.Problem({"rows": 37, "d": d}, dtype=dtype, seed=7)
                err = prob.check(cfg)
                out.append(f"{dtype} {kind_of(cfg, d)} d={d} rows=37 {cfg_str(cfg)}: rel_err {err:.2e} ok")
            except Exception as e:  # noqa: BLE001
                out.append(f"{dtype} {kind_of(cfg, d)} d={d}: FAILED {type(e).__name__}: {str(e)[:200]}")
    return out


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--out", required=True, help="CSV of measured rows")
    ap.add_argument("--budget-s", type=float, default=270.0, help="stop timing this many seconds after start")
    ap.add_argument(
        "--compile-frac", type=float, default=0.3, help="compile deadline, a fraction of the budget"
    )
    ap.add_argument("--jobs", type=int, default=max(1, min(15, (os.cpu_count() or 2) - 1)))
    ap.add_argument("--shapes", help="only these shape names, comma-separated")
    ap.add_argument("--smoke", type=int, default=0, help="only the first N tilings per shape")
    ap.add_argument("--warmup-ms", type=float, default=5.0)
    ap.add_argument("--rep-ms", type=float, default=20.0)
    ap.add_argument(
        "--candidates", help="CSV of tilings to time instead of the grid: name + the four knobs (+ source)"
    )
    args = ap.parse_args(argv)
    t_start = time.time()
    t_end = t_start + args.budget_s

    import torch

    km = load_kernels()
    out_path = Path(args.out)
    out_path.parent.mkdir(parents=True, exist_ok=True)
    env_path = out_path.parent / f"{out_path.stem}_env.json"
    if not torch.cuda.is_available():
        log("no CUDA device visible")
        return 2
    info = machine_info()
    info["timing"] = {"warmup_ms": args.warmup_ms, "rep_ms": args.rep_ms, "l2": "do_bench flush (256 MB)"}
    log("[env] " + json.dumps(info))
    env_path.write_text(json.dumps(info, indent=2) + "\n")

    shapes = [dict(name=n, rows=r, d=d, heldout=h, dtype="fp16") for n, r, d, h in SHAPES]
    if args.shapes:
        want = {s.strip() for s in args.shapes.split(",")}
        shapes = [s for s in shapes if s["name"] in want]
    if args.candidates:
        given = read_candidates(Path(args.candidates))
        work = [(s, given[s["name"]]) for s in shapes if s["name"] in given]
    else:
        work = [(s, grid_for(s)[: args.smoke] if args.smoke else grid_for(s)) for s in shapes]
    log(
        f"[plan] {len(work)} shapes, {sum(len(g) for _, g in work)} triton tilings, budget {args.budget_s:.0f}s"
    )
    for s, g in work:
        by = {k: sum(kind_of(c, s["d"]) == k for c in g) for k in KINDS}
        log(f"[plan] {s['name']} ({s['rows']}x{s['d']}): {len(g)} tilings {by}")

    tasks, key_of, seen = [], {}, {}
    for rank in range(max((len(g) for _, g in work), default=0)):
        for s, g in work:
            if rank < len(g):
                key = spec_key(s, g[rank])
                key_of[(s["name"], rank)] = key
                if key not in seen:
                    seen[key] = len(tasks)
                    tasks.append((len(tasks), s, g[rank]))
    log(f"[compile] {len(tasks)} distinct kernels on {args.jobs} workers")
    cstats, cres = precompile_all(
        tasks, args.jobs, t_start + args.compile_frac * args.budget_s, (KERNELS_MODULE, KERNELS_PATH)
    )
    cstats.pop("seconds")  # per-kernel compile times: not part of this bench's record
    spilling = [
        f"{tasks[i][1]['name']} {cfg_str(tasks[i][2])}: regs {r[2][0]} spills {r[2][1]}"
        for i, r in cres.items()
        if r[0] and r[2] and r[2][1] > 0
    ]
    cstats["spilling"] = len(spilling)
    log(f"[compile] {json.dumps(cstats)}")
    for line in spilling[:40]:
        log(f"[spill] {line}")
    info["compile"] = cstats

    summary, stopped, n_ok, n_fail = [], None, 0, 0
    with open(out_path, "w", newline="") as f:
        w = csv.DictWriter(f, fieldnames=COLUMNS)
        w.writeheader()
        for i, (s, g) in enumerate(work):
            now = time.time()
            if now >= t_end:
                stopped = f"budget reached before {s['name']}"
                break
            shape_deadline = now + (t_end - now) / (len(work) - i)
            t_shape = now
            try:
                probs = [km.Problem(s, dtype=s["dtype"], seed=seed) for seed in (0, 1)]
                p0 = probs[0]
                err = p0.check_torch()
                ms = p0.time_fn(p0.torch_fn(), args.warmup_ms, args.rep_ms)
                w.writerow(fmt_row(s, "torch", "torch.softmax", None, ms, p0.bytes / (ms * 1e-3) / 1e9, err))
                cms = p0.time_fn(lambda p=p0: p.y.copy_(p.x), args.warmup_ms, args.rep_ms)
                w.writerow(fmt_row(s, "copy", "y.copy_(x)", None, cms, p0.bytes / (cms * 1e-3) / 1e9, None))
                f.flush()
            except Exception as e:  # noqa: BLE001
                log(f"[{s['name']}] torch baseline failed: {type(e).__name__}: {e}")
                n_fail += 1
                continue
            rec = {"name": s["name"], "torch": ms, "copy": cms, "best": {}, "n": 0, "fail": 0, "cut": 0}
            times = {}
            for rank, cfg in enumerate(g):
                if time.time() >= shape_deadline and cfg["passes"] != 3:  # finish a started pair
                    rec["cut"] = len(g) - rank
                    break
                ok, msg, res = cres.get(seen[key_of[(s["name"], rank)]], (False, "not compiled", None))
                if not ok:
                    rec["fail"] += msg != "not compiled"
                    continue
                prob = probs[rank % 2]
                try:
                    err = prob.check(cfg)
                    ms = prob.time(cfg, args.warmup_ms, args.rep_ms)
                except Exception as e:  # noqa: BLE001 - skip the tiling, keep going
                    rec["fail"] += 1
                    n_fail += 1
                    msg = str(e).splitlines()[0] if str(e) else ""
                    log(f"[{s['name']}] skip {cfg_str(cfg)}: {type(e).__name__}: {msg[:300]}")
                    if "CUDA error" in msg or "illegal" in msg.lower():
                        stopped = "CUDA error: the context is unusable"
                        break
                    continue
                src = cfg.get("source", "grid")
                w.writerow(fmt_row(s, "triton", src, cfg, ms, prob.bytes / (ms * 1e-3) / 1e9, err, res))
                f.flush()
                n_ok += 1
                rec["n"] += 1
                kind = kind_of(cfg, s["d"])
                times[(kind, cfg["BLOCK_D"], cfg["ROWS"], cfg["num_warps"])] = ms
                if kind not in rec["best"] or ms < rec["best"][kind][0]:
                    rec["best"][kind] = (ms, cfg_str(cfg))
            ratios = [
                times[("3pass", *k[1:])] / v
                for k, v in times.items()
                if k[0] == "online" and ("3pass", *k[1:]) in times
            ]
            rec["ratio"] = statistics.median(ratios) if ratios else float("nan")
            del probs
            torch.cuda.empty_cache()
            summary.append(rec)
            log(
                f"[{s['name']}] {rec['n']} ok, {rec['fail']} failed, {rec['cut']} cut, "
                f"{time.time() - t_shape:.1f}s; elapsed {time.time() - t_start:.0f}s"
            )
            if stopped:
                break

    info["dtype_checks"] = check_dtypes(km)
    for line in info["dtype_checks"]:
        log(f"[dtype] {line}")
    info["after"] = smi_state()
    info.update(rows_ok=n_ok, rows_failed=n_fail, stopped=stopped, elapsed_s=round(time.time() - t_start, 1))
    env_path.write_text(json.dumps(info, indent=2) + "\n")
    if stopped:
        log(f"[stop] {stopped}")

    print(
        f"\n{'shape':<12} {'rows x d':>14} {'copy':>7} {'torch':>7} {'row':>7} {'online':>7} {'3pass':>7} "
        f"{'3p/2p':>6} {'n':>4} {'cut':>4}  best"
    )
    for r in summary:
        b = {k: r["best"].get(k, (float("nan"), "-"))[0] for k in KINDS}
        best = min(r["best"].values(), default=(float("nan"), "-"))
        shape = next(s for s in shapes if s["name"] == r["name"])
        print(
            f"{r['name']:<12} {shape['rows']:>6}x{shape['d']:<7} {r['copy']:7.4f} {r['torch']:7.4f} "
            f"{b['row']:7.4f} {b['online']:7.4f} {b['3pass']:7.4f} {r['ratio']:6.3f} {r['n']:4d} {r['cut']:4d}  "
            f"{best[1]}"
        )
    print(f"rows written: {n_ok}, failed: {n_fail}, elapsed {time.time() - t_start:.0f}s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
