"""Bayesian (TPE) and random search with optuna: the `tpe` and `random` strategies of `tiler.search.search`.

optuna is imported here only. One optuna trial samples the knobs, checks the model's capacity rules (an
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

import contextlib
import hashlib
import json
import math
import time
import warnings
from pathlib import Path

import numpy as np

from ..errors import InfeasibleError, SpaceError, TilerError
from ..operator import Operator, get_operator, known_ops
from ..progress import Progress
from ..space import Candidates, Space, product, take
from . import check_seed  # checked before any study is touched
from .proven import exhaustive
from .result import SearchResult

DEFAULT_TRIALS = 100
DEFAULT_STORAGE = Path("results") / "studies.db"
ESCAPE = 10  # repeats in a row after which a random unseen feasible point is enqueued
STALL = 100  # proposals in a row without a new evaluation after which the search stops (converged)
NEAR_BEST = 0.02  # guided mode reports the measurements within 2% of the best found

# TPE setup (docs/search.md, "sampler"): bench/regret.py compared these on the regret suite.
TPE_OPTIONS = dict(n_startup_trials=10, multivariate=True, group=True, n_ei_candidates=24)

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


# ------------------------------------------------------------------ storage and study


def open_storage(storage=None):
    """An optuna storage: None -> SQLite results/studies.db, "memory", a storage object, a URL or a .db path."""
    import optuna

    if storage is None or storage == "":
        DEFAULT_STORAGE.parent.mkdir(parents=True, exist_ok=True)
        url = f"sqlite:///{DEFAULT_STORAGE}"
    elif isinstance(storage, optuna.storages.BaseStorage):
        return storage
    elif storage == "memory":
        return optuna.storages.InMemoryStorage()
    elif (
        isinstance(storage, str | Path)
        and "://" not in str(storage)
        and Path(storage).suffix in (".db", ".sqlite", ".sqlite3")
    ):
        url = f"sqlite:///{storage}"
    else:
        url = str(storage)
    if "://" not in url:
        raise TilerError(
            f"storage: not a storage URL: {url!r} (e.g. sqlite:///results/studies.db, "
            "postgresql://user@host/db, memory)"
        )
    engine_kwargs = _sqlite_kwargs(url)
    for attempt in range(3):
        try:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")  # heartbeat is experimental in some optuna versions
                rdb = optuna.storages.RDBStorage(
                    url, engine_kwargs=engine_kwargs, heartbeat_interval=60, grace_period=180
                )
            return _check_tables(rdb, url)
        except TilerError:
            raise
        except Exception as exc:  # sqlalchemy/driver errors: bad scheme, missing folder, no server, no driver
            # two processes creating the same new database race on its version table: the loser retries
            racing = ("UNIQUE constraint failed", "already exists", "database is locked")
            if any(r in str(exc) for r in racing) and attempt < 2:
                time.sleep(0.2 * (attempt + 1))
                continue
            first = (str(exc).strip().splitlines() or [type(exc).__name__])[0]
            _raise_storage(url, first[:200])


def _check_tables(rdb, url: str):
    """`rdb` when every table of optuna's names in it has optuna's columns; a database of another program's (or a
    damaged) `studies` or `trials` table fails later, inside optuna's trials, so it is refused here in one line."""
    try:
        from optuna.storages._rdb.models import BaseModel
        from sqlalchemy import inspect
    except ImportError:  # another optuna layout: its own errors stand
        return rdb
    have = inspect(rdb.engine)
    names = set(have.get_table_names())
    for table in BaseModel.metadata.sorted_tables:
        if table.name in names:
            cols = {c["name"] for c in have.get_columns(table.name)}
            missing = [c.name for c in table.columns if c.name not in cols]
            if missing:
                _raise_storage(
                    url, f"table {table.name!r} has no column {', '.join(missing)}: not an optuna storage"
                )
    return rdb


