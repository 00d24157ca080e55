"""Bayesian (TPE) and random search with optuna: the `tpe` and `random` strategies of `tiler.search.search`.

optuna is imported in this package only. One optuna trial samples the knobs, checks the model's capacity rules (an
infeasible point is PRUNED without a model call or a measurement, so TPE learns to avoid it) and scores the
tiling with the model's estimate or with a measurement. docs/search.md explains every choice below.

* Sampled knobs: `suggest_categorical` over each sampled knob's (possibly pinned) domain (labels for categorical
  knobs, so optuna-dashboard reads them), in the operator's SAMPLE_ORDER, one optuna parameter per knob, named
  as the knob. Feasible-only sampling: where the sampled knobs' grid is small enough to list (GRID_ROWS; the
  tile grid of the model objective always is), it is listed once with every rule checked for some setting of
  the inner knobs (FeasibleGrid), and a knob's values are cut to those that leave the knobs already sampled a
  feasible completion, so no proposal is ever a dead end or infeasible; otherwise to those that pass the rules
  whose other knobs are already sampled. The sampler (KnobSampler, wrapping TPE or random) draws from the knob's
  whole domain and keeps a draw only inside the cut set (a multivariate TPE proposal first, then up to REDRAWS
  independent draws, then a seeded uniform pick).
* Model-guided local search (LocalSearch; the model objective only, `local=False` turns it off): after each
  trial, the neighbourhood of the best tiling found and of the start-up points is scored with the model at a
  few inner settings (an upper bound of what a trial finds); a neighbour that surely improves is enqueued as the
  next trial (source `local`). It counts against the budget like any trial; the candidates it scored are
  reported (notes, study attribute `model_evals`).
* What a study shows (optuna-dashboard): the objective is named (`predicted_us` or `measured_us`), and every
  evaluated trial carries user attributes `predicted_us`, `bound`, `tiling` (every knob's code) and
  `tiling_label` (`base_m=128 base_n=256 ... core_split=block`, resolved and inner knobs included).
* Resolved knobs (the operator's RESOLVED): when the objective is the model, `Operator.resolve()` fills them with
  their provably best feasible value instead of sampling them; a measurement samples them (the proof is about the
  model, not the silicon).
* Inner knobs (`inner="grid"`, the default for the model objective): a trial samples the knobs that fix the tile
  grid (the operator's GRID_KNOBS) and scores every combination of the others in one vectorised model call;
  `inner="schedule"` does that for the model's SCHEDULE_KNOBS only, `"none"` (always, for a measurement) samples all.
* Budget: `trials` counts evaluated trials (a model call or a measurement). Infeasible points (pruned) and repeats
  of an already evaluated tiling (answered from the study, never re-measured) are free and do not count; the
  total number of optuna trials is capped at 10 x trials + 100. After ESCAPE repeats in a row, a random feasible
  point not evaluated yet is enqueued (source `explore`), so a sampler that keeps proposing what it knows does
  not end the search early; it ends when every feasible point has been evaluated.
* Storage: SQLite `results/studies.db` by default, any optuna storage URL, or "memory". The default study name
  is derived from the chip, op, problem, strategy, seed and a hash of everything that changes the objective, so
  the same command resumes its study and runs only the evaluations still missing. A study is tagged with its op,
  family, chip, problem and space (user attribute "tiler"); one made for another search is refused (TilerError).
* Several processes on one SQLite study (tiler.search.claims): each tiling is claimed in a small table beside the
  database before it is evaluated, and trials are asked and told under a file lock, so no tiling is evaluated
  twice, no two processes take the same enqueued trial, and the study's evaluations, all processes together,
  stop at the budget (`trials` is per study, not per process). A proposal another process is evaluating is
  pruned (free). On a server storage (PostgreSQL, MySQL) there is no file to lock: a measured study re-reads the
  storage's finished trials before each measurement and after each trial, and two processes may still evaluate one
  tiling that both proposed at the same moment, or run a trial past the budget.
"""

from __future__ import annotations

from ...errors import TilerError
from ...operator import get_operator
from .driver import DEFAULT_TRIALS, NEAR_BEST, check_timeout, run
from .local import (
    LOCAL_BOX,
    LOCAL_RANDOM,
    LOCAL_RULED,
    LOCAL_SCANS,
    LOCAL_SETTINGS,
    LOCAL_STARTS,
    LocalSearch,
    neighbourhood,
)
from .loop import ESCAPE, STALL, optimize
from .objective import DEFAULT_INNER, INNER, Objective, inner_knobs
from .sampler import GRID_ROWS, REDRAWS, TPE_OPTIONS, FeasibleGrid, knob_sampler, make_sampler
from .study import DEFAULT_STORAGE, default_study_name, open_storage, study_descriptor

# the public names of the strategy as they were when it was one module (`bayes.X`)
__all__ = [
    "DEFAULT_INNER",
    "DEFAULT_STORAGE",
    "DEFAULT_TRIALS",
    "ESCAPE",
    "FeasibleGrid",
    "GRID_ROWS",
    "INNER",
    "LOCAL_BOX",
    "LOCAL_RANDOM",
    "LOCAL_RULED",
    "LOCAL_SCANS",
    "LOCAL_SETTINGS",
    "LOCAL_STARTS",
    "LocalSearch",
    "NEAR_BEST",
    "Objective",
    "REDRAWS",
    "STALL",
    "TPE_OPTIONS",
    "TilerError",
    "check_timeout",
    "default_study_name",
    "get_operator",
    "inner_knobs",
    "knob_sampler",
    "make_sampler",
    "neighbourhood",
    "open_storage",
    "optimize",
    "run",
    "study_descriptor",
]
