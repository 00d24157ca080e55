"""Fit a profile's [efficiency] constants to measured kernel latencies, and say how well the fit generalises.

`calibrate()` minimises the squared log error of the model over the measured rows (a Levenberg-Marquardt search
in log-parameter space with a finite-difference Jacobian, soft-L1 weights against outliers; numpy only). It first
runs a k-fold cross-validation *by shape* (every fold's shapes are held out of its fit) and reports the error and the
ranking quality on the held-out shapes (with tiler.agreement's figures: Spearman, top-1 and best-of-k regret, median
|log error|), then fits once on all shapes given. `write_profile()` writes the result.

Measured rows are never completed by the model: a knob column the table does not have (a user's kernel without
that knob) takes the value a kernel without it runs with, as the operator declares it (tiler.rank.default_rows).

Only the constants the operator declares fittable are moved (`Operator.FITTABLE`, each with its box of physical
values); datasheet numbers (SM count, clock, bandwidths, capacities) are never touched. The operator re-times
many problems at once through `prepare()` (what the constants do not change) and `timing()` (the rest).
"""

from __future__ import annotations

import datetime as _dt
import re
import time
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import pandas as pd

from .agreement import Agreement, agreement, combine
from .errors import TilerError
from .hardware import Chip, dump_profile
from .operator import Operator, get_operator, problem_class
from .problem import Problem, parse_problem
from .rank import TIME_COLUMNS, default_rows, defaulted_text, numeric, parse_knobs, select_rows, time_column
from .space import load_space

TIME_MAX_S = 3600.0  # the longest measured time a row may give (one kernel launch: an hour is far beyond any)
SOFT_L1 = 0.25  # |log ratio| above which a row's weight starts to fall (robust fit; a 28% miss)
NEAR_BEST = 0.5  # log(measured / shape's best) at which a row's weight has fallen to 1/2
# The prior on each fitted constant: log-normal around its value before the fit, a factor e^PRIOR_SIGMA for one
# standard deviation. Against it, each measured shape counts as one observation (its rows share the shape's
# systematic error) with the error scale SOFT_L1: so a fit on a few shapes moves few constants far, and a fit on
# many is led by the data. A guess, not a fit (docs/model.md).
PRIOR_SIGMA = 1.0
# The memory a calibration may take for its rows: the model's prepared columns of every measured row (Operator.
# prepare) times CALIBRATE_OVERHEAD (the folds' copies, timing()'s temporaries and the Jacobian's re-timings: 9x
# measured on h200 matmul, bench/memory_scale.py calibrate). An input that would need more is refused before it
# is prepared (one line, exit 2); with the ~120 MB of the interpreter and the table the process stays under 1 GB.
CALIBRATE_BYTES_MAX = 768 << 20
CALIBRATE_OVERHEAD = 10


@dataclass
class Measured:
    """Measured rows of several problems, prepared for fast re-timing with new constants."""

    shapes: list[str]  # one label per problem (Problem.label(), e.g. "4096x4096x4096")
    problems: list[Problem]  # per shape
    cands: list[dict]  # per shape: the knob columns of its rows
    shape_of: np.ndarray  # row -> index into shapes
    seconds: np.ndarray  # measured time per row
    prepared: dict  # Operator.prepare() columns, all rows
    table: pd.DataFrame  # the rows used (input columns + `row`)
    # measured busy time per pipe (seconds, NaN where not measured): a profiler's pipe columns (`<pipe>_us`, msprof's
    # aic_mte2_time(us) ... once tiler.msprof has read them), each fitted against the model's pipe of that name
    pipes: dict = field(default_factory=dict)
    # knobs the table does not give -> the absent defaults they took (tiler.rank.default_rows)
    defaulted: dict = field(default_factory=dict)
    # rows not fitted: (row or file line, why): a tiling outside the space's domain or breaking a capacity rule
    dropped: list = field(default_factory=list)

    def take(self, keep_shapes) -> Measured:
        idx = [self.shapes.index(s) for s in keep_shapes]
        m = np.isin(self.shape_of, idx)
        remap = {old: new for new, old in enumerate(idx)}
        return Measured(
            [self.shapes[i] for i in idx],
            [self.problems[i] for i in idx],
            [self.cands[i] for i in idx],
            np.array([remap[i] for i in self.shape_of[m]]),
            self.seconds[m],
            {k: v[m] for k, v in self.prepared.items()},
            self.table[m].reset_index(drop=True),
            {k: v[m] for k, v in self.pipes.items()},
            self.defaulted,
            self.dropped,
        )


