"""The CLI: real answers on stdout, one-line errors with exit code 2 on bad input."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest
from conftest import CATLASS_DEFAULT

from tiler.cli import main
from tiler.export import validate
from tiler.hardware import load_chip
from tiler.operator import get_operator
from tiler.ops.matmul.views import check_tcube
from tiler.problem import parse_problem


def run(args, capsys):
    code = main(args)
    out = capsys.readouterr()
    return code, out.out, out.err


def test_search_json_exports_a_valid_document(tmp_path, capsys):
    path = tmp_path / "t.json"
    code, out, err = run(
        [
            "search",
            "--op",
            "matmul",
            "--chip",
            "ascend910b3",
            "--shape",
            "M=4096,N=4096,K=4096",
            "--format",
            "json",
            "--export",
            str(path),
        ],
        capsys,
    )
    assert code == 0
    doc = json.loads(out)
    assert doc["search"]["proven_optimal"] is True
    saved = json.loads(path.read_text())
    validate(saved)
    assert saved["search"]["target"] == "any"
    # under `any`, a view is exported only where its target's rules hold (this tiling: neither's, see below)
    chip = load_chip("ascend910b3")
    problem = parse_problem("matmul", saved["problem"]["shape"], "fp16")
    for name, view in saved["targets"].items():
        assert get_operator("matmul", "ascend").TARGETS[name].broken(view, chip, problem) == []
    for target in ("catlass", "ascendc"):
        path = tmp_path / f"{target}.json"
        code, _, _ = run(
            [
                "search",
                "--op",
                "matmul",
                "--chip",
                "ascend910b3",
                "--shape",
                "M=4096,N=4096,K=4096",
                "--target",
                target,
                "--export",
                str(path),
            ],
            capsys,
        )
        doc = json.loads(path.read_text())
        assert code == 0 and list(doc["targets"]) == [target] and doc["search"]["target"] == target
    tcube = json.loads((tmp_path / "ascendc.json").read_text())["targets"]["ascendc"]["TCubeTiling"]
    assert (
        check_tcube(json.loads((tmp_path / "ascendc.json").read_text())["targets"]["ascendc"], chip, problem)
        == []
    )
    assert tcube["usedCoreNum"] <= 20 and tcube["singleCoreM"] >= tcube["baseM"]
    catlass = json.loads((tmp_path / "catlass.json").read_text())
    assert catlass["targets"]["catlass"]["L0TileShape"][0] == catlass["tiling"]["base_m"]


def test_search_table_and_explain_round_trip(tmp_path, capsys):
    path = tmp_path / "t.json"
    code, out, _ = run(
        [
            "search",
            "--op",
            "matmul",
            "--chip",
            "ascend910b3",
            "--shape",
            "M=896,N=768,K=4096",
            "--export",
            str(path),
        ],
        capsys,
    )
    assert code == 0 and "best tiling" in out and "optimum proven" in out
    code, out, _ = run(
        [
            "explain",
            "--op",
            "matmul",
            "--chip",
            "ascend910b3",
            "--shape",
            "M=896,N=768,K=4096",
            "--tiling",
            str(path),
            "--format",
            "json",
        ],
        capsys,
    )
    assert code == 0
    explained = json.loads(out)
    assert explained["estimate"]["time_us"] == pytest.approx(
        json.loads(path.read_text())["estimate"]["time_us"]
    )


def test_explain_gives_tail_advice(capsys):
    tiling = {**CATLASS_DEFAULT, "iterate_order": "m", "tail_split": "off"}
    code, out, _ = run(
        [
            "explain",
            "--op",
            "matmul",
            "--chip",
            "ascend910b3",
            "--shape",
            "M=896,N=768,K=4096",
            "--tiling",
            json.dumps(tiling),
        ],
        capsys,
    )
    assert code == 0
    assert "tail_split=auto predicts -" in out


def test_chips_and_ops(capsys):
    code, out, _ = run(["chips", "--format", "json"], capsys)
    ids = {r["id"]: r for r in json.loads(out)}
    assert ids["ascend910b3"]["cores"] == 20 and ids["ascend910b3"]["fp16_tflops"] == pytest.approx(
        294.9, rel=0.01
    )
    code, out, _ = run(["ops"], capsys)
    assert code == 0 and "matmul" in out


@pytest.mark.parametrize(
    "args,needle",
    [
        (["--shape", "M=0,N=16,K=16"], "M: must be an integer >= 1"),
        (["--shape", "M=-5,N=16,K=16"], "M: must be an integer >= 1"),
        (["--shape", "M=abc,N=16,K=16"], "M: must be an integer"),
        (["--shape", "M=16,N=16"], "K: missing"),
        (["--shape", "M=16,N=16,K=16,Q=2"], "unknown field 'Q'"),
        (["--shape", "M=16,N=16,K=16", "--dtype", "fp8"], "dtype: must be one of fp16, bf16, fp32, int8"),
        (["--shape", "M=16,N=16,K=16", "--fix", "bogus=1"], "unknown knob 'bogus'"),
        (["--shape", "M=16,N=16,K=16", "--fix", "base_m"], "--fix: expected KNOB=VALUE"),
        (["--shape", "M=4096,N=4096,K=4096", "--fix", "base_m=256", "--fix", "base_n=256"], "rule 'l0c'"),
        (["--shape", "M=16,N=16,K=16", "--strategy", "magic"], "strategy: must be one of"),
    ],
)
def test_bad_input_is_one_line_exit_2(args, needle, capsys):
    code, out, err = run(["search", "--op", "matmul", "--chip", "ascend910b3", *args], capsys)
    assert code == 2, err
    assert needle in err
    assert err.count("\n") == 1 and "Traceback" not in err


def test_unknown_chip_lists_known(capsys):
    code, _, err = run(["search", "--op", "matmul", "--chip", "ascend999", "--shape", "M=1,N=1,K=1"], capsys)
    assert code == 2 and "ascend910b3" in err


def test_malformed_tiling(capsys):
    base = ["explain", "--op", "matmul", "--chip", "ascend910b3", "--shape", "M=64,N=64,K=64"]
    code, _, err = run([*base, "--tiling", "{not json"], capsys)
    assert code == 2 and "--tiling: not valid JSON" in err
    code, out, _ = run([*base, "--tiling", '{"base_m": 64}'], capsys)  # partial: completed by the model
    assert code == 0 and "completed by the model" in out and "base_m=64" in out
    code, _, err = run([*base, "--tiling", "{}"], capsys)
    assert code == 2 and "tiling: empty" in err
    code, _, err = run(
        [
            *base,
            "--tiling",
            '{"base_m": 64, "base_n": 64, "base_k": 64, "step_m": 1, "step_n": 1, '
            '"step_ka": 1, "step_kb": 1, "l1_stages": 9, "preload": 0, "l0_pingpong": 1, "multi_load": 1, '
            '"weight_resident": 0, "iterate_order": "m", "swizzle_offset": 1, "swizzle_direction": 0, '
            '"serpentine": 0, "tail_split": "off", "split_k": 1, "core_split": "walk"}',
        ],
        capsys,
    )
    assert code == 2 and "l1_stages" in err


def test_console_script_runs_in_a_subprocess():
    """The installed entry point: exit 2 and no traceback for a bad chip."""
    proc = subprocess.run(
        [
            sys.executable,
            "-m",
            "tiler.cli",
            "search",
            "--op",
            "matmul",
            "--chip",
            "nope",
            "--shape",
            "M=1,N=1,K=1",
        ],
        capture_output=True,
        text=True,
    )
    assert proc.returncode == 2 and "Traceback" not in proc.stderr and proc.stdout == ""


def test_dtype_the_chip_cannot_run_is_one_line(capsys):
    """310P3's cube has no bf16: a clear error naming what it runs, exit 2, no traceback."""
    shape = "M=256,N=256,K=256,dtype=bf16"
    code, out, err = run(["search", "--op", "matmul", "--chip", "ascend310p3", "--shape", shape], capsys)
    assert code == 2
    assert "no bf16" in err and "fp16" in err and "Traceback" not in err
    assert len(err.strip().splitlines()) == 1


