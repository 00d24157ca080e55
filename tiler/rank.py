"""Rank given candidate tilings (a measured table, a list from another tool) with the cost model.

`rank_candidates` takes a table as it comes (the shared CSV's columns, extra columns ignored), keeps the rows
for the problem at hand, validates every knob value with a message that names the row and the column, scores the
feasible rows and returns the rejected ones separately with the rule that rejected them.

Row numbers count data rows from 1 in the order of the table given (line 1 of a CSV file is its header, so row r is
on line r + 1).
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from .errors import SpaceError, TilerError
from .operator import get_operator, tie_preference
from .problem import Problem
from .space import OPEN_MAX, Space, load_space


def read_candidates(path, what: str | None = "--candidates", **read_csv) -> pd.DataFrame:
    """A CSV table (rank's candidates, calibrate's measurements, msprof's tables) with one-line errors naming `what`
    and the file: missing, a folder, not UTF-8 (binary, UTF-16), empty, not a table, or a column named twice (pandas
    would rename the second `X.1` and no check would see it). `read_csv`: extra pandas.read_csv arguments."""
    import csv
    import io

    from .space import read_text_file

    head = f"{what}: " if what else ""
    try:
        text = read_text_file(path, "file")
    except TilerError as exc:
        raise TilerError(f"{head}{exc}") from None
    if "\x00" in text:
        raise TilerError(f"{head}{path}: not a CSV table (it holds NUL bytes: a binary file?)")
    try:
        header = next(csv.reader(io.StringIO(text)), None)
    except csv.Error as exc:
        raise TilerError(f"{head}{path}: not a CSV table: {exc}") from None
    if not header or not any(h.strip() for h in header):
        raise TilerError(f"{head}{path}: empty file (no header, no rows)")
    names = [h.strip() for h in header]
    dup = next((n for i, n in enumerate(names) if n in names[:i]), None)
    if dup is not None:
        raise TilerError(f"{head}{path}: column {dup!r} appears twice in the header")
    try:
        return pd.read_csv(io.StringIO(text), **read_csv)
    except (ValueError, pd.errors.ParserError) as exc:  # EmptyDataError, ParserError are ValueErrors
        first = (str(exc).strip().splitlines() or [type(exc).__name__])[0]
        raise TilerError(f"{head}{path}: not a CSV table: {first}") from None


def numeric(col: pd.Series) -> np.ndarray:
    """A column's cells as float64: text that is no number is NaN, an integer beyond float's range is +-inf (pandas
    raises OverflowError on a 400-digit cell), so the callers' finiteness and range checks see every cell."""
    try:
        return pd.to_numeric(col, errors="coerce").to_numpy(dtype=np.float64)
    except (OverflowError, TypeError, ValueError):
        return np.array([_float(v) for v in col], dtype=np.float64)


def _float(v) -> float:
    try:
        return float(v)
    except OverflowError:  # an int (or its text) beyond float's range
        return float("-inf") if str(v).strip().startswith("-") else float("inf")
    except (TypeError, ValueError):
        return float("nan")


def select_rows(problem: Problem, df: pd.DataFrame, impls: tuple[str, ...] = ()) -> pd.DataFrame:
    """The rows of `df` for `problem` and the operator's kernel, with a 1-based `row` column added.

    Rows whose `impl` column names another implementation than `impls` (the operator's IMPLS; cuBLAS through
    torch, ...) are not tilings of the kernel and are skipped."""
    out = df.copy()
    out.insert(0, "row", np.arange(1, len(df) + 1))
    if "impl" in out.columns and impls:
        out = out[out["impl"].astype(str).str.strip().str.lower().isin(impls)]
    shape = problem.shape()
    if all(k in out.columns for k in problem.FIELDS):
        for k, v in shape.items():
            if k not in out.columns:
                continue
            if k in problem.CHOICES:  # a word: compared as text, an empty cell meaning the default
                text = out[k].astype(str).str.strip().str.lower()
                empty = text.isin(("", "nan", "none"))
                keep = (text == v) | (empty & (v == problem.OPTIONAL.get(k)))
                out = out[keep]
                continue
            col = pd.Series(numeric(out[k]), index=out.index)
            # an optional field (batch) left empty means its default
            keep = (col == v) | (col.isna() & (k in problem.OPTIONAL) & (v == problem.OPTIONAL.get(k)))
            out = out[keep]
        if "dtype" in out.columns:
            dt = out["dtype"].astype(str).str.strip().str.lower()
            out = out[(dt == problem.dtype) | dt.isin(("", "nan", "none"))]
    return out


def parse_knobs(df: pd.DataFrame, space: Space) -> tuple[dict[str, np.ndarray], np.ndarray, list[str]]:
    """Knob columns of `df` (which has a `row` column) as int64 candidate columns.

    Missing column or a value that is not a number (or a label of a categorical knob): TilerError naming the
    column (and the row). A number outside a closed domain, or not an integer, is not an error of the file: the
    row is returned as rejected with the reason (mask False, reason text).
    """
    df = df.rename(columns={n: k for k, n in space.spelled(df.columns).items() if n != k})
    for k in space.names:
        if k not in df.columns:
            raise SpaceError(
                f"candidates: missing column {k!r}; a {space.op}/{space.family} tiling needs "
                f"{', '.join(space.names)}"
            )
    n = len(df)
    ok = np.ones(n, dtype=bool)
    why = np.array([""] * n, dtype=object)
    cols: dict[str, np.ndarray] = {}
    rows = df["row"].to_numpy()
    for k, knob in space.knobs.items():
        raw = df[k]
        text = raw.astype(str).str.strip()
        num = numeric(raw)
        if knob.labels:  # a categorical knob may be given by label
            for code, label in zip(knob.values, knob.labels, strict=True):
                num = np.where(text.to_numpy() == label, float(code), num)
        bad = ~np.isfinite(num)
        if bad.any():
            i = int(np.nonzero(bad)[0][0])
            raise TilerError(
                f"candidates: row {rows[i]}: column {k!r} must be a number"
                + (f" or one of {', '.join(knob.labels)}" if knob.labels else "")
                + f", got {raw.iloc[i]!r}"
            )
        whole = num == np.round(num)
        inside = np.isin(num, np.asarray(knob.values, dtype=np.float64)) | (
            knob.open & (num > 0) & (num <= OPEN_MAX)
        )
        out = ~(whole & inside)
        first = out & ok
        why[first] = [f"domain: {k} must be one of {knob.allowed()}, got {t}" for t in text.to_numpy()[first]]
        ok &= ~out
        # a rejected row holds a valid stand-in (the knob's first value), so the models never see 0 or garbage
        cols[k] = np.where(out, knob.values[0], num).astype(np.int64)
    why = list(why)
    return cols, ok, why


def rank_candidates(
    problem: Problem, chip, df: pd.DataFrame, space: Space | None = None
) -> tuple[pd.DataFrame, pd.DataFrame]:
    """Score the candidate tilings in `df` for `problem` on `chip`.

    Returns (ranked, rejected): `ranked` holds the feasible rows, best first, with the model's estimate
    (`predicted_us`, `bound`, ...) and `rank` (1 = predicted fastest; ties share a rank); `rejected` holds the rows
    a capacity or domain rule rejects, with `rule` and `reason`. Both keep the input columns and `row`.
    """
    space = space or load_space(problem.OP, chip.family)
    model = get_operator(problem.OP, chip.family, space.target)
    model.admit(problem, chip)
    sel = select_rows(problem, df, model.IMPLS).reset_index(drop=True)
    if len(df) and not len(sel):  # an empty ranking would look like "nothing feasible": say why instead
        fields = [k for k in problem.FIELDS if k in df.columns]
        seen = df[fields].drop_duplicates().head(3) if fields else df.iloc[:0]
        shapes = "; ".join(",".join(f"{k}={v}" for k, v in r.items()) for r in seen.to_dict("records"))
        raise TilerError(
            f"candidates: none of the {len(df)} rows is a {'/'.join(model.IMPLS) or 'kernel'} tiling for "
            f"{problem.label()}" + (f": the file's shape columns hold {shapes}" if shapes else "")
        )
    from .search.complete import complete_rows

    sel = complete_rows(problem, chip, space, sel)  # partial rows, or rows in a target's names: completed
    cands, ok, why = parse_knobs(sel, space)
    rule = np.array(["domain" if w else "" for w in why], dtype=object)
    reason = np.array(why, dtype=object)
    if len(sel):
        masks = model.masks(problem, chip, cands)
        for r, m in masks.items():
            new = ok & ~m
            rule[new] = r
            reason[new] = model.RULE_TEXT.get(r, r)
            ok &= m
    rejected = sel[~ok].assign(rule=rule[~ok], reason=reason[~ok])
    good = sel[ok].copy()
    for k in space.knobs:  # knob columns read as floats when other rows (cuBLAS) left them empty
        if k in good and len(good):
            good[k] = cands[k][ok]
    if len(good):
        est = model.estimate(problem, chip, {k: v[ok] for k, v in cands.items()})
        good["predicted_us"] = est["time_us"]
        for k in ("bound", "waves", "cores_used", "l2_hit_rate"):
            if k in est:
                good[k] = est[k]
        good["rank"] = good["predicted_us"].rank(method="min").astype(np.int64)
        # exact ties: the order the model prefers first (search.top_distinct), then the input order
        prefer = tie_preference(model, problem, chip, {k: v[ok] for k, v in cands.items()})
        tie = np.zeros(len(good), dtype=np.int8) if prefer is None else prefer
        good = good.assign(_tie=tie).sort_values(["rank", "_tie", "row"], kind="stable").drop(columns="_tie")
    else:
        good["predicted_us"] = pd.Series(dtype=float)
        good["rank"] = pd.Series(dtype=np.int64)
    return good.reset_index(drop=True), rejected.reset_index(drop=True)


def diverse_rows(ranked: pd.DataFrame, shape_knobs, depth_knob: str = "") -> pd.DataFrame:
    """`ranked` (rank_candidates' table, best first) in the diverse order (search.result.diverse_order): the best
    row of each distinct tile shape (`shape_knobs`, the operator's SHAPE_KNOBS) first, a hedge on the pipeline
    depth (`depth_knob`, the operator's DEPTH_KNOB; without one the best tile's runner-up) 4th, then the rest,
    with a `gap` column (predicted time over the best)."""
    from .search.result import diverse_order

    if not len(ranked):
        return ranked.assign(gap=pd.Series(dtype=float))
    cands = {k: ranked[k].to_numpy() for k in (*shape_knobs, depth_knob) if k and k in ranked.columns}
    order, gap = diverse_order(cands, ranked["predicted_us"].to_numpy(), shape_knobs, depth_knob)
    return ranked.iloc[order].assign(gap=gap).reset_index(drop=True)
