"""Search cost against problem size: exhaustive proven search on every shipped chip, every operator, problem
sizes from tiny to 2^20 per dimension (2^24 rows for softmax); the worst time and the peak memory per chip.

    python -m bench.search_scaling [--chips a,b] [--ops matmul,softmax] [--sizes quick|full] [--cells]
                                    [--shape M=65536,N=65536,K=65536 --ops matmul] [--compare DIR]

Each (chip, operator) runs in a fresh subprocess that searches its cells one after another (imports first, then
`tiler.search.search(..., top=1)`, the exhaustive search with its optimum proven) and reports each cell's wall time
and the process's peak resident memory so far (resource.getrusage: ru_maxrss). The peak printed for a chip is the
largest over its subprocesses: it bounds every cell's own peak (imports and the interpreter included). A cell
with no feasible tiling or refused as input (one line, exit 2 in the CLI: e.g. a tensor over the documented
limits) is counted as refused, not timed. Each cell also reports its process CPU time (on a shared machine the
wall time moves with the load; the CPU time much less). `--compare DIR` runs the same cells with the tiler of
another checkout and checks the best tiling and time are the same (bit for bit, or the same tiling with the time
within 1e-12: the estimate sums over the work columns its batch uses, so a row scored in another batch can differ
in its last bits). Targets (issue 33): worst cell <= 1 s and peak <= 300 MB on every chip. Exit code 1 when a
chip misses one.
"""

from __future__ import annotations

import argparse
import itertools
import json
import os
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
TIME_S, PEAK_MB = 1.0, 300.0
BIG = 1 << 20


def cells(op: str, sizes: str) -> list[dict]:
    """The problems of one operator: every combination of small, middle and large values of its size fields."""
    quick = sizes == "quick"
    if op == "matmul":
        vals = (1, 4097, BIG) if quick else (1, 127, 4096, 65537, BIG)
        return [{"M": m, "N": n, "K": k} for m, n, k in itertools.product(vals, repeat=3)]
    if op == "softmax":
        rows = (1, 1 << 12, 1 << 24) if quick else (1, 1000, 1 << 17, 1 << 20, 1 << 24)
        ds = (1, 4096, BIG) if quick else (1, 1000, 32768, 262144, BIG)
        return [{"rows": r, "d": d} for r, d in itertools.product(rows, ds)]
    if op == "depthwise_conv":
        vals = (1, 64, BIG) if quick else (1, 63, 4096, BIG)
        out = []
        for n, c, h, w in itertools.product(vals, repeat=4):
            if (
                n * c * h * w <= 1 << 44
            ):  # inputs up to 16 T elements: every field large where the others allow
                k = {"kh": 3 if h > 2 else 1, "kw": 3 if w > 2 else 1}
                out.append({"N": n, "C": c, "H": h, "W": w, **k, "pad": 1 if h > 2 or w > 2 else 0})
        return out
    if op == "flash_attention":
        seqs = (1, 4096, BIG) if quick else (1, 129, 4096, 65536, BIG)
        heads = ((32, 8),) if quick else ((1, 1), (32, 8), (64, 64))
        dims = (128,) if quick else (64, 128)
        out = []
        for (h, kv), s1, s2, d, b, causal in itertools.product(heads, seqs, seqs, dims, (1, 16), (0, 1)):
            out.append({"B": b, "heads": h, "kv_heads": kv, "S1": s1, "S2": s2, "D": d, "causal": causal})
        return out
    raise ValueError(op)


WORKER = r"""
import json, resource, sys, time
from tiler.errors import TilerError
from tiler.hardware import load_chip
from tiler.problem import parse_problem
from tiler.search import search
from tiler.space import load_space
op, chip_id, cells = sys.argv[1], sys.argv[2], json.loads(sys.argv[3])
chip = load_chip(chip_id)
space = load_space(op, chip.family)
for fields in cells:
    tiling, cpu = None, None
    try:
        p = parse_problem(op, fields, "fp16")
        t0, c0 = time.perf_counter(), time.process_time()
        res = search(p, chip, space, top=1)
        dt, cpu, best = time.perf_counter() - t0, time.process_time() - c0, float(res.row(0)["time_us"])
        tiling = {k: int(v[0]) for k, v in res.cands.items()}
    except (TilerError, ValueError) as e:
        dt, best = None, str(e).splitlines()[0]
    rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    rec = {"fields": fields, "s": dt, "cpu": cpu, "best": best, "tiling": tiling, "peak_mb": rss}
    print(json.dumps(rec), flush=True)
"""


def run(op: str, chip: str, todo: list[dict], timeout: float, root: Path = ROOT) -> list[dict]:
    """One subprocess for the operator on the chip, importing tiler from `root` (this checkout, or the one
    --compare names); its cells' records (a cell past `timeout` ends the run)."""
    cmd = [sys.executable, "-c", WORKER, op, chip, json.dumps(todo)]
    env = {**os.environ, "PYTHONPATH": str(root)}
    try:
        done = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout, cwd=root, env=env)
        out, err = done.stdout, done.stderr
    except subprocess.TimeoutExpired as e:
        out, err = (e.stdout or b"").decode(), f"timed out after {timeout:.0f} s"
    recs = [json.loads(line) for line in out.splitlines() if line.startswith("{")]
    if len(recs) < len(todo):
        recs.append(
            {"fields": todo[len(recs)], "s": float("inf"), "best": err.strip()[-200:], "peak_mb": None}
        )
    return recs


