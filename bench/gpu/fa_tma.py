"""Issue 30 (attention): K and V loaded through TMA tensor descriptors (the kernel's LOADS 1) against its pointer
loads (LOADS 0), tiling by tiling, with the fastest SDPA backend beside them, on the H200.

    python -m bench.gpu.fa_tma plan                  # here: bench/data/fa_tma_plan.csv
    /tmp/trv/bin/python -m bench.gpu.fa_tma compile  # here, Triton 3.6: the plan's 304 kernels for sm_90, ~8 min on 2 cores
    python -m bench.gpu.fa_tma run --out $OUT        # GPU machine, about 5 minutes
    python -m bench.gpu.fa_tma report [CSV]          # default bench/data/h200_fa_tma.csv

`plan` takes, for each of the 16 shapes of bench.gpu.fa_vs_sdpa, the model's diverse top 8 (tiler.search, h200)
and, where S1 >= 128, the long-prefill tilings EXTRA (128 query rows, 64 or 128 keys a step, 2-4 stages, 4 or 8
warps; ORDER 1 under the causal mask), those the model did not already pick. `compile` (no GPU: Triton's own
`triton.compile` for GPUTarget("cuda", 90, 32), the launch's specialisation) prints registers, spill bytes and
shared memory of each planned kernel at LOADS 0 and 1. `run` compiles the plan's kernels first in a pool of
processes (bench/gpu/compile_pool.py), then per shape times the fastest SDPA backend once
(triton_runner.vendor_times) and every tiling at LOADS 0 and 1, one after the other, in alternating order
(triton_kernels.time_config: do_bench median, L2 flushed, each output checked against torch). `report` prints per
shape the best of each, their ratio and the fastest SDPA over each, the geomeans, and how often and by how much
LOADS 1 beats LOADS 0 on the same tiling, causal and not.
"""

from __future__ import annotations

import argparse
import csv
import math
import os
import sys
import time
from pathlib import Path

from bench.gpu.table import write_rows

ROOT = Path(__file__).resolve().parents[2]
DATA = ROOT / "bench" / "data"
PLAN = DATA / "fa_tma_plan.csv"
KERNELS = ROOT / "tiler" / "ops" / "flash_attention" / "triton_kernels.py"
FIELDS = ("B", "heads", "kv_heads", "S1", "S2", "D", "causal")
KNOBS = ("BLOCK_M", "BLOCK_N", "num_stages", "num_warps", "ORDER")
TOP = 8
# (BLOCK_M, BLOCK_N, num_stages, num_warps): 128 query rows, the tiles FlashAttention-style kernels use on a long
# prefill (128 x 128 at 3 stages and D 128 would need 224 KB of shared memory: left out)
EXTRA = [(128, 64, s, w) for s in (2, 3, 4) for w in (4, 8)] + [(128, 128, 2, 4), (128, 128, 2, 8)]
LOADS = (0, 1)


def plan(out: Path) -> int:
    from bench.gpu.fa_vs_sdpa import picks, shapes

    rows = []
    for shape in shapes():
        tilings = [
            ({k: p[k] for k in KNOBS}, "model", r, p["predicted_us"])
            for r, p in enumerate(picks(shape, TOP), 1)
        ]
        if shape["S1"] >= 128:
            order = 1 if shape["causal"] else 0
            for bm, bn, st, w in EXTRA:
                cfg = dict(BLOCK_M=bm, BLOCK_N=bn, num_stages=st, num_warps=w, ORDER=order)
                if all(cfg != t[0] for t in tilings):
                    tilings.append((cfg, "extra", 0, ""))
        for cfg, source, rank, pred in tilings:
            rows.append({**shape, "source": source, "rank": rank, **cfg, "predicted_us": pred})
    write_rows(out, rows)
    n = len({tuple(r[f] for f in FIELDS) for r in rows})
    print(
        f"wrote {out}: {len(rows)} tilings on {n} shapes, each to be timed at LOADS {' and '.join(map(str, LOADS))}"
    )
    return 0


def read_plan(path: Path) -> list[dict]:
    """The plan's rows: shape fields and knobs as ints, `source`, `rank` and `predicted_us` as written."""
    with open(path, newline="") as f:
        return [{k: (int(v) if k in FIELDS + KNOBS else v) for k, v in r.items()} for r in csv.DictReader(f)]


def _load_kernels():
    import importlib.util

    spec = importlib.util.spec_from_file_location("fa_kernels", KERNELS)
    km = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(km)
    return km


