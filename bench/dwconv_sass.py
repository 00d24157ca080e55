"""What the compiler makes of each NHWC depthwise tiling: registers, spills and the SASS a program executes.
No GPU needed: Triton compiles for sm_90 (the H200) on any machine where it is installed.

    python -m bench.dwconv_sass compile [--out bench/data/h200_dwconv_nhwc_sass.csv] [--jobs N]
    python -m bench.dwconv_sass compile --grid bench/data/h200_dwconv_nhwc_strip_grid.csv \
        --out bench/data/h200_dwconv_nhwc_strip_sass.csv
    python -m bench.dwconv_sass summary
    python -m bench.dwconv_sass strips      # one tiling of three layers compiled with strips of 1, 2 and 4

`summary` (no triton needed) reads the table and prints, per filter and elements a thread, the compiled registers
against the model's register estimate (`cuda._registers` with the shipped constants), the share that spills, and the
SASS instructions a thread executes per output and tap, by class.

For every distinct kernel of the NHWC grid timed in bench/data/h200_dwconv_nhwc.csv (filter, stride, padding,
dilation, G, BLOCK_P, num_warps; the first shape that has it gives the run-time integers), it compiles the shipped
kernel `_dw_nhwc_kernel` (tiler/ops/depthwise_conv/triton_kernels.py) as `launch` specialises it (pointers 16-byte
aligned, integers divisible by 16 marked so, integers equal to 1 constant, num_stages 1) with Triton's own
`triton.compile` for `GPUTarget("cuda", 90, 32)`, and reads the cubin with the `cuobjdump` that Triton ships:
registers a thread (`REG`), spill stack bytes (`STACK`), and the SASS split into the filter-row loop's body (between
a backward branch and its target label; `ROW_LOOP` kernels) and the rest, counted by class (`CLASSES`). A warp of a
program executes `rest_total + kh * body_total` instructions (`rest_total` when there is no loop). docs/model_cuda.md
9b uses the table to check the model's register and instruction terms; nothing is timed.
"""

from __future__ import annotations

import argparse
import csv
import os
import re
import subprocess
import sys
import tempfile
import time
from collections import Counter
from multiprocessing import Pool
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
GRID = ROOT / "bench" / "data" / "h200_dwconv_nhwc.csv"
STRIP_GRID = ROOT / "bench" / "data" / "h200_dwconv_nhwc_strip_grid.csv"
KERNELS = ROOT / "tiler" / "ops" / "depthwise_conv" / "triton_kernels.py"
KEY = ("kh", "kw", "stride", "pad", "dilation", "groups_per_op", "BLOCK_P", "num_warps")
SHAPE = ("N", "C", "H", "W")
CLASSES = {
    "ldg": ("LDG",),
    "stg": ("STG",),
    "ffma": ("FFMA", "FMUL", "FADD"),
    "half": (
        "HFMA2",
        "HMUL2",
        "HADD2",
    ),  # half arithmetic: also the f16 -> f32 unpacking and register zeroing
    "cvt": ("F2F", "F2FP", "I2F", "F2I"),
    "int": (
        *("IMAD", "IADD3", "LEA", "ISETP", "LOP3", "SHF", "SEL", "IABS", "PLOP3", "MOV", "IMNMX", "VIADD"),
        *(
            "VIADDMNMX",
            "PRMT",
            "S2R",
            "S2UR",
            "ULDC",
            "UMOV",
            "UIADD3",
            "UIMAD",
            "USHF",
            "ULEA",
            "ULOP3",
            "USEL",
        ),
    ),
    "ctl": ("BRA", "EXIT", "BSSY", "BSYNC", "NOP", "BAR", "WARPSYNC", "YIELD"),
}
# cuobjdump -sass: "/*26e0*/  @P4 BRA 0xb00 ;" (address, optional predicate, opcode with modifiers, operands)
_INSTR = re.compile(
    r"/\*([0-9a-f]{4,})\*/\s+(?:@!?U?P[0-9T]+\s+)?([A-Z][A-Z0-9_]*)(?:\.[A-Z0-9_.]+)?\s*([^;]*);"
)


def classify(op: str) -> str:
    return next((name for name, ops in CLASSES.items() if op in ops), "other")


def sass_counts(sass: str) -> dict[str, int]:
    """Per class, the SASS instructions inside the loop (the span from the lowest target of a backward branch to
    that branch) and outside it. The trap at the end (a branch to itself) is not a loop."""
    instrs = [
        (int(m.group(1), 16), m.group(2), m.group(3)) for m in map(_INSTR.search, sass.splitlines()) if m
    ]
    loop = None
    for addr, op, args in instrs:
        target = int(args.split()[-1], 16) if op == "BRA" and args.split()[-1:] != [] else None
        if target is not None and target < addr and (loop is None or target < loop[0]):
            loop = (target, addr)
    body, rest = Counter(), Counter()
    for addr, op, _ in instrs:
        (body if loop and loop[0] <= addr <= loop[1] else rest)[classify(op)] += 1
    out = {f"body_{k}": body.get(k, 0) for k in (*CLASSES, "other")}
    out |= {f"rest_{k}": rest.get(k, 0) for k in (*CLASSES, "other")}
    out["body_total"], out["rest_total"] = sum(body.values()), sum(rest.values())
    return out