@dataclass
class CalibrationResult:
    chip: Chip  # the profile with the fitted values (tag "fitted")
    op: str
    values: dict[str, float]  # the fitted constants
    start: dict[str, float]  # the constants before the fit
    fit_shapes: list[str]  # shapes of the final fit
    source: str  # source string of every fitted value
    folds: pd.DataFrame  # per held-out shape of the k-fold: error before/after, ranking quality
    metrics: dict[str, float] = field(
        default_factory=dict
    )  # k-fold summary (cv_error_before/after, cv_top1_...)
    train_error: float = float("nan")  # median |log(pred/measured)| of the final fit on its own rows
    seconds: float = 0.0
    choices: list = field(default_factory=list)  # discrete profile values chosen (Operator.choices)
    # the k-fold's held-out agreement (tiler.agreement.combine over the held-out shapes), "before" and "after"
    agreement: dict[str, Agreement] = field(default_factory=dict)
    defaulted: dict = field(default_factory=dict)  # knobs the measurements lack -> the defaults they took
    # with fit_shapes: the file's other shapes, never fitted (not in any fold either): agreement "before"/"after"
    outside: dict[str, Agreement] = field(default_factory=dict)
    dropped: list = field(default_factory=list)  # rows not used: (row or file line, why); see unused_text()
    lines: bool = False  # `dropped` names file lines (an op_summary), not table rows

    def unused_text(self) -> str:
        """One line counting and naming the rows that were not fitted (empty when every row was)."""
        return unused_line(self.dropped, "line" if self.lines else "row")

    notes: list[str] = field(
        default_factory=list
    )  # other lines for stderr (tiler.api.calibrate adds the unused-row line)

    def summary(self) -> str:
        """What was fitted, and how well it predicts shapes it did not see (the k-fold)."""
        s = self.metrics
        lines = [
            f"calibrated {self.chip.id}/{self.op} on {len(self.fit_shapes)} shapes in {self.seconds:.1f} s; "
            f"median |log(pred/measured)| on its own rows {self.train_error:.3f}"
        ]
        if s:
            lines.append(
                f"k-fold by shape ({len(self.folds)} held-out shapes): median |log ratio| "
                f"{s['cv_error_before']:.3f} uncalibrated -> {s['cv_error_after']:.3f}; Spearman "
                f"{s['cv_spearman_before']:.3f} -> {s['cv_spearman']:.3f}; top-1 geomean {s['cv_top1_before']:.3f} -> "
                f"{s['cv_top1_geomean']:.3f} (min {s['cv_top1_min']:.3f}); best-of-top-4 {s['cv_top4_geomean']:.3f}"
            )
        if self.agreement:
            n = self.agreement["after"].problems
            lines.append(
                f"  held-out agreement per shape, over {n} shapes (Spearman: mean; regrets, measured time of the "
                "model's pick or best of its top k over the best measured: geomean; error: median):"
            )
            lines.append(f"    uncalibrated {self.agreement['before'].line()}")
            lines.append(f"    calibrated   {self.agreement['after'].line()}")
        if self.outside:
            b, a = self.outside["before"], self.outside["after"]
            lines.append(
                f"the file's {a.problems} other shapes (outside --fit-shapes, never fitted): median |log ratio| "
                f"{b.median_abs_log_error:.3f} uncalibrated -> {a.median_abs_log_error:.3f}; top-1 regret (geomean) "
                f"{b.top1_regret:.3f} -> {a.top1_regret:.3f} (worst {b.worst_top1_regret:.3f} -> "
                f"{a.worst_top1_regret:.3f}); Spearman {b.spearman:.3f} -> {a.spearman:.3f}"
            )
        if self.defaulted:
            lines.append(
                "  knob columns the measurements lack took the default of a kernel without them (not the model's "
                f"choice): {defaulted_text(self.defaulted)}"
            )
        per_pipe = [
            k[len("cv_pipe_") : -len("_after")]
            for k in s
            if k.startswith("cv_pipe_") and k.endswith("_after")
        ]
        if per_pipe:
            lines.append(
                "  held-out median |log ratio| per pipe (uncalibrated -> calibrated): "
                + ", ".join(
                    f"{pp} {s[f'cv_pipe_{pp}_before']:.3f} -> {s[f'cv_pipe_{pp}_after']:.3f}"
                    for pp in per_pipe
                )
            )
        moved = [k for k, v in self.values.items() if abs(np.log(v / self.start[k])) > 0.01]
        lines += [
            f"  {k} = {v:.4g} (was {self.start[k]:.4g}){' moved' if k in moved else ''}"
            for k, v in self.values.items()
        ]
        lines += [f"  {t}" for t in self.choices]
        return "\n".join(lines)

    report = summary
    __str__ = summary


