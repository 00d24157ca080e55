"""The operator conformance suite, shipped with the library (in the spirit of scikit-learn's `check_estimator`).

Every registered (op, family) must pass the same checks, whether it is built in or comes from another package:
`check_operator("my_op", "cuda")` runs them all, `CHECKS[name](op, family)` one. A check that fails raises
AssertionError naming the check and the operator (a crash inside the operator is reported the same way, its
exception chained). No pytest here: a plugin's own tests call these functions from any test runner.
tests/test_operators.py parametrizes the built-ins over CHECKS; docs/operators.md lists what each check asserts.
"""

from __future__ import annotations

import contextlib
import functools
import io
import json
import tempfile
import warnings
from collections.abc import Callable
from dataclasses import dataclass, replace
from pathlib import Path

import numpy as np

from .errors import ProblemError, TilerError
from .hardware import Chip, known_chips, load_chip
from .operator import Operator, get_operator, known_ops, problem_class
from .problem import Problem, parse_problem
from .space import Space, load_space, take

# the chip each family's checks run on unless the caller names one
CHIPS = {"ascend": "ascend910b3", "cuda": "h200"}
REL = 1e-9  # floating-point slack of a bound or a roofline against the estimate


@dataclass(frozen=True)
class Subject:
    """What a check looks at: the operator, a chip of its family, its problem class's EXAMPLE, its space."""

    model: Operator
    chip: Chip
    problem: Problem
    space: Space


def subject(op: str, family: str, chip: str | None = None) -> Subject:
    """The operator (op, family) on `chip` (default: CHIPS[family]) with its example problem and shipped space."""
    c = load_chip(chip or CHIPS[family])
    problem = parse_problem(op, problem_class(op).EXAMPLE)
    return Subject(get_operator(op, family), c, problem, load_space(op, family))


def _ok(cond, message: str) -> None:
    """`assert` that survives `python -O`."""
    if not cond:
        raise AssertionError(message)


def _check(fn: Callable[[Subject], None]) -> Callable[..., None]:
    """A check over a Subject as a function of (op, family, chip=None) whose failures name it."""
    name = fn.__name__.removeprefix("check_")

    @functools.wraps(fn)
    def run(op: str, family: str, chip: str | None = None) -> None:
        try:
            fn(subject(op, family, chip))
        except AssertionError as exc:
            raise AssertionError(f"check {name} failed for {op}/{family}: {exc}") from exc
        except Exception as exc:
            raise AssertionError(
                f"check {name} failed for {op}/{family}: {type(exc).__name__}: {exc}"
            ) from exc

    return run


def _sample(space: Space, n: int, seed: int = 0) -> dict:
    """`n` candidates drawn knob by knob from the space's domains."""
    rng = np.random.default_rng(seed)
    return {k: rng.choice(np.asarray(kn.values, dtype=np.int64), n) for k, kn in space.knobs.items()}


def _feasible(s: Subject, cands: dict) -> dict:
    ok = np.logical_and.reduce(list(s.model.feasible(s.problem, s.chip, cands).values()))
    return take(cands, ok)


@_check
def check_knobs_are_the_space_file(s: Subject) -> None:
    """The operator's knobs are exactly its space file's section, every rule reads known knobs, and RULE_TEXT
    covers RULES."""
    m = s.model
    _ok(set(m.KNOBS) == set(s.space.names), f"KNOBS {sorted(m.KNOBS)} != space {sorted(s.space.names)}")
    for rule, knobs in m.RULES.items():
        _ok(
            set(knobs) <= set(m.KNOBS),
            f"rule {rule!r} reads unknown knobs {sorted(set(knobs) - set(m.KNOBS))}",
        )
    _ok(set(m.RULE_TEXT) == set(m.RULES), "RULE_TEXT and RULES name different rules")


@_check
def check_feasibility_masks(s: Subject) -> None:
    """One boolean mask per rule, one entry per candidate; asking for one rule returns that rule only."""
    cands = _sample(s.space, 257)
    masks = s.model.feasible(s.problem, s.chip, cands)
    _ok(set(masks) == set(s.model.RULES), f"masks {sorted(masks)} != RULES {sorted(s.model.RULES)}")
    for rule, m in masks.items():
        _ok(np.shape(m) == (257,) and np.asarray(m).dtype == bool, f"mask {rule!r} is not 257 booleans")
    _ok(s.model.RULES, "the operator declares no rule")
    rule = next(iter(s.model.RULES))
    only = s.model.feasible(s.problem, s.chip, cands, [rule])
    _ok(set(only) == {rule}, f"asked for rule {rule!r}, got {sorted(only)}")


