"""Fit a profile's constants from kernel totals alone: rows that give a problem and a measured time, not the tiling.

A tuned library's kernel time (torch.matmul through CANN, a CATLASS example, an msprof op_summary of a model run)
says how fast the problem ran, not which tiling ran it. The model's best tiling stands in for the library's: search
the optimum under the current constants, fit the constants to the measured totals at those tilings (tiler.calibrate's
fit, the same robust least squares on log time), search again under the new constants, a few rounds, since the
optimum moves with the constants. Where one problem has several measured kernels, the fastest stands for it (the
slower ones ran tilings the optimum is not; fitting them would make the model pessimistic); every row is reported.

The k-fold holds whole shapes out (every dtype of one shape in the same fold), fits on the other shapes and compares
each held-out row with the model's optimum under that fold's constants: whether the model's best is as fast as the
library's on problems the fit never saw. Only the constants a total can pin are fitted by default (the operator's
FIT_FROM_TOTALS: efficiencies and fixed costs); rates of one pipe need that pipe's measured time.
"""

from __future__ import annotations

import datetime as _dt
import math
import time
from dataclasses import dataclass, field

import numpy as np
import pandas as pd

from .calibrate import SOFT_L1, TIME_MAX_S, _fit, _folds, _operator, _time_column, load_measurements
from .errors import TilerError
from .hardware import Chip
from .operator import problem_class
from .problem import Problem, parse_problem
from .rank import numeric
from .space import load_space

BAND = (
    0.8,
    1.25,
)  # measured / model ratios counted as a match (the acceptance band of the Ascend calibration)
ROUNDS = 3  # search <-> fit rounds; the optimum's tiling rarely changes after the second


@dataclass
class TotalsResult:
    """A fit from totals: the fitted profile, and per measured row the model's optimum before, after (fitted on
    all rows) and held out (the k-fold: fitted without the row's shape)."""

    chip: Chip  # the profile with the fitted values (tag "fitted")
    op: str
    values: dict[str, float]
    start: dict[str, float]
    source: str
    rows: (
        pd.DataFrame
    )  # the input columns + label, measured_us, model_before_us, model_us, cv_model_us, bound, ...
    rounds: int  # search <-> fit rounds of the final fit
    metrics: dict[str, float] = field(default_factory=dict)
    seconds: float = 0.0
    fit_shapes: list[str] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)  # lines about input rows not used (an op_summary's others)
    starts: list[dict] = field(
        default_factory=list
    )  # the fit's starting points (values put into the profile's)
    floors: dict[str, tuple[float, str]] = field(
        default_factory=dict
    )  # box floors the totals proved (floors)

    def summary(self) -> str:
        """What was fitted, on what stand-in, and how the held-out rows compare with the model's optimum."""
        s = self.metrics
        lo, hi = BAND
        lines = [
            f"calibrated {self.chip.id}/{self.op} from totals on {len(self.fit_shapes)} problems in "
            f"{self.seconds:.1f} s: the tilings were not given, so the model's best tiling stood in for the "
            f"library's ({self.rounds} rounds of search <-> fit; per problem the fastest measured row"
            + (f"; the best of {len(self.starts)} starts: {self.starts}" if len(self.starts) > 1 else "")
            + ")",
            f"  in-sample: measured/model geomean {s['geomean']:.3f}, {s['in_band']:.0%} of rows in "
            f"[{lo}, {hi}] (before the fit {s['geomean_before']:.3f}, {s['in_band_before']:.0%})",
        ]
        if "cv_geomean" in s:
            lines.append(
                f"  k-fold by shape ({int(s['cv_folds'])} folds, rows held out of the fit): measured/model geomean "
                f"{s['cv_geomean']:.3f}, {s['cv_in_band']:.0%} of rows in [{lo}, {hi}], median |log ratio| "
                f"{s['cv_error']:.3f} (uncalibrated {s['error_before']:.3f})"
            )
        lines += [
            f"  {k} >= {v:.4g}: the floor {label}'s measured total proves (the operator's totals_floors)"
            for k, (v, label) in self.floors.items()
        ]
        lines += [
            f"  {k} = {v:.4g} (was {self.start[k]:.4g}){' moved' if abs(math.log(v / self.start[k])) > 0.01 else ''}"
            for k, v in self.values.items()
        ]
        return "\n".join(lines)

    report = summary
    __str__ = summary


