"""tiler.triton on the CPU: a user's Triton kernel space, its configs ranked by the model, the autotune pruner, and
`tiler search --space` / `--emit triton --top K` (issue 28, items 1 and 2; docs/triton.md).

No GPU and no triton here: where a `triton.Config` is built, a stand-in `triton` module (a Config that records its
arguments) is put in sys.modules, which is all `tiler.triton` and pasted `--emit` output ask of triton.
"""

from __future__ import annotations

import itertools
import re
import subprocess
import sys
import tomllib
import types
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from tiler import triton as tt
from tiler.cli import main
from tiler.errors import TilerError
from tiler.search.result import diverse_order

ROOT = Path(__file__).resolve().parent.parent
TUTORIAL = ROOT / "examples" / "triton" / "tutorial_gemm.toml"
CHIP = "h200"
BIG = "M=4096,N=4096,K=4096"
META = ("BLOCK_SIZE_M", "BLOCK_SIZE_N", "BLOCK_SIZE_K", "GROUP_SIZE_M")
# the tutorial's names in the model's (search_spaces/matmul.toml: aliases and launch options)
MODEL_NAME = {
    "BLOCK_SIZE_M": "BLOCK_M",
    "BLOCK_SIZE_N": "BLOCK_N",
    "BLOCK_SIZE_K": "BLOCK_K",
    "GROUP_SIZE_M": "GROUP_M",
    "num_warps": "num_warps",
    "num_stages": "num_stages",
}


class Config:
    """The stand-in triton.Config: the arguments Triton's own takes (kwargs, launch options), recorded."""

    def __init__(self, kwargs, num_warps=4, num_stages=3, num_ctas=1, maxnreg=None, pre_hook=None):
        self.kwargs = dict(kwargs)
        self.num_warps = num_warps
        self.num_stages = num_stages
        self.num_ctas = num_ctas
        self.maxnreg = maxnreg

    def point(self) -> dict:
        return {**self.kwargs, "num_warps": self.num_warps, "num_stages": self.num_stages}


class Tensor:
    """What the pruner sees of a tensor argument: its dtype (named as torch names it)."""

    def __init__(self, dtype: str = "torch.float16"):
        self.dtype = dtype


@pytest.fixture
def fake_triton(monkeypatch):
    mod = types.ModuleType("triton")
    mod.Config = Config
    monkeypatch.setitem(sys.modules, "triton", mod)
    return mod


def raw_tutorial() -> dict:
    return tomllib.loads(TUTORIAL.read_text())


def python_points(raw: dict) -> list[dict]:
    """The space's configs by plain Python: itertools.product, each restriction eval'd per point (no builtins but
    min, max, abs): the independent count the vectorised expansion must equal."""
    names = list(raw["params"])
    env = {"__builtins__": {}, "min": min, "max": max, "abs": abs}
    out = []
    for values in itertools.product(*(raw["params"][n] for n in names)):
        point = dict(zip(names, values, strict=True))
        if all(eval(r, env, dict(point)) for r in raw.get("restrictions", [])):  # noqa: S307 (our own text)
            out.append(point)
    return out


def configs_of(points) -> list[Config]:
    return [
        Config({k: p[k] for k in META}, num_warps=p["num_warps"], num_stages=p["num_stages"]) for p in points
    ]


def args_of(M, N, K, dtype="torch.float16") -> dict:
    """The named args of the tutorial kernel's launch (matmul_kernel(a, b, c, M, N, K, strides...))."""
    return {"a_ptr": Tensor(dtype), "b_ptr": Tensor(dtype), "c_ptr": Tensor(dtype), "M": M, "N": N, "K": K}


def label(p: dict) -> tuple:
    return tuple(sorted((k, int(v)) for k, v in p.items()))


# ---------------------------------------------------------------------------------------------- the space


def test_tutorial_space_expands_to_the_itertools_count_with_the_restrictions():
    """The example space loads, and its configs are exactly those plain Python finds (product, then every
    restriction eval'd per point): at least 64, fewer than the cross product (the restrictions cut)."""
    raw = raw_tutorial()
    us = tt.load_user_space(TUTORIAL)
    want = python_points(raw)
    assert len(us) == len(want) >= 64
    assert us.size() == int(np.prod([len(v) for v in raw["params"].values()])) > len(want)
    assert [label(p) for p in us.configs()] == [label(p) for p in want]  # same configs, product order
    # the tutorial's names need no key map; the kernel has GROUP_SIZE_M, so it launches grouped, and no split-K
    assert us.key_map == MODEL_NAME
    assert us.builtin == ("ORDER", "SPLIT_K", "TEMPLATE", "TAIL_SPLIT")
    knobs = us.model_space.knobs
    assert knobs["ORDER"].label(us.defaults["ORDER"]) == "grouped" and us.defaults["SPLIT_K"] == 1
    assert (
        knobs["TEMPLATE"].label(us.defaults["TEMPLATE"]) == "pointer"
    )  # the user's kernel loads by pointers


