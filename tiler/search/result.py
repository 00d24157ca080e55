"""The result every search strategy returns, and the top-N rule they share."""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from ..problem import Problem
from ..space import Candidates, Space


@dataclass(kw_only=True)
class SearchResult:
    """Best tilings (ascending time), their estimates, and how the search got there (built by keyword)."""

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


# The diverse top-k looks for its k distinct shapes among the model's top DIVERSE_FACTOR * k (at most DIVERSE_MAX)
DIVERSE_FACTOR = 8
DIVERSE_MAX = 1000
# The place (0-based) of the hedge in the diverse order: after the best three distinct tiles
HEDGE_SLOT = 3
# The pipeline-depth hedge (operators with a DEPTH_KNOB): the shallowest depth among the tilings of the best
# HEDGE_TILES tiles predicted within HEDGE_GAP of the best time. It covers the model's known over-pricing of a
# shallow pipeline that already hides the latency (H200: 3.4-4.5 % on large GEMMs, docs/model_cuda.md 6d); 0.08
# was chosen on the fit shapes only (0.03 to 0.12 compared, docs/search.md "Diverse top-k")
HEDGE_GAP = 0.08
HEDGE_TILES = 2


def diverse_order(
    cands: Candidates, time_us: np.ndarray, shape_knobs, depth_knob: str = "", hedge_gap: float = HEDGE_GAP
) -> tuple[np.ndarray, np.ndarray]:
    """The diverse order of candidates already ranked best first, and each row's predicted gap to the best (its
    time over the fastest time, >= 1): the best of each distinct tile shape (the values of `shape_knobs`, the
    operator's SHAPE_KNOBS) in predicted order, with one hedge moved to place HEDGE_SLOT (or right after the
    shapes if fewer), then the rest in predicted order.

    Tilings of one shape that differ only in a pipeline depth or a schedule run within a few percent of each other
    on the hardware: measuring several teaches little, so the list spreads over tile shapes. But what the model
    resolves least well is exactly that pipeline depth (H200: docs/model_cuda.md 6d-6e: a shallower pipeline that
    already hides the latency is priced a few percent too slow, and the stage twins differ by the power-capped
    clock), so the 4th measurement is a hedge on it: with a `depth_knob` in `cands`, the tiling of the best
    HEDGE_TILES tiles with the fewest stages (then the fastest) among those predicted within `hedge_gap` of the
    best and not already listed; otherwise (no depth knob, none within the gap) the best tile's second-best tiling,
    its runner-up. docs/search.md, "Diverse top-k", gives the measured comparison. With no shape knobs (or none in
    `cands`) the order is the plain ranking.
    """
    t = np.asarray(time_us, dtype=np.float64)
    n = t.size
    keys = [np.asarray(cands[k]) for k in shape_knobs if k in cands]
    if keys and n:
        key = np.stack(keys, axis=1)
        _, first = np.unique(key, axis=0, return_index=True)
        first.sort()  # each shape's best tiling, in predicted order
        lead = np.zeros(n, dtype=bool)
        lead[first] = True
        order = np.concatenate([first, np.nonzero(~lead)[0]])
        slot = min(HEDGE_SLOT, first.size)
        hedge = _depth_hedge(cands, t, key, first, slot, depth_knob, hedge_gap)
        if hedge is None:
            twins = np.flatnonzero((key == key[0]).all(axis=1))  # the best tile's tilings, best first
            hedge = int(twins[1]) if twins.size > 1 else None
        if hedge is not None:
            order = np.insert(order[order != hedge], slot, hedge)
    else:
        order = np.arange(n)
    best = t.min() if n else 1.0
    gap = t / best if best > 0 else np.ones(n)
    return order, gap[order]


def _depth_hedge(cands, t, key, first, slot, depth_knob, hedge_gap) -> int | None:
    """The row of the pipeline-depth hedge (diverse_order), None when there is none: the fewest `depth_knob`
    (then the fastest) among the best HEDGE_TILES tiles' rows within `hedge_gap` of the best, other than the
    shapes' best rows already placed before `slot`."""
    if not depth_knob or depth_knob not in cands:
        return None
    ok = (key[:, None, :] == key[first[:HEDGE_TILES]][None, :, :]).all(axis=2).any(axis=1)
    ok &= t <= t.min() * (1.0 + hedge_gap)
    ok[first[:slot]] = False
    rows = np.flatnonzero(ok)
    if not rows.size:
        return None
    return int(rows[np.lexsort((t[rows], np.asarray(cands[depth_knob])[rows]))[0]])