def has_tilings(op: str, family: str, df: pd.DataFrame) -> bool:
    """Whether a measurement table names any knob (then it is fitted at its tilings, tiler.calibrate)."""
    return bool(load_space(op, family).spelled(df.columns))


def _problems(op: str, df: pd.DataFrame) -> tuple[list[Problem], np.ndarray, np.ndarray]:
    """The distinct problems of the rows, each row's problem index, and each row's measured time (seconds)."""
    cls = problem_class(op)
    missing = [k for k in cls.FIELDS if k not in df.columns]
    if missing:
        raise TilerError(f"measurements: missing column(s) {', '.join(missing)}")
    tcol, scale = _time_column(df)
    secs = numeric(df[tcol]) * scale
    keys = [k for k in (*cls.FIELDS, *cls.OPTIONAL) if k in df.columns]
    problems: list[Problem] = []
    index: dict[str, int] = {}
    of = np.empty(len(df), dtype=np.int64)
    for i, rec in enumerate(df.to_dict("records")):
        if not (np.isfinite(secs[i]) and 0 < secs[i] <= TIME_MAX_S):
            raise TilerError(
                f"measurements: row {i + 1}: column {tcol!r} must be a positive number of at most "
                f"{TIME_MAX_S / scale:g} (one hour)"
            )
        dtype = rec.get("dtype")
        p = parse_problem(
            op, {k: rec[k] for k in keys}, dtype=None if pd.isna(dtype) else str(dtype), strict=False
        )
        of[i] = index.setdefault(p.key(), len(problems))
        if of[i] == len(problems):
            problems.append(p)
    return problems, of, secs


class _Optima:
    """The model's best tiling of a problem under a chip's constants, each searched once per fit.

    A fit searches the same problem under the same constants again and again: every fold's first round and the
    final fit's start from the profile's constants, as the uncalibrated optimum does. The exhaustive search is
    deterministic and reads only the chip's values, so its answer is kept per (chip values, problem) for the one
    calibration (the space and the operator cannot change under it) and handed out as a fresh copy."""

    def __init__(self, op: str) -> None:
        self.op = op
        self._done: dict[tuple[str, str, str], tuple[dict, float, str]] = {}

    def __call__(self, chip: Chip, problems: list[Problem]) -> tuple[list[dict], np.ndarray, list[str]]:
        """The best tiling of each problem (an exhaustive search), its time (seconds) and its bound."""
        found = [self._one(chip, p) for p in problems]
        return [dict(t) for t, _, _ in found], np.array([s for _, s, _ in found]), [b for _, _, b in found]

    def _one(self, chip: Chip, p: Problem) -> tuple[dict, float, str]:
        key = (chip.id, chip.profile_hash, p.key())
        if key not in self._done:
            self._done[key] = _search_best(self.op, chip, p)
        return self._done[key]


def _search_best(op: str, chip: Chip, p: Problem) -> tuple[dict, float, str]:
    """The model's best tiling of `p` (an exhaustive search), its time (seconds) and its bound."""
    from .search import search as run_search

    res = run_search(p, chip, load_space(op, chip.family), strategy="exhaustive", top=1)
    row = res.row(0)
    return res.tiling(0), float(row["time_us"]) * 1e-6, str(row["bound"])


