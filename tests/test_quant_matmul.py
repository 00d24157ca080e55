"""Quantised matmul (issue 29 item 3): int8 GEMMs with dequant scales, a float output, int4 B, and where the dequant
runs (docs/model.md, "Quantised matmul"). Each test asserts a direction a toy model (FLOPs over a peak, bytes over a
bandwidth) would get wrong or could not state."""

from __future__ import annotations

import numpy as np
import pytest
from conftest import ascend_floors_hold

import tiler
from tiler.cli import main
from tiler.errors import ProblemError
from tiler.hardware import load_chip
from tiler.ops.matmul.ascend import WARM_START
from tiler.problem import parse_problem

CHIP = "ascend910b2"


def best(shape: str, dtype: str = "int8", chip: str = CHIP, **kw):
    return tiler.search(op="matmul", chip=chip, shape=shape, dtype=dtype, top=1, runnable=False, **kw).row(0)


def at(shape: str, chip: str = CHIP, **knobs):
    """The estimate of CATLASS's default tiling (split_k 1 unless given) for an int8 problem."""
    tiling = dict(WARM_START, base_k=128, **knobs)
    return tiler.explain(op="matmul", chip=chip, shape=shape, dtype="int8", tiling=tiling).row


def test_problem_fields_default_away_and_keep_old_keys():
    p = parse_problem("matmul", {"M": 64, "N": 32, "K": 16}, "int8")
    assert p.key() == "matmul:M=64,N=32,K=16,batch=1:int8" and p.out_bytes == 4 and not p.quant
    q = parse_problem("matmul", {"M": 64, "N": 32, "K": 16, "scale": "channel_token"}, "int8")
    assert q.quant and q.output_dtype == "fp16" and q.out_bytes == 2
    assert "scale=channel_token" in q.key() and q.label().endswith("_scalechannel_token:int8")
    # the scales are compulsory bytes: N 64-bit per-channel words and M fp32 per-token values
    assert (
        q.compulsory_bytes
        - parse_problem("matmul", {"M": 64, "N": 32, "K": 16, "out_dtype": "fp16"}, "int8").compulsory_bytes
        == 8 * 32 + 4 * 64
    )
    w4 = parse_problem("matmul", {"M": 64, "N": 32, "K": 16, "b_dtype": "int4"}, "int8")
    assert w4.compulsory_bytes == p.compulsory_bytes - 32 * 16 / 2


@pytest.mark.parametrize(
    "fields, dtype, words",
    [
        ({"scale": "token"}, "fp16", "needs dtype int8"),
        ({"b_dtype": "int4"}, "bf16", "needs dtype int8"),
        ({"scale": "channel", "out_dtype": "int32"}, "int8", "a dequantised output is a float"),
    ],
)
def test_bad_quant_fields_name_themselves(fields, dtype, words):
    with pytest.raises(ProblemError, match=words):
        parse_problem("matmul", {"M": 64, "N": 32, "K": 16, **fields}, dtype)


@pytest.mark.parametrize(
    "chip, extra, words",
    [
        ("ascend910b2", "scale=token,dequant=fixpipe", "per-token"),
        ("ascend910b2", "scale=channel,out_dtype=bf16,dequant=fixpipe", "fp16 only"),
        ("ascend910a", "scale=channel,dequant=fixpipe", "has no fixpipe"),
        ("h200", "b_dtype=int4", "int4 weights are not modelled"),
        ("h200", "scale=channel,dequant=vector", "Ascend placement"),
    ],
)
def test_paths_a_chip_lacks_are_refused_in_one_line(chip, extra, words, capsys):
    code = main(
        [
            "search",
            "--op",
            "matmul",
            "--chip",
            chip,
            "--shape",
            f"M=64,N=256,K=512,{extra}",
            "--dtype",
            "int8",
        ]
    )
    err = capsys.readouterr().err
    assert code == 2, err
    assert words in err and "Traceback" not in err and len(err.strip().splitlines()) == 1


def test_int8_is_about_twice_fp16_when_cube_bound_not_when_memory_bound():
    """The int8 cube does 2x the fp16 MACs per cycle (16x32x16 fractal) and the operands are half the bytes, so a
    cube-bound 8192^3 runs ~2x faster; a decode GEMM (M=16) streams B from HBM and the fixed costs stay, so its gain
    is well below 2x (a FLOPs-over-peak toy says 2x everywhere)."""
    big = "M=8192,N=8192,K=8192"
    fp16, q8 = best(big, "fp16"), best(big + ",scale=channel")
    assert fp16["bound"] == "cube" and q8["bound"] == "cube"
    assert 1.7 <= fp16["time_us"] / q8["time_us"] <= 2.05
    small = "M=16,N=4096,K=4096"
    gain_small = best(small, "fp16")["time_us"] / best(small + ",scale=channel")["time_us"]
    assert gain_small < fp16["time_us"] / q8["time_us"] - 0.1


