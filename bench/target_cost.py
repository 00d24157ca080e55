"""What each export target's limits cost: best predicted time of a target-expressible tiling over the best one.

    python -m bench.target_cost [--chips ascend910b3,ascend910b4,h200] [--all] [--layout nt] [--dtype fp16]
                                 [--no-ablate] [--out bench/data/target_cost.csv]

For 30 linear-layer GEMMs of three LLMs (examples/shapes/{llama3_8b,llama3_70b,qwen2_5_7b}.csv, their sources in
examples/shapes/README.md; --all: every distinct GEMM of the three files, 96) and every chip, an exhaustive
(proven) search of the whole space (`any`) and of each target's subspace (`Space.for_target(t)`, whose search also
applies the target's rules): catlass and ascendc on the ascend family, triton on cuda. The weight GEMMs are
`x · Wᵀ` with W an nn.Linear weight stored N x K, so by default the problem is layout=nt (B transposed), fp16.

Per (chip, shape, target): ratio = best(target) / best(any), both model predictions (time_us), never
measurements. A target's space is a subset of the whole, so ratio >= 1 (a ratio below 1 - 1e-9 is a bug and is
flagged). Prints a table per chip; then per (chip, target): geomean, min and max ratio, how many shapes cost
nothing (ratio == 1) and how often the unconstrained best tiling is itself expressible by the target, which
domains and rules the unconstrained best breaks (counted over shapes), the cost split (unless --no-ablate: the
target's domains alone, without its rules, then the rules' factor on top; and each domain knob alone, the rest of
the space whole), and the knobs that differ in the worst case; the elapsed seconds of the run (about 70 s on two
cores; 20 s with --no-ablate). Writes one CSV row per (chip, shape, target) to --out.
"""

from __future__ import annotations

import argparse
import time
from collections import Counter
from dataclasses import replace
from pathlib import Path

import numpy as np
import pandas as pd

ROOT = Path(__file__).resolve().parents[1]

from tiler.hardware import load_chip  # noqa: E402
from tiler.operator import get_operator  # noqa: E402
from tiler.problem import parse_problem  # noqa: E402
from tiler.search import search  # noqa: E402
from tiler.space import load_space  # noqa: E402

SHAPES = ROOT / "examples" / "shapes"
MODELS = {"llama3_8b": "Llama-3-8B", "llama3_70b": "Llama-3-70B", "qwen2_5_7b": "Qwen2.5-7B"}
# the shape files' linears (tiler shapes: q/k/v and gate/up fused as vLLM and Megatron run them)
LAYERS = ("layers.qkv_proj", "layers.o_proj", "layers.gate_up_proj", "layers.down_proj")
# 30 shapes: each model's four GEMMs at M = 16 (decode, 16 sequences) and M = 2048 (a prefill chunk): 24; plus
# batch-1 decode (M = 1) for one layer of each model and three more prefill sizes (128, 512, 8192 tokens): 6.
EXTRA = (
    ("llama3_8b", "layers.qkv_proj", 1),
    ("llama3_70b", "layers.gate_up_proj", 1),
    ("qwen2_5_7b", "layers.down_proj", 1),
    ("qwen2_5_7b", "layers.qkv_proj", 128),
    ("llama3_70b", "layers.o_proj", 512),
    ("llama3_8b", "layers.gate_up_proj", 8192),
)
DEFAULT = tuple((f, layer, m) for f in MODELS for m in (16, 2048) for layer in LAYERS) + EXTRA
EPS = 1e-9


def load_shapes(every: bool) -> list[dict]:
    """The selected GEMMs as dicts (model, layer, M, N, K), N and K read from the shape files."""
    out = []
    for f in MODELS:
        d = pd.read_csv(SHAPES / f"{f}.csv")
        d = d[d["name"].isin(LAYERS)]
        for _, r in d.iterrows():
            if every or (f, r["name"], int(r["M"])) in DEFAULT:
                name = r["name"].removeprefix("layers.")
                out.append(
                    {"model": MODELS[f], "layer": name, "M": int(r["M"]), "N": int(r["N"]), "K": int(r["K"])}
                )
    if not every:
        assert len(out) == len(DEFAULT) == 30, len(out)
    return out


def breaks(op, space, target_space, p, chip, cand) -> list[str]:
    """What the (one-row) candidate breaks of a target: knob values outside its domains, then its failed rules."""
    out = []
    for k, kn in target_space.knobs.items():
        v = int(cand[k][0])
        if v not in kn.values:
            out.append(f"{k}={space.knobs[k].label(v)}")
    for rule, m in op.masks(p, chip, cand).items():
        if not bool(np.asarray(m)[0]):
            out.append(rule)
    return out


def fmt_tiling(t: dict) -> str:
    return " ".join(f"{k}={v}" for k, v in t.items())


def diff(a: dict, b: dict) -> str:
    """Knobs whose values differ, as any->target."""
    return " ".join(f"{k}={a[k]}->{b[k]}" for k in a if a[k] != b[k]) or "(same)"


