"""Starting points: the model's top tilings (guided) and the operator's known-good tiling, tried first."""

from __future__ import annotations

from ...space import Space
from ..proven import exhaustive
from .objective import Objective


def _warm_row(obj: Objective, problem, chip) -> tuple[dict | None, str]:
    """The operator's known-good tiling as sampled params, or None and why it was skipped."""
    default = obj.model.warm_start(problem, chip)
    if not default:
        return None, f"warm start: no known-good tiling for {obj.space.op} on the {chip.family} family"
    row = {}
    for k, kn in obj.space.knobs.items():
        if k in default:
            v = default[k]
            code = (
                (kn.codes[kn.labels.index(v)] if kn.labels and v in kn.labels else kn.values[0])
                if isinstance(v, str)
                else int(v)
            )
            if code not in kn.values:  # pinned elsewhere or outside a custom domain: nearest allowed value
                code = min(kn.values, key=lambda v, c=code: (abs(v - c), v))
            row[k] = code
        else:
            row[k] = kn.values[0]
    _, bad = obj.feasible_rows(obj.complete({k: row[k] for k in obj.sampled}))
    if bad:
        return None, f"warm start: the known-good default is infeasible here ({', '.join(bad)}), skipped"
    return obj.params(row), ""


def _enqueue_starts(
    study, obj: Objective, problem, chip, space: Space, guided, diverse, warm_start, notes
) -> None:
    """Enqueue the known-good and model-ranked starting points (once: skip_if_exists), evaluated first: the model's
    top `guided` (diverse: its diverse top-k) and, with `warm_start`, the operator's warm start (or a note why
    not)."""
    guided_params: list[dict] = []
    if guided:
        if diverse:
            from .. import diverse_top

            ex = diverse_top(problem, chip, space, guided)
        else:
            ex = exhaustive(problem, chip, space, top=guided)
        for i in range(len(ex.est["time_us"])):
            p = obj.params({k: int(ex.cands[k][i]) for k in space.names})
            if p is not None and p not in guided_params:
                guided_params.append(p)
        for p in guided_params:
            study.enqueue_trial(p, user_attrs={"source": "guided"}, skip_if_exists=True)
    if warm_start:
        p, why = _warm_row(obj, problem, chip)
        if p is None:
            notes.append(why)
        else:
            study.enqueue_trial(p, user_attrs={"source": "warm_start"}, skip_if_exists=True)
