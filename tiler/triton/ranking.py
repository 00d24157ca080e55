"""The user's configs ranked by the model for one problem (rank_configs, through tiler.rank)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from ..errors import TilerError
from .load import _implicit, load_user_space
from .user_space import FAMILY, LAUNCH, UserSpace, _column

# ------------------------------------------------------------------------------------------------- ranking


@dataclass(frozen=True)
class RankedConfig:
    """One user config as the model ranks it: `index` in the list given, the `config` as given, its `params` in
    the user's names, its `tiling` in the model's (knob -> value or label), the predicted time (inf when
    infeasible), its `rank` (1 = fastest, ties share; None when infeasible), the bound, and why it is infeasible
    (`reason`, "" when feasible)."""

    index: int
    config: Any
    params: dict
    tiling: dict
    predicted_us: float
    rank: int | None
    bound: str = ""
    reason: str = ""

    @property
    def feasible(self) -> bool:
        return not self.reason


def _as_dict(cfg, fill: dict | None = None) -> dict:
    """A config (a dict in the user's names, a dict of triton.Config arguments, or a triton.Config-like object with
    `.kwargs` and launch-option attributes) as param -> value; `fill` gives params a config does not carry (the
    launch's own keyword arguments)."""
    if isinstance(cfg, dict):
        if isinstance(cfg.get("kwargs"), dict):
            out = {**cfg["kwargs"], **{k: v for k, v in cfg.items() if k != "kwargs"}}
        else:
            out = dict(cfg)
    elif isinstance(getattr(cfg, "kwargs", None), dict):
        out = dict(cfg.kwargs)
        for opt in LAUNCH:
            v = getattr(cfg, opt, None)
            if v is not None:
                out[opt] = v
    else:
        raise TilerError(
            f"configs: each config must be a dict or a triton.Config (with .kwargs), got {type(cfg).__name__}"
        )
    return {**(fill or {}), **out}


def _columns_of(us: UserSpace, dicts: list[dict]) -> dict[str, np.ndarray]:
    """Configs (param -> value dicts) as param columns for `us`; an unknown or a missing param is one line naming
    the config (0-based, in the list given)."""
    for i, d in enumerate(dicts):
        extra = [p for p in d if p not in us.params and p not in LAUNCH]
        if extra:
            raise TilerError(
                f"configs: config {i}: {extra[0]!r} is not a param of the space; params: {', '.join(us.params)}"
            )
        lacking = [p for p in us.params if p not in d]
        if lacking:
            raise TilerError(
                f"configs: config {i}: lacks the param {lacking[0]!r} (params: {', '.join(us.params)})"
            )
    return {p: _column([d[p] for d in dicts]) for p in us.params}


def _launch_params(us: UserSpace, dicts: list[dict]) -> UserSpace:
    """`us` with the launch options the configs carry but the space sets by a default (a triton.Config always has
    them, and they are what runs) as params."""
    from dataclasses import replace

    extra = [o for o in LAUNCH if o not in us.params and any(o in d for d in dicts)]
    if not extra:
        return us
    params = {**us.params, **{o: (1,) for o in extra}}
    key_map = dict(us.key_map)
    defaults = dict(us.defaults)
    passthrough = list(us.passthrough)
    for o in extra:
        if o in us.model_space.knobs:
            key_map[o] = o
            defaults.pop(o, None)
        else:
            passthrough.append(o)
    return replace(us, params=params, key_map=key_map, defaults=defaults, passthrough=tuple(passthrough))


def _rank_table(problem, chip, us: UserSpace, cols: dict[str, np.ndarray], what: str = ""):
    """(ranked, rejected) of tiler.rank.rank_candidates for configs given as param columns: every row's knob columns
    and `row` (1-based position in `cols`); ranked best first with predicted_us, bound, rank. `what` starts the
    line of a value outside a knob's domain (UserSpace.knob_columns)."""
    import pandas as pd

    from ..rank import rank_candidates

    knobs = us.knob_columns(cols, what)
    return rank_candidates(problem, chip, pd.DataFrame(knobs), us.model_space)


def _score(problem, chip, us: UserSpace, cols: dict[str, np.ndarray], what: str = ""):
    """tiler.rank.score_columns of configs given as param columns (their model knob columns through the key map
    and defaults; `what` starts the line of a value outside a knob's domain, UserSpace.knob_columns): the
    numpy core of `tiler rank`, without its table (the pruner runs once per autotune key, inside the launch)."""
    from ..rank import domain_reason, outside_domain, score_columns

    space = us.model_space
    knobs = us.knob_columns(cols, what)
    n = len(next(iter(knobs.values()))) if knobs else 0
    ok = np.ones(n, dtype=bool)
    why = [""] * n
    # knob_columns parsed each code in its domain: checked again as tiler rank does
    for k, col in knobs.items():
        out = outside_domain(space.knobs[k], col.astype(np.float64)) & ok
        for i in np.flatnonzero(out):
            why[i] = domain_reason(space.knobs[k], col[i])
        ok &= ~out
    model = us.operator
    model.admit(problem, chip)
    return knobs, score_columns(problem, chip, model, knobs, ok, why)


def _problem(op, chip, shape, us: UserSpace, dtype):
    """(chip, problem) of a call: the chip loaded and of the cuda family, the shape merged with the space's fixed
    problem fields (the shape wins), the dtype given, else the space's."""
    from ..api import _chip
    from ..problem import parse_problem, parse_shape_text

    chip = _chip(chip)
    if chip.family != FAMILY:
        raise TilerError(
            f"chip: {chip.id} is of the {chip.family} family; a Triton kernel's space is ranked on a {FAMILY} chip"
        )
    fields_ = parse_shape_text(shape) if isinstance(shape, str) else dict(shape)
    if op != us.op:
        raise TilerError(f"op: the space is for {us.op}, got {op!r}")
    problem = parse_problem(op, {**us.problem, **fields_}, dtype or us.dtype)
    us.operator.admit(problem, chip)
    return chip, problem


def rank_configs(configs, op: str, chip, shape, space=None, dtype: str | None = None) -> list[RankedConfig]:
    """The model's predicted time of each of the user's configs for one problem, best first, infeasible ones last
    (in the order given) with the rule that rejects them.

    configs: dicts in the user's names (the space's params; launch options by their own names), dicts of a
    triton.Config's arguments ({"kwargs": {...}, launch options}), or triton.Config-like objects (`.kwargs` and
    the launch options as attributes; a Config's launch options are always read, being what runs). op: the
    operator; chip: a cuda chip id or a loaded chip; shape: `K=V,...` text or a dict; space: a UserSpace, a TOML
    path or a dict (None: each name read as a knob, an alias or a launch option, with the built-in defaults);
    dtype: the operands' dtype (default: the space's, else fp16).

    The configs become the model's knob columns (key map and defaults) and go through tiler.rank.rank_candidates,
    the code `tiler rank` runs: one vectorised estimate, the capacity rules, ties in the model's preferred order.
    """
    dicts = [_as_dict(c) for c in configs]
    if not dicts:
        raise TilerError("configs: empty; give at least one config")
    us = load_user_space(space) if space is not None else _implicit(op, {k: 0 for d in dicts for k in d})
    us = _launch_params(us, dicts)
    chip, problem = _problem(op, chip, shape, us, dtype)
    return _ranked_configs(problem, chip, us, configs, dicts)


def _ranked_configs(problem, chip, us: UserSpace, configs, dicts) -> list[RankedConfig]:
    knobs, scored = _score(problem, chip, us, _columns_of(us, dicts), "configs")
    space = us.model_space
    labels = {k: [space.knobs[k].label(v) for v in col.tolist()] for k, col in knobs.items()}

    def config(i: int, *scored_) -> RankedConfig:
        return RankedConfig(i, configs[i], dicts[i], {k: labels[k][i] for k in space.names}, *scored_)

    feasible = np.flatnonzero(scored.ok)
    bound = scored.estimate.get("bound")
    out = [
        config(
            int(feasible[j]),
            float(scored.estimate["time_us"][j]),
            int(scored.rank[j]),
            str(bound[j]) if bound is not None else "",
        )
        for j in scored.order.tolist()
    ]
    out += [
        config(int(i), float("inf"), None, "", f"{scored.rule[i]}: {scored.reason[i]}")
        for i in np.flatnonzero(~scored.ok).tolist()
    ]
    return out


def _order(us: UserSpace, ranked: list[RankedConfig], diverse: bool) -> list[RankedConfig]:
    """The feasible configs best first, or in the diverse order (tiler.search.result.diverse_order: the best of
    each distinct tile shape of the operator's SHAPE_KNOBS first, a hedge on its DEPTH_KNOB 4th, then the rest)."""
    good = [r for r in ranked if r.feasible]
    if not diverse or not good:
        return good
    from ..search.result import diverse_order

    model = us.operator
    keys = [k for k in (*model.SHAPE_KNOBS, model.DEPTH_KNOB) if k]
    space = us.model_space
    cands = {k: np.array([space.knobs[k].parse(str(r.tiling[k])) for r in good]) for k in keys}
    order, _ = diverse_order(
        cands, np.array([r.predicted_us for r in good]), model.SHAPE_KNOBS, model.DEPTH_KNOB
    )
    return [good[i] for i in order]
