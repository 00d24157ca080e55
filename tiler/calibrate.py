"""Fit a profile's [efficiency] constants to measured kernel latencies, and say how well the fit generalises.

`calibrate()` minimises the squared log error of the model over the measured rows (a Levenberg-Marquardt search
in log-parameter space with a finite-difference Jacobian, soft-L1 weights against outliers; numpy only). It first
runs a k-fold cross-validation *by shape* (every fold's shapes are held out of its fit) and reports the error and the
ranking quality on the held-out shapes, then fits once on all shapes given. `write_profile()` writes the result.

Only the constants the model documents as fittable are moved (tiler.model.matmul_cuda.FITTABLE); datasheet numbers
(SM count, clock, bandwidths, capacities) are never touched.
"""

from __future__ import annotations

import datetime as _dt
import re
import time
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import pandas as pd

from .errors import TilerError
from .hardware import Chip, dump_profile
from .problem import parse_problem
from .rank import parse_knobs, select_rows
from .space import load_space

# per-constant search box (values, not logs); anything outside is unphysical
BOUNDS = {
    "mma_efficiency_v3": (0.3, 1.0),
    "mma_n_half": (0.5, 256.0),
    "mma_efficiency_v2": (0.1, 1.0),
    "sm_load_bytes_per_cycle": (8.0, 256.0),
    "l2_efficiency": (0.5, 3.0),
    "hbm_efficiency": (0.3, 1.0),
    "latency_scale": (0.5, 8.0),
    "step_overhead_cycles": (1.0, 5000.0),
    "program_overhead_cycles": (1.0, 1e5),
    "overlap_power": (1.0, 32.0),
    "atomic_gelems_per_s": (5.0, 5000.0),
    "extra_kernel_us": (0.01, 50.0),
    "unaligned_elems_per_cycle": (0.1, 64.0),
    "spill_cycles_per_reg": (0.1, 1e4),
    "smem_bytes_per_cycle": (16.0, 512.0),
}
TIME_COLUMNS = {"ms": 1e-3, "time_ms": 1e-3, "us": 1e-6, "time_us": 1e-6, "s": 1.0}
SOFT_L1 = 0.25  # |log ratio| above which a row's weight starts to fall (robust fit; a 28% miss)
NEAR_BEST = 0.5  # log(measured / shape's best) at which a row's weight has fallen to 1/2


@dataclass
class Measured:
    """Measured rows of several problems, prepared for fast re-timing with new constants."""

    shapes: list[str]  # one key per problem, e.g. "4096x4096x4096"
    shape_of: np.ndarray  # row -> index into shapes
    seconds: np.ndarray  # measured time per row
    prepared: dict  # model.prepare() columns, all rows
    rows: pd.DataFrame  # the rows used (input columns + `row`)

    def take(self, keep_shapes) -> Measured:
        idx = [self.shapes.index(s) for s in keep_shapes]
        m = np.isin(self.shape_of, idx)
        remap = {old: new for new, old in enumerate(idx)}
        return Measured(
            [self.shapes[i] for i in idx],
            np.array([remap[i] for i in self.shape_of[m]]),
            self.seconds[m],
            {k: v[m] for k, v in self.prepared.items()},
            self.rows[m].reset_index(drop=True),
        )


@dataclass
class TieChoice:
    """The launch order reported for exact ties on one load path, and the evidence for it."""

    key: str  # the profile key (tie_order_async / tie_order_sync)
    code: int  # 0 row-major, -1 serpentine, g > 0 grouped by g
    was: int
    groups: int  # tied groups of measured orders the choice was made on
    score: dict[int, float]  # per order code: geomean of (group's best / its time), over the groups it was in

    def __str__(self) -> str:
        names = ", ".join(
            f"{order_name(c)} {v:.3f}" for c, v in sorted(self.score.items(), key=lambda x: -x[1])
        )
        return (
            f"{self.key} = {self.code} ({order_name(self.code)}; was {order_name(self.was)}): "
            f"{self.groups} groups of exactly tied orders, geomean of best/time: {names or 'no data'}"
        )