def test_the_vector_epilogue_round_trip_matters_on_small_m():
    """dequant=vector writes the int32 accumulator to a GM workspace and reads it back on the vector cores: on a
    small-M kernel (one round of tiles) nothing hides the last tile's epilogue and the cube->vector hand-off, so the
    per-channel vector path costs >10% more than the fixpipe path; on a large cube-bound GEMM the epilogue overlaps
    the cube and the difference is a few percent either way (here the fp16 output spills L2: the fixpipe's HBM writes
    stall the cube a little, the workspace path moves them to the vector cores; a model prediction, unmeasured)."""
    small, large = "M=128,N=4096,K=4096,scale=channel", "M=8192,N=8192,K=4096,scale=channel"
    extra_small = best(small + ",dequant=vector")["time_us"] / best(small + ",dequant=fixpipe")["time_us"] - 1
    extra_large = best(large + ",dequant=vector")["time_us"] / best(large + ",dequant=fixpipe")["time_us"] - 1
    assert extra_small > 0.10
    assert abs(extra_large) < 0.08 and extra_small > abs(extra_large) + 0.05


def test_a_per_token_scale_costs_a_vector_pass_the_per_channel_fixpipe_does_not():
    shape = "M=256,N=4096,K=2048"
    channel, token = at(shape + ",scale=channel"), at(shape + ",scale=token")
    assert channel["quant_us"] == 0 and channel["vec_us"] == 0
    assert token["quant_us"] > 0 and token["vec_us"] > 0 and token["mte3_us"] > 0
    assert token["time_us"] > channel["time_us"] + token["quant_us"] * 0.99
    # the per-channel fixpipe path writes fp16, not int32: less than the int32 output of the plain int8 GEMM
    assert channel["fixpipe_us"] <= at(shape)["fixpipe_us"] * (1 + 1e-9)


def test_split_k_dequantises_in_the_reduction_pass():
    """Under split-K the partial sums are added in GM first; the dequant runs in the reduction's cast pass (no per-tile
    epilogue), so a per-token problem has no vector side beyond the reduction."""
    row = at("M=128,N=256,K=8192,scale=channel_token", split_k=4, preload=0)
    assert row["quant_us"] == 0 and row["vec_us"] > 0
    plain = at("M=128,N=256,K=8192", split_k=4, preload=0)  # int32 out: no cast pass at all
    assert row["time_us"] > plain["time_us"]


def test_coupled_chips_hand_off_on_chip():
    """910A has no fixpipe: the dequant runs on the vector unit of the same core, reading L0C through UB, with no GM
    round trip; its hand-off is one sync, not two GM latencies as on the separated A2 cores."""
    from tiler.ops.matmul.ascend import _geometry, _vector_side, dequant_site

    assert at("M=256,N=1024,K=1024,scale=channel")["quant_us"] == 0  # the fixpipe dequantises on A2
    knobs = dict(WARM_START, base_k=128, iterate_order=0, tail_split=1, core_split=0)
    c = {k: np.array([v]) for k, v in knobs.items()}
    p = parse_problem("matmul", {"M": 256, "N": 1024, "K": 1024, "scale": "token"}, "int8")
    hand = {}
    for chip_id in ("ascend910a", "ascend910b2"):
        chip = load_chip(chip_id)
        assert dequant_site(p, chip) == "vector"
        hand[chip_id] = _vector_side(p, chip, c, _geometry(p, c), np.array([4.0]), np.array([0.0]))[
            "handoff"
        ][0]
    assert hand["ascend910a"] * 1e6 < 0.1 < 0.5 < hand["ascend910b2"] * 1e6


def test_int4_b_halves_the_weight_bytes_from_hbm_but_adds_a_vector_pass():
    """A8W4 (CATLASS W4A8MatmulLocal): the vector cores read B as int4 (half the HBM bytes) and widen it into a
    workspace the cube reads from L2; the pass is never free (W4A16 on 910: the extra GM transfer of the weight is the
    bottleneck, arXiv 2601.16536)."""
    shape = "M=16,N=4096,K=4096,scale=channel"
    w8, w4 = best(shape), best(shape + ",b_dtype=int4")
    assert w4["hbm_bytes"] < w8["hbm_bytes"] * 0.75
    assert w4["quant_us"] > 0
    assert w4["vec_us"] > 0 and w8["vec_us"] == 0