def floors(model, chip: Chip, problems, best_s, names) -> dict[str, tuple[float, str]]:
    """The lower limits the measured totals prove on fitted constants (the operator's `totals_floors`, e.g. no
    kernel runs its MMADs faster than the cube's peak at the fitted efficiency allows): per constant the highest
    floor any problem's fastest total gives, above the operator's box floor, and that problem's label."""
    out: dict[str, tuple[float, str]] = {}
    proof = getattr(model, "totals_floors", None)
    if proof is None:
        return out
    for p, s in zip(problems, best_s, strict=True):
        for k, v in proof(p, chip, float(s)).items():
            lo, hi = model.FITTABLE[k]
            v = min(v, hi)
            if k in names and v > max(lo, out.get(k, (lo, ""))[0]):
                out[k] = (v, p.label())
    return out


def _boxes(model, chip: Chip, problems, best_s, names) -> dict:
    """The fit's boxes: the operator's FITTABLE with each floor raised to what these problems' totals prove."""
    raised = floors(model, chip, problems, best_s, names)
    return {k: (raised[k][0], model.FITTABLE[k][1]) if k in raised else model.FITTABLE[k] for k in names}


def _fit_rounds(
    model, chip: Chip, optimum: _Optima, problems, best_s, names, start, rounds: int
) -> tuple[dict, int]:
    """Search <-> fit until the constants stop moving (or `rounds`): the optimum under the constants stands in for
    the library's tiling, and the constants are fitted to the measured totals at those tilings, inside the boxes
    the totals leave (_boxes)."""
    boxes = _boxes(model, chip, problems, best_s, names)
    e = dict(start, **{k: min(max(start[k], boxes[k][0]), boxes[k][1]) for k in names})
    for done in range(1, rounds + 1):  # noqa: B007 (the rounds run are returned)
        tuned = chip.with_values({k: e[k] for k in names})
        tilings, _, _ = optimum(tuned, problems)
        table = pd.DataFrame(
            [
                {**p.shape(), "dtype": p.dtype, **t, "time_us": s * 1e6}
                for p, t, s in zip(problems, tilings, best_s, strict=True)
            ]
        )
        new = _fit(
            model,
            chip,
            load_measurements(chip, optimum.op, table),
            e,
            names,
            prior_sigma=math.inf,
            boxes=boxes,
        )
        moved = max(abs(math.log(new[k] / e[k])) for k in names)
        e = new
        if moved < 1e-3:
            break
    return e, done


def _best_start(
    model, chip: Chip, optimum: _Optima, problems, best_s, names, starts, rounds: int
) -> tuple[dict, int]:
    """_fit_rounds from each start (the profile's constants with a start's values put in); the fit whose optimum
    matches the totals best (the soft-L1 loss of log(optimum / measured), the fit's own robust loss) wins. The
    optimum jumps between tilings as the constants move, so the loss has local minima: one start can stop in one.
    With one start there is nothing to compare, so its loss is not searched for."""
    best = None
    for over in starts:
        e, done = _fit_rounds(
            model, chip, optimum, problems, best_s, names, dict(start_of(model, chip), **over), rounds
        )
        if len(starts) == 1:
            return e, done
        _, t, _ = optimum(chip.with_values({k: e[k] for k in names}), problems)
        r = np.log(t / best_s)
        loss = float(np.sum(np.sqrt(1.0 + (r / SOFT_L1) ** 2) - 1.0))
        if best is None or loss < best[0]:
            best = (loss, e, done)
    return best[1], best[2]


def start_of(model, chip: Chip) -> dict:
    """The constants a fit starts from: the profile's (the operator's defaults where it has none)."""
    return model.constants(chip)


def _ratios(measured: np.ndarray, model: np.ndarray) -> dict[str, float]:
    r = measured / model
    return {
        "geomean": float(np.exp(np.log(r).mean())),
        "in_band": float(np.mean((r >= BAND[0]) & (r <= BAND[1]))),
        "error": float(np.median(np.abs(np.log(r)))),
    }