def order_name(code: int) -> str:
    return "row-major" if code == 0 else "serpentine" if code == -1 else f"grouped {code}"


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
    ties: list[TieChoice] = field(default_factory=list)  # the launch orders chosen for exact ties

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
        lines += [f"  {k} = {v:.4g} (was {self.start[k]:.4g})" for k, v in self.values.items()]
        lines += [f"  {t}" for t in self.ties]
        return "\n".join(lines)

    report = summary
    __str__ = summary


def _model_module(op: str, family: str):
    if (op, family) != ("matmul", "cuda"):
        raise TilerError(
            f"calibrate: only matmul on the cuda family has fittable constants (got {op}/{family})"
        )
    from .model import matmul_cuda

    return matmul_cuda


def _time_column(df: pd.DataFrame) -> tuple[str, float]:
    for c, scale in TIME_COLUMNS.items():
        if c in df.columns:
            return c, scale
    raise TilerError(f"measurements: no time column; expected one of {', '.join(TIME_COLUMNS)}")


def load_measurements(chip: Chip, op: str, df: pd.DataFrame) -> Measured:
    """Validate a measurement table (the shared CSV's columns) and prepare its rows per problem."""
    mod = _model_module(op, chip.family)
    space = load_space(op, chip.family)
    from .problem import problem_class

    cls = problem_class(op)
    missing = [k for k in cls.FIELDS if k not in df.columns]
    if missing:
        raise TilerError(f"measurements: missing column(s) {', '.join(missing)}")
    tcol, scale = _time_column(df)
    dtype_col = "dtype" in df.columns
    keys = [k for k in (*cls.FIELDS, *cls.OPTIONAL) if k in df.columns] + (["dtype"] if dtype_col else [])
    base = df.copy()
    if "impl" in base.columns:
        base = base[base["impl"].astype(str).str.strip().str.lower() == "triton"]
    shapes, shape_of, secs, parts, rows = [], [], [], [], []
    for vals, _ in base.groupby(keys, sort=True, dropna=False):
        fields = dict(zip(keys, vals if isinstance(vals, tuple) else (vals,), strict=True))
        p = parse_problem(
            op,
            {k: v for k, v in fields.items() if k != "dtype"},
            dtype=str(fields["dtype"]) if dtype_col else None,
            strict=False,
        )
        sel = select_rows(p, chip.family, df).reset_index(drop=True)
        cands, ok, _ = parse_knobs(sel, space)
        model = mod.MatmulCuda()
        for m in model.feasible(p, chip, cands).values():
            ok &= m
        t = pd.to_numeric(sel[tcol], errors="coerce").to_numpy() * scale
        bad = ~np.isfinite(t) | (t <= 0)
        if (bad & ok).any():
            r = int(sel["row"].to_numpy()[np.nonzero(bad & ok)[0][0]])
            raise TilerError(f"measurements: row {r}: column {tcol!r} must be a positive number")
        if not ok.any():
            continue
        key = (
            f"{p.M}x{p.N}x{p.K}"
            + (f"x{p.batch}" if p.batch != 1 else "")
            + ("" if p.dtype == "fp16" else f":{p.dtype}")
        )
        shapes.append(key)
        shape_of.append(np.full(int(ok.sum()), len(shapes) - 1))
        secs.append(t[ok])
        parts.append(mod.prepare(p, chip, {k: v[ok] for k, v in cands.items()}))
        rows.append(sel[ok])
    if not shapes:
        raise TilerError("measurements: no feasible triton rows to fit")
    return Measured(
        shapes,
        np.concatenate(shape_of),
        np.concatenate(secs),
        mod.concat(parts),
        pd.concat(rows, ignore_index=True),
    )


def _predict(mod, chip, data: Measured, e: dict) -> np.ndarray:
    return mod.timing(data.prepared, chip, e)["time_us"] * 1e-6


