"""Issue 16's shape classes on the H200: the shapes, the tilings to measure, and the figures on the held-out third.

Four classes of 6 fp16 GEMMs, none measured before (bench/data/README.md, "Shape classes"):
  misaligned   a dimension that is not a multiple of 16 (Triton then cannot prove 16-element strides or bounds)
  tall_skinny  N <= 64 with M in the tens of thousands and a small K
  mid_m        M of a few hundred to a thousand with large N and K
  llm          ordinary LLM linear layers (prefill, decode, GQA projections)
The held-out third (two per class, the 2nd and 5th of each list, fixed before anything was measured) is never
used for fitting: tiler calibrate gets only the other 16 (see FIT_SHAPES / HELD_OUT).

    python -m bench.shape_classes candidates --out bench/data/gpu_run10_candidates.csv
        the tilings to measure beside the fixed grid: the model's plain top-8 and diverse top-8, NVIDIA's top-4
        (bench/nvidia_picks.py; needs the `peers` extra) and 24 random feasible tilings of the whole space
    python -m bench.shape_classes fit-contenders --out bench/data/gpu_run15_candidates.csv
        run 15's tilings: run 13's contenders of the 16 fitted shapes, to time in the power-capped steady state
    python -m bench.shape_classes eval [--data FILE.csv ...]
        the acceptance figures on the held-out shapes from the measured file(s): single pass (runs 10-12), head to
        head in bursts (run 13), the contenders in the power-capped steady state (held out: run 14; fitted: run 15),
        head to head again on a fresh lease with the session-11 model's picks among the contenders (run 17), and
        the held-out shapes' run-17 tilings in the steady state (run 18)
"""

from __future__ import annotations

import argparse
import csv
import sys
from pathlib import Path

import numpy as np
import pandas as pd

ROOT = Path(__file__).resolve().parent.parent

CLASSES = {
    "misaligned": [
        "3000x1000x1000",
        "777x4096x4096",
        "2000x3000x1500",
        "1200x1200x4100",
        "4000x2500x1000",
        "6000x6000x1000",
    ],
    "tall_skinny": [
        "32768x64x256",
        "65536x32x128",
        "16384x64x512",
        "32768x48x768",
        "50000x64x1024",
        "131072x16x64",
    ],
    "mid_m": [
        "384x8192x8192",
        "512x14336x4096",
        "768x11008x4096",
        "640x12288x5120",
        "896x16384x4096",
        "320x28672x8192",
    ],
    "llm": [
        "4096x12288x4096",
        "2048x4096x11008",
        "8192x1024x4096",
        "8x4096x4096",
        "4096x28672x8192",
        "2048x2048x2048",
    ],
}
HELD_OUT = {s for shapes in CLASSES.values() for s in (shapes[1], shapes[4])}
FIT_SHAPES = [s for shapes in CLASSES.values() for s in shapes if s not in HELD_OUT]
CLASS_OF = {s: c for c, shapes in CLASSES.items() for s in shapes}
KNOBS = ("BLOCK_M", "BLOCK_N", "BLOCK_K", "num_stages", "num_warps", "GROUP_M", "ORDER", "SPLIT_K")
RANDOM_PER_SHAPE = 24


def dims(s: str) -> tuple[int, int, int]:
    M, N, K = (int(x) for x in s.split("x"))
    return M, N, K