def _sqlite_kwargs(url: str) -> dict:
    """SQLite files: write-ahead log and synchronous=NORMAL, so a commit does not wait for the disk (about 3 ms
    each, ~25 per trial). A killed process loses nothing that was committed; only a power cut could."""
    if not url.startswith("sqlite:///"):
        return {}
    from sqlalchemy.engine import make_url

    db = make_url(url).database
    if not db or db == ":memory:":
        return {}
    Path(db).parent.exists() or _raise_storage(url, f"folder {str(Path(db).parent)!r} does not exist")

    def connect():
        import sqlite3

        con = sqlite3.connect(db, check_same_thread=False, timeout=30)
        con.execute("PRAGMA journal_mode=WAL")
        con.execute("PRAGMA synchronous=NORMAL")
        return con

    return {"creator": connect}


def _raise_storage(url: str, why: str):
    raise TilerError(f"storage: cannot open {url!r}: {why}")


def default_study_name(problem, chip, space: Space, strategy: str, seed: int, signature: dict) -> str:
    """chip-op-problem-strategy-seed plus a short hash of what else changes the objective (pins, measure, ...)."""
    text = json.dumps(signature, sort_keys=True, default=str)
    h = hashlib.sha1(text.encode()).hexdigest()[:8]
    return f"{chip.id}-{problem.key()}-{strategy}-seed{seed}-{h}"


def check_timeout(timeout) -> float:
    """The measurement timeout in seconds: a finite number > 0, else TilerError."""
    try:
        t = float(timeout)
    except (TypeError, ValueError, OverflowError):
        t = math.nan
    if isinstance(timeout, bool) or not math.isfinite(t) or t <= 0:
        raise TilerError(f"measure_timeout: must be a finite number of seconds > 0, got {timeout!r}")
    return t


def study_descriptor(problem, chip, space: Space) -> dict:
    """What a study's trials are about, stored as its user attribute "tiler": a study of another op, family,
    chip, problem or search space is refused instead of mixing (or crashing on) foreign trials."""
    domains = json.dumps(space.domains(), sort_keys=True, default=str)
    return {
        "op": space.op,
        "family": chip.family,
        "chip": chip.id,
        "problem": problem.key(),
        "knobs": list(space.names),
        "space": hashlib.sha1(domains.encode()).hexdigest()[:12],
    }


def _check_study(study, name: str, desc: dict, trials) -> None:
    """Raise TilerError if `study` was made for something else (see study_descriptor); tag it as ours if new."""
    have = study.user_attrs.get("tiler")
    why = ""
    if isinstance(have, dict):
        for k in ("op", "family", "chip", "problem", "space"):
            if have.get(k) != desc[k]:
                why = f"its {k} is {have.get(k)!r}, this search's is {desc[k]!r}"
                break
    elif have is not None:
        why = "its 'tiler' attribute is not tiler's"
    else:  # a study made before the tag, or by someone else: its tilings must be over this space's knobs
        knobs = set(desc["knobs"])
        for t in trials:
            tiling = t.user_attrs.get("tiling")
            params = {p.split("|")[0] for p in t.params}
            if (
                tiling is not None and (not isinstance(tiling, dict) or set(tiling) != knobs)
            ) or not params <= knobs:
                got = sorted(tiling) if isinstance(tiling, dict) else sorted(params)
                why = f"its trials tile {', '.join(map(str, got))[:100] or 'nothing'}, not {desc['op']} on {desc['family']}"
                break
    if why:
        raise TilerError(
            f"study {name!r}: made for another search ({why}); give another --study-name or --storage"
        )
    if have is None:
        study.set_user_attr("tiler", desc)


REDRAWS = 16  # independent draws KnobSampler tries for a knob whose feasible values were cut