def _launch(km, shape: dict, cfg: dict) -> tuple:
    """(integer and float arguments, keyword arguments) of `fa_forward` for the shape's contiguous tensors."""
    q_st = (shape["heads"] * shape["S1"] * shape["D"], shape["S1"] * shape["D"], shape["D"])
    kv_st = (shape["kv_heads"] * shape["S2"] * shape["D"], shape["S2"] * shape["D"], shape["D"])
    q_shape = (shape["B"], shape["heads"], shape["S1"], shape["D"])
    kv_shape = (shape["B"], shape["kv_heads"], shape["S2"], shape["D"])
    strides = [q_st, kv_st, kv_st, q_st]
    _, ints, kw = km.launch_args(km.check_config(cfg), bool(shape["causal"]), q_shape, kv_shape, strides)
    return ints, kw


def _spec_key(km, shape: dict, cfg: dict) -> tuple:
    """What Triton specialises a launch on (the constexprs and launch options; each integer argument as 1, a
    multiple of 16 or neither): plan rows with one key share one compiled kernel."""
    ints, kw = _launch(km, shape, cfg)
    return (tuple(sorted(kw.items())), tuple((x == 1, x % 16 == 0) for x in ints[1:]))


def compile_sm90(km, shape: dict, cfg: dict) -> dict:
    """Registers, spill stack bytes and shared memory of one (shape, tiling) built for sm_90 without a GPU, with
    the specialisation the launch would have (pointers 16-byte aligned, integers equal to 1 constant, multiples of
    16 marked so)."""
    import re
    import subprocess
    import tempfile

    import triton
    from triton.backends.compiler import GPUTarget
    from triton.compiler import ASTSource

    ints, kw = _launch(km, shape, cfg)
    options = {"num_warps": kw.pop("num_warps"), "num_stages": kw.pop("num_stages")}
    fn = km.fa_forward
    names = fn.arg_names
    values = dict(zip(names[4 : 4 + len(ints)], ints, strict=True))
    sig, constexprs, attrs = {}, {}, {}
    for i, a in enumerate(names):
        if a.endswith("_ptr"):
            sig[a], attrs[(i,)] = "*fp16", [["tt.divisibility", 16]]
        elif a in kw:
            sig[a], constexprs[(i,)] = "constexpr", kw[a]
        elif isinstance(values[a], float):
            sig[a] = "fp32"
        elif values[a] == 1:
            sig[a], constexprs[(i,)] = "constexpr", 1
        else:
            sig[a] = "i32"
            if values[a] % 16 == 0:
                attrs[(i,)] = [["tt.divisibility", 16]]
    k = triton.compile(
        ASTSource(fn, sig, constexprs, attrs), target=GPUTarget("cuda", 90, 32), options=options
    )
    tool = Path(triton.__file__).parent / "backends" / "nvidia" / "bin" / "cuobjdump"
    with tempfile.TemporaryDirectory() as d:
        cubin = Path(d) / "k.cubin"
        cubin.write_bytes(k.asm["cubin"])
        usage = subprocess.run([tool, "--dump-resource-usage", cubin], capture_output=True, text=True).stdout
    return {
        "n_regs": int(re.search(r"REG:(\d+)", usage).group(1)),
        "stack": int(re.search(r"STACK:(\d+)", usage).group(1)),
        "shared": int(k.metadata.shared),
        "tma_ops": k.asm["ptx"].count("cp.async.bulk.tensor"),
    }


def _compile_task(task):
    shape, cfg = task
    try:
        return compile_sm90(_load_kernels(), shape, cfg)
    except Exception as exc:  # noqa: BLE001 - reported as a row
        return {"fail": f"{type(exc).__name__}: {str(exc).splitlines()[0][:120] if str(exc) else ''}"}


def compile_plan(path: Path, jobs: int) -> int:
    """Every distinct kernel of the plan at LOADS 0 and 1, built for sm_90 here; a table of its resources."""
    from multiprocessing import Pool

    km = _load_kernels()
    tasks, seen = [], set()
    for r in read_plan(path):
        shape = {f: r[f] for f in FIELDS}
        for loads in LOADS:
            cfg = {**{k: r[k] for k in KNOBS}, "LOADS": loads}
            key = _spec_key(km, shape, cfg)
            if key not in seen:
                seen.add(key)
                tasks.append((shape, cfg))
    t0 = time.time()
    with Pool(jobs) as pool:
        res = pool.map(_compile_task, tasks, chunksize=1)
    by = {}
    for (shape, cfg), r in zip(tasks, res, strict=True):
        by.setdefault((shape["D"], shape["causal"], *(cfg[k] for k in KNOBS)), {})[cfg["LOADS"]] = r
    print(f"{len(tasks)} kernels built for sm_90 in {time.time() - t0:.0f} s ({jobs} processes)")
    print("   D causal  BM  BN st  w O | LOADS 0: regs stack shared | LOADS 1: regs stack shared tma_ops")
    fails = 0
    for key in sorted(by):
        cell = []
        for loads in LOADS:
            r = by[key].get(loads, {})
            if "fail" in r:
                fails += 1
                cell.append(f"fail {r['fail'][:60]}")
            elif r:
                extra = f" {r['tma_ops']:3d}" if loads else ""
                cell.append(f"{r['n_regs']:4d} {r['stack']:5d} {r['shared']:6d}{extra}")
            else:
                cell.append("-")
        print(
            f"{key[0]:4d} {key[1]:6d} {key[2]:3d} {key[3]:3d} {key[4]:2d} {key[5]:2d} {key[6]} | {cell[0]} | {cell[1]}"
        )
    print(f"failed to build: {fails} (a kernel over 232448 bytes of shared memory fails at launch, not here)")
    return 0 if not fails else 1


