"""What a measured total proves (issue 29, docs/model.md section 11, "Session 18"): a kernel's MMADs cannot run
faster than the cube's peak at the fitted efficiency, so each total gives mac_efficiency >= flops / (peak x
measured), and the fit from totals keeps its constant at or above the highest such floor of its rows."""

from __future__ import annotations

import pandas as pd
import pytest

from tiler.calibrate_totals import calibrate_totals, floors
from tiler.hardware import load_chip
from tiler.operator import get_operator
from tiler.problem import parse_problem

CHIP = "ascend910b2"


def _chip():
    return load_chip(CHIP).with_values({"mac_efficiency": 0.95, "head_base_us": 5.0}, tag="estimated")


def _peak_us(m: int, n: int, k: int) -> float:
    return 2.0 * m * n * k / (load_chip(CHIP).peak_tflops("fp16") * 1e12) * 1e6


def test_a_total_proves_the_cube_rate_it_reached():
    model = get_operator("matmul", "ascend")
    p = parse_problem("matmul", {"M": 4096, "N": 4096, "K": 4096}, "fp16")
    t = _peak_us(4096, 4096, 4096) / 0.9  # a kernel at 90 % of the peak, all costs included
    assert model.totals_floors(p, _chip(), t * 1e-6)["mac_efficiency"] == pytest.approx(0.9)
    small = parse_problem("matmul", {"M": 1024, "N": 1024, "K": 1024}, "fp16")
    got = floors(model, _chip(), [small, p], [1e-3, t * 1e-6], ["mac_efficiency", "head_base_us"])
    assert got["mac_efficiency"][0] == pytest.approx(0.9) and got["mac_efficiency"][1] == p.label()
    assert "head_base_us" not in got  # no total proves a floor on the head


def test_the_fit_from_totals_stays_at_or_above_the_floor():
    """4096^3 at 85 % of the peak, two other shapes of its size at 60 %: without the floor the fit follows the
    majority, below what 4096^3 proves; with it, the rate stays at or above 0.85."""
    rows = pd.DataFrame(
        [
            {"M": 4096, "N": 4096, "K": 4096, "time_us": _peak_us(4096, 4096, 4096) / 0.85},
            {"M": 4096, "N": 4096, "K": 2048, "time_us": _peak_us(4096, 4096, 2048) / 0.6},
            {"M": 2048, "N": 4096, "K": 4096, "time_us": _peak_us(2048, 4096, 4096) / 0.6},
        ]
    )
    kw = dict(folds=0, params=["mac_efficiency"], rounds=2)
    res = calibrate_totals(_chip(), "matmul", rows, **kw)
    assert res.values["mac_efficiency"] >= 0.85 * (1 - 1e-4)
    assert "mac_efficiency >= 0.85" in res.summary()
    model = type(get_operator("matmul", "ascend"))
    proof = model.totals_floors
    try:
        del (
            model.totals_floors
        )  # the same fit with nothing proved: the majority pulls the rate below the floor
        free = calibrate_totals(_chip(), "matmul", rows, **kw)
    finally:
        model.totals_floors = proof
    assert free.values["mac_efficiency"] < 0.8
