"""Warm L2 inputs (issue 29, docs/model.md section 11 "Warm L2"): a kernel timed in a loop on the same tensors
finds A and B in L2 when they fit it, so no panel's first touch goes to HBM. The chip value `l2_warm_inputs` says
so (a measurement condition the fit from totals sets; no shipped profile has it)."""

from __future__ import annotations

import pytest
from conftest import ascend_floors_hold

import tiler
from tiler.hardware import load_chip
from tiler.problem import parse_problem

CHIP = "ascend910b2"


def _warm(chip_id: str = CHIP):
    return load_chip(chip_id).with_values({"l2_warm_inputs": 1}, tag="measurement")


def _best(shape: str, chip, dtype: str = "fp16"):
    return tiler.search(op="matmul", chip=chip, shape=shape, dtype=dtype, top=1, runnable=False).row(0)


def test_no_shipped_profile_is_warm():
    """Cold is the default: every first touch of a panel comes from HBM unless a measurement says otherwise."""
    for chip_id in (
        "ascend910b1",
        "ascend910b2",
        "ascend910b3",
        "ascend910b4",
        "ascend910_9392",
        "ascend310p3",
    ):
        assert not load_chip(chip_id).get("l2_warm_inputs", 0)


def test_warm_inputs_that_fit_l2_skip_the_first_touch_misses():
    """2048^3 fp16 (16 MB of inputs): cold, the first touches miss and MTE2 binds; warm, every read hits L2, MTE2
    falls and the kernel gets faster; the HBM traffic is the output's alone."""
    cold = _best("M=2048,N=2048,K=2048", load_chip(CHIP))
    warm = _best("M=2048,N=2048,K=2048", _warm())
    assert cold["l2_hit_rate"] < 1.0 and warm["l2_hit_rate"] == 1.0
    assert warm["mte2_us"] < 0.9 * cold["mte2_us"]
    assert warm["time_us"] < cold["time_us"]
    assert cold["hbm_bytes"] > 2 * 2048 * 2048 * 2 and warm["hbm_bytes"] == 2048 * 2048 * 2


def test_inputs_larger_than_the_usable_l2_stay_cold():
    """8192^3 fp16: 256 MB of inputs cannot stay resident between calls, so warm changes nothing."""
    cold = _best("M=8192,N=8192,K=8192", load_chip(CHIP))
    warm = _best("M=8192,N=8192,K=8192", _warm())
    assert warm["time_us"] == cold["time_us"] and warm["hbm_bytes"] == cold["hbm_bytes"]


@pytest.mark.parametrize(
    "fields, dtype, chip_id",
    [
        ({"M": 2048, "N": 2048, "K": 2048}, "fp16", "ascend910b2"),
        ({"M": 1, "N": 4096, "K": 4096}, "bf16", "ascend910b3"),
        ({"M": 333, "N": 777, "K": 129, "layout": "nt"}, "fp16", "ascend910b4"),
        ({"M": 512, "N": 2048, "K": 1024, "scale": "channel"}, "int8", "ascend910b2"),
    ],
)
def test_bounds_and_roofline_stay_below_warm_estimates(fields, dtype, chip_id):
    """The search's floors (quick_bound, bound, prefix_bound) and the roofline never exceed a warm estimate: the
    roofline drops the inputs' HBM bytes, and the floors see the same all-hit tile costs; the fast estimate equals
    the reference."""
    ascend_floors_hold(parse_problem("matmul", fields, dtype), _warm(chip_id), seed=11)