def unused_line(dropped: list, unit: str = "row") -> str:
    """`N row(s) not used (rows 3, 7, ...): reason; reason`: the rows a reader or the fit set aside, with why."""
    if not dropped:
        return ""
    nums = sorted(int(r) for r, _ in dropped)
    shown = ", ".join(map(str, nums[:8])) + (" ..." if len(nums) > 8 else "")
    reasons = sorted({why for _, why in dropped})
    more = f" (and {len(reasons) - 6} other reasons)" if len(reasons) > 6 else ""
    return f"{len(nums)} row(s) not used ({unit}s {shown}): {'; '.join(reasons[:6])}{more}"


def _operator(op: str, family: str) -> Operator:
    """The operator, which must declare fittable constants."""
    model = get_operator(op, family)
    if not model.FITTABLE:
        raise TilerError(f"calibrate: {op} on the {family} family has no fittable constants")
    return model


def _time_column(df: pd.DataFrame) -> tuple[str, float]:
    found = time_column(df)
    if found is not None:
        return found
    raise TilerError(f"measurements: no time column; expected one of {', '.join(TIME_COLUMNS)}")


def load_measurements(chip: Chip, op: str, df: pd.DataFrame) -> Measured:
    """Validate a measurement table (the shared CSV's columns) and prepare its rows per problem."""
    model = _operator(op, chip.family)
    space = load_space(op, chip.family)
    cls = problem_class(op)
    missing = [k for k in cls.FIELDS if k not in df.columns]
    if missing:
        raise TilerError(f"measurements: missing column(s) {', '.join(missing)}")
    tcol, scale = _time_column(df)
    dtype_col = "dtype" in df.columns
    keys = [k for k in (*cls.FIELDS, *cls.OPTIONAL) if k in df.columns] + (["dtype"] if dtype_col else [])
    base = df.copy()
    if "impl" in base.columns and model.IMPLS:
        base = base[base["impl"].astype(str).str.strip().str.lower().isin(model.IMPLS)]
    from .model.common import pipes as family_pipes

    pipe_cols = {pp: f"{pp}_us" for pp in family_pipes(chip.family) if f"{pp}_us" in df.columns}
    shapes, problems, cand_list, shape_of, secs, parts, rows = [], [], [], [], [], [], []
    defaulted: dict[str, list[str]] = {}
    pipe_secs: dict[str, list] = {pp: [] for pp in pipe_cols}
    unit = "line" if "line" in df.columns else "row"  # tiler.msprof's tables carry the profiler file's lines
    label = df["line"].to_numpy() if unit == "line" else np.arange(1, len(df) + 1)
    dropped: list[tuple[int, str]] = []
    for vals, idx in base.groupby(keys, sort=True, dropna=False).groups.items():
        fields = dict(zip(keys, vals if isinstance(vals, tuple) else (vals,), strict=True))
        try:
            p = parse_problem(
                op,
                {k: v for k, v in fields.items() if k != "dtype"},
                dtype=str(fields["dtype"]) if dtype_col else None,
                strict=False,
            )
        except TilerError as exc:
            first = int(label[df.index.get_loc(idx[0])])
            raise TilerError(f"measurements: {unit} {first}: {exc}") from None
        sel = select_rows(p, df, model.IMPLS).reset_index(drop=True)
        if unit == "line":
            sel["row"] = label[sel["row"].to_numpy() - 1]
        sel, took = default_rows(p, space, sel, "--measurements")  # knobs the user's kernel does not have
        for k, vals in took.items():
            defaulted.setdefault(k, []).extend(v for v in vals if v not in defaulted.get(k, []))
        cands, ok, why = parse_knobs(sel, space, "--measurements")
        why = np.array(why, dtype=object)
        for rule, m in model.feasible(p, chip, cands).items():
            why[ok & ~m] = f"{rule}: {model.RULE_TEXT.get(rule, rule)}"
            ok &= m
        dropped += [
            (int(r), f"{p.label()}: {w}") for r, w in zip(sel["row"].to_numpy()[~ok], why[~ok], strict=True)
        ]
        t = numeric(sel[tcol]) * scale
        bad = ~np.isfinite(t) | (t <= 0) | (t > TIME_MAX_S)
        if (bad & ok).any():
            r = int(sel["row"].to_numpy()[np.nonzero(bad & ok)[0][0]])
            raise TilerError(
                f"measurements: {unit} {r}: column {tcol!r} must be a positive number of at most "
                f"{TIME_MAX_S / scale:g} (one hour)"
            )
        if not ok.any():
            continue
        kept = {k: v[ok] for k, v in cands.items()}
        if not parts:  # before the first shape's rows are prepared: what all the file's rows would take
            _check_memory(model, p, chip, kept, len(base), unit)
        shapes.append(p.label())
        problems.append(p)
        cand_list.append(kept)
        shape_of.append(np.full(int(ok.sum()), len(shapes) - 1))
        secs.append(t[ok])
        parts.append(model.prepare(p, chip, kept))
        rows.append(sel[ok])
        for pp, col in pipe_cols.items():
            vals = numeric(sel[col])[ok] * 1e-6
            measured = (vals > 0) & (vals <= TIME_MAX_S)  # 0, inf, > an hour: not a measurement
            pipe_secs[pp].append(np.where(measured, vals, np.nan))
    if not shapes:
        raise TilerError(
            f"measurements: no feasible rows of {', '.join(model.IMPLS) or 'the kernel'} to fit"
            + (f"; {unused_line(dropped, unit)}" if dropped else "")
        )
    return Measured(
        shapes,
        problems,
        cand_list,
        np.concatenate(shape_of),
        np.concatenate(secs),
        {k: np.concatenate([p_[k] for p_ in parts]) for k in parts[0]},
        pd.concat(rows, ignore_index=True),
        {pp: np.concatenate(v) for pp, v in pipe_secs.items() if np.isfinite(np.concatenate(v)).any()},
        defaulted,
        dropped,
    )


