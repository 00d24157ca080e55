"""The optimisation loop and its stop rules: ask and tell trials until the budget, a stall or the timeout."""

from __future__ import annotations

import contextlib
import math
import warnings

from .objective import Objective

ESCAPE = 10  # repeats in a row after which a random unseen feasible point is enqueued
STALL = 100  # proposals in a row without a new evaluation after which the search stops (converged)


class _Stop:
    """optuna's callback after each trial: counts the budget (other processes' trials too), draws the progress bar,
    enqueues the local search's proposal or, after ESCAPE repeats in a row, a random unseen point, and stops the
    study when the budget is spent, every feasible point is evaluated or the sampler has stalled (STALL)."""

    def __init__(self, obj: Objective, trials: int, bar, local, explore):
        self.obj, self.trials, self.bar, self.local, self.explore = obj, trials, bar, local, explore
        self.since, self.last, self.hit, self.all = 0, obj.evaluated, False, False
        self.best = min((v for _, v, _ in obj.cache.values() if v is not None), default=math.inf)
        if self.best < math.inf:
            bar.note(f"best {self.best:.3f} us")

    def __call__(self, st, trial) -> bool:
        obj, trials, bar = self.obj, self.trials, self.bar
        if obj.refresh is not None and obj.claims is None:
            obj.refresh()  # the budget is per study: count what other processes evaluated (claims count it)
        if trial.value is not None and trial.value < self.best:
            self.best = trial.value
            bar.note(f"best {self.best:.3f} us")
        bar.update(min(obj.evaluated, trials) - bar.done)
        if self.local is not None and obj.evaluated < trials:
            nxt = self.local.propose()
            if nxt is not None:
                st.enqueue_trial(nxt[0], user_attrs=nxt[1])
        self.since = 0 if obj.evaluated > self.last else self.since + 1
        self.last = obj.evaluated
        if self.since and self.since % ESCAPE == 0 and obj.evaluated < trials:
            p = obj.unseen(self.explore)
            if p is not None:
                st.enqueue_trial(p, user_attrs={"source": "explore"})
        if obj.evaluated >= trials or obj.budget_spent:
            return True
        elif obj.exhausted():
            self.all = True  # every feasible point evaluated: nothing left to propose
            return True
        elif self.since >= STALL:  # the sampler only proposes tilings it has seen or infeasible ones
            self.hit = True
            return True
        return False

    def notes(self) -> list[str]:
        """Why the study stopped before its budget, if it did."""
        obj, trials = self.obj, self.trials
        if self.all:
            return [
                f"every one of the {len(obj.grid)} feasible points of the sampled knobs was evaluated "
                f"({obj.evaluated} of {trials} evaluations used)"
            ]
        elif self.hit:
            return [
                f"stopped early: the last {STALL} proposals were all repeats or infeasible "
                f"(the sampler has converged; {obj.evaluated} of {trials} evaluations used)"
            ]
        elif obj.budget_spent:
            return [f"the study's budget of {trials} evaluations is spent (other processes share it)"]
        elif obj.evaluated < trials:
            return [f"stopped at the cap of {10 * trials + 100} optuna trials"]
        return []


def _model_evals_notes(study, obj: Objective, local, measured: bool) -> list[str]:
    """What the model scored in this run (trials and local search), added to the study's cumulative user attribute
    `model_evals`; a measured search, or one that scored nothing, records nothing."""
    spent = {"trials": obj.model_evals, "local_search": local.evals if local is not None else 0}
    if measured or not any(spent.values()):
        return []
    before = study.user_attrs.get("model_evals") or {}
    study.set_user_attr("model_evals", {k: int(before.get(k, 0)) + v for k, v in spent.items()})
    text = f"model evaluations: {obj.model_evals:,} candidates scored inside this run's trials"
    if local is not None:
        text += (
            f" + {local.evals:,} scored by the model-guided local search, which chose "
            f"{local.proposed} of the trials"
        )
    return [text]


def optimize(study, obj: Objective, cap: int, stop, lock) -> None:
    """optuna's optimize loop as ask and tell, each under `lock` (a shared study's trials are popped and finished
    by one process at a time: two processes never take the same enqueued trial), until `stop(study, trial)` says
    so or `cap` trials ran. A MeasureError fails the trial and the loop goes on; any other exception (Ctrl-C
    included) fails the trial and ends the loop."""

    # optuna's samplers read the study's trials once per trial inside optimize (a per-trial cache its loop
    # switches on); this loop is that loop, so it switches the same cache on, or TPE re-reads the storage for
    # every knob it samples (5x slower on SQLite)
    local = getattr(study, "_thread_local", None)
    cached = local is not None and hasattr(local, "in_optimize_loop") and hasattr(local, "cached_all_trials")
    if cached:
        local.in_optimize_loop = True
    try:
        _loop(study, obj, cap, stop, lock, local if cached else None)
    finally:
        if cached:
            local.in_optimize_loop, local.cached_all_trials = False, None


def _loop(study, obj: Objective, cap: int, stop, lock, local) -> None:
    import optuna
    from optuna.trial import TrialState

    from ...runners.external import MeasureError

    try:  # optuna's heartbeat (a killed process's RUNNING trial is failed after the grace period): its loop's own
        from optuna.storages._heartbeat import get_heartbeat_thread, is_heartbeat_enabled
    except ImportError:  # another optuna: no heartbeat
        get_heartbeat_thread, is_heartbeat_enabled = None, None
    beat = is_heartbeat_enabled is not None and is_heartbeat_enabled(study._storage)
    for _ in range(cap):
        if local is not None:
            local.cached_all_trials = None  # as optuna's loop: read afresh once per trial
        with lock:
            if beat:
                with warnings.catch_warnings():
                    warnings.simplefilter(
                        "ignore"
                    )  # experimental in optuna; its own loop calls it the same way
                    optuna.storages.fail_stale_trials(study)
            trial = study.ask()
        value, state, error = None, TrialState.COMPLETE, None
        try:
            with get_heartbeat_thread(trial._trial_id, study._storage) if beat else contextlib.nullcontext():
                value = obj(trial)
        except optuna.TrialPruned:
            state = TrialState.PRUNED
        except MeasureError:
            state = TrialState.FAIL
        except BaseException as exc:  # noqa: BLE001 -- recorded as failed, then raised as it came
            state, error = TrialState.FAIL, exc
        with lock:
            frozen = study.tell(trial, value if state == TrialState.COMPLETE else None, state=state)
            if (
                obj.claimed is not None
            ):  # evaluated (or failed to measure): done; pruned or interrupted: released
                done = state == TrialState.COMPLETE or (state == TrialState.FAIL and error is None)
                obj.claims.finish(obj.claimed, trial.number, done)
                obj.claimed = None
        if error is not None:
            raise error
        if stop(study, frozen):
            return
