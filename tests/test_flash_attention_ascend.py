"""Flash attention on Ascend (tiler/ops/flash_attention/ascend.py, docs/model.md §8): the directions a toy model
would get wrong — decode streams K/V, causal masking unbalances a plain core split, preload hides the cube<->vector
synchronisation until a pipeline bounds, blocks must fit the buffers — and the CLI from search to `tiler check`."""

from __future__ import annotations

import json

import numpy as np
import pytest

from tiler.cli import main
from tiler.hardware import load_chip
from tiler.operator import get_operator
from tiler.ops.flash_attention import ascend as fa
from tiler.problem import parse_problem
from tiler.search import search
from tiler.space import load_space, take

PREFILL = dict(B=1, heads=32, kv_heads=8, S1=4096, S2=4096, D=128, causal=1)
DECODE = dict(B=8, heads=32, kv_heads=8, S1=1, S2=8192, D=128)
CATLASS = dict(block_s1=128, block_s2=128, preload=2, double_buffer=1, core_split=1, kv_split=1)
OP = get_operator("flash_attention", "ascend")


def problem(**f):
    return parse_problem("flash_attention", f)


@pytest.fixture(scope="module")
def b3():
    return load_chip("ascend910b3")


@pytest.fixture(scope="module")
def space():
    return load_space("flash_attention", "ascend")


def cands(**knobs) -> dict:
    """Candidates from knob values (scalars or lists, broadcast)."""
    cols = np.broadcast_arrays(*[np.asarray(v, dtype=np.int64) for v in knobs.values()])
    return {k: np.atleast_1d(v.copy()) for k, v in zip(knobs, cols, strict=True)}


def estimate(p, chip, **knobs) -> dict:
    return OP.estimate(p, chip, cands(**knobs))


def feasible_table(p, chip, space) -> tuple[dict, dict]:
    table = space.product(space.names)
    ok = np.logical_and.reduce(list(OP.feasible(p, chip, table).values()))
    table = take(table, ok)
    return table, OP.estimate(p, chip, table)


# ------------------------------------------------------------------------------------------------ decode


def test_decode_is_transfer_bound_and_streams_kv_once(b3, space):
    """S1 = 1 with GQA: the best tiling is bound by K/V streaming (mte2), not by the cube a FLOP count would
    blame; the 4 query heads of a group share one K/V pass, so HBM carries K/V about once and the time is at least
    K/V over the HBM bandwidth."""
    p = problem(**DECODE)
    res = search(p, b3, space, top=1)
    row = res.row(0)
    assert row["bound"] == "mte2"
    assert row["transfer_us"] > 5 * max(row["cube_us"], row["vector_us"])
    assert row["heads_per_block"] == p.group == 4
    kv = 2.0 * p.B * p.kv_heads * p.S2 * p.D * p.in_bytes
    assert row["hbm_bytes"] < 1.1 * p.compulsory_bytes and row["hbm_bytes"] >= kv
    assert row["time_us"] > kv / (b3["hbm_gbps"] * 1e9) * 1e6
    # so does every tiling that hides the cube<->vector hand-offs (double-buffered, deepest preload); with short
    # key blocks and shallow preload the hand-offs' GM latency, not the stream, bounds the step ("latency")
    table, est = feasible_table(p, b3, space)
    sel = (table["preload"] == 3) & (table["double_buffer"] == 1)
    assert set(np.asarray(est["bound"])[sel].tolist()) == {"mte2"}


def test_decode_splits_s2_across_cores_and_pays_a_combine(b3):
    """64 (batch, kv head) tasks on 20 cores leave a 4th wave with 4 tasks: splitting S2 four ways evens the
    cores out (256 tasks, 13 per core) for a combine pass that costs little; the combine grows with kv_split."""
    p = problem(**DECODE)
    est = estimate(
        p, b3, block_s1=16, block_s2=256, preload=2, double_buffer=1, core_split=0, kv_split=[1, 2, 4, 8, 16]
    )
    t, comb = est["time_us"], est["combine_us"]
    assert comb[0] == 0 and np.all(np.diff(comb) > 0)
    assert t[2] < 0.9 * t[0]
    assert list(est["tiles"]) == [64, 128, 256, 512, 1024]
    assert est["balance"][0] < 0.85 < est["balance"][2]


