"""Advice: which items of the optimisation checklist (MISSION §4) apply to one tiling, with predicted gains.

The operator supplies the checklist line per bound (CHECKLIST), the knobs worth flipping (WHAT_IF) and its own
static facts (`Operator.advice`). Each what-if flips one knob of the given tiling, re-scores it with the same
model and reports the change, so every line carries a number the model computed, not a rule of thumb.
"""

from __future__ import annotations

import numpy as np

from .operator import get_operator
from .space import Candidates, Space


def advice(problem, chip, space: Space, cand: Candidates, est: dict, min_gain: float = 0.02) -> list[str]:
    """Lines naming the checklist items that apply to candidate 0 of `cand`, best predicted gain first."""
    model = get_operator(space.op, space.family, space.target)
    base = float(est["time_us"][0])
    bound = str(est["bound"][0])
    lines = [f"bound {bound}: {model.CHECKLIST.get(bound, '')}".rstrip(": ")]
    # every what-if flip of every knob in one table: one mask and one estimate call (a call's fixed cost, not
    # its rows, dominates on a handful of rows); each knob's best feasible flip is read from its own rows
    flips = [(knob, item, [v for v in values if v != int(cand[knob][0])]) for knob, (item, values) in
             model.WHAT_IF.items() if knob in cand]  # fmt: skip
    flips = [(knob, item, alts) for knob, item, alts in flips if alts]
    if not flips:
        return lines + model.advice(problem, chip, cand, est, 0)
    sizes = [len(alts) for _, _, alts in flips]
    trial = {k: np.repeat(v, sum(sizes)) for k, v in cand.items()}
    owner = np.repeat(np.arange(len(flips)), sizes)
    for i, (knob, _, alts) in enumerate(flips):
        trial[knob] = trial[knob].copy()
        trial[knob][owner == i] = alts
    ok = np.logical_and.reduce(
        [np.broadcast_to(m, owner.shape) for m in model.masks(problem, chip, trial).values()]
    )
    t = np.full(owner.shape, np.inf)
    if ok.any():
        t[ok] = model.estimate(problem, chip, {k: v[ok] for k, v in trial.items()})["time_us"]
    gains = []
    for i, (knob, item, _) in enumerate(flips):
        mine = np.flatnonzero((owner == i) & ok)
        if not mine.size:
            continue
        j = mine[int(np.argmin(t[mine]))]
        gain = 1.0 - float(t[j]) / base
        if gain >= min_gain:
            value = trial[knob][j]
            label = space.knobs[knob].label(value) if knob in space.knobs else value
            gains.append(
                (gain, f"{item}: {knob}={label} predicts -{gain:.0%} ({base:.1f} -> {float(t[j]):.1f} us)")
            )
    lines += [text for _, text in sorted(gains, reverse=True)]
    lines += model.advice(problem, chip, cand, est, 0)
    return lines
