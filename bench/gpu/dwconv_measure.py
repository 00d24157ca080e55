"""Measure Triton depthwise-conv tilings on the GPU machine: run this THERE (torch, triton, a CUDA device).

    PYTHONUNBUFFERED=1 python -m bench.gpu.dwconv_measure --out $OUT/h200_dwconv.csv --budget-s 500
    PYTHONUNBUFFERED=1 python -m bench.gpu.dwconv_measure --layout nhwc --out $OUT/h200_dwconv_nhwc.csv

It imports the kernels by file path (tiler/ops/depthwise_conv/triton_kernels.py) and never imports the
``tiler`` package. Within a wall-clock budget (--budget-s, from start) it:

1. records the machine (GPU, driver, torch, triton) in ``h200_dwconv_env.json`` beside --out and measures
   the device-to-device copy bandwidth once (2 GiB fp16, bytes read + written) into
   ``h200_dwconv_ceilings.csv``;
2. builds, per shape of examples/shapes/depthwise_conv.csv, a grid of configs of the three schemes
   (group_loop, group_opt, vector), pruned by the kernels' ``validate`` and by tile size, and compiles
   every distinct kernel first in a pool of worker processes into Triton's on-disk cache (with a deadline:
   kernels not compiled by then are not timed, and the log says how many);
3. for each shape, times torch's F.conv2d (impl=torch; source = the backend PyTorch selects, e.g. cudnn)
   and every compiled config (impl=triton, source=grid). Every row: a correctness check first (output
   poisoned with NaN, one call, rel_err = ||out - ref|| / ||ref|| against an fp32 conv2d on the upcast
   inputs; > 1e-2 or any NaN is rejected), then the median of triton.testing.do_bench, which writes a
   256 MB buffer to flush L2 before every timed call. Two input sets (seeds 0, 1) per shape, configs
   alternate between them. Rows are written and flushed as they come; each shape gets an equal share of
   the time left, so a cut thins every shape instead of dropping the last ones.

With ``--layout nhwc`` the problems' tensors are channels_last and the grid is the NHWC vector kernel's (up to 256
channels per program). Every shape's torch rows time conv2d in both memory formats on the same values (source
``<backend> nchw`` and ``<backend> channels_last``; the conversion is not timed), so each tiling's ratio to the
faster vendor format comes from one run. (Files measured before 2026-12-03 label both formats' rows with the
backend torch picks for the problem's own layout.)

A short summary table (best time per scheme against torch, per shape) ends the output.
"""

from __future__ import annotations

import argparse
import csv
import json
import math
import os
import random
import statistics
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
from bench.gpu.compile_pool import machine_info, precompile_all  # noqa: E402  (no tiler import)
from bench.gpu.gpu_measure import load_module, log, smi_state  # noqa: E402

KERNELS_PATH = ROOT / "tiler" / "ops" / "depthwise_conv" / "triton_kernels.py"
SHAPES_CSV = ROOT / "examples" / "shapes" / "depthwise_conv.csv"
KERNELS_MODULE = "dwconv_triton_kernels"

PROBLEM_KEYS = ("N", "C", "H", "W", "kh", "kw", "stride", "pad", "dilation")
# STRIP: NHWC output columns a strip computes from one load of each input column (1: one pixel; issue 30)
CFG_KEYS = ("scheme", "groups_per_op", "BLOCK_P", "BLOCK_K", "num_warps", "num_stages", "STRIP")
COLUMNS = ["name", *PROBLEM_KEYS, "dtype", "layout", "impl", "source", *CFG_KEYS, "ms", "gbps", "rel_err"]
SCHEME_ORDER = ("group_loop", "group_opt", "vector")


def load_kernels():
    """The kernel module, loaded from its file (the tiler package is not imported)."""
    return load_module(KERNELS_MODULE, KERNELS_PATH)


def read_shapes(path: Path) -> list[dict]:
    out = []
    with open(path, newline="") as f:
        for r in csv.DictReader(f):
            s = {k: int(r[k]) for k in PROBLEM_KEYS}
            s.update(name=r["name"], dtype=r.get("dtype") or "fp16", heldout=int(r.get("heldout") or 0))
            out.append(s)
    return out


def cfg_str(c: dict) -> str:
    km = load_kernels()
    return (
        f"{km.scheme_label(c['scheme'])} G{c['groups_per_op']} P{c['BLOCK_P']} K{c['BLOCK_K']} "
        f"w{c['num_warps']} s{c['num_stages']}" + (f" strip{c['STRIP']}" if c.get("STRIP", 1) > 1 else "")
    )


