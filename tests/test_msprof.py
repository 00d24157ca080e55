"""msprof ingest and Ascend calibration: the round trip, the manifest, and malformed profiler files."""

from __future__ import annotations

import json

import numpy as np
import pandas as pd
import pytest

from tiler import msprof
from tiler.calibrate import calibrate
from tiler.cli import main
from tiler.hardware import load_chip
from tiler.operator import get_operator
from tiler.ops.matmul.problem import Matmul
from tiler.problem import parse_problem
from tiler.search import search
from tiler.space import load_space

SHAPES = [(1024, 2048, 512), (4096, 4096, 4096), (512, 512, 8192), (2048, 1024, 4096), (128, 4096, 4096),
          (3000, 3000, 1000), (768, 768, 768), (16, 8192, 4096)]  # fmt: skip
PIPES = ("mac", "scalar", "mte1", "mte2", "fixpipe")


def _op_summary(chip_truth, chip_search, shapes=SHAPES, per_shape=5) -> pd.DataFrame:
    """An msprof-shaped op_summary of the model's own predictions under `chip_truth` for the top tilings the
    search finds under `chip_search` (8 shapes x 5 tilings = 40 rows), the tiling in a `tiling` column."""
    model, space = get_operator("matmul", "ascend"), load_space("matmul", "ascend")
    rows = []
    for M, N, K in shapes:
        p = parse_problem("matmul", {"M": M, "N": N, "K": K})
        res = search(p, chip_search, space, top=per_shape)
        est = model.estimate(p, chip_truth, res.cands)
        for i in range(len(est["time_us"])):
            rows.append(
                {
                    "Op Name": f"MatMul_{len(rows)}",
                    "OP Type": "MatMulV2",
                    "Task Type": "AI_CORE",
                    "Task Duration(us)": est["time_us"][i],
                    "Block Dim": est["cores_used"][i],
                    "Input Shapes": f"{M},{K};{K},{N}",
                    "Input Data Types": "DT_FLOAT16;DT_FLOAT16",
                    "Input Formats": "ND;ND",
                    "Output Shapes": f"{M},{N}",
                    **{f"aic_{pp}_time(us)": est[f"{pp}_us"][i] for pp in PIPES},
                    "tiling": json.dumps(space.decode(res.cands, i)),
                }
            )
    return pd.DataFrame(rows).astype(str)


@pytest.fixture(scope="module")
def b3():
    return load_chip("ascend910b3")


def test_round_trip_recovers_the_scaled_mte2_constant(b3):
    """The model's predictions with the GM->L1 port 20% slower (MTE2 1.25x slower where the port binds), written
    as an op_summary and calibrated from the shipped profile: the port comes back within 5%, every other constant
    stays within 1%, and the fitted model predicts the rows within 3%."""
    port = b3["gm_to_l1_bytes_per_cycle"]
    truth = b3.with_values({"gm_to_l1_bytes_per_cycle": port * 0.8})
    got = msprof.ingest(_op_summary(truth, b3), "matmul")
    assert len(got.table) == 40 and not got.unmatched
    assert {f"{pp}_us" for pp in PIPES} <= set(got.table.columns)
    res = calibrate(b3, "matmul", got.table, folds=0)
    assert res.values["gm_to_l1_bytes_per_cycle"] == pytest.approx(port * 0.8, rel=0.05)
    for k, v in res.values.items():
        if k != "gm_to_l1_bytes_per_cycle":
            assert v == pytest.approx(res.start[k], rel=0.01), k
    model = get_operator("matmul", "ascend")
    from tiler.calibrate import load_measurements

    data = load_measurements(res.chip, "matmul", got.table)
    pred = model.timing(data.prepared, res.chip, model.constants(res.chip))["time_us"] * 1e-6
    assert np.max(np.abs(pred / data.seconds - 1)) < 0.03
    # before the fit the MTE2 pipe is off where the port binds: the fit had something to recover
    before = model.timing(data.prepared, b3, model.constants(b3))["mte2_us"] * 1e-6
    assert np.max(data.pipes["mte2"] / before) > 1.1