def cut(space, target_space, knobs):
    """The whole space (target `any`: no target rule) with the named knobs cut to the target's domain."""
    return replace(
        space, knobs={k: target_space.knobs[k] if k in knobs else kn for k, kn in space.knobs.items()}
    )


def run_chip(chip_id: str, shapes: list[dict], dtype: str, layout: str, ablate: bool) -> list[dict]:
    chip = load_chip(chip_id)
    space = load_space("matmul", chip.family)
    targets = list(get_operator("matmul", chip.family).TARGETS)
    rows = []
    for s in shapes:
        p = parse_problem("matmul", {"M": s["M"], "N": s["N"], "K": s["K"], "layout": layout}, dtype)
        t0 = time.perf_counter()
        r_any = search(p, chip, space, top=1)
        base = {"chip": chip_id, **s, "layout": layout, "dtype": dtype}
        any_us = r_any.row(0)["time_us"]
        any_t = r_any.tiling(0)
        any_cand = {k: v[:1] for k, v in r_any.cands.items()}
        rows.append(
            {
                **base,
                "target": "any",
                "best_us": any_us,
                "any_us": any_us,
                "ratio": 1.0,
                "any_best_expressible": True,
                "any_best_breaks": "",
                "domains_ratio": 1.0,
                "rules_factor": 1.0,
                "single_domain_ratios": "",
                "bound": r_any.row(0).get("bound", ""),
                "proven": r_any.proven_optimal,
                "search_s": time.perf_counter() - t0,
                "diff_from_any": "",
                "tiling": fmt_tiling(any_t),
            }
        )
        for t in targets:
            op = get_operator("matmul", chip.family, t)
            why = op.target.why_not(chip, p)
            if why:
                print(f"  {chip_id} {t}: skipped ({why})")
                continue
            tsp = space.for_target(t)
            t0 = time.perf_counter()
            r = search(p, chip, tsp, top=1)
            us = r.row(0)["time_us"]
            proven = r.proven_optimal
            br = breaks(op, space, tsp, p, chip, any_cand)
            # the cost of the target's domains alone (no target rule), and of each domain knob alone
            cut_knobs = [k for k in tsp.knobs if tsp.knobs[k].values != space.knobs[k].values]
            dom_us, singles = us, []
            if ablate and cut_knobs:
                rd = search(p, chip, cut(space, tsp, cut_knobs), top=1)
                dom_us, proven = rd.row(0)["time_us"], proven and rd.proven_optimal
                for k in cut_knobs:
                    rk = search(p, chip, cut(space, tsp, [k]), top=1)
                    proven = proven and rk.proven_optimal
                    singles.append(f"{k}:{rk.row(0)['time_us'] / any_us:.6f}")
            rows.append(
                {
                    **base,
                    "target": t,
                    "best_us": us,
                    "any_us": any_us,
                    "ratio": us / any_us,
                    "any_best_expressible": not br,
                    "any_best_breaks": " ".join(br),
                    "domains_ratio": dom_us / any_us,
                    "rules_factor": us / dom_us,
                    "single_domain_ratios": " ".join(singles),
                    "bound": r.row(0).get("bound", ""),
                    "proven": proven,
                    "search_s": time.perf_counter() - t0,
                    "diff_from_any": diff(any_t, r.tiling(0)),
                    "tiling": fmt_tiling(r.tiling(0)),
                }
            )
    return rows


def geomean(x) -> float:
    return float(np.exp(np.log(np.asarray(x, dtype=float)).mean()))