def candidates(
    out: str, seed: int = 16, picks_only: bool = False, source_tag: str = "", chip_id: str = "h200"
) -> None:
    """Write the tilings to measure (columns M,N,K,KNOBS,source,model_rank,predicted_us). `picks_only`: the
    model's plain and diverse top-8 alone (a re-fitted profile's picks, to measure after a fit)."""
    from bench.estimate_rate import feasible_table
    from bench.nvidia_picks import nvidia_top
    from tiler.hardware import load_chip
    from tiler.operator import get_operator
    from tiler.problem import parse_problem
    from tiler.search import search
    from tiler.space import load_space

    chip = load_chip(chip_id)
    space = load_space("matmul", chip.family)
    model = get_operator("matmul", chip.family)
    rows = []
    for i, s in enumerate(CLASS_OF):
        M, N, K = dims(s)
        p = parse_problem("matmul", {"M": M, "N": N, "K": K})
        for source, diverse in ((f"model_plain{source_tag}", False), (f"model_diverse{source_tag}", True)):
            res = search(p, chip, space, top=8, diverse=diverse)
            for r in range(len(res.est["time_us"])):
                knobs = [int(res.cands[k][r]) for k in KNOBS]
                rows.append([M, N, K, *knobs, source, r + 1, round(float(res.est["time_us"][r]), 3)])
        if picks_only:
            continue
        for r, pk in enumerate(nvidia_top(M, N, K, 4)):
            rows.append([M, N, K, *(pk[k] for k in KNOBS), "peer", r + 1, round(pk["predicted_us"], 3)])
        rnd = feasible_table(p, chip, space, model, RANDOM_PER_SHAPE, seed + i)
        t = model.estimate(p, chip, rnd)["time_us"]
        for r in range(len(t)):
            rows.append([M, N, K, *(int(rnd[k][r]) for k in KNOBS), "random", "", round(float(t[r]), 3)])
        print(f"{s:>16} {CLASS_OF[s]:<11} {'held out' if s in HELD_OUT else 'fit'}", file=sys.stderr)
    with open(out, "w", newline="") as f:
        w = csv.writer(f)
        w.writerow(["M", "N", "K", *KNOBS, "source", "model_rank", "predicted_us"])
        w.writerows(rows)
    print(f"{len(rows)} rows -> {out}", file=sys.stderr)


def model_orders(p, chip, space, k: int) -> dict[str, dict]:
    """The model's plain and diverse top-`k` of problem `p`, and the top-`k` of the diverse rule shipped in
    session 10 (`runnerup`: the best tile's runner-up 4th, no pipeline-depth hedge), each as candidate columns."""
    from tiler.operator import get_operator
    from tiler.search import DIVERSE_FACTOR, diverse_order, search
    from tiler.space import take

    plain = search(p, chip, space, top=DIVERSE_FACTOR * k, diverse=False)
    knobs = get_operator("matmul", chip.family).SHAPE_KNOBS
    old = diverse_order(plain.cands, plain.est["time_us"], knobs)[0][:k]
    return {
        "plain": take(plain.cands, np.arange(k)),
        "diverse": search(p, chip, space, top=k, diverse=True).cands,
        "runnerup": take(plain.cands, old),
    }


def fit_contenders(out: str) -> None:
    """Write run 15's tilings: run 13's contenders (gpu_run13{a,b}_candidates.csv) of the FIT_SHAPES only."""
    cands = pd.concat([pd.read_csv(ROOT / "bench" / "data" / f"gpu_run13{x}_candidates.csv") for x in "ab"])
    shape = cands.M.astype(str) + "x" + cands.N.astype(str) + "x" + cands.K.astype(str)
    cands[shape.isin(FIT_SHAPES)].to_csv(out, index=False)


DATA = [
    ROOT / "bench" / "data" / f
    for f in (
        "h200_matmul_run10a.csv",
        "h200_matmul_run10b.csv",
        "h200_matmul_run11.csv",
        "h200_matmul_run12.csv",
    )
]
# run 13: the contenders of each shape (its 10 best tilings of runs 10-12, the model's plain top-8 and diverse
# picks, NVIDIA's top-4) re-measured head to head: 5 interleaved rounds on one machine, median per tiling
HEAD_TO_HEAD = [ROOT / "bench" / "data" / f for f in ("h200_matmul_run13a.csv", "h200_matmul_run13b.csv")]
# run 13's contenders again in the board's power-capped steady state (do_bench 600 ms after a 300-ms warm-up per
# tiling, 2 interleaved rounds; SM clock about 1500 MHz above 600 W, against 1980 in bursts): the held-out shapes in
# run 14, the fitted ones in run 15 (a and b: one lease, two calls)
STEADY = [
    ROOT / "bench" / "data" / f
    for f in ("h200_matmul_run14.csv", "h200_matmul_run15a.csv", "h200_matmul_run15b.csv")
]
# run 13's contenders plus every pick of the session-11 model (plain and diverse top-8, session 10's order's top-4)
# head to head again: 5 interleaved rounds on a fresh lease (a: the held-out shapes, b: the fitted ones)
RERUN = [ROOT / "bench" / "data" / f for f in ("h200_matmul_run17a.csv", "h200_matmul_run17b.csv")]
# run 17a's tilings (the held-out shapes) again in the power-capped steady state, run 14's protocol, a fresh lease
RERUN_STEADY = [ROOT / "bench" / "data" / "h200_matmul_run18.csv"]