def _cfg(scheme, G, BP, BK, nw, ns, strip=1) -> dict:
    return dict(
        scheme=scheme, groups_per_op=G, BLOCK_P=BP, BLOCK_K=BK, num_warps=nw, num_stages=ns, STRIP=strip
    )


def nhwc_grid(shape: dict, seed: int = 0, strips: tuple[int, ...] = (1,)) -> list[dict]:
    """The NHWC vector kernel's grid for one shape, shuffled (fixed seed): G channels x BLOCK_P pixels with
    a register tile of at most 8192 elements and 1..64 of them per thread, each with every strip of `strips`
    (output columns a strip, `triton_kernels.STRIPS`)."""
    km = load_kernels()
    OH, OW = km.output_size(*(shape[k] for k in ("H", "W", "kh", "kw", "stride", "pad", "dilation")))
    bp_max = max(16, km.next_pow2(OH * OW))
    g_max = max(8, km.next_pow2(shape["C"]))
    out = [
        _cfg(2, G, BP, 16, nw, 1, sw)
        for G in (8, 16, 32, 64, 128, 256)
        if G <= g_max
        for BP in (16, 32, 64, 128, 256, 512)
        if BP <= bp_max
        for nw in (1, 2, 4, 8)
        if G * BP <= 8192 and 32 * nw <= G * BP <= 64 * 32 * nw
        for sw in strips
    ]
    out = [c for c in out if km.validate(c, shape, "nhwc") is None]
    random.Random(seed).shuffle(out)
    return out


def grid_for(shape: dict, seed: int = 0, strips: tuple[int, ...] = (1,)) -> list[dict]:
    """The grid of one shape, pruned, in timing order: each scheme's configs shuffled (fixed seed) and the
    three lists interleaved in proportion, so that any prefix samples every scheme evenly (the NHWC grid for
    an nhwc shape)."""
    km = load_kernels()
    if shape.get("layout") == "nhwc":
        return nhwc_grid(shape, seed, strips)
    OH, OW = km.output_size(*(shape[k] for k in ("H", "W", "kh", "kw", "stride", "pad", "dilation")))
    T = shape["kh"] * shape["kw"]
    bp_max = max(32, km.next_pow2(OH * OW))  # larger pixel tiles only add masked lanes
    bps = [bp for bp in (32, 64, 128, 256, 512, 1024) if bp <= bp_max]
    vector = []
    for G in (1, 2, 4, 8, 16, 32):
        for BP in bps:
            E = G * BP
            for nw in (1, 2, 4, 8):
                # register tile <= 8192 elements and 1..32 of them per thread
                if E <= 8192 and 32 * nw <= E <= 1024 * nw:
                    vector.append(_cfg(2, G, BP, 16, nw, 1))
    group_opt = [
        _cfg(1, G, BP, BK, nw, ns)
        for G in (8, 16, 32, 64)
        for BP in (32, 64, 128, 256)
        if BP <= bp_max
        for BK in (16, 32, 64)
        if BK <= max(16, km.next_pow2(G * T))
        for nw in (4, 8)
        for ns in (1, 2)
    ]
    group_loop = [
        _cfg(0, 1, BP, BK, 4, 1)
        for BP in (64, 128, 256)
        if BP <= max(64, bp_max)
        for BK in (16, 32, 64)
        if BK <= max(16, km.next_pow2(T))
    ]
    rng = random.Random(seed)
    lists = []
    for lst in (group_loop, group_opt, vector):
        lst = [c for c in lst if km.validate(c, shape) is None]
        rng.shuffle(lst)
        lists.append(lst)
    keyed = [((i + 0.5) / len(lst), j, c) for j, lst in enumerate(lists) for i, c in enumerate(lst)]
    keyed.sort(key=lambda t: (t[0], t[1]))
    return [c for _, _, c in keyed]


def read_candidates(path: Path) -> dict[str, list[dict]]:
    """--candidates: rows of name + the six knobs (+ source, default 'model'), grouped by shape name."""
    km = load_kernels()
    out: dict[str, list[dict]] = {}
    with open(path, newline="") as f:
        for r in csv.DictReader(f):
            cfg = km.normalize_cfg(r)
            cfg["source"] = r.get("source") or "model"
            out.setdefault(r["name"], []).append(cfg)
    return out


