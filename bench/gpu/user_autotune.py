"""Issue 28 on the H200: a user's tutorial-style Triton GEMM autotuned over its whole space, and with the model
keeping 4 configs through ``@triton.autotune(prune_configs_by=tiler.triton.pruner(...))``; cuBLAS beside both.

The kernel and its space are tests/gpu_user_gemm.py (76 configs: BLOCK_SIZE_M/N 32..256, BLOCK_SIZE_K 32..128,
GROUP_SIZE_M 8, num_warps 4/8, num_stages 3..5, restricted by shared memory, accumulator registers, warps per tile
and K columns in flight). fp16, A (M x K) and B (K x N) row-major (the tutorial's `nn`), fp32 accumulation.

The 14 shapes (M x N x K), none of them in any bench/data CSV (`check_unfitted` reads every CSV there with M, N and
K columns, the h200_* fit and fidelity files included, and stops the run if one is):

    decode   16 x 1280 x 8192     Llama-3-70B q/k/v fused, tensor parallel 8, 16 sequences
             32 x 28672 x 4096    Llama-3-8B gate/up fused, 32 sequences
             64 x 4096 x 14336    Llama-3-8B down, 64 sequences
             32 x 3584 x 18944    Qwen2.5-7B down, 32 sequences
    prefill  1024 x 37888 x 3584  Qwen2.5-7B gate/up fused
             512 x 8192 x 28672   Llama-3-70B down (no tensor parallelism)
             2048 x 7168 x 8192   Llama-3-70B gate/up fused, tensor parallel 8
             768 x 2816 x 2048    Qwen1.5-MoE-A2.7B expert gate/up (768 routed tokens)
             768 x 2048 x 1408    Qwen1.5-MoE-A2.7B expert down
    odd K    1024 x 4096 x 4000   K not a multiple of 64 (of 32 either)
             2048 x 2048 x 1200   K not a multiple of 64
             4096 x 1024 x 720    K not a multiple of 64, short
    odd N    256 x 50257 x 1280   GPT-2 large LM head (N not a multiple of 16)
             512 x 1000 x 2048    a classifier head (N not a multiple of 16)

Per shape, in one process (python -m bench.gpu.user_autotune run --out DIR, on the GPU machine):
  (a) full: the kernel under ``@triton.autotune(configs=all 76, key=["M", "N", "K"])``; the wall time of its first
      call (every config compiled where this specialisation is new, then benchmarked by Triton's do_bench: L2
      flushed before every run, median) and every config's timing (the autotuner's `configs_timings`);
  (b) pruned: a second copy of the kernel (its own JIT and disk caches, so it compiles what it runs) under the
      same decorator with ``prune_configs_by=tiler.triton.pruner(op="matmul", chip="h200", space=<the user space>,
      top_k=4)``; the wall time of its first call and its pick. The pruned pick is also computed offline from the
      full table (the best of the 4 kept configs there), so the ratio does not rest on two noisy benchmarks;
  (c) cuBLAS: torch.matmul on the same operands, same do_bench protocol;
  then every config's result against an fp32 torch product (output poisoned with NaN first), and a head-to-head:
  the full table's best 4, the 4 kept configs and cuBLAS re-timed in 3 interleaved rounds (median of rounds).
Without tiler/triton.py the pruned autotune uses a stand-in pruner (the top 4 of `tiler.rank` on the user's configs
with ORDER = grouped, SPLIT_K = 1), and the CSVs and output say so.

    python -m bench.gpu.user_autotune dry                 # CPU: shapes unfitted, the space, the model's 4 per shape
    python -m bench.gpu.user_autotune run --out $OUT    # GPU machine, ~5 minutes
    python -m bench.gpu.user_autotune report [DIR]        # CPU: the figures from the CSVs (default bench/data)

Outputs (DIR): user_autotune_configs.csv (every config's time per shape, its model rank and predicted time, which
configs the pruner kept and each autotune picked, rel_err), user_autotune_summary.csv (one row per shape),
user_autotune_h2h.csv (the head-to-head rounds), user_autotune_env.csv (GPU, versions, clocks).
"""

