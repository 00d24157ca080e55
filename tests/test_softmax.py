"""Row softmax on Ascend and CUDA: what the models must get right about passes over a row (the online 2-pass form
moves a quarter less data than 3-pass; a row that fits on chip is read once), which unit bounds which shape, the
capacity rules, the H200 measurements, the CLI end to end and the input checks (docs/model.md "9. Softmax on
Ascend", docs/model_cuda.md "Softmax on the H200")."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from tiler.cli import main
from tiler.export import tiling_document
from tiler.hardware import load_chip
from tiler.operator import get_operator
from tiler.ops.softmax import triton_kernels as km
from tiler.ops.softmax.triton_runner import measure_document, tiling_from_doc
from tiler.problem import parse_problem
from tiler.runners.external import MeasureError
from tiler.search import search
from tiler.space import load_space

ROOT = Path(__file__).resolve().parent.parent
DATA = ROOT / "tests" / "data" / "h200_softmax.csv"


def sm(rows: int, d: int, dtype: str = "fp16"):
    return parse_problem("softmax", {"rows": rows, "d": d}, dtype)


@pytest.fixture(scope="module")
def b3():
    return load_chip("ascend910b3")


@pytest.fixture(scope="module")
def h200():
    return load_chip("h200")


def one(space, **knobs) -> dict:
    return {k: np.array([space.knobs[k].parse(v)], dtype=np.int64) for k, v in knobs.items()}


def score(chip, p, **knobs) -> dict:
    """The estimate of one tiling as a dict of scalars (every rule must pass)."""
    model = get_operator("softmax", chip.family)
    c = one(load_space("softmax", chip.family), **knobs)
    ok = model.feasible(p, chip, c)
    assert all(bool(m[0]) for m in ok.values()), {r: bool(m[0]) for r, m in ok.items()}
    est = model.estimate(p, chip, c)
    return {k: (v[0].item() if hasattr(v[0], "item") else v[0]) for k, v in est.items()}


ASC = dict(rows_per_core=1, block_d=4096, double_buffer=1, cores_per_row=1)
GPU = dict(BLOCK_D=4096, ROWS=1, num_warps=8)


# --------------------------------------------------------------------------- bytes: 2 passes vs 3


@pytest.mark.parametrize("family", ["ascend", "cuda"])
def test_two_passes_move_a_quarter_less_than_three_when_the_row_does_not_fit(b3, h200, family):
    """A 64k-element row in 4k chunks: online = 2 reads + 1 write = 3 row transfers, three-pass = 3 reads +
    1 write = 4. Every transfer goes through L2, so l2_bytes is exactly 3/4; HBM sees the re-reads only when the
    rows left L2 (here on a toy profile with almost no L2 to keep them, so exactly 3/4 too)."""
    chip = b3 if family == "ascend" else h200
    knobs = ASC if family == "ascend" else GPU
    p = sm(1024, 65536)
    two, three = score(chip, p, passes=2, **knobs), score(chip, p, passes=3, **knobs)
    assert two["l2_bytes"] / three["l2_bytes"] == pytest.approx(3 / 4, rel=1e-12)
    assert two["l2_bytes"] == pytest.approx(3 * p.rows * p.d * p.in_bytes, rel=1e-12)
    assert two["time_us"] < three["time_us"]
    tiny = chip.with_values(
        {"l2_bytes": 1024, "l2_usable_fraction": 0.01} if family == "ascend" else {"sm_l2_bytes": 1e-3},
        tag="estimated",
        source="test: no L2 between the reads",
    )
    two, three = score(tiny, p, passes=2, **knobs), score(tiny, p, passes=3, **knobs)
    assert two["hbm_bytes"] / three["hbm_bytes"] == pytest.approx(3 / 4, rel=1e-6)


@pytest.mark.parametrize("family", ["ascend", "cuda"])
def test_a_row_that_fits_is_read_once_whatever_the_passes(b3, h200, family):
    """d = 3000 in a 4096-element chunk (UB / registers): one read and one write (the compulsory bytes) for
    passes 2 and 3 alike, the same time; the search keeps only one of the twins."""
    chip = b3 if family == "ascend" else h200
    knobs = ASC if family == "ascend" else GPU
    p = sm(8192, 3000)
    two, three = score(chip, p, passes=2, **knobs), score(chip, p, passes=3, **knobs)
    assert two["hbm_bytes"] == three["hbm_bytes"] == pytest.approx(p.compulsory_bytes)
    assert two["l2_bytes"] == three["l2_bytes"] == pytest.approx(p.compulsory_bytes)
    assert two["time_us"] == three["time_us"] and two["row_reads"] == 1
    model = get_operator("softmax", family)
    space = load_space("softmax", family)
    c = {k: np.concatenate([v, v]) for k, v in one(space, passes=2, **knobs).items()}
    c["passes"] = np.array([2, 3])
    assert model.dominated(p, chip, c, space.domains()).tolist() == [False, True]


def test_re_reads_that_stay_in_l2_cost_less_than_the_quarter(h200):
    """The bytes are 3/4 either way; the time is not: few long rows in flight keep their rows in L2 between the
    reads (the re-reads are mostly L2 hits, HBM bytes near equal), many rows in flight evict them (HBM sees every re-read),
    so the predicted 2-pass gain is larger for the second."""
    gain = {}
    for rows in (32, 1024):
        p = sm(rows, 262144)
        two, three = (score(h200, p, passes=n, BLOCK_D=16384, ROWS=1, num_warps=16) for n in (2, 3))
        gain[rows] = three["time_us"] / two["time_us"]
        if rows == 32:
            assert two["hbm_bytes"] / three["hbm_bytes"] > 0.9  # mostly hits: near the compulsory bytes
        else:
            assert two["hbm_bytes"] / three["hbm_bytes"] == pytest.approx(3 / 4, rel=0.02)
    assert gain[1024] > gain[32] > 1.0


# --------------------------------------------------------------------------- bounds: the physics


def test_ascend_bound_follows_the_work_per_byte(b3):
    """On the 910B3 (fp16, 128 MB of x): a row that fits UB is read and written once with one exp per element
    and the kernel streams at the HBM floor (mte2); a row that does not fit is read twice and its exp computed
    twice, the re-reads are L2 hits (40 rows in flight of 512 KB), so the vector unit bounds it; and tiny rows
    are bound by per-row instruction overhead, which more rows per task amortise."""
    space = load_space("softmax", "ascend")
    fits = search(sm(16384, 4096), b3, space, top=1).row(0)
    assert fits["bound"] == "mte2" and fits["row_reads"] == 1
    # at the HBM rate this was written for: with issue 29's fitted hbm_efficiency (0.615, carried from the 910B2
    # matmul fit) the big rows' HBM floor (273 us) ties their vector time (269 us)
    big = search(sm(256, 262144), b3.with_values({"hbm_efficiency": 0.85}), space, top=1).row(0)
    assert big["bound"] == "vector" and big["row_reads"] >= 2
    assert big["vec_us"] > 2 * big["mte2_us"]
    p = sm(262144, 256)
    lone = score(b3, p, rows_per_core=1, block_d=256, passes=2, double_buffer=1, cores_per_row=1)
    many = score(b3, p, rows_per_core=32, block_d=256, passes=2, double_buffer=1, cores_per_row=1)
    assert lone["bound"] in ("scalar", "vector") and lone["scalar_us"] > lone["vec_us"]
    assert many["scalar_us"] < lone["scalar_us"] / 2 and many["time_us"] < lone["time_us"]


def test_ascend_with_a_fast_vector_unit_and_no_l2_the_gain_is_the_bytes(b3):
    """The same large-row softmax on a toy 910B3 whose vector unit is 32x faster and whose L2 keeps nothing:
    transfer-bound, and the 2-pass gain approaches the byte ratio 4/3 (a toy model that ignored passes, or
    counted reads wrong, would not)."""
    toy = b3.with_values(
        {"vector_flops_per_cycle_fp16": 256 * 32, "l2_bytes": 1024, "l2_usable_fraction": 0.01},
        tag="estimated",
        source="test",
    )
    p = sm(256, 262144)
    two, three = (score(toy, p, passes=n, **ASC) for n in (2, 3))
    assert two["bound"] == three["bound"] == "mte2"
    assert three["time_us"] / two["time_us"] == pytest.approx(4 / 3, rel=0.03)


def test_cuda_few_long_rows_are_latency_bound_many_rows_stream(h200):
    """32 rows of 256k on 132 SMs: 32 programs walk their rows chunk after chunk, each round waiting its loads
    (latency, far above the HBM time of 16 MB); 65536 rows of 1k stream like a copy (load-bound at the HBM
    floor within 20%, as measured: 68 us against a 68 us device copy)."""
    space = load_space("softmax", "cuda")
    few = search(sm(32, 262144), h200, space, top=1).row(0)
    assert few["bound"] == "latency" and few["time_us"] > 3 * few["load_us"]
    p = sm(65536, 1024)
    many = search(p, h200, space, top=1).row(0)
    assert many["bound"] == "load" and many["row_reads"] == 1
    assert many["time_us"] < 1.2 * p.compulsory_bytes / (h200["hbm_gbps"] * 1e3 * 0.92) + h200["launch_us"]


def test_cuda_exponentials_bound_one_sm_per_row(h200):
    """16 rows of 4M elements: one SM per row computes 8M exponentials at 16 a cycle (the SFU): the alu pipe,
    not memory, bounds it."""
    r = search(sm(16, 4194304), h200, load_space("softmax", "cuda"), top=1).row(0)
    assert r["bound"] == "alu" and r["alu_us"] > r["load_us"]


# --------------------------------------------------------------------------- capacity rules


def test_a_chunk_that_does_not_fit_ub_is_infeasible(b3):
    """UB = 192 KB: 4 rows x 8192 elements x (2 buffers x (2+2) B + 4 B fp32) = 384 KB > UB; 2 rows x 4096 =
    96 KB fits. The rule names itself, and the search never returns a tiling over UB."""
    model, space = get_operator("softmax", "ascend"), load_space("softmax", "ascend")
    p = sm(4096, 65536)
    bad = one(space, rows_per_core=4, block_d=8192, passes=2, double_buffer=1, cores_per_row=1)
    good = one(space, rows_per_core=2, block_d=4096, passes=2, double_buffer=1, cores_per_row=1)
    assert not model.feasible(p, b3, bad)["ub"][0] and model.feasible(p, b3, good)["ub"][0]
    assert "UB" in model.RULE_TEXT["ub"]
    res = search(p, b3, space, top=5)
    assert all(int(v) <= b3["ub_bytes"] for v in res.est["ub_bytes"])


def test_a_tile_that_does_not_fit_the_registers_is_infeasible(h200):
    """ROWS*BLOCK_D/(32*num_warps) > 128 fp32 elements a thread: refused by the model and by the kernels'
    own validate (exports are promises)."""
    model, space = get_operator("softmax", "cuda"), load_space("softmax", "cuda")
    p = sm(1024, 65536)
    bad = one(space, BLOCK_D=65536, passes=2, ROWS=1, num_warps=8)  # 256 a thread
    good = one(space, BLOCK_D=65536, passes=2, ROWS=1, num_warps=16)  # 128 a thread
    assert not model.feasible(p, h200, bad)["registers"][0] and model.feasible(p, h200, good)["registers"][0]
    assert km.validate(dict(BLOCK_D=65536, ROWS=1, num_warps=8), p.d) is not None
    assert km.validate(dict(BLOCK_D=65536, ROWS=1, num_warps=16), p.d) is None


def test_every_tiling_the_cuda_model_allows_the_kernels_run(h200):
    """Every candidate of the cuda space that passes the model's rules passes the kernels' `validate`."""
    model, space = get_operator("softmax", "cuda"), load_space("softmax", "cuda")
    cands = space.product(space.names)
    for rows, d in ((7, 1000), (4096, 65536), (3, 300000)):
        p = sm(rows, d)
        ok = np.logical_and.reduce(list(model.feasible(p, h200, cands).values()))
        assert ok.any()
        for i in np.flatnonzero(ok):
            cfg = space.decode(cands, int(i))
            assert km.validate(cfg, d) is None, cfg


# --------------------------------------------------------------------------- the H200 measurements


def test_the_h200_model_ranks_held_out_shapes_and_the_measured_two_pass_gain():
    """On the measured grid (bench/data/h200_softmax.csv, constants fitted on the 6 shapes not marked heldout):
    on each held-out shape the model's top tiling is within 10% of the best measured and its ranking agrees
    (Spearman > 0.8); and where a row does not fit (d >= 64k) the best 2-pass tiling is measured and predicted
    faster than the best 3-pass one."""
    from tiler.rank import rank_candidates

    df = pd.read_csv(DATA)
    chip = load_chip("h200")
    tri = df[df.impl == "triton"]
    for name, g in tri.groupby("name"):
        p = sm(int(g.rows.iloc[0]), int(g.d.iloc[0]))
        ranked, rejected = rank_candidates(p, chip, g.drop(columns=["rows", "d"]).reset_index(drop=True))
        assert rejected.empty, name
        if int(g.heldout.iloc[0]):
            assert g.ms.min() / ranked.ms.iloc[0] > 0.9, name
            rho = (
                pd.Series(ranked.predicted_us.to_numpy()).rank().corr(pd.Series(ranked.ms.to_numpy()).rank())
            )
            assert rho > 0.8, (name, rho)
        if p.d >= 65536:
            best = {k: ranked[ranked.kernel == k] for k in ("online", "3pass")}
            assert best["online"].ms.min() < best["3pass"].ms.min(), name
            assert best["online"].predicted_us.min() < best["3pass"].predicted_us.min(), name


# --------------------------------------------------------------------------- CLI end to end


@pytest.mark.parametrize(
    ("chip", "target"), [("ascend910b3", "ascendc_softmax"), ("h200", "triton")], ids=["910b3", "h200"]
)
def test_search_explain_export_check_rank_from_the_cli(tmp_path, capsys, chip, target):
    """search (table, json, --export, --target), explain of the exported tiling, check of the export, rank of a
    CSV of tilings: each exits 0 and agrees with the others."""
    shape = "rows=2048,d=50304"
    out = tmp_path / "t.json"
    assert main(["search", "--op", "softmax", "--chip", chip, "--shape", shape, "--export", str(out)]) == 0
    assert "best tiling" in capsys.readouterr().out
    doc = json.loads(out.read_text())
    assert doc["op"] == "softmax" and target in doc["targets"]
    assert main(["check", str(out)]) == 0
    capsys.readouterr()
    assert main(["search", "--op", "softmax", "--chip", chip, "--shape", shape, "--target", target]) == 0
    capsys.readouterr()
    assert main(["explain", "--op", "softmax", "--chip", chip, "--shape", shape, "--tiling", str(out)]) == 0
    text = capsys.readouterr().out
    assert "bound" in text
    space = load_space("softmax", "ascend" if chip.startswith("ascend") else "cuda")
    rows = [doc["tiling"], {**doc["tiling"], "passes": 3}]
    csv = tmp_path / "cands.csv"
    pd.DataFrame([{k: r[k] for k in space.names} for r in rows]).to_csv(csv, index=False)
    assert main(["rank", "--op", "softmax", "--chip", chip, "--shape", shape, "--candidates", str(csv)]) == 0
    ranked = capsys.readouterr().out
    assert "predicted_us" in ranked
    if chip == "h200":
        assert main(["search", "--op", "softmax", "--chip", chip, "--shape", shape, "--emit", "triton"]) == 0
        assert "triton.Config(" in capsys.readouterr().out


@pytest.mark.parametrize(
    ("shape", "dtype", "field"),
    [
        ("rows=4096,d=0", "fp16", "d"),
        ("rows=0,d=4096", "fp16", "rows"),
        ("rows=4096,d=4096", "int8", "dtype"),
    ],
)
@pytest.mark.parametrize("chip", ["ascend910b3", "h200"])
def test_bad_input_is_one_line_and_exit_2(capsys, chip, shape, dtype, field):
    code = main(["search", "--op", "softmax", "--chip", chip, "--shape", shape, "--dtype", dtype])
    err = capsys.readouterr().err.strip().splitlines()
    assert code == 2 and len(err) == 1 and field in err[0] and "Traceback" not in err[0], err


def test_the_ascend_export_names_the_ub_bytes_and_check_catches_a_broken_view(b3):
    """The ascendc_softmax view re-derives its UB bytes and chunk count; a view that claims a chunk over UB is
    rejected by the target's own check."""
    p = sm(1024, 65536)
    res = search(p, b3, load_space("softmax", "ascend"), top=1)
    doc = tiling_document(p, b3, res.tiling(0), res.row(0))
    view = doc["targets"]["ascendc_softmax"]
    target = get_operator("softmax", "ascend").TARGETS["ascendc_softmax"]
    assert target.broken(view, b3, p) == [] and view["ub_bytes"] <= b3["ub_bytes"]
    assert view["row_passes"] == (1 if view["chunks"] == 1 else res.tiling(0)["passes"])
    big = dict(view, rows_per_task=64, block_d=32768, chunks=2, tasks=16)
    assert any("UB" in line for line in target.broken(big, b3, p))