@pytest.mark.parametrize(
    "chip,shape,family_words,foreign",
    [
        ("h200", "M=4096,N=14336,K=4096", "tensor cores", "MMAD"),
        ("ascend910b3", "M=64,N=8192,K=8192", "L2/L1", "cp.async"),  # MTE2-bound; 4096^3 is cube-bound
    ],
)
def test_advice_speaks_the_family_language(capsys, chip, shape, family_words, foreign):
    code, out, _ = run(["search", "--op", "matmul", "--chip", chip, "--shape", shape], capsys)
    assert code == 0
    first = next(line for line in out.splitlines() if line.strip().startswith("- bound "))
    assert family_words in first and foreign not in first


def test_library_errors_name_parameters_and_the_cli_names_flags(capsys):
    """The library raises in its own terms (`trials: ...`, `fix: ...`); the command line shows the flag."""
    from tiler.errors import TilerError
    from tiler.hardware import load_chip
    from tiler.problem import parse_problem
    from tiler.search import search
    from tiler.space import load_space

    p, chip = parse_problem("matmul", {"M": 64, "N": 64, "K": 64}), load_chip("ascend910b3")
    with pytest.raises(TilerError, match="^trials: "):
        search(p, chip, load_space("matmul", "ascend"), "tpe", trials=0, storage="memory")
    with pytest.raises(TilerError, match="^fix: "):
        load_space("matmul", "ascend").pin({"no_such_knob": "1"})
    base = ["search", "--op", "matmul", "--chip", "ascend910b3", "--shape", "M=64,N=64,K=64"]
    code, _, err = run([*base, "--strategy", "tpe", "--trials", "0", "--storage", "memory"], capsys)
    assert code == 2 and err.startswith("error: --trials: ")
    code, _, err = run([*base, "--fix", "no_such_knob=1"], capsys)
    assert code == 2 and err.startswith("error: --fix: unknown knob")


def test_explain_reads_a_document_that_carries_only_its_views(tmp_path, capsys):
    """A tiling given as a code generator's view alone (no `tiling` section) is read from the view's knobs."""
    shape = "N=2,C=96,H=28,W=28,kh=3,kw=3,pad=1"
    code, out, _ = run(
        ["search", "--op", "depthwise_conv", "--chip", "h200", "--shape", shape, "--format", "json"], capsys
    )
    doc = json.loads(out)
    only_views = {"targets": doc["targets"]}
    path = tmp_path / "views.json"
    path.write_text(json.dumps(only_views))
    code, out, err = run(
        [
            "explain",
            "--op",
            "depthwise_conv",
            "--chip",
            "h200",
            "--shape",
            shape,
            "--tiling",
            str(path),
            "--format",
            "json",
        ],
        capsys,
    )
    assert code == 0, err
    assert json.loads(out)["tiling"] == doc["tiling"]
