"""The objective of a trial: sample the knobs, prune what is infeasible, score with the model or a measurement."""

from __future__ import annotations

import json
import math

import numpy as np

from ...errors import TilerError
from ...operator import Operator, get_operator, known_ops
from ...space import Candidates, Space, product, take
from .sampler import GRID_ROWS, FeasibleGrid

INNER = ("none", "schedule", "grid")
DEFAULT_INNER = "grid"


def inner_knobs(space: Space, model: Operator, inner: str) -> list[str]:
    """The knobs scored exhaustively inside each trial instead of sampled (see INNER)."""
    if inner == "schedule":
        return [k for k in model.SCHEDULE_KNOBS if k in space.knobs]
    if inner == "grid":
        if not model.GRID_KNOBS:
            return inner_knobs(space, model, "schedule")
        return [k for k in space.names if k not in model.GRID_KNOBS]
    return []


class Objective:
    """Samples one tiling per trial, rejects infeasible ones, scores the rest with the model or a measurement."""

    def __init__(
        self,
        problem,
        chip,
        space: Space,
        model,
        measure_fn=None,
        resolve: bool = True,
        inner: str = "none",
        ordinal: bool = False,
        conditional: bool = True,
    ):
        self.ordinal, self.conditional = ordinal, conditional
        self.problem, self.chip, self.space, self.model = problem, chip, space, model
        self.measure_fn = measure_fn
        resolved = [k for k in model.RESOLVED if k in space.knobs] if resolve else []
        # resolve() fills all RESOLVED knobs together: only when the space has every one of them
        self.resolved = resolved if resolved and len(resolved) == len(model.RESOLVED) else []
        self.inner = [k for k in inner_knobs(space, model, inner) if k not in self.resolved]
        self.sampled = [k for k in space.names if k not in self.resolved and k not in self.inner]
        hint = [k for k in model.SAMPLE_ORDER if k in self.sampled]
        self.order = hint + [k for k in self.sampled if k not in hint]
        self.assume = {k: min(space.knobs[k].values) for k in self.resolved}
        self._allowed: dict = {}
        self.sched = space.product(self.inner) if self.inner else {}
        self.grid = self._feasible_grid() if conditional else None
        self.cache: dict[tuple, tuple[int, float | None, str]] = {}  # sampled params -> (trial, value, error)
        self.tilings: dict[
            tuple, tuple[float, dict]
        ] = {}  # evaluated key -> (value, full tiling): local search
        self.model_evals = 0  # candidates the model scored inside this process's trials
        self.scored = 0  # ... inside the last one
        self.evaluated = 0
        self.seen: set[int] = set()  # trial numbers already in the cache (this process's or loaded)
        self.refresh = None  # callable: load what other processes finished in a shared study (set by run)
        # callable(trial, key) -> None (evaluate it here), a trial number (another process is evaluating it) or
        # "budget" (the study's budget is spent): the claim on a shared study (set by run)
        self.claims = None  # tiler.search.claims.Claims of a shared SQLite study (set by run)
        self.budget = 0  # the evaluations the study may spend, all processes together (set by run)
        self.claimed: str | None = None  # the claim the running trial holds (finished by optimize)
        self.budget_spent = False
        self.sampler = None  # a KnobSampler, told each knob's cut set before it is suggested (set by run)

    # --- params <-> tiling
    def _feasible_grid(self) -> FeasibleGrid | None:
        """Every point of the sampled knobs' grid with at least one feasible completion, when the grid times the
        settings of the inner knobs that rules read is at most GRID_ROWS (None: too big, per-rule cuts only)."""
        names = list(self.sampled)  # keys in the order of `key()`
        if not names:
            return None
        ruled = {k for r, ks in self.model.RULES.items() for k in ks}
        inner = [k for k in self.inner if k in ruled]
        size = math.prod(len(self.space.knobs[k].values) for k in names)
        isize = math.prod(len(self.space.knobs[k].values) for k in inner)
        if size * isize > GRID_ROWS:
            return None
        grid = self.space.product(names)
        table = product(grid, self.space.product(inner)) if inner else dict(grid)
        n = size * isize
        for k, v in self.assume.items():
            table[k] = np.full(n, v, dtype=np.int64)
        rules = [r for r, ks in self.model.RULES.items() if set(ks) <= set(table)]
        masks = {
            r: np.broadcast_to(np.asarray(m, dtype=bool), (n,))
            for r, m in self.model.masks(self.problem, self.chip, table, rules).items()
        }
        ok = np.logical_and.reduce(list(masks.values())) if masks else np.ones(n, dtype=bool)
        rule_ok = {r: m.reshape(size, isize).any(axis=1) for r, m in masks.items()}
        return FeasibleGrid(names, grid, ok.reshape(size, isize).any(axis=1), rule_ok)

    def allowed(self, knob: str, row: dict[str, int]) -> tuple[tuple[int, ...], list[str]]:
        """The values of `knob` that leave the knobs already sampled (`row`) at least one feasible completion;
        the rules that cut the others. With the feasible grid: exactly the values of the feasible points that
        agree with `row` (no dead end is ever proposed). Without it (a grid too big to list): the values that pass
        every rule whose other knobs are already sampled (resolved knobs at their smallest value: the most
        permissive one for the capacity rules)."""
        kn = self.space.knobs[knob]
        if not self.conditional:
            return kn.values, []
        if self.grid is not None and knob in self.grid.names:
            key = (knob, tuple(sorted(row.items())))
            if key not in self._allowed:
                self._allowed[key] = self.grid.allowed(knob, row, kn.values)
            return self._allowed[key]
        known = set(row) | {knob} | set(self.assume)
        rules = [r for r, ks in self.model.RULES.items() if knob in ks and set(ks) <= known]
        if not rules:
            return kn.values, []
        key = (knob, tuple(sorted(row.items())))
        if key in self._allowed:
            return self._allowed[key]
        n = len(kn.values)
        table = {k: np.full(n, v, dtype=np.int64) for k, v in {**self.assume, **row}.items()}
        table[knob] = np.asarray(kn.values, dtype=np.int64)
        try:
            masks = self.model.masks(self.problem, self.chip, table, rules)
        except KeyError:  # a rule needs a knob not sampled yet: the final check catches it
            masks = {}
        ok = (
            np.logical_and.reduce([np.asarray(m, dtype=bool) for m in masks.values()])
            if masks
            else np.ones(n, bool)
        )
        out = (
            tuple(v for v, o in zip(kn.values, ok, strict=True) if o),
            [r for r, m in masks.items() if not np.all(m)],
        )
        self._allowed[key] = out
        return out

    def param(self, knob: str, allowed: tuple[int, ...]) -> tuple[str, tuple, bool, tuple]:
        """(optuna name, choices, ordinal, allowed params) for `knob`: one name and one distribution per knob
        (its whole domain, as optuna needs one distribution per name); `allowed` (the cut set) becomes the
        param values the sampler may propose (labels, or indices into the choices when ordinal)."""
        kn = self.space.knobs[knob]
        choices = tuple(kn.label(v) for v in kn.values)
        ordinal = self.ordinal and not kn.labels and len(choices) > 2
        ok = tuple(choices.index(kn.label(v)) if ordinal else kn.label(v) for v in allowed)
        return knob, choices, ordinal, ok

    def walk(self, row: dict[str, int] | None, trial=None) -> tuple[dict[str, int] | None, dict, list[str]]:
        """Sample (trial given) or re-trace (row given) the knobs in order; returns (row, params, dead-end rules)."""
        out: dict[str, int] = {}
        params = {}
        for k in self.order:
            allowed, cut = self.allowed(k, out)
            if not allowed:
                return None, params, cut
            name, choices, ordinal, ok = self.param(k, allowed)
            if trial is not None:
                if self.sampler is not None:
                    self.sampler.restrict(name, ok)
                if ordinal:  # an index into the sorted values: TPE's kernel spreads to the neighbours
                    v = choices[trial.suggest_int(name, 0, len(choices) - 1)]
                else:
                    v = trial.suggest_categorical(name, choices)
                out[k] = self.space.knobs[k].parse(v)
                if out[k] not in allowed:  # another sampler (or an enqueued point) proposed a cut value
                    params[name] = choices.index(v) if ordinal else v
                    return None, params, cut
            else:
                if int(row[k]) not in allowed:
                    return None, params, cut
                out[k] = int(row[k])
                v = self.space.knobs[k].label(out[k])
            params[name] = choices.index(v) if ordinal else v
        return out, params, []

    def unseen(self, rng) -> dict | None:
        """The params of a random feasible grid point not evaluated yet (None: no feasible grid, or all seen)."""
        if self.grid is None:
            return None
        left = sorted(k for k in self.grid.keys if k not in self.cache)
        while left:
            i = rng.randint(len(left))
            p = self.params(dict(zip(self.sampled, left.pop(i), strict=True)))
            if p is not None:
                return p
        return None

    def exhausted(self) -> bool:
        """Whether every point of the feasible grid has been evaluated (False without a feasible grid)."""
        if self.grid is None or len(self.cache) < len(self.grid):
            return False
        return self.grid.keys <= self.cache.keys()

    def key(self, tiling: dict) -> tuple:
        """What identifies an evaluation: the sampled knobs' codes (the rest is scored or resolved from them)."""
        return tuple(int(tiling[k]) for k in self.sampled)

    def label(self, tiling: dict[str, int]) -> str:
        """The tiling as text for the study's user attribute `tiling_label`: `base_m=128 ... core_split=block`."""
        return " ".join(f"{k}={self.space.knobs[k].label(int(tiling[k]))}" for k in self.space.names)

    def params(self, row: dict) -> dict | None:
        """The optuna params that sample `row` (for enqueue_trial); None if the sampler could not reach it."""
        got, params, _ = self.walk(row)
        return params if got is not None else None

    def complete(self, row: dict[str, int]) -> Candidates:
        """The sampled knobs as a candidate table: inner knobs expanded (every combination), resolved knobs filled."""
        cand = {k: np.array([row[k]], dtype=np.int64) for k in self.sampled}
        if self.sched:
            cand = product(cand, self.sched)
        if self.resolved:
            cand = self.model.resolve(self.problem, self.chip, cand, self.space.domains(self.resolved))
        return {k: cand[k] for k in self.space.names}

    def feasible_rows(self, cand: Candidates) -> tuple[Candidates, list[str]]:
        """The rows that pass every rule, without provably dominated ones; if none, the rules that cut them."""
        masks = self.model.masks(self.problem, self.chip, cand)
        ok = np.logical_and.reduce([np.asarray(m, dtype=bool) for m in masks.values()]) if masks else None
        if ok is None:
            return cand, []
        if not ok.any():
            cut = [r for r, m in masks.items() if not np.any(m)] or [
                r for r, m in masks.items() if not np.all(m)
            ]
            return {}, cut
        cand = take(cand, ok)
        if len(ok) > 1:
            keep = ~np.asarray(
                self.model.dominated(self.problem, self.chip, cand, self.space.domains()), dtype=bool
            )
            if keep.any():
                cand = take(cand, keep)
        return cand, []

    def score(self, cand: Candidates) -> tuple[dict[str, int], dict]:
        """The best row of `cand` by the model: (tiling codes, estimate row)."""
        est = self.model.estimate(self.problem, self.chip, cand)
        self.scored = len(est["time_us"])
        self.model_evals += self.scored
        i = int(np.argmin(est["time_us"]))
        row = {k: (v[i].item() if hasattr(v[i], "item") else v[i]) for k, v in est.items()}
        return {k: int(cand[k][i]) for k in self.space.names}, row

    # --- the trial
    def __call__(self, trial) -> float:
        import optuna

        row, _, cut = self.walk(None, trial)
        if row is None:
            trial.set_user_attr("infeasible", cut)
            raise optuna.TrialPruned("infeasible: " + ", ".join(cut))
        key = self.key(row)
        self.claimed = None
        if self.claims is not None and key not in self.cache:  # a shared study: claim the tiling first
            from ..claims import BUDGET, DONE

            text = json.dumps(list(key))
            verdict = self.claims.claim(text, trial.number, self.budget)
            if verdict is None:
                self.claimed = text
            elif verdict[0] == BUDGET:
                self.budget_spent = True
                raise optuna.TrialPruned(
                    f"the study's budget is spent: {verdict[1]} evaluations by all processes"
                )
            else:
                if verdict[0] == DONE:
                    self.refresh()  # another process evaluated it: read its result from the study
                if key not in self.cache:  # still being evaluated (or told a moment from now): free
                    trial.set_user_attr("repeat_of", verdict[1])
                    raise optuna.TrialPruned(f"trial {verdict[1]} of another process evaluates this tiling")
        elif key not in self.cache and self.measure_fn is not None and self.refresh is not None:
            self.refresh()  # another process on this study may have measured it meanwhile
        if key in self.cache:  # a tiling already evaluated: answer from the study, never re-measure
            number, value, error = self.cache[key]
            trial.set_user_attr("repeat_of", number)
            if value is None:
                trial.set_user_attr("error", error)
                raise optuna.TrialPruned(f"repeat of failed trial {number}")
            return value
        cand, bad = self.feasible_rows(self.complete(row))
        if bad:
            trial.set_user_attr("infeasible", bad)
            raise optuna.TrialPruned("infeasible: " + ", ".join(bad))
        tiling, est_row = self.score(cand)
        self.evaluated += 1
        self.seen.add(trial.number)
        attrs = {
            "tiling": tiling,
            "tiling_label": self.label(tiling),
            "predicted_us": float(est_row["time_us"]),
            "bound": str(est_row["bound"]),
        }
        if self.measure_fn is None:
            attrs["model_evals"] = self.scored
            for k, v in attrs.items():
                trial.set_user_attr(k, v)
            self.cache[key] = (trial.number, attrs["predicted_us"], "")
            self.tilings[key] = (attrs["predicted_us"], tiling)
            return attrs["predicted_us"]
        from ...export import tiling_document
        from ...runners.external import MeasureError

        doc = tiling_document(
            self.problem,
            self.chip,
            self.space.decode({k: np.array([v]) for k, v in tiling.items()}, 0),
            est_row,
            {"strategy": "measure", "evaluated": 1, "seed": None, "proven_optimal": False},
        )
        try:
            us = float(self.measure_fn(doc))
        except TilerError as exc:
            err = str(exc) or type(exc).__name__
            attrs["error"] = err
            for k, v in attrs.items():
                trial.set_user_attr(k, v)
            self.cache[key] = (trial.number, None, err)
            raise exc if isinstance(exc, MeasureError) else MeasureError(err) from exc
        attrs["measured_us"] = us
        for k, v in attrs.items():
            trial.set_user_attr(k, v)
        self.cache[key] = (trial.number, us, "")
        self.tilings[key] = (us, tiling)
        return us

    def load(self, trials) -> None:
        """Rebuild the repeat cache and the evaluated count from a resumed study."""
        from optuna.trial import TrialState

        for t in trials:
            if t.number in self.seen or "tiling" not in t.user_attrs or "repeat_of" in t.user_attrs:
                continue
            try:
                key = self.key(t.user_attrs["tiling"])
            except (KeyError, TypeError, ValueError):  # over other knobs (refused before: cannot happen)
                continue
            if t.state == TrialState.COMPLETE and t.value is not None:
                self.cache[key] = (t.number, float(t.value), "")
                self.tilings[key] = (float(t.value), dict(t.user_attrs["tiling"]))
                self.evaluated += 1
                self.seen.add(t.number)
            elif t.state == TrialState.FAIL and "error" in t.user_attrs:
                self.cache[key] = (t.number, None, str(t.user_attrs["error"]))
                self.evaluated += 1
                self.seen.add(t.number)


