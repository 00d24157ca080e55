"""The operator shapes of a whole transformer, from its Hugging Face `config.json`: a shape file for `tiler sweep`.

A decoder's forward pass is a handful of distinct GEMMs and one attention per layer, repeated over its layers. The
kernels worth tuning are those shapes, weighted by how often they run, and they follow from the dimensions a
`config.json` publishes, the token counts of the passes and the tensor parallelism of the deployment. This module
writes them as rows of the sweep's own CSV format (`name`, the operator's problem fields, `dtype`, `count`, and a
`tokens` column the sweep passes through), so a model goes in with three commands.

Intended command line (the click command lives in tiler/cli/batch.py and calls `model_shapes` then `write_shapes`; every
option is the parameter of `model_shapes` of the same name, and its errors name it, `tokens: ...` -> `--tokens:`):

    tiler shapes CONFIG --op matmul|flash_attention [--tokens 1,128,2048] [--context 4096] [--batch 1] [--tp 1]
                 [--dtype bf16] --out FILE.csv

CONFIG is a config.json, or a folder holding one (a downloaded Hugging Face snapshot). `--op` is required, as in
`tiler sweep`. A model to kernel code is three commands, model -> sweep -> emit:

    tiler shapes examples/models/llama-3-8b/config.json --op matmul --tokens 1,128,2048 --tp 2 --out l8.csv
    tiler sweep l8.csv --op matmul --chip h200 --target triton --out l8_h200.csv --library l8.json
    tiler emit l8.json --target triton --out gen/

From Python:

    from tiler.shapes import model_shapes, write_shapes
    frame = model_shapes("examples/models/llama-3-8b/config.json", op="matmul", tokens=(1, 128, 2048), tp=2)
    write_shapes(frame, "l8.csv")

The linears (op matmul). `nn.Linear(in, out)` stores its weight W as out x in and computes x · Wᵀ: tiler's
C[M,N] = A[M,K] · B with B stored N x K, which is `layout=nt`. M = the pass's token count, K = in, N = out.

- `layers.qkv_proj`: q, k and v in one GEMM, N = (heads + 2·kv_heads)·head_dim / tp, K = hidden. Fused because
  vLLM (QKVParallelLinear) and Megatron-LM (linear_qkv) run it so: x is read once, and separate k and v GEMMs
  (N = 1024 on Llama-3-8B) are shapes no serving or training stack runs.
- `layers.o_proj`: N = hidden, K = heads·head_dim / tp.
- `layers.gate_up_proj`: gate and up in one GEMM (vLLM MergedColumnParallelLinear, Megatron linear_fc1 under
  SwiGLU), N = 2·intermediate / tp, K = hidden; `layers.down_proj`: N = hidden, K = intermediate / tp.
- `lm_head`: N = vocab / tp (rounded up: vLLM and Megatron pad the vocabulary so that it splits), K = hidden, on
  every token of the pass, as in training, scoring and decode. A serving prefill computes the logits of each
  sequence's last token only; that GEMM is the lm_head row of a pass of `batch` tokens.

Tensor parallelism is Megatron's: qkv and gate_up are column-parallel (N split by tp), o and down row-parallel (K
split by tp); a row is one rank's GEMM. Heads must split evenly; with fewer KV heads than ranks each KV head is
copied to tp / kv_heads ranks (vLLM), so a rank holds one.

MoE layers (Mixtral's `num_local_experts`, Qwen-MoE's `num_experts`, DeepSeek-MoE's `n_routed_experts`):

- `layers.router`: the gate, N = experts, K = hidden, the same on every rank (vLLM's ReplicatedLinear);
- `layers.experts.gate_up_proj` and `layers.experts.down_proj`: one expert's MLP, its width
  (`moe_intermediate_size`, or Mixtral's `intermediate_size`) split by tp as vLLM's fused MoE splits it without
  expert parallelism. M = the average routed tokens per expert, ceil(tokens · top_k / experts) and at least 1;
  count = MoE layers x the experts that receive tokens, min(experts, tokens · top_k).
  Real routing is uneven: in a pass some experts get several times the average and some none, and a grouped GEMM
  waits for its busiest expert. These rows are the balanced case. For a per-expert-load sweep, keep the
  `experts.` rows of one pass and replace M with the loads to study (1 to tokens·top_k), a few lines of pandas
  (examples/shapes/README.md shows them); or choose `tokens` so that tokens · top_k / experts is the load.
- shared experts run on every token like a dense MLP: `layers.shared_experts.gate_up_proj` and
  `layers.shared_experts.down_proj` with Qwen-MoE's `shared_expert_intermediate_size`, or DeepSeek-MoE's
  `n_shared_experts` x `moe_intermediate_size`, split by tp; Qwen-MoE also gates the shared expert with a
  Linear(hidden, 1), `layers.shared_expert_gate`.
- Dense layers of a MoE model (Qwen's `mlp_only_layers` and `decoder_sparse_step`, DeepSeek's
  `first_k_dense_replace` and `moe_layer_freq`) use the dense rows above, counted over those layers only.

Attention (op flash_attention), per pass, with heads / tp query heads, max(1, kv_heads / tp) K/V heads, D = head_dim:

- `layers.attention.prefill`: `batch` sequences of tokens / batch tokens each, S1 = S2 = tokens / batch, causal 1;
- `layers.attention.decode`: one new token for each of `tokens` sequences with `context` keys in the cache:
  B = tokens, S1 = 1, S2 = context, causal 0 (with S1 = 1 the causal mask hides nothing).

A model with a sliding window reads min(context, window) keys in decode: pass that as `context` (the window is not
read from the config, because Qwen2 and Gemma window only some layers).

`count` is how many times the row's GEMM (or attention) runs in one forward pass of `tokens` tokens: layers x the
times per layer (the sweep's summary weights the predicted time by it, so its total is per pass). Within a pass,
rows of one shape are one row (names joined with `+`, counts added); each token count is its own pass, told
apart by the `tokens` column. MLA attention (DeepSeek-V2/V3 `kv_lora_rank`) is refused: its projections are not
the ones above.
"""