from __future__ import annotations

import argparse
import math
import os
import sys
import tempfile
import time
import traceback
from pathlib import Path

from bench.gpu.table import write_rows

ROOT = Path(__file__).resolve().parents[2]

from bench.gpu.gpu_measure import load_module  # noqa: E402

# the user's kernels live beside the tests that check them; loaded by path (they import without triton)
gpu_user_gemm = load_module("gpu_user_gemm", ROOT / "tests" / "gpu_user_gemm.py")
gpu_user_attention = load_module(
    "gpu_user_attention", ROOT / "tests" / "gpu_user_attention.py"
)  # same interface

TOP_K = 4
KERNELS = {"gemm": gpu_user_gemm, "attention": gpu_user_attention}
CHIP = "h200"
g = gpu_user_gemm  # the kernel under test (main() sets it from --kernel)


def files(kernel: str) -> dict:
    """The CSVs of one kernel's run (the GEMM's keep their first names)."""
    stem = "user_autotune" if kernel == "gemm" else f"user_autotune_{kernel}"
    return {k: f"{stem}_{k}.csv" for k in ("configs", "summary", "h2h", "env")}


def fitted_shapes(data_dir: Path = ROOT / "bench" / "data") -> dict:
    """{problem tuple: [files]} over every CSV under bench/data that has the problem's fields as columns."""
    import pandas as pd

    from tiler.operator import problem_class

    fields_ = list(problem_class(g.OP).FIELDS)
    seen: dict = {}
    for path in sorted(data_dir.rglob("*.csv")):
        if path.name.startswith("user_autotune"):
            continue
        try:
            df = pd.read_csv(path, usecols=lambda c: c in fields_)
        except Exception:  # noqa: BLE001 - not a table of shapes
            continue
        if set(df.columns) != set(fields_):
            continue
        for row in df[fields_].dropna().drop_duplicates().itertuples(index=False):
            seen.setdefault(tuple(int(v) for v in row), []).append(path.name)
    return seen


def _key(shape: dict) -> tuple:
    from tiler.operator import problem_class

    p = g.problem(shape)
    return tuple(int(p[f]) for f in problem_class(g.OP).FIELDS)


def check_unfitted() -> None:
    seen = fitted_shapes()
    clash = [(name, seen[_key(s)]) for name, s in g.SHAPES if _key(s) in seen]
    if clash:
        raise SystemExit("shapes already in bench/data: " + "; ".join(f"{s} in {f}" for s, f in clash))
    print(f"{len(g.SHAPES)} shapes, none among the {len(seen)} {g.OP} shapes of bench/data's CSVs")


# --- the model's side ------------------------------------------------------------------------------------------


def model_order(shape: dict, points: list[dict]):
    """tiler.triton.rank_configs of the user's points (the space's key map and defaults): (rank 1.. per point, None
    when infeasible; predicted us per point)."""
    from tiler import triton as tt

    ranked = tt.rank_configs(points, g.OP, CHIP, g.problem(shape), space=g.user_space())
    rank = [None] * len(points)
    pred = [math.nan] * len(points)
    for r in ranked:
        rank[r.index] = r.rank
        pred[r.index] = r.predicted_us
    return rank, pred


def rerank(table) -> list[float]:
    """Per shape of a measured configs table (impl triton): the best measured time over the best of the configs the
    pruner keeps now (the shipped profile as it is, the table's times unseen by it). Shows offline what a model change
    does to the pruned pick, on the same measurements."""
    prune = get_pruner()[0]["early_config_prune"]
    params = list(g.PARAMS)
    out = []
    for name, d in table.groupby("shape", sort=False):
        shape = dict(g.SHAPES)[name]
        fields = g.problem(shape)
        args = {a: fields[f if isinstance(f, str) else f[0]] for a, f in g.SHAPE.items()}
        dicts = [
            {p: int(v) for p, v in zip(params, row, strict=True)} for row in d[params].itertuples(index=False)
        ]
        kept = prune(dicts, args)
        ms = d["ms"].to_numpy()
        out.append(float(ms.min() / min(ms[dicts.index(k)] for k in kept)))
    return out