def _time_of(d, cfg: dict) -> float:
    """The measured time (ms) of one tiling of a shape's rows `d`, NaN if it was not measured."""
    hit = np.logical_and.reduce([d[k].to_numpy() == int(cfg[k]) for k in KNOBS])
    return float(d.loc[hit, "ms"].min()) if hit.any() else float("nan")


def evaluate(files: list[Path], chip_id: str = "h200", peer_files: list[Path] = DATA) -> pd.DataFrame:
    """Per shape: best measured / measured time of the model's top-1, of the best of its plain and diverse top-4
    (and of session 10's diverse rule, `runnerup4`), and of NVIDIA's top-1 and top-4 (source=peer of
    `peer_files`, in rank order), with cuBLAS; `reach` (`reach_runnerup`) is how many of the diverse order's tilings
    it takes to come within 0.99 of the best (NaN: not within 4)."""
    from bench.fidelity import merge_measured
    from tiler.hardware import load_chip
    from tiler.problem import parse_problem
    from tiler.space import load_space

    chip = load_chip(chip_id)
    space = load_space("matmul", chip.family)
    frames = [(f.name, pd.read_csv(f)) for f in files]
    measured = merge_measured(frames)
    raw = pd.concat([d for _, d in frames])
    peers = pd.concat([pd.read_csv(f) for f in peer_files])
    peers = peers[peers.source == "peer"]
    rows = []
    for s, cls in CLASS_OF.items():
        M, N, K = dims(s)
        d = measured[(measured.M == M) & (measured.N == N) & (measured.K == K)]
        if not len(d):
            continue
        best = float(d["ms"].min())
        p = parse_problem("matmul", {"M": M, "N": N, "K": K})
        picks = model_orders(p, chip, space, 4)
        tp, td, tdist = (
            [_time_of(d, {k: c[k][i] for k in KNOBS}) for i in range(len(c[KNOBS[0]]))]
            for c in picks.values()
        )
        r = raw[(raw.M == M) & (raw.N == N) & (raw.K == K)]
        peer = peers[(peers.M == M) & (peers.N == N) & (peers.K == K)].drop_duplicates(KNOBS)
        tpeer = [_time_of(d, row) for _, row in peer.head(4).iterrows()]
        cub = r.loc[r.impl == "torch", "ms"]
        within = [i + 1 for i, t in enumerate(td) if best / t >= 0.99]
        within_d = [i + 1 for i, t in enumerate(tdist) if best / t >= 0.99]
        rows.append(
            {
                "shape": s,
                "class": cls,
                "held_out": s in HELD_OUT,
                "best_ms": best,
                "top1": best / tp[0],
                "plain4": best / np.nanmin(tp),
                "diverse4": best / np.nanmin(td),
                "reach": within[0] if within else np.nan,
                "runnerup4": best / np.nanmin(tdist),
                "reach_runnerup": within_d[0] if within_d else np.nan,
                "unmeasured": int(np.isnan(tp).sum() + np.isnan(td).sum() + np.isnan(tdist).sum()),
                "peer1": best / tpeer[0] if tpeer else np.nan,
                "peer4": best / np.nanmin(tpeer) if np.isfinite(tpeer).any() else np.nan,
                "cublas": best / float(cub.median()) if len(cub) else np.nan,
                "pick": " ".join(str(int(picks["plain"][k][0])) for k in KNOBS),
            }
        )
    return pd.DataFrame(rows)


def _geo(x) -> float:
    x = np.asarray(x, dtype=float)
    x = x[~np.isnan(x)]
    return float(np.exp(np.log(x).mean())) if len(x) else float("nan")