@pytest.mark.parametrize(
    "fields, chip_id",
    [
        ({"M": 17, "N": 999, "K": 333, "scale": "channel_token"}, "ascend910b3"),
        ({"M": 1, "N": 4096, "K": 4096, "scale": "token", "out_dtype": "bf16"}, "ascend910b2"),
        ({"M": 2048, "N": 4096, "K": 4096, "scale": "channel"}, "ascend910b2"),
        (
            {"M": 300, "N": 2000, "K": 1000, "scale": "channel", "dequant": "vector", "b_dtype": "int4"},
            "ascend910b3",
        ),
        ({"M": 512, "N": 512, "K": 2048, "scale": "token"}, "ascend910a"),
        ({"M": 9000, "N": 9000, "K": 512, "scale": "channel", "dequant": "vector"}, "ascend910b2"),
    ],
)
def test_bounds_and_roofline_stay_below_quantised_estimates(fields, chip_id):
    """The search's floors (quick_bound, bound, prefix_bound) and the roofline never exceed a quantised estimate:
    the dequant terms only add time, and int4's L2-resident B is within the floors' best bandwidth."""
    ascend_floors_hold(parse_problem("matmul", fields, "int8"), load_chip(chip_id), seed=7)


def test_exports_promise_no_quant_kernel():
    """The CATLASS and AscendC views write the plain int8 -> int32 matmul: a quantised problem gets no view of
    either, with the reason; the plain int8 problem keeps its views."""
    q = tiler.search(
        op="matmul", chip="ascend910b3", shape="M=512,N=1024,K=1024,scale=channel_token", dtype="int8", top=1
    ).document()
    assert not q["targets"]
    assert "QuantMatmulMultiStageWorkspace" in q["no_view"]["catlass"]
    assert "QuantBatchMatmulV3" in q["no_view"]["ascendc"]
    plain = tiler.search(op="matmul", chip="ascend910b3", shape="M=512,N=1024,K=1024", dtype="int8", top=1)
    assert {"catlass", "ascendc"} <= set(plain.document()["targets"])
    cuda = tiler.search(
        op="matmul", chip="h200", shape="M=512,N=1024,K=1024,scale=token", dtype="int8", top=1
    ).document()
    assert "triton" in cuda["no_view"] and not cuda["targets"]


def test_explain_names_the_vector_side():
    ex = tiler.explain(
        op="matmul",
        chip=CHIP,
        shape="M=128,N=4096,K=4096,scale=token",
        dtype="int8",
        tiling=dict(WARM_START, base_k=128),
    )
    text = " ".join(ex.advice)
    assert "dequant epilogue" in text and "hand-off" in text


def test_a_vector_epilogue_pays_one_mix_launch_on_separated_chips_only():
    """A per-token scale runs the dequant on the vector cores: on the 910B2 (separated cores) the kernel is a MIX
    launch and pays mix_head_us once, whatever the cores used; on the coupled 310P3 the same core's vector unit
    runs it and nothing is paid; a fixpipe dequant (per-channel, fp16) is a cube-only kernel and pays nothing."""
    cases = (
        ("ascend910b2", "scale=token", 10.0),
        ("ascend310p3", "scale=token", 0.0),
        (CHIP, "scale=channel", 0.0),
    )
    for chip_id, scale, paid in cases:
        chip = load_chip(chip_id)
        rows = [
            at(f"M=128,N=4096,K=1024,{scale}", chip=chip.with_values({"mix_head_us": v})) for v in (0.0, 10.0)
        ]
        assert rows[1]["time_us"] - rows[0]["time_us"] == pytest.approx(paid, abs=1e-9)
    text = " ".join(
        tiler.explain(
            op="matmul",
            chip=CHIP,
            shape="M=128,N=4096,K=4096,scale=token",
            dtype="int8",
            tiling=dict(WARM_START),
        ).advice
    )
    assert "MIX launch" in text


def test_split_k_quant_reduces_in_the_same_mix_kernel():
    """CATLASS 52: under split-K the vector cores of the same MIX kernel reduce and dequantise after a cross-core
    barrier, so the kernel pays the MIX launch once and the launch head once (a plain split-K's cast pass is a
    kernel of its own, with its own head)."""
    chip = load_chip(CHIP)
    shape = "M=128,N=256,K=8192,scale=channel_token"
    times = {}
    for mix, head in ((0.0, 5.0), (10.0, 5.0), (0.0, 6.0)):
        tuned = chip.with_values({"mix_head_us": mix, "head_base_us": head})
        times[mix, head] = at(shape, chip=tuned, split_k=4, preload=0)["time_us"]
    assert times[10.0, 5.0] - times[0.0, 5.0] == pytest.approx(10.0, abs=1e-9)
    assert times[0.0, 6.0] - times[0.0, 5.0] == pytest.approx(1.0, abs=1e-9)
    fp16 = [
        tiler.explain(
            op="matmul",
            chip=chip.with_values({"head_base_us": h}),
            shape="M=128,N=256,K=8192",
            tiling=dict(WARM_START, split_k=4, preload=0),
        ).row["time_us"]
        for h in (5.0, 6.0)
    ]
    assert fp16[1] - fp16[0] == pytest.approx(2.0, abs=1e-9)
