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
    gains = []
    for knob, (item, values) in model.WHAT_IF.items():
        if knob not in cand:
            continue
        cur = int(cand[knob][0])
        alts = [v for v in values if v != cur]
        if not alts:
            continue
        trial = {k: np.repeat(v, len(alts)) for k, v in cand.items()}
        trial[knob] = np.array(alts, dtype=np.int64)
        ok = np.logical_and.reduce(list(model.masks(problem, chip, trial).values()))
        if not ok.any():
            continue
        t = model.estimate(problem, chip, {k: v[ok] for k, v in trial.items()})["time_us"]
        i = int(np.argmin(t))
        gain = 1.0 - float(t[i]) / base
        if gain >= min_gain:
            label = (
                space.knobs[knob].label(np.array(alts)[ok][i])
                if knob in space.knobs
                else np.array(alts)[ok][i]
            )
            gains.append(
                (gain, f"{item}: {knob}={label} predicts -{gain:.0%} ({base:.1f} -> {float(t[i]):.1f} us)")
            )
    lines += [text for _, text in sorted(gains, reverse=True)]
    lines += model.advice(problem, chip, cand, est, 0)
    return lines
