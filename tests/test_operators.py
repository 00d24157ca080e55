"""The operator conformance suite (in the spirit of scikit-learn's check_estimator): every registered
(op, family) passes the same checks, so a new operator gets them for free. docs/operators.md lists them."""

from __future__ import annotations

import json
from dataclasses import replace

import numpy as np
import pytest

from tiler.cli import main
from tiler.errors import ConfigError, ProblemError, TilerError
from tiler.export import tiling_document, validate
from tiler.hardware import load_chip
from tiler.model.common import bounds, record
from tiler.operator import Operator, get_operator, known_ops, problem_class, register
from tiler.problem import parse_problem
from tiler.search import search
from tiler.space import load_space, take

CHIP = {"ascend": "ascend910b3", "cuda": "h200"}
OPS = known_ops()


def _setup(op: str, family: str):
    chip = load_chip(CHIP[family])
    problem = parse_problem(op, problem_class(op).EXAMPLE)
    return get_operator(op, family), chip, problem, load_space(op, family)


def _sample(space, n: int, seed: int = 0) -> dict:
    """`n` candidates drawn knob by knob from the space's domains."""
    rng = np.random.default_rng(seed)
    return {k: rng.choice(np.asarray(kn.values, dtype=np.int64), n) for k, kn in space.knobs.items()}


def _feasible(model, problem, chip, cands):
    ok = np.logical_and.reduce(list(model.feasible(problem, chip, cands).values()))
    return take(cands, ok)


@pytest.fixture(params=OPS, ids=[f"{o}/{f}" for o, f in OPS])
def setup(request):
    return _setup(*request.param)


def test_every_shipped_operator_has_both_families():
    """`tiler ops` lists matmul and depthwise_conv for both families."""
    assert {
        ("matmul", "ascend"),
        ("matmul", "cuda"),
        ("depthwise_conv", "ascend"),
        ("depthwise_conv", "cuda"),
    } <= set(OPS)


def test_knobs_are_the_space_files(setup):
    """The operator's knobs are exactly its search_spaces/<op>.toml section, and every rule reads known knobs."""
    model, _, _, space = setup
    assert set(model.KNOBS) == set(space.names)
    assert all(set(ks) <= set(model.KNOBS) for ks in model.RULES.values())
    assert set(model.RULE_TEXT) == set(model.RULES)


def test_registering_knobs_that_differ_from_the_space_fails():
    """register() checks the knob names against the space file: a renamed knob is a ConfigError."""
    base = type(get_operator("depthwise_conv", "cuda"))
    bad = type("Renamed", (base,), {"KNOBS": tuple(k if k != "BLOCK_P" else "BLOCK_Q" for k in base.KNOBS)})
    with pytest.raises(ConfigError, match="BLOCK_Q"):
        register(bad)


def test_feasibility_masks_are_boolean_and_shaped_like_the_candidates(setup):
    """One boolean mask per rule, one entry per candidate; asking for one rule returns that rule only."""
    model, chip, problem, space = setup
    cands = _sample(space, 257)
    masks = model.feasible(problem, chip, cands)
    assert set(masks) == set(model.RULES)
    for rule, m in masks.items():
        assert np.shape(m) == (257,) and np.asarray(m).dtype == bool, rule
    rule = next(iter(model.RULES))
    assert set(model.feasible(problem, chip, cands, [rule])) == {rule}


def test_estimate_has_every_record_column_and_is_physical(setup):
    """Every column of the estimate record, one row per candidate, no NaN or negative value, a known bound,
    and never below the roofline."""
    model, chip, problem, space = setup
    cands = _feasible(model, problem, chip, _sample(space, 400, seed=1))
    n = len(next(iter(cands.values())))
    assert n > 0
    est = model.estimate(problem, chip, cands)
    for col in record(model.FAMILY):
        assert col in est and len(est[col]) == n, col
    for col in record(model.FAMILY):
        if col != "bound":
            v = np.asarray(est[col], dtype=np.float64)
            assert np.all(np.isfinite(v)) and np.all(v >= 0), col
    assert set(np.asarray(est["bound"]).tolist()) <= set(bounds(model.FAMILY))
    assert np.all(est["time_us"] >= est["roofline_us"] * (1 - 1e-9))
    assert np.all(est["cores_used"] >= 1)