def test_manifest_matches_op_name_and_reports_other_kernels(tmp_path, b3, capsys):
    """`tiler search --manifest` writes the launch name; an op_summary whose rows carry that name (and rows of
    other kernels) calibrates from the CLI; the other rows are reported on one stderr line, not guessed."""
    man = tmp_path / "manifest.csv"
    for shape in ("M=1024,N=2048,K=512", "M=2048,N=1024,K=4096"):
        assert (
            main(
                [
                    "search",
                    "--op",
                    "matmul",
                    "--chip",
                    "ascend910b3",
                    "--shape",
                    shape,
                    "--manifest",
                    str(man),
                ]
            )
            == 0
        )
    names = [
        ln.split(" as ")[-1].strip() for ln in capsys.readouterr().err.splitlines() if "launch this" in ln
    ]
    manifest = msprof.read_manifest(man)
    assert list(manifest["op_name"]) == names and len(names) == 2
    rows = [
        {"Op Name": n, "OP Type": "MatMulV2", "Task Duration(us)": "50.0", "aic_mte2_time(us)": "40"}
        for n in names
    ]
    rows.append(
        {"Op Name": "aclnnAdd_1", "OP Type": "Add", "Task Duration(us)": "3.0", "aic_mte2_time(us)": ""}
    )
    prof = tmp_path / "op_summary_0.csv"
    pd.DataFrame(rows).to_csv(prof, index=False)
    out = tmp_path / "ascend910b3.toml"
    code = main(["calibrate", "--chip", "ascend910b3", "--op", "matmul", "--measurements", str(prof),
                 "--manifest", str(man), "--out", str(out), "--folds", "0"])  # fmt: skip
    err = capsys.readouterr().err
    assert code == 0 and out.is_file()
    assert "1 row(s) not used (4): Op Name not in the manifest" in err
    # the written profile is a profile: --hardware-dir finds it under its id
    assert load_chip("ascend910b3", tmp_path).tags["gm_to_l1_bytes_per_cycle"] in ("fitted", "confirmed")


def test_from_profiler_reads_matmul_input_shapes():
    assert Matmul.from_profiler("1024,512;512,2048", "DT_FLOAT16;DT_FLOAT16", "ND;ND") == (
        {"M": 1024, "N": 2048, "K": 512, "batch": 1, "layout": "nn", "b_format": "nd"},
        "fp16",
    )
    fields, dtype = Matmul.from_profiler("8,1,4096;8,11008,4096", "BF16;BF16", "ND;FRACTAL_NZ")
    assert (fields["batch"], fields["layout"], fields["b_format"], dtype) == (8, "nt", "nz", "bf16")
    assert Matmul.from_profiler("3,4", "FLOAT16") is None  # one operand: not a matmul
    assert Matmul.from_profiler("3,4;5,6", "FLOAT16") is None  # no common K


@pytest.mark.parametrize(
    "content, words",
    [
        ("", "empty file"),
        ("Op Name,OP Type\nmm,MatMul\n", "Task Duration(us)"),  # no duration column
        ("Name,Task Duration (us)\nmm,3\n", "Op Name"),  # another version's header
        (
            "Op Name,Task Duration(us),tiling\nmm,fast,{}\n",
            "row 2: column 'Task Duration(us)'",
        ),  # not a number
        (
            "Op Name,Task Duration(us),tiling\nAdd_1,3.0,\n",
            "no row is a matmul kernel",
        ),  # other operators only
        ("Op Name,Task Duration(us)\nmm,3\n", "no manifest"),  # nothing to match rows with
    ],
    ids=["empty", "no-duration", "other-version", "non-numeric", "other-operators", "unmatchable"],
)
def test_malformed_profiler_files_are_one_line_exit_2_and_write_nothing(tmp_path, capsys, content, words):
    prof = tmp_path / "op_summary.csv"
    prof.write_text(content)
    out = tmp_path / "out.toml"
    code = main(
        [
            "calibrate",
            "--chip",
            "ascend910b3",
            "--op",
            "matmul",
            "--measurements",
            str(prof),
            "--out",
            str(out),
        ]
    )
    err = capsys.readouterr().err.strip().splitlines()
    assert code == 2 and len(err) == 1 and words in err[0] and "Traceback" not in err[0], err
    assert not out.exists()


def test_a_bad_manifest_is_refused(tmp_path, capsys):
    man = tmp_path / "m.csv"
    man.write_text("op_name,op\nx,matmul\n")
    prof = tmp_path / "p.csv"
    prof.write_text("Op Name,Task Duration(us)\nx,3\n")
    code = main(["calibrate", "--chip", "ascend910b3", "--op", "matmul", "--measurements", str(prof),
                 "--manifest", str(man), "--out", str(tmp_path / "o.toml")])  # fmt: skip
    assert code == 2 and "missing column(s) chip, dtype, tiling" in capsys.readouterr().err
