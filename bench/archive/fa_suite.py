"""The model's flash-attention choices on a suite of LLM attention shapes, on the 910B3 and the H200.

    python -m bench.archive.fa_suite [--chips ascend910b3,h200] [--csv bench/data/fa_suite.csv]

The suite (SUITE below, each with the model it comes from): prefill and decode, GQA and MHA, D = 64 and 128,
S from 512 to 32k, causal and not. For every shape and chip the exhaustive search's best tiling, its bound, the
predicted time and the ratio of the roofline to it (how close the pick is to the physical floor: FLOPs at peak or
compulsory bytes at HBM bandwidth). These are model predictions; bench/fa_fidelity.py says how far the H200 model is
from measurements, and nothing has been measured on Ascend.
"""

from __future__ import annotations

import argparse
import time
from pathlib import Path

import pandas as pd

from tiler.hardware import load_chip
from tiler.problem import parse_problem
from tiler.search import search
from tiler.space import load_space

# (name, B, heads, kv_heads, S1, S2, D, causal)
SUITE = [
    ("llama3-8b prefill 2k", 1, 32, 8, 2048, 2048, 128, 1),
    ("llama3-8b prefill 8k", 1, 32, 8, 8192, 8192, 128, 1),
    ("llama3-8b prefill 32k", 1, 32, 8, 32768, 32768, 128, 1),
    ("llama3-8b chunk 512 of 16k", 1, 32, 8, 512, 16384, 128, 1),
    ("llama3-8b decode 8k x64", 64, 32, 8, 1, 8192, 128, 1),
    ("llama3-70b prefill 4k", 1, 64, 8, 4096, 4096, 128, 1),
    ("llama3-70b decode 32k x8", 8, 64, 8, 1, 32768, 128, 1),
    ("qwen2.5-7b prefill 4k", 2, 28, 4, 4096, 4096, 128, 1),
    ("qwen2.5-7b decode 4k x32", 32, 28, 4, 1, 4096, 128, 1),
    ("mistral-7b spec-decode 4 of 8k", 16, 32, 8, 4, 8192, 128, 1),
    ("gpt2 / bert-base 512 (MHA, D=64)", 32, 12, 12, 512, 512, 64, 0),
    ("vit-l/16 577 tokens (MHA, D=64)", 64, 16, 16, 577, 577, 64, 0),
    ("sd-xl cross-attn 4096x77 (D=64)", 8, 10, 10, 4096, 77, 64, 0),
    ("llama2-7b MHA prefill 4k", 1, 32, 32, 4096, 4096, 128, 1),
]
KNOBS = {"ascend": ("block_s1", "block_s2", "preload", "core_split", "kv_split"), "cuda": None}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--chips", default="ascend910b3,h200")
    ap.add_argument("--csv", type=Path, default=Path(__file__).resolve().parents[1] / "data" / "fa_suite.csv")
    args = ap.parse_args()
    t0 = time.perf_counter()
    rows = []
    for chip_id in args.chips.split(","):
        chip = load_chip(chip_id)
        space = load_space("flash_attention", chip.family)
        for name, B, H, KVH, S1, S2, D, causal in SUITE:
            p = parse_problem(
                "flash_attention", dict(B=B, heads=H, kv_heads=KVH, S1=S1, S2=S2, D=D, causal=causal)
            )
            try:
                res = search(p, chip, space, top=1)
            except (
                Exception
            ) as exc:  # an input the family cannot run (D not a power of two on the GPU kernel)
                rows.append({"chip": chip_id, "shape": name, "tiling": f"-- {exc}"})
                continue
            row, tiling = res.row(0), res.tiling(0)
            rows.append(
                {
                    "chip": chip_id,
                    "shape": name,
                    "tiling": " ".join(f"{k}={v}" for k, v in tiling.items()),
                    "bound": row["bound"],
                    "time_us": round(float(row["time_us"]), 2),
                    "roofline_us": round(float(row["roofline_us"]), 2),
                    "of_roofline": round(float(row["roofline_us"] / row["time_us"]), 3),
                    "balance": round(float(row["balance"]), 3),
                }
            )
    df = pd.DataFrame(rows)
    with pd.option_context("display.width", 250, "display.max_colwidth", 90):
        print(df.to_string(index=False))
    args.csv.parent.mkdir(parents=True, exist_ok=True)
    df.to_csv(args.csv, index=False)
    for chip_id, g in df.dropna(subset=["time_us"]).groupby("chip"):
        print(
            f"{chip_id}: {len(g)} shapes; bounds {g['bound'].value_counts().to_dict()}; "
            f"roofline / predicted median {g['of_roofline'].median():.2f} (min {g['of_roofline'].min():.2f})"
        )
    print(f"wrote {args.csv} ({time.perf_counter() - t0:.1f} s)")


if __name__ == "__main__":
    main()
