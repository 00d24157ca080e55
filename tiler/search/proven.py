"""The exhaustive strategy, the ground truth of the others.

It enumerates the constrained space level by level (capacity rules prune each level before the next multiplies
the table), drops provably dominated settings, and runs a branch and bound on the operator's lower bound so that
the optimum is proven without scoring every schedule of every tiling.
"""

from __future__ import annotations

import time

import numpy as np

from ..errors import InfeasibleError
from ..operator import Operator, get_operator, tie_preference
from ..problem import Problem
from ..space import Candidates, Space, length, product, product_rows, take
from .result import SearchResult, top_distinct

CHUNK = 1 << 18  # rows per vectorised pass: bounds memory, keeps numpy's per-call overhead small
ESTIMATE_ROWS = 1 << 14  # candidates per estimate call in the search (its peak memory: about 5 KB a row)
PREFIX_SEED = 16  # first-level prefixes expanded first (at least; 2% of them if more) to find an incumbent
PREFIX_BATCH = 256  # prefixes expanded per round after that, the incumbent refreshed between rounds
BNB_BLOCK = 1024  # rows bounded (bound()) before there is an incumbent
BNB_BATCH = 32  # tilings in the branch and bound's first scored batch
BNB_GROWTH = 4  # each later batch this many times larger (fewer, larger estimate calls)


def _levels(space: Space, model: Operator) -> list[list[str]]:
    """The operator's enumeration levels, plus one for any knob of the space they do not place."""
    schedule = set(model.SCHEDULE_KNOBS)
    resolved = set(model.RESOLVED)
    levels = [list(lv) for lv in model.LEVELS]
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
    resolved = list(model.RESOLVED)
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
                table = take(grid, np.flatnonzero(check(grid, length(grid), applied)))
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
                if last:
                    twin = ok & model.dominated(problem, chip, t, domains)
                    twins += int(twin.sum())
                    ok &= ~twin
                pieces.append(take(t, np.flatnonzero(ok)))
            table = {k: np.concatenate([p[k] for p in pieces]) for k in pieces[0]}
        if length(table) and resolved and resolved[0] not in table and needs <= set(table):
            table = model.resolve(problem, chip, table, space.domains(resolved))
            table = take(table, np.flatnonzero(check(table, length(table), applied)))
        if not length(table):
            break
    feasible = length(table) + twins
    if len(levels) == 1 and feasible:
        table = take(table, np.flatnonzero(~model.dominated(problem, chip, table, domains)))
    return table, rejected, feasible


def first_level(problem: Problem, chip, space: Space, model) -> tuple[Candidates, dict[str, int]]:
    """The first enumeration level's rows that pass the rules that level can check, and the rejections."""
    grid = space.product(_levels(space, model)[0])
    rejected: dict[str, int] = {}
    ok, _ = _passing(problem, chip, model, grid, length(grid), list(model.RULES), rejected)
    return take(grid, np.flatnonzero(ok)), rejected


def _passing(problem, chip, model, t: Candidates, rows: int, rules: list[str], rejected: dict[str, int]):
    """Rows of `t` (columns may be scalars) that pass the given rules whose knobs `t` has, and those rules;
    adds each rule's rejections to `rejected`."""
    ok = np.ones(rows, dtype=bool)
    masks = model.masks(problem, chip, t, rules)
    for r, m in masks.items():
        m = np.broadcast_to(m, rows)
        rejected[r] = rejected.get(r, 0) + int(rows - m.sum())
        ok &= m
    return ok, set(masks)


def _no_feasible(space: Space, rejected: dict[str, int], model: Operator) -> InfeasibleError:
    """One line: the rule that rejected the most candidates with its text, then the others that rejected any
    (a candidate failing two rules counts for both, so the first is not always the only obstacle)."""
    ranked = sorted((r for r in rejected if rejected[r]), key=lambda r: -rejected[r])
    worst = ranked[0] if ranked else None
    text = model.RULE_TEXT.get(worst, worst)
    pinned = [k for k, kn in space.knobs.items() if len(kn.values) == 1]
    pins = f" with {', '.join(pinned)} pinned" if pinned else ""
    also = ", ".join(f"'{r}' {rejected[r]}" for r in ranked[1:4])
    return InfeasibleError(
        f"no feasible tiling{pins}: rule '{worst}' ({text}) rejected {rejected.get(worst, 0)} candidates"
        + (f"; also rejecting: {also}" if also else "")
    )