def test_without_a_group_param_the_builtin_order_is_row_major():
    """No GROUP_M param: the kernel launches row-major (ORDER=row, GROUP_M moot: 1), the documented default."""
    params = {"BLOCK_M": [64], "BLOCK_N": [64], "BLOCK_K": [32], "num_warps": [4], "num_stages": [3]}
    us = tt.load_user_space({"op": "matmul", "params": params})
    knobs = us.model_space.knobs
    assert us.builtin == ("GROUP_M", "ORDER", "SPLIT_K", "TEMPLATE", "TAIL_SPLIT")
    assert knobs["ORDER"].label(us.defaults["ORDER"]) == "row" and us.defaults["GROUP_M"] == 1
    # a kernel that hard-codes its group size says so in defaults: then it launches grouped
    us = tt.load_user_space({"op": "matmul", "params": params, "defaults": {"GROUP_SIZE_M": 8}})
    assert knobs["ORDER"].label(us.defaults["ORDER"]) == "grouped" and us.defaults["GROUP_M"] == 8
    assert us.builtin == ("ORDER", "SPLIT_K", "TEMPLATE", "TAIL_SPLIT")


RESTRICTIONS = [
    "16 <= BLOCK_SIZE_M * BLOCK_SIZE_N // 64 < 512",
    "BLOCK_SIZE_K in (32, 64) or num_stages not in [4]",
    "min(BLOCK_SIZE_M, BLOCK_SIZE_N) * 4 >= max(BLOCK_SIZE_M, BLOCK_SIZE_N)",
    "abs(BLOCK_SIZE_M - BLOCK_SIZE_N) % 64 == 0 and not (num_warps == 8 and BLOCK_SIZE_M < 64)",
    "(BLOCK_SIZE_K if num_stages > 3 else 2 * BLOCK_SIZE_K) <= 128",
    "2 ** num_stages <= BLOCK_SIZE_K / 2 and BLOCK_SIZE_M >> 5 != 3 and BLOCK_SIZE_N & 15 == 0",
]


def test_restrictions_agree_with_python_on_every_construct_allowed():
    """Chained comparisons, in / not in, min/max/abs, //, %, **, /, shifts, bit and, if-else, and/or/not:
    the vectorised evaluation keeps exactly the configs Python's own eval keeps."""
    raw = {**raw_tutorial(), "restrictions": RESTRICTIONS}
    want = python_points(raw)
    assert 0 < len(want) < int(np.prod([len(v) for v in raw["params"].values()]))
    assert [label(p) for p in tt.load_user_space(raw).configs()] == [label(p) for p in want]


def _space(**change) -> dict:
    raw = raw_tutorial()
    for k, v in change.items():
        if v is None:
            raw.pop(k, None)
        else:
            raw[k] = v
    return raw


def _params(**change) -> dict:
    params = dict(raw_tutorial()["params"])
    for k, v in change.items():
        if v is None:
            params.pop(k)
        else:
            params[k] = v
    return params


# (case, space, the words the one error line must hold)
BAD = [
    ("unknown param", _space(params=_params(EVEN_K=[1])), ["params: 'EVEN_K'", "key_map", "BLOCK_SIZE_M"]),
    ("key map onto no knob", _space(key_map={"BLOCK_SIZE_M": "BLOCK_MM"}), ["key_map: BLOCK_SIZE_M -> 'BLOCK_MM'"]),
    ("key map from no param", _space(key_map={"BM": "BLOCK_M"}), ["key_map: 'BM' is not a param"]),
    ("two params on one knob", _space(params=_params(BM=[64]), key_map={"BM": "BLOCK_M"}), ["both set knob BLOCK_M"]),
    ("launch option renamed", _space(params=_params(WARPS=[4], num_warps=None), key_map={"WARPS": "num_warps"},
                                     restrictions=[]),
     ["key_map: WARPS -> num_warps", "name the param num_warps"]),
    ("restriction does not parse", _space(restrictions=["BLOCK_SIZE_M >"]), ["restrictions[0]", "does not parse"]),
    ("restriction names no param", _space(restrictions=["BLOCK_SIZE_MM > 16"]),
     ["restrictions[0]: unknown name 'BLOCK_SIZE_MM'", "BLOCK_SIZE_M"]),
    ("restriction calls", _space(restrictions=["__import__('os') == 0"]), ["restrictions[0]", "not allowed"]),
    ("restriction reads an attribute", _space(restrictions=["BLOCK_SIZE_M.bit_length() > 3"]), ["attribute access is not allowed"]),
    ("restrictions exclude all", _space(restrictions=["BLOCK_SIZE_M > 4096"]), ["exclude every one of the 288"]),
    ("value outside a closed domain", _space(params=_params(ORD=[1, 7]), key_map={"ORD": "ORDER"}),
     ["ORD: 7 is outside the domain of knob ORDER", "row, grouped, serpentine"]),
    ("value not positive", _space(params=_params(num_warps=[0, 4])), ["num_warps: 0 is outside the domain"]),
    ("a knob with no param and no default", _space(params=_params(BLOCK_SIZE_K=None), restrictions=[]),
     ["knob BLOCK_K is set by no param and has no default", "BLOCK_SIZE_K"]),
    ("a default for a knob a param sets", _space(defaults={"GROUP_M": 4}), ["defaults: GROUP_M is set by the param"]),
    ("a default of no knob", _space(defaults={"SPLITK": 1}), ["defaults: 'SPLITK' is not a knob"]),
    ("an unknown key", _space(restriction=["BLOCK_SIZE_M > 16"]), ["unknown key 'restriction'", "restrictions"]),
    ("a shape map onto no field", _space(shape={"m": "MM"}), ["shape: m -> 'MM'"]),
    ("a field no argument gives", _space(shape={"m": "M", "n": "N"}), ["shape: no argument gives the field K"]),
    ("a launch option mapped elsewhere", _space(key_map={"num_warps": "GROUP_M"}),
     ["key_map: num_warps -> GROUP_M: num_warps is a launch option"]),
    ("a bad fixed problem field", _space(problem={"layout": "xy"}), ["problem: layout: must be one of nn, nt, tn, tt"]),
    ("a bad dtype", _space(dtype="fp8"), ["dtype: must be one of fp16, bf16, fp32, int8, got 'fp8'"]),
    ("an unknown op", _space(op="matmull"), ["op: unknown operator 'matmull'", "did you mean matmul"]),
    ("too many configs", _space(params=_params(BLOCK_SIZE_M=list(range(16, 16 + 60)),
                                               BLOCK_SIZE_N=list(range(16, 16 + 60)),
                                               BLOCK_SIZE_K=list(range(16, 16 + 60))), restrictions=[]),
     ["the cross product holds", f"at most {tt.CONFIGS_MAX}"]),
]  # fmt: skip