def _check_memory(model: Operator, p: Problem, chip, kept: dict, rows: int, unit: str) -> None:
    """Refuse (TilerError, one line) a table whose rows' prepared model columns would pass CALIBRATE_BYTES_MAX:
    one row is prepared to measure its columns' bytes, and every row of the table is counted as fitted."""
    one = model.prepare(p, chip, {k: v[:1] for k, v in kept.items()})
    per_row = sum(np.asarray(v).nbytes for v in one.values()) * CALIBRATE_OVERHEAD
    need = per_row * rows
    if need > CALIBRATE_BYTES_MAX:
        raise TilerError(
            f"measurements: {rows:,} {unit}s would take about {need / 2**20:,.0f} MiB to fit ({per_row:,} bytes "
            f"per {unit}), over the limit of {CALIBRATE_BYTES_MAX >> 20} MiB (CALIBRATE_BYTES_MAX, at most "
            f"{CALIBRATE_BYTES_MAX // per_row:,} {unit}s): fit fewer rows (a sample of each shape's tilings)"
        )


def _predict(model: Operator, chip, data: Measured, e: dict) -> np.ndarray:
    return model.timing(data.prepared, chip, e)["time_us"] * 1e-6


def _predict_all(model: Operator, chip, data: Measured, e: dict) -> tuple[np.ndarray, dict[str, np.ndarray]]:
    """Predicted total time and the measured pipes' predicted busy times (seconds)."""
    rec = model.timing(data.prepared, chip, e)
    return rec["time_us"] * 1e-6, {pp: rec[f"{pp}_us"] * 1e-6 for pp in data.pipes}


