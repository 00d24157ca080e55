"""Issue 30 item 1: the Hopper matmul templates (TMA loads, a persistent grid, warp specialisation) against cuBLAS.

For each shape (the 48 the project has measured on the H200 and 16 never measured before, NEW_SHAPES), `plan`
takes the model's top-4 tilings of the pointer kernel (tiler.search, h200, fp16, nn) plus four tilings the Triton
persistent-matmul tutorial uses, and `run` (on the GPU machine, one process) times each tiling under every
template that can run the shape (tiler.ops.matmul.triton_tma: 0 pointer, 1 tma, 2 persistent, 3 persistent_ws)
with the project's runner (do_bench median, L2 flushed, checked against an fp32 product), and cuBLAS
(torch.matmul) on the same operands in the same run. A pool of worker processes compiles every (config, shape)
first, so the timing loop does not wait on the compiler. `report` prints, per shape, cuBLAS, the best of each
template and the ratios to cuBLAS, and the geomeans.

    python -m bench.gpu.matmul_templates plan            # here: writes bench/data/matmul_templates_plan.csv
    python -m bench.gpu.matmul_templates run --part 1/2 --out $OUT  # GPU machine (torch, triton, an H200); then 2/2
    python -m bench.gpu.matmul_templates report [CSV]    # default bench/data/h200_matmul_templates.csv
    python -m bench.gpu.matmul_templates fit             # the template constants from the 48 measured shapes
    python -m bench.gpu.matmul_templates picks-plan      # here: the model's plain and diverse top-4 of the new space
    python -m bench.gpu.matmul_templates run --plan bench/data/matmul_template_picks_plan.csv --out $OUT  # GPU
    python -m bench.gpu.matmul_templates picks-report [CSV]  # top-1 and best-of-4 against cuBLAS

`fit` fits the template constants of the CUDA matmul model (tma_step_overhead_cycles, persistent_tile_cycles,
tma_bytes_per_cycle) with tiler.calibrate on the 48 shapes of group `measured` and reports the 16 `new` shapes,
never fitted, before and after. `picks-plan` takes, per shape, the model's plain top-4 and diverse top-4 of the
space with TEMPLATE (tiler.search, h200, fp16, nn); `run` times them (their TEMPLATE as planned) beside cuBLAS;
`picks-report` prints the issue's figures: top-1 and best-of-4 (plain and diverse) against cuBLAS, the shapes where
the top-1 beats it, and the shapes whose dimensions are not all multiples of 64.
"""

from __future__ import annotations

import argparse
import csv
import math
import os
import time
from pathlib import Path

from bench.gpu.table import write_rows

DATA = Path(__file__).resolve().parents[1] / "data"
PLAN = DATA / "matmul_templates_plan.csv"
PICKS_PLAN = DATA / "matmul_template_picks_plan.csv"
FIT_PARAMS = ["tma_step_overhead_cycles", "persistent_tile_cycles", "tma_bytes_per_cycle"]
MEASURED_FILES = (
    "h200_matmul_cal.csv",
    "h200_matmul_new.csv",
    "h200_matmul_extra.csv",
    "h200_odd_split_k.csv",
)
NEW_SHAPES = [  # never measured by the project before this bench (LLM layers, and sizes not multiples of 64)
    (128, 4096, 14336),
    (4096, 4096, 14336),
    (2048, 28672, 4096),
    (8192, 3584, 3584),
    (1024, 18944, 3584),
    (512, 3584, 18944),
    (16384, 4096, 1024),
    (3072, 9216, 3072),
    (96, 24576, 8192),
    (12288, 12288, 512),
    (1000, 3000, 5000),
    (3333, 1111, 2222),
    (6000, 2000, 1500),
    (2500, 7000, 3000),
    (777, 7777, 777),
    (4000, 12000, 1000),
]
KNOBS = ("BLOCK_M", "BLOCK_N", "BLOCK_K", "num_stages", "num_warps", "GROUP_M", "ORDER", "SPLIT_K")
TUTORIAL = [  # (BLOCK_M, BLOCK_N, BLOCK_K, num_stages, num_warps): the Triton persistent-matmul tutorial's configs
    (128, 256, 64, 3, 8),
    (128, 128, 64, 4, 4),
    (128, 256, 64, 4, 8),
    (128, 128, 128, 3, 8),
]
TOP = 4


