"""The estimate record's pipes are named per chip family: msprof's on Ascend, the GPU's own units on cuda (issue 11,
item 4). tiler.model.common.PIPES_OF / BOUNDS_OF hold the one table; the models, the export, the CLI, the sweep's
columns, the JSON Schema and the advice checklists all follow it."""

from __future__ import annotations

import json

import numpy as np
import pandas as pd
import pytest

from tiler.cli import main
from tiler.errors import TilerError
from tiler.export import estimate_dict, load_schema, tiling_document, validate
from tiler.hardware import load_chip
from tiler.model.common import (
    BOUNDS_OF,
    PIPES_OF,
    bounds,
    classify_bound,
    family_of_pipes,
    pipes,
    record,
    record_columns,
)
from tiler.operator import get_operator, known_ops, problem_class
from tiler.problem import parse_problem
from tiler.search import search
from tiler.space import load_space
from tiler.sweep import Journal, journal_path, run_sweep

CHIP = {"ascend": "ascend910b3", "cuda": "h200"}
ASCEND_PIPES = ("mac", "vec", "scalar", "mte1", "mte2", "mte3", "fixpipe")
ASCEND_BOUNDS = ("mte2", "mte1", "cube", "vector", "fixpipe", "mte3", "scalar", "latency")
GPU_PIPES = ("tensor", "alu", "issue", "smem", "load", "store")
GPU_BOUNDS = {"tensor", "alu", "issue", "smem", "load", "store", "latency"}
OPS = known_ops()


def _best_document(op: str, family: str) -> dict:
    chip = load_chip(CHIP[family])
    problem = parse_problem(op, problem_class(op).EXAMPLE)
    res = search(problem, chip, load_space(op, family), top=1)
    doc = tiling_document(problem, chip, res.tiling(0), res.row(0))
    validate(doc)
    return doc


def test_the_tables():
    """Ascend keeps exactly msprof's names; a GPU names its own units; the two sets share no name."""
    assert pipes("ascend") == ASCEND_PIPES and bounds("ascend") == ASCEND_BOUNDS
    assert pipes("cuda") == GPU_PIPES and set(bounds("cuda")) == GPU_BOUNDS
    assert not set(pipes("ascend")) & set(pipes("cuda"))
    assert record("ascend") == (
        "time_us",
        "bound",
        *(f"{p}_us" for p in ASCEND_PIPES),
        "cores_used",
        "waves",
        "balance",
        "l2_hit_rate",
        "hbm_bytes",
        "l2_bytes",
        "roofline_us",
    )
    assert [c for c in record("cuda") if c.endswith("_us")][1:-1] == [f"{p}_us" for p in GPU_PIPES]
    both = record_columns(["cuda", "ascend", "cuda"])
    assert set(both) == set(record("ascend")) | set(record("cuda")) and len(both) == len(set(both))
    with pytest.raises(ValueError, match="family"):
        pipes("rocm")


def test_classify_bound_names_the_bound_of_the_names_it_is_given():
    busy = np.array([10.0, 10.0, 10.0])
    gpu = {"tensor": np.array([9.0, 1.0, 1.0]), "load": np.array([1.0, 9.0, 1.0]), "issue": np.ones(3)}
    assert classify_bound(gpu, busy).tolist() == ["tensor", "load", "latency"]
    asc = {"mac": np.array([9.0, 1.0, 1.0]), "mte2": np.array([1.0, 9.0, 1.0]), "scalar": np.ones(3)}
    assert classify_bound(asc, busy).tolist() == ["cube", "mte2", "latency"]
    with pytest.raises(ValueError, match="mix"):
        classify_bound({"mac": np.ones(3), "load": np.ones(3)}, busy)
    with pytest.raises(ValueError, match="unknown"):
        family_of_pipes(["fixpipe", "tma"])


@pytest.mark.parametrize("op,family", OPS, ids=[f"{o}/{f}" for o, f in OPS])
def test_an_operator_reports_its_familys_pipes_and_bounds_only(op, family):
    """Fails if a cuda operator reports an msprof name (or an Ascend one a GPU name): its pipe columns, its
    bounds over sampled candidates and its advice checklist's keys are its family's."""
    model = get_operator(op, family)
    chip = load_chip(CHIP[family])
    problem = parse_problem(op, problem_class(op).EXAMPLE)
    space = load_space(op, family)
    rng = np.random.default_rng(0)
    cands = {k: rng.choice(np.asarray(kn.values, dtype=np.int64), 2000) for k, kn in space.knobs.items()}
    ok = np.logical_and.reduce(list(model.feasible(problem, chip, cands).values()))
    est = model.estimate(problem, chip, {k: v[ok] for k, v in cands.items()})
    others = {f"{p}_us" for fam, names in PIPES_OF.items() if fam != family for p in names}
    assert not others & set(est), sorted(others & set(est))
    assert set(record(family)) <= set(est)
    assert set(np.asarray(est["bound"]).tolist()) <= set(bounds(family))
    assert set(model.CHECKLIST) <= set(bounds(family)), sorted(set(model.CHECKLIST) - set(bounds(family)))


@pytest.mark.parametrize("op", sorted({o for o, f in OPS if f == "cuda"}))
def test_a_cuda_export_names_gpu_pipes(op):
    doc = _best_document(op, "cuda")
    assert tuple(doc["estimate"]["pipes_us"]) == GPU_PIPES
    assert doc["estimate"]["bound"] in GPU_BOUNDS
    assert all(v >= 0 for v in doc["estimate"]["pipes_us"].values())


@pytest.mark.parametrize("op", sorted({o for o, f in OPS if f == "ascend"}))
def test_an_ascend_export_keeps_msprof_names(op):
    doc = _best_document(op, "ascend")
    assert tuple(doc["estimate"]["pipes_us"]) == ASCEND_PIPES
    assert doc["estimate"]["bound"] in ASCEND_BOUNDS