def pipe_errors(model: Operator, chip, data: Measured, e: dict) -> dict[str, float]:
    """Median |log(predicted / measured)| of the total time and of every measured pipe."""
    total, pipes = _predict_all(model, chip, data, e)
    out = {"total": float(np.median(np.abs(np.log(total / data.seconds))))}
    for pp, pred in pipes.items():
        ok = np.isfinite(data.pipes[pp]) & (pred > 0)
        if ok.any():
            out[pp] = float(np.median(np.abs(np.log(pred[ok] / data.pipes[pp][ok]))))
    return out


def _fit(
    model: Operator,
    chip,
    data: Measured,
    start: dict,
    names: list[str],
    iters: int = 40,
    prior_sigma: float = PRIOR_SIGMA,
    boxes: dict | None = None,
) -> dict:
    """Levenberg-Marquardt on log(pred/measured) over log-constants, soft-L1 reweighted, clipped to the
    operator's FITTABLE boxes (or `boxes`, narrower ones). With a finite `prior_sigma` each constant has a log-normal
    prior around its start (sigma in log units) and each shape's rows weigh together as one observation; inf:
    neither (every row alike)."""
    box = boxes or model.FITTABLE
    lo = np.log([box[k][0] for k in names])
    hi = np.log([box[k][1] for k in names])
    u = np.clip(np.log([start[k] for k in names]), lo, hi)
    y = np.log(data.seconds)
    # rows near their shape's best matter most (that is where the choice is made): weight by closeness
    best = np.array([data.seconds[data.shape_of == i].min() for i in range(len(data.shapes))])[data.shape_of]
    near = np.sqrt(1.0 / (1.0 + (np.log(data.seconds / best) / NEAR_BEST) ** 2))
    # with the prior, each shape weighs as one observation (its rows' squared residuals are averaged) against it;
    # without (prior_sigma = inf), every row weighs alike, as before the prior existed
    u0 = u.copy()
    prior = SOFT_L1 / prior_sigma if prior_sigma > 0 else 0.0
    if prior > 0:
        near = near / np.sqrt(np.bincount(data.shape_of)[data.shape_of])

    # each measured pipe adds a residual per row where it was measured (and the model has that pipe busy)
    pipe_y = {pp: np.log(v) for pp, v in data.pipes.items()}
    pipe_ok = {pp: np.isfinite(v) for pp, v in pipe_y.items()}

    def residuals(uu):
        e = dict(start, **{k: float(np.exp(v)) for k, v in zip(names, uu, strict=True)})
        if not pipe_y:
            return np.concatenate([np.log(_predict(model, chip, data, e)) - y, prior * (uu - u0)])
        total, pipes = _predict_all(model, chip, data, e)
        parts = [np.log(total) - y]
        for pp, yy in pipe_y.items():
            ok = pipe_ok[pp]
            parts.append(np.where(ok, np.log(np.maximum(pipes[pp], 1e-15)) - np.where(ok, yy, 0.0), 0.0))
        return np.concatenate([*parts, prior * (uu - u0)])

    # each point's residuals are computed once: a rejected step retried with a larger damping often lands on a point
    # already scored (its move clipped to the box, or too small to change u): a third of the model's evaluations in
    # a fit from totals. Read-only, so sharing one array between the lookups cannot carry a write from one to the next
    # Only the last few points are kept: the repeats are retries near the current point, and a fit over many rows
    # would otherwise hold every point's residual vector
    scored: dict[bytes, np.ndarray] = {}

    def resid(uu):
        key = np.asarray(uu, dtype=np.float64).tobytes()
        if key not in scored:
            if len(scored) >= 2 * len(names) + 4:  # a Jacobian's points and a few steps
                del scored[next(iter(scored))]
            scored[key] = residuals(uu)
            scored[key].setflags(write=False)
        return scored[key]

    def weights(r):
        rows = r[: near.size]  # the prior's residuals (the last len(names)) keep weight 1
        return np.concatenate([near / np.sqrt(np.sqrt(1.0 + (rows / SOFT_L1) ** 2)), np.ones(len(names))])

    near = np.tile(near, 1 + len(pipe_y))
    r = resid(u)
    w = weights(r)
    cost = float(np.sum((w * r) ** 2))
    lam = 1e-2
    h = 1e-4
    for _ in range(iters):
        J = np.empty((r.size, u.size))
        for j in range(u.size):
            du = np.zeros_like(u)
            du[j] = h if u[j] + h <= hi[j] else -h
            J[:, j] = (resid(u + du) - r) / du[j]
        Jw = J * w[:, None]
        A = Jw.T @ Jw
        g = Jw.T @ (w * r)
        improved = False
        while lam < 1e10:
            step = np.linalg.solve(A + lam * (np.diag(np.diag(A)) + 1e-9 * np.eye(u.size)), -g)
            un = np.clip(u + step, lo, hi)
            rn = resid(un)
            cn = float(np.sum((w * rn) ** 2))
            if np.isfinite(cn) and cn < cost:
                rel = (cost - cn) / max(cost, 1e-30)
                u, r = un, rn
                lam = max(lam / 3.0, 1e-7)
                improved = True
                break
            lam *= 4.0
        if not improved:
            break
        w = weights(r)
        cost = float(np.sum((w * r) ** 2))
        if rel < 1e-6:
            break
    return dict(start, **{k: float(np.exp(v)) for k, v in zip(names, u, strict=True)})