# ------------------------------------------------------------------ entry point


def _measure_fn(measure, timeout: float, model: Operator):
    """The measurement callable for --measure: a command template holding {tiling}, the name of one of the
    operator's runners (`triton`), or a Python callable(doc) -> us."""
    if measure is None:
        return None, None
    from ...runners import external

    if callable(measure):
        return measure, getattr(measure, "__qualname__", repr(measure))
    if isinstance(measure, str) and measure.strip() in model.RUNNERS:
        return model.runner(measure.strip()), measure.strip()
    if isinstance(measure, str) and external.PLACEHOLDER not in measure and " " not in measure.strip():
        name = measure.strip()
        elsewhere = [f for o, f in known_ops() if o == model.OP and name in get_operator(o, f).RUNNERS]
        if elsewhere:
            raise TilerError(
                f"measure {name}: runs {model.OP} on the {' or '.join(elsewhere)} family, not {model.FAMILY}"
            )
        runners = ", ".join(model.RUNNERS) or "none"
        raise TilerError(
            f"measure: {measure!r} is not a runner of {model.OP} on the {model.FAMILY} family (runners: "
            f"{runners}) nor a command holding {external.PLACEHOLDER}"
        )
    external.check_template(measure)
    return (lambda doc: external.measure(measure, doc, timeout)), measure


def _objective(
    problem,
    chip,
    space: Space,
    strategy,
    measure,
    measure_timeout,
    resolve,
    inner,
    local,
    ordinal,
    conditional,
) -> tuple[Objective, str | None, bool]:
    """The trials' Objective with `run`'s defaults filled in (resolve, inner and local follow whether the objective
    is the model or a measurement): (objective, the measurement's id or None, whether the local search runs)."""
    model = get_operator(space.op, space.family, space.target)
    measure_fn, measure_id = _measure_fn(measure, measure_timeout, model)
    measured = measure_fn is not None
    resolve = (not measured) if resolve is None else resolve
    inner = ("none" if measured else DEFAULT_INNER) if inner is None else inner
    use_local = (strategy == "tpe" and not measured) if local is None else bool(local)
    if use_local and measured:
        raise TilerError(
            "local: the model-guided local search needs the model as objective, not a measurement"
        )
    if inner not in INNER:
        raise TilerError(f"inner: must be one of {', '.join(INNER)}, got {inner!r}")
    obj = Objective(
        problem,
        chip,
        space,
        model,
        measure_fn,
        resolve=resolve,
        inner=inner,
        ordinal=ordinal,
        conditional=conditional,
    )
    return obj, measure_id, use_local
