"""Ascend matmul terms of issue 29: write-backs on their own channel, into L2 while the output fits, and the fixed
costs (launch head, split-K reduction pass) shown by explain."""

from __future__ import annotations

import pytest

import tiler.api as api
from tiler.hardware import load_chip

CHIP = "ascend910b2"
TILE = {"base_m": 128, "base_n": 256, "base_k": 64, "step_ka": 4, "step_kb": 4, "split_k": 1}


def _explain(shape: str, chip=CHIP, **tiling):
    return api.explain(op="matmul", chip=chip, shape=shape, tiling={**TILE, **tiling})


def test_reads_and_write_backs_overlap():
    """An MTE2-bound tile's write-out runs on the write channel beside its reads: the busiest core is not busy for
    the reads plus the writes (it was, when they shared one port)."""
    slow_l2 = load_chip(CHIP).with_values({"l2_efficiency": 0.3})  # MTE2-bound whatever the fit
    row = _explain("M=4096,N=4096,K=512", chip=slow_l2, weight_resident=0).row
    assert row["bound"] == "mte2" and row["fixpipe_us"] > 0
    assert row["core_us"] < row["mte2_us"] + row["fixpipe_us"]


def test_write_backs_land_in_l2_while_the_output_fits():
    """Per output byte the fixpipe is slower once the output no longer fits the usable L2 (it evicts to HBM)."""
    chip = load_chip(CHIP)
    usable = chip["l2_bytes"] * chip["l2_usable_fraction"]
    small, big = 4096, 16384  # fp16 outputs of 32 MB and 512 MB
    assert small * small * 2 <= usable < big * big * 2
    per_byte = {}
    for n in (small, big):
        row = _explain(f"M={n},N={n},K=256").row
        per_byte[n] = row["fixpipe_us"] / (n * n * 2 / row["cores_used"])
    assert per_byte[big] > 1.5 * per_byte[small]


def test_explain_shows_the_fixed_costs():
    chip = load_chip(CHIP)
    ex = _explain("M=1024,N=1024,K=1024")
    line = next(a for a in ex.advice if a.startswith("fixed costs:"))
    head = chip["head_base_us"] + chip["head_per_core_us"] * ex.row["cores_used"]
    assert f"head {head:.1f} us" in line and "split-K" not in line
    split = _explain("M=256,N=256,K=16384", split_k=8)
    line = next(a for a in split.advice if a.startswith("fixed costs:"))
    assert "split-K reduction" in line
    # the reduction pass is part of the kernel time beyond the makespan and the head
    gap = split.row["time_us"] - split.row["core_us"]
    head = chip["head_base_us"] + chip["head_per_core_us"] * split.row["cores_used"]
    assert gap == pytest.approx(head + float(line.split("split-K reduction ")[1].split(" us")[0]), abs=0.1)


def test_unit_flag_hides_the_write_out_behind_the_next_blocks_mmads():
    """One L0C stage (128x256 fp32 fills it): with the unit flag (a fixpipe chip, fp16) a cube-bound GEMM's
    write-outs overlap the next block's MMADs, so it is faster than on the same chip without a fixpipe by most of
    the write-out; int8 has no unit flag, so the fixpipe changes nothing for a plain int8 GEMM."""
    chip = load_chip(CHIP)
    no_flag = chip.with_values({"has_fixpipe": False})
    shape = "M=4096,N=4096,K=4096"
    flag, serial = (api.explain(op="matmul", chip=c, shape=shape, tiling=TILE).row for c in (chip, no_flag))
    assert flag["bound"] == serial["bound"] == "cube"
    assert serial["time_us"] - flag["time_us"] > 0.5 * serial["fixpipe_us"]
    i8 = [
        api.explain(op="matmul", chip=c, shape=shape, dtype="int8", tiling=TILE).row["time_us"]
        for c in (chip, no_flag)
    ]
    assert i8[0] == pytest.approx(i8[1], rel=1e-12)