def report(df: pd.DataFrame, space_note: dict[str, str]) -> int:
    """Prints the tables and summaries; returns the number of ratios below 1 (bugs)."""
    bugs = 0
    for chip_id, d in df.groupby("chip", sort=False):
        wide = d.pivot_table(
            index=["model", "layer", "M", "N", "K", "any_us"], columns="target", values="ratio", sort=False
        ).reset_index()
        cols = [c for c in wide.columns if c != "any"]
        print(f"\n== {chip_id} ({d['dtype'].iat[0]}, layout={d['layout'].iat[0]}): best(target) / best(any)")
        print(wide[cols].to_string(index=False, float_format=lambda v: f"{v:.4f}"))
        if chip_id in space_note:
            print(space_note[chip_id])
        for t, dt in d[d["target"] != "any"].groupby("target", sort=False):
            rat = dt["ratio"].to_numpy()
            low = dt[(dt["ratio"] < 1 - EPS) | (dt["rules_factor"] < 1 - EPS)]
            bugs += len(low)
            for _, r in low.iterrows():
                print(
                    f"  BUG: {chip_id} {t} {r['model']} {r['layer']} M={r['M']} N={r['N']} K={r['K']}: ratio "
                    f"{r['ratio']:.12f}, rules factor {r['rules_factor']:.12f} (both must be >= 1)"
                )
            free = dt["ratio"] <= 1 + EPS
            expr = int(dt["any_best_expressible"].sum())
            print(
                f"  {t}: geomean {geomean(rat):.4f}, min {rat.min():.4f}, max {rat.max():.4f} over {len(dt)} "
                f"shapes; ratio == 1 on {int(free.sum())}/{len(dt)}; any's reported best tiling itself "
                f"expressible on {expr}/{len(dt)}"
            )
            tied = dt[free & ~dt["any_best_expressible"]]
            if len(tied):
                knobs = Counter(x.split("=")[0] for s in tied["diff_from_any"] for x in s.split())
                print(
                    f"    on {len(tied)} shape(s) any's best is not expressible but an expressible tiling predicts "
                    "exactly the same time (a model tie: the search reports one of them), differing in "
                    + ", ".join(f"{k} ({n})" for k, n in knobs.most_common())
                )
            costly = dt[~free]
            causes = Counter(x for s in costly["any_best_breaks"] for x in s.split())
            if causes:
                print(
                    f"    what any's best breaks, on the {len(costly)} shapes where {t} costs: "
                    + ", ".join(f"{k} {n}" for k, n in causes.most_common())
                )
            singles = [
                dict((kv.split(":")[0], float(kv.split(":")[1])) for kv in s.split())
                for s in dt["single_domain_ratios"]
            ]
            if any(singles):
                dom, rules = dt["domains_ratio"].to_numpy(), dt["rules_factor"].to_numpy()
                print(
                    f"    split: domains alone {geomean(dom):.4f} (max {dom.max():.4f}), then the rules "
                    f"x{geomean(rules):.4f} (max {rules.max():.4f}); one domain knob alone, geomean (max, shapes > 1):"
                )
                for k in singles[0]:
                    v = np.array([s[k] for s in singles])
                    print(f"      {k:18s} {geomean(v):.4f} ({v.max():.4f}, {int((v > 1 + EPS).sum())})")
            w = dt.loc[dt["ratio"].idxmax()]
            print(
                f"    worst: {w['model']} {w['layer']} M={w['M']} N={w['N']} K={w['K']}: {w['any_us']:.2f} -> "
                f"{w['best_us']:.2f} us ({w['ratio']:.4f}); any's best breaks: {w['any_best_breaks'] or '-'}"
            )
            print(f"    knobs any -> {t}: {w['diff_from_any']}")
    return bugs


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--chips", default="ascend910b3,ascend910b4,h200")
    ap.add_argument("--all", action="store_true", help="every distinct GEMM of the three shape files (96)")
    ap.add_argument("--layout", default="nt", choices=("nn", "nt"), help="nt: B = Wᵀ of an nn.Linear weight")
    ap.add_argument("--dtype", default="fp16")
    ap.add_argument(
        "--no-ablate",
        action="store_true",
        help="skip the searches that split the cost by domain knob and rules",
    )
    ap.add_argument("--out", default=str(ROOT / "bench" / "data" / "target_cost.csv"))
    args = ap.parse_args(argv)
    shapes = load_shapes(args.all)
    print(
        f"{len(shapes)} LLM GEMMs, {args.dtype}, layout={args.layout} "
        f"({'B = Wᵀ, the weight stored N x K as nn.Linear keeps it' if args.layout == 'nt' else 'both row-major'})"
    )
    t_start = time.perf_counter()
    rows, notes, times = [], {}, {}
    for chip_id in args.chips.split(","):
        t0 = time.perf_counter()
        rows += run_chip(chip_id, shapes, args.dtype, args.layout, not args.no_ablate)
        times[chip_id] = time.perf_counter() - t0
        chip = load_chip(chip_id)
        if chip.family == "cuda":
            sp = load_space("matmul", "cuda")
            ops = {t: get_operator("matmul", "cuda", t) for t in get_operator("matmul", "cuda").TARGETS}
            same = all(
                sp.for_target(t).domains() == sp.domains() and not op.target.rules and not op.target.domains
                for t, op in ops.items()
            )
            if same:
                notes[chip_id] = (
                    f"  ({', '.join(ops)}: no domain and no rule: the cuda space *is* the project's Triton "
                    "kernel's knobs, so for_target gives the whole space and the ratio is 1 by construction)"
                )
    elapsed = time.perf_counter() - t_start
    df = pd.DataFrame(rows)
    pd.set_option("display.width", 250)
    bugs = report(df, notes)
    Path(args.out).parent.mkdir(parents=True, exist_ok=True)
    df.to_csv(args.out, index=False, float_format="%.8g")
    print(
        f"\nelapsed {elapsed:.1f} s ("
        + ", ".join(f"{c} {s:.1f} s" for c, s in times.items())
        + f"), {len(df)} rows -> {args.out}; ratios below 1: {bugs}"
    )
    return 1 if bugs else 0


if __name__ == "__main__":
    raise SystemExit(main())