def compile_kernel(key: tuple, shape: tuple, strip: int = 1) -> dict:
    """Registers, spill stack and SASS counts of one kernel, compiled for sm_90 without a GPU (`strip` > 1: the
    strip kernel `_dw_nhwc_strip_kernel`)."""
    import importlib.util

    import triton
    from triton.backends.compiler import GPUTarget
    from triton.compiler import ASTSource

    spec = importlib.util.spec_from_file_location("dw_kernels", KERNELS)
    km = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(km)
    kh, kw, stride, pad, dil, G, BP, warps = key
    N, C, H, W = shape
    OH, OW = km.output_size(H, W, kh, kw, stride, pad, dil)  # each axis padded only when the filter spans it
    ints = dict(N=N, C=C, H=H, W=W, OH=OH, OW=OW)
    const = dict(KH=kh, KW=kw, STRIDE=stride, PAD=km.pad_h(kh, pad), PADW=km.pad_w(kw, pad), DIL=dil)
    const |= dict(G=G, BLOCK_P=BP, BLOCK_K=16)
    const["ROW_LOOP"] = km.row_loop(kh, kw)
    const["SW"] = strip
    fn = km._dw_nhwc_strip_kernel if strip > 1 else km._dw_nhwc_kernel
    sig, constexprs, attrs = {}, {}, {}
    for i, a in enumerate(fn.arg_names):
        if a.endswith("_ptr"):
            sig[a], attrs[(i,)] = "*fp16", [["tt.divisibility", 16]]
        elif a in ints and ints[a] != 1:
            sig[a] = "i32"
            if ints[a] % 16 == 0:
                attrs[(i,)] = [["tt.divisibility", 16]]
        else:
            sig[a], constexprs[(i,)] = "constexpr", ints.get(a, const.get(a))
    k = triton.compile(
        ASTSource(fn, sig, constexprs, attrs),
        target=GPUTarget("cuda", 90, 32),
        options=dict(num_warps=warps, num_stages=1),
    )
    tool = Path(triton.__file__).parent / "backends" / "nvidia" / "bin" / "cuobjdump"
    with tempfile.TemporaryDirectory() as d:
        cubin = Path(d) / "k.cubin"
        cubin.write_bytes(k.asm["cubin"])
        usage = subprocess.run([tool, "--dump-resource-usage", cubin], capture_output=True, text=True).stdout
        sass = subprocess.run([tool, "-sass", cubin], capture_output=True, text=True).stdout
    regs = int(re.search(r"REG:(\d+)", usage).group(1))
    stack = int(re.search(r"STACK:(\d+)", usage).group(1))
    return {"n_regs": regs, "stack_bytes": stack, **sass_counts(sass)}


def _task(item):
    (key, strip), shape = item
    try:
        return (key, strip), shape, compile_kernel(key, shape, strip), ""
    except Exception as e:  # noqa: BLE001 - one line in the table
        return key, shape, {}, f"{type(e).__name__}: {str(e).splitlines()[0][:200] if str(e) else ''}"


def kernels(grid: Path) -> dict[tuple, tuple]:
    """Each distinct kernel of a timed NHWC grid, (KEY, STRIP), with the first shape (N, C, H, W) that ran it (strip
    1 where the grid predates the knob)."""
    out: dict[tuple, tuple] = {}
    with grid.open(newline="") as f:
        for r in csv.DictReader(f):
            if r["impl"] == "triton":
                key = (tuple(int(r[k]) for k in KEY), int(float(r.get("STRIP") or 1)))
                out.setdefault(key, tuple(int(r[k]) for k in SHAPE))
    return out