@_check
def check_estimate_record(s: Subject) -> None:
    """Every column of the estimate record, one row per candidate, no NaN or negative value, a known bound, and
    never below the roofline."""
    from .model.common import bounds, record

    m = s.model
    cands = _feasible(s, _sample(s.space, 400, seed=1))
    n = len(next(iter(cands.values())))
    _ok(n > 0, "no feasible candidate among 400 sampled for the example problem")
    est = m.estimate(s.problem, s.chip, cands)
    for col in record(m.FAMILY):
        _ok(col in est and len(est[col]) == n, f"column {col!r} missing or not {n} rows")
    for col in record(m.FAMILY):
        if col != "bound":
            v = np.asarray(est[col], dtype=np.float64)
            _ok(np.all(np.isfinite(v)) and np.all(v >= 0), f"column {col!r} has a NaN, inf or negative value")
    unknown = set(np.asarray(est["bound"]).tolist()) - set(bounds(m.FAMILY))
    _ok(not unknown, f"unknown bound label(s) {sorted(unknown)}")
    _ok(np.all(est["time_us"] >= est["roofline_us"] * (1 - REL)), "time_us below roofline_us")
    _ok(np.all(est["cores_used"] >= 1), "cores_used below 1")


@_check
def check_bounds_below_estimate(s: Subject) -> None:
    """quick_bound, bound (over the schedule knobs) and prefix_bound are lower bounds of the estimate."""
    m, p, chip = s.model, s.problem, s.chip
    cands = _feasible(s, _sample(s.space, 600, seed=2))
    t = m.estimate(p, chip, cands)["time_us"]
    _ok(np.all(m.quick_bound(p, chip, cands) <= t * (1 + REL)), "quick_bound exceeds the estimate")
    full = m.bound(p, chip, cands, s.space.domains(m.SCHEDULE_KNOBS))
    _ok(full is None or np.all(full <= t * (1 + REL)), "bound exceeds the estimate")
    if m.LEVELS:
        first = {k: cands[k] for k in m.LEVELS[0]}
        floor = m.prefix_bound(p, chip, first, s.space.domains())
        _ok(floor is None or np.all(floor <= t * (1 + REL)), "prefix_bound exceeds the estimate")