def run(plan_path: Path, out: Path, deadline_s: float, jobs: int) -> int:
    from bench.gpu.compile_pool import machine_info, precompile_all
    from tiler.ops.flash_attention.triton_runner import vendor_times

    tk = _load_kernels()  # by path, as the compile pool's workers load it: one on-disk cache entry a kernel
    t0 = time.time()
    out.mkdir(parents=True, exist_ok=True)
    print(machine_info(), flush=True)
    todo = read_plan(plan_path)
    tasks, seen, task_of = [], {}, {}
    for i, r in enumerate(todo):
        shape = {**{f: r[f] for f in FIELDS}, "dtype": "fp16"}
        for loads in LOADS:
            cfg = {**{k: r[k] for k in KNOBS}, "LOADS": loads}
            key = _spec_key(tk, shape, cfg)
            if key not in seen:
                seen[key] = len(tasks)
                tasks.append((len(tasks), shape, cfg))
            task_of[(i, loads)] = seen[key]
    stats, compiled = precompile_all(tasks, jobs, t0 + 0.4 * deadline_s, ("fa_kernels", KERNELS))
    print(f"[compile] {stats['done']} built, {stats['failed']} failed, {stats['wall_s']} s", flush=True)
    rows: list[dict] = []
    path = out / "h200_fa_tma.csv"
    shapes = []
    for r in todo:
        s = {f: r[f] for f in FIELDS}
        if s not in shapes:
            shapes.append(s)
    for shape in shapes:
        if time.time() - t0 > deadline_s:
            print(f"deadline: {shape} and later shapes not run", flush=True)
            break
        try:
            ven = vendor_times(shape)
        except Exception as exc:  # noqa: BLE001 - the tilings are still worth timing against each other
            print(f"SDPA failed on {shape}: {type(exc).__name__}: {str(exc)[:120]}", flush=True)
            ven = {"fastest": "failed", "fastest_ms": math.nan, "ms": math.nan}
        base = {**shape, "fastest": ven["fastest"], "fastest_ms": ven["fastest_ms"], "sdpa_ms": ven["ms"]}
        n = 0
        for i, r in enumerate(todo):
            if {f: r[f] for f in FIELDS} != shape:
                continue
            for loads in LOADS if n % 2 == 0 else LOADS[::-1]:  # alternate which goes first
                cfg = {**{k: r[k] for k in KNOBS}, "LOADS": loads}
                try:
                    res = tk.time_config(shape, cfg)
                    ms, err, fail = res["ms"], res["max_abs_err"], ""
                except Exception as exc:  # noqa: BLE001 - a tiling that does not run is a row, not a lost run
                    ms, err, fail = math.nan, math.nan, f"{type(exc).__name__}: {str(exc)[:120]}"
                _, _, resources = compiled.get(task_of[(i, loads)], (None, "", None))
                regs, spills, shared = resources or ("", "", "")
                rows.append({**base, "source": r["source"], "rank": r["rank"], **cfg, "ms": ms, "max_abs_err": err,
                             "fail": fail, "n_regs": regs, "n_spills": spills, "shared": shared})  # fmt: skip
            n += 1
        write_rows(path, rows)
        mine = [x for x in rows if all(x[f] == shape[f] for f in FIELDS)]
        best = {
            lo: min((x["ms"] for x in mine if x["LOADS"] == lo and x["ms"] == x["ms"]), default=math.nan)
            for lo in LOADS
        }
        print(f"[{time.time() - t0:5.0f}s] {shape}: best LOADS 0 {best[0] * 1e3:.1f} us, LOADS 1 {best[1] * 1e3:.1f} us, "
              f"fastest SDPA {ven['fastest']} {ven['fastest_ms'] * 1e3:.1f} us", flush=True)  # fmt: skip
    return report(path)


