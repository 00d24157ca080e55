"""Model-guided local search: neighbours of the best tilings that surely improve are enqueued as the next trials."""

from __future__ import annotations

import math

import numpy as np

from ...model.common import group_rows_any
from ...space import Candidates, product, take
from .objective import Objective

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
    rows = np.concatenate(parts)
    rows = rows[np.all((rows >= 0) & (rows < sizes), axis=1)]
    # np.unique(rows, axis=0): one row per group of equal rows, the groups in lexicographic order (group_rows_any
    # sorts packed int64 codes, several times faster than np.unique's sort of rows as structured records)
    first, _ = group_rows_any(rows.T)
    return rows[first]


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
        cols = [grid[k] for k in knobs]
        score, fresh = self._known(cols)
        if obj.grid is not None:
            fresh &= obj.grid.contains(cols)
        if fresh.any():
            score[fresh] = self.proxy(take(grid, fresh), tiling)
        j = int(np.argmin(score))  # lowest index on ties: rows are sorted, so deterministic
        if not score[j] < value * (1 - 1e-9):
            return None
        best = tuple(int(c[j]) for c in cols)
        if not fresh[j]:  # the way down runs into a tiling already evaluated: go on from there
            self.starts.add(best)
            return None
        self.asked.add(best)
        params = obj.params({k: int(grid[k][j]) for k in knobs})
        if params is None:
            return None
        self.proposed += 1
        self.starts.add(best)
        return params, {"source": "local", "local_from": obj.cache[key][0], "proxy_us": float(score[j])}

    def _known(self, cols: list[np.ndarray]) -> tuple[np.ndarray, np.ndarray]:
        """Per row of `cols` (the sampled knobs' columns of a neighbourhood): its evaluated value (inf: none) and
        whether it is neither evaluated (or failed) nor enqueued. The dict and set look-ups of every row at once:
        the rows and the known keys grouped together (group_rows_any), no tuple per row (thousands a descent)."""
        obj = self.obj
        tiled, cached, asked = list(obj.tilings), list(obj.cache), list(self.asked)
        keys = np.array([*tiled, *cached, *asked], dtype=np.int64).reshape(-1, len(cols))
        n = len(cols[0])
        _, inv = group_rows_any([np.concatenate([c, keys[:, j]]) for j, c in enumerate(cols)])
        rows, known = inv[:n], inv[n:]
        size = int(inv.max()) + 1 if inv.size else 0
        value = np.full(size, np.inf)
        value[known[: len(tiled)]] = [v for v, _ in obj.tilings.values()]
        seen = np.zeros(size, dtype=bool)
        seen[known[len(tiled) :]] = True  # evaluated (failed ones too) or enqueued
        return value[rows], ~seen[rows]

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