@pytest.mark.parametrize("case,raw,words", BAD, ids=[b[0] for b in BAD])
def test_a_bad_space_is_one_error_line_naming_it(case, raw, words):
    with pytest.raises(TilerError) as exc:
        tt.load_user_space(raw)
    msg = str(exc.value)
    assert "\n" not in msg and msg.startswith("space: dict: "), msg
    for w in words:
        assert w in msg, (w, msg)


def _toml(raw: dict) -> str:
    """A space dict as TOML (top-level values first, then one table per dict)."""

    def val(v):
        if isinstance(v, str):
            return '"' + v.replace("\\", "\\\\").replace('"', '\\"') + '"'
        if isinstance(v, list):
            return "[" + ", ".join(val(x) for x in v) + "]"
        return str(v).lower() if isinstance(v, bool) else str(v)

    lines = [f"{k} = {val(v)}" for k, v in raw.items() if not isinstance(v, dict)]
    for k, v in raw.items():
        if isinstance(v, dict):
            lines += [f"[{k}]"] + [f"{kk} = {val(vv)}" for kk, vv in v.items()]
    return "\n".join(lines) + "\n"


@pytest.mark.parametrize("case,raw,words", BAD, ids=[b[0] for b in BAD])
def test_a_bad_space_file_exits_2_with_one_line_and_writes_nothing(case, raw, words, tmp_path, capsys):
    path = tmp_path / "user.toml"
    path.write_text(_toml(raw))
    argv = ["search", "--op", "matmul", "--chip", CHIP, "--shape", BIG, "--space", str(path)]
    assert main([*argv, "--emit", "triton", "--top", "8"]) == 2
    out, err = capsys.readouterr()
    lines = err.strip().splitlines()
    assert out == "" and len(lines) == 1 and lines[0].startswith(f"error: --space: {path}: "), err
    assert "Traceback" not in err
    for w in words:
        assert w.replace("dict: ", "") in lines[0], (w, lines[0])
    assert sorted(p.name for p in tmp_path.iterdir()) == ["user.toml"]


def test_a_missing_or_broken_space_file_is_one_line(tmp_path, capsys):
    argv = ["search", "--op", "matmul", "--chip", CHIP, "--shape", BIG, "--space"]
    bad = tmp_path / "bad.toml"
    bad.write_text("op = \n")
    for path, word in ((tmp_path / "none.toml", "cannot read"), (bad, "not valid TOML")):
        assert main([*argv, str(path)]) == 2
        out, err = capsys.readouterr()
        assert out == "" and len(err.strip().splitlines()) == 1 and word in err and "--space" in err, err


def test_space_refuses_the_options_of_a_model_search_in_one_line(tmp_path, capsys):
    """--export, --fix, another --strategy, --measure, a target other than triton: refused, nothing written."""
    argv = ["search", "--op", "matmul", "--chip", CHIP, "--shape", BIG, "--space", str(TUTORIAL)]
    for extra, word in (
        (["--export", str(tmp_path / "x.json")], "--export: not with --space"),
        (["--fix", "BLOCK_M=64"], "--fix: not with space"),
        (["--strategy", "tpe"], "--strategy: not 'tpe' with space"),
        (["--measure", "triton"], "--measure: not with --space"),
        (["--emit", "catlass"], "--emit: a user space is a Triton kernel's"),
    ):
        assert main([*argv, *extra]) == 2
        out, err = capsys.readouterr()
        assert out == "" and len(err.strip().splitlines()) == 1 and word in err, (extra, err)
    assert list(tmp_path.iterdir()) == []