def _spearman(a: np.ndarray, b: np.ndarray) -> float:
    if a.size < 2:
        return float("nan")
    return float(pd.Series(a).rank().corr(pd.Series(b).rank()))


def shape_quality(pred: np.ndarray, meas: np.ndarray) -> dict[str, float]:
    """Ranking quality of one shape: top-1 efficiency (best measured / measured time of the predicted best),
    best of the predicted top 4, Spearman, median |log ratio|."""
    order = np.argsort(pred, kind="stable")
    best = meas.min()
    return {
        "top1": float(best / meas[order[0]]),
        "top4": float(best / meas[order[:4]].min()),
        "spearman": _spearman(pred, meas),
        "err": float(np.median(np.abs(np.log(pred / meas)))),
    }


def _folds(shapes: list[str], k: int, seed: int) -> list[list[str]]:
    rng = np.random.default_rng(seed)
    order = list(rng.permutation(len(shapes)))
    k = max(2, min(k, len(shapes)))
    return [[shapes[i] for i in order[j::k]] for j in range(k)]


def _cross_validate(
    model,
    chip: Chip,
    data: Measured,
    start: dict,
    names: list[str],
    folds: int,
    seed: int,
    prior_sigma: float,
) -> tuple[pd.DataFrame, dict[str, list[Agreement]], list[tuple[dict, dict]]]:
    """The k-fold by shape (no fold when `folds` < 2 or one shape): per held-out shape one row of its ranking
    quality before and after the fit without it, the agreement of each, and per fold the pipes' errors."""
    rows = []
    agree: dict[str, list[Agreement]] = {"before": [], "after": []}
    pipe_folds: list[
        tuple[dict, dict]
    ] = []  # per fold: held-out median |log ratio| per pipe, before and after
    if folds and folds > 1 and len(data.shapes) >= 2:
        for j, held in enumerate(_folds(data.shapes, folds, seed)):
            train = data.take([s for s in data.shapes if s not in held])
            test = data.take(held)
            e = _fit(model, chip, train, start, names, prior_sigma=prior_sigma)
            before, after = _predict(model, chip, test, start), _predict(model, chip, test, e)
            if test.pipes:
                pipe_folds.append((pipe_errors(model, chip, test, start), pipe_errors(model, chip, test, e)))
            for i, s in enumerate(test.shapes):
                m = test.shape_of == i
                q = shape_quality(after[m], test.seconds[m])
                q0 = shape_quality(before[m], test.seconds[m])
                agree["before"].append(agreement(before[m], test.seconds[m]))
                agree["after"].append(agreement(after[m], test.seconds[m]))
                rows.append(
                    {
                        "fold": j,
                        "shape": s,
                        "measured_rows": int(m.sum()),
                        "err_before": q0["err"],
                        "err_after": q["err"],
                        "top1_before": q0["top1"],
                        "top1": q["top1"],
                        "top4": q["top4"],
                        "spearman_before": q0["spearman"],
                        "spearman": q["spearman"],
                    }
                )
    return pd.DataFrame(rows), agree, pipe_folds