def measured_shapes() -> list[tuple[int, int, int]]:
    import pandas as pd

    seen: dict[tuple, None] = {}
    for name in MEASURED_FILES:
        d = pd.read_csv(DATA / name)
        for m, n, k in d[["M", "N", "K"]].drop_duplicates().itertuples(index=False):
            seen[(int(m), int(n), int(k))] = None
    return list(seen)


def plan(path: Path) -> int:
    import tiler

    rows = []
    shapes = [(s, "measured") for s in measured_shapes()] + [(s, "new") for s in NEW_SHAPES]
    for (M, N, K), group in shapes:
        res = tiler.search(op="matmul", chip="h200", shape={"M": M, "N": N, "K": K}, dtype="fp16", top=TOP,
                           runnable=False)  # fmt: skip
        for i in range(min(TOP, len(res.est["time_us"]))):
            t = res.tiling(i)
            cfg = {k: t[k] for k in KNOBS}
            cfg["ORDER"] = res.space.knobs["ORDER"].parse(t["ORDER"])
            rows.append({"M": M, "N": N, "K": K, "group": group, "source": f"model{i + 1}", **cfg,
                         "predicted_us": float(res.est["time_us"][i])})  # fmt: skip
        for bm, bn, bk, st, w in TUTORIAL:
            cfg = dict(
                BLOCK_M=bm, BLOCK_N=bn, BLOCK_K=bk, num_stages=st, num_warps=w, GROUP_M=8, ORDER=1, SPLIT_K=1
            )
            rows.append(
                {"M": M, "N": N, "K": K, "group": group, "source": "tutorial", **cfg, "predicted_us": ""}
            )
    write_rows(path, rows)
    print(f"wrote {path}: {len(rows)} tilings over {len(shapes)} shapes")
    return 0


# which templates time which plan rows (compiling is what a one-call budget runs out of: ~1 compile per timing)
TEMPLATES_OF = {
    "model1": (0, 1, 2),
    "model2": (0,),
    "tutorial": (1, 2),
}
WS_TILING = (128, 256, 64, 3, 8)  # the one tiling timed under persistent_ws (3): the tutorial's first
SPLIT_K_WS = (
    1  # warp specialisation with split-K atomics left the output zero on the H200 (Triton 3.6): not timed
)


def _tasks(plan_rows, staged_only: bool = False) -> list[tuple]:
    """(M, N, K, config with TEMPLATE, source, group): the plan rows under the templates TEMPLATES_OF gives them
    (a TMA template stages the operands whose rows TMA cannot describe: triton_tma.staged_operands). staged_only:
    only the shapes with such an operand."""
    from tiler.ops.matmul.triton_tma import tma_ok

    out = []
    for r in plan_rows:
        M, N, K = int(r["M"]), int(r["N"]), int(r["K"])
        if staged_only and tma_ok(M, N, K, "nn", 2):
            continue
        cfg = {k: int(r[k]) for k in KNOBS}
        if r.get("TEMPLATE", "") != "":  # a picks plan: each row under its own template (and optional keys)
            for key in ("TAIL_SPLIT", "EPILOGUE_SUBTILE"):
                if int(float(r.get(key) or 1)) > 1:
                    cfg[key] = int(float(r[key]))
            out.append((M, N, K, {**cfg, "TEMPLATE": int(r["TEMPLATE"])}, r["source"], r["group"]))
            continue
        tiling = tuple(cfg[k] for k in ("BLOCK_M", "BLOCK_N", "BLOCK_K", "num_stages", "num_warps"))
        templates = list(TEMPLATES_OF.get(r["source"], ()))
        if r["source"] == "tutorial" and tiling not in TUTORIAL[:2]:
            templates = []
        if r["source"] == "tutorial" and tiling == WS_TILING:
            templates.append(3)
        for t in templates:
            if t == 3 and cfg["SPLIT_K"] != SPLIT_K_WS:
                continue
            out.append((M, N, K, {**cfg, "TEMPLATE": t}, r["source"], r["group"]))
    return out