# ------------------------------------------------------------------------------------------------- ranking


def test_rank_configs_agrees_with_tiler_rank_in_the_models_names():
    """The user's configs ranked by rank_configs get, config by config, the time `tiler.rank` gives the same
    tilings written in the model's own names (with the defaults ORDER=grouped, SPLIT_K=1, TEMPLATE=pointer, TAIL_SPLIT=1), and the same order;
    an infeasible config comes last with its rule."""
    from tiler import api

    points = tt.load_user_space(TUTORIAL).configs()
    big = {"BLOCK_SIZE_M": 256, "BLOCK_SIZE_N": 256, "BLOCK_SIZE_K": 128, "GROUP_SIZE_M": 8}
    points = [*points, {**big, "num_warps": 8, "num_stages": 5}]  # 640 KiB of stages: no H200 holds it
    shape = "M=2000,N=1536,K=700"
    ranked = tt.rank_configs(points, "matmul", CHIP, shape, space=TUTORIAL)
    assert len(ranked) == len(points) and sorted(r.index for r in ranked) == list(range(len(points)))
    table = pd.DataFrame([{MODEL_NAME[k]: v for k, v in p.items()} for p in points]).assign(
        ORDER="grouped", SPLIT_K=1, TEMPLATE="pointer", TAIL_SPLIT=1
    )
    want, rejected = api.rank("matmul", CHIP, shape, table)
    assert [r.index for r in ranked if r.feasible] == list(want["row"] - 1)
    assert np.allclose([r.predicted_us for r in ranked if r.feasible], want["predicted_us"], rtol=1e-12)
    assert [r.rank for r in ranked if r.feasible] == list(want["rank"])
    last = ranked[-1]
    assert not last.feasible and last.index == len(points) - 1 and last.reason.startswith("smem")
    assert last.predicted_us == float("inf") and list(rejected["row"] - 1) == [last.index]
    assert ranked[0].params == points[ranked[0].index]
    assert ranked[0].tiling == {MODEL_NAME[k]: v for k, v in points[ranked[0].index].items()} | {
        "ORDER": "grouped",
        "SPLIT_K": 1,
        "TEMPLATE": "pointer",
        "TAIL_SPLIT": 1,
    }


def test_rank_configs_reads_triton_configs_and_config_arguments_alike():
    points = tt.load_user_space(TUTORIAL).configs()[:20]
    as_dicts = tt.rank_configs(points, "matmul", CHIP, BIG, space=TUTORIAL)
    as_objects = tt.rank_configs(configs_of(points), "matmul", CHIP, BIG, space=TUTORIAL)
    as_args = [{"kwargs": {k: p[k] for k in META}, "num_warps": p["num_warps"], "num_stages": p["num_stages"]}
               for p in points]  # fmt: skip
    as_arguments = tt.rank_configs(as_args, "matmul", CHIP, BIG, space=TUTORIAL)
    for other in (as_objects, as_arguments):
        assert [(r.index, r.predicted_us) for r in other] == [(r.index, r.predicted_us) for r in as_dicts]
    # without a space: the tutorial's names are the knobs' aliases, the rest the built-in defaults
    bare = tt.rank_configs(points, "matmul", CHIP, BIG)
    assert [(r.index, r.predicted_us) for r in bare] == [(r.index, r.predicted_us) for r in as_dicts]


def test_rank_configs_errors_name_the_config():
    points = tt.load_user_space(TUTORIAL).configs()[:3]
    with pytest.raises(TilerError, match=r"configs: config 1: 'EVEN_K' is not a param"):
        tt.rank_configs([points[0], {**points[1], "EVEN_K": 1}], "matmul", CHIP, BIG, space=TUTORIAL)
    with pytest.raises(TilerError, match=r"configs: config 0: lacks the param 'GROUP_SIZE_M'"):
        tt.rank_configs(
            [{k: v for k, v in points[0].items() if k != "GROUP_SIZE_M"}], "matmul", CHIP, BIG, TUTORIAL
        )
    with pytest.raises(TilerError, match=r"space: configs: params: 'EVEN_K' is no knob"):
        tt.rank_configs([{**points[0], "EVEN_K": 1}], "matmul", CHIP, BIG)
    with pytest.raises(TilerError, match=r"^configs: num_warps: 0 is outside the domain of knob num_warps"):
        tt.rank_configs([{**points[0], "num_warps": 0}], "matmul", CHIP, BIG, space=TUTORIAL)
    with pytest.raises(TilerError, match=r"chip: ascend910b3 is of the ascend family"):
        tt.rank_configs(points, "matmul", "ascend910b3", BIG, space=TUTORIAL)