class _KnobSampler:
    """An optuna sampler around TPE or random that keeps every knob under its own name and its whole domain,
    and still proposes only values inside the knob's cut (conditional) set: the objective calls `restrict(name,
    values)` before each suggest. Multivariate (relative) proposals are held back and handed out per knob when
    they are allowed; otherwise the inner sampler is asked again (REDRAWS times), then a seeded uniform pick."""

    def __init__(self, inner, seed: int = 0):
        self.inner = inner
        self._rng = np.random.RandomState(seed)
        self._allowed: dict[str, tuple] = {}
        self._relative: dict[int, dict] = {}

    def restrict(self, name: str, values) -> None:
        self._allowed[name] = tuple(values)

    def infer_relative_search_space(self, study, trial):
        return self.inner.infer_relative_search_space(study, trial)

    def sample_relative(self, study, trial, search_space):
        # kept here, not given to optuna (which would use them without asking): sample_independent hands out
        # each one when it is allowed
        self._relative[trial.number] = dict(self.inner.sample_relative(study, trial, search_space) or {})
        return {}

    def sample_independent(self, study, trial, name, distribution):
        allowed = self._allowed.pop(name, None)
        if allowed is not None and len(allowed) == 1:  # nothing to choose: no need to ask the sampler
            return allowed[0]
        held = self._relative.get(trial.number, {})
        if name in held and (allowed is None or held[name] in allowed):
            return held[name]
        for _ in range(REDRAWS if allowed is not None else 1):
            value = self.inner.sample_independent(study, trial, name, distribution)
            if allowed is None or value in allowed:
                return value
        return allowed[self._rng.randint(len(allowed))] if allowed else value

    def before_trial(self, study, trial) -> None:
        self.inner.before_trial(study, trial)

    def after_trial(self, study, trial, state, values) -> None:
        self._relative.pop(trial.number, None)
        self.inner.after_trial(study, trial, state, values)

    def reseed_rng(self) -> None:
        self.inner.reseed_rng()


_KNOB_SAMPLER: list = []


def knob_sampler(inner, seed: int = 0):
    """A KnobSampler (an optuna BaseSampler, built on first use so importing this module does not import optuna)."""
    if not _KNOB_SAMPLER:
        import optuna

        _KNOB_SAMPLER.append(type("KnobSampler", (_KnobSampler, optuna.samplers.BaseSampler), {}))
    return _KNOB_SAMPLER[0](inner, seed)


def make_sampler(strategy: str, seed: int, options: dict | None = None):
    import optuna

    if strategy == "random":
        return optuna.samplers.RandomSampler(seed=seed)
    opts = dict(TPE_OPTIONS, **(options or {}))
    if not opts.get("multivariate"):
        opts["group"] = False  # optuna: group needs multivariate
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", optuna.exceptions.ExperimentalWarning)
        # one process samples at a time: no liar needed, and without it TPE reuses its trial cache
        return optuna.samplers.TPESampler(seed=seed, constant_liar=False, **opts)


# ------------------------------------------------------------------ the objective

GRID_ROWS = 1 << 21  # rows (grid points x rule-read inner settings) the feasible grid may list in one call


class FeasibleGrid:
    """The points of the sampled knobs' grid with a feasible completion (every rule passes for some setting of
    the inner knobs, resolved knobs at their most permissive value), and per rule which points it lets through."""

    def __init__(self, names: list[str], grid: Candidates, ok: np.ndarray, rule_ok: dict[str, np.ndarray]):
        self.names, self.grid, self.ok, self.rule_ok = names, grid, ok, rule_ok
        self.keys = {tuple(int(grid[k][i]) for k in names) for i in np.flatnonzero(ok)}

    def __len__(self) -> int:
        return len(self.keys)

    def allowed(self, knob: str, row: dict[str, int], values) -> tuple[tuple[int, ...], list[str]]:
        sel = np.ones(len(self.ok), dtype=bool)
        for k, v in row.items():
            if k in self.grid:
                sel &= self.grid[k] == v
        here = self.grid[knob][sel & self.ok]
        keep = tuple(v for v in values if np.any(here == v))
        cut = [r for r, m in self.rule_ok.items() if not m[sel].all()]
        if not keep and not cut:  # the rules pass one by one, not together
            cut = list(self.rule_ok)
        return keep, cut


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
            from .claims import BUDGET, DONE

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
        from ..export import tiling_document
        from ..runners.external import MeasureError

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


# ------------------------------------------------------------------ model-guided local search