# ------------------------------------------------------------------------------------------------ core split


def test_causal_prefill_balanced_beats_plain(b3):
    """Under the causal mask the last s1 blocks carry the most key blocks. Dealt in order, one core collects
    heavier blocks than the others; dealt heaviest first in snake order, the cores even out. A model that ignores
    the mask (or charges every block) predicts no difference."""
    p = problem(**PREFILL)
    est = estimate(p, b3, **{**CATLASS, "core_split": [0, 1]})
    assert est["makespan_balanced_us"][0] < 0.97 * est["makespan_plain_us"][0]
    assert est["time_us"][1] < est["time_us"][0]
    assert est["balance_balanced"][0] > 0.99 > est["balance_plain"][0]
    # 32 cores and 32 s1 blocks per head (910A): core c always draws s1 block c, the busiest one the diagonal's
    # heaviest, so plain takes ~2x the balanced makespan
    a = estimate(p, load_chip("ascend910a"), **CATLASS)
    assert a["makespan_plain_us"][0] > 1.8 * a["makespan_balanced_us"][0]
    # without the mask every task weighs the same: both splits deal the same counts
    full = estimate(problem(**{**PREFILL, "causal": 0}), b3, **{**CATLASS, "core_split": [0, 1]})
    assert full["time_us"][0] == pytest.approx(full["time_us"][1])


def test_masked_blocks_are_skipped(b3):
    """Causal attention over S1 = S2 visits about half the blocks: its cube time is about half the full one's
    (a little more: diagonal blocks cost their full block)."""
    full = estimate(problem(**{**PREFILL, "causal": 0}), b3, **CATLASS)
    half = estimate(problem(**PREFILL), b3, **CATLASS)
    ratio = half["cube_us"][0] / full["cube_us"][0]
    assert 0.5 < ratio < 0.55


def test_dealing_in_closed_form_equals_dealing_task_by_task():
    """The per-core work of both splits (closed forms over the task kinds) equals dealing every task."""
    rng = np.random.default_rng(0)
    for _ in range(60):
        kinds_n, copies, cores = int(rng.integers(1, 30)), int(rng.integers(1, 40)), int(rng.integers(1, 25))
        kinds = rng.integers(0, 5, size=(kinds_n, fa.NTYPES)).astype(float)
        weight = rng.integers(0, 6, size=kinds_n)
        plain = np.zeros((cores, fa.NTYPES))
        snake = np.zeros((cores, fa.NTYPES))
        for j in range(copies):
            for u in range(kinds_n):
                plain[(j * kinds_n + u) % cores] += kinds[u]
        for q, u in enumerate(np.repeat(np.argsort(-weight, kind="stable"), copies)):
            rnd, pos = divmod(q, cores)
            snake[pos if rnd % 2 == 0 else cores - 1 - pos] += kinds[u]
        assert np.allclose(fa._deal_plain(kinds, copies, cores), plain)
        assert np.allclose(fa._deal_snake(kinds, weight, copies, cores), snake)


def test_task_kinds_equal_the_mask_key_by_key():
    """Each (s1 block, kv chunk) kind's steps, masked steps and ragged tail blocks equal a key-by-key reading of
    the bottom-right causal mask."""
    rng = np.random.default_rng(1)
    for _ in range(60):
        s1 = int(rng.integers(1, 200))
        s2 = int(rng.integers(s1, 400))
        causal = int(rng.random() < 0.7)
        p = problem(B=1, heads=4, kv_heads=2, S1=s1, S2=s2, D=64, causal=causal)
        bs1, bs2, ks = (
            int(rng.choice([16, 32, 64])),
            int(rng.choice([16, 48, 64])),
            int(rng.choice([1, 2, 3])),
        )
        g = fa.geometry(p, bs1, bs2, ks)
        kinds, _ = fa._kinds(p, bs1, bs2, ks)
        n1, nb2, bpc = int(g["n1"]), int(g["nb2"]), int(g["bpc"])
        edge = int(g["rows_last"]) < int(g["rows"])
        for i in range(n1):
            lo, hi = (0, s1) if s1 < bs1 else (i * bs1, min((i + 1) * bs1, s1))
            rt = int(i == n1 - 1 and edge)
            for k in range(ks):
                want = np.zeros(fa.NTYPES)
                for j in range(k * bpc, min((k + 1) * bpc, nb2)):
                    keys = range(j * bs2, min((j + 1) * bs2, s2))
                    if causal and keys[0] > hi - 1 + s2 - s1:
                        continue  # no row sees the block
                    masked = bool(causal) and keys[-1] > lo + s2 - s1
                    tail = len(keys) < bs2
                    want[rt * 4 + 2 * tail + masked] += 1
                want[fa.STEP_TYPES + rt] = want[: fa.STEP_TYPES].sum() > 0
                assert np.array_equal(kinds[i * ks + k], want), (s1, s2, causal, bs1, bs2, ks, i, k)