def _compile(task) -> str:
    """Run one task once in a worker (compiles into Triton's on-disk cache); '' or why it cannot run."""
    from tiler.ops.matmul.triton_runner import Problem

    M, N, K, cfg = task[:4]
    try:
        p = _problem_cache(Problem, M, N, K)
        _once(p, cfg)
        return ""
    except Exception as exc:  # noqa: BLE001 - a config that cannot run is reported, not fatal
        return f"{type(exc).__name__}: {str(exc)[:160]}"


_PROBLEMS: dict = {}


def _problem_cache(cls, M, N, K):
    if (M, N, K) not in _PROBLEMS:
        _PROBLEMS.clear()
        _PROBLEMS[(M, N, K)] = cls(M, N, K, reference=False)
    return _PROBLEMS[(M, N, K)]


def _once(p, cfg) -> None:
    import torch

    from tiler.ops.matmul.triton_runner import _plan

    fn, _ = _plan(p.a, p.b, cfg)
    fn()
    torch.cuda.synchronize()


def run(
    out: Path,
    jobs: int,
    budget_s: float,
    part: str,
    compile_s: float,
    plan_path: Path = PLAN,
    staged_only: bool = False,
) -> int:
    import concurrent.futures as cf
    import multiprocessing as mp

    import torch
    import triton

    from tiler.ops.matmul.triton_runner import Problem

    t0 = time.perf_counter()
    with open(plan_path) as f:
        tasks = _tasks(list(csv.DictReader(f)), staged_only)
    tasks.sort(key=lambda t: (t[0], t[1], t[2]))
    k, n = (int(x) for x in part.split("/"))  # this call's share of the shapes: k of n
    shapes = list(dict.fromkeys(t[:3] for t in tasks))
    mine = set(shapes[k - 1 :: n])
    tasks = [t for t in tasks if t[:3] in mine]
    print(f"{len(tasks)} timings; torch {torch.__version__}, triton {triton.__version__}, "
          f"{torch.cuda.get_device_name()}", flush=True)  # fmt: skip
    pool = cf.ProcessPoolExecutor(jobs, mp_context=mp.get_context("spawn"))
    futures = [pool.submit(_compile, t) for t in tasks]
    cf.wait(futures, timeout=max(1.0, compile_s - (time.perf_counter() - t0)))
    why = [f.result() if f.done() else "not compiled within the compile budget" for f in futures]
    workers = list((getattr(pool, "_processes", None) or {}).values())
    pool.shutdown(wait=False, cancel_futures=True)
    for proc in workers:  # workers still compiling: stop them
        proc.kill()
    print(f"[{time.perf_counter() - t0:4.0f}s] compiled; {sum(bool(w) for w in why)} cannot run or not compiled",
          flush=True)  # fmt: skip
    out.mkdir(parents=True, exist_ok=True)
    path = out / f"h200_{plan_path.stem.replace('_plan', '')}_{k}of{n}.csv"
    rows: list[dict] = []
    shape_of = None
    prob = None
    for task, fail in zip(tasks, why, strict=True):
        M, N, K, cfg, source, group = task
        if time.perf_counter() - t0 > budget_s:
            print("budget spent: stopping", flush=True)
            break
        if shape_of != (M, N, K):
            shape_of = (M, N, K)
            prob = Problem(M, N, K, warmup_ms=10.0, rep_ms=50.0)
            v = prob.measure_torch()
            rows.append({"M": M, "N": N, "K": K, "group": group, "source": "cublas", "ms": v["ms"],
                         "rel_err": v["rel_err"], "fail": ""})  # fmt: skip
            write_rows(path, rows)
            print(f"[{time.perf_counter() - t0:4.0f}s] {M}x{N}x{K} cublas {v['ms']:.4f} ms", flush=True)
        rec = {"M": M, "N": N, "K": K, "group": group, "source": source, **cfg}
        if fail:
            print(f"  {source} T{cfg['TEMPLATE']}: {fail[:100]}", flush=True)
            rows.append({**rec, "ms": math.nan, "rel_err": math.nan, "fail": fail})
            continue
        try:
            m = prob.measure(cfg)
            rows.append({**rec, "ms": m["ms"], "rel_err": m["rel_err"], "fail": ""})
        except Exception as exc:  # noqa: BLE001
            rows.append(
                {**rec, "ms": math.nan, "rel_err": math.nan, "fail": f"{type(exc).__name__}: {exc}"[:160]}
            )
    write_rows(path, rows)
    if plan_path == PLAN:
        return report(path)
    # a picks plan's report; other plans (bench.gpu.matmul_tail) have their own
    return picks_report(path) if any(r["source"] == "plain1" for r in rows) else 0