def _contenders(time_us: np.ndarray, top: int) -> np.ndarray | None:
    """Rows of one scored batch that can enter a top `top` of distinct times: those at or below the batch's own
    `top`-th smallest distinct time (every other row has `top` distinct faster times in the batch alone). All rows
    of each such time are kept, so top_distinct picks among ties as it would from the whole batch. None: keep
    every row (a small batch, or fewer than `top` distinct finite times among its fastest)."""
    n = time_us.size
    m = 8 * top
    if n <= 4 * m:
        return None
    fastest = np.unique(np.partition(time_us, m - 1)[:m])
    if fastest.size < top or not np.isfinite(fastest[top - 1]):
        return None
    return np.flatnonzero(time_us <= fastest[top - 1])


def estimate_rows(model, problem, chip, rows: Candidates) -> dict:
    """model.estimate over `rows`, ESTIMATE_ROWS at a time: the model's per-call work arrays (several KB per
    row) then stay bounded whatever the batch, and the records are the same row by row."""
    n = length(rows)
    if n <= ESTIMATE_ROWS:
        return model.estimate(problem, chip, rows)
    parts = [
        model.estimate(problem, chip, take(rows, slice(lo, lo + ESTIMATE_ROWS)))
        for lo in range(0, n, ESTIMATE_ROWS)
    ]
    return {k: np.concatenate([p[k] for p in parts]) for k in parts[0]}


def _incumbent(best_e: dict, top: int) -> float:
    """The time a candidate must beat to enter the top `top` (infinite until `top` are found)."""
    return float(best_e["time_us"][top - 1]) if best_e and length(best_e) >= top else np.inf


def _branch_and_bound(problem, chip, model, table: Candidates, domains: dict, score, incumbent) -> int:
    """Score the rows of `table` (expanded over the schedule knobs by `score`) in increasing lower bound,
    stopping when every remaining row's bound is above the incumbent. Returns how many rows got the full bound.

    Two bounds, both valid for every schedule: `quick_bound` (whole-kernel floors, cheap) orders all rows;
    `bound` (per-tile pipelines) is computed only where the quick bound is at most the incumbent: while there is
    none, for a first block of BNB_BLOCK rows in quick-bound order (enough to find one), then in one call for
    every row whose quick bound is at most it (the incumbent only falls, so no row left out can enter the top).
    A row is scored once its bound is below the quick bound of every row not yet bounded, so rows are scored in
    increasing bound overall, in few large batches (BNB_BATCH tilings first, BNB_GROWTH times more per round:
    at these sizes each call's fixed cost, not its rows, dominates), and the search ends when every bound left
    is above the incumbent. The result is that of scoring every row: a row is left out only when its bound,
    hence its time, is above the top-`top` time of the rows scored; a row whose bound equals it is still scored
    (it may tie exactly, and top_distinct's tie preference then decides as it would over every row).
    """
    n = length(table)
    quick = np.concatenate(
        [model.quick_bound(problem, chip, take(table, slice(lo, lo + CHUNK))) for lo in range(0, n, CHUNK)]
    )
    order = np.argsort(quick, kind="stable")
    pool_lb, pool_idx = np.empty(0), np.empty(0, dtype=np.int64)
    pos, bounded, batch = 0, 0, BNB_BATCH
    while True:
        q_next = quick[order[pos]] if pos < n else np.inf
        inc = incumbent()
        if pool_lb.size:  # rows whose bound is above the incumbent can never enter the top: drop them
            live = pool_lb <= inc
            if not live.all():
                pool_lb, pool_idx = pool_lb[live], pool_idx[live]
        if (pos >= n or q_next > inc) and pool_lb.size == 0:
            break  # every row left has a bound above the top-`top` time: none can enter it
        if pos < n and q_next <= inc and (pool_lb.size == 0 or pool_lb.min() > q_next):
            if np.isfinite(inc):  # every row whose quick bound is at most the incumbent, in one call
                stop = pos + int(np.searchsorted(quick[order[pos:]], inc, side="right"))
            else:
                stop = pos + BNB_BLOCK
            stop = min(max(stop, pos + 1), pos + CHUNK, n)
            idx = order[pos:stop]
            pos = stop
            full = model.bound(problem, chip, take(table, idx), domains)  # None: the quick bound alone
            lb = quick[idx] if full is None else np.maximum(quick[idx], full)
            bounded += idx.size
            keep = lb <= inc
            pool_lb, pool_idx = np.concatenate([pool_lb, lb[keep]]), np.concatenate([pool_idx, idx[keep]])
            continue
        ranked = np.argsort(pool_lb, kind="stable")
        first = ranked[:batch]
        first = first[pool_lb[first] <= q_next] if np.isfinite(q_next) else first
        if first.size == 0:
            first = ranked[:1]
        score(take(table, pool_idx[first]))
        keep = np.ones(pool_lb.size, dtype=bool)
        keep[first] = False
        pool_lb, pool_idx = pool_lb[keep], pool_idx[keep]
        batch = min(batch * BNB_GROWTH, CHUNK)
    return bounded