@_check
def check_exhaustive_equals_brute_force(s: Subject) -> None:
    """On subspaces around the optimum (up to 10 knobs free with two values each, the rest pinned; two random
    draws), the proven search finds the same best time as scoring every point one by one."""
    from .search import search

    m, p, chip, space = s.model, s.problem, s.chip, s.space
    best = search(p, chip, space, top=1).tiling(0)
    for seed in (0, 1):
        rng = np.random.default_rng(seed)
        names = list(space.names)
        free = set(rng.choice(names, size=min(10, len(names)), replace=False).tolist())
        knobs = {}
        for k, kn in space.knobs.items():
            code = kn.parse(best[k])
            mid = kn.values[len(kn.values) // 2]
            other = mid if mid != code else kn.values[0]
            knobs[k] = replace(kn, values=tuple(sorted({code, other})) if k in free else (code,))
        small = replace(space, knobs=knobs)
        cands = _feasible(s, small.product(small.names))
        brute = float(m.estimate(p, chip, cands)["time_us"].min())
        found = float(search(p, chip, small, top=1).row(0)["time_us"])
        _ok(abs(found - brute) <= REL * abs(brute), f"seed {seed}: search found {found}, brute force {brute}")


@_check
def check_export(s: Subject) -> None:
    """The best tiling's tiler.tiling/v1 document validates and carries only declared targets, each view passing
    its target's check; searched under each target (on a chip it runs on) the export carries that target's view,
    which passes the check, and the view without a required field is rejected."""
    from .export import tiling_document, validate
    from .search import search

    m, p, chip, space = s.model, s.problem, s.chip, s.space
    res = search(p, chip, space, top=1)
    doc = tiling_document(p, chip, res.tiling(0), res.row(0))
    validate(doc)
    _ok(
        set(doc["targets"]) <= set(m.TARGETS),
        f"undeclared targets {sorted(set(doc['targets']) - set(m.TARGETS))}",
    )
    _ok(doc["op"] == m.OP and doc["problem"]["shape"] == p.shape(), "the document names another op or shape")
    for name, view in doc["targets"].items():
        broken = m.TARGETS[name].broken(view, chip, p)
        _ok(broken == [], f"view {name!r} breaks its target's rules: {broken}")
    for name, target in m.TARGETS.items():
        if target.why_not(chip, p):
            continue
        res = search(p, chip, space.for_target(name), top=1)
        doc = tiling_document(p, chip, res.tiling(0), res.row(0), target=name)
        validate(doc)
        _ok(list(doc["targets"]) == [name], f"searched for target {name!r}, exported {list(doc['targets'])}")
        broken = target.broken(doc["targets"][name], chip, p)
        _ok(broken == [], f"view {name!r} breaks its target's rules: {broken}")
        bad = json.loads(json.dumps(doc))  # each view is checked against its own schema
        del bad["targets"][name][target.schema["required"][0]]
        try:
            validate(bad)
        except TilerError as exc:
            _ok(f"targets/{name}" in str(exc), f"the schema error does not name targets/{name}: {exc}")
        else:
            raise AssertionError(f"a {name!r} view without a required field validates")


@_check
def check_deterministic(s: Subject) -> None:
    """The same search twice gives the same tilings (exhaustive), and tpe with one seed the same result."""
    from .search import search

    p, chip, space = s.problem, s.chip, s.space
    a, b = (search(p, chip, space, top=3) for _ in range(2))
    n = len(a.est["time_us"])
    _ok([a.tiling(i) for i in range(n)] == [b.tiling(i) for i in range(n)], "two exhaustive searches differ")
    t1, t2 = (search(p, chip, space, "tpe", top=1, seed=3, trials=8, storage="memory") for _ in range(2))
    _ok(t1.tiling(0) == t2.tiling(0), "two tpe searches with one seed differ")


@_check
def check_advice(s: Subject) -> None:
    """Advice lines are text; the first names the bound and the checklist line for it."""
    from .advice import advice
    from .search import search

    res = search(s.problem, s.chip, s.space, top=1)
    lines = advice(s.problem, s.chip, s.space, take(res.cands, slice(0, 1)), take(res.est, slice(0, 1)))
    _ok(all(isinstance(x, str) for x in lines), "an advice line is not text")
    _ok(
        lines and lines[0].startswith(f"bound {res.row(0)['bound']}"),
        f"advice does not open with the bound: {lines[:1]}",
    )


def _bad_values(cls: type[Problem], name: str) -> list[str]:
    low = cls.MINIMUM.get(name, 1)
    return ["x", "1.5", str(low - 1), "inf", "nan", "1e400", str(2**31), str(2**63 - 1)]


@_check
def check_bad_problem_fields(s: Subject) -> None:
    """For every field: missing, not a number, not an integer, below its minimum, not finite or beyond 2**31 - 1
    -> `tiler search` exits 2 with one stderr line naming the field, no traceback."""
    from .cli import main

    cls = type(s.problem)
    good = {**{k: str(v) for k, v in cls.OPTIONAL.items()}, **{k: str(v) for k, v in cls.EXAMPLE.items()}}
    cases = [(k, {x: v for x, v in good.items() if x != k}) for k in cls.FIELDS]
    cases += [(k, {**good, k: bad}) for k in good for bad in _bad_values(cls, k)]
    for field, shape in cases:
        text = ",".join(f"{k}={v}" for k, v in shape.items())
        err = io.StringIO()
        with contextlib.redirect_stderr(err), contextlib.redirect_stdout(io.StringIO()):
            code = main(["search", "--op", s.model.OP, "--chip", s.chip.id, "--shape", text])
        lines = err.getvalue().strip().splitlines()
        _ok(code == 2, f"--shape {text}: exit code {code}, not 2")
        _ok(
            len(lines) == 1 and field in lines[0] and "Traceback" not in lines[0],
            f"--shape {text}: stderr is not one line naming {field!r}: {lines}",
        )


@_check
def check_sweep_and_rank(s: Subject) -> None:
    """A sweep over a one-row CSV of the example problem writes an ok row and a library whose look-up returns the
    search's tiling; `rank` scores the search's top tilings in the order the search found them."""
    import pandas as pd

    from .library import load
    from .rank import rank_candidates
    from .search import search
    from .sweep import run_sweep

    m, p, chip, space = s.model, s.problem, s.chip, s.space
    with tempfile.TemporaryDirectory() as tmp:
        csv, lib = Path(tmp) / "shapes.csv", Path(tmp) / "lib.json"
        pd.DataFrame([{**p.shape(), "dtype": p.dtype}]).to_csv(csv, index=False)
        report = run_sweep(str(csv), m.OP, chip.id, out=str(Path(tmp) / "out.csv"), library=str(lib))
        _ok(report.failed == 0, f"the sweep failed on {report.failed} row(s)")
        entry = load(lib).lookup(p)
    res = search(p, chip, space, top=4)
    _ok(entry["exact"], "the library's look-up of the swept problem is not exact")
    got = {k: v for k, v in entry["tiling"].items() if k in space.names}
    want = {k: res.tiling(0)[k] for k in space.names}
    _ok(got == want, f"the library returns {got}, the search {want}")
    table = pd.DataFrame([res.tiling(i) for i in range(len(res.est["time_us"]))])
    ranked, rejected = rank_candidates(p, chip, table)
    _ok(rejected.empty, f"rank rejected {len(rejected)} of the search's tilings")
    _ok(
        np.allclose(ranked["predicted_us"].to_numpy(), np.sort(res.est["time_us"])),
        "rank's predictions differ from the search's",
    )


@_check
def check_warm_start(s: Subject) -> None:
    """A declared known-good tiling names every knob with a value of its domain and is feasible on the example
    problem (so --warm-start cannot rot)."""
    t = s.model.warm_start(s.problem, s.chip)
    if t:
        _ok(
            set(t) == set(s.space.names),
            f"the warm start names {sorted(t)}, the space {sorted(s.space.names)}",
        )
        cand = s.space.parse_tiling(t)
        masks = s.model.feasible(s.problem, s.chip, cand)
        _ok(all(bool(np.all(v)) for v in masks.values()), f"the warm start {t} is infeasible")


@_check
def check_every_chip_and_dtype(s: Subject) -> None:
    """On every known chip of the operator's family and every dtype: a finite record at or above the roofline
    whose export validates, or one line saying the chip cannot run the dtype; never a crash, an infeasible
    example or a numpy warning."""
    from .export import tiling_document, validate
    from .problem import DTYPES
    from .search import search

    m = s.model
    cls = problem_class(m.OP)
    for chip_id in known_chips():
        chip = load_chip(chip_id)
        if chip.family != m.FAMILY:
            continue
        for dtype in DTYPES:
            with warnings.catch_warnings():
                warnings.simplefilter("error")
                problem = parse_problem(m.OP, cls.EXAMPLE, dtype)
                try:
                    res = search(problem, chip, load_space(m.OP, chip.family), top=1)
                except ProblemError as exc:  # the chip cannot run the dtype at all (Operator.check): one line
                    _ok("\n" not in str(exc) and "dtype" in str(exc), f"{chip_id} {dtype}: {exc}")
                    continue
                row = res.row(0)
                _ok(np.isfinite(row["time_us"]), f"{chip_id} {dtype}: time_us is not finite")
                _ok(
                    row["time_us"] >= row["roofline_us"] * (1 - REL) and row["roofline_us"] > 0,
                    f"{chip_id} {dtype}: time_us below the roofline, or no roofline",
                )
                validate(tiling_document(problem, chip, res.tiling(0), row))


# name -> check(op, family, chip=None); check_operator runs them in this order
CHECKS: dict[str, Callable[..., None]] = {
    f.__name__.removeprefix("check_"): f
    for f in (
        check_knobs_are_the_space_file,
        check_feasibility_masks,
        check_estimate_record,
        check_bounds_below_estimate,
        check_exhaustive_equals_brute_force,
        check_export,
        check_deterministic,
        check_advice,
        check_bad_problem_fields,
        check_sweep_and_rank,
        check_warm_start,
        check_every_chip_and_dtype,
    )
}


def check_operator(op: str, family: str, chip: str | None = None) -> None:
    """Run every check of CHECKS on the registered (op, family); the first that fails raises AssertionError naming
    it. `chip`: a chip id of the family (default CHIPS[family])."""
    if (op, family) not in known_ops():
        raise AssertionError(f"{op}/{family} is not a registered operator (known: {known_ops()})")
    for check in CHECKS.values():
        check(op, family, chip)


__all__ = ["CHECKS", "CHIPS", "Subject", "check_operator", "subject"]