def test_estimate_dict_reads_the_family_from_the_columns():
    chip = load_chip("h200")
    problem = parse_problem("matmul", problem_class("matmul").EXAMPLE)
    row = search(problem, chip, load_space("matmul", "cuda"), top=1).row(0)
    assert estimate_dict(row) == estimate_dict(row, "cuda")
    with pytest.raises(KeyError):
        estimate_dict(row, "ascend")


def test_the_schema_requires_the_documents_familys_pipes():
    """The shipped schema's per-family tables are common.py's; a GPU document with msprof pipes (or bound), or an
    Ascend one with GPU pipes, is rejected."""
    defs = load_schema("tiling_v1")["$defs"]
    for fam in PIPES_OF:
        props = defs[f"estimate_{fam}"]["properties"]
        assert tuple(props["pipes_us"]["required"]) == PIPES_OF[fam]
        assert tuple(props["bound"]["enum"]) == BOUNDS_OF[fam]
    gpu = _best_document("matmul", "cuda")
    stale = json.loads(json.dumps(gpu))
    stale["estimate"]["pipes_us"] = {p: 0.0 for p in ASCEND_PIPES}
    with pytest.raises(TilerError, match="pipes_us"):
        validate(stale)
    stale = json.loads(json.dumps(gpu))
    stale["estimate"]["pipes_us"]["mte2"] = 1.0
    with pytest.raises(TilerError, match="pipes_us"):
        validate(stale)
    stale = json.loads(json.dumps(gpu))
    stale["estimate"]["bound"] = "cube"
    with pytest.raises(TilerError, match="bound"):
        validate(stale)
    asc = _best_document("matmul", "ascend")
    asc["estimate"]["pipes_us"] = {p: 0.0 for p in GPU_PIPES}
    with pytest.raises(TilerError, match="pipes_us"):
        validate(asc)


def test_the_cli_table_of_an_h200_search_names_gpu_pipes(capsys):
    code = main(["search", "--op", "matmul", "--chip", "h200", "--shape", "M=4096,N=4096,K=4096"])
    out = capsys.readouterr().out
    assert code == 0
    pipes_line = next(line for line in out.splitlines() if "pipes us" in line)
    bound_line = next(line for line in out.splitlines() if line.strip().startswith("bound "))
    assert "tensor=" in pipes_line and "load=" in pipes_line
    for name in ASCEND_PIPES:
        assert f"{name}=" not in out
    assert bound_line.split()[1] in GPU_BOUNDS


def test_the_cli_table_of_an_ascend_search_keeps_msprof_names(capsys):
    code = main(["search", "--op", "matmul", "--chip", "ascend910b3", "--shape", "M=4096,N=4096,K=4096"])
    out = capsys.readouterr().out
    assert code == 0
    pipes_line = next(line for line in out.splitlines() if "pipes us" in line)
    assert "mac=" in pipes_line and "mte2=" in pipes_line and "tensor=" not in pipes_line


def test_a_sweep_over_both_families_has_each_familys_columns(tmp_path):
    """The CSV has the union of the families' pipe columns; each row fills its chip's and leaves the other's
    empty; the libraries carry the family's names."""
    shapes = tmp_path / "s.csv"
    shapes.write_text("M,N,K\n256,256,256\n")
    pins = ["base_m=64", "base_n=128", "base_k=64", "BLOCK_M=64", "BLOCK_N=64", "BLOCK_K=64"]
    out = tmp_path / "o.csv"
    rep = run_sweep(shapes, "matmul", "ascend910b3,h200", out, fix=pins, library=tmp_path / "l.json")
    assert rep.failed == 0, rep.frame["error"].tolist()
    df = pd.read_csv(out, dtype=str, keep_default_na=False).set_index("chip")
    assert set(record("ascend")) | set(record("cuda")) <= set(df.columns)
    for p in GPU_PIPES:
        assert df.loc["h200", f"{p}_us"] != "" and df.loc["ascend910b3", f"{p}_us"] == ""
    for p in ASCEND_PIPES:
        assert df.loc["ascend910b3", f"{p}_us"] != "" and df.loc["h200", f"{p}_us"] == ""
    assert df.loc["h200", "bound"] in GPU_BOUNDS
    lib = json.loads((tmp_path / "l.h200.json").read_text())
    assert tuple(lib["entries"][0]["estimate"]["pipes_us"]) == GPU_PIPES


def test_a_resumed_sweep_searches_again_a_gpu_row_journaled_under_msprof_names(tmp_path):
    shapes = tmp_path / "s.csv"
    shapes.write_text("M,N,K\n256,256,256\n")
    out = tmp_path / "o.csv"
    pins = ["BLOCK_M=64", "BLOCK_N=64", "BLOCK_K=64"]
    first = run_sweep(shapes, "matmul", "h200", out, fix=pins)
    assert first.computed == 1
    journal = Journal(journal_path(out), fresh=False)
    ((key, res),) = journal.load().items()
    for old, new in zip(("mac", "vec", "scalar", "mte1", "mte2", "fixpipe"), GPU_PIPES, strict=True):
        res["row"][f"{old}_us"] = res["row"].pop(f"{new}_us")
    journal.db.execute("UPDATE results SET result = ? WHERE key = ?", (json.dumps(res), key))
    journal.db.commit()
    journal.close()
    again = run_sweep(shapes, "matmul", "h200", out, fix=pins, resume=True)
    assert (again.computed, again.reused) == (1, 0)
    df = pd.read_csv(out, dtype=str, keep_default_na=False)
    assert "tensor_us" in df.columns and "mac_us" not in df.columns and df["tensor_us"][0] != ""
