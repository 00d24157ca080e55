"""Search strategies behind one entry point, `search()`: exhaustive (vectorised, proven), tpe and random (optuna).

The dispatch lives here, so the strategies do not import each other for it (bayes uses `proven.exhaustive`
only for guided search; nothing imports bayes but this dispatch, and only when a tpe or random search runs,
so optuna is loaded then). Both return `result.SearchResult`.
"""

from __future__ import annotations

import math
import numbers

from ..errors import SpaceError, TilerError
from ..operator import get_operator
from ..problem import Problem
from ..space import Candidates, Space, take
from .proven import enumerate_feasible, exhaustive
from .result import DIVERSE_FACTOR, DIVERSE_MAX, SearchResult, diverse_order, top_distinct

STRATEGIES = ("exhaustive", "tpe", "random", "auto")
# Bounds of the numbers a search takes, checked before any work (README "Input limits"): the work is bounded by the
# space and these, never by an arbitrary user number. TOP_MAX: tilings reported (`--top`; the exhaustive search
# keeps the top `top` as its pruning incumbent); TRIALS_MAX: evaluations of a tpe/random search; SEED_MAX: optuna's
# samplers (numpy RandomState) take seeds in 0..2**32-1.
TOP_MAX = 1000
TRIALS_MAX = 100_000
SEED_MAX = 2**32 - 1


def _as_int(value):
    """numpy integers as int; anything else unchanged (refused by _check_int)."""
    return int(value) if isinstance(value, numbers.Integral) and not isinstance(value, bool) else value


def _check_int(name: str, value, low: int, high: int, why: str = "") -> None:
    if isinstance(value, bool) or not isinstance(value, int) or not low <= value <= high:
        raise SpaceError(f"{name}: must be an integer in {low}..{high}{why}, got {value!r}")


def check_seed(seed, name: str = "seed", coerce: bool = False) -> int:
    """The seed as an int optuna's samplers accept (0..SEED_MAX), else TilerError naming `name` (the one seed check:
    the API, the CLI, TPE/random and sweeps). coerce: a number or text holding an integer (a sweep's option) is
    taken as that integer."""
    if isinstance(seed, numbers.Integral) and not isinstance(seed, bool):
        seed = int(seed)
    elif coerce and not isinstance(seed, bool):
        try:
            f = float(seed)
        except (TypeError, ValueError):
            f = math.nan
        if math.isfinite(f) and f == int(f):
            seed = int(f)
    if isinstance(seed, bool) or not isinstance(seed, int) or not 0 <= seed <= SEED_MAX:
        raise TilerError(f"{name}: must be an integer in 0..{SEED_MAX}, got {seed!r}")
    return seed


def check_search_args(top: int, seed: int, trials: int | None) -> None:
    """Refuse a `top`, `seed` or `trials` outside its documented range (TOP_MAX, SEED_MAX, TRIALS_MAX)."""
    _check_int("top", _as_int(top), 1, TOP_MAX, " (more alternatives than anyone reads)")
    _check_int("seed", _as_int(seed), 0, SEED_MAX)
    if trials is not None:
        _check_int("trials", _as_int(trials), 1, TRIALS_MAX)


def search(
    problem: Problem,
    chip,
    space: Space,
    strategy: str = "exhaustive",
    top: int = 5,
    seed: int = 0,
    trials: int | None = None,
    diverse: bool | None = None,
    **kw,
) -> SearchResult:
    """Run one strategy. `auto` is exhaustive (every shipped space is proven in seconds).

    diverse: order the top `top` (and a guided search's model top-k) as the diverse top-k (`diverse_top`): the best
    tiling of each distinct tile shape (the operator's SHAPE_KNOBS) first. None (default): diverse when the search
    is guided (`guided` > 0, the model's list is measured), the plain ranking otherwise.
    """
    if strategy not in STRATEGIES:
        raise SpaceError(f"strategy: must be one of {', '.join(STRATEGIES)}, got {strategy!r}")
    check_search_args(top, seed, trials)
    get_operator(space.op, space.family, space.target).admit(problem, chip)
    if diverse is None:
        diverse = bool(kw.get("guided"))
    if strategy in ("exhaustive", "auto"):
        return (
            diverse_top(problem, chip, space, top) if diverse else exhaustive(problem, chip, space, top=top)
        )
    from . import bayes  # optuna is imported only here

    return bayes.run(
        problem, chip, space, strategy=strategy, top=top, seed=seed, trials=trials, diverse=diverse, **kw
    )


def diverse_top(problem: Problem, chip, space: Space, top: int) -> SearchResult:
    """The diverse top-`top` (docs/search.md, "Diverse top-k"): the proven search for the model's top N
    (N = DIVERSE_FACTOR * top, at most DIVERSE_MAX), then the best tiling of each distinct tile shape among them in
    predicted order, then the rest of the N; `est["gap"]` is each one's predicted time over the best. The first row
    is the plain optimum; a shape whose best tiling is not in the model's top N is not listed.
    """
    model = get_operator(space.op, space.family, space.target)
    pool = min(DIVERSE_MAX, max(top, DIVERSE_FACTOR * top)) if model.SHAPE_KNOBS else top
    res = exhaustive(problem, chip, space, top=pool)
    order, gap = diverse_order(res.cands, res.est["time_us"], model.SHAPE_KNOBS, model.DEPTH_KNOB)
    order, gap = order[:top], gap[:top]
    res.cands = take(res.cands, order)
    res.est = dict(take(res.est, order), gap=gap)
    shapes = len(
        {tuple(int(res.cands[k][i]) for k in model.SHAPE_KNOBS if k in res.cands) for i in range(len(gap))}
    )
    if model.SHAPE_KNOBS:
        res.notes.append(
            f"diverse top-{top}: the best tiling of each distinct {'x'.join(model.SHAPE_KNOBS)} among the model's "
            f"top {pool} first ({shapes} distinct shapes listed); --plain: the plain ranking"
        )
    return res


def evaluate(problem: Problem, chip, space: Space, tiling: dict) -> tuple[Candidates, dict, dict[str, bool]]:
    """Score one given tiling (explain, rank): its candidate row, estimate and the rules it breaks."""
    model = get_operator(space.op, space.family, space.target)
    model.admit(problem, chip)
    cand = space.parse_tiling(tiling)
    rules = model.masks(problem, chip, cand)
    est = model.estimate(problem, chip, cand)
    return cand, est, {r: bool(m[0]) for r, m in rules.items()}


__all__ = [
    "SEED_MAX",
    "STRATEGIES",
    "TOP_MAX",
    "TRIALS_MAX",
    "check_search_args",
    "check_seed",
    "diverse_order",
    "diverse_top",
    "SearchResult",
    "enumerate_feasible",
    "evaluate",
    "exhaustive",
    "search",
    "top_distinct",
]
