"""Search strategies over a tiling space: one entry point, `search()`.

`exhaustive` is the ground truth: it enumerates the constrained space level by level (capacity rules prune each
level before the next multiplies the table), drops provably dominated settings, and runs a branch and bound on
the model's lower bound so that the optimum is proven without scoring every schedule of every tiling.
`tpe` and `random` (optuna) live in `tiler.bayes` and share this module's result type.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field

import numpy as np

from .errors import InfeasibleError, SpaceError
from .model import get_model
from .problem import Problem
from .space import Candidates, Space, length, product, take

STRATEGIES = ("exhaustive", "tpe", "random", "auto")
CHUNK = 1 << 18  # rows per vectorised pass: bounds memory, keeps numpy's per-call overhead small


@dataclass
class SearchResult:
    """Best tilings (ascending time), their estimates, and how the search got there."""

    problem: Problem
    chip: object
    space: Space
    strategy: str
    cands: Candidates  # the top rows, best first
    est: dict  # estimate columns for those rows
    evaluated: int  # candidates scored with the full model
    bounded: int  # candidates scored with the lower bound only
    space_size: int  # the full cross product of the (pinned) space
    feasible: int  # candidates that pass every rule (before dominance and bounds)
    rejected: dict[str, int] = field(default_factory=dict)
    proven_optimal: bool = False
    seed: int | None = None
    elapsed_s: float = 0.0
    notes: list[str] = field(default_factory=list)

    def tiling(self, i: int = 0) -> dict:
        return self.space.decode(self.cands, i)

    def row(self, i: int = 0) -> dict:
        return {k: (v[i].item() if hasattr(v[i], "item") else v[i]) for k, v in self.est.items()}


def enumerate_feasible(problem: Problem, chip, space: Space, model) -> tuple[Candidates, dict[str, int], int]:
    """All feasible, non-dominated candidates without the schedule knobs (those are expanded later).

    Returns the table, rejections per rule (a row failing two rules counts for both) and the feasible count.
    """
    schedule = set(getattr(model, "SCHEDULE_KNOBS", ()))
    resolved = list(getattr(model, "RESOLVED", ()))
    levels = [list(lv) for lv in getattr(model, "LEVELS", ())]
    placed = {k for lv in levels for k in lv} | schedule | set(resolved)
    rest = [k for k in space.names if k not in placed]
    if rest:
        levels.append(rest)
    rejected: dict[str, int] = {}
    applied: set[str] = set()
    table: Candidates = {}

    def prune(t: Candidates) -> Candidates:
        masks = model.feasible(problem, chip, t, [r for r in model.RULES if r not in applied])
        ok = np.ones(length(t), dtype=bool)
        for r, m in masks.items():
            rejected[r] = rejected.get(r, 0) + int((~m).sum())
            ok &= m
            applied.add(r)
        return take(t, ok)

    for lv in levels:
        grid = space.product(lv)
        if not table:
            table = prune(grid)
            continue
        pieces = []
        step = max(1, CHUNK // max(length(grid), 1))
        applied_before = set(applied)
        for lo in range(0, length(table), step):
            applied.intersection_update(applied_before)
            pieces.append(prune(product(take(table, slice(lo, lo + step)), grid)))
        table = {k: np.concatenate([p[k] for p in pieces]) for k in pieces[0]} if pieces else {}
        if not length(table):
            break
    if length(table) and resolved:
        table = model.resolve(problem, chip, table, {k: space.knobs[k].values for k in resolved})
        table = prune(table)
    feasible = length(table)
    if feasible and hasattr(model, "dominated"):
        table = take(table, ~model.dominated(problem, chip, table))
    return table, rejected, feasible


def _no_feasible(space: Space, rejected: dict[str, int], model) -> InfeasibleError:
    worst = max(rejected, key=rejected.get) if rejected else None
    text = getattr(model, "RULE_TEXT", {}).get(worst, worst)
    pinned = [k for k, kn in space.knobs.items() if len(kn.values) == 1]
    pins = f" with {', '.join(pinned)} pinned" if pinned else ""
    return InfeasibleError(
        f"no feasible tiling{pins}: rule '{worst}' ({text}) rejected {rejected.get(worst, 0)} candidates"
    )


def _incumbent(best_e: dict, top: int) -> float:
    """The time a candidate must beat to enter the top `top` (infinite until `top` are found)."""
    return float(best_e["time_us"][top - 1]) if best_e and length(best_e) >= top else np.inf


def _branch_and_bound(problem, chip, model, table: Candidates, domains: dict, score, incumbent) -> int:
    """Score the rows of `table` (expanded over the schedule knobs by `score`) in increasing lower bound,
    stopping when no remaining row's bound is below the incumbent. Returns how many rows got the full bound.

    Two bounds, both valid for every schedule: `quick_bound` (whole-kernel floors, cheap) orders all rows;
    `bound` (per-tile pipelines) is computed block by block in that order, only while the block's quick bound is
    below the incumbent. A row is scored once its bound is below the quick bound of every row not yet bounded,
    so rows are scored in increasing bound overall and the first bound at or above the incumbent ends the search.
    """
    n = length(table)
    if hasattr(model, "quick_bound"):
        quick = np.concatenate(
            [
                model.quick_bound(problem, chip, take(table, slice(lo, lo + CHUNK)))
                for lo in range(0, n, CHUNK)
            ]
        )
    else:
        quick = np.zeros(n)
    order = np.argsort(quick, kind="stable")
    pool_lb, pool_idx = np.empty(0), np.empty(0, dtype=np.int64)
    pos, bounded, block, batch = 0, 0, 4096, 64
    while True:
        q_next = quick[order[pos]] if pos < n else np.inf
        inc = incumbent()
        if q_next >= inc and (pool_lb.size == 0 or pool_lb.min() >= inc):
            break  # every row left has a bound at or above the top-`top` time: none can enter it
        if pos < n and (pool_lb.size == 0 or pool_lb.min() > q_next):
            idx = order[pos : pos + block]
            pos += idx.size
            lb = np.maximum(quick[idx], model.bound(problem, chip, take(table, idx), domains))
            bounded += idx.size
            keep = lb < inc
            pool_lb, pool_idx = np.concatenate([pool_lb, lb[keep]]), np.concatenate([pool_idx, idx[keep]])
            block = min(block * 2, CHUNK)
            continue
        first = np.argsort(pool_lb, kind="stable")[:batch]
        first = first[pool_lb[first] <= q_next] if np.isfinite(q_next) else first
        if first.size == 0:
            first = np.argsort(pool_lb, kind="stable")[:1]
        score(take(table, pool_idx[first]))
        pool_lb, pool_idx = np.delete(pool_lb, first), np.delete(pool_idx, first)
        batch = min(batch * 2, 4096)
    return bounded


def exhaustive(problem: Problem, chip, space: Space, top: int = 5) -> SearchResult:
    """Proven-optimal search: level-wise enumeration, dominance, then branch and bound on the lower bound."""
    t0 = time.perf_counter()
    model = get_model(space.op, space.family)
    table, rejected, feasible = enumerate_feasible(problem, chip, space, model)
    sched_names = [k for k in getattr(model, "SCHEDULE_KNOBS", ()) if k in space.knobs]
    if not length(table):
        raise _no_feasible(space, rejected, model)
    sched = space.product(sched_names) if sched_names else {}
    n_sched = length(sched) if sched else 1
    best_c: Candidates = {}
    best_e: dict = {}
    evaluated = 0

    def score(rows: Candidates):
        nonlocal best_c, best_e, evaluated
        full = product(rows, sched) if sched else rows
        est = model.estimate(problem, chip, full)
        evaluated += length(full)
        merged_c = {k: np.concatenate([best_c[k], full[k]]) if best_c else full[k] for k in full}
        merged_e = {k: np.concatenate([best_e[k], est[k]]) if best_e else est[k] for k in est}
        order = np.argsort(merged_e["time_us"], kind="stable")[:top]
        best_c, best_e = take(merged_c, order), take(merged_e, order)

    bounded = 0
    if sched and hasattr(model, "bound"):
        domains = {k: space.knobs[k].values for k in sched_names}
        bounded = _branch_and_bound(
            problem, chip, model, table, domains, score, lambda: _incumbent(best_e, top)
        )
        proven = True
    else:
        for lo in range(0, length(table), max(1, CHUNK // n_sched)):
            score(take(table, slice(lo, lo + max(1, CHUNK // n_sched))))
        proven = True
    res = SearchResult(
        problem,
        chip,
        space,
        "exhaustive",
        best_c,
        best_e,
        evaluated,
        bounded,
        space.size(),
        feasible * n_sched,
        rejected,
        proven,
        None,
        time.perf_counter() - t0,
    )
    return res


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
    """Run one strategy. `auto` is exhaustive (the ascend and cuda matmul spaces are proven in seconds)."""
    if strategy not in STRATEGIES:
        raise SpaceError(f"strategy: must be one of {', '.join(STRATEGIES)}, got {strategy!r}")
    if strategy in ("exhaustive", "auto"):
        return exhaustive(problem, chip, space, top=top)
    from . import bayes  # optuna is imported only here

    return bayes.run(problem, chip, space, strategy=strategy, top=top, seed=seed, trials=trials, **kw)


def evaluate(problem: Problem, chip, space: Space, tiling: dict) -> tuple[Candidates, dict, dict[str, bool]]:
    """Score one given tiling (explain, rank): its candidate row, estimate and the rules it breaks."""
    model = get_model(space.op, space.family)
    cand = space.parse_tiling(tiling)
    rules = model.feasible(problem, chip, cand)
    est = model.estimate(problem, chip, cand)
    return cand, est, {r: bool(m[0]) for r, m in rules.items()}