# ---------------------------------------------------------------------------------------------------- pruner


@pytest.mark.parametrize("shape", [(4096, 4096, 4096), (16, 14336, 4096), (1000, 768, 500)])
@pytest.mark.parametrize("diverse", [False, True])
def test_pruner_keeps_the_models_best_k_for_the_launch_shape(shape, diverse):
    """early_config_prune keeps top_k of the configs given (the same objects), and they are rank_configs' best
    top_k for the shape in named_args: plain, or in the diverse order of the tile shapes."""
    M, N, K = shape
    configs = configs_of(tt.load_user_space(TUTORIAL).configs())
    prune = tt.pruner("matmul", CHIP, space=TUTORIAL, top_k=4, diverse=diverse)
    assert prune["top_k"] == 4
    kept = prune["early_config_prune"](configs, args_of(M, N, K))
    assert len(kept) == 4 and all(any(k is c for c in configs) for k in kept)
    ranked = [
        r for r in tt.rank_configs(configs, "matmul", CHIP, f"M={M},N={N},K={K}", TUTORIAL) if r.feasible
    ]
    order = np.arange(len(ranked))
    if diverse:
        cands = {
            k: np.array([r.tiling[k] for r in ranked])
            for k in ("BLOCK_M", "BLOCK_N", "BLOCK_K", "SPLIT_K", "num_stages")
        }
        order, _ = diverse_order(
            cands, np.array([r.predicted_us for r in ranked]), tuple(cands)[:4], "num_stages"
        )
    want = [ranked[i].config for i in order[:4]]
    assert [id(c) for c in kept] == [id(c) for c in want]
    if diverse:  # four configs, at least three distinct tiles (the point of the diverse order)
        assert (
            len(
                {(c.kwargs["BLOCK_SIZE_M"], c.kwargs["BLOCK_SIZE_N"], c.kwargs["BLOCK_SIZE_K"]) for c in kept}
            )
            >= 3
        )


def test_pruner_keeps_a_different_set_for_a_different_shape():
    """The kept set follows the shape of the launch: a decode GEMM and a square one keep different tiles."""
    configs = configs_of(tt.load_user_space(TUTORIAL).configs())
    prune = tt.pruner("matmul", CHIP, space=TUTORIAL, top_k=4)["early_config_prune"]
    small = {id(c) for c in prune(configs, args_of(16, 4096, 4096))}
    large = {id(c) for c in prune(configs, args_of(4096, 4096, 4096))}
    assert small != large


def test_pruner_prefers_configs_already_compiled_for_the_specialisation_within_the_models_error():
    """A second launch of the same specialisation (M, N, K all multiples of 16): past the model's best, a config
    kept for the first launch (Triton compiled it then) is kept before an uncompiled one predicted less than
    COMPILE_TOLERANCE faster. The model's best is always kept; every config that comes in for a fresh pruner's
    choice was compiled and is predicted within the tolerance of the one it displaced; a launch of another
    specialisation (N = 1000) gets a fresh pruner's answer."""
    configs = configs_of(tt.load_user_space(TUTORIAL).configs())

    def pruner():
        return tt.pruner("matmul", CHIP, space=TUTORIAL, top_k=4)["early_config_prune"]

    grids = []  # as Triton calls it: the launch's grid, a new function each call, in kwargs (kept alive)

    def kept_ids(prune, shape):
        grids.append(lambda meta: (1,))
        return [id(c) for c in prune(configs, args_of(*shape), grid=grids[-1], warmup=False)]

    first, second, other = (1024, 4096, 4096), (2048, 7168, 8192), (512, 1000, 2048)
    fresh = kept_ids(pruner(), second)
    warm = pruner()
    compiled = set(kept_ids(warm, first))
    got = kept_ids(warm, second)
    assert got[0] == fresh[0]  # the model's best
    assert len(set(got) & compiled) > len(set(fresh) & compiled)  # this pair does swap some in
    times = {
        id(r.config): r.predicted_us
        for r in tt.rank_configs(configs, "matmul", CHIP, "M=2048,N=7168,K=8192", TUTORIAL)
    }
    displaced = [c for c in fresh if c not in got]
    for c in set(got) - set(fresh):
        assert c in compiled
        assert times[c] * (1 - tt.prune.COMPILE_TOLERANCE) <= max(times[d] for d in displaced)
    assert kept_ids(warm, other) == kept_ids(pruner(), other)  # N % 16 != 0: nothing compiled for it


def test_pruner_caches_per_shape_and_dtype(monkeypatch):
    """Autotune calls early_config_prune once per key; a repeated key is answered from the cache (no ranking),
    a new shape or dtype is ranked once."""
    calls = []
    real = tt.ranking._score  # the pruner's ranking call, where the pruner looks it up
    monkeypatch.setattr(tt.ranking, "_score", lambda *a: calls.append(a[0]) or real(*a))
    configs = configs_of(tt.load_user_space(TUTORIAL).configs())
    prune = tt.pruner("matmul", CHIP, space=TUTORIAL, top_k=4)["early_config_prune"]
    first = prune(configs, args_of(512, 512, 512))
    assert prune(configs, args_of(512, 512, 512)) == first and len(calls) == 1
    prune(configs, {**args_of(512, 512, 256)})
    assert len(calls) == 2 and len(prune.cache) == 2
    prune(configs, args_of(512, 512, 512, "torch.bfloat16"))
    assert len(calls) == 3 and calls[-1].dtype == "bf16"
    prune(configs, args_of(512, 512, 512))
    assert len(calls) == 3