# ------------------------------------------------------------------------------------------------ preload


def test_preload_never_slows_a_tiling(b3, space):
    """Over every feasible tiling of the space: the same tiling one preload deeper (where it still fits) is never
    slower."""
    for shape in (PREFILL, DECODE):
        p = problem(**shape)
        table, est = feasible_table(p, b3, space)
        low = table["preload"] < 3
        deeper = {k: v[low] for k, v in table.items()}
        deeper["preload"] = deeper["preload"] + 1
        fits = np.logical_and.reduce(list(OP.feasible(p, b3, deeper).values()))
        assert fits.sum() > 100
        after = OP.estimate(p, b3, take(deeper, fits))["time_us"]
        assert np.all(after <= est["time_us"][low][fits] * (1 + 1e-12))


def test_preload_helps_until_a_pipeline_bounds(b3):
    """With cube and vector comparable (910B3, D = 128), preload 0 runs them one after the other: preload 1
    overlaps them and is much faster, and deeper preload helps until the slowest pipeline bounds. On a coupled
    910A the vector unit bounds: after preload 1 nothing changes."""
    p = problem(**PREFILL)
    t = estimate(p, b3, **{**CATLASS, "preload": [0, 1, 2, 3]})
    assert 0.5 < t["cube_us"][0] / t["vector_us"][0] < 2
    assert t["time_us"][1] < 0.75 * t["time_us"][0]
    assert np.all(np.diff(t["time_us"]) <= 1e-9)
    assert t["bound"][0] == "latency" and t["bound"][3] != "latency"
    a = estimate(p, load_chip("ascend910a"), **{**CATLASS, "preload": [0, 1, 2, 3]})
    assert set(a["bound"][1:]) == {"vector"} and a["vector_us"][1] > 2 * a["cube_us"][1]
    assert a["time_us"][1] < a["time_us"][0]
    assert a["time_us"][1:] == pytest.approx([a["time_us"][1]] * 3)