# The local search (LocalSearch): descents start at the first LOCAL_STARTS evaluated trials (TPE's random
# start-up) and begin once there are that many; a neighbour is scored with the inner knobs of its centre, of the
# LOCAL_SETTINGS best tilings, of LOCAL_RANDOM seeded random settings and of every setting of the inner knobs the
# rules read (the others at the centre's; while there are at most LOCAL_RULED of them); the box one step around
# the centre joins the neighbourhood while it has at most LOCAL_BOX points; at most LOCAL_SCANS neighbourhoods
# after one trial.
LOCAL_STARTS = 10
LOCAL_SETTINGS = 4
LOCAL_RANDOM = 16
LOCAL_RULED = 256
LOCAL_BOX = 3**7
LOCAL_SCANS = 3


def neighbourhood(sizes: np.ndarray, center: np.ndarray) -> np.ndarray:
    """Index rows (into each knob's sorted values) around `center`: every row that sets at most two knobs to any
    of their values, and every row within one step of `center` on each knob (when that box is small), sorted."""
    d = len(sizes)
    parts = []
    if 3**d <= LOCAL_BOX:
        offsets = np.stack(np.meshgrid(*[np.arange(-1, 2)] * d, indexing="ij"), axis=-1).reshape(-1, d)
        parts.append(center + offsets)
    for i in range(d):
        for j in range(i, d):
            a, b = np.meshgrid(np.arange(sizes[i]), np.arange(sizes[j]), indexing="ij")
            rows = np.repeat(center[None, :], a.size, axis=0)
            rows[:, i], rows[:, j] = a.ravel(), b.ravel()
            parts.append(rows)
    rows = np.unique(np.concatenate(parts), axis=0)
    return rows[np.all((rows >= 0) & (rows < sizes), axis=1)]