def _measured_rows():
    """The timed tilings of both runs (templates, then the model's picks), template 3 (not in the space) left out."""
    import pandas as pd

    df = pd.concat(
        [pd.read_csv(DATA / f) for f in ("h200_matmul_templates.csv", "h200_matmul_template_picks.csv")]
    )
    df = df[(df.source != "cublas") & df.ms.notna() & (df.TEMPLATE != 3)].copy()
    df["impl"] = "triton"
    for k in (*KNOBS, "TEMPLATE"):
        df[k] = df[k].astype(int)
    return df


STAGED_DATA = (
    "h200_matmul_templates_staged_only.csv"  # the templates run on the 11 shapes TMA stages (session 19)
)


def fit_staged() -> int:
    """stage_gelems_per_s, the staging copy's rate, from the TMA rows of the staged-only templates run: fitted on
    its `measured` shapes, its `new` shapes held out; then the staged rows of the picks run (other tilings, the model
    before this fit chose them) as a second check."""
    import pandas as pd

    from tiler.calibrate import calibrate
    from tiler.hardware import load_chip

    df = pd.read_csv(DATA / STAGED_DATA)
    df = df[(df.source != "cublas") & df.ms.notna() & df.TEMPLATE.isin([1, 2])].copy()
    df["impl"] = "triton"
    for k in (*KNOBS, "TEMPLATE"):
        df[k] = df[k].astype(int)
    shapes = [f"{m}x{n}x{k}" for (m, n, k), g in df.groupby(["M", "N", "K"]) if g.group.iloc[0] == "measured"]
    res = calibrate(load_chip("h200"), "matmul", df, folds=0, fit_shapes=shapes, params=["stage_gelems_per_s"],
                    data_name=f"bench/data/{STAGED_DATA}")  # fmt: skip
    print(res.summary())
    return 0


def fit() -> int:
    from tiler.calibrate import calibrate
    from tiler.hardware import load_chip

    df = _measured_rows()
    shapes = [f"{m}x{n}x{k}" for (m, n, k), g in df.groupby(["M", "N", "K"]) if g.group.iloc[0] == "measured"]
    res = calibrate(load_chip("h200"), "matmul", df, folds=0, fit_shapes=shapes, params=FIT_PARAMS,
                    data_name="bench/data/h200_matmul_templates.csv + h200_matmul_template_picks.csv")  # fmt: skip
    print(res.summary())
    return 0