from __future__ import annotations

import json
import numbers
import os
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from .errors import TilerError

__all__ = ["ModelConfig", "load_config", "model_shapes", "write_shapes"]

# the JSON values of a config's `torch_dtype` (or `dtype`, transformers >= 4.56) that name one of tiler's dtypes;
# any other (float8, absent) leaves the dtype cell empty: the sweep then takes its --dtype (default fp16)
TORCH_DTYPES = {"bfloat16": "bf16", "float16": "fp16", "float32": "fp32"}
DEFAULT_TOKENS = (1, 128, 2048)


def _ops() -> tuple[str, str]:
    """The two operators a model's rows use, named by their problem classes."""
    from .ops.flash_attention.problem import FlashAttention
    from .ops.matmul.problem import Matmul

    return Matmul.OP, FlashAttention.OP


def _field_max() -> int:
    from .problem import FIELD_MAX

    return FIELD_MAX


# --------------------------------------------------------------------------------------------------- the config


@dataclass(frozen=True)
class ModelConfig:
    """The dimensions of a decoder-only transformer that fix its GEMM and attention shapes (names as in a
    Hugging Face config.json). `source` names where they came from (a path, or `config` for a dict) and prefixes
    every error about them."""

    source: str
    hidden_size: int
    num_attention_heads: int
    num_key_value_heads: int  # = num_attention_heads when the config does not give it (transformers' default)
    head_dim: int  # the config's head_dim, else hidden_size / num_attention_heads
    vocab_size: int
    num_hidden_layers: int
    # the dense MLP's width; None when no layer is dense and the config gives none
    intermediate_size: int | None = None
    num_experts: int = 0  # routed experts of a MoE layer; 0: a dense model
    num_experts_per_tok: int = 0  # top_k
    expert_intermediate_size: int = 0  # one routed expert's width
    shared_intermediate_size: int = 0  # the shared experts' MLP width (all of them, fused); 0: none
    shared_expert_gate: bool = False  # Qwen-MoE's Linear(hidden, 1) gate on its shared expert
    moe_layers: int = 0  # layers with the MoE block; the other num_hidden_layers - moe_layers are dense
    dtype: str | None = None  # from torch_dtype: bf16, fp16, fp32 or None

    @property
    def dense_layers(self) -> int:
        return self.num_hidden_layers - self.moe_layers

    @classmethod
    def from_dict(cls, raw: Mapping[str, Any], source: str = "config") -> ModelConfig:
        """Read the fields of a parsed config.json; a missing or invalid field is one TilerError line
        `SOURCE: FIELD: what is wrong (what it is needed for / what is accepted)`."""
        if not isinstance(raw, Mapping):
            raise TilerError(
                f"{source}: must be a JSON object (a Hugging Face config.json), got {_kind(raw)}"
            )
        f = _Fields(raw, source)
        for mla in ("kv_lora_rank", "q_lora_rank"):
            if raw.get(mla) is not None:
                raise TilerError(
                    f"{source}: {mla}: multi-head latent attention (DeepSeek-V2/V3) is not modelled; tiler shapes "
                    "reads models with multi-head or grouped-query attention"
                )
        hidden = f.get("hidden_size", "every linear")
        heads = f.get("num_attention_heads", "the attention and the qkv projection")
        layers = f.get("num_hidden_layers", "the counts")
        vocab = f.get("vocab_size", "the lm_head")
        kv = f.get("num_key_value_heads", "", required=False) or heads
        if heads % kv:
            raise TilerError(
                f"{source}: num_key_value_heads: must divide num_attention_heads ({heads}: query heads share K/V "
                f"heads in equal groups), got {kv}"
            )
        head_dim = f.get("head_dim", "", required=False)
        if head_dim is None:
            if hidden % heads:
                raise TilerError(
                    f"{source}: head_dim: missing, and hidden_size {hidden} is not a multiple of "
                    f"num_attention_heads {heads}; give head_dim"
                )
            head_dim = hidden // heads

        experts, expert_key = f.first_int(("num_local_experts", "num_experts", "n_routed_experts"))
        experts = experts if experts and experts > 1 else 0  # one "expert" is a dense MLP
        moe: dict[str, Any] = {}
        if experts:
            top_k = f.get("num_experts_per_tok", f"the expert GEMMs ({expert_key} is {experts})")
            if top_k > experts:
                raise TilerError(
                    f"{source}: num_experts_per_tok: at most {expert_key} ({experts}), got {top_k}"
                )
            width = f.get("moe_intermediate_size", "", required=False)
            if width is None:  # Mixtral: the experts have the dense MLP's width
                width = f.get(
                    "intermediate_size",
                    f"the expert GEMMs ({expert_key} is {experts}, no moe_intermediate_size)",
                )
            shared = f.get("shared_expert_intermediate_size", "", required=False)
            gate = bool(shared)  # Qwen-MoE: a shared expert of that width, gated by a Linear(hidden, 1)
            if not shared:
                n_shared = f.get("n_shared_experts", "", required=False, minimum=0)
                shared = (n_shared or 0) * width  # DeepSeek-MoE: n_shared experts run as one MLP
            moe = dict(
                num_experts=experts,
                num_experts_per_tok=top_k,
                expert_intermediate_size=width,
                shared_intermediate_size=shared or 0,
                shared_expert_gate=gate,
                moe_layers=_moe_layers(f, layers),
            )
        dense = layers - moe.get("moe_layers", 0)
        intermediate = f.get(
            "intermediate_size", f"the MLP of the {dense} dense layers", required=bool(dense)
        )
        return cls(
            source=source,
            hidden_size=hidden,
            num_attention_heads=heads,
            num_key_value_heads=kv,
            head_dim=head_dim,
            vocab_size=vocab,
            num_hidden_layers=layers,
            intermediate_size=intermediate,
            dtype=_config_dtype(raw),
            **moe,
        )