class LocalSearch:
    """Model-guided local search between TPE's trials: only where the objective is the model (never a measurement).

    Why: on the tile grid the good points are few (matmul 4096^3 on the 910B3: 2 of 3,187 feasible grid points
    within 1 % of the optimum, the median 3.7x slower) and TPE's categorical kernels see no order in the values
    (base_m 128 says nothing about 160); it settles in a region and stops short of its bottom. A descent that
    moves in the neighbourhood of a good point (`neighbourhood`: any two knobs to any value, or every knob by one
    step) leaves 1-2 local optima per landscape, and the start-up points' descents reach the optimum's basin.

    After each trial, `propose()` scans the neighbourhood of the best tiling found and of the start-up points
    (the first LOCAL_STARTS evaluated trials, uniform over the feasible grid) and of every point a descent reached,
    each once, best first. A neighbour's proxy is the model's estimate with the inner knobs of the centre, of the
    LOCAL_SETTINGS best tilings and of LOCAL_RANDOM seeded random settings (resolved knobs resolved per row), the
    best of them: an upper bound of what its trial will find, since a trial takes the best of every inner setting.
    Every setting of the inner knobs the capacity rules read joins them (32 on either family: Ascend step_ka,
    step_kb, weight_resident; cuda num_stages, num_warps), the others at the centre's values, so a neighbour is not
    written off because the centre's buffering does not fit it (310P3 768x3072x768: base_n 128 -> 96 with step_n
    1 -> 2 needs step_kb 8 where the centre had 1; without them 2 runs in 96 stopped 2 % short).
    The neighbour with the lowest proxy below the centre's value is a sure improvement on the centre: it is
    enqueued as the next trial (it counts against the budget like any trial; user attributes source = local,
    local_from = the centre's trial number, proxy_us). A descent that runs into a tiling already evaluated goes
    on from there without a trial. TPE proposes whenever the local search has nothing. Every candidate scored
    here is counted (`evals`), apart from the trials' own (Objective.model_evals)."""

    def __init__(self, obj: Objective, seed: int):
        self.obj = obj
        self.values = [np.asarray(sorted(obj.space.knobs[k].values), dtype=np.int64) for k in obj.sampled]
        self.sizes = np.array([len(v) for v in self.values])
        self.evals = 0  # candidates the model scored here
        self.proposed = 0  # trials enqueued
        self.scanned: set[tuple] = set()  # centres whose neighbourhood was scanned
        self.starts: set[tuple] = set()  # centres to scan: start-up points and where descents went
        self.asked: set[tuple] = set()  # keys enqueued (never twice)
        self.random: Candidates = {}
        ruled = [k for k in obj.inner if any(k in ks for ks in obj.model.RULES.values())]
        size = math.prod(len(obj.space.knobs[k].values) for k in ruled)
        self.ruled: Candidates = obj.space.product(ruled) if ruled and size <= LOCAL_RULED else {}
        if obj.inner:
            m = len(next(iter(obj.sched.values())))
            pick = np.random.RandomState(seed).choice(m, min(m, LOCAL_RANDOM), replace=False)
            self.random = take(obj.sched, np.sort(pick))

    def propose(self) -> tuple[dict, dict] | None:
        """The params and user attributes of the next trial (a sure improvement on the centre it was found
        around), or None."""
        obj = self.obj
        for key in obj.tilings:  # insertion order: the first evaluated trials
            if len(self.starts) >= LOCAL_STARTS:
                break
            self.starts.add(key)
        if len(obj.tilings) < LOCAL_STARTS:
            return None
        ranked = sorted(obj.tilings.items(), key=lambda kv: (kv[1][0], kv[0]))
        scans = 0
        for r, (key, (value, tiling)) in enumerate(ranked):
            if key in self.scanned or (r > 0 and key not in self.starts):
                continue
            if scans >= LOCAL_SCANS:
                break
            scans += 1
            self.scanned.add(key)
            got = self._descend(key, value, tiling)
            if got is not None:
                return got
        return None

    def _descend(self, key: tuple, value: float, tiling: dict) -> tuple[dict, dict] | None:
        """The params of the best neighbour of `tiling` (evaluated as `key`, `value`) if it surely improves on
        it, and the trial's user attributes (source, the centre's trial number, the proxy); else None."""
        obj = self.obj
        knobs = obj.sampled
        center = np.array(
            [int(np.searchsorted(v, int(tiling[k]))) for v, k in zip(self.values, knobs, strict=True)]
        )
        pos = neighbourhood(self.sizes, center)
        grid = {k: v[pos[:, j]] for j, (k, v) in enumerate(zip(knobs, self.values, strict=True))}
        keys = [tuple(int(grid[k][i]) for k in knobs) for i in range(len(pos))]
        score = np.array([obj.tilings[kk][0] if kk in obj.tilings else np.inf for kk in keys])
        fresh = np.array(
            [
                kk not in obj.cache and kk not in self.asked and (obj.grid is None or kk in obj.grid.keys)
                for kk in keys
            ],
            dtype=bool,
        )
        if fresh.any():
            score[fresh] = self.proxy(take(grid, fresh), tiling)
        j = int(np.argmin(score))  # lowest index on ties: rows are sorted, so deterministic
        if not score[j] < value * (1 - 1e-9):
            return None
        if not fresh[j]:  # the way down runs into a tiling already evaluated: go on from there
            self.starts.add(keys[j])
            return None
        self.asked.add(keys[j])
        params = obj.params({k: int(grid[k][j]) for k in knobs})
        if params is None:
            return None
        self.proposed += 1
        self.starts.add(keys[j])
        return params, {"source": "local", "local_from": obj.cache[key][0], "proxy_us": float(score[j])}

    def proxy(self, grid: Candidates, center: dict) -> np.ndarray:
        """Per row of `grid` (sampled knobs), the model's best estimate over a few inner settings (inf: none of
        them is feasible), never below what the row's trial would find."""
        obj = self.obj
        n = len(next(iter(grid.values())))
        cand = dict(grid)
        if obj.inner:
            best = sorted(obj.tilings.values(), key=lambda vt: vt[0])[:LOCAL_SETTINGS]
            rows = [center] + [t for _, t in best]
            m = len(next(iter(self.ruled.values()))) if self.ruled else 0
            ruled = {k: self.ruled.get(k, np.full(m, int(center[k]), dtype=np.int64)) for k in obj.inner}
            inner = {
                k: np.concatenate(
                    [np.array([int(t[k]) for t in rows], dtype=np.int64), self.random[k], ruled[k]]
                )
                for k in obj.inner
            }
            cand = product(grid, inner)
        s = len(next(iter(cand.values()))) // n
        if obj.resolved:
            cand = obj.model.resolve(obj.problem, obj.chip, cand, obj.space.domains(obj.resolved))
        cand = {k: cand[k] for k in obj.space.names}
        masks = obj.model.masks(obj.problem, obj.chip, cand)
        ok = np.logical_and.reduce([np.asarray(m, dtype=bool) for m in masks.values()]) if masks else None
        ok = np.ones(n * s, dtype=bool) if ok is None else np.broadcast_to(ok, (n * s,))
        t = np.full(n * s, np.inf)
        if ok.any():
            t[ok] = obj.model.estimate(obj.problem, obj.chip, take(cand, ok))["time_us"]
            self.evals += int(ok.sum())
        return t.reshape(n, s).min(axis=1)