def get_pruner(top_k: int = TOP_K) -> tuple[dict, str]:
    """(prune_configs_by dict, what it is)."""
    from tiler import triton as tt

    return tt.pruner(op=g.OP, chip=CHIP, space=g.user_space(), top_k=top_k), "tiler.triton.pruner"


class TimedPrune:
    """Wraps early_config_prune: records each call's wall time and kept configs."""

    def __init__(self, fn):
        self.fn = fn
        self.calls: list[tuple[float, list]] = []

    def __call__(self, configs, named_args, **kwargs):
        t0 = time.perf_counter()
        out = self.fn(configs, named_args, **kwargs)
        self.calls.append((time.perf_counter() - t0, list(out)))
        return out


def dry() -> int:
    """CPU: the shapes are new, the space, and the model's kept configs per shape (no GPU needed)."""
    check_unfitted()
    points = g.space_points()
    print(f"{g.OP}: user space of {len(points)} configs")
    prune, how = get_pruner(TOP_K)
    for name, shape in g.SHAPES:
        t0 = time.perf_counter()
        rank, pred = model_order(shape, points)
        t_rank = time.perf_counter() - t0
        top = sorted((i for i in range(len(points)) if rank[i] is not None), key=lambda i: rank[i])[:TOP_K]
        line = ", ".join(g.config_label(points[i]) for i in top)
        print(f"{name:32s} {g.label(shape)}: rank {t_rank * 1e3:.0f} ms; top {TOP_K}: {line}")
        if g.HAVE_TRITON:
            configs = [g.to_config(p) for p in points]
            t0 = time.perf_counter()
            kept = prune["early_config_prune"](configs, g.named_args(shape))
            print(
                f"{'':32s} pruner {(time.perf_counter() - t0) * 1e3:.0f} ms: "
                + ", ".join(g.config_label(c) for c in kept)
            )
    print(f"pruner: {how}")
    return 0


# --- the device run -------------------------------------------------------------------------------------------


def _geomean(xs):
    xs = [x for x in xs if x is not None and x > 0 and math.isfinite(x)]
    return math.exp(sum(math.log(x) for x in xs) / len(xs)) if xs else math.nan


def _compiled(jitfn) -> int:
    """Compiled variants held by a JITFunction (triton 3.x: device_caches[dev][0] is the kernel cache)."""
    try:
        return sum(len(v[0]) for v in jitfn.device_caches.values())
    except Exception:  # noqa: BLE001 - another triton layout: unknown
        return -1


def _set_cache_dir(path: str) -> None:
    os.environ["TRITON_CACHE_DIR"] = path
    try:
        import triton

        triton.knobs.cache.dir = path
    except Exception:  # noqa: BLE001 - older triton reads the variable
        pass


def _env_rows(torch, triton) -> list[dict]:
    import platform
    import subprocess

    rows = [
        ("date", time.strftime("%Y-%m-%d %H:%M:%S %Z")),
        ("gpu", torch.cuda.get_device_name(0)),
        ("sms", torch.cuda.get_device_properties(0).multi_processor_count),
        ("torch", torch.__version__),
        ("cuda", torch.version.cuda),
        ("triton", triton.__version__),
        ("python", platform.python_version()),
        ("tf32_matmul", torch.backends.cuda.matmul.allow_tf32),
    ]
    try:
        q = "driver_version,clocks.sm,clocks.mem,power.draw,temperature.gpu"
        out = subprocess.run(
            ["nvidia-smi", f"--query-gpu={q}", "--format=csv,noheader"],
            capture_output=True,
            text=True,
            timeout=20,
        ).stdout.strip()
        rows.append(("nvidia_smi " + q, out))
    except Exception as exc:  # noqa: BLE001
        rows.append(("nvidia_smi", f"failed: {exc}"))
    return [{"key": k, "value": v} for k, v in rows]


