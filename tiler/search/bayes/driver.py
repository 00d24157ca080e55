"""The run entry: check the arguments, open the study, optimise, and turn the study into a SearchResult."""

from __future__ import annotations

import math
import time

import numpy as np

from ...errors import InfeasibleError, SpaceError, TilerError
from ...progress import Progress
from ...space import Space
from .. import check_seed
from ..result import SearchResult
from .local import LocalSearch
from .loop import ESCAPE, _model_evals_notes, _Stop, optimize
from .objective import Objective, _objective
from .sampler import knob_sampler, make_sampler
from .starts import _enqueue_starts
from .study import _open_study, _share_study, default_study_name, open_storage

DEFAULT_TRIALS = 100
NEAR_BEST = 0.02  # guided mode reports the measurements within 2% of the best found


def check_timeout(timeout) -> float:
    """The measurement timeout in seconds: a finite number > 0, else TilerError."""
    try:
        t = float(timeout)
    except (TypeError, ValueError, OverflowError):
        t = math.nan
    if isinstance(timeout, bool) or not math.isfinite(t) or t <= 0:
        raise TilerError(f"measure_timeout: must be a finite number of seconds > 0, got {timeout!r}")
    return t


def run(
    problem,
    chip,
    space: Space,
    strategy: str = "tpe",
    top: int = 5,
    seed: int = 0,
    trials: int | None = None,
    storage=None,
    study_name: str | None = None,
    measure=None,
    measure_timeout: float = 120,
    warm_start: bool = False,
    guided: int = 0,
    diverse: bool = False,
    resolve: bool | None = None,
    inner: str | None = None,
    sampler_options: dict | None = None,
    ordinal: bool = False,
    conditional: bool = True,
    progress: bool = True,
    local: bool | None = None,
) -> SearchResult:
    """TPE or random search over `space` for one problem on one chip; returns the top distinct tilings found.

    resolve/inner: resolve the model's RESOLVED knobs in closed form / score every SCHEDULE_KNOBS combination
    per trial; None (default) means "yes when the objective is the model, no when it is a measurement".
    progress: a progress bar of the evaluated trials on stderr, drawn only when stderr is a terminal (False:
    never; a sweep draws its own).
    diverse: `guided` measures the model's diverse top-k (search.diverse_top: the best tiling of each distinct tile
    shape) first instead of its plain top-k.
    local: the model-guided local search between the sampler's trials (LocalSearch); None (default) means "on for
    tpe with the model as objective, off for random"; a measured objective refuses it (it scores candidates with
    the model, which is only right where the model is the objective).
    """
    import optuna

    t0 = time.perf_counter()
    trials, measure_timeout, seed = _check_run(strategy, trials, guided, measure_timeout, seed)
    obj, measure_id, use_local = _objective(
        problem, chip, space, strategy, measure, measure_timeout, resolve, inner, local, ordinal, conditional
    )
    measured = obj.measure_fn is not None
    signature = {
        "space": space.domains(),
        "profile": chip.profile_hash,
        "objective": measure_id or "model",
        "resolve": bool(obj.resolved),
        "inner": obj.inner,
        "ordinal": ordinal,
        "conditional": conditional,
        "warm": bool(warm_start),
        "guided": guided,
        **({"diverse": True} if guided and diverse else {}),
        "sampler": sampler_options or {},
        **({"local": True} if use_local else {}),
    }
    name = study_name or default_study_name(problem, chip, space, strategy, seed, signature)
    store = open_storage(storage)
    verbosity = optuna.logging.get_verbosity()
    optuna.logging.set_verbosity(optuna.logging.ERROR)
    bar = None
    try:
        obj.sampler = knob_sampler(make_sampler(strategy, seed, sampler_options), seed)
        study, old = _open_study(optuna, store, name, obj, problem, chip, space)
        lock = _share_study(optuna, store, study, name, obj, trials, measure_timeout)
        notes: list[str] = []
        if obj.evaluated:
            notes.append(f"resumed study {name!r}: {obj.evaluated} evaluated trials were already done")
        _enqueue_starts(study, obj, problem, chip, space, guided, diverse, warm_start, notes)
        cap = 10 * trials + 100 - len(old)
        local = LocalSearch(obj, seed) if use_local else None
        what = "measured" if measured else "model"
        idle = not progress or obj.evaluated >= trials or cap <= 0  # nothing will run: no bar
        bar = Progress(trials, f"{strategy} ({what})", min(obj.evaluated, trials), quiet=idle, unit="trial")
        stop = _Stop(obj, trials, bar, local, np.random.RandomState(seed))
        if obj.evaluated < trials and cap > 0:
            optimize(study, obj, cap, stop, lock)
            notes += stop.notes()
        notes += _model_evals_notes(study, obj, local, measured)
        all_trials = study.get_trials(deepcopy=False)
        notes += _explore_notes(all_trials)
    except KeyboardInterrupt:
        raise
    finally:
        if bar is not None:
            bar.close()
        if obj.claims is not None:
            obj.claims.close()
        optuna.logging.set_verbosity(verbosity)

    return _result(
        obj,
        all_trials,
        strategy=strategy,
        top=top,
        seed=seed,
        trials=trials,
        guided=guided,
        diverse=diverse,
        study=name,
        notes=notes,
        t0=t0,
    )