def report(path: Path) -> int:
    import numpy as np
    import pandas as pd

    from bench.gpu.fa_vs_sdpa import label

    if not path.exists():
        print(f"no {path}")
        return 1
    d = pd.read_csv(path)
    gm = lambda x: float(np.exp(np.mean(np.log(np.asarray(x, dtype=float))))) if len(x) else math.nan  # noqa: E731
    print(f"failed or wrong: {int(d['ms'].isna().sum())} of {len(d)} timings")
    for msg, n in d.loc[d["ms"].isna(), "fail"].fillna("").astype(str).str[:90].value_counts().items():
        print(f"  {n:3d} x {msg}")
    per_shape = []
    for _, s in d.groupby(list(FIELDS), sort=False):
        b0 = s.loc[s["LOADS"] == 0, "ms"].min()
        b1 = s.loc[s["LOADS"] == 1, "ms"].min()
        fast = float(s["fastest_ms"].iloc[0])
        shape = {f: int(s[f].iloc[0]) for f in FIELDS}
        per_shape.append((shape, b0, b1, fast))
        print(f"{label(shape):>32s}  best LOADS 0 {b0 * 1e3:8.1f} us  LOADS 1 {b1 * 1e3:8.1f} us  0/1 {b0 / b1:5.3f}  "
              f"fastest SDPA {s['fastest'].iloc[0]:>20s} {fast * 1e3:8.1f} us  over 0 {fast / b0:5.3f}  over 1 {fast / b1:5.3f}")  # fmt: skip
    ok = [(b0, b1, f) for _, b0, b1, f in per_shape if b0 == b0 and b1 == b1]
    print(f"{len(ok)} shapes, geomean: best LOADS 0 / best LOADS 1 {gm([a / b for a, b, _ in ok]):.3f}; fastest SDPA "
          f"over the best LOADS 0 {gm([f / a for a, _, f in ok]):.3f}, over the best LOADS 1 {gm([f / b for _, b, f in ok]):.3f}, "
          f"over the best of both {gm([f / min(a, b) for a, b, f in ok]):.3f} (above 1: the kernel is faster)")  # fmt: skip
    if "n_regs" in d:  # the compile pool's figures (-1 or empty where Triton did not report them)
        res = d[pd.to_numeric(d["n_regs"], errors="coerce") > 0]
        for lo, g in res.groupby("LOADS"):
            print(f"LOADS {lo}: median registers {g['n_regs'].median():.0f}, kernels that spill "
                  f"{int((g['n_spills'] > 0).sum())} of {len(g)}, median shared {g['shared'].median():.0f} bytes")  # fmt: skip
    wide = d.pivot_table(index=[*FIELDS, *KNOBS], columns="LOADS", values="ms").dropna()
    if not {0, 1} <= set(wide.columns):
        return 0
    ratio = (wide[0] / wide[1]).rename("x")  # above 1: LOADS 1 faster
    for name, part in (("causal", ratio[ratio.index.get_level_values("causal") == 1]),
                       ("not causal", ratio[ratio.index.get_level_values("causal") == 0]), ("all", ratio)):  # fmt: skip
        if len(part):
            wins = part[part > 1]
            print(f"same tiling, {name}: LOADS 1 faster on {len(wins)} of {len(part)} (by {gm(wins):.3f} geomean where "
                  f"it is); LOADS 0 / LOADS 1 geomean {gm(part):.3f}, median {float(part.median()):.3f}, "
                  f"range {float(part.min()):.3f}-{float(part.max()):.3f}")  # fmt: skip
    top1 = d[(d["source"] == "model") & (d["rank"] == 1)].pivot_table(
        index=list(FIELDS), columns="LOADS", values="ms"
    )
    top1 = top1.dropna()
    if len(top1):
        print(
            f"the model's top-1 tiling: LOADS 0 / LOADS 1 geomean {gm(top1[0] / top1[1]):.3f} on {len(top1)} shapes"
        )
    return 0


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    sub = ap.add_subparsers(dest="cmd", required=True)
    sub.add_parser("plan").add_argument("--out", type=Path, default=PLAN)
    c = sub.add_parser("compile")
    c.add_argument("--plan", type=Path, default=PLAN)
    c.add_argument("--jobs", type=int, default=2)
    r = sub.add_parser("run")
    r.add_argument("--plan", type=Path, default=PLAN)
    r.add_argument("--out", type=Path, default=Path(os.environ.get("OUT", "results")))
    r.add_argument("--deadline-s", type=float, default=330.0, help="no new shape starts after this")
    r.add_argument("--jobs", type=int, default=max(1, (os.cpu_count() or 4) - 2), help="compile processes")
    sub.add_parser("report").add_argument("csv", type=Path, nargs="?", default=DATA / "h200_fa_tma.csv")
    a = ap.parse_args(argv)
    if a.cmd == "plan":
        return plan(a.out)
    if a.cmd == "compile":
        return compile_plan(a.plan, a.jobs)
    if a.cmd == "run":
        return run(a.plan, a.out, a.deadline_s, a.jobs)
    return report(a.csv)


if __name__ == "__main__":
    sys.exit(main())
