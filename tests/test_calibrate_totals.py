"""Calibration from kernel totals (tiler.calibrate_totals): rows with a problem and a time, the tiling unknown.

The model's best tiling stands in for the library's; the fit must recover constants that generated the totals,
fit the fastest kernel of a problem (not the slower ones), hold whole shapes out in its k-fold, and reach the API,
the CLI and an msprof op_summary without tilings."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
from click.testing import CliRunner

import tiler.api as api
from tiler.calibrate_totals import TotalsResult, calibrate_totals
from tiler.cli import cli, main
from tiler.hardware import load_chip

CHIP = "ascend910b2"
SHAPES = [(2048, 2048, 2048), (4096, 1024, 2048), (1024, 1024, 1024)]  # two cube-bound, one small
TRUTH = {"mac_efficiency": 0.6, "head_base_us": 6.0}
START = {
    "mac_efficiency": 0.95,
    "head_base_us": 1.0,
}  # the fits start here, whatever the shipped profile holds


def _start():
    return load_chip(CHIP).with_values(START, tag="estimated")


def _optimum_us(chip, m, n, k, dtype="fp16") -> float:
    res = api.search(op="matmul", chip=chip, shape=f"M={m},N={n},K={k}", dtype=dtype, top=1, runnable=False)
    return float(res.row(0)["time_us"])


@pytest.fixture(scope="module")
def totals() -> pd.DataFrame:
    """Totals the model's optimum gives under TRUTH: what a library at the model's optimum would measure."""
    true_chip = load_chip(CHIP).with_values(TRUTH)
    return pd.DataFrame(
        [{"M": m, "N": n, "K": k, "time_us": _optimum_us(true_chip, m, n, k)} for m, n, k in SHAPES]
    )


@pytest.fixture(scope="module")
def fitted(totals) -> TotalsResult:
    return calibrate_totals(_start(), "matmul", totals, folds=0, params=list(TRUTH))


def test_recovers_the_constants_that_made_the_totals(fitted):
    for k, v in TRUTH.items():
        assert fitted.values[k] == pytest.approx(v, rel=0.02), k
    # the shipped profile is not the truth: the fit moved it
    assert abs(np.log(fitted.start["mac_efficiency"] / TRUTH["mac_efficiency"])) > 0.1
    assert np.allclose(fitted.rows["measured_us"] / fitted.rows["model_us"], 1.0, rtol=0.02)
    assert "stood in for the library's" in fitted.summary()
    assert "from totals" in fitted.source and fitted.chip.tags["mac_efficiency"] == "fitted"


def test_the_fastest_kernel_of_a_problem_is_the_one_fitted(totals, fitted):
    slower = totals.iloc[[0]].assign(time_us=totals["time_us"].iloc[0] * 1.7)  # a worse library kernel
    res = calibrate_totals(_start(), "matmul", pd.concat([totals, slower]), folds=0, params=list(TRUTH))
    assert res.values == pytest.approx(fitted.values, rel=1e-3)
    assert len(res.rows) == len(totals) + 1  # every row reported
    assert res.rows["measured_us"].iloc[-1] / res.rows["model_us"].iloc[-1] == pytest.approx(1.7, rel=0.03)


@pytest.mark.slow
def test_kfold_holds_every_dtype_of_a_shape_out_together(totals):
    true_chip = load_chip(CHIP).with_values(TRUTH)
    bf16 = totals.assign(dtype="bf16")
    bf16["time_us"] = [_optimum_us(true_chip, m, n, k, "bf16") for m, n, k in SHAPES]
    res = calibrate_totals(
        _start(), "matmul", pd.concat([totals.assign(dtype="fp16"), bf16]), folds=3, params=list(TRUTH)
    )
    folds = res.rows.groupby(["M", "N", "K"])["cv_fold"].nunique()
    assert (folds == 1).all() and res.rows["cv_fold"].nunique() == 3
    assert np.isfinite(res.rows["cv_model_us"]).all()
    # the held-out optimum comes from constants fitted without the shape: far closer to the truth's totals than the
    # shipped profile's optimum
    assert res.metrics["cv_error"] < 0.5 * res.metrics["error_before"]
    assert "k-fold by shape" in res.summary()


def test_api_dispatches_totals_and_tilings(totals):
    res = api.calibrate("matmul", _start(), totals, folds=0, params=["head_base_us"], rounds=1)
    assert isinstance(res, TotalsResult) and res.rounds == 1
    with pytest.raises(Exception, match="starts: hbm_efficiency not fitted"):
        api.calibrate("matmul", CHIP, totals, params=["head_base_us"], starts=[{"hbm_efficiency": 0.9}])
    with pytest.raises(Exception, match="fit-shapes: not with totals"):
        api.calibrate("matmul", CHIP, totals, fit_shapes=["1024x1024x1024"])


def test_cli_fits_totals_and_writes_the_profile(tmp_path, totals, capsys):
    data, out = tmp_path / "lib.csv", tmp_path / "fitted.toml"
    totals.to_csv(data, index=False)
    r = CliRunner().invoke(
        cli,
        [
            "calibrate",
            "--chip",
            CHIP,
            "--op",
            "matmul",
            "--measurements",
            str(data),
            "--out",
            str(out),
            "--folds",
            "0",
            "--rounds",
            "2",
        ],
    )
    assert r.exit_code == 0, r.output
    assert "stood in for the library's" in r.output
    text = out.read_text()
    assert "from totals" in text
    code = main(
        [
            "calibrate",
            "--chip",
            CHIP,
            "--op",
            "matmul",
            "--measurements",
            str(data),
            "--out",
            str(out),
            "--rounds",
            "0",
        ]
    )
    err = capsys.readouterr().err
    assert code == 2 and err.strip() == "error: --rounds: must be an integer in 1..20, got 0"


def test_an_op_summary_without_tilings_is_fitted_from_totals(tmp_path, totals):
    rows = [
        {
            "Op Name": f"MatMul_{i}",
            "OP Type": "MatMul",
            "Input Shapes": f"{m},{k};{k},{n}",  # CSV-quoted by the writer (commas)
            "Input Data Types": "DT_FLOAT16;DT_FLOAT16",
            "Task Duration(us)": t,
        }
        for i, (m, n, k, t) in enumerate(totals[["M", "N", "K", "time_us"]].itertuples(index=False))
    ]
    rows.append({**rows[0], "Op Name": "Add_9", "OP Type": "Add", "Input Shapes": "8,8"})
    path = tmp_path / "op_summary_0.csv"
    pd.DataFrame(rows).to_csv(path, index=False)
    res = api.calibrate("matmul", _start(), path, folds=0, params=list(TRUTH))
    assert isinstance(res, TotalsResult)
    assert len(res.rows) == len(totals)  # the Add kernel is not a matmul: reported, not fitted
    assert res.notes and "not used" in res.notes[0]
    assert res.values["mac_efficiency"] == pytest.approx(TRUTH["mac_efficiency"], rel=0.02)