def test_pruner_reads_shape_arguments_given_by_keyword_and_through_the_shape_map():
    """Triton >= 3.0 passes the call's keyword arguments beside named_args; a space's shape map names the key
    arguments (here m, n, k) and fixed fields (layout) of a kernel with its own names."""
    space = {
        "op": "matmul",
        "params": {
            "BM": [64, 128],
            "BN": [64, 128, 256],
            "BK": [32, 64],
            "num_warps": [4, 8],
            "num_stages": [3, 4],
        },
        "key_map": {"BM": "BLOCK_M", "BN": "BLOCK_N", "BK": "BLOCK_SIZE_K"},
        "shape": {"m": "M", "n": "N", "k": "K"},
        "problem": {"layout": "nt"},
    }
    us = tt.load_user_space(space)
    assert us.model_space.knobs["ORDER"].label(us.defaults["ORDER"]) == "row"  # no group param: row-major
    points = us.configs()
    configs = [Config({k: p[k] for k in ("BM", "BN", "BK")}, p["num_warps"], p["num_stages"]) for p in points]
    prune = tt.pruner("matmul", CHIP, space=space, top_k=3, diverse=False)
    kept = prune["early_config_prune"](configs, {"a": Tensor(), "m": 64}, n=8192, k=1024)
    ranked = tt.rank_configs(configs, "matmul", CHIP, "M=64,N=8192,K=1024,layout=nt", space=space)
    assert [id(c) for c in kept] == [id(r.config) for r in ranked[:3]]
    # perf_model: one config's predicted time in ms, as Triton calls it (named args, kwargs, the config's)
    best = ranked[0]
    ms = prune["perf_model"](a=Tensor(), m=64, n=8192, k=1024, **best.config.kwargs, num_warps=best.config.num_warps,
                             num_stages=best.config.num_stages, num_ctas=1)  # fmt: skip
    assert ms == pytest.approx(best.predicted_us / 1000, rel=1e-12)
    with pytest.raises(TilerError, match=r"space: dict: shape: the launch has no argument 'k'"):
        prune["early_config_prune"](configs, {"a": Tensor(), "m": 64, "n": 8192})


def test_pruner_keeps_every_config_when_the_model_cannot_price_the_launch():
    """A launch the model refuses (M = 0 here; a dtype it does not know): the pruner warns and keeps every config
    (the autotune measures them all, as without it) instead of failing the user's launch."""
    configs = configs_of(tt.load_user_space(TUTORIAL).configs())
    prune = tt.pruner("matmul", CHIP, space=TUTORIAL, top_k=4)
    with pytest.warns(UserWarning, match="cannot price this launch"):
        kept = prune["early_config_prune"](configs, {**args_of(512, 512, 512), "M": 0})
    assert kept == configs


def test_perf_model_is_triton_s_top_k_path_too():
    """Without early_config_prune, Triton sorts by perf_model and keeps top_k: that is the plain model order."""
    points = tt.load_user_space(TUTORIAL).configs()
    configs = configs_of(points)
    prune = tt.pruner("matmul", CHIP, space=TUTORIAL, top_k=4)
    est = {c: prune["perf_model"](**args_of(1024, 2048, 512), **c.kwargs, num_warps=c.num_warps,
                                  num_stages=c.num_stages, num_ctas=1) for c in configs}  # fmt: skip
    top = sorted(configs, key=lambda c: est[c])[:4]
    ranked = tt.rank_configs(configs, "matmul", CHIP, "M=1024,N=2048,K=512", TUTORIAL)
    assert [id(c) for c in top] == [id(r.config) for r in ranked[:4]]


# ----------------------------------------------------------------------------------------------- best configs


def test_best_configs_are_in_the_users_names(fake_triton):
    us = tt.load_user_space(TUTORIAL)
    best = tt.best_configs("matmul", CHIP, BIG, k=6, space=TUTORIAL)
    assert len(best) == 6 and all(isinstance(c, Config) for c in best)
    points = {label(p) for p in us.configs()}
    assert all(set(c.kwargs) == set(META) and label(c.point()) in points for c in best)
    assert len({label(c.point()) for c in best}) == 6
    # the first is the model's best of the whole space; the list is search_space's diverse top 6
    ranked = tt.rank_configs(us.configs(), "matmul", CHIP, BIG, TUTORIAL)
    assert label(best[0].point()) == label(ranked[0].params)
    res = tt.search_space("matmul", CHIP, BIG, TUTORIAL, top=6, diverse=True)
    assert [label(c.point()) for c in best] == [label(p) for p in res.configs]
    assert tt.config_dicts("matmul", CHIP, BIG, k=6, space=TUTORIAL) == res.config_dicts()