def calibrate_totals(
    chip: Chip,
    op: str,
    measurements: pd.DataFrame,
    folds: int = 4,
    seed: int = 0,
    params: list[str] | None = None,
    rounds: int = ROUNDS,
    starts: list[dict] | None = None,
    data_name: str = "measurements",
    date: str | None = None,
    note: str = "",
) -> TotalsResult:
    """Fit `chip`'s constants for `op` to measured totals (problem columns, optional dtype, a time column; no knob
    column), the model's best tiling standing in for the one that ran. See the module docstring.

    starts: the fit's starting points, each a dict of constants put into the profile's (default: the profile's
    alone); the fit that matches the totals best is kept (_best_start)."""
    t0 = time.perf_counter()
    model = _operator(op, chip.family)
    names = list(params or getattr(model, "FIT_FROM_TOTALS", None) or model.FITTABLE)
    unknown = [k for k in names if k not in model.FITTABLE]
    if unknown:
        raise TilerError(f"calibrate: cannot fit {', '.join(unknown)}; fittable: {', '.join(model.FITTABLE)}")
    if not 1 <= rounds <= 20:
        raise TilerError(f"rounds: must be an integer in 1..20, got {rounds}")
    df = measurements.reset_index(drop=True)
    problems, of, secs = _problems(op, df)
    best_s = np.array([secs[of == i].min() for i in range(len(problems))])
    start = start_of(model, chip)
    starts = starts or [{}]
    bad = sorted({k for over in starts for k in over if k not in names})
    if bad:
        raise TilerError(f"starts: {', '.join(bad)} not fitted; fitted: {', '.join(names)}")
    shape_of = [
        p.label().split(":")[0] for p in problems
    ]  # the shape without the dtype: folds hold out all dtypes
    optimum = _Optima(op)
    _, before_s, _ = optimum(chip, problems)
    cv = np.full(len(df), np.nan)
    cv_fold = np.full(len(df), -1)
    shapes = sorted(set(shape_of))
    n_folds = 0
    if folds and folds > 1 and len(shapes) >= 2:
        for j, held in enumerate(_folds(shapes, folds, seed)):
            train = [i for i, s in enumerate(shape_of) if s not in held]
            test = [i for i, s in enumerate(shape_of) if s in held]
            if not train or not test:
                continue
            e, _ = _best_start(
                model, chip, optimum, [problems[i] for i in train], best_s[train], names, starts, rounds
            )
            _, t_s, _ = optimum(chip.with_values({k: e[k] for k in names}), [problems[i] for i in test])
            for i, t in zip(test, t_s, strict=True):
                cv[of == i] = t
                cv_fold[of == i] = j
            n_folds += 1
    fitted, done = _best_start(model, chip, optimum, problems, best_s, names, starts, rounds)
    values = {k: float(f"{fitted[k]:.5g}") for k in names}
    date = date or _dt.date.today().isoformat()
    source = (
        f"fitted by tiler calibrate from totals (the model's best tiling standing in for the library's) on "
        f"{data_name} ({len(df)} rows, {len(problems)} problems), {date}" + (f"; {note}" if note else "")
    )
    out_chip = chip.with_values(values, tag="fitted", source=source)
    _, after_s, bounds = optimum(out_chip, problems)
    rows = df.copy()
    rows["label"] = [problems[i].label() for i in of]
    rows["measured_us"] = secs * 1e6
    rows["model_before_us"] = before_s[of] * 1e6
    rows["model_us"] = after_s[of] * 1e6
    rows["bound"] = [bounds[i] for i in of]
    rows["cv_model_us"] = cv * 1e6
    rows["cv_fold"] = cv_fold
    metrics = {f"{k}_before": v for k, v in _ratios(secs, before_s[of]).items()}
    metrics.update(_ratios(secs, after_s[of]))
    if n_folds:
        ok = np.isfinite(cv)
        metrics.update({f"cv_{k}": v for k, v in _ratios(secs[ok], cv[ok]).items()})
        metrics["cv_folds"] = float(n_folds)
    return TotalsResult(
        out_chip,
        op,
        values,
        {k: start[k] for k in names},
        source,
        rows,
        done,
        metrics,
        time.perf_counter() - t0,
        [p.label() for p in problems],
        starts=list(starts),
        floors=floors(model, chip, problems, best_s, names),
    )
