"""Search strategies behind one entry point, `search()`: exhaustive (vectorised, proven), tpe and random (optuna).

The dispatch lives here, so the strategies do not import each other for it (bayes uses `proven.exhaustive`
only for guided search; nothing imports bayes but this dispatch, and only when a tpe or random search runs,
so optuna is loaded then). Both return `result.SearchResult`.
"""

from __future__ import annotations

from ..errors import SpaceError
from ..operator import get_operator
from ..problem import Problem
from ..space import Candidates, Space
from .proven import enumerate_feasible, exhaustive
from .result import SearchResult, top_distinct

STRATEGIES = ("exhaustive", "tpe", "random", "auto")


def search(
    problem: Problem,
    chip,
    space: Space,
    strategy: str = "exhaustive",
    top: int = 5,
    seed: int = 0,
    trials: int | None = None,
    **kw,
) -> SearchResult:
    """Run one strategy. `auto` is exhaustive (every shipped space is proven in seconds)."""
    if strategy not in STRATEGIES:
        raise SpaceError(f"strategy: must be one of {', '.join(STRATEGIES)}, got {strategy!r}")
    get_operator(space.op, space.family, space.target).admit(problem, chip)
    if strategy in ("exhaustive", "auto"):
        return exhaustive(problem, chip, space, top=top)
    from . import bayes  # optuna is imported only here

    return bayes.run(problem, chip, space, strategy=strategy, top=top, seed=seed, trials=trials, **kw)


def evaluate(problem: Problem, chip, space: Space, tiling: dict) -> tuple[Candidates, dict, dict[str, bool]]:
    """Score one given tiling (explain, rank): its candidate row, estimate and the rules it breaks."""
    model = get_operator(space.op, space.family, space.target)
    model.admit(problem, chip)
    cand = space.parse_tiling(tiling)
    rules = model.masks(problem, chip, cand)
    est = model.estimate(problem, chip, cand)
    return cand, est, {r: bool(m[0]) for r, m in rules.items()}


__all__ = [
    "STRATEGIES",
    "SearchResult",
    "enumerate_feasible",
    "evaluate",
    "exhaustive",
    "search",
    "top_distinct",
]
