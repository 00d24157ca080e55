"""The best tiling each export target can run, beside the unconstrained best (runnable by default).

The unconstrained optimum of a search (`--target any`) is the best the cost model knows, but it may need a kernel no
code generator instantiates (on Ascend matmul: different L1 K depths for A and B, a tail re-cut, ...). A user who
wants code now needs, for each target that can run the problem on the chip, the best tiling *that target* can run
as exported, with its predicted time and what it costs against the unconstrained best. This module computes that
with one constrained search per target (the target's domains and rules, as `--target T` searches), and skips the
search when the unconstrained best is already expressible by the target: the optimum of a subspace that contains
the global optimum is the global optimum, so reusing it is exact, not a shortcut.

A target search always runs the proven exhaustive search on the model, whatever strategy the main search used
(a measured or Bayesian search spends its trials on the unconstrained space; the per-target answers are the
model's picks, and `strategy` in each choice says so).
"""

from __future__ import annotations

from dataclasses import dataclass

from ..errors import TilerError
from ..operator import get_operator
from ..problem import Problem
from ..space import Candidates, Space, take
from .proven import exhaustive
from .result import SearchResult


@dataclass
class TargetChoice:
    """One target's best runnable tiling: decoded, as its estimate row, as a one-row candidate table, its
    predicted time over the unconstrained best (`gap`: >= 1 when that best is proven optimal; below 1 can only
    happen against a Bayesian or measured best; None when the unconstrained best is unknown) and whether it is the
    unconstrained best's tiling itself."""

    target: str
    tiling: dict
    row: dict
    cand: Candidates
    gap: float | None
    same_as_best: bool
    strategy: str
    proven_optimal: bool

    @property
    def time_us(self) -> float:
        return float(self.row["time_us"])


@dataclass
class Runnable:
    """The per-target answers of one search: `choices` (target -> TargetChoice, the operator's target order) and
    `missing` (target -> why it has no runnable tiling here: not this chip, a pin it cannot express, no tiling of
    its space fits)."""

    choices: dict[str, TargetChoice]
    missing: dict[str, str]

    def to_json(self) -> dict:
        """Plain JSON (a sweep's journal keeps it): per choice its tiling, estimate row and flags."""
        return {
            "choices": {
                n: {
                    "tiling": {k: _py(v) for k, v in c.tiling.items()},
                    "row": {k: _py(v) for k, v in c.row.items()},
                    "gap": c.gap,
                    "same_as_best": c.same_as_best,
                    "strategy": c.strategy,
                    "proven_optimal": c.proven_optimal,
                }
                for n, c in self.choices.items()
            },
            "missing": dict(self.missing),
        }

    @classmethod
    def from_json(cls, data: dict, space: Space) -> Runnable:
        """Back from `to_json` (the one-row candidate tables re-parsed with `space`, the unconstrained space)."""
        choices = {
            n: TargetChoice(
                n,
                c["tiling"],
                c["row"],
                space.parse_tiling(c["tiling"]),
                c["gap"],
                c["same_as_best"],
                c["strategy"],
                c["proven_optimal"],
            )
            for n, c in data["choices"].items()
        }
        return cls(choices, dict(data["missing"]))


def _py(v):
    return v.item() if hasattr(v, "item") else v


def per_target(
    problem: Problem,
    chip,
    space: Space,
    best: SearchResult | None,
    only: str | None = None,
    known: dict[str, SearchResult] | None = None,
) -> Runnable:
    """For each target of the operator (or `only` that one): the best tiling it can run on `chip`.

    `space` is the pinned, unconstrained space (`space.target == "any"`); `best` its search result (None when it
    was not run: gaps are then None); `known`: targets already searched (`--target T`: its own result). A target
    that cannot run the problem, cannot express a pin, or has no feasible tiling is listed in `missing` with the
    reason. The unconstrained best stands for a target that expresses it only when its optimum is proven (a
    Bayesian or measured best is not the optimum of any subspace)."""
    if space.target != "any":
        raise TilerError(f"internal: per_target needs the unconstrained space, got target {space.target!r}")
    model = get_operator(space.op, space.family)
    has_best = best is not None and len(best.est["time_us"]) > 0
    best_time = float(best.est["time_us"][0]) if has_best else None
    best_cand = take(best.cands, slice(0, 1)) if has_best else None
    choices: dict[str, TargetChoice] = {}
    missing: dict[str, str] = {}
    for name, target in model.TARGETS.items():
        if only is not None and name != only:
            continue
        why = target.why_not(chip, problem)
        if why:
            missing[name] = why
            continue
        try:
            sub = space.for_target(name)
        except TilerError as exc:  # a --fix the target cannot express
            missing[name] = str(exc).removeprefix("fix: ")
            continue
        res = (known or {}).get(name)
        if (
            res is None
            and has_best
            and best.proven_optimal
            and model.expresses(target, problem, chip, best_cand)
        ):
            res = best  # the optimum of a subspace holding the global optimum is the global optimum
        if res is None:
            try:
                res = exhaustive(problem, chip, sub, top=1)
            except TilerError as exc:  # InfeasibleError: no tiling of the target's space fits
                missing[name] = str(exc)
                continue
        cand = take(res.cands, slice(0, 1))
        row = res.row(0)
        same = best_cand is not None and all(int(cand[k][0]) == int(best_cand[k][0]) for k in space.knobs)
        choices[name] = TargetChoice(
            name,
            res.tiling(0),
            row,
            cand,
            None if best_time is None else float(row["time_us"]) / best_time,
            same,
            res.strategy,
            bool(res.proven_optimal),
        )
    return Runnable(choices, missing)


__all__ = ["Runnable", "TargetChoice", "per_target"]