def picks_plan(path: Path) -> int:
    import tiler

    rows = []
    shapes = [(s, "measured") for s in measured_shapes()] + [(s, "new") for s in NEW_SHAPES]
    for (M, N, K), group in shapes:
        for kind, diverse in (("plain", False), ("diverse", True)):
            res = tiler.search(op="matmul", chip="h200", shape={"M": M, "N": N, "K": K}, dtype="fp16", top=TOP,
                               runnable=False, diverse=diverse)  # fmt: skip
            for i in range(min(TOP, len(res.est["time_us"]))):
                t = res.tiling(i)
                cfg = {k: res.space.knobs[k].parse(t[k]) for k in (*KNOBS, "TEMPLATE", "TAIL_SPLIT")}
                rows.append({"M": M, "N": N, "K": K, "group": group, "source": f"{kind}{i + 1}", **cfg,
                             "predicted_us": float(res.est["time_us"][i])})  # fmt: skip
    write_rows(path, rows)
    print(f"wrote {path}: {len(rows)} rows over {len(shapes)} shapes")
    return 0


def picks_report(path: Path) -> int:
    """Top-1 (plain1) and best-of-4 (plain, diverse) against cuBLAS, per group; rows timed twice (a tiling in both
    lists) count once per list."""
    import numpy as np
    import pandas as pd

    df = pd.read_csv(path)
    out = []
    for (M, N, K), d in df.groupby(["M", "N", "K"], sort=False):
        cub = d.loc[d.source == "cublas", "ms"].min()
        ok = d[d.ms.notna() & (d.source != "cublas")]
        top1 = ok.loc[ok.source == "plain1", "ms"].min()
        plain = ok.loc[ok.source.str.startswith("plain"), "ms"].min()
        div = ok.loc[ok.source.str.startswith("diverse"), "ms"].min()
        t1 = ok.loc[ok.source == "plain1"]
        tpl = int(t1.TEMPLATE.iloc[0]) if len(t1) else -1
        odd = any(x % 64 for x in (M, N, K))
        out.append({"shape": f"{M}x{N}x{K}", "group": d.group.iloc[0], "odd": odd, "cublas_ms": cub,
                    "top1": cub / top1, "plain4": cub / plain, "diverse4": cub / div, "top1_template": tpl})  # fmt: skip
    t = pd.DataFrame(out)
    with pd.option_context("display.width", 200, "display.max_rows", 200):
        print(t.to_string(index=False, float_format=lambda x: f"{x:.3f}"))

    def gm(x):
        x = np.asarray(x, dtype=float)
        x = x[np.isfinite(x)]
        return float(np.exp(np.log(x).mean())) if len(x) else float("nan")

    for name, sel in (("all", t.index == t.index), ("measured", t.group == "measured"), ("new", t.group == "new"),
                      ("not multiples of 64", t.odd)):  # fmt: skip
        s = t[sel]
        print(f"{name:>20} ({len(s)} shapes): top-1 {gm(s.top1):.3f}x cuBLAS (beats it on {(s.top1 > 1).sum()}), "
              f"best of plain top-4 {gm(s.plain4):.3f}, best of diverse top-4 {gm(s.diverse4):.3f}")  # fmt: skip
    return 0


