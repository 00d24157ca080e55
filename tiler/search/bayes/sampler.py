"""The knob sampler: TPE or random over each knob's domain, cut to the values that keep a feasible completion."""

from __future__ import annotations

import warnings
from functools import cached_property

import numpy as np

from ...model.common import unique_inverse
from ...space import Candidates

# TPE setup (docs/search.md, "sampler"): bench/regret.py compared these on the regret suite.
TPE_OPTIONS = dict(n_startup_trials=10, multivariate=True, group=True, n_ei_candidates=24)


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


def _distinct(col: np.ndarray) -> np.ndarray:
    """np.unique(col) of a 1-D integer column (the same sorted distinct values, the same dtype) without numpy 2's
    hash table, which np.unique uses for plain values and which costs about 1.3 us a distinct value: the feasible
    grid's codes (up to GRID_ROWS distinct, usually increasing already: the grid is a product in order) took 2.7 s
    there against a 1 ms check, and its columns (a few values each over up to GRID_ROWS rows) 57 ms each against
    a 13 ms bincount. Strictly increasing: the column itself; values within a small range: a bincount; else one
    sort (unique_inverse). Other dtypes: np.unique."""
    if col.ndim != 1 or col.dtype.kind not in "iu":
        return np.unique(col)
    if col.size < 2 or bool(np.all(col[1:] > col[:-1])):
        return col.copy()
    lo, hi = int(col.min()), int(col.max())
    if hi - lo < 4 * col.size + 1024 and -(1 << 62) <= lo and hi < 1 << 62:  # offsets in int64, any dtype
        seen = np.bincount(col.astype(np.int64, copy=False) - lo, minlength=hi - lo + 1)
        return (np.flatnonzero(seen) + lo).astype(col.dtype, copy=False)
    return unique_inverse(col)[0]


class FeasibleGrid:
    """The points of the sampled knobs' grid with a feasible completion (every rule passes for some setting of
    the inner knobs, resolved knobs at their most permissive value), and per rule which points it lets through."""

    def __init__(self, names: list[str], grid: Candidates, ok: np.ndarray, rule_ok: dict[str, np.ndarray]):
        self.names, self.grid, self.ok, self.rule_ok = names, grid, ok, rule_ok
        # the feasible points as sorted distinct codes (each knob's value as its rank among that knob's values in
        # the grid, mixed radix; at most the grid's size): counting and membership without a Python object per
        # point, since the grid lists up to GRID_ROWS points. `keys`, the points as tuples, is built on first use.
        self._values = [_distinct(np.asarray(grid[k])) for k in names]
        code = np.zeros(int(np.count_nonzero(ok)), dtype=np.int64)
        for k, vals in zip(names, self._values, strict=True):
            code = code * vals.size + np.searchsorted(vals, np.asarray(grid[k])[ok])
        self._codes = _distinct(code)
        self._last: tuple[tuple, np.ndarray] | None = None  # allowed(): the last row asked and its grid rows

    @cached_property
    def keys(self) -> set[tuple[int, ...]]:
        """Every feasible point as a tuple of Python ints, in `names` order (built from whole columns)."""
        cols = [np.asarray(self.grid[k])[self.ok] for k in self.names]
        rows = (
            np.stack(cols, axis=1) if cols else np.zeros((int(np.count_nonzero(self.ok)), 0), dtype=np.int64)
        )
        return set(map(tuple, rows.astype(np.int64).tolist()))

    def __len__(self) -> int:
        return int(self._codes.size)

    def __contains__(self, key) -> bool:
        """Whether `key` (one value per knob of `names`) is a feasible point: `key in self.keys`, without the set."""
        if len(key) != len(self.names):
            return False
        try:
            return bool(self.contains([np.asarray([v]) for v in key])[0])
        except OverflowError:  # a Python int no int64 holds: not one of the grid's values
            return False

    def contains(self, columns) -> np.ndarray:
        """Per row of `columns` (one array per knob of `names`), whether it is a feasible point: `in` for a whole
        neighbourhood at once (the local search asks it of thousands of rows per descent)."""
        n = len(columns[0]) if columns else 1
        ok = np.ones(n, dtype=bool)
        code = np.zeros(n, dtype=np.int64)
        for col, vals in zip(columns, self._values, strict=True):
            if vals.size == 0:
                return np.zeros(n, dtype=bool)
            col = np.asarray(col)
            i = np.minimum(np.searchsorted(vals, col), vals.size - 1)
            ok &= vals[i] == col
            code = code * vals.size + i
        if self._codes.size == 0:
            return np.zeros(n, dtype=bool)
        j = np.minimum(np.searchsorted(self._codes, code), self._codes.size - 1)
        return ok & (self._codes[j] == code)

    def _agreeing(self, row: dict[str, int]) -> np.ndarray:
        """The indices (ascending) of the grid rows that agree with `row` on its knobs of the grid (read-only:
        it may be kept).

        A trial's walk asks `allowed` knob by knob with the row one knob longer each time, so the last answer is
        kept and narrowed by the new knob alone, among the rows it kept, instead of comparing every knob of the
        row over up to GRID_ROWS rows (the same rows: the conditions are and-ed either way)."""
        items = tuple((k, v) for k, v in row.items() if k in self.grid)
        last = self._last
        if last is not None and items == last[0]:
            return last[1]
        if last is not None and items and items[:-1] == last[0]:
            k, v = items[-1]
            idx = last[1][self.grid[k][last[1]] == v]
        else:
            idx = np.arange(len(self.ok))
            for k, v in items:
                idx = idx[self.grid[k][idx] == v]
        self._last = (items, idx)
        return idx

    def allowed(self, knob: str, row: dict[str, int], values) -> tuple[tuple[int, ...], list[str]]:
        idx = self._agreeing(row)
        here = self.grid[knob][idx[self.ok[idx]]]
        present = set(_distinct(here).tolist())  # the values of the feasible points that agree with `row`
        keep = tuple(v for v in values if v in present)
        cut = [r for r, m in self.rule_ok.items() if not m[idx].all()]
        if not keep and not cut:  # the rules pass one by one, not together
            cut = list(self.rule_ok)
        return keep, cut