# ------------------------------------------------------------------ entry point


def _measure_fn(measure, timeout: float, model: Operator):
    """The measurement callable for --measure: a command template holding {tiling}, the name of one of the
    operator's runners (`triton`), or a Python callable(doc) -> us."""
    if measure is None:
        return None, None
    from ..runners import external

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
        explored = sum(t.user_attrs.get("source") == "explore" for t in all_trials)
        if explored:
            notes.append(
                f"explore: {explored} trial{'s' if explored > 1 else ''} took a random unseen feasible point after "
                f"{ESCAPE} repeats in a row"
            )
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


def _open_study(optuna, store, name: str, obj: Objective, problem, chip, space: Space):
    """Create or resume the study `name` in `store`, check that it is this search's and load its trials into `obj`:
    (study, its trials before this run)."""
    try:
        study = optuna.create_study(
            storage=store,
            study_name=name,
            direction="minimize",
            sampler=obj.sampler,
            load_if_exists=True,
        )
        old = study.get_trials(deepcopy=False)
    except (optuna.exceptions.StorageInternalError, KeyError) as exc:  # tables of optuna's names, not its own
        why = (str(exc.__cause__ or exc).strip().splitlines() or [type(exc).__name__])[0][:160]
        raise TilerError(
            f"storage: cannot create or load study {name!r}: not an optuna storage or damaged: {why}"
        ) from None
    _check_study(study, name, study_descriptor(problem, chip, space), old)
    metric = "measured_us" if obj.measure_fn is not None else "predicted_us"
    if study.metric_names != [metric]:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # experimental in some optuna versions
            study.set_metric_names([metric])
    obj.load(old)
    return study, old


def _share_study(optuna, store, study, name: str, obj: Objective, trials: int, measure_timeout: float):
    """Set `obj` up for a study other processes may share; returns the lock each trial's evaluation holds.

    On SQLite each tiling is claimed before it is evaluated and the budget is the study's (tiler.search.claims); on
    a server, a measured study re-reads the storage's finished trials before each measurement and after each trial
    (a model search skips the cost). An in-memory study is this process's alone: no lock."""
    lock = contextlib.nullcontext()
    if isinstance(store, optuna.storages.InMemoryStorage):
        return lock
    from optuna.trial import TrialState

    from .claims import Claims

    def refresh() -> None:
        obj.load(study.get_trials(deepcopy=False, states=(TrialState.COMPLETE, TrialState.FAIL)))

    measured = obj.measure_fn is not None
    expiry = (measure_timeout + 60.0) if measured else 60.0  # a live trial ends well within this
    obj.claims = Claims.for_storage(store, name, expiry)
    if obj.claims is not None:
        obj.refresh, obj.budget, lock = refresh, trials, obj.claims.lock
        obj.claims.adopt({json.dumps(list(k)): n for k, (n, _, _) in obj.cache.items()})
    elif measured:
        obj.refresh = refresh
    return lock


def _enqueue_starts(
    study, obj: Objective, problem, chip, space: Space, guided, diverse, warm_start, notes
) -> None:
    """Enqueue the known-good and model-ranked starting points (once: skip_if_exists), evaluated first: the model's
    top `guided` (diverse: its diverse top-k) and, with `warm_start`, the operator's warm start (or a note why
    not)."""
    guided_params: list[dict] = []
    if guided:
        if diverse:
            from . import diverse_top

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

    from ..runners.external import MeasureError

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


__all__ = ["DEFAULT_TRIALS", "Objective", "knob_sampler", "make_sampler", "open_storage", "run"]
