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
from .model import get_model, tie_preference
from .problem import Problem
from .space import Candidates, Space, length, product, take

STRATEGIES = ("exhaustive", "tpe", "random", "auto")
CHUNK = 1 << 18  # rows per vectorised pass: bounds memory, keeps numpy's per-call overhead small
PREFIX_SEED = 16  # first-level prefixes expanded first (at least; 2% of them if more) to find an incumbent
PREFIX_BATCH = 256  # prefixes expanded per round after that, the incumbent refreshed between rounds


@dataclass
class SearchResult:
    """Best tilings (ascending time), their estimates, and how the search got there."""

    problem: Problem
    chip: object
    space: Space
    strategy: str
    cands: Candidates  # the top rows, best first, one per distinct predicted time (top_distinct)
    est: dict  # estimate columns for those rows
    evaluated: int  # candidates scored with the full model
    bounded: int  # candidates scored with the lower bound only
    space_size: int  # the full cross product of the (pinned) space
    feasible: int  # enumerated candidates that pass every rule (before dominance and bounds; prefixes cut by
    # the prefix bound are not enumerated, and `notes` says how many)
    rejected: dict[str, int] = field(default_factory=dict)
    proven_optimal: bool = False
    seed: int | None = None
    elapsed_s: float = 0.0
    notes: list[str] = field(default_factory=list)

    def tiling(self, i: int = 0) -> dict:
        return self.space.decode(self.cands, i)

    def row(self, i: int = 0) -> dict:
        return {k: (v[i].item() if hasattr(v[i], "item") else v[i]) for k, v in self.est.items()}


def _levels(space: Space, model) -> list[list[str]]:
    """The model's enumeration levels, plus one for any knob of the space they do not place."""
    schedule = set(getattr(model, "SCHEDULE_KNOBS", ()))
    resolved = set(getattr(model, "RESOLVED", ()))
    levels = [list(lv) for lv in getattr(model, "LEVELS", ())]
    placed = {k for lv in levels for k in lv} | schedule | resolved
    rest = [k for k in space.names if k not in placed]
    return levels + [rest] if rest else levels


