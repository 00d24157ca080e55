"""A/B of NHWC depthwise kernel variants on the GPU machine (run THERE): the shipped NHWC kernel of
tiler/ops/depthwise_conv/triton_kernels.py against candidates: 2-D pixel blocks (BLOCK_P // BLOCK_W rows x
BLOCK_W columns) whose interior blocks load without masks at per-tap scalar offsets (--block-w); with --rows, the
shipped kernel with its filter-row loop switched (run-time loop against every tap unrolled:
bench/data/h200_dwconv_nhwc_rows.csv, where "shipped" unrolled every tap and "rows" looped). Finished variants, in
git history: --hwc (until 2026-12-03; the kernel reading the filter as [kh, kw, C], bench/data/h200_dwconv_nhwc_hwc.csv,
row variant hwc_filter: the shipped kernel has read it so since, and "shipped" in that file is the kernel before);
--w32 (session 20, `git show de9faf5:bench/gpu/dwconv_nhwc_variants.py`: the filter stored as fp32, with and
without the channel mask, bench/data/h200_dwconv_nhwc_w32.csv; not adopted).

    PYTHONUNBUFFERED=1 python -m bench.gpu.dwconv_nhwc_variants --grid bench/data/h200_dwconv_nhwc.csv \
        --out $OUT/h200_dwconv_nhwc_variants.csv

For each CNN shape of the grid file it takes the --top fastest measured configs, checks each variant against
torch (fp32 reference, rel_err <= 1e-2) and times it as the grid was timed (do_bench median, L2 flushed), with
torch's channels_last conv2d on the same values.
"""

from __future__ import annotations

import argparse
import csv
import sys
from pathlib import Path

from bench.gpu.gpu_measure import load_module, log

ROOT = Path(__file__).resolve().parents[2]
KERNELS_PATH = ROOT / "tiler" / "ops" / "depthwise_conv" / "triton_kernels.py"

try:
    import triton
    import triton.language as tl
except ImportError:  # pragma: no cover - the GPU machine has it
    triton = None