def summary(path: Path) -> int:
    """Compiled registers against the model's estimate, and executed instructions per output and tap."""
    import numpy as np
    import pandas as pd

    from tiler.hardware import load_chip
    from tiler.operator import get_operator
    from tiler.ops.depthwise_conv import cuda
    from tiler.ops.depthwise_conv.geometry import VECTOR
    from tiler.problem import parse_problem

    chip = load_chip("h200")
    e = get_operator("depthwise_conv", "cuda").constants(chip)
    t = pd.read_csv(path)
    if "STRIP" not in t:  # a table of the one-pixel kernel only
        t["STRIP"] = 1
    t["ept"] = t["groups_per_op"] * t["BLOCK_P"] / (32 * t["num_warps"])
    loop = np.where(t["body_total"] > 0, t["kh"], 0)  # the row loop runs kh times
    per = t["ept"] * t["kh"] * t["kw"]  # outputs x taps a thread computes
    for c in (*CLASSES, "other", "total"):
        t[c] = (t[f"rest_{c}"] + loop * t[f"body_{c}"]) / per
    model = np.empty(len(t))
    for key, rows in t.groupby([*KEY[:5], *SHAPE]).groups.items():
        fields = dict(zip((*KEY[:5], *SHAPE), (int(v) for v in key), strict=True))
        p = parse_problem("depthwise_conv", {**fields, "layout": "nhwc"}, "fp16")
        c = {k: t.loc[rows, k].to_numpy(np.int64) for k in ("groups_per_op", "BLOCK_P", "num_warps", "STRIP")}
        c |= {
            "scheme": np.full(len(rows), VECTOR),
            "BLOCK_K": np.full(len(rows), 16),
            "num_stages": np.ones(len(rows)),
        }
        model[t.index.get_indexer(rows)] = cuda._registers(cuda.prepare(p, chip, c), e)
    t["model_regs"] = model
    t["spills"] = t["stack_bytes"] > 0
    g = t.groupby(["kh", "kw", "STRIP", "ept"])
    out = g[["n_regs", "model_regs"]].median().join(g["spills"].mean())
    out = out.join(g[[*CLASSES, "other", "total"]].median())
    print(
        f"{len(t)} kernels of {path.name}; per filter and elements a thread (ept): median compiled registers, the"
    )
    print("model's estimate, the share that spills, SASS instructions a thread executes per output and tap:")
    print(out.round(2).to_string())
    return 0


# (kh, kw, stride, pad, dilation, G, BLOCK_P, num_warps) and (N, C, H, W): a 7x7, a 3x3 and a 5x5 stride-2 layer
STRIP_KERNELS = (
    ((7, 7, 1, 3, 1, 32, 128, 2), (16, 96, 56, 56)),
    ((3, 3, 1, 1, 1, 32, 128, 2), (16, 144, 56, 56)),
    ((5, 5, 2, 2, 1, 32, 128, 2), (16, 144, 56, 56)),
)


def strips() -> int:
    """The same tiling compiled with strips of 1, 2 and 4 output columns: registers, spill stack, and the loads,
    FMAs and instructions of one filter row (the row loop's body; the whole kernel when the taps are unrolled)."""
    print("kh kw stride G BLOCK_P warps strip: registers, stack bytes, LDG, FFMA, all SASS (row loop | rest)")
    for key, shape in STRIP_KERNELS:
        for sw in (1, 2, 4):
            r = compile_kernel(key, shape, sw)
            print(
                f"{key[0]} {key[1]} {key[2]} {key[5]} {key[6]} {key[7]} {sw}: {r['n_regs']}, {r['stack_bytes']}, "
                f"{r['body_ldg']} | {r['rest_ldg']}, {r['body_ffma']} | {r['rest_ffma']}, "
                f"{r['body_total']} | {r['rest_total']}"
            )
    return 0


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("what", choices=("compile", "summary", "strips"))
    ap.add_argument("--out", type=Path, default=ROOT / "bench" / "data" / "h200_dwconv_nhwc_sass.csv")
    ap.add_argument("--jobs", type=int, default=os.cpu_count() or 1)
    ap.add_argument(
        "--grid",
        type=Path,
        default=GRID,
        help=f"the timed grid whose kernels to compile ({STRIP_GRID.name}: strips)",
    )
    args = ap.parse_args(argv)
    if args.what == "summary":
        return summary(args.out)
    if args.what == "strips":
        return strips()
    import triton

    todo = sorted(kernels(args.grid).items())
    cols = [*KEY, "STRIP", *SHAPE, "n_regs", "stack_bytes", *sass_counts("").keys(), "error"]
    t0 = time.time()
    print(f"{len(todo)} kernels, triton {triton.__version__}, {args.jobs} jobs", file=sys.stderr)
    rows = []
    with Pool(args.jobs) as pool:
        for n, ((key, strip), shape, res, err) in enumerate(pool.imap_unordered(_task, todo), 1):
            rows.append(
                {
                    **dict(zip(KEY, key, strict=True)),
                    "STRIP": strip,
                    **dict(zip(SHAPE, shape, strict=True)),
                    **res,
                    "error": err,
                }
            )
            if n % 50 == 0:
                print(f"{n}/{len(todo)} in {time.time() - t0:.0f} s", file=sys.stderr)
    rows.sort(key=lambda r: tuple(r[k] for k in (*KEY, "STRIP")))
    with args.out.open("w", newline="") as f:
        w = csv.DictWriter(f, fieldnames=cols)
        w.writeheader()
        w.writerows(rows)
    print(
        f"wrote {args.out}: {len(rows)} kernels ({sum(bool(r['error']) for r in rows)} failed)",
        file=sys.stderr,
    )
    return 0


if __name__ == "__main__":
    import sys

    sys.exit(main())
