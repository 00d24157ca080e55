"""Model throughput for issue 15: candidates scored per second per core by `estimate` (and `quick_bound`).

    python -m bench.estimate_rate [--rows 200000] [--repeat 5] [--chips ascend910b3,h200]

For each chip (fp16) and each of 10 LLM linear-layer shapes, a large random table of feasible candidates is
built: every knob not in the operator's RESOLVED drawn uniformly from `load_space(op, family)`'s domains, the
RESOLVED knobs filled by the operator's `resolve()` (as tiler/search/proven.py does), and only rows passing
`get_operator(...).masks(...)` kept. Then `model.estimate(problem, chip, cands)` is timed (median of `repeat`
calls, one process; BLAS/OpenMP threads pinned to 1 before numpy is imported, so the rate is per core). The
first call per shape is a warm-up and is not counted (the schedule and L2 hit-rate tables the models keep per
problem, grid and chip stay warm, as they would in a search). The issue's target: >= 2 million candidates/s per
core on 910B3 and H200. A bench reports; it asserts nothing.
"""

from __future__ import annotations

import os

for _v in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS", "NUMEXPR_NUM_THREADS"):
    os.environ[_v] = "1"

import argparse  # noqa: E402
import statistics  # noqa: E402
import sys  # noqa: E402
import time  # noqa: E402

import numpy as np  # noqa: E402

from tiler.hardware import load_chip  # noqa: E402
from tiler.operator import get_operator  # noqa: E402
from tiler.problem import parse_problem  # noqa: E402
from tiler.space import length, load_space, take  # noqa: E402

TARGET = 2e6
# (label, M, N, K): Llama-3-8B / 70B and Qwen2.5-7B projections at decode and prefill sizes
SHAPES = [
    ("l3-8b qkv M=1", 1, 6144, 4096),
    ("l3-8b o M=16", 16, 4096, 4096),
    ("l3-8b gate M=128", 128, 14336, 4096),
    ("l3-8b down M=512", 512, 4096, 14336),
    ("l3-8b qkv M=2048", 2048, 6144, 4096),
    ("l3-70b o M=2048", 2048, 8192, 8192),
    ("l3-70b gate M=8192", 8192, 28672, 8192),
    ("l3-70b down M=16", 16, 8192, 28672),
    ("qwen-7b qkv M=4096", 4096, 4608, 3584),
    ("qwen-7b down M=1024", 1024, 3584, 18944),
]


def feasible_table(p, chip, space, model, rows: int, seed: int):
    """About `rows` random feasible candidates (fewer if the space is very tight)."""
    rng = np.random.default_rng(seed)
    resolved = [k for k in model.RESOLVED if k in space.knobs]
    free = [k for k in space.names if k not in resolved]
    pieces, have, draw = [], 0, rows
    for _ in range(40):
        c = {k: rng.choice(np.array(space.knobs[k].values, dtype=np.int64), size=draw) for k in free}
        if resolved:
            c = model.resolve(p, chip, c, space.domains(resolved))
        ok = np.ones(length(c), dtype=bool)
        for m in model.masks(p, chip, c).values():
            ok &= np.broadcast_to(m, ok.shape)
        c = take(c, ok)
        pieces.append(c)
        have += length(c)
        if have >= rows:
            break
        rate = max(have / (draw * len(pieces)), 1e-3)
        draw = int(min(8 * rows, (rows - have) / rate * 1.2 + 1000))
    table = {k: np.concatenate([pc[k] for pc in pieces]) for k in pieces[0]}
    return take(table, slice(0, rows))


def timed(fn, repeat: int) -> float:
    fn()  # warm-up
    ts = []
    for _ in range(repeat):
        t = time.perf_counter()
        fn()
        ts.append(time.perf_counter() - t)
    return statistics.median(ts)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rows", type=int, default=200_000, help="feasible candidates per shape")
    ap.add_argument("--repeat", type=int, default=5)
    ap.add_argument("--chips", default="ascend910b3,h200")
    args = ap.parse_args(argv)
    print(
        f"model throughput: matmul fp16, {len(SHAPES)} shapes, ~{args.rows:,} random feasible candidates each, "
        f"median of {args.repeat}, one process, BLAS threads 1, {os.cpu_count()} CPUs, "
        f"load {os.getloadavg()[0]:.1f}"
    )
    summary = []
    for chip_id in args.chips.split(","):
        chip = load_chip(chip_id)
        model = get_operator("matmul", chip.family)
        space = load_space("matmul", chip.family)
        print(f"== {chip_id} ({chip.family}) ==")
        n_tot = t_est = t_qb = 0.0
        rates = []
        for i, (label, m, n, k) in enumerate(SHAPES):
            p = parse_problem("matmul", {"M": m, "N": n, "K": k}, dtype="fp16")
            cands = feasible_table(p, chip, space, model, args.rows, seed=i)
            rows = length(cands)
            te = timed(lambda p=p, cands=cands: model.estimate(p, chip, cands), args.repeat)  # noqa: B023
            tq = timed(lambda p=p, cands=cands: model.quick_bound(p, chip, cands), args.repeat)  # noqa: B023
            n_tot, t_est, t_qb = n_tot + rows, t_est + te, t_qb + tq
            rates.append(rows / te)
            print(
                f"  {label:22} {rows:>9,} cands  estimate {rows / te / 1e6:6.3f} M/s ({te:6.3f} s)"
                f"  quick_bound {rows / tq / 1e6:7.2f} M/s"
            )
        agg, med = n_tot / t_est, statistics.median(rates)
        print(
            f"  {chip_id}: estimate {agg / 1e6:.3f} M cands/s overall (median per shape {med / 1e6:.3f} M/s, "
            f"min {min(rates) / 1e6:.3f}); ratio to 2 M/s target: {agg / TARGET:.3f}; "
            f"quick_bound {n_tot / t_qb / 1e6:.2f} M/s"
        )
        summary.append((chip_id, agg, med, n_tot / t_qb))
    print("== summary (target >= 2,000,000 candidates/s per core) ==")
    for chip_id, agg, _med, qb in summary:
        print(
            f"  {chip_id:12} estimate {agg:>12,.0f}/s  ratio {agg / TARGET:.3f}  "
            f"({'met' if agg >= TARGET else 'NOT met'})   quick_bound {qb:>13,.0f}/s"
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