def enumerate_feasible(
    problem: Problem, chip, space: Space, model, prefixes: Candidates | None = None
) -> tuple[Candidates, dict[str, int], int]:
    """All feasible, non-dominated candidates without the schedule knobs (those are expanded later).

    `prefixes`: start from these rows of the first level (already checked) instead of the whole first level.
    Returns the table, rejections per rule (a row failing two rules counts for both) and the feasible count.
    """
    resolved = list(getattr(model, "RESOLVED", ()))
    levels = _levels(space, model)
    rejected: dict[str, int] = {}
    applied: set[str] = set()

    def check(t: Candidates, rows: int, skip: set[str]) -> np.ndarray:
        ok, done = _passing(
            problem, chip, model, t, rows, [r for r in model.RULES if r not in skip], rejected
        )
        applied.update(done)
        return ok

    domains = space.domains()
    dominance = getattr(model, "dominated", None)
    # the resolved knobs are set as soon as every rule that involves them can be checked (before later levels
    # multiply the table)
    needs = {k for r, ks in model.RULES.items() if set(ks) & set(resolved) for k in ks} - set(resolved)
    table: Candidates = {}
    twins = 0  # rows dropped as dominated while the last level was expanded
    for i, lv in enumerate(levels):
        grid = space.product(lv)
        last = i == len(levels) - 1
        if i == 0:
            if prefixes is None:
                table = take(grid, check(grid, length(grid), applied))
            else:
                table = prefixes
                applied.update(r for r, ks in model.RULES.items() if set(ks) <= set(lv))
        else:
            # the product in chunks, each checked before the next; at the last level the dominated rows go too
            skip, pieces = set(applied), []
            step = max(1, CHUNK // length(grid))
            for lo in range(0, length(table), step):
                t = product(take(table, slice(lo, lo + step)), grid)
                ok = check(t, length(t), skip)
                if last and dominance is not None:
                    twin = ok & dominance(problem, chip, t, domains)
                    twins += int(twin.sum())
                    ok &= ~twin
                pieces.append(take(t, ok))
            table = {k: np.concatenate([p[k] for p in pieces]) for k in pieces[0]}
        if length(table) and resolved and resolved[0] not in table and needs <= set(table):
            table = model.resolve(problem, chip, table, space.domains(resolved))
            table = take(table, check(table, length(table), applied))
        if not length(table):
            break
    feasible = length(table) + twins
    if len(levels) == 1 and feasible and dominance is not None:
        table = take(table, ~dominance(problem, chip, table, domains))
    return table, rejected, feasible


def first_level(problem: Problem, chip, space: Space, model) -> tuple[Candidates, dict[str, int]]:
    """The first enumeration level's rows that pass the rules that level can check, and the rejections."""
    grid = space.product(_levels(space, model)[0])
    rejected: dict[str, int] = {}
    ok, _ = _passing(problem, chip, model, grid, length(grid), list(model.RULES), rejected)
    return take(grid, ok), rejected


def _passing(problem, chip, model, t: Candidates, rows: int, rules: list[str], rejected: dict[str, int]):
    """Rows of `t` (columns may be scalars) that pass the given rules whose knobs `t` has, and those rules;
    adds each rule's rejections to `rejected`."""
    ok = np.ones(rows, dtype=bool)
    masks = model.feasible(problem, chip, t, rules)
    for r, m in masks.items():
        m = np.broadcast_to(m, rows)
        rejected[r] = rejected.get(r, 0) + int(rows - m.sum())
        ok &= m
    return ok, set(masks)


def _no_feasible(space: Space, rejected: dict[str, int], model) -> InfeasibleError:
    worst = max(rejected, key=rejected.get) if rejected else None
    text = getattr(model, "RULE_TEXT", {}).get(worst, worst)
    pinned = [k for k, kn in space.knobs.items() if len(kn.values) == 1]
    pins = f" with {', '.join(pinned)} pinned" if pinned else ""
    return InfeasibleError(
        f"no feasible tiling{pins}: rule '{worst}' ({text}) rejected {rejected.get(worst, 0)} candidates"
    )


def top_distinct(
    cands: Candidates, time_us: np.ndarray, names, top: int, prefer: np.ndarray | None = None
) -> np.ndarray:
    """Indices of the `top` fastest candidates with distinct predicted times, fastest first.

    Candidates the model predicts exactly equal (an order the model cannot tell apart from another, a step that
    changes nothing on this shape) take one slot: the one the model's `tie_rank` prefers (`prefer`, lower first:
    the launch order measurements favour), then the smallest knob codes in the space's knob order (the plainest
    setting). A top-N list then holds N different predictions, which is what is worth measuring.
    """
    keys = [cands[k] for k in reversed(names) if k in cands]
    if prefer is not None:
        keys.append(prefer)
    order = np.lexsort(keys + [time_us])
    t = time_us[order]
    first = np.ones(t.size, dtype=bool)
    first[1:] = t[1:] != t[:-1]
    return order[first][:top]


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
    pos, bounded, block, batch = 0, 0, 256, 8
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
    """Proven-optimal search: level-wise enumeration, dominance, then branch and bound on the lower bound.

    With a model that bounds whole first-level prefixes (`prefix_bound`: a floor of quick_bound over every
    completion of a row of base sizes and split-K), prefixes are expanded in increasing bound: a first few to
    find an incumbent, then only those whose bound is below it; the rest cannot enter the top `top`.
    """
    t0 = time.perf_counter()
    model = get_model(space.op, space.family)
    sched_names = [k for k in getattr(model, "SCHEDULE_KNOBS", ()) if k in space.knobs]
    sched = space.product(sched_names) if sched_names else {}
    n_sched = length(sched) if sched else 1
    best_c: Candidates = {}
    best_e: dict = {}
    evaluated = bounded = feasible = 0
    rejected: dict[str, int] = {}
    dominance = getattr(model, "dominated", None)
    domains = space.domains()

    def incumbent() -> float:
        return _incumbent(best_e, top)

    def score(rows: Candidates):
        nonlocal best_c, best_e, evaluated
        full = product(rows, sched) if sched else rows
        if sched and dominance is not None:  # schedules that are twins of another schedule of the same tiling
            full = take(full, ~dominance(problem, chip, full, domains))
        est = model.estimate(problem, chip, full)
        evaluated += length(full)
        merged_c = {k: np.concatenate([best_c[k], full[k]]) if best_c else full[k] for k in full}
        merged_e = {k: np.concatenate([best_e[k], est[k]]) if best_e else est[k] for k in est}
        prefer = tie_preference(model, problem, chip, merged_c)
        order = top_distinct(merged_c, merged_e["time_us"], space.names, top, prefer)
        best_c, best_e = take(merged_c, order), take(merged_e, order)

    def solve(prefixes: Candidates | None):
        """Enumerate (from `prefixes` if given) and score with the branch and bound."""
        nonlocal bounded, feasible
        table, rej, feas = enumerate_feasible(problem, chip, space, model, prefixes)
        feasible += feas
        for r, v in rej.items():
            rejected[r] = rejected.get(r, 0) + v
        if not length(table):
            return
        if sched and hasattr(model, "bound"):
            bounded += _branch_and_bound(
                problem, chip, model, table, space.domains(sched_names), score, incumbent
            )
        else:
            for lo in range(0, length(table), max(1, CHUNK // n_sched)):
                score(take(table, slice(lo, lo + max(1, CHUNK // n_sched))))

    notes = []
    if hasattr(model, "prefix_bound") and len(_levels(space, model)) > 1:
        prefixes, rejected = first_level(problem, chip, space, model)
        floor = model.prefix_bound(problem, chip, prefixes, domains)
        order = np.argsort(floor, kind="stable")
        n = order.size
        batch = min(n, max(PREFIX_SEED, n // 50))  # the first batch: enough prefixes for a good incumbent
        rest = order
        while rest.size:
            solve(take(prefixes, rest[:batch]))
            rest = rest[batch:]
            # rest is in bound order: the prefixes whose floor is below the incumbent come first
            batch = min(PREFIX_BATCH, int(np.searchsorted(floor[rest], incumbent())))
            if batch == 0:
                break
        if rest.size:
            notes.append(
                f"{rest.size} of {n} first-level prefixes ({', '.join(_levels(space, model)[0])}) were cut "
                "by their bound before enumeration; the feasible count covers the others"
            )
    else:
        solve(None)
    if not best_e:
        raise _no_feasible(space, rejected, model)
    return SearchResult(
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
        True,
        None,
        time.perf_counter() - t0,
        notes,
    )


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
    chip.require_dtype(problem.dtype)
    if strategy in ("exhaustive", "auto"):
        return exhaustive(problem, chip, space, top=top)
    from . import bayes  # optuna is imported only here

    return bayes.run(problem, chip, space, strategy=strategy, top=top, seed=seed, trials=trials, **kw)


def evaluate(problem: Problem, chip, space: Space, tiling: dict) -> tuple[Candidates, dict, dict[str, bool]]:
    """Score one given tiling (explain, rank): its candidate row, estimate and the rules it breaks."""
    model = get_model(space.op, space.family)
    chip.require_dtype(problem.dtype)
    cand = space.parse_tiling(tiling)
    rules = model.feasible(problem, chip, cand)
    est = model.estimate(problem, chip, cand)
    return cand, est, {r: bool(m[0]) for r, m in rules.items()}