def test_bounds_never_exceed_the_estimate(setup):
    """quick_bound, bound (over the schedule knobs) and prefix_bound are lower bounds of the estimate."""
    model, chip, problem, space = setup
    cands = _feasible(model, problem, chip, _sample(space, 600, seed=2))
    t = model.estimate(problem, chip, cands)["time_us"]
    assert np.all(model.quick_bound(problem, chip, cands) <= t * (1 + 1e-9))
    full = model.bound(problem, chip, cands, space.domains(model.SCHEDULE_KNOBS))
    if full is not None:
        assert np.all(full <= t * (1 + 1e-9))
    if model.LEVELS:
        first = {k: cands[k] for k in model.LEVELS[0]}
        floor = model.prefix_bound(problem, chip, first, space.domains())
        if floor is not None:
            assert np.all(floor <= t * (1 + 1e-9))


@pytest.mark.parametrize("seed", [0, 1])
def test_exhaustive_equals_brute_force_on_a_small_space(setup, seed):
    """On a subspace around the optimum (up to 10 knobs free with two values each, the rest pinned), the
    proven search finds the same best time as scoring every point one by one."""
    model, chip, problem, space = setup
    best = search(problem, chip, space, top=1).tiling(0)
    rng = np.random.default_rng(seed)
    names = list(space.names)
    free = set(rng.choice(names, size=min(10, len(names)), replace=False).tolist())
    knobs = {}
    for k, kn in space.knobs.items():
        code = kn.parse(best[k])
        other = kn.values[len(kn.values) // 2] if kn.values[len(kn.values) // 2] != code else kn.values[0]
        knobs[k] = replace(kn, values=tuple(sorted({code, other})) if k in free else (code,))
    small = replace(space, knobs=knobs)
    cands = _feasible(model, problem, chip, small.product(small.names))
    brute = float(model.estimate(problem, chip, cands)["time_us"].min())
    assert search(problem, chip, small, top=1).row(0)["time_us"] == pytest.approx(brute, rel=1e-9)


def test_the_export_validates_and_carries_every_target(setup):
    """Searched for each declared target (on a chip it runs on), the best tiling's tiler.tiling/v1 document
    validates against the shipped schema and carries that target's view, which passes the target's own check;
    under `any`, every view carried passes its target's check."""
    model, chip, problem, space = setup
    res = search(problem, chip, space, top=1)
    doc = tiling_document(problem, chip, res.tiling(0), res.row(0))
    validate(doc)
    assert set(doc["targets"]) <= set(model.TARGETS)
    assert doc["op"] == model.OP and doc["problem"]["shape"] == problem.shape()
    for name, view in doc["targets"].items():
        assert model.TARGETS[name].broken(view, chip, problem) == []
    for name, target in model.TARGETS.items():
        if target.why_not(chip, problem):
            continue
        sub = space.for_target(name)
        res = search(problem, chip, sub, top=1)
        doc = tiling_document(problem, chip, res.tiling(0), res.row(0), target=name)
        validate(doc)
        assert list(doc["targets"]) == [name]
        assert target.broken(doc["targets"][name], chip, problem) == []
        json.dumps(doc)
        broken = json.loads(json.dumps(doc))  # each view is checked against its own schema
        del broken["targets"][name][target.schema["required"][0]]
        with pytest.raises(TilerError, match=f"targets/{name}"):
            validate(broken)


def test_searches_are_deterministic(setup):
    """The same search twice gives the same tilings (exhaustive), and tpe with one seed the same result."""
    _, chip, problem, space = setup
    a, b = (search(problem, chip, space, top=3) for _ in range(2))
    assert [a.tiling(i) for i in range(3)] == [b.tiling(i) for i in range(3)]
    t1, t2 = (
        search(problem, chip, space, "tpe", top=1, seed=3, trials=8, storage="memory") for _ in range(2)
    )
    assert t1.tiling(0) == t2.tiling(0)


def test_advice_opens_with_the_bound(setup):
    """Advice lines are text; the first names the bound and the checklist line for it."""
    from tiler.advice import advice

    model, chip, problem, space = setup
    res = search(problem, chip, space, top=1)
    lines = advice(problem, chip, space, take(res.cands, slice(0, 1)), take(res.est, slice(0, 1)))
    assert lines[0].startswith(f"bound {res.row(0)['bound']}") and all(isinstance(x, str) for x in lines)


def _bad_values(cls, name: str) -> list[str]:
    low = cls.MINIMUM.get(name, 1)
    return ["x", "1.5", str(low - 1), "inf", "nan", "1e400", str(2**31), str(2**63 - 1)]


@pytest.mark.parametrize("op", sorted({o for o, _ in OPS}))
def test_bad_problem_fields_give_one_line_and_exit_2(op, capsys):
    """For every field: missing, not a number, not an integer, below its minimum, not finite or beyond 2**31 - 1
    -> exit 2 and one stderr line naming the field, no traceback."""
    cls = problem_class(op)
    good = {**{k: str(v) for k, v in cls.OPTIONAL.items()}, **{k: str(v) for k, v in cls.EXAMPLE.items()}}
    chip = CHIP[next(f for o, f in OPS if o == op)]
    cases = [(k, {x: v for x, v in good.items() if x != k}) for k in cls.FIELDS]
    cases += [(k, {**good, k: bad}) for k in good for bad in _bad_values(cls, k)]
    for field, shape in cases:
        text = ",".join(f"{k}={v}" for k, v in shape.items())
        code = main(["search", "--op", op, "--chip", chip, "--shape", text])
        err = capsys.readouterr().err.strip().splitlines()
        assert code == 2, (field, shape)
        assert len(err) == 1 and field in err[0] and "Traceback" not in err[0], (field, err)


def test_an_operator_needs_only_feasible_and_estimate():
    """The base class's defaults make a two-method operator complete (no bound, no views, no runner)."""

    class Tiny(Operator):
        def feasible(self, p, chip, c, rules=None):
            return {}

        def estimate(self, p, chip, c):
            return {}

    t = Tiny()
    c = {"a": np.arange(3)}
    assert t.bound(None, None, c) is None and t.prefix_bound(None, None, c, {}) is None
    assert not t.dominated(None, None, c).any() and np.all(t.quick_bound(None, None, c) == 0)
    assert t.views(None, None, {}, {}, {}) == {} and t.warm_start(None, None) == {}
    with pytest.raises(TilerError, match="runner"):
        t.runner("triton")


def test_sweep_and_rank_work_unchanged(setup, tmp_path):
    """A sweep over a one-row CSV of the example problem writes an ok row and a library whose look-up returns
    the search's tiling; `rank` scores the search's top tilings in the order it found them."""
    import pandas as pd

    from tiler.library import load
    from tiler.rank import rank_candidates
    from tiler.sweep import run_sweep

    model, chip, problem, space = setup
    csv = tmp_path / "shapes.csv"
    pd.DataFrame([{**problem.shape(), "dtype": problem.dtype}]).to_csv(csv, index=False)
    lib = tmp_path / "lib.json"
    report = run_sweep(str(csv), model.OP, chip.id, out=str(tmp_path / "out.csv"), library=str(lib))
    assert report.failed == 0
    res = search(problem, chip, space, top=4)
    entry = load(lib).lookup(problem)
    assert entry["exact"] and entry["tiling"] == {k: res.tiling(0)[k] for k in space.names} | {
        k: v for k, v in entry["tiling"].items() if k not in space.names
    }
    table = pd.DataFrame([res.tiling(i) for i in range(len(res.est["time_us"]))])
    ranked, rejected = rank_candidates(problem, chip, table)
    assert rejected.empty
    assert np.allclose(ranked["predicted_us"].to_numpy(), np.sort(res.est["time_us"]))


def test_the_warm_start_is_a_tiling_of_the_space(setup):
    """A declared known-good tiling names every knob with a value of its domain and is feasible on the example
    problem (so --warm-start cannot rot)."""
    model, chip, problem, space = setup
    t = model.warm_start(problem, chip)
    if t:
        assert set(t) == set(space.names)
        cand = space.parse_tiling(t)
        assert all(bool(np.all(m)) for m in model.feasible(problem, chip, cand).values()), t


@pytest.mark.filterwarnings("error")
@pytest.mark.parametrize("op", sorted({o for o, _ in OPS}))
@pytest.mark.parametrize("dtype", ["fp16", "bf16", "fp32", "int8"])
def test_every_shipped_chip_and_dtype_gives_an_answer_or_one_input_error(op, dtype):
    """On every shipped chip of the operator's families and every dtype: a finite record at or above the roofline
    whose export validates, or one line saying the chip cannot run the dtype — never a crash, an infeasible
    example or a numpy warning."""
    from tiler.hardware import known_chips

    cls = problem_class(op)
    for chip_id in known_chips():
        chip = load_chip(chip_id)
        if (op, chip.family) not in OPS:
            continue
        problem = parse_problem(op, cls.EXAMPLE, dtype)
        try:
            res = search(problem, chip, load_space(op, chip.family), top=1)
        except ProblemError as exc:  # the chip cannot run the dtype at all (Operator.check): one line
            assert "\n" not in str(exc) and "dtype" in str(exc)
            continue
        row = res.row(0)
        assert np.isfinite(row["time_us"]) and row["time_us"] >= row["roofline_us"] * (1 - 1e-9) > 0, chip_id
        validate(tiling_document(problem, chip, res.tiling(0), row))  # hit rates in [0, 1], views as declared