class _Fields:
    """Integer fields of one config, each checked with an error naming the field and its use."""

    def __init__(self, raw: Mapping[str, Any], source: str) -> None:
        self.raw, self.source = raw, source

    def get(self, key: str, needed_for: str, required: bool = True, minimum: int = 1) -> int | None:
        value = self.raw.get(key)
        if value is None:
            if required:
                raise TilerError(f"{self.source}: {key}: missing (needed for {needed_for})")
            return None
        if isinstance(value, bool) or not isinstance(value, int) or not minimum <= value <= _field_max():
            raise TilerError(
                f"{self.source}: {key}: must be an integer in {minimum}..{_field_max()}, got {value!r}"
            )
        return value

    def first_int(self, keys: Iterable[str]) -> tuple[int | None, str]:
        """The first of `keys` the config gives (a MoE field has a different name per family)."""
        for key in keys:
            if self.raw.get(key) is not None:
                return self.get(key, "", minimum=0), key
        return None, ""


def _moe_layers(f: _Fields, layers: int) -> int:
    """How many of the layers hold the MoE block: Qwen-MoE's `mlp_only_layers` (dense indices) and
    `decoder_sparse_step` (layer i is sparse when (i + 1) % step == 0), DeepSeek-MoE's `first_k_dense_replace` and
    `moe_layer_freq` (sparse when i >= k and i % freq == 0); Mixtral has none of them: every layer."""
    step = f.get("decoder_sparse_step", "", required=False) or 1
    first = f.get("first_k_dense_replace", "", required=False, minimum=0) or 0
    freq = f.get("moe_layer_freq", "", required=False) or 1
    dense_only = f.raw.get("mlp_only_layers") or []
    if not isinstance(dense_only, list) or any(
        isinstance(i, bool) or not isinstance(i, int) or not 0 <= i < layers for i in dense_only
    ):
        raise TilerError(
            f"{f.source}: mlp_only_layers: must be a list of layer indices in 0..{layers - 1}, got {dense_only!r}"
        )
    dense_set = set(dense_only)
    return sum(
        1
        for i in range(layers)
        if i not in dense_set and (i + 1) % step == 0 and i >= first and i % freq == 0
    )