def _expand_in_bound_order(prefixes: Candidates, floor: np.ndarray, solve, incumbent, names) -> list[str]:
    """exhaustive's walk over first-level prefixes in increasing bound (`floor`): `solve` a first batch to find an
    incumbent, then only the prefixes whose floor is at most `incumbent()`; the note on those cut (`names`: the
    first level's knobs), if any."""
    order = np.argsort(floor, kind="stable")
    n = order.size
    batch = min(n, max(PREFIX_SEED, n // 50))  # the first batch: enough prefixes for a good incumbent
    rest = order
    while rest.size:
        solve(take(prefixes, rest[:batch]))
        rest = rest[batch:]
        # rest is in bound order: the prefixes whose floor is at most the incumbent come first (one whose
        # floor equals it may hold an exact tie that the tie preference ranks first)
        batch = min(PREFIX_BATCH, int(np.searchsorted(floor[rest], incumbent(), side="right")))
        if batch == 0:
            break
    if not rest.size:
        return []
    return [
        f"{rest.size} of {n} first-level prefixes ({', '.join(names)}) were cut "
        "by their bound before enumeration; the feasible count covers the others"
    ]


def exhaustive(problem: Problem, chip, space: Space, top: int = 5) -> SearchResult:
    """Proven-optimal search: level-wise enumeration, dominance, then branch and bound on the lower bound.

    With a model that bounds whole first-level prefixes (`prefix_bound`: a floor of quick_bound over every
    completion of a row of base sizes and split-K), prefixes are expanded in increasing bound: a first few to
    find an incumbent, then only those whose bound is at most it; the rest cannot enter the top `top`.
    """
    t0 = time.perf_counter()
    model = get_operator(space.op, space.family, space.target)
    sched_names = [k for k in model.SCHEDULE_KNOBS if k in space.knobs]
    sched = space.product(sched_names) if sched_names else {}
    # an operator with no schedule knobs still runs the branch and bound when it bounds its rows (its own
    # quick_bound): rows whose floor is above the top-`top` time are then never scored
    bounds_rows = type(model).quick_bound is not Operator.quick_bound
    n_sched = length(sched) if sched else 1
    best_c: Candidates = {}
    best_e: dict = {}
    evaluated = bounded = feasible = 0
    rejected: dict[str, int] = {}
    domains = space.domains()

    def incumbent() -> float:
        return _incumbent(best_e, top)

    def score(rows: Candidates):
        nonlocal best_c, best_e, evaluated
        if sched:
            # each tiling with every schedule, but the twins (of another schedule of the same tiling, mostly)
            full = product_rows(
                rows, sched, np.flatnonzero(~model.dominated_product(problem, chip, rows, sched, domains))
            )
        else:
            full = rows
        est = estimate_rows(model, problem, chip, full)
        evaluated += length(full)
        keep = _contenders(est["time_us"], top)  # only these can enter the top `top`: merge just them
        if keep is not None:
            full, est = take(full, keep), take(est, keep)
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
        if sched or bounds_rows:
            bounded += _branch_and_bound(
                problem, chip, model, table, space.domains(sched_names), score, incumbent
            )
        else:
            for lo in range(0, length(table), max(1, CHUNK // n_sched)):
                score(take(table, slice(lo, lo + max(1, CHUNK // n_sched))))

    notes = []
    levels = _levels(space, model)
    prefixes, first_rejected = first_level(problem, chip, space, model) if len(levels) > 1 else ({}, {})
    floor = model.prefix_bound(problem, chip, prefixes, domains) if length(prefixes) else None
    if floor is not None:
        rejected = first_rejected
        notes += _expand_in_bound_order(prefixes, floor, solve, incumbent, levels[0])
    else:
        solve(None)
    if not best_e:
        raise _no_feasible(space, rejected, model)
    return SearchResult(
        problem=problem,
        chip=chip,
        space=space,
        strategy="exhaustive",
        cands=best_c,
        est=best_e,
        evaluated=evaluated,
        bounded=bounded,
        space_size=space.size(),
        feasible=feasible * n_sched,
        rejected=rejected,
        proven_optimal=True,
        seed=None,
        elapsed_s=time.perf_counter() - t0,
        notes=notes,
    )