def _fit(mod, chip, data: Measured, start: dict, names: list[str], iters: int = 40) -> dict:
    """Levenberg-Marquardt on log(pred/measured) over log-constants, soft-L1 reweighted, clipped to BOUNDS."""
    lo = np.log([BOUNDS[k][0] for k in names])
    hi = np.log([BOUNDS[k][1] for k in names])
    u = np.clip(np.log([start[k] for k in names]), lo, hi)
    y = np.log(data.seconds)
    # rows near their shape's best matter most (that is where the choice is made): weight by closeness
    best = np.array([data.seconds[data.shape_of == i].min() for i in range(len(data.shapes))])[data.shape_of]
    near = np.sqrt(1.0 / (1.0 + (np.log(data.seconds / best) / NEAR_BEST) ** 2))

    def resid(uu):
        e = dict(start, **{k: float(np.exp(v)) for k, v in zip(names, uu, strict=True)})
        return np.log(_predict(mod, chip, data, e)) - y

    def weights(r):
        return near / np.sqrt(np.sqrt(1.0 + (r / SOFT_L1) ** 2))  # sqrt of the soft-L1 IRLS weight

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


TIE_MIN_GROUPS = 5  # an order must be measured in this many tied groups of a load path to be chosen


def choose_tie_orders(mod, chip: Chip, data: Measured, e: dict) -> list[TieChoice]:
    """For each load path, the launch order that measured fastest where the model predicts orders exactly equal.

    Rows of one shape and one tiling (all knobs but the order) that the model times identically form a group; an
    order's score is the geometric mean, over the groups where it was measured, of the group's best time over its
    time (1.0 = always the fastest). The best-scoring order measured in at least TIE_MIN_GROUPS groups wins; with
    less data the profile's value stays. The model's times do not change: only which tie the search reports.
    """
    if not hasattr(mod, "order_code"):
        return []
    pred = mod.timing(data.prepared, chip, e)["time_us"]
    rows = data.rows
    knobs = [k for k in mod.KNOBS if k not in mod.ORDER_KNOBS]
    parts = []
    for i in range(len(data.shapes)):
        m = data.shape_of == i
        r = rows[m]
        p = parse_problem("matmul", {k: int(r[k].iloc[0]) for k in ("M", "N", "K")}, strict=False)
        cands = {k: r[k].to_numpy(dtype=np.int64) for k in mod.KNOBS}
        parts.append(
            pd.DataFrame(
                {
                    "shape": i,
                    "sync": mod.synchronous_loads(p),
                    "code": mod.order_code(p, cands, effective=False),
                    "pred": pred[m],
                    "t": data.seconds[m],
                    **{k: cands[k] for k in knobs},
                }
            )
        )
    df = pd.concat(parts, ignore_index=True)
    group = ["shape", *knobs, "pred"]
    df = df.groupby([*group, "sync", "code"], as_index=False)["t"].median()  # one time per order of a group
    df["orders"] = df.groupby(group)["code"].transform("size")
    df = df[df["orders"] >= 2]
    df["eff"] = df.groupby(group)["t"].transform("min") / df["t"]
    out = []
    for sync, key in ((False, "tie_order_async"), (True, "tie_order_sync")):
        d = df[df["sync"] == sync]
        was = int(round(float(chip.get(key, mod.DEFAULTS[key]))))
        counts = d.groupby("code").size()
        score = {int(c): float(np.exp(np.log(v).mean())) for c, v in d.groupby("code")["eff"]}
        ok = {c: v for c, v in score.items() if counts[c] >= TIE_MIN_GROUPS}
        code = max(ok, key=lambda c: (ok[c], c == 0)) if ok else was
        out.append(TieChoice(key, code, was, int(d.groupby(group).ngroups), score))
    return out


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
) -> CalibrationResult:
    """Fit `chip`'s efficiency constants for `op` to `measurements` (columns as shared/data/h200_matmul_cal.csv).

    Args:
        folds: k of the k-fold cross-validation by shape (0 or 1: no cross-validation).
        seed: shuffles the shapes into folds.
        fit_shapes: shape keys ("MxNxK") to use; the others are ignored (kept for testing). Default: all.
        params: constants to fit; default the model's FITTABLE list.
        data_name, date, note: name the data (and what was held out) in the `source` of every fitted value.
    """
    t0 = time.perf_counter()
    mod = _model_module(op, chip.family)
    names = list(params or mod.FITTABLE)
    unknown = [k for k in names if k not in BOUNDS]
    if unknown:
        raise TilerError(f"calibrate: cannot fit {', '.join(unknown)}; fittable: {', '.join(mod.FITTABLE)}")
    data = load_measurements(chip, op, measurements)
    if fit_shapes is not None:
        missing = [s for s in fit_shapes if s not in data.shapes]
        if missing:
            raise TilerError(
                f"calibrate: no measured rows for shape(s) {', '.join(missing)}; have {', '.join(data.shapes)}"
            )
        data = data.take(fit_shapes)
    start = mod.efficiency(chip)
    rows = []
    if folds and folds > 1 and len(data.shapes) >= 2:
        for j, held in enumerate(_folds(data.shapes, folds, seed)):
            train = data.take([s for s in data.shapes if s not in held])
            test = data.take(held)
            e = _fit(mod, chip, train, start, names)
            before, after = _predict(mod, chip, test, start), _predict(mod, chip, test, e)
            for i, s in enumerate(test.shapes):
                m = test.shape_of == i
                q = shape_quality(after[m], test.seconds[m])
                q0 = shape_quality(before[m], test.seconds[m])
                rows.append(
                    {
                        "fold": j,
                        "shape": s,
                        "rows": int(m.sum()),
                        "err_before": q0["err"],
                        "err_after": q["err"],
                        "top1_before": q0["top1"],
                        "top1": q["top1"],
                        "top4": q["top4"],
                        "spearman_before": q0["spearman"],
                        "spearman": q["spearman"],
                    }
                )
    fold_df = pd.DataFrame(rows)
    fitted = _fit(mod, chip, data, start, names)
    pred = _predict(mod, chip, data, fitted)
    date = date or _dt.date.today().isoformat()
    basis = f"on {data_name} ({len(data.seconds)} rows, shapes {', '.join(data.shapes)}), {date}" + (
        f"; {note}" if note else ""
    )
    source = f"fitted by tiler calibrate {basis}"
    values = {k: float(f"{fitted[k]:.5g}") for k in names}
    ties = choose_tie_orders(mod, chip, data, fitted)
    metrics = {}
    if len(fold_df):
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
    tie_source = (
        f"chosen by tiler calibrate: the order measured fastest among exactly tied predictions {basis}"
    )
    fitted_chip = chip.with_values(values, tag="fitted", source=source).with_values(
        {t.key: float(t.code) for t in ties}, tag="fitted", source=tie_source
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
        ties,
    )


_SECTION = re.compile(r"^\[([^\]]+)\]\s*$")


def write_profile(result: CalibrationResult, path: str | Path) -> Path:
    """Write the calibrated profile. An existing profile of the same chip keeps its text (comments, order): only
    its [efficiency] section is rewritten; otherwise the whole profile is written from the schema."""
    path = Path(path)
    chip = result.chip
    if path.is_file():
        text = path.read_text()
        if re.search(rf'^id\s*=\s*"{re.escape(chip.id)}"', text, re.M):
            path.write_text(replace_section(text, "efficiency", efficiency_lines(chip)))
            return path
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(dump_profile(chip))
    return path


def efficiency_lines(chip: Chip) -> list[str]:
    """The [efficiency] entries of a profile, one TOML line each."""
    from .hardware import _section_of

    out = []
    for key in chip.values:
        if _section_of(chip, key) != "efficiency":
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
