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
