"""A measured search with `vendor`: the vendor call timed once beside it, in the result, the JSON and the report.

The GPU runner and the vendor call are replaced by stand-ins (CI has no GPU): the measured time of a tiling is the
model's prediction plus 10 %, the vendor's a fixed time; tests/test_gpu_user_autotune.py runs the real ones."""

from __future__ import annotations

import json

import pytest
from click.testing import CliRunner

import tiler
from tiler.cli import cli
from tiler.errors import TilerError
from tiler.operator import get_operator

SHAPE = {"M": 1024, "N": 1024, "K": 1024}


@pytest.fixture
def fake_gpu(monkeypatch, tmp_path):
    monkeypatch.chdir(tmp_path)  # the measured searches' default storage (results/studies.db) goes here
    cls = type(get_operator("matmul", "cuda"))
    calls = []

    def runner(self, name):
        return lambda doc: doc["estimate"]["time_us"] * 1.1

    def vendor(self, name):
        def timed(doc):
            calls.append(doc["problem"]["shape"])
            return {"name": "cublas", "us": 20.0}

        return timed

    monkeypatch.setattr(cls, "runner", runner)
    monkeypatch.setattr(cls, "vendor", vendor)
    return calls


def test_the_vendor_is_timed_once_for_the_problem(fake_gpu):
    res = tiler.search("matmul", "h200", SHAPE, strategy="tpe", trials=4, measure="triton", vendor=True)
    assert res.vendor == {"name": "cublas", "us": 20.0}
    assert len(fake_gpu) == 1 and fake_gpu[0]["M"] == 1024
    plain = tiler.search("matmul", "h200", SHAPE, strategy="tpe", trials=4, measure="triton")
    assert plain.vendor is None and len(fake_gpu) == 1


def test_json_and_table_carry_the_vendor_and_the_ratio(fake_gpu, tmp_path):
    args = [
        "search",
        "--op",
        "matmul",
        "--chip",
        "h200",
        "--shape",
        "M=1024,N=1024,K=1024",
        "--strategy",
        "tpe",
    ]
    args += ["--trials", "4", "--measure", "triton", "--vendor"]
    out = CliRunner().invoke(cli, [*args, "--format", "json"])
    assert out.exit_code == 0, out.output
    meas = json.loads(out.stdout)["measurement"]
    assert meas["vendor"] == {"name": "cublas", "us": 20.0}
    assert meas["vs_vendor"] == pytest.approx(20.0 / meas["measured_us"])
    table = CliRunner().invoke(cli, args)
    assert "vendor    cublas 20.00 us: the measured best runs at" in table.stdout
    # the report reads it back from the document
    from tiler.report import read_result

    doc = tmp_path / "measured.json"
    doc.write_text(out.stdout)
    assert read_result(doc).entries[0].vendor == ("cublas", 20.0)


def test_vendor_needs_a_runner_and_a_measured_search(tmp_path, monkeypatch):
    monkeypatch.chdir(
        tmp_path
    )  # a measured search's default storage is results/studies.db under the working folder
    with pytest.raises(TilerError, match="vendor: needs a measured search"):
        tiler.search("matmul", "h200", SHAPE, vendor=True)
    with pytest.raises(TilerError, match="vendor: needs a runner"):
        tiler.search("matmul", "h200", SHAPE, strategy="tpe", trials=2, measure="echo {tiling}", vendor=True)
    with pytest.raises(TilerError, match="no vendor call"):
        tiler.search("matmul", "ascend910b3", SHAPE, strategy="tpe", trials=2, measure="triton", vendor=True)