def smoke_grid(shape: dict, per_scheme: int) -> list[dict]:
    """The first `per_scheme` configs of each scheme in grid order (smoke runs)."""
    km = load_kernels()
    out, n = [], {}
    for c in grid_for(shape):
        s = km.scheme_label(c["scheme"])
        if n.get(s, 0) < per_scheme:
            n[s] = n.get(s, 0) + 1
            out.append(c)
    return out


def spec_key(shape: dict, cfg: dict) -> tuple:
    """What makes a distinct compiled kernel: Triton's specialisation of the runtime ints (multiple of 16,
    equal to 1), the conv constants and the config."""
    km = load_kernels()
    OH, OW = km.output_size(*(shape[k] for k in ("H", "W", "kh", "kw", "stride", "pad", "dilation")))
    ints = (shape["N"], shape["C"], shape["H"], shape["W"], OH, OW)
    conv = tuple(shape[k] for k in ("kh", "kw", "stride", "pad", "dilation"))
    return (
        tuple((v % 16 == 0, v == 1) for v in ints),
        conv,
        tuple(cfg[k] for k in CFG_KEYS),
        shape["dtype"],
        shape.get("layout", "nchw"),
    )


# --- ceilings ------------------------------------------------------------------------------------------


def measure_ceilings(path: Path) -> list[dict]:
    import torch
    import triton

    n = 1 << 30  # 2^30 fp16 = 2 GiB
    src = torch.empty(n, dtype=torch.float16, device="cuda").normal_()
    dst = torch.empty_like(src)
    ms = triton.testing.do_bench(lambda s=src, d=dst: d.copy_(s), warmup=25, rep=200, return_mode="median")
    rows = [
        {
            "metric": "copy_bandwidth",
            "value": f"{2 * n * 2 / (ms * 1e-3) / 1e9:.0f}",
            "unit": "GB/s",
            "detail": f"dst.copy_(src) of 2 GiB fp16 device-to-device, bytes read+written, median {ms:.4f} ms",
        }
    ]
    del src, dst
    torch.cuda.empty_cache()
    with open(path, "w", newline="") as f:
        w = csv.DictWriter(f, fieldnames=["metric", "value", "unit", "detail"])
        w.writeheader()
        w.writerows(rows)
    return rows


def torch_backend(prob, memory_format=None) -> str:
    """The convolution backend PyTorch selects for this problem (cudnn, cudadepthwise2d, ...), with the input
    in `memory_format` (default: the problem's own)."""
    import torch

    try:
        p = prob.p
        x = prob.x if memory_format is None else prob.x.contiguous(memory_format=memory_format)
        b = torch._C._select_conv_backend(
            x,
            prob.w,
            None,
            [p["stride"]] * 2,
            list(prob.padding),
            [p["dilation"]] * 2,
            False,
            [0, 0],
            p["C"],
            None,
        )
        return str(b).split(".")[-1].lower()
    except Exception:  # noqa: BLE001 - private API; the label is informative only
        return "conv2d"


# --- the run -----------------------------------------------------------------------------------------