def run(out: Path, deadline_s: float, only: list[int] | None, rounds: int, kernel: str) -> int:
    t_start = time.perf_counter()
    names = files(kernel)
    cache_root = tempfile.mkdtemp(prefix="user_autotune_cache_")
    _set_cache_dir(os.path.join(cache_root, "full"))  # cold: nothing compiled before this run
    import torch
    import triton

    if not torch.cuda.is_available():
        raise SystemExit("no CUDA device")
    check_unfitted()
    out.mkdir(parents=True, exist_ok=True)
    env = [{"key": "kernel", "value": f"{kernel} ({g.__name__}, {g.OP})"}, *_env_rows(torch, triton)]
    write_rows(out / names["env"], env)
    print(" | ".join(f"{r['key']}={r['value']}" for r in env), flush=True)

    # every compile's wall time (triton.compiler.compile, which each JITFunction binds at its first launch), so the
    # tuning time splits into compiling and the rest (benchmarking, the model, launch overhead)
    import triton.compiler as tcomp

    compiled = {"s": 0.0, "n": 0}
    plain_compile = tcomp.compile

    def timed_compile(*args, **kwargs):
        t0 = time.perf_counter()
        try:
            return plain_compile(*args, **kwargs)
        finally:
            compiled["s"] += time.perf_counter() - t0
            compiled["n"] += 1

    tcomp.compile = timed_compile

    points = g.space_points()
    configs = [g.to_config(p) for p in points]
    labels = [g.config_label(p) for p in points]
    index = {g.config_label(g.config_dict(c)): i for i, c in enumerate(configs)}
    prune, how = get_pruner(TOP_K)
    timed = TimedPrune(prune["early_config_prune"])
    full = g.autotuned(configs)
    pruned = g.autotuned(configs, prune_configs_by={**prune, "early_config_prune": timed})
    print(f"{len(configs)} configs; pruner: {how}; cache {cache_root}", flush=True)

    def bench(fn, warmup=25, rep=100):
        return float(triton.testing.do_bench(fn, warmup=warmup, rep=rep, return_mode="median"))

    def first_call(kern, x, cache_dir):
        """(wall s, variants compiled, s spent compiling) of the autotuned kernel's first call on a shape."""
        _set_cache_dir(cache_dir)
        n0, s0 = _compiled(kern.fn), compiled["s"]
        torch.cuda.synchronize()
        t0 = time.perf_counter()
        g.launch(x, kern)
        torch.cuda.synchronize()
        return time.perf_counter() - t0, _compiled(kern.fn) - n0, compiled["s"] - s0

    cfg_rows: list[dict] = []
    sum_rows: list[dict] = []
    h2h_rows: list[dict] = []
    failed: list[str] = []
    shapes = [s for i, s in enumerate(g.SHAPES) if only is None or i in only]
    specs_seen: set = set()

    def one_shape(si, name, shape):
        """Measure one shape: (config rows, summary row, head-to-head rows)."""
        cfg_rows: list[dict] = []
        h2h_rows: list[dict] = []
        fields_ = g.problem(shape)
        x = g.inputs(shape, seed=1000 + si)

        # (a) full autotune, (b) pruned autotune: first call each, in this order
        tune_full, comp_full, comp_full_s = first_call(full, x, os.path.join(cache_root, "full"))
        err_full_pick = g.error(x)
        x["out"].fill_(float("nan"))
        n_calls = len(timed.calls)
        tune_pruned, comp_pruned, comp_pruned_s = first_call(pruned, x, os.path.join(cache_root, "pruned"))
        err_pruned_pick = g.error(x)
        model_s, kept = timed.calls[-1] if len(timed.calls) > n_calls else (math.nan, [])
        kept_idx = [index[g.config_label(g.config_dict(k))] for k in kept]
        _set_cache_dir(os.path.join(cache_root, "full"))

        t_full = {index[g.config_label(g.config_dict(k))]: v for k, v in full.configs_timings.items()}
        t_pr = {index[g.config_label(g.config_dict(k))]: v for k, v in pruned.configs_timings.items()}
        full_pick = index[g.config_label(g.config_dict(full.best_config))]
        pruned_pick = index[g.config_label(g.config_dict(pruned.best_config))]

        # correctness of every config (the full copy's compiled kernels), poisoned output
        errs = {}
        for i, p in enumerate(points):
            x["out"].fill_(float("nan"))
            try:
                g.launch(x, full.fn, p)
                errs[i] = g.error(x)
            except Exception as exc:  # noqa: BLE001 - a config that does not run (out of resources): no error
                errs[i] = math.nan
                print(f"  {labels[i]}: does not run ({type(exc).__name__})", flush=True)

        # (c) the vendor call on the same operands
        vendor = g.vendor(x)
        x["out"].fill_(float("nan"))
        vout = vendor()
        torch.cuda.synchronize()
        err_vendor = g.error(x, vout)
        vendor_ms = bench(vendor)

        # offline: the pruned pick from the full table
        med = {i: float(v[0]) for i, v in t_full.items() if math.isfinite(float(v[0]))}
        table_best = min(med, key=med.get)
        kept_best = min(kept_idx, key=lambda i: med.get(i, math.inf)) if kept_idx else None
        ratio_table = med[table_best] / med[kept_best] if kept_best is not None else math.nan

        # head-to-head: the table's best 4, the kept 4, both picks, the vendor; interleaved rounds
        order = sorted(med, key=med.get)
        cont = list(dict.fromkeys(order[:TOP_K] + kept_idx + [full_pick, pruned_pick]))
        h2h: dict = {i: [] for i in cont}
        h2h["vendor"] = []
        for r in range(rounds):
            for i in cont:
                ms = bench(lambda p=points[i], x=x: g.launch(x, full.fn, p), warmup=10, rep=50)
                h2h[i].append(ms)
                h2h_rows.append({"shape": name, **fields_, "round": r, "config": labels[i], "ms": ms})
            ms = bench(vendor, warmup=10, rep=50)
            h2h["vendor"].append(ms)
            h2h_rows.append({"shape": name, **fields_, "round": r, "config": g.VENDOR, "ms": ms})
        hmed = {i: sorted(v)[len(v) // 2] for i, v in h2h.items()}
        h_best = min((i for i in cont), key=hmed.get)
        h_kept = min(kept_idx, key=hmed.get) if kept_idx else None
        ratio_h2h = hmed[h_best] / hmed[h_kept] if h_kept is not None else math.nan

        rank, pred = model_order(shape, points)
        for i, p in enumerate(points):
            tf = t_full.get(i, [math.nan] * 3)
            cfg_rows.append(
                {
                    "shape": name,
                    **fields_,
                    **p,
                    "config": labels[i],
                    "ms": float(tf[0]),
                    "ms_p20": float(tf[1]),
                    "ms_p80": float(tf[2]),
                    "rel_err": errs[i],
                    "model_rank": rank[i],
                    "predicted_us": pred[i],
                    "kept": int(i in kept_idx),
                    "pruned_autotune_ms": float(t_pr[i][0]) if i in t_pr else "",
                    "full_pick": int(i == full_pick),
                    "pruned_pick": int(i == pruned_pick),
                    "impl": "triton",
                }
            )
        cfg_rows.append({"shape": name, **fields_, "config": g.VENDOR, "ms": vendor_ms, "rel_err": err_vendor,
                         "impl": "torch"})  # fmt: skip
        row = {
            "shape": name,
            **fields_,
            "label": g.label(shape),
            "pruner": how,
            "configs": len(points),
            "kept": " | ".join(labels[i] for i in kept_idx),
            "full_best": labels[table_best],
            "full_best_ms": med[table_best],
            "full_pick": labels[full_pick],
            "pruned_pick": labels[pruned_pick],
            "pruned_pick_ms_live": float(t_pr[pruned_pick][0]),
            "kept_best": labels[kept_best] if kept_best is not None else "",
            "kept_best_ms": med.get(kept_best, math.nan),
            "ratio_table": ratio_table,
            "h2h_best": labels[h_best],
            "h2h_best_ms": hmed[h_best],
            "h2h_kept_best_ms": hmed[h_kept] if h_kept is not None else math.nan,
            "ratio_h2h": ratio_h2h,
            "tune_full_s": tune_full,
            "tune_pruned_s": tune_pruned,
            "tune_ratio": tune_pruned / tune_full,
            "compiled_full": comp_full,
            "compiled_pruned": comp_pruned,
            "compile_full_s": comp_full_s,
            "compile_pruned_s": comp_pruned_s,
            "tune_ratio_no_compile": (tune_pruned - comp_pruned_s) / (tune_full - comp_full_s),
            "bench_full_s": getattr(full, "bench_time", math.nan),
            "bench_pruned_s": getattr(pruned, "bench_time", math.nan),
            "model_s": model_s,
            "vendor": g.VENDOR,
            "vendor_ms": vendor_ms,
            "vendor_h2h_ms": hmed["vendor"],
            "full_vs_vendor": vendor_ms / med[table_best],
            "pruned_vs_vendor": vendor_ms / med[kept_best] if kept_best is not None else math.nan,
            "full_vs_vendor_h2h": hmed["vendor"] / hmed[h_best],
            "pruned_vs_vendor_h2h": hmed["vendor"] / hmed[h_kept] if h_kept is not None else math.nan,
            "max_rel_err": max(v for v in errs.values() if math.isfinite(v)),
            "rel_err_full_pick": err_full_pick,
            "rel_err_pruned_pick": err_pruned_pick,
            "rel_err_vendor": err_vendor,
            "elapsed_s": time.perf_counter() - t_start,
        }
        del x, vendor
        return cfg_rows, row, h2h_rows

    for si, (name, shape) in enumerate(shapes):
        spec = g.specialisation(shape)
        need = 20 + (60 if spec not in specs_seen else 0)
        if time.perf_counter() - t_start + need > deadline_s:
            print(f"deadline: {name} and {len(shapes) - si - 1} more not run", flush=True)
            break
        specs_seen.add(spec)
        try:
            rows, row, hrows = one_shape(si, name, shape)
        except Exception as exc:  # noqa: BLE001 - one shape's failure must not lose the others
            traceback.print_exc()
            print(f"{name}: FAILED ({type(exc).__name__}: {exc})", flush=True)
            failed.append(name)
            torch.cuda.empty_cache()
            continue
        cfg_rows += rows
        h2h_rows += hrows
        sum_rows.append(row)
        write_rows(out / names["configs"], cfg_rows)
        write_rows(out / names["summary"], sum_rows)
        write_rows(out / names["h2h"], h2h_rows)
        r = row
        print(
            f"[{r['elapsed_s']:5.0f}s] {r['label']}: pruned/full {r['ratio_table']:.3f} (h2h {r['ratio_h2h']:.3f}) "
            f"tune {r['tune_pruned_s']:.2f}/{r['tune_full_s']:.2f} s ({r['compiled_pruned']}/{r['compiled_full']} "
            f"compiled, model {r['model_s'] * 1e3:.0f} ms) full best {r['full_best_ms'] * 1e3:.1f} us, {g.VENDOR} "
            f"{r['vendor_ms'] * 1e3:.1f} us, max rel_err {r['max_rel_err']:.1e}",
            flush=True,
        )

    env.append({"key": "nvidia_smi after", "value": _env_rows(torch, triton)[-1]["value"]})
    env.append({"key": "wall_s", "value": f"{time.perf_counter() - t_start:.1f}"})
    env.append({"key": "failed", "value": "; ".join(failed)})
    done = {r["shape"] for r in sum_rows}
    env.append({"key": "not_run", "value": "; ".join(s[0] for s in shapes if s[0] not in set(failed) | done)})
    write_rows(out / names["env"], env)
    return report(out, kernel)


# --- the figures ----------------------------------------------------------------------------------------------


def report(data: Path, kernel: str = "gemm") -> int:
    """Per shape and geomean: the pruned pick over the full best (from the full table; head-to-head re-timing),
    the tuning times (with and without compiling), each against the vendor call."""
    import pandas as pd

    names = files(kernel)
    if not (data / names["summary"]).exists():
        print(f"no {names['summary']} in {data}: no shape was measured")
        return 1
    # the GEMM's first run named the vendor columns after cuBLAS
    s = pd.read_csv(data / names["summary"]).rename(columns=lambda c: c.replace("cublas", "vendor"))
    if "label" not in s.columns:
        s["label"] = [f"{m}x{n}x{k}" for m, n, k in zip(s["M"], s["N"], s["K"], strict=True)]
    vendor = str(s["vendor"].iloc[0]) if "vendor" in s.columns else "cuBLAS"
    print(
        f"{kernel}: pruner {', '.join(sorted(set(s['pruner'])))}; {len(s)} shapes, "
        f"{int(s['configs'].iloc[0])} configs each"
    )
    print(
        f"{'shape':>24s} {'pruned/full':>11s} {'h2h':>6s} {'tune full s (compile)':>22s} "
        f"{'pruned s (compile)':>18s} {'ratio':>6s} {'no-comp':>7s} {'full/' + vendor:>11s} "
        f"{'pruned/' + vendor:>13s}"
    )
    for r in s.itertuples(index=False):
        print(
            f"{r.label:>24s} {r.ratio_table:11.3f} {r.ratio_h2h:6.3f} "
            f"{r.tune_full_s:12.2f} ({r.compile_full_s:6.2f}) {r.tune_pruned_s:9.2f} ({r.compile_pruned_s:5.2f}) "
            f"{r.tune_ratio:6.3f} {r.tune_ratio_no_compile:7.3f} {r.full_vs_vendor:11.2f} {r.pruned_vs_vendor:13.2f}"
        )
    gm = {
        c: _geomean(s[c])
        for c in (
            "ratio_table",
            "ratio_h2h",
            "tune_ratio",
            "tune_ratio_no_compile",
            "full_vs_vendor",
            "pruned_vs_vendor",
            "full_vs_vendor_h2h",
            "pruned_vs_vendor_h2h",
        )
    }
    tot_f, tot_p = s["tune_full_s"].sum(), s["tune_pruned_s"].sum()
    nc_f, nc_p = tot_f - s["compile_full_s"].sum(), tot_p - s["compile_pruned_s"].sum()
    print(
        f"pruned pick / full best (full table): geomean {gm['ratio_table']:.4f}, min {s['ratio_table'].min():.3f}, "
        f">= 0.95 on {(s['ratio_table'] >= 0.95).sum()}/{len(s)}, >= 0.99 on {(s['ratio_table'] >= 0.99).sum()}; "
        f"head-to-head: geomean {gm['ratio_h2h']:.4f}, min {s['ratio_h2h'].min():.3f}"
    )
    print(
        f"tuning time pruned / full, in one process (compiles included): total {tot_p:.1f} / {tot_f:.1f} s = "
        f"{tot_p / tot_f:.4f}, per-shape geomean {gm['tune_ratio']:.4f} (max {s['tune_ratio'].max():.3f}); "
        f"without compiling: total {nc_p:.1f} / {nc_f:.1f} s = {nc_p / nc_f:.4f}, per-shape geomean "
        f"{gm['tune_ratio_no_compile']:.4f} (max {s['tune_ratio_no_compile'].max():.3f}); "
        f"compiled {int(s['compiled_full'].sum())} / {int(s['compiled_pruned'].sum())} variants; "
        f"the model {s['model_s'].sum():.2f} s in all"
    )
    h2h_path = data / names["h2h"]
    if (
        h2h_path.exists()
    ):  # the two autotunes' own picks, re-timed side by side (no best-of-many-single-timings bias)
        med = pd.read_csv(h2h_path).groupby(["shape", "config"])["ms"].median()
        picks = [
            med[(r.shape, r.full_pick)] / med[(r.shape, r.pruned_pick)] for r in s.itertuples(index=False)
        ]
        print(
            f"the two autotunes' picks re-timed head-to-head (full pick / pruned pick): geomean {_geomean(picks):.4f}, "
            f"min {min(picks):.3f}, >= 0.95 on {sum(p >= 0.95 for p in picks)}/{len(picks)}"
        )
    print(
        f"{vendor} time / Triton time (> 1: Triton faster), geomean: full best {gm['full_vs_vendor']:.3f}, "
        f"pruned pick {gm['pruned_vs_vendor']:.3f} (head-to-head {gm['full_vs_vendor_h2h']:.3f}, "
        f"{gm['pruned_vs_vendor_h2h']:.3f})"
    )
    cfg_path = data / names["configs"]
    if (
        cfg_path.exists()
    ):  # the model's plain order (tiler.rank) on the full table: top-1 and best of the top 4
        c = pd.read_csv(cfg_path)
        c = c[(c["impl"] == "triton") & c["ms"].notna()]
        top1, top4 = [], []
        for _, d in c.groupby("shape", sort=False):
            best = d["ms"].min()
            top1.append(best / d.loc[d["model_rank"] == d["model_rank"].min(), "ms"].min())
            top4.append(best / d.loc[d["model_rank"] <= TOP_K, "ms"].min())
        print(
            f"the model's plain order on the full table: top-1 geomean {_geomean(top1):.4f} (min {min(top1):.3f}), "
            f"best of top {TOP_K} {_geomean(top4):.4f} (min {min(top4):.3f}); the pruner keeps the diverse top {TOP_K}"
        )
        kept_now = rerank(c)
        print(
            f"the pruner with the model as it is now (hardware/h200.toml), on the same measured table: best of "
            f"its {TOP_K} kept / full best geomean {_geomean(kept_now):.4f} (min {min(kept_now):.3f}, >= 0.99 on "
            f"{sum(r >= 0.99 for r in kept_now)}/{len(kept_now)}; the run's kept sets: {gm['ratio_table']:.4f})"
        )
    print(
        f"correctness: max rel_err over every config and shape {s['max_rel_err'].max():.2e} (fp32 reference)"
    )
    checks = [
        ("pruned/full geomean >= 0.99", gm["ratio_table"] >= 0.99),
        ("pruned/full >= 0.95 on every shape", bool((s["ratio_table"] >= 0.95).all())),
        ("tuning time <= 1/10 (in one process, total)", tot_p / tot_f <= 0.1),
    ]
    print("targets: " + "; ".join(f"{name}: {'met' if ok else 'NOT met'}" for name, ok in checks))
    return 0


def main(argv=None) -> int:
    global g
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument(
        "--kernel", choices=sorted(KERNELS), default="gemm", help="the user kernel (tests/gpu_user_*.py)"
    )
    sub = ap.add_subparsers(dest="cmd", required=True)
    sub.add_parser("dry", help="CPU: shapes unfitted, the space, the model's kept configs")
    r = sub.add_parser("run", help="GPU: the measurement")
    r.add_argument("--out", type=Path, default=Path(os.environ.get("OUT", "results/user_autotune")))
    r.add_argument("--deadline-s", type=float, default=470.0, help="start no shape past this many seconds")
    r.add_argument(
        "--shapes", default=None, help="indices into the kernel's SHAPES, comma-separated (default all)"
    )
    r.add_argument("--rounds", type=int, default=3, help="head-to-head rounds")
    rep = sub.add_parser("report", help="CPU: the figures from the CSVs")
    rep.add_argument("data", type=Path, nargs="?", default=ROOT / "bench" / "data")
    a = ap.parse_args(argv)
    g = KERNELS[a.kernel]
    if a.cmd == "dry":
        return dry()
    if a.cmd == "report":
        return report(a.data, a.kernel)
    only = [int(x) for x in a.shapes.split(",")] if a.shapes else None
    return run(a.out, a.deadline_s, only, a.rounds, a.kernel)


if __name__ == "__main__":
    sys.exit(main())