def _explore_notes(trials) -> list[str]:
    """The note on trials that took a random unseen feasible point after ESCAPE repeats in a row (none: no note)."""
    explored = sum(t.user_attrs.get("source") == "explore" for t in trials)
    if not explored:
        return []
    return [
        f"explore: {explored} trial{'s' if explored > 1 else ''} took a random unseen feasible point after "
        f"{ESCAPE} repeats in a row"
    ]


def _check_run(strategy: str, trials, guided: int, measure_timeout, seed) -> tuple[int, float, int]:
    """`run`'s strategy, trials, guided, timeout and seed checked, in that order: (trials, timeout, seed)."""
    if strategy not in ("tpe", "random"):
        raise SpaceError(f"strategy: bayes.run takes tpe or random, got {strategy!r}")
    trials = DEFAULT_TRIALS if trials is None else trials
    if isinstance(trials, bool) or not isinstance(trials, int | np.integer) or trials < 1:
        raise TilerError(f"trials: must be an integer >= 1, got {trials!r}")
    if guided < 0:
        raise TilerError(f"guided: must be >= 0, got {guided}")
    return trials, check_timeout(measure_timeout), check_seed(seed)


def _result(
    obj: Objective,
    all_trials,
    *,
    strategy: str,
    top: int,
    seed: int,
    trials: int,
    guided: int,
    study: str,
    diverse: bool = False,
    notes: list[str],
    t0: float,
) -> SearchResult:
    """The search result from a study's trials: the top distinct tilings (re-scored by the model, measured
    times beside them), the counts, and notes on what happened."""
    from optuna.trial import TrialState

    problem, chip, space, model = obj.problem, obj.chip, obj.space, obj.model
    measured = obj.measure_fn is not None

    done = [
        t
        for t in all_trials
        if t.state == TrialState.COMPLETE and "tiling" in t.user_attrs and "repeat_of" not in t.user_attrs
    ]
    pruned = [t for t in all_trials if t.state == TrialState.PRUNED and "infeasible" in t.user_attrs]
    failed = [t for t in all_trials if t.state == TrialState.FAIL and "error" in t.user_attrs]
    repeats = sum("repeat_of" in t.user_attrs for t in all_trials)
    rejected: dict[str, int] = {}
    for t in pruned:
        for r in t.user_attrs["infeasible"]:
            rejected[r] = rejected.get(r, 0) + 1
    if not done:
        parts = []
        if pruned:
            worst = max(rejected, key=rejected.get)
            text = model.RULE_TEXT.get(worst, worst)
            parts.append(f"{len(pruned)} infeasible (rule '{worst}': {text})")
        if failed:
            parts.append(f"{len(failed)} measurements failed (first: {failed[0].user_attrs['error']})")
        why = "; ".join(parts) or "no trial ran"
        raise InfeasibleError(f"{strategy}: no trial completed in study {study!r}: {why}")
    done.sort(key=lambda t: (t.value, t.number))
    seen: set[tuple] = set()
    best = []
    for t in done:
        key = tuple(t.user_attrs["tiling"][k] for k in space.names)
        if key not in seen:
            seen.add(key)
            best.append(t)
        if len(best) >= top:
            break
    cands = {k: np.array([t.user_attrs["tiling"][k] for t in best], dtype=np.int64) for k in space.names}
    est = model.estimate(problem, chip, cands)
    if measured:
        est = dict(est, measured_us=np.array([t.value for t in best], dtype=np.float64))
        notes.append(
            f"best measured {best[0].value:.3f} us; the model predicted "
            f"{best[0].user_attrs['predicted_us']:.3f} us for it"
        )
    evaluated = len(done) + len(failed)
    notes.append(
        f"{strategy}: {evaluated} evaluated trials (budget {trials}), {len(pruned)} infeasible points "
        f"pruned, {repeats} repeats answered from the study, {len(failed)} failed measurements"
    )
    if failed:
        notes.append(f"first failure (trial {failed[0].number}): {failed[0].user_attrs['error']}")
    if obj.resolved:
        notes.append(f"resolved in closed form (model.resolve): {', '.join(obj.resolved)}")
    if obj.inner:
        notes.append(
            f"scored every combination of {', '.join(obj.inner)} per trial (one vectorised model call)"
        )
    if guided and measured:
        bar = best[0].value * (1 + NEAR_BEST)
        near = sum(t.value <= bar for t in done)
        src = best[0].user_attrs.get("source") or "sampler"
        notes.append(
            f"guided: model {'diverse ' if diverse else ''}top-{guided} measured first; {near} of {len(done)} measurements within "
            f"{NEAR_BEST:.0%} of the best found (best from trial {best[0].number}, {src})"
        )
    return SearchResult(
        problem=problem,
        chip=chip,
        space=space,
        strategy=strategy,
        cands=cands,
        est=est,
        evaluated=evaluated,
        bounded=0,
        space_size=space.size(),
        feasible=len(done),
        rejected=rejected,
        proven_optimal=False,
        seed=seed,
        elapsed_s=time.perf_counter() - t0,
        notes=notes,
    )