# --------------------------------------------------------------------------- Triton kernels and runner


def test_an_export_round_trips_to_the_runner_inputs(h200):
    p = sm(3000, 5000)
    res = search(p, h200, load_space("softmax", "cuda"), top=1)
    doc = tiling_document(p, h200, res.tiling(0), res.row(0))
    problem, cfg, dtype = tiling_from_doc(doc)
    assert problem == {"rows": 3000, "d": 5000} and dtype == "fp16"
    assert set(cfg) == {"BLOCK_D", "passes", "ROWS", "num_warps"}
    view = doc["targets"]["triton"]
    assert view["kernel"] == km.kernel_name(cfg, 5000) and view["grid"] == [-(-3000 // cfg["ROWS"])]


def test_a_measurement_without_a_gpu_stack_fails_with_one_line(h200, monkeypatch):
    import sys

    p = sm(64, 4096)
    res = search(p, h200, load_space("softmax", "cuda"), top=1)
    doc = tiling_document(p, h200, res.tiling(0), res.row(0))
    monkeypatch.setitem(sys.modules, "torch", None)
    with pytest.raises(MeasureError) as exc:
        measure_document(doc)
    assert "\n" not in str(exc.value)


@pytest.mark.gpu
@pytest.mark.parametrize("dtype", ["fp16", "bf16", "fp32"])
@pytest.mark.parametrize(
    "cfg",
    [
        dict(BLOCK_D=8192, passes=2, ROWS=2, num_warps=4),  # whole row
        dict(BLOCK_D=1024, passes=2, ROWS=1, num_warps=4),  # online
        dict(BLOCK_D=1024, passes=3, ROWS=4, num_warps=8),  # three-pass, a partial last program
    ],
)
def test_the_kernels_match_torch(torch, dtype, cfg):
    """Each kernel on random rows (d not a multiple of the chunk, rows not a multiple of ROWS) against
    torch.softmax in fp32: rel_err under 1e-2 (fp16/bf16 rounding), every element written."""
    res = km.run({"rows": 37, "d": 5000}, cfg, dtype=dtype, rep_ms=2, warmup_ms=1)
    assert res["rel_err"] < 1e-2 and res["ms"] > 0


@pytest.mark.gpu
def test_the_runner_measures_an_export(torch, h200):
    p = sm(256, 8192)
    res = search(p, h200, load_space("softmax", "cuda"), top=1)
    assert measure_document(tiling_document(p, h200, res.tiling(0), res.row(0))) > 0