def test_best_configs_without_a_space_are_the_models_own(fake_triton):
    """No space: the model's own space searched, in the project kernel's names (its Triton view)."""
    from tiler import api

    best = tt.best_configs("matmul", CHIP, BIG, k=3)
    res = api.search("matmul", CHIP, BIG, target="triton", top=3, diverse=True, runnable=False)
    assert len(best) == 3
    for i, c in enumerate(best):
        t = res.tiling(i)
        assert c.kwargs["BLOCK_M"] == t["BLOCK_M"] and c.num_stages == t["num_stages"] and "ORDER" in c.kwargs


def test_the_module_imports_without_triton_and_optuna():
    code = (
        "import sys; sys.modules['triton'] = None; sys.modules['optuna'] = None\n"
        "import tiler.triton as tt\n"
        f"r = tt.rank_configs(tt.load_user_space({str(TUTORIAL)!r}).configs(), 'matmul', 'h200', 'M=64,N=64,K=64')\n"
        "assert r[0].feasible\n"
        "try:\n    tt.best_configs('matmul', 'h200', 'M=64,N=64,K=64')\nexcept ImportError:\n    print('ok')\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT)
    assert out.returncode == 0 and out.stdout.strip() == "ok", out.stderr


# --------------------------------------------------------------------------------------------- search --space


def _emitted(text: str) -> list[Config]:
    """Pasted into `configs=[...]` and run with the stand-in triton: the Config objects it builds."""
    env = {"triton": types.SimpleNamespace(Config=Config)}
    exec(compile("configs = [\n" + text + "]\n", "<emitted>", "exec"), env)  # noqa: S102 (our own output)
    return env["configs"]


def test_emit_triton_top_8_with_a_space_prints_8_pasteable_configs_in_the_users_names(capsys):
    argv = ["search", "--op", "matmul", "--chip", CHIP, "--shape", BIG, "--space", str(TUTORIAL)]
    assert main([*argv, "--emit", "triton", "--top", "8"]) == 0
    out = capsys.readouterr().out
    lines = [ln for ln in out.splitlines() if ln.startswith("triton.Config(")]
    assert len(lines) == 8 and len(set(lines)) == 8
    configs = _emitted(out)
    points = {label(p) for p in tt.load_user_space(TUTORIAL).configs()}
    assert len(configs) == 8 and all(
        set(c.kwargs) == set(META) and label(c.point()) in points for c in configs
    )
    assert [label(c.point()) for c in configs] == [
        label(p) for p in tt.search_space("matmul", CHIP, BIG, TUTORIAL, top=8, diverse=True).configs
    ]
    # --plain: the plain ranking's first 8
    assert main([*argv, "--emit", "triton", "--top", "8", "--plain"]) == 0
    plain = _emitted(capsys.readouterr().out)
    ranked = tt.rank_configs(tt.load_user_space(TUTORIAL).configs(), "matmul", CHIP, BIG, TUTORIAL)
    assert [label(c.point()) for c in plain] == [label(r.params) for r in ranked[:8]]


def test_emit_triton_top_k_without_a_space_prints_the_models_k_best(capsys):
    argv = ["search", "--op", "matmul", "--chip", CHIP, "--shape", BIG + ",layout=nt", "--emit", "triton"]
    assert main([*argv, "--top", "4"]) == 0
    configs = _emitted(capsys.readouterr().out)
    assert len(configs) == 4 and len({label(c.point()) for c in configs}) == 4
    assert all({"BLOCK_M", "ORDER", "SPLIT_K"} <= set(c.kwargs) for c in configs)
    assert main(argv) == 0  # without --top: the one best, as before
    assert len(_emitted(capsys.readouterr().out)) == 1


def test_search_space_report_and_json(capsys):
    argv = [
        "search",
        "--op",
        "matmul",
        "--chip",
        CHIP,
        "--shape",
        BIG,
        "--space",
        str(TUTORIAL),
        "--top",
        "3",
    ]
    assert main(argv) == 0
    out = capsys.readouterr().out
    n = len(tt.load_user_space(TUTORIAL))
    assert f"288 configs, {n} after the restrictions" in out and "best config: BLOCK_SIZE_M=" in out
    assert "ORDER=grouped (built in)" in out and out.count("differs:") == 2
    assert main([*argv, "--format", "json"]) == 0
    doc = __import__("json").loads(capsys.readouterr().out)
    assert doc["space"]["restricted"] == n and len(doc["configs"]) == 3
    assert (
        set(doc["configs"][0]["config"]) == set(MODEL_NAME)
        and doc["configs"][0]["tiling"]["ORDER"] == "grouped"
    )


def test_api_search_with_a_space_ranks_exactly_the_space():
    import tiler

    res = tiler.search(op="matmul", chip=CHIP, shape=BIG, space=raw_tutorial(), top=5)
    ranked = tt.rank_configs(tt.load_user_space(TUTORIAL).configs(), "matmul", CHIP, BIG, TUTORIAL)
    assert [label(c) for c in res.configs] == [label(r.params) for r in ranked[:5]]
    assert np.allclose(res.est["time_us"], [r.predicted_us for r in ranked[:5]])
    assert res.restricted == len(ranked) and res.proven_optimal
    assert res.tiling(0)["BLOCK_M"] == ranked[0].params["BLOCK_SIZE_M"]
    with pytest.raises(TilerError, match=r"^fix: not with space"):
        tiler.search(op="matmul", chip=CHIP, shape=BIG, space=TUTORIAL, fix={"BLOCK_M": 64})
    with pytest.raises(TilerError, match=r"^op: the space is for matmul"):
        tiler.search(op="softmax", chip=CHIP, shape="rows=8,D=64", space=TUTORIAL)


def test_one_argument_may_give_several_problem_fields():
    """The tutorial attention's N_CTX is both S1 and S2 and H both heads and kv_heads: a list in [shape]; a field
    given twice, an empty list or an unknown field in a list is one line naming it."""
    space = {
        "op": "flash_attention",
        "params": {"BLOCK_M": [64, 128], "BLOCK_N": [32, 64], "num_warps": [4], "num_stages": [2]},
        "shape": {
            "Z": "B",
            "H": ["heads", "kv_heads"],
            "N_CTX": ["S1", "S2"],
            "HEAD_DIM": "D",
            "CAUSAL": "causal",
        },
    }
    us = tt.load_user_space(space)
    assert us.shape["N_CTX"] == ("S1", "S2") and us.shape["Z"] == ("B",)
    p = us.problem_of({"Z": 2, "H": 8, "N_CTX": 1000, "HEAD_DIM": 64, "CAUSAL": True}, "fp16")
    assert (p.B, p.heads, p.kv_heads, p.S1, p.S2, p.D, p.causal) == (2, 8, 8, 1000, 1000, 64, 1)
    bad = [
        ({"N_CTX": ["S1", "S2"], "S": "S2"}, "two arguments give the field S2 (N_CTX, S)"),
        ({"N_CTX": []}, "shape: N_CTX -> []: name at least one field"),
        ({"N_CTX": ["S1", "T2"]}, "shape: N_CTX -> 'T2': not a field of flash_attention"),
    ]
    for extra, message in bad:
        with pytest.raises(TilerError, match=re.escape(message)):
            tt.load_user_space({**space, "shape": {**space["shape"], **extra}})


@pytest.mark.parametrize(
    "space, shapes",
    [
        (TUTORIAL, ["M=16,N=1280,K=8192", "M=1111,N=2222,K=3333", "M=4096,N=4096,K=4096"]),
        (
            ROOT / "examples" / "triton" / "tutorial_attention.toml",
            ["Z=32,H=32,N_CTX=256,HEAD_DIM=128,CAUSAL=1", "Z=1,H=32,N_CTX=5120,HEAD_DIM=256,CAUSAL=0"],
        ),
    ],
)
def test_the_pruners_numpy_ranking_is_tiler_ranks(space, shapes):
    """The pruner ranks a launch's configs on numpy columns (tiler.rank.score_columns), not through tiler rank's
    table: the order, times, ranks, bounds and rejections are the table path's, row for row, on spaces with
    infeasible configs and ties."""
    from tiler.api import _chip

    chip = _chip(CHIP)
    us = tt.load_user_space(space)
    points = us.configs()
    seen = {"ties": 0, "rejected": 0}
    for shape in shapes:
        fields = dict(kv.split("=") for kv in shape.split(","))
        args = {a: int(fields[a]) for a in us.shape}
        problem = us.problem_of(args)
        dicts = [tt.ranking._as_dict(p) for p in points]
        fast = tt.ranking._ranked_configs(problem, chip, us, points, dicts)
        ranked, rejected = tt.ranking._rank_table(problem, chip, us, tt.ranking._columns_of(us, dicts))
        assert [r.index for r in fast if r.feasible] == (ranked["row"] - 1).tolist()
        assert [r.predicted_us for r in fast if r.feasible] == ranked["predicted_us"].tolist()
        assert [r.rank for r in fast if r.feasible] == ranked["rank"].tolist()
        if "bound" in ranked:
            assert [r.bound for r in fast if r.feasible] == ranked["bound"].astype(str).tolist()
        bad = [r for r in fast if not r.feasible]
        assert [r.index for r in bad] == (rejected["row"] - 1).tolist()
        assert [r.reason for r in bad] == [
            f"{a}: {b}" for a, b in zip(rejected["rule"], rejected["reason"], strict=True)
        ]
        seen["ties"] += len(ranked) - len({r.rank for r in fast if r.feasible})
        seen["rejected"] += len(bad)
    assert seen["ties"] and (seen["rejected"] or space == TUTORIAL), (
        seen
    )  # the cases the orders could differ on