def _cv_metrics(fold_df: pd.DataFrame, pipe_folds: list[tuple[dict, dict]]) -> dict[str, float]:
    """The k-fold's summary figures (medians and geometric means over the held-out shapes; per pipe, the median
    over the folds); empty without a k-fold."""
    if not len(fold_df):
        return {}
    metrics = {
        "cv_error_before": float(fold_df.err_before.median()),
        "cv_error_after": float(fold_df.err_after.median()),
        "cv_spearman": float(fold_df.spearman.mean()),
        "cv_spearman_before": float(fold_df.spearman_before.mean()),
        "cv_top1_geomean": float(np.exp(np.log(fold_df.top1).mean())),
        "cv_top1_min": float(fold_df.top1.min()),
        "cv_top1_before": float(np.exp(np.log(fold_df.top1_before).mean())),
        "cv_top4_geomean": float(np.exp(np.log(fold_df.top4).mean())),
    }
    for name_ in sorted({k for _, after_ in pipe_folds for k in after_}):
        metrics[f"cv_pipe_{name_}_before"] = float(np.median([b[name_] for b, a in pipe_folds if name_ in a]))
        metrics[f"cv_pipe_{name_}_after"] = float(np.median([a[name_] for b, a in pipe_folds if name_ in a]))
    return metrics


def _beyond(model, chip: Chip, outside: Measured | None, start: dict, fitted: dict) -> dict[str, Agreement]:
    """The agreement of the model before and after the fit with the shapes never fitted (`fit_shapes` left them
    out); empty when there are none."""
    beyond: dict[str, Agreement] = {}
    if outside is not None and len(outside.shapes):
        for when, e in (("before", start), ("after", fitted)):
            p_ = _predict(model, chip, outside, e)
            beyond[when] = combine(
                [agreement(p_[outside.shape_of == i], outside.seconds[outside.shape_of == i])
                 for i in range(len(outside.shapes))]
            )  # fmt: skip
    return beyond


def calibrate(
    chip: Chip,
    op: str,
    measurements: pd.DataFrame,
    folds: int = 4,
    seed: int = 0,
    fit_shapes: list[str] | None = None,
    params: list[str] | None = None,
    data_name: str = "measurements",
    date: str | None = None,
    note: str = "",
    prior_sigma: float = PRIOR_SIGMA,
    unused: list | None = None,
) -> CalibrationResult:
    """Fit `chip`'s efficiency constants for `op` to `measurements` (columns as shared/data/h200_matmul_cal.csv).

    Args:
        folds: k of the k-fold cross-validation by shape (0 or 1: no cross-validation).
        seed: shuffles the shapes into folds.
        fit_shapes: shape labels (Problem.label(), matmul "MxNxK") to fit (and cross-validate) on; the file's
            other shapes are never fitted and are reported apart (`outside`: the agreement of the uncalibrated and
            the calibrated model with them). Default: all.
        params: constants to fit; default the operator's FITTABLE constants.
        data_name, date, note: name the data (and what was held out) in the `source` of every fitted value.
        prior_sigma: the spread of each constant's log-normal prior around its value before the fit, in log
            units (PRIOR_SIGMA: a factor e), each shape then weighing as one observation; math.inf fits with
            neither (every row alike).
        unused: rows the reader set aside, (row or line, why) (tiler.msprof's `unmatched`): counted with the rows
            the fit sets aside in the result's one `unused_text()` line.
    """
    t0 = time.perf_counter()
    model = _operator(op, chip.family)
    names = list(params or model.FITTABLE)
    unknown = [k for k in names if k not in model.FITTABLE]
    if unknown:
        raise TilerError(f"calibrate: cannot fit {', '.join(unknown)}; fittable: {', '.join(model.FITTABLE)}")
    data = load_measurements(chip, op, measurements)
    if fit_shapes is not None:
        missing = [s for s in fit_shapes if s not in data.shapes]
        if missing:
            raise TilerError(
                f"calibrate: no measured rows for shape(s) {', '.join(missing)}; have {', '.join(data.shapes)}"
            )
        outside = data.take([s for s in data.shapes if s not in fit_shapes]) if len(data.shapes) > 1 else None
        data = data.take(fit_shapes)
    else:
        outside = None
    start = model.constants(chip)
    fold_df, agree, pipe_folds = _cross_validate(model, chip, data, start, names, folds, seed, prior_sigma)
    fitted = _fit(model, chip, data, start, names, prior_sigma=prior_sigma)
    pred = _predict(model, chip, data, fitted)
    date = date or _dt.date.today().isoformat()
    basis = f"on {data_name} ({len(data.seconds)} rows, shapes {', '.join(data.shapes)}), {date}" + (
        f"; {note}" if note else ""
    )
    source = f"fitted by tiler calibrate {basis}"
    values = {k: float(f"{fitted[k]:.5g}") for k in names}
    choices = model.choices(chip, data, fitted)
    metrics = _cv_metrics(fold_df, pipe_folds)
    beyond = _beyond(model, chip, outside, start, fitted)
    choice_source = f"chosen by tiler calibrate: the value measured fastest {basis}"
    fitted_chip = chip.with_values(values, tag="fitted", source=source).with_values(
        {c.key: c.value for c in choices}, tag="fitted", source=choice_source
    )
    return CalibrationResult(
        fitted_chip,
        op,
        values,
        {k: start[k] for k in names},
        list(data.shapes),
        source,
        fold_df,
        metrics,
        float(np.median(np.abs(np.log(pred / data.seconds)))),
        time.perf_counter() - t0,
        choices,
        {k: combine(v) for k, v in agree.items()} if agree["after"] else {},
        data.defaulted,
        beyond,
        [*(unused or []), *data.dropped],
        "line" in measurements.columns,
    )