def report(path: Path) -> int:
    import numpy as np
    import pandas as pd

    from tiler.ops.matmul.triton_tma import TEMPLATES

    df = pd.read_csv(path)
    lines, ratios = [], {t: [] for t in ["any", "space", *TEMPLATES, "model1_pointer"]}
    groups = {}
    for (M, N, K), d in df.groupby(["M", "N", "K"], sort=False):
        cub = d.loc[d.source == "cublas", "ms"].min()
        ok = d[(d.source != "cublas") & d.ms.notna()]
        best = {TEMPLATES[int(t)]: g.ms.min() for t, g in ok.groupby("TEMPLATE")}
        top1 = ok[(ok.source == "model1") & (ok.TEMPLATE == 0)].ms.min()
        r = {t: cub / ms for t, ms in best.items()}
        r["any"] = cub / ok.ms.min() if len(ok) else math.nan
        in_space = ok[ok.TEMPLATE < 3]  # persistent_ws is not in the search space (docs/model_cuda.md §1b)
        r["space"] = cub / in_space.ms.min() if len(in_space) else math.nan
        r["model1_pointer"] = cub / top1
        for k in ratios:
            ratios[k].append(r.get(k, math.nan))
        groups.setdefault(d.group.iloc[0], []).append(r["any"])
        cells = " ".join(f"{r.get(t, math.nan):6.3f}" for t in TEMPLATES)
        lines.append(f"{M:>6}x{N:<6}x{K:<6} {d.group.iloc[0]:>8} {cub:9.4f} {r['model1_pointer']:7.3f} {cells} "
                     f"{r['any']:6.3f}")  # fmt: skip
    print(f"{'shape':>20} {'group':>8} {'cuBLAS ms':>9} {'top1ptr':>7} "
          + " ".join(f"{t[:6]:>6}" for t in TEMPLATES) + "    any   (cuBLAS / Triton: > 1 beats cuBLAS)")  # fmt: skip
    print("\n".join(lines))

    def gm(v):
        v = np.asarray([x for x in v if np.isfinite(x)])
        return float(np.exp(np.log(v).mean())) if len(v) else math.nan

    for k, v in ratios.items():
        fin = [x for x in v if np.isfinite(x)]
        print(f"geomean vs cuBLAS, best of {k:>14}: {gm(v):.3f} over {len(fin)} shapes; beats cuBLAS on "
              f"{sum(x > 1 for x in fin)}; min {min(fin, default=math.nan):.3f}")  # fmt: skip
    for g, v in groups.items():
        print(f"group {g}: best of any template {gm(v):.3f} over {len(v)} shapes")
    return 0


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    sub = ap.add_subparsers(dest="cmd", required=True)
    sub.add_parser("plan").add_argument("--out", type=Path, default=PLAN)
    r = sub.add_parser("run")
    r.add_argument("--out", type=Path, default=Path(os.environ.get("OUT", "results")))
    r.add_argument("--jobs", type=int, default=max(1, min(14, (os.cpu_count() or 2) - 2)))
    r.add_argument("--budget-s", type=float, default=520.0)
    r.add_argument("--compile-s", type=float, default=240.0, help="compile pool deadline, from start")
    r.add_argument("--part", default="1/1", help="k/n: time the k-th of n interleaved shares of the shapes")
    r.add_argument("--plan", type=Path, default=PLAN)
    r.add_argument("--staged-only", action="store_true", help="only shapes with an operand TMA stages")
    sub.add_parser("report").add_argument(
        "csv", type=Path, nargs="?", default=DATA / "h200_matmul_templates.csv"
    )
    sub.add_parser("fit").add_argument(
        "--staged", action="store_true", help="fit stage_gelems_per_s (staged shapes)"
    )
    sub.add_parser("picks-plan").add_argument("--out", type=Path, default=PICKS_PLAN)
    sub.add_parser("picks-report").add_argument(
        "csv", type=Path, nargs="?", default=DATA / "h200_matmul_template_picks.csv"
    )
    a = ap.parse_args(argv)
    if a.cmd == "plan":
        return plan(a.out)
    if a.cmd == "run":
        return run(a.out, a.jobs, a.budget_s, a.part, a.compile_s, a.plan, a.staged_only)
    if a.cmd == "fit" and a.staged:
        return fit_staged()
    if a.cmd == "fit":
        return fit()
    if a.cmd == "picks-plan":
        return picks_plan(a.out)
    if a.cmd == "picks-report":
        return picks_report(a.csv)
    return report(a.csv)


if __name__ == "__main__":
    raise SystemExit(main())