def test_the_exchange_goes_through_l2_only_on_separated_chips(b3):
    """910B's cube and vector cores trade S (fp32), P (fp16) and O_tmp (fp32) through GM/L2: 12 bytes per score
    element, plus O_tmp per step; a coupled 910A keeps them on chip."""
    p = problem(**{**PREFILL, "causal": 0})
    e = estimate(p, b3, **CATLASS)
    elements = p.B * p.heads * p.S1 * p.S2
    assert e["exchange_bytes"][0] == pytest.approx(
        12 * elements + 8 * p.B * p.heads * p.S1 * p.D * (p.S2 // 128)
    )
    assert estimate(p, load_chip("ascend910a"), **CATLASS)["exchange_bytes"][0] == 0


def test_a_mix_launch_starts_the_vector_cores_once_on_separated_chips(b3):
    """Attention on a 910B is a MIX kernel (cube and vector cores): its launch pays mix_head_us once, whatever the
    cores used; a coupled 910A runs both units in one core and pays nothing for it."""
    p = problem(**DECODE)
    for chip, paid in ((b3, 10.0), (load_chip("ascend910a"), 0.0)):
        base, more = (estimate(p, chip.with_values({"mix_head_us": v}), **CATLASS) for v in (0.0, 10.0))
        assert more["time_us"][0] - base["time_us"][0] == pytest.approx(paid, abs=1e-9)


# ------------------------------------------------------------------------------------------------ capacity


def test_blocks_that_do_not_fit_are_infeasible(b3, capsys):
    """A 1024-key block double-buffers 1 MB of K and V: more than L1. A 256-row block at D = 256 holds a 128 KB
    fp32 accumulator per vector core: with its score slices, more than UB. Pinned, the search names the rule."""
    p = problem(**PREFILL)
    m = OP.feasible(p, b3, cands(**{**CATLASS, "block_s2": 1024}))
    assert not m["l1"][0] and m["ub"][0]
    assert OP.estimate(p, b3, cands(**{**CATLASS, "block_s2": 1024}))["l1_bytes"][0] > b3["l1_bytes"]
    wide = problem(**{**PREFILL, "D": 256})
    m = OP.feasible(wide, b3, cands(**{**CATLASS, "block_s1": 256, "double_buffer": 0}))
    assert not m["ub"][0] and m["l1"][0]
    shape = ",".join(f"{k}={v}" for k, v in PREFILL.items())
    code = main(
        ["search", "--op", "flash_attention", "--chip", "ascend910b3", "--shape", shape]
        + ["--fix", "block_s2=1024", "--fix", "double_buffer=1"]
    )
    err = capsys.readouterr().err.strip().splitlines()
    assert code == 2 and len(err) == 1 and "'l1'" in err[0]


# ------------------------------------------------------------------------------------------------ CLI


@pytest.mark.parametrize(
    "shape",
    [
        "B=1,heads=32,kv_heads=3,S1=128,S2=128,D=128",  # kv_heads does not divide heads
        "B=1,heads=32,kv_heads=8,S1=128,S2=128,D=0",
        "B=1,heads=32,kv_heads=8,S1=0,S2=128,D=128",
        "B=1,heads=32,kv_heads=8,S1=128,S2=0,D=128",
        "B=1,heads=32,kv_heads=8,S1=256,S2=128,D=128,causal=1",  # S1 > S2 under the causal mask
    ],
)
def test_bad_input_is_one_line_and_exit_2(shape, capsys):
    code = main(["search", "--op", "flash_attention", "--chip", "ascend910b3", "--shape", shape])
    err = capsys.readouterr().err.strip().splitlines()
    assert code == 2 and len(err) == 1 and "Traceback" not in err[0]


@pytest.mark.parametrize("shape", [PREFILL, DECODE], ids=["prefill", "decode"])
def test_search_explain_export_and_check_from_the_cli(shape, tmp_path, capsys):
    """search --export writes a document carrying the ascendc_fa view; `tiler check` passes it and rejects a view
    whose buffer overflows the chip; `tiler explain` of the exported tiling prints the per-core pipelines, the
    exchange and the balance with and without balancing."""
    text = ",".join(f"{k}={v}" for k, v in shape.items())
    out = tmp_path / "fa.json"
    base = ["--op", "flash_attention", "--chip", "ascend910b3", "--shape", text]
    assert main(["search", *base, "--export", str(out)]) == 0
    capsys.readouterr()
    doc = json.loads(out.read_text())
    view = doc["targets"]["ascendc_fa"]
    assert view["block_dim"] == doc["launch"]["block_dim"] <= 20
    assert view["kernel_task_num"] == view["preload"] + 1 and view["cv_ratio"] == 2
    assert main(["check", str(out)]) == 0
    capsys.readouterr()
    assert main(["explain", *base, "--tiling", str(out)]) == 0
    lines = capsys.readouterr().out
    for want in ("per core (the busiest): cube", "exchange through GM/L2", "balance across cores: plain"):
        assert want in lines
    bad = json.loads(out.read_text())
    bad["targets"]["ascendc_fa"]["ub_bytes"] = 10**6
    bad_path = tmp_path / "bad.json"
    bad_path.write_text(json.dumps(bad))
    assert main(["check", str(bad_path)]) == 1
    assert "ub_bytes" in capsys.readouterr().out
