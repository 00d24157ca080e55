"""tiler.shapes: a model's config.json -> the operator shapes of one forward pass, as sweep rows.

Expected shapes are computed here from the config's own numbers (read from the shipped config.json), never copied
from the module's output: a wrong split, a lost layer or a wrong count fails the test that names it.
"""

from __future__ import annotations

import json
import math
from pathlib import Path

import pandas as pd
import pytest

from tiler.errors import TilerError
from tiler.shapes import ModelConfig, load_config, model_shapes, write_shapes
from tiler.sweep import parse_rows, read_shapes, run_sweep

ROOT = Path(__file__).resolve().parent.parent
MODELS = ROOT / "examples" / "models"
LLAMA8 = MODELS / "llama-3-8b" / "config.json"
QWEN_MOE = MODELS / "qwen1.5-moe-a2.7b" / "config.json"
MIXTRAL = MODELS / "mixtral-8x7b-instruct-v0.1" / "config.json"


def raw(path: Path) -> dict:
    return json.loads(path.read_text())


def by_name(frame: pd.DataFrame, tokens: int) -> dict[str, dict]:
    return {r["name"]: r for r in frame[frame["tokens"] == tokens].to_dict("records")}


# --------------------------------------------------------------------------------------------- dense linears


@pytest.mark.parametrize("tp", [1, 2])
def test_llama3_8b_linears_split_as_megatron(tp):
    c = raw(LLAMA8)
    hidden, heads, kv = c["hidden_size"], c["num_attention_heads"], c["num_key_value_heads"]
    head_dim, inter, layers = hidden // heads, c["intermediate_size"], c["num_hidden_layers"]
    frame = model_shapes(LLAMA8, "matmul", tokens=(1, 128, 2048), tp=tp)
    assert set(frame["layout"]) == {"nt"}  # nn.Linear weights are stored N x K
    assert set(frame["dtype"]) == {"bf16"}  # the config's torch_dtype
    for t in (1, 128, 2048):
        rows = by_name(frame, t)
        expected = {
            "layers.qkv_proj": ((heads + 2 * kv) * head_dim // tp, hidden, layers),  # column-parallel
            "layers.o_proj": (hidden, heads * head_dim // tp, layers),  # row-parallel
            "layers.gate_up_proj": (2 * inter // tp, hidden, layers),  # column-parallel, gate and up fused
            "layers.down_proj": (hidden, inter // tp, layers),  # row-parallel
            "lm_head": (math.ceil(c["vocab_size"] / tp), hidden, 1),  # vocab-parallel
        }
        assert set(rows) == set(expected)
        for name, (n, k, count) in expected.items():
            assert (rows[name]["M"], rows[name]["N"], rows[name]["K"], rows[name]["count"]) == (
                t,
                n,
                k,
                count,
            ), name


def test_tp2_halves_the_split_dimension_of_every_linear():
    one = model_shapes(LLAMA8, "matmul", tokens=(128,), tp=1).set_index("name")
    two = model_shapes(LLAMA8, "matmul", tokens=(128,), tp=2).set_index("name")
    for name in ("layers.qkv_proj", "layers.gate_up_proj", "lm_head"):
        assert two.loc[name, "N"] * 2 == one.loc[name, "N"] and two.loc[name, "K"] == one.loc[name, "K"]
    for name in ("layers.o_proj", "layers.down_proj"):
        assert two.loc[name, "K"] * 2 == one.loc[name, "K"] and two.loc[name, "N"] == one.loc[name, "N"]


def test_kv_heads_are_replicated_when_tp_exceeds_them():
    """tp = 16 > 8 KV heads: each rank holds one K/V head (vLLM copies each to tp / kv ranks)."""
    c = raw(LLAMA8)
    heads, head_dim = c["num_attention_heads"], c["hidden_size"] // c["num_attention_heads"]
    tp = 2 * c["num_key_value_heads"]
    rows = by_name(model_shapes(LLAMA8, "matmul", tokens=(4,), tp=tp), 4)
    assert rows["layers.qkv_proj"]["N"] == (heads // tp + 2 * 1) * head_dim
    attn = by_name(model_shapes(LLAMA8, "flash_attention", tokens=(4,), tp=tp), 4)
    assert {r["kv_heads"] for r in attn.values()} == {1}


def test_counts_add_up_to_layers_times_linears_plus_lm_head():
    c = raw(LLAMA8)
    frame = model_shapes(LLAMA8, "matmul", tokens=(1, 16, 4096), tp=2)
    per_pass = frame.groupby("tokens")["count"].sum()
    assert list(per_pass.index) == [1, 16, 4096]
    assert set(per_pass) == {c["num_hidden_layers"] * 4 + 1}  # qkv, o, gate_up, down per layer; one lm_head


# --------------------------------------------------------------------------------------------- MoE


def _expert_rows(c: dict, tokens: int) -> tuple[int, int]:
    """(M, count) of a routed expert's GEMM: the average routed tokens per expert rounded up, over the experts
    that receive any."""
    experts = c.get("num_experts") or c["num_local_experts"]
    top_k = c["num_experts_per_tok"]
    return max(1, math.ceil(tokens * top_k / experts)), c["num_hidden_layers"] * min(experts, tokens * top_k)


@pytest.mark.parametrize("tokens", [1, 15, 16, 128, 2048])
def test_qwen_moe_expert_m_is_the_average_routed_load(tokens):
    c = raw(QWEN_MOE)
    hidden, layers, moe = c["hidden_size"], c["num_hidden_layers"], c["moe_intermediate_size"]
    shared = c["shared_expert_intermediate_size"]
    rows = by_name(model_shapes(QWEN_MOE, "matmul", tokens=(tokens,)), tokens)
    m, count = _expert_rows(c, tokens)
    assert (rows["layers.experts.gate_up_proj"]["M"], rows["layers.experts.gate_up_proj"]["count"]) == (
        m,
        count,
    )
    assert (rows["layers.experts.gate_up_proj"]["N"], rows["layers.experts.gate_up_proj"]["K"]) == (
        2 * moe,
        hidden,
    )
    assert (rows["layers.experts.down_proj"]["N"], rows["layers.experts.down_proj"]["K"]) == (hidden, moe)
    assert rows["layers.experts.down_proj"]["M"] == m
    # the router and the shared expert see every token of the pass
    router = rows["layers.router"]
    assert (router["M"], router["N"], router["K"], router["count"]) == (
        tokens,
        c["num_experts"],
        hidden,
        layers,
    )
    assert (
        rows["layers.shared_experts.gate_up_proj"]["M"],
        rows["layers.shared_experts.gate_up_proj"]["N"],
    ) == (
        tokens,
        2 * shared,
    )
    assert rows["layers.shared_experts.down_proj"]["K"] == shared
    assert (rows["layers.shared_expert_gate"]["N"], rows["layers.shared_expert_gate"]["K"]) == (1, hidden)
    # counts: qkv, o, router, shared gate_up, shared down, shared gate per layer; the experts; one lm_head
    assert sum(r["count"] for r in rows.values()) == 6 * layers + 2 * count + 1
    assert "layers.gate_up_proj" not in rows  # every layer is MoE (decoder_sparse_step 1, no mlp_only_layers)


def test_mixtral_experts_take_intermediate_size_and_tp_splits_them():
    c = raw(MIXTRAL)
    frame = model_shapes(MIXTRAL, "matmul", tokens=(1, 64), tp=2)
    for t in (1, 64):
        rows = by_name(frame, t)
        m, count = _expert_rows(c, t)
        up = rows["layers.experts.gate_up_proj"]
        assert (up["M"], up["N"], up["K"], up["count"]) == (
            m,
            2 * c["intermediate_size"] // 2,
            c["hidden_size"],
            count,
        )
        assert rows["layers.experts.down_proj"]["K"] == c["intermediate_size"] // 2
        assert not any("shared" in name for name in rows)  # Mixtral has no shared expert
        assert rows["layers.router"]["N"] == c["num_local_experts"]  # replicated: not split by tp


def test_dense_and_moe_layers_of_one_shape_merge_into_one_row():
    """Qwen-MoE with layer 0 dense (mlp_only_layers): its MLP has the shared expert's width, so within a pass the
    two GEMMs are one shape: one row, both names, the counts added."""
    c = raw(QWEN_MOE) | {"mlp_only_layers": [0]}
    assert c["intermediate_size"] == c["shared_expert_intermediate_size"]
    rows = by_name(model_shapes(c, "matmul", tokens=(32,)), 32)
    merged = rows["layers.gate_up_proj+layers.shared_experts.gate_up_proj"]
    assert merged["count"] == 1 + (c["num_hidden_layers"] - 1)
    assert rows["layers.router"]["count"] == c["num_hidden_layers"] - 1
    frame = model_shapes(c, "matmul", tokens=(32, 64))
    assert not frame.duplicated(["tokens", "M", "N", "K"]).any()


def test_sparse_step_and_deepseek_fields_select_moe_layers_and_shared_width():
    c = raw(QWEN_MOE) | {"decoder_sparse_step": 2}
    cfg = load_config(c)
    assert cfg.moe_layers == c["num_hidden_layers"] // 2 and cfg.dense_layers == c["num_hidden_layers"] // 2
    deepseek = {  # DeepSeek-MoE style: first layer dense, two shared experts run as one MLP, no shared gate
        "hidden_size": 2048,
        "num_attention_heads": 16,
        "num_key_value_heads": 16,
        "num_hidden_layers": 28,
        "vocab_size": 102400,
        "intermediate_size": 10944,
        "n_routed_experts": 64,
        "num_experts_per_tok": 6,
        "moe_intermediate_size": 1408,
        "n_shared_experts": 2,
        "first_k_dense_replace": 1,
    }
    cfg = load_config(deepseek)
    assert (cfg.moe_layers, cfg.num_experts, cfg.shared_intermediate_size) == (27, 64, 2 * 1408)
    rows = by_name(model_shapes(deepseek, "matmul", tokens=(8,)), 8)
    assert rows["layers.shared_experts.gate_up_proj"]["N"] == 2 * 2 * 1408
    assert rows["layers.gate_up_proj"]["count"] == 1 and "layers.shared_expert_gate" not in rows


# --------------------------------------------------------------------------------------------- attention


@pytest.mark.parametrize("tp,batch", [(1, 1), (2, 4)])
def test_prefill_and_decode_attention_rows(tp, batch):
    c = raw(LLAMA8)
    heads, kv, layers = c["num_attention_heads"], c["num_key_value_heads"], c["num_hidden_layers"]
    frame = model_shapes(LLAMA8, "flash_attention", tokens=(4, 128, 2048), context=8192, batch=batch, tp=tp)
    for t in (4, 128, 2048):
        rows = by_name(frame, t)
        assert set(rows) == {"layers.attention.prefill", "layers.attention.decode"}
        pre, dec = rows["layers.attention.prefill"], rows["layers.attention.decode"]
        assert (pre["B"], pre["S1"], pre["S2"], pre["causal"]) == (batch, t // batch, t // batch, 1)
        assert (dec["B"], dec["S1"], dec["S2"], dec["causal"]) == (t, 1, 8192, 0)
        for r in (pre, dec):
            assert (r["heads"], r["kv_heads"], r["D"], r["count"]) == (heads // tp, kv // tp, 128, layers)


# --------------------------------------------------------------------------------------------- the sweep reads them


@pytest.mark.parametrize(
    "config,op",
    [(LLAMA8, "matmul"), (QWEN_MOE, "matmul"), (LLAMA8, "flash_attention"), (QWEN_MOE, "flash_attention")],
)
def test_rows_round_trip_through_the_sweep_reader(tmp_path, config, op):
    frame = model_shapes(config, op, tokens=(1, 16, 512), tp=2)
    out = write_shapes(frame, tmp_path / "sub" / "shapes.csv")  # a missing folder is made
    rows = parse_rows(read_shapes(out), op)
    assert [r.error for r in rows] == [None] * len(frame)
    for r, rec in zip(rows, frame.to_dict("records"), strict=True):
        shape = r.problem.shape()
        assert {k: shape[k] for k in shape if k in frame.columns} == {
            k: rec[k] for k in shape if k in frame.columns
        }
        assert r.count == rec["count"] and r.problem.dtype == rec["dtype"]
        if op == "matmul":
            assert r.problem.b_transposed  # read back as layout=nt


def test_empty_dtype_cell_takes_the_sweeps_dtype():
    c = {k: v for k, v in raw(LLAMA8).items() if k != "torch_dtype"}
    frame = model_shapes(c, "matmul", tokens=(8,))
    assert set(frame["dtype"]) == {""}
    assert {r.problem.dtype for r in parse_rows(read_shapes(frame), "matmul", dtype="fp32")} == {"fp32"}
    assert set(model_shapes(c, "matmul", tokens=(8,), dtype="fp16")["dtype"]) == {"fp16"}


def test_run_sweep_on_generated_rows(tmp_path):
    frame = model_shapes(LLAMA8, "matmul", tokens=(16,), tp=2)
    shapes = write_shapes(frame, tmp_path / "l8.csv")
    report = run_sweep(shapes, "matmul", "h200", tmp_path / "out.csv")
    assert len(report.frame) == len(frame) and set(report.frame["status"]) == {"ok"}
    assert list(report.frame["name"]) == list(frame["name"]) and set(report.frame["tokens"]) == {
        "16"
    }  # passed through as text


@pytest.mark.parametrize(
    "csv,config",
    [("llama3_8b.csv", "llama-3-8b"), ("llama3_70b.csv", "llama-3-70b"), ("qwen2_5_7b.csv", "qwen2.5-7b")],
)
def test_shipped_shape_files_are_what_tiler_shapes_writes(csv, config):
    """examples/shapes/*.csv are regenerated by this module (README there): a hand edit, or a change of the
    rows' conventions without regenerating them, fails here."""
    shipped = pd.read_csv(ROOT / "examples" / "shapes" / csv, dtype=str, keep_default_na=False)
    tokens = [int(t) for t in dict.fromkeys(shipped["tokens"])]
    made = model_shapes(MODELS / config, "matmul", tokens=tokens).astype(str)
    pd.testing.assert_frame_equal(shipped, made)


# --------------------------------------------------------------------------------------------- bad input


def _one_line(call, *starts: str) -> str:
    with pytest.raises(TilerError) as info:
        call()
    text = str(info.value)
    assert "\n" not in text and text.startswith(starts), text
    return text


BASE = {
    "hidden_size": 4096,
    "num_attention_heads": 32,
    "num_key_value_heads": 8,
    "intermediate_size": 14336,
    "vocab_size": 128256,
    "num_hidden_layers": 32,
}


@pytest.mark.parametrize(
    "change,starts",
    [
        ({"hidden_size": None}, "config: hidden_size: missing (needed for every linear)"),
        ({"num_hidden_layers": None}, "config: num_hidden_layers: missing"),
        ({"vocab_size": None}, "config: vocab_size: missing (needed for the lm_head)"),
        ({"intermediate_size": None}, "config: intermediate_size: missing"),
        ({"hidden_size": "4096"}, "config: hidden_size: must be an integer in 1..2147483647, got '4096'"),
        ({"hidden_size": 4096.5}, "config: hidden_size: must be an integer"),
        ({"num_attention_heads": True}, "config: num_attention_heads: must be an integer"),
        ({"num_hidden_layers": 0}, "config: num_hidden_layers: must be an integer in 1.."),
        ({"num_key_value_heads": 5}, "config: num_key_value_heads: must divide num_attention_heads (32"),
        ({"hidden_size": 4100}, "config: head_dim: missing, and hidden_size 4100 is not a multiple"),
        ({"num_local_experts": 8}, "config: num_experts_per_tok: missing (needed for the expert GEMMs"),
        (
            {"num_experts": 8, "num_experts_per_tok": 9},
            "config: num_experts_per_tok: at most num_experts (8)",
        ),
        (
            {"num_experts": 8, "num_experts_per_tok": 2, "intermediate_size": None},
            "config: intermediate_size: missing (needed for the expert GEMMs",
        ),
        (
            {"num_experts": 8, "num_experts_per_tok": 2, "mlp_only_layers": [40]},
            "config: mlp_only_layers: must be a list of layer indices in 0..31",
        ),
        ({"kv_lora_rank": 512}, "config: kv_lora_rank: multi-head latent attention"),
    ],
)
def test_bad_config_is_one_line_naming_the_field(change, starts):
    c = {k: v for k, v in (BASE | change).items() if v is not None}
    _one_line(lambda: model_shapes(c, "matmul"), starts)


def test_bad_config_file_is_one_line_naming_the_path(tmp_path):
    missing = tmp_path / "config.json"
    missing.write_text(json.dumps({k: v for k, v in BASE.items() if k != "hidden_size"}))
    _one_line(lambda: model_shapes(missing, "matmul"), f"{missing}: hidden_size: missing")
    bad = tmp_path / "bad.json"
    bad.write_text("{not json")
    _one_line(lambda: load_config(bad), f"{bad}: not valid JSON")
    listed = tmp_path / "list.json"
    listed.write_text("[1, 2]")
    _one_line(lambda: load_config(listed), f"{listed}: must be a JSON object")
    _one_line(lambda: load_config(tmp_path / "nope.json"), f"{tmp_path / 'nope.json'}: cannot read")
    _one_line(lambda: load_config(tmp_path / "empty_dir"), f"{tmp_path / 'empty_dir'}: cannot read")
    (tmp_path / "model").mkdir()
    (tmp_path / "model" / "config.json").write_text(json.dumps(BASE))
    assert load_config(tmp_path / "model").hidden_size == BASE["hidden_size"]  # a snapshot folder


@pytest.mark.parametrize(
    "kwargs,starts",
    [
        (dict(tokens="0"), "tokens: must be positive integers (at most 2147483647), got '0'"),
        (dict(tokens="1,x"), "tokens: must be positive integers"),
        (dict(tokens="\u00b2"), "tokens: must be positive integers"),  # a digit to isdigit(), not to int()
        (dict(tokens=1.5), "tokens: must be positive integers, got 1.5"),
        (dict(tokens=[-5]), "tokens: must be positive integers"),
        (dict(tokens=[True]), "tokens: must be positive integers"),
        (dict(tokens=""), "tokens: give at least one token count"),
        (dict(tokens="8,8"), "tokens: 8 given twice"),
        (dict(tokens=[2**31]), "tokens: must be positive integers (at most 2147483647)"),
        (dict(context=0), "context: must be a positive integer"),
        (dict(batch="x"), "batch: must be a positive integer"),
        (dict(tp=0), "tp: must be a positive integer"),
        (dict(tp=3), "tp: must divide num_attention_heads (32 in config"),
        (dict(tp=64), "tp: must divide num_attention_heads"),
        (dict(dtype="fp12"), "dtype: must be one of fp16, bf16, fp32, int8"),
        (dict(dtype=""), "dtype: must be one of"),
        (dict(op="conv"), "op: must be one of matmul, flash_attention, got 'conv'"),
        (dict(op="flash_attention", tokens="6", batch=4), "tokens: each must be a multiple of batch (4)"),
    ],
)
def test_bad_parameter_is_one_line_naming_it(kwargs, starts):
    args = dict(op="matmul") | kwargs
    _one_line(lambda: model_shapes(BASE, **args), starts)


def test_a_shape_beyond_tilers_limits_is_refused():
    big_vocab = BASE | {"vocab_size": 10**6}  # lm_head: 2**29 tokens x 10**6 outputs > 2**48 elements
    _one_line(
        lambda: model_shapes(big_vocab, "matmul", tokens=[2**29]), "tokens: 536870912 makes lm_head too large"
    )
    _one_line(
        lambda: model_shapes(BASE, "flash_attention", tokens=[2**20], context=2**31 - 1),
        "tokens: 1048576 with context 2147483647 makes layers.attention.decode too large",
    )


def test_tp_that_cannot_split_kv_heads_or_widths_is_refused():
    # 48 heads split by 12, but 8 K/V heads neither split by 12 nor copy evenly onto 12 ranks
    _one_line(
        lambda: model_shapes(BASE | {"num_attention_heads": 48, "head_dim": 128}, "matmul", tp=12),
        "tp: with fewer K/V heads (8",
    )
    _one_line(
        lambda: model_shapes(BASE | {"intermediate_size": 1000}, "matmul", tp=16),
        "tp: must divide intermediate_size",
    )
    moe = BASE | {"num_experts": 8, "num_experts_per_tok": 2, "moe_intermediate_size": 1000}
    _one_line(lambda: model_shapes(moe, "flash_attention", tp=16), "tp: must divide the experts' width")


def test_write_shapes_refuses_a_folder(tmp_path):
    frame = model_shapes(BASE, "matmul", tokens=(1,))
    _one_line(lambda: write_shapes(frame, tmp_path), f"out: {tmp_path}: is a folder")


def test_token_counts_from_text_numpy_or_one_integer():
    import numpy as np

    text = model_shapes(BASE, "matmul", tokens=" 8 , 16", tp="2")
    assert list(model_shapes(BASE, "matmul", tokens=np.array([8, 16]), tp=np.int64(2))["M"]) == list(
        text["M"]
    )
    assert set(text["tokens"]) == {8, 16} and set(model_shapes(BASE, "matmul", tokens=8)["tokens"]) == {8}


def test_model_config_from_dict_defaults():
    """num_key_value_heads defaults to the heads (multi-head attention) and head_dim to hidden / heads, as in
    transformers."""
    cfg = ModelConfig.from_dict({k: v for k, v in BASE.items() if k != "num_key_value_heads"})
    assert cfg.num_key_value_heads == BASE["num_attention_heads"]
    assert cfg.head_dim == BASE["hidden_size"] // BASE["num_attention_heads"]
    assert load_config(BASE | {"head_dim": 64}).head_dim == 64


def test_cli_bad_config_is_one_line_and_writes_nothing(tmp_path, capsys):
    """`tiler shapes` on a config.json without the needed fields, or with a bad option: exit 2, one line, no file."""
    from tiler.cli import main

    bad = tmp_path / "config.json"
    bad.write_text(json.dumps({"num_attention_heads": 32, "num_hidden_layers": 2}))
    out = tmp_path / "rows.csv"
    for args in (
        [str(bad), "--op", "matmul"],
        [str(bad), "--op", "flash_attention", "--tp", "0"],
        [str(tmp_path / "missing.json"), "--op", "matmul"],
    ):
        assert main(["shapes", *args, "--out", str(out)]) == 2
        err = capsys.readouterr().err
        assert err.startswith("error: ") and err.count("\n") == 1, err
        assert not out.exists()