def main() -> int:
    chips = sorted(p.stem for p in (ROOT / "hardware").glob("*.toml"))
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--chips", default=",".join(chips))
    ap.add_argument("--ops", default="matmul,depthwise_conv,flash_attention,softmax")
    ap.add_argument("--sizes", choices=("quick", "full"), default="full")
    ap.add_argument("--timeout", type=float, default=600.0, help="seconds per (chip, operator) subprocess")
    ap.add_argument("--cells", action="store_true", help="print every cell")
    ap.add_argument("--shape", help="one cell instead of the grid: K=V,... of the (one) operator in --ops")
    ap.add_argument(
        "--compare",
        metavar="DIR",
        help="another checkout (e.g. `git worktree add DIR COMMIT`): run every cell there too, then check that "
        "both give the same best tiling and time (the exact model: bit for bit) for every cell the other "
        "finished within --compare-limit seconds; exit 1 on a difference",
    )
    ap.add_argument("--compare-limit", type=float, default=30.0)
    args = ap.parse_args()
    ops = args.ops.split(",")
    if args.shape:
        one = {k: int(v) for k, v in (kv.split("=") for kv in args.shape.split(","))}
        global cells
        cells = lambda op, sizes: [one]  # noqa: E731
    print(
        f"exhaustive proven search, one subprocess per (chip, operator); sizes {args.sizes}: "
        + ", ".join(f"{op} {len(cells(op, args.sizes))} cells" for op in ops)
    )
    t0, missed, differ, compared, kinds = time.perf_counter(), 0, 0, 0, {}
    for chip in args.chips.split(","):
        worst, peak, refused, n = None, 0.0, 0, 0
        there, there_peak = None, 0.0  # the --compare checkout's worst cell and peak
        for op in ops:
            recs = run(op, chip, cells(op, args.sizes), args.timeout)
            if args.compare:
                other = run(op, chip, cells(op, args.sizes), args.timeout, Path(args.compare).resolve())
                for o in other:
                    if o["s"] is not None:
                        there_peak = max(there_peak, o["peak_mb"] or float("inf"))
                        if there is None or o["s"] > there[0]:
                            there = (o["s"], o.get("cpu"), op, o["fields"])
                for r, o in zip(recs, other, strict=False):
                    if o["s"] is None or o["s"] > args.compare_limit:
                        continue
                    compared += 1
                    if (r["best"], r.get("tiling")) == (o["best"], o.get("tiling")):
                        kind = "same"
                    elif isinstance(r["best"], float) and abs(r["best"] - o["best"]) <= 1e-12 * abs(
                        o["best"]
                    ):
                        # the estimate's float sums run over the work columns its batch uses, so a row scored
                        # in another batch can differ in its last bits: the same tiling is the same answer
                        kind = "ulp" if r.get("tiling") == o.get("tiling") else "tie"
                    else:
                        kind = "differs"
                    kinds[kind] = kinds.get(kind, 0) + 1
                    differ += kind == "differs"
                    if kind in ("tie", "differs"):
                        print(
                            f"    {kind.upper()} {chip} {op} {r['fields']}: {r['best']} {r.get('tiling')} (here)"
                        )
                        print(f"        vs {o['best']} {o.get('tiling')} ({args.compare}, {o['s']:.3f} s)")
                    elif args.cells:
                        print(
                            f"    {kind:7} {chip} {op} {r['fields']}: there {o['s']:.3f} s, here {r['s']:.3f} s"
                        )
            for r in recs:
                n += 1
                if args.cells:
                    s = "refused" if r["s"] is None else f"{r['s']:.3f} s (cpu {r.get('cpu') or 0:.3f} s)"
                    print(f"    {chip:14} {op:15} {r['fields']}: {s}, peak {r['peak_mb']} MB, {r['best']}")
                if r["s"] is None:
                    refused += 1
                    continue
                peak = max(peak, r["peak_mb"] or float("inf"))
                if worst is None or r["s"] > worst[0]:
                    worst = (r["s"], op, r["fields"], r.get("cpu"))
        ok = worst is not None and worst[0] <= TIME_S and peak <= PEAK_MB
        missed += not ok
        cell = f"{worst[1]} {worst[2]}, cpu {worst[3] or 0:.3f} s" if worst else "-"
        print(
            f"{chip:14} {n} cells ({refused} refused): worst {worst[0] if worst else 0:.3f} s ({cell}), peak "
            f"{peak:.0f} MB: {'meets' if ok else 'MISSES'} <= {TIME_S} s and <= {PEAK_MB:.0f} MB"
        )
        if there:
            print(
                f"{'':14} {args.compare}: worst {there[0]:.3f} s ({there[2]} {there[3]}, cpu {there[1] or 0:.3f} s), "
                f"peak {there_peak:.0f} MB"
            )
    print(f"elapsed {time.perf_counter() - t0:.0f} s; chips missing a target: {missed}")
    if args.compare:
        print(
            f"compared with {args.compare}: {compared} cells: "
            + ", ".join(f"{v} {k}" for k, v in sorted(kinds.items()))
            + " (same: tiling and time bit for bit; ulp: the same tiling, the time within 1e-12; tie: another "
            "tiling at a time within 1e-12; differs: anything else)"
        )
    return 1 if missed or differ else 0


if __name__ == "__main__":
    sys.exit(main())