def fmt_row(shape: dict, impl: str, source: str, cfg: dict | None, ms: float, gbps: float, err) -> dict:
    km = load_kernels()
    row = {k: shape[k] for k in ("name", *PROBLEM_KEYS, "dtype")}
    row["layout"] = shape.get("layout", "nchw")
    row.update(impl=impl, source=source)
    for k in CFG_KEYS:
        row[k] = "" if cfg is None else cfg[k]
    if cfg is not None:
        row["scheme"] = km.scheme_label(cfg["scheme"])
    row["ms"] = f"{ms:.6g}"
    row["gbps"] = f"{gbps:.1f}"
    row["rel_err"] = "" if err is None else f"{err:.2e}"
    return row


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--out", required=True, help="CSV of measured rows")
    ap.add_argument("--shapes-csv", default=str(SHAPES_CSV))
    ap.add_argument("--shapes", help="only these shape names, comma-separated")
    ap.add_argument("--budget-s", type=float, default=500.0, help="stop timing this many seconds after start")
    ap.add_argument(
        "--compile-frac", type=float, default=0.5, help="compile deadline as a fraction of --budget-s"
    )
    ap.add_argument("--jobs", type=int, default=max(1, min(15, (os.cpu_count() or 2) - 1)))
    ap.add_argument("--smoke", type=int, default=0, help="only the first N configs of each scheme per shape")
    ap.add_argument("--warmup-ms", type=float, default=5.0)
    ap.add_argument("--rep-ms", type=float, default=25.0)
    ap.add_argument("--no-ceilings", action="store_true")
    ap.add_argument(
        "--layout",
        choices=("nchw", "nhwc"),
        default="nchw",
        help="the tensors' memory format: nhwc times the NHWC kernel and torch in both formats",
    )
    ap.add_argument(
        "--strips",
        default="1",
        help="nhwc grid: the strips to time each config with, comma-separated (1, 2, 4)",
    )
    ap.add_argument(
        "--candidates", help="CSV of configs to time instead of the grid: name + knobs (+ source, e.g. model)"
    )
    args = ap.parse_args(argv)
    t_start = time.time()
    t_end = t_start + args.budget_s

    import torch

    km = load_kernels()
    out_path = Path(args.out)
    out_path.parent.mkdir(parents=True, exist_ok=True)
    stem = out_path.stem
    env_path = out_path.parent / f"{stem}_env.json"
    ceil_path = out_path.parent / f"{stem}_ceilings.csv"

    if not torch.cuda.is_available():
        log("no CUDA device visible")
        return 2
    torch.backends.cudnn.benchmark = True  # the torch baseline gets cuDNN's algorithm search
    info = machine_info()
    info["cudnn_benchmark"] = True
    info["timing"] = {"warmup_ms": args.warmup_ms, "rep_ms": args.rep_ms, "l2": "do_bench flush (256 MB)"}
    log("[env] " + json.dumps(info))
    env_path.write_text(json.dumps(info, indent=2) + "\n")

    shapes = [{**s, "layout": args.layout} for s in read_shapes(Path(args.shapes_csv))]
    if args.shapes:
        want = [s.strip() for s in args.shapes.split(",") if s.strip()]
        shapes = [s for s in shapes if s["name"] in want]
    if args.candidates:
        given = read_candidates(Path(args.candidates))
        work = [(s, given[s["name"]]) for s in shapes if s["name"] in given]
    else:
        strips = tuple(int(v) for v in args.strips.split(","))
        work = [(s, smoke_grid(s, args.smoke) if args.smoke else grid_for(s, strips=strips)) for s in shapes]
    n_cfg = sum(len(g) for _, g in work)
    log(
        f"[plan] {len(work)} shapes, {n_cfg} triton configs + {len(work)} torch rows, budget {args.budget_s:.0f}s"
    )
    for s, g in work:
        by = {lab: sum(km.scheme_label(c["scheme"]) == lab for c in g) for lab in SCHEME_ORDER}
        log(f"[plan] {s['name']}: {len(g)} configs {by}")

    if not args.no_ceilings:
        for r in measure_ceilings(ceil_path):
            log(f"[ceiling] {r['metric']}: {r['value']} {r['unit']} ({r['detail']})")

    # compile tasks: distinct kernels, round-robin over shapes in each shape's grid order
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
    deadline = t_start + args.compile_frac * args.budget_s
    cstats, cres = precompile_all(tasks, args.jobs, deadline, (KERNELS_MODULE, KERNELS_PATH))
    secs = cstats.pop("seconds")
    by_scheme: dict = {}
    for idx, (ok, _msg, res) in cres.items():
        lab = km.scheme_label(tasks[idx][2]["scheme"])
        d = by_scheme.setdefault(lab, {"n": 0, "spilling": 0, "max_regs": 0})
        if ok and res:
            d["n"] += 1
            d["spilling"] += res[1] > 0
            d["max_regs"] = max(d["max_regs"], res[0])
            if res[1] > 0:
                log(
                    f"[spill] {tasks[idx][1]['name']} {cfg_str(tasks[idx][2])}: regs {res[0]} spills {res[1]}"
                )
    if secs:
        cstats.update(
            per_kernel_median_s=round(statistics.median(secs), 2),
            per_kernel_max_s=round(max(secs), 2),
            cpu_s=round(sum(secs), 1),
        )
    cstats["by_scheme"] = by_scheme
    log(f"[compile] {json.dumps(cstats)}")
    info["compile"] = cstats
    env_path.write_text(json.dumps(info, indent=2) + "\n")

    summary, stopped = [], None
    n_ok = n_fail = n_uncompiled = 0
    with open(out_path, "w", newline="") as f:
        w = csv.DictWriter(f, fieldnames=COLUMNS)
        w.writeheader()
        f.flush()
        for i, (s, g) in enumerate(work):
            now = time.time()
            if now >= t_end:
                stopped = f"budget reached before {s['name']}"
                break
            shape_deadline = now + (t_end - now) / (len(work) - i)
            t_shape = now
            try:  # torch in both memory formats on the same values (each checked); the faster is the baseline
                probs = [km.Problem(s, dtype=s["dtype"], seed=seed) for seed in (0, 1)]
                backend = torch_backend(probs[0])
                both = probs[0].torch_formats(args.warmup_ms, args.rep_ms)
            except Exception as e:  # noqa: BLE001
                log(f"[{s['name']}] torch baseline failed: {type(e).__name__}: {e}")
                n_fail += 1
                continue
            for fmt, v in both.items():
                gbps = probs[0].bytes / (v["ms"] * 1e-3) / 1e9
                mf = torch.channels_last if fmt == "channels_last" else torch.contiguous_format
                label = f"{torch_backend(probs[0], mf)} {fmt}"
                w.writerow(fmt_row(s, "torch", label, None, v["ms"], gbps, v["rel_err"]))
            ms = min(v["ms"] for v in both.values())
            f.flush()
            n_ok += 1
            rec = {
                "name": s["name"],
                "torch_ms": ms,
                "backend": backend,
                "best": {},
                "n": 0,
                "fail": 0,
                "cut": 0,
            }
            for rank, cfg in enumerate(g):
                if time.time() >= shape_deadline:
                    rec["cut"] = len(g) - rank
                    break
                ok, msg, _ = cres.get(seen[key_of[(s["name"], rank)]], (False, "not compiled", None))
                if not ok:
                    n_uncompiled += msg == "not compiled"
                    rec["fail"] += msg != "not compiled"
                    n_fail += msg != "not compiled"
                    continue
                prob = probs[rank % 2]
                try:
                    err = prob.check(cfg)
                    ms = prob.time(cfg, args.warmup_ms, args.rep_ms)
                except Exception as e:  # noqa: BLE001 - skip the config, keep going
                    rec["fail"] += 1
                    n_fail += 1
                    msg = str(e).splitlines()[0] if str(e) else ""
                    log(f"[{s['name']}] skip {cfg_str(cfg)}: {type(e).__name__}: {msg[:300]}")
                    if "CUDA error" in msg or "illegal" in msg.lower():
                        stopped = "CUDA error: the context is unusable"
                        break
                    continue
                source = cfg.get("source", "grid")
                w.writerow(fmt_row(s, "triton", source, cfg, ms, prob.bytes / (ms * 1e-3) / 1e9, err))
                f.flush()
                n_ok += 1
                rec["n"] += 1
                lab = km.scheme_label(cfg["scheme"])
                if lab not in rec["best"] or ms < rec["best"][lab][0]:
                    rec["best"][lab] = (ms, cfg_str(cfg))
            del probs
            torch.cuda.empty_cache()
            summary.append(rec)
            bests = ", ".join(
                f"{lab} {rec['best'][lab][0]:.4f}" for lab in SCHEME_ORDER if lab in rec["best"]
            )
            log(
                f"[{s['name']}] {rec['n']} ok, {rec['fail']} failed, {rec['cut']} cut, "
                f"{time.time() - t_shape:.1f}s; torch ({backend}) {rec['torch_ms']:.4f} ms; best: {bests}; "
                f"elapsed {time.time() - t_start:.0f}s"
            )
            if stopped:
                break

    if stopped:
        log(f"[stop] {stopped}")
    info["after"] = smi_state()
    info.update(rows_ok=n_ok, rows_failed=n_fail, not_compiled=n_uncompiled, stopped=stopped)
    info["elapsed_s"] = round(time.time() - t_start, 1)
    env_path.write_text(json.dumps(info, indent=2) + "\n")

    print(
        f"\n{'shape':<24} {'torch':>8} {'loop':>8} {'opt':>8} {'vector':>8} {'best/t':>6} {'n':>4} {'cut':>4}  "
        "best config"
    )
    for r in summary:
        b = {lab: r["best"].get(lab, (math.nan, "-"))[0] for lab in SCHEME_ORDER}
        best = min(r["best"].values(), default=(math.nan, "-"))
        print(
            f"{r['name']:<24} {r['torch_ms']:8.4f} {b['group_loop']:8.4f} {b['group_opt']:8.4f} "
            f"{b['vector']:8.4f} {best[0] / r['torch_ms']:6.2f} {r['n']:4d} {r['cut']:4d}  {best[1]}"
        )
    print(
        f"rows written: {n_ok}, failed: {n_fail}, not compiled: {n_uncompiled}, "
        f"elapsed {time.time() - t_start:.0f}s" + (f", stopped: {stopped}" if stopped else "")
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