def report(res: pd.DataFrame) -> str:
    cols = ["top1", "plain4", "diverse4", "runnerup4", "peer1", "peer4", "cublas"]
    lines = [res.drop(columns=["pick"]).to_string(index=False, float_format=lambda v: f"{v:.3f}"), ""]
    lines.append("geomean (min) of best measured / measured; cublas = best Triton / cuBLAS")
    for label, g in (("held out", res[res.held_out]), ("fitted", res[~res.held_out]), ("all", res)):
        if not len(g):
            continue
        parts = [f"{c} {_geo(g[c]):.3f} ({np.nanmin(g[c]):.3f})" for c in cols]
        reach, reach_d = int((g["reach"] <= 4).sum()), int((g["reach_runnerup"] <= 4).sum())
        lines.append(
            f"{label:>9} ({len(g)}): "
            + ", ".join(parts)
            + f"; 0.99 within 4: diverse {reach}/{len(g)}, runner-up (session 10) {reach_d}/{len(g)}"
        )
    for cls in CLASSES:
        g = res[res["class"] == cls]
        lines.append(
            f"{cls:>12}: top1 {_geo(g.top1):.3f} (min {np.nanmin(g.top1):.3f}), diverse4 {_geo(g.diverse4):.3f}"
        )
    h = res[res.held_out]
    if len(h):
        t1, d4, reach = _geo(h.top1), _geo(h.diverse4), int((h["reach"] <= 4).sum())
        lines.append(
            f"targets on the held-out shapes: top-1 {t1:.3f} / 0.95 = {t1 / 0.95:.3f}, min {h.top1.min():.3f} / 0.85,"
            f" diverse best-of-4 {d4:.3f} / 0.98 = {d4 / 0.98:.3f}, 0.99 within 4 on {reach}/{len(h)}"
            f" (target {int(np.ceil(5 * len(h) / 6))}/{len(h)})"
        )
    return "\n".join(lines)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    sub = ap.add_subparsers(dest="cmd", required=True)
    c = sub.add_parser("candidates")
    c.add_argument("--out", required=True)
    c.add_argument("--seed", type=int, default=16)
    c.add_argument("--picks-only", action="store_true", help="only the model's plain and diverse top-8")
    c.add_argument("--tag", default="", help="appended to the model sources, e.g. _v6")
    c.add_argument("--chip", default="h200", help="profile id or .toml path (e.g. a re-fit not yet shipped)")
    r = sub.add_parser("fit-contenders")
    r.add_argument("--out", required=True)
    e = sub.add_parser("eval")
    e.add_argument("--data", nargs="+", type=Path, default=DATA, help="single-pass measurements (runs 10-12)")
    e.add_argument(
        "--head-to-head",
        nargs="*",
        type=Path,
        default=HEAD_TO_HEAD,
        help="re-measured contenders (run 13), reported apart; none: skip",
    )
    e.add_argument(
        "--steady",
        nargs="*",
        type=Path,
        default=STEADY,
        help="the steady-state run (run 14), reported apart; none: skip",
    )
    e.add_argument(
        "--rerun",
        nargs="*",
        type=Path,
        default=RERUN,
        help="the contenders and the current picks head to head on a fresh lease (run 17); none: skip",
    )
    e.add_argument(
        "--rerun-steady",
        nargs="*",
        type=Path,
        default=RERUN_STEADY,
        help="the held-out shapes' tilings of run 17 in the steady state (run 18); none: skip",
    )
    e.add_argument("--chip", default="h200", help="profile id or .toml path (e.g. a re-fit not yet shipped)")
    a = ap.parse_args(argv)
    if a.cmd == "candidates":
        candidates(a.out, a.seed, a.picks_only, a.tag, a.chip)
    elif a.cmd == "fit-contenders":
        fit_contenders(a.out)
    else:
        sets = [
            ("single-pass measurements", a.data),
            ("head to head, 5 interleaved rounds on one machine", a.head_to_head),
            (
                "power-capped steady state, run 13's contenders, 2 interleaved rounds (held out: run 14; fit: run 15)",
                a.steady,
            ),
            (
                "head to head again, 5 interleaved rounds on a fresh lease, the session-11 picks among the contenders",
                a.rerun,
            ),
            (
                "the same held-out tilings in the power-capped steady state, 2 interleaved rounds, a fresh lease",
                a.rerun_steady,
            ),
        ]
        for i, (title, files) in enumerate((t, f) for t, f in sets if f):
            print(("\n" if i else "") + f"== {title}: " + ", ".join(f.name for f in files))
            print(report(evaluate(files, a.chip)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