if triton is not None:

    @triton.jit
    def _dw_nhwc_block_kernel(
        x_ptr,
        w_ptr,
        out_ptr,
        N,
        C,
        H,
        W,
        OH,
        OW,
        KH: tl.constexpr,
        KW: tl.constexpr,
        STRIDE: tl.constexpr,
        PAD: tl.constexpr,
        PADW: tl.constexpr,
        DIL: tl.constexpr,
        G: tl.constexpr,
        BLOCK_P: tl.constexpr,
        BLOCK_W: tl.constexpr,
    ):
        BH: tl.constexpr = BLOCK_P // BLOCK_W
        pid_p = tl.program_id(0)
        pid_g = tl.program_id(1)
        n = tl.program_id(2)
        tiles_w = tl.cdiv(OW, BLOCK_W)
        oh0 = (pid_p // tiles_w) * BH
        ow0 = (pid_p % tiles_w) * BLOCK_W
        r = tl.arange(0, BLOCK_P)
        oh = oh0 + r // BLOCK_W
        ow = ow0 + r % BLOCK_W
        p_mask = (oh < OH) & (ow < OW)
        cs = pid_g * G + tl.arange(0, G)
        c_mask = cs < C
        x_img = x_ptr + n.to(tl.int64) * H * W * C
        w_rows = w_ptr + cs * (KH * KW)
        ih0 = oh * STRIDE - PAD
        iw0 = ow * STRIDE - PADW
        offs = ((ih0 * W + iw0) * C)[:, None] + cs[None, :]
        acc = tl.zeros((BLOCK_P, G), dtype=tl.float32)
        ih_lo = oh0 * STRIDE - PAD
        ih_hi = (oh0 + BH - 1) * STRIDE - PAD + (KH - 1) * DIL
        iw_lo = ow0 * STRIDE - PADW
        iw_hi = (ow0 + BLOCK_W - 1) * STRIDE - PADW + (KW - 1) * DIL
        inside = (ih_lo >= 0) & (ih_hi < H) & (iw_lo >= 0) & (iw_hi < W)
        inside = inside & (oh0 + BH <= OH) & (ow0 + BLOCK_W <= OW) & ((pid_g + 1) * G <= C)
        if inside:
            for th in tl.static_range(KH):
                for tw in tl.static_range(KW):
                    xv = tl.load(x_img + offs + (th * DIL * W + tw * DIL) * C)
                    wv = tl.load(w_rows + (th * KW + tw))
                    acc += xv.to(tl.float32) * wv.to(tl.float32)[None, :]
        else:
            for th in tl.static_range(KH):
                ih = ih0 + th * DIL
                mh = p_mask & (ih >= 0) & (ih < H)
                for tw in tl.static_range(KW):
                    iw = iw0 + tw * DIL
                    m = mh & (iw >= 0) & (iw < W)
                    xv = tl.load(
                        x_img + offs + (th * DIL * W + tw * DIL) * C,
                        mask=m[:, None] & c_mask[None, :],
                        other=0.0,
                    )
                    wv = tl.load(w_rows + (th * KW + tw), mask=c_mask, other=0.0)
                    acc += xv.to(tl.float32) * wv.to(tl.float32)[None, :]
        out_img = out_ptr + n.to(tl.int64) * OH * OW * C
        tl.store(
            out_img + ((oh * OW + ow) * C)[:, None] + cs[None, :],
            acc.to(out_ptr.dtype.element_ty),
            mask=p_mask[:, None] & c_mask[None, :],
        )


def launch_rows(prob, cfg: dict):
    """The shipped NHWC kernel with its row loop switched the other way from what `row_loop` chooses for the
    filter (until session 20 the shipped kernel unrolled every tap; this was the variant that loops)."""
    km = load_module("dwconv_triton_kernels", KERNELS_PATH)
    kern, grid, ints, kwargs = km._kernel_and_args(
        cfg, prob.conv, *(prob.p[k] for k in ("N", "C", "H", "W")), "nhwc"
    )
    kwargs = {**kwargs, "ROW_LOOP": not kwargs["ROW_LOOP"]}
    args = (prob.x, prob.w_kernel, prob.out, *ints)
    return lambda: kern[grid](*args, **kwargs)


def launch_block(prob, cfg: dict, block_w: int):
    """The candidate kernel's launch for prob (triton_kernels.Problem, nhwc) and a grid config."""
    km = load_module("dwconv_triton_kernels", KERNELS_PATH)
    p = prob.p
    c = km.normalize_cfg(cfg)
    G, BP = c["groups_per_op"], c["BLOCK_P"]
    bw = min(block_w, BP)
    OH, OW = prob.OH, prob.OW
    grid = (triton.cdiv(OH, BP // bw) * triton.cdiv(OW, bw), triton.cdiv(p["C"], G), p["N"])
    kh, kw = p["kh"], p["kw"]
    args = (prob.x, prob.w, prob.out, p["N"], p["C"], p["H"], p["W"], OH, OW)
    kwargs = dict(
        KH=kh,
        KW=kw,
        STRIDE=p["stride"],
        PAD=km.pad_h(kh, p["pad"]),
        PADW=km.pad_w(kw, p["pad"]),
        DIL=p["dilation"],
        G=G,
        BLOCK_P=BP,
        BLOCK_W=bw,
        num_warps=c["num_warps"],
        num_stages=1,
    )

    def fn():
        _dw_nhwc_block_kernel[grid](*args, **kwargs)

    return fn


def main(argv=None) -> int:
    import pandas as pd
    import torch

    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--grid", default=str(ROOT / "bench" / "data" / "h200_dwconv_nhwc.csv"))
    ap.add_argument("--out", required=True)
    ap.add_argument("--top", type=int, default=6)
    ap.add_argument("--block-w", default="4,8,16", help="block widths to try; empty: none")
    ap.add_argument(
        "--rows", action="store_true", help="also the kernel with the filter rows in a run-time loop"
    )
    args = ap.parse_args(argv)
    km = load_module("dwconv_triton_kernels", KERNELS_PATH)
    g = pd.read_csv(args.grid)
    g = g[(g["impl"] == "triton") & (g["kw"] > 1)]
    keys = ("N", "C", "H", "W", "kh", "kw", "stride", "pad", "dilation")
    rows = []
    for name, s in g.groupby("name", sort=False):
        shape = {**{k: int(s.iloc[0][k]) for k in keys}, "layout": "nhwc"}
        prob = km.Problem(shape)
        ven = prob.torch_formats(5, 25)
        cl = ven["channels_last"]["ms"]
        rows.append({"name": name, "variant": "torch channels_last", "ms": cl})
        rows.append({"name": name, "variant": "torch nchw", "ms": ven["nchw"]["ms"]})
        best = {}
        for _, r in s.nsmallest(args.top, "ms").iterrows():
            cfg = {k: int(r[k]) if k != "scheme" else 2 for k in km.CFG_KEYS if k in r}
            tag = f"G{cfg['groups_per_op']} P{cfg['BLOCK_P']} w{cfg['num_warps']}"
            prob.check(cfg)
            ms = prob.time(cfg, 5, 25)
            rows.append({"name": name, "variant": "shipped", "cfg": tag, "ms": ms})
            best["shipped"] = min(best.get("shipped", 1e9), ms)
            variants = [
                (f"block{bw}", launch_block(prob, cfg, int(bw))) for bw in args.block_w.split(",") if bw
            ]
            if args.rows:
                variants.append(("rows", launch_rows(prob, cfg)))
            for label, fn in variants:
                prob.out.fill_(float("nan"))
                fn()
                torch.cuda.synchronize()
                err = prob.rel_err(prob.out)
                if not err <= km.REL_ERR_MAX:
                    log(f"[{name}] {label} {tag}: wrong result rel_err {err}")
                    continue
                ms = prob.time_fn(fn, 5, 25)
                rows.append({"name": name, "variant": label, "cfg": tag, "ms": ms})
                best[label] = min(best.get(label, 1e9), ms)
        log(
            f"[{name}] torch cl {cl:.4f} " + " ".join(f"{k} {v:.4f} ({cl / v:.2f}x)" for k, v in best.items())
        )
    with open(args.out, "w", newline="") as f:
        w = csv.DictWriter(f, fieldnames=["name", "variant", "cfg", "ms"])
        w.writeheader()
        w.writerows(rows)
    return 0


if __name__ == "__main__":
    sys.exit(main())