def _config_dtype(raw: Mapping[str, Any]) -> str | None:
    value = raw.get("torch_dtype", raw.get("dtype"))
    return TORCH_DTYPES.get(value) if isinstance(value, str) else None


def _kind(value: Any) -> str:
    return {list: "a list", str: "a string", int: "a number", float: "a number"}.get(
        type(value), type(value).__name__
    )


def load_config(config: ModelConfig | Mapping[str, Any] | str | os.PathLike) -> ModelConfig:
    """A ModelConfig from itself, a parsed config dict, a config.json path or a folder holding config.json. A file
    that cannot be read or is not a JSON object is one TilerError line naming the path."""
    if isinstance(config, ModelConfig):
        return config
    if isinstance(config, Mapping):
        return ModelConfig.from_dict(config)
    if not isinstance(config, str | os.PathLike):
        raise TilerError(f"config: a config.json path, a folder or a dict, got {_kind(config)}")
    from .space import read_text_file

    path = Path(config)
    if path.is_dir() and (path / "config.json").is_file():
        path = path / "config.json"
    text = read_text_file(path, "the model config")  # a missing file, a folder, binary: one ConfigError line
    try:
        raw = json.loads(text)
    except json.JSONDecodeError as exc:
        raise TilerError(
            f"{path}: not valid JSON ({exc.msg} at line {exc.lineno} column {exc.colno})"
        ) from None
    except (RecursionError, ValueError) as exc:  # nested 100k deep; an integer of more than 4300 digits
        why = "nested too deep" if isinstance(exc, RecursionError) else str(exc).split(";")[0]
        raise TilerError(f"{path}: not valid JSON ({why})") from None
    return ModelConfig.from_dict(raw, str(path))


# --------------------------------------------------------------------------------------------------- the rows


def _as_int(value: Any) -> Any:
    """An integer (a Python or numpy int, or decimal text from a command line) as int; anything else unchanged."""
    if isinstance(value, str):
        text = value.strip()
        return int(text) if text.isascii() and text.isdigit() else value
    if isinstance(value, numbers.Integral) and not isinstance(value, bool):
        return int(value)
    return value


def _positive(name: str, value: Any) -> int:
    """A positive integer parameter, at most FIELD_MAX."""
    number = _as_int(value)
    if isinstance(number, bool) or not isinstance(number, int) or not 1 <= number <= _field_max():
        raise TilerError(f"{name}: must be a positive integer (at most {_field_max()}), got {value!r}")
    return number


def _tokens(tokens: Any) -> list[int]:
    """`1,128,2048`, a list of integers or of their texts -> distinct positive integers, in the order given."""
    if isinstance(tokens, str) and not tokens.strip():
        raise TilerError(f"tokens: give at least one token count, got {tokens!r}")
    items = (
        tokens.split(",")
        if isinstance(tokens, str)
        else [tokens]
        if isinstance(tokens, numbers.Integral)
        else tokens
    )
    try:
        items = list(items)
    except TypeError:
        raise TilerError(f"tokens: must be positive integers, got {tokens!r}") from None
    out: list[int] = []
    for item in items:
        value = _as_int(item)
        if isinstance(value, bool) or not isinstance(value, int) or not 1 <= value <= _field_max():
            raise TilerError(f"tokens: must be positive integers (at most {_field_max()}), got {item!r}")
        if value in out:
            raise TilerError(f"tokens: {value} given twice")
        out.append(value)
    if not out:
        raise TilerError(f"tokens: give at least one token count, got {tokens!r}")
    return out


def _split(tp: int, size: int, what: str, cfg: ModelConfig, why: str) -> int:
    if size % tp:
        raise TilerError(f"tp: must divide {what} ({size} in {cfg.source}: {why}), got {tp}")
    return size // tp


