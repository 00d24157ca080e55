"""`tiler rank` on a measured table that also timed the vendor call: how fast the model's pick runs against it."""

from __future__ import annotations

import json

import pandas as pd
import pytest
from click.testing import CliRunner

from tiler.cli import cli

SHAPE = "M=1024,N=4096,K=4000"
ROWS = [  # three tilings of the user's kernel (no ORDER, no SPLIT_K columns) with measured times, and cuBLAS
    dict(BLOCK_M=128, BLOCK_N=256, BLOCK_K=64, GROUP_M=8, num_warps=8, num_stages=4, impl="triton", ms=0.050),
    dict(BLOCK_M=32, BLOCK_N=32, BLOCK_K=32, GROUP_M=8, num_warps=4, num_stages=3, impl="triton", ms=0.400),
    dict(BLOCK_M=64, BLOCK_N=64, BLOCK_K=64, GROUP_M=8, num_warps=4, num_stages=3, impl="triton", ms=0.120),
    dict(impl="torch", ms=0.040),
    dict(impl="torch", ms=0.044),
    dict(impl="torch", ms=0.048),
]


def _rank(tmp_path, rows, fmt="json"):
    path = tmp_path / "measured.csv"
    pd.DataFrame(rows).to_csv(path, index=False)
    args = ["rank", "--op", "matmul", "--chip", "h200", "--shape", SHAPE, "--candidates", str(path)]
    res = CliRunner().invoke(cli, [*args, "--format", fmt])
    assert res.exit_code == 0, res.output
    return res


def test_vendor_rows_give_the_picks_speed_against_the_vendor(tmp_path):
    doc = json.loads(_rank(tmp_path, ROWS).stdout)
    pick = doc["ranked"][0]
    assert pick["BLOCK_M"] == 128  # the model ranks the big tile first (its measured time is the best here)
    v = doc["vendor"]
    assert v["name"] == "torch" and v["samples"] == 3
    assert v["us"] == pytest.approx(44.0)  # the median of the vendor's rows
    assert v["pick_speedup"] == pytest.approx(44.0 / (pick["ms"] * 1e3))
    assert v["best_speedup"] == pytest.approx(44.0 / 50.0)


def test_a_vendor_column_beside_the_rows_and_the_table_block(tmp_path):
    rows = [{**r, "vendor_us": 44.0, "vendor": "cublas"} for r in ROWS if r["impl"] == "triton"]
    res = _rank(tmp_path, rows, fmt="table")
    assert (
        "vendor (cublas, 3 measured rows): 44.000 us; the model's pick runs at 0.880x its speed" in res.stdout
    )


def test_no_vendor_no_line(tmp_path):
    res = _rank(tmp_path, [r for r in ROWS if r["impl"] == "triton"])
    assert "vendor" not in json.loads(res.stdout)
    assert "agreement" in json.loads(res.stdout)