_SECTION = re.compile(r"^\[([^\]]+)\]\s*$")


def write_profile(result: CalibrationResult, path: str | Path) -> Path:
    """Write the calibrated profile. An existing profile of the same chip keeps its text (comments, order): only
    the sections holding a fitted value ([efficiency], and [bandwidth] or [overhead] when an Ascend fit moved a
    rate there) are rewritten; otherwise the whole profile is written from the schema."""
    from .hardware import _section_of
    from .io import check_writable, write_text

    check_writable(path, "out")  # a folder or a trailing '/': refused before reading anything
    path = Path(path)
    chip = result.chip
    if path.is_file():
        from .io import read_limited

        try:
            text = read_limited(path).decode("utf-8")  # at most tiler.io.FILE_BYTES_MAX bytes
        except (OSError, UnicodeDecodeError, ValueError) as exc:
            raise TilerError(f"out: {path}: cannot read: {getattr(exc, 'strerror', None) or exc}") from None
        if re.search(rf'^id\s*=\s*"{re.escape(chip.id)}"', text, re.MULTILINE):
            sections = {"efficiency"} | {_section_of(chip, k) for k in result.values}
            for section in sorted(sections):
                text = replace_section(text, section, efficiency_lines(chip, section))
            write_text(path, text, "out")
            return path
    write_text(path, dump_profile(chip), "out")  # atomic; missing folders are created (tiler.io)
    return path


def efficiency_lines(chip: Chip, section: str = "efficiency") -> list[str]:
    """The entries of one section of a profile ([efficiency] by default), one TOML line each."""
    from .hardware import _section_of

    out = []
    for key in chip.values:
        if _section_of(chip, key) != section:
            continue
        v = chip.values[key]
        src = chip.sources.get(key, "").replace('"', "'")
        out.append(f'{key} = {{ value = {v!r}, tag = "{chip.tags.get(key, "")}", source = "{src}" }}')
    return out


def replace_section(text: str, section: str, lines: list[str]) -> str:
    """`text` with the body of `[section]` replaced by `lines` (the section is appended when absent)."""
    src = text.splitlines()
    start = next(
        (i for i, ln in enumerate(src) if (m := _SECTION.match(ln)) and m.group(1).strip() == section), None
    )
    if start is None:
        return text.rstrip("\n") + f"\n\n[{section}]\n" + "\n".join(lines) + "\n"
    end = next((i for i in range(start + 1, len(src)) if _SECTION.match(src[i])), len(src))
    body = src[start + 1 : end]
    # keep comment lines that sit between the header and the first entry
    lead = []
    for ln in body:
        if ln.strip().startswith("#"):
            lead.append(ln)
        else:
            break
    tail = [""] if end < len(src) else []
    new = src[: start + 1] + lead + lines + tail + src[end:]
    out = "\n".join(new)
    return out if out.endswith("\n") else out + "\n"