def _rank_heads(cfg: ModelConfig, tp: int) -> tuple[int, int]:
    """(query heads, K/V heads) of one rank under tensor parallelism tp."""
    heads = _split(tp, cfg.num_attention_heads, "num_attention_heads", cfg, "each rank holds whole heads")
    kv = cfg.num_key_value_heads
    if kv >= tp:
        return heads, _split(tp, kv, "num_key_value_heads", cfg, "each rank holds whole K/V heads")
    if tp % kv:
        raise TilerError(
            f"tp: with fewer K/V heads ({kv} in {cfg.source}) than ranks, tp must be a multiple of "
            f"num_key_value_heads (each K/V head copied to tp / {kv} ranks), got {tp}"
        )
    return heads, 1


@dataclass(frozen=True)
class _Linear:
    name: str
    out_features: int  # the GEMM's N
    in_features: int  # its K
    per_layer: int  # how many times per layer it runs (experts: how many experts run)
    layers: int  # over how many layers
    routed: bool = False  # a routed expert's GEMM: M is its share of the tokens, not the pass's tokens


def _linears(cfg: ModelConfig, tokens: int, tp: int) -> list[_Linear]:
    """One rank's linears of a pass of `tokens` tokens, in the order a layer runs them; M is `tokens` except for
    the routed experts (see `_expert_tokens`)."""
    heads, kv = _rank_heads(cfg, tp)
    h, d = cfg.hidden_size, cfg.head_dim
    rows = [
        _Linear("layers.qkv_proj", (heads + 2 * kv) * d, h, 1, cfg.num_hidden_layers),
        _Linear("layers.o_proj", h, heads * d, 1, cfg.num_hidden_layers),
    ]
    if cfg.dense_layers:
        inter = _split(tp, cfg.intermediate_size or 0, "intermediate_size", cfg, "the MLP's width splits")
        rows += [
            _Linear("layers.gate_up_proj", 2 * inter, h, 1, cfg.dense_layers),
            _Linear("layers.down_proj", h, inter, 1, cfg.dense_layers),
        ]
    if cfg.moe_layers:
        width = _split(
            tp,
            cfg.expert_intermediate_size,
            "the experts' width",
            cfg,
            "each expert's MLP splits like a dense one",
        )
        active = min(cfg.num_experts, tokens * cfg.num_experts_per_tok)
        rows += [
            _Linear("layers.router", cfg.num_experts, h, 1, cfg.moe_layers),
            _Linear("layers.experts.gate_up_proj", 2 * width, h, active, cfg.moe_layers, routed=True),
            _Linear("layers.experts.down_proj", h, width, active, cfg.moe_layers, routed=True),
        ]
        if cfg.shared_intermediate_size:
            shared = _split(
                tp,
                cfg.shared_intermediate_size,
                "the shared experts' width",
                cfg,
                "their MLP splits like a dense one",
            )
            rows += [
                _Linear("layers.shared_experts.gate_up_proj", 2 * shared, h, 1, cfg.moe_layers),
                _Linear("layers.shared_experts.down_proj", h, shared, 1, cfg.moe_layers),
            ]
            if cfg.shared_expert_gate:
                rows.append(_Linear("layers.shared_expert_gate", 1, h, 1, cfg.moe_layers))
    rows.append(_Linear("lm_head", -(-cfg.vocab_size // tp), h, 1, 1))
    return rows


def _expert_tokens(cfg: ModelConfig, tokens: int) -> int:
    """The average routed tokens per expert of a pass, rounded up, at least 1 (module docstring)."""
    return max(1, -(-tokens * cfg.num_experts_per_tok // cfg.num_experts))


def _pass_items(
    cfg: ModelConfig, linears: bool, t: int, tp: int, heads: int, kv: int, batch: int, context: int
) -> list[tuple[str, dict, int]]:
    """(name, problem fields, count) of each kernel of one pass of `t` tokens: every linear (`linears`: op
    matmul, layout nt), else the prefill and the decode attention."""
    if linears:
        expert_m = _expert_tokens(cfg, t) if cfg.moe_layers else t
        items = [
            (
                lin.name,
                dict(
                    M=expert_m if lin.routed else t,
                    N=lin.out_features,
                    K=lin.in_features,
                    layout="nt",
                ),
                lin.per_layer * lin.layers,
            )
            for lin in _linears(cfg, t, tp)
        ]
    else:
        common = dict(heads=heads, kv_heads=kv, D=cfg.head_dim)
        seq = t // batch
        items = [
            (
                "layers.attention.prefill",
                dict(B=batch, S1=seq, S2=seq, causal=1, **common),
                cfg.num_hidden_layers,
            ),
            (
                "layers.attention.decode",
                dict(B=t, S1=1, S2=context, causal=0, **common),
                cfg.num_hidden_layers,
            ),
        ]
    return items


def model_shapes(
    config: ModelConfig | Mapping[str, Any] | str | os.PathLike,
    op: str,
    tokens: Iterable[int] | str | int = DEFAULT_TOKENS,
    context: int = 4096,
    batch: int = 1,
    tp: int = 1,
    dtype: str | None = None,
):
    """The shape rows of one model for `tiler sweep --op OP` (module docstring: what each row is and why).

    Args:
        config: a config.json path, a folder holding one, a parsed dict or a ModelConfig.
        op: `matmul` (every linear, layout=nt) or `flash_attention` (prefill and decode attention).
        tokens: the token counts of the forward passes (M of every linear): integers, or `1,128,2048`.
        context: the keys in the cache of a decode step (flash_attention's S2 in decode).
        batch: the sequences of a prefill pass (flash_attention's B in prefill; each token count must be a
            multiple of it). Not used by op matmul: a linear sees the pass's tokens whatever the sequences.
        tp: tensor-parallel ranks (Megatron's split; must divide the heads and the MLP widths).
        dtype: fp16, bf16, fp32 or int8; default the config's torch_dtype, else an empty cell (the sweep's
            --dtype, default fp16).
    Returns a pandas DataFrame: `name`, the operator's problem fields, `dtype`, `count`, `tokens`; one row per
    distinct shape of each pass. Raises TilerError (one line naming the parameter or the config field).
    """
    import pandas as pd

    from .problem import DTYPES, parse_problem

    ops = _ops()
    if op not in ops:
        raise TilerError(f"op: must be one of {', '.join(ops)}, got {op!r}")
    token_counts = _tokens(tokens)
    context, batch, tp = (_positive(k, v) for k, v in dict(context=context, batch=batch, tp=tp).items())
    if dtype is not None and (not isinstance(dtype, str) or dtype.strip().lower() not in DTYPES):
        raise TilerError(f"dtype: must be one of {', '.join(DTYPES)}, got {dtype!r}")
    cfg = load_config(config)
    dtype = dtype.strip().lower() if dtype is not None else cfg.dtype
    matmul, attention = ops
    if op == attention:
        bad = [t for t in token_counts if t % batch]
        if bad:
            raise TilerError(
                f"tokens: each must be a multiple of batch ({batch}) to split a prefill into equal sequences, "
                f"got {bad[0]}"
            )
    # every tp check, for both ops: a tp that cannot split the model's heads and widths is no deployment
    _linears(cfg, token_counts[0], tp)
    heads, kv = _rank_heads(cfg, tp)

    merged: dict[tuple[int, str], dict[str, Any]] = {}
    for t in token_counts:
        items = _pass_items(cfg, op == matmul, t, tp, heads, kv, batch, context)
        for name, fields_, count in items:
            try:
                problem = parse_problem(op, fields_, dtype=dtype or "fp16")
            except TilerError as exc:
                where = f"tokens: {t}" + (f" with context {context}" if op == attention else "")
                raise TilerError(f"{where} makes {name} too large for tiler ({exc})") from None
            row = merged.setdefault((t, problem.key()), dict(name=[], problem=problem, count=0, tokens=t))
            row["name"].append(name)
            row["count"] += count

    rows = list(merged.values())
    cls = type(rows[0]["problem"])
    columns = list(cls.FIELDS) + [
        k for k, default in cls.OPTIONAL.items() if any(r["problem"].shape()[k] != default for r in rows)
    ]
    records = [
        dict(
            name="+".join(r["name"]),
            **{k: r["problem"].shape()[k] for k in columns},
            dtype=dtype or "",
            count=r["count"],
            tokens=r["tokens"],
        )
        for r in rows
    ]
    return pd.DataFrame.from_records(records, columns=["name", *columns, "dtype", "count", "tokens"])


def write_shapes(frame, out: str | os.PathLike) -> Path:
    """Write the rows as CSV, atomically (tiler.io: a temporary file renamed over `out`, missing folders made);
    a path that cannot take the file is one TilerError line naming `out`. Returns the path written."""
    from .io import write_text

    return write_text(out, frame.to_csv(index=False), "out")
