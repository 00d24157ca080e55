"""Would the NHWC depthwise model rank better with the compiler's registers and executed instructions?
(session 21, finished: no). CPU; reads bench/data/h200_dwconv_nhwc.csv and bench/data/h200_dwconv_nhwc_sass.csv.

    python -m bench.archive.dwconv_counts_refit

Variants of the shipped `timing()` of tiler/ops/depthwise_conv/cuda.py (NHWC vector kernel), each refitted with
tiler's own Levenberg-Marquardt (`calibrate._fit`) on the 11 shapes not held out, and scored on the grid: per shape
the measured time of the predicted-fastest tiling over the best measured one (top-1), fitted and held-out shapes
apart, and against the faster torch format on the 13 CNN layers.

- shipped: the shipped model and constants;
- refit: the same structure, its NHWC constants refitted on the NHWC grid alone;
- true registers: the compiled registers (and spill stack) instead of the register estimate;
- true registers and instructions: also the SASS instructions a program executes (x 32 lanes, times a fitted
  issue factor) instead of the counted lanes.
"""

from __future__ import annotations

import types

import numpy as np
import pandas as pd

from bench.dwconv_layouts import FIELDS, GRIDS, SHAPES
from tiler.calibrate import _fit
from tiler.hardware import load_chip
from tiler.operator import get_operator
from tiler.ops.depthwise_conv import cuda as M
from tiler.ops.depthwise_conv.geometry import VECTOR
from tiler.problem import parse_problem

SASS = GRIDS["nhwc"].parent / "h200_dwconv_nhwc_sass.csv"
KEY = ["kh", "kw", "stride", "pad", "dilation", "groups_per_op", "BLOCK_P", "num_warps"]
NHWC = [
    "dw_nhwc_elem_lanes",
    "dw_nhwc_vec_lanes",
    "dw_program_cycles",
    "dw_tap_round_cycles",
    "dw_spill_lanes",
]
NHWC += ["dw_loads_in_flight", "dw_miss_cycles", "dw_l1_bytes"]


