"""Do `tiler search --target triton --emit triton` configs run, pasted into `@triton.autotune`, and are they right?

Two steps, because the GPU machine has no jsonschema (the exporter validates every document) and because the
point is to run exactly the text a user pastes:

    python -m bench.gpu.triton_emit_check emit        # here: search and emit for the 8 shapes -> bench/data/h200_triton_emit.jsonl
    python -m bench.gpu.triton_emit_check run --out DIR   # on the H200: paste each config into a one-config
                                                   # @triton.autotune over the project's kernel, run, check, time

`run` evaluates each emitted line as Python with `triton` in scope (the paste), wraps the project's kernel
(tiler/ops/matmul/triton_runner.py `_gemm_tile_kernel`) in `triton.autotune(configs=[that config],
key=["M", "N", "K"])`, launches it with the emitted grid's formula, checks the result against torch.matmul on
random inputs (relative Frobenius error <= 1e-2) and times it with triton.testing.do_bench (median, L2 flushed by
do_bench's cache clearing), next to the model's prediction and torch.matmul. Output: h200_triton_emit.csv.
"""

from __future__ import annotations

import argparse
import csv
import io
import json
import math
import re
import sys
from contextlib import redirect_stdout
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
CONFIGS = ROOT / "bench" / "data" / "h200_triton_emit.jsonl"

# (M, N, K, layout): square, decode GEMV-like, nn.Linear weights (nt), ragged, odd, deep K (split-K), wide N
SHAPES = [
    (4096, 4096, 4096, "nn"),
    (1, 4096, 4096, "nt"),
    (16, 14336, 4096, "nt"),
    (2048, 1024, 4096, "nt"),
    (1000, 768, 512, "nn"),
    (127, 255, 8191, "nn"),
    (64, 64, 65536, "nn"),
    (512, 28672, 4096, "nt"),
]


def _has_layout() -> bool:
    from tiler.ops.matmul.problem import Matmul

    return "layout" in Matmul.__dataclass_fields__


def emit() -> None:
    """Search each shape under --target triton and keep the emitted text exactly as printed."""
    from tiler.cli import main

    layouts = _has_layout()
    with CONFIGS.open("w") as f:
        for M, N, K, layout in SHAPES:
            lay = layout if layouts else "nn"
            shape = f"M={M},N={N},K={K}" + (f",layout={lay}" if layouts else "")
            out = io.StringIO()
            with redirect_stdout(out):
                code = main(
                    ["search", "--op", "matmul", "--chip", "h200", "--shape", shape, "--emit", "triton"]
                )
            if code:
                sys.exit(f"search failed for {shape}: exit {code}")
            predicted = float(re.search(r"predicted ([0-9.]+) us", out.getvalue()).group(1))
            row = {
                "M": M,
                "N": N,
                "K": K,
                "layout": lay,
                "emitted": out.getvalue(),
                "predicted_us": predicted,
            }
            f.write(json.dumps(row) + "\n")
            print(f"{shape}: {out.getvalue().splitlines()[-1]}  (predicted {predicted:.1f} us)")
    print(f"wrote {CONFIGS}")


def run(out_dir: Path) -> None:
    import torch
    import triton
    from triton.testing import do_bench

    from tiler.ops.matmul.triton_runner import _gemm_tile_kernel

    out_dir.mkdir(parents=True, exist_ok=True)
    rows = [json.loads(line) for line in CONFIGS.read_text().splitlines() if line.strip()]
    results = []
    torch.manual_seed(0)
    for r in rows:
        res = _check_one(r, torch, triton, do_bench, _gemm_tile_kernel)
        results.append(res)
        print(
            f"{res['M']}x{res['N']}x{res['K']} {res['layout']}: {res['status']} err={res['rel_err']:.2e} "
            f"{res['measured_us']:.1f} us (model {res['predicted_us']:.1f}, torch {res['torch_us']:.1f})"
        )
    with (out_dir / "h200_triton_emit.csv").open("w", newline="") as f:
        w = csv.DictWriter(f, fieldnames=list(results[0]))
        w.writeheader()
        w.writerows(results)
    meta = {"torch": torch.__version__, "triton": triton.__version__, "device": torch.cuda.get_device_name()}
    (out_dir / "h200_triton_emit.meta.json").write_text(json.dumps(meta, indent=2) + "\n")


def _check_one(r: dict, torch, triton, do_bench, base_kernel) -> dict:
    """Paste one emitted config into a one-config autotuner over the kernel; run, check and time it."""
    M, N, K, layout = r["M"], r["N"], r["K"], r["layout"]
    pasted = [s for s in r["emitted"].splitlines() if s.startswith("triton.Config(")][0]
    config = eval(pasted, {"triton": triton})  # the paste: the emitted line, verbatim
    kernel = triton.autotune(configs=[config], key=["M", "N", "K"])(base_kernel)
    f16 = torch.float16
    a = (
        torch.randn(K, M, device="cuda", dtype=f16).T
        if layout[0] == "t"
        else torch.randn(M, K, device="cuda", dtype=f16)
    )
    b = (
        torch.randn(N, K, device="cuda", dtype=f16).T
        if layout[1] == "t"
        else torch.randn(K, N, device="cuda", dtype=f16)
    )
    split = config.kwargs["SPLIT_K"]
    c = torch.empty((M, N), device="cuda", dtype=torch.float32 if split > 1 else f16)

    def grid(meta):
        return (triton.cdiv(M, meta["BLOCK_M"]) * triton.cdiv(N, meta["BLOCK_N"]), meta["SPLIT_K"])

    def launch():
        if split > 1:
            c.zero_()
        kernel[grid](
            a, b, c, M, N, K, a.stride(0), a.stride(1), b.stride(0), b.stride(1), c.stride(0), c.stride(1)
        )
        return c

    status, err, us, torch_us = "ok", math.nan, math.nan, math.nan
    try:
        got = launch().float()
        ref = a.float() @ b.float()
        err = float(torch.linalg.norm(got - ref) / torch.linalg.norm(ref))
        status = "ok" if err <= 1e-2 else "wrong"
        us = do_bench(launch, warmup=25, rep=100, return_mode="median") * 1e3
        torch_us = do_bench(lambda: a @ b, warmup=25, rep=100, return_mode="median") * 1e3
    except Exception as exc:  # a config that does not compile or launch is the failure this checks for
        status = f"failed: {type(exc).__name__}: {str(exc).splitlines()[0][:200]}"
    return {
        "M": M,
        "N": N,
        "K": K,
        "layout": layout,
        "config": pasted,
        "status": status,
        "rel_err": err,
        "measured_us": us,
        "predicted_us": r["predicted_us"],
        "torch_us": torch_us,
    }


if __name__ == "__main__":
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("step", choices=["emit", "run"])
    ap.add_argument("--out", type=Path, default=ROOT / "bench" / "data")
    args = ap.parse_args()
    emit() if args.step == "emit" else run(args.out)