class Variant:
    """The shipped NHWC timing with the register estimate and/or the lane count replaced by compiled counts."""

    FITTABLE = {**M.FITTABLE, "k_issue": (0.05, 20.0)}

    def __init__(self, regs: bool = False, lanes: bool = False):
        self.regs, self.lanes = regs, lanes

    def timing(self, g, chip, e):
        threads = 32 * g["warps"]
        regs = (
            np.where(g["stack"] > 0, 255 + g["stack"] / 4, g["n_regs"]) if self.regs else M._registers(g, e)
        )
        spill = np.maximum(regs - 255, 0)
        alloc = np.minimum(np.ceil(regs / 8) * 8, 256)
        occ = np.maximum(np.minimum(g["fixed_occupancy"], chip["regs_per_sm"] // (alloc * threads)), 1)
        spills = e["dw_spill_lanes"] * spill * g["rounds"] * threads
        if self.lanes:
            lanes = g["warp_instrs"] * 32 * e["k_issue"] + spills
        else:
            tap = e["dw_nhwc_elem_lanes"] + e["dw_nhwc_vec_lanes"] / g["vec_width"]
            lanes = tap * g["tap_elems"] + e["dw_store_lanes"] * g["store_elems"] + spills
        per_sm = np.ceil(g["programs"] / chip.cores)
        resident = np.minimum(occ, per_sm)
        issue = per_sm * lanes / (32 * np.minimum(4, resident * g["warps"]))
        overhead = per_sm * e["dw_program_cycles"] / resident
        miss = np.clip(1.0 - e["dw_l1_bytes"] / np.maximum(resident * g["window_bytes"], 1.0), 0.0, 1.0)
        waits = np.maximum(1.0, g["round_loads"] / e["dw_loads_in_flight"])
        chain = (
            e["dw_program_cycles"]
            + g["rounds"] * waits * (e["dw_tap_round_cycles"] + miss * e["dw_miss_cycles"])
            + lanes / (32 * np.minimum(4, g["warps"]))
        )
        sm = np.maximum(issue + overhead, np.ceil(per_sm / occ) * chain) / chip.clock_hz
        hbm = g["hbm_bytes"] / (chip["hbm_gbps"] * 1e9 * e["hbm_efficiency"])
        l2 = (g["l2_bytes"] + miss * g["programs"] * g["load_bytes"]) / (chip["l2_gbps"] * 1e9)
        return {"time_us": np.maximum(np.maximum(sm, hbm), l2) * 1e6 + chip["launch_us"]}


def main() -> int:
    chip = load_chip("h200")
    e0 = dict(get_operator("depthwise_conv", "cuda").constants(chip), k_issue=1.0)
    shapes = pd.read_csv(SHAPES).set_index("name")
    grid = pd.read_csv(GRIDS["nhwc"])
    torch = grid[grid["impl"] == "torch"].groupby("name")["ms"].min()
    grid = grid[grid["impl"] == "triton"].astype({k: int for k in KEY})
    grid = grid.merge(pd.read_csv(SASS).drop(columns=["N", "C", "H", "W"]), on=KEY, how="left")
    grid = grid.rename(columns={"stack_bytes": "stack"})

    def data(names):
        parts, secs, ids = [], [], []
        for i, name in enumerate(names):
            rows = grid[grid["name"] == name]
            s = shapes.loc[name]
            p = parse_problem("depthwise_conv", {**{k: int(s[k]) for k in FIELDS}, "layout": "nhwc"}, "fp16")
            c = {k: rows[k].fillna(1).astype(np.int64).to_numpy() for k in M.KNOBS if k != "scheme"}
            c["scheme"] = np.full(len(rows), VECTOR, dtype=np.int64)
            g = {
                k: np.broadcast_to(np.asarray(v, float), (len(rows),)).copy()
                for k, v in M.prepare(p, chip, c).items()
            }
            loop = np.where(rows["body_total"] > 0, rows["kh"], 0)
            g["warp_instrs"] = (
                (rows["rest_total"] + loop * rows["body_total"]) * rows["num_warps"]
            ).to_numpy(float)
            g["n_regs"], g["stack"] = rows["n_regs"].to_numpy(float), rows["stack"].to_numpy(float)
            parts.append(g)
            secs.append(rows["ms"].to_numpy() * 1e-3)
            ids.append(np.full(len(rows), i))
        prepared = {k: np.concatenate([g[k] for g in parts]) for k in parts[0]}
        return types.SimpleNamespace(
            prepared=prepared,
            seconds=np.concatenate(secs),
            shape_of=np.concatenate(ids),
            shapes=names,
            pipes={},
        )

    names = list(dict.fromkeys(grid["name"]))
    fitted = data([n for n in names if not shapes.loc[n, "heldout"]])
    held = data([n for n in names if shapes.loc[n, "heldout"]])

    def geomean(x):
        return float(np.exp(np.mean(np.log(list(x)))))

    def score(label, model, e):
        out = {}
        for d in (fitted, held):
            t = model.timing(d.prepared, chip, e)["time_us"]
            for i, n in enumerate(d.shapes):
                ms = d.seconds[d.shape_of == i]
                pick = ms[int(np.argmin(t[d.shape_of == i]))]
                out[n] = (ms.min() / pick, torch[n] * 1e-3 / pick)
        cnn = [n for n in names if "conv1d" not in n]
        print(
            f"{label:42s} top-1 fitted {geomean(out[n][0] for n in fitted.shapes):.3f}, held out "
            f"{geomean(out[n][0] for n in held.shapes):.3f}; CNN layers / faster torch format "
            f"{geomean(out[n][1] for n in cnn):.3f}"
        )

    score("shipped", Variant(), e0)
    score("refit", Variant(), _fit(Variant(), chip, fitted, e0, NHWC))
    score("true registers", Variant(regs=True), e0)
    score("true registers, refit", Variant(regs=True), _fit(Variant(regs=True), chip, fitted, e0, NHWC))
    names_l = ["k_issue", *(k for k in NHWC if k not in ("dw_nhwc_elem_lanes", "dw_nhwc_vec_lanes"))]
    v = Variant(regs=True, lanes=True)
    score("true registers and instructions, refit", v, _fit(v, chip, fitted, e0, names_l))
    within_shape(grid, shapes, chip)
    return 0


def within_shape(grid: pd.DataFrame, shapes: pd.DataFrame, chip) -> None:
    """How far the executed instructions explain the measured times: the time over the pure issue time (4 warp
    instructions a cycle an SM, programs spread evenly), and a least-squares fit of log time, centred per shape, on
    log issue time, resident warps, rounds of resident programs, elements a thread, G and the useful share."""
    d = grid[grid["stack"] == 0].copy()
    s = shapes.loc[d["name"]]
    planes = {}
    for name in shapes.index:
        p = parse_problem("depthwise_conv", {k: int(shapes.loc[name, k]) for k in FIELDS}, "fp16")
        planes[name] = p.out_h * p.out_w
    plane = d["name"].map(planes).to_numpy()
    g, bp, w = d["groups_per_op"], d["BLOCK_P"], d["num_warps"]
    programs = np.ceil(plane / bp) * np.ceil(s["C"].to_numpy() / g) * s["N"].to_numpy()
    instrs = d["rest_total"] + np.where(d["body_total"] > 0, d["kh"] * d["body_total"], 0)
    issue_us = programs * w * instrs / (chip.cores * 4 * chip.clock_hz) * 1e6
    ratio = d["ms"] * 1e3 / issue_us
    occ = np.clip(np.minimum(chip["regs_per_sm"] // (np.ceil(d["n_regs"] / 8) * 8 * 32 * w), 64 // w), 1, 32)
    x = pd.DataFrame(
        {
            "issue": np.log(issue_us),
            "warps": np.log(occ * w),
            "rounds": np.log(np.ceil(programs / chip.cores / occ)),
            "ept": np.log(g * bp / (32 * w)),
            "G": np.log(g),
            "useful": np.log(s["C"].to_numpy() * plane * s["N"].to_numpy() / (programs * g * bp)),
        }
    )
    y = np.log(d["ms"])
    y, x = y - y.groupby(d["name"]).transform("mean"), x - x.groupby(d["name"]).transform("mean")
    coef, *_ = np.linalg.lstsq(x.to_numpy(), y.to_numpy(), rcond=None)
    r2 = 1 - np.var(y.to_numpy() - x.to_numpy() @ coef) / np.var(y.to_numpy())
    print(
        f"time / pure issue time over {len(d)} tilings that do not spill: {ratio.min():.1f}-{ratio.max():.1f}x "
        f"(median {ratio.median():.1f})"
    )
    print(
        f"within-shape fit of log time: R^2 {r2:.2f}; coefficients "
        + ", ".join(f"{k} {v:+.2f}" for k, v in zip(x.columns, coef, strict=True))
    )


if __name__ == "__main__":
    raise SystemExit(main())
