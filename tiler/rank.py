"""Rank given candidate tilings (a measured table, a list from another tool) with the cost model.

`rank_candidates` takes a table as it comes (the shared CSV's columns, extra columns ignored), keeps the rows
for the problem at hand, validates every knob value with a message that names the row and the column, scores the
feasible rows and returns the rejected ones separately with the rule that rejected them.

Knob columns the table does not have are filled in one of two ways. A table of tilings only (no measured time) is
completed with the model's best choice given the rest (tiler.search.complete). A table with measured times (a
column of `TIME_COLUMNS`) is not: the model's choice would change what was measured. Its missing knobs take the
value a kernel without that knob runs with, as the operator declares it (`Operator.ABSENT_DEFAULTS`; on CUDA
matmul no split-K, and a grouped or row-major launch), and a missing knob with no such default is an error naming
it. `measured_agreement` then says how well the model's ranking agrees with the clock (tiler.agreement).

Row numbers count data rows from 1 in the order of the table given (line 1 of a CSV file is its header, so row r is
on line r + 1).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pandas as pd

from .errors import SpaceError, TilerError
from .operator import absent_defaults, get_operator, tie_preference
from .problem import Problem
from .space import OPEN_MAX, Space, load_space

# a measured time's column -> seconds per unit; the first present is read (tiler calibrate and tiler rank)
TIME_COLUMNS = {
    "measured_us": 1e-6,
    "measured_ms": 1e-3,
    "measured_s": 1.0,
    "ms": 1e-3,
    "time_ms": 1e-3,
    "us": 1e-6,
    "time_us": 1e-6,
    "s": 1.0,
}


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
        header = next(csv.reader(_lines(text)), None)
    except csv.Error as exc:
        raise TilerError(f"{head}{path}: not a CSV table: {exc}") from None
    if not header or not any(h.strip() for h in header):
        raise TilerError(f"{head}{path}: empty file (no header, no rows)")
    names = [h.strip() for h in header]
    dup = next((n for i, n in enumerate(names) if n in names[:i]), None)
    if dup is not None:
        raise TilerError(f"{head}{path}: column {dup!r} appears twice in the header")
    try:  # bytes, not a StringIO: that holds 4 bytes a character (a 35 MB table took 140 MB more to read)
        return pd.read_csv(io.BytesIO(text.encode()), **read_csv)
    except (ValueError, pd.errors.ParserError) as exc:  # EmptyDataError, ParserError are ValueErrors
        first = (str(exc).strip().splitlines() or [type(exc).__name__])[0]
        raise TilerError(f"{head}{path}: not a CSV table: {first}") from None


def _lines(text: str):
    """The lines of `text` one at a time (csv.reader reads the header's only, without a copy of the file)."""
    start = 0
    while start < len(text):
        end = text.find("\n", start)
        end = len(text) if end < 0 else end + 1
        yield text[start:end]
        start = end


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
    torch, ...) are not tilings of the kernel and are skipped. Each test reads one column's cells of the rows the
    earlier tests kept, and the frame is cut once at the end (calibration selects each problem's rows from the
    whole table: a copy of the frame per field tested was most of the cost)."""
    keep = np.ones(len(df), dtype=bool)

    def cut(held: np.ndarray) -> None:
        keep[np.flatnonzero(keep)[~held]] = False

    if "impl" in df.columns and impls:
        cut(df["impl"].astype(str).str.strip().str.lower().isin(impls).to_numpy())
    if all(k in df.columns for k in problem.FIELDS):
        for k, v in problem.shape().items():
            if k in df.columns:
                cut(_field_matches(problem, k, v, df[k][keep]))
        if "dtype" in df.columns:
            dt = _words(df["dtype"][keep])
            cut((dt == problem.dtype) | _blank(dt))
    out = df[keep].copy()
    out.insert(0, "row", np.arange(1, len(df) + 1)[keep])
    return out


def _field_matches(problem: Problem, k: str, v, col: pd.Series) -> np.ndarray:
    """Per cell of `col` (the problem field `k`'s column), whether it holds `v`: a word compared as text, an empty
    cell meaning the default; a number compared as float64, an empty cell of an optional field (batch) its
    default."""
    if k in problem.CHOICES:
        text = _words(col)
        return (text == v) | (_blank(text) & (v == problem.OPTIONAL.get(k)))
    num = numeric(col)
    return (num == v) | (np.isnan(num) & (k in problem.OPTIONAL) & (v == problem.OPTIONAL.get(k)))


def _words(col: pd.Series) -> np.ndarray:
    """A column's cells as stripped lower-case text (an object array), for element-wise comparison with a word."""
    return col.astype(str).str.strip().str.lower().to_numpy()


def _blank(text: np.ndarray) -> np.ndarray:
    """Per cell of `_words`' text, whether it is empty ("", nan, none)."""
    return (text == "") | (text == "nan") | (text == "none")


def time_column(df: pd.DataFrame) -> tuple[str, float] | None:
    """(column, seconds per unit) of the measured time in `df` (the first of TIME_COLUMNS present), or None."""
    return next(((c, scale) for c, scale in TIME_COLUMNS.items() if c in df.columns), None)


def default_rows(problem: Problem, space: Space, df: pd.DataFrame, what: str = "--candidates"):
    """Measured rows (`df`, with its 1-based `row` column) with every knob column: a knob the table does not give
    takes its absent default (`absent_defaults`), never the model's best choice, which would change what was
    measured. Returns (table, defaulted: knob -> the values it took); the table gains a `defaulted` column naming
    the knobs filled per row. A knob with no declared default is an error naming it and `what` (the flag).

    A table that names every knob is returned as it is. Names a target's code generator uses (CATLASS, TCubeTiling
    fields) are read as in tiler.search.complete.to_knobs."""
    from .search.complete import to_knobs

    spelled = space.spelled(df.columns)
    if len(spelled) == len(space.knobs) or not len(df):
        return df, {}
    model = get_operator(space.op, space.family, space.target)
    targets = [model.target] if model.target is not None else list(model.TARGETS.values())
    native = {n for t in targets for n in t.native_names}
    native_cols = [c for c in df.columns if c not in spelled.values() and c in native]
    done: dict[tuple, tuple[dict, list[str]]] = {}
    rows = []
    for rec in df.to_dict("records"):
        # a knob column the table has is given even where a cell is empty (parse_knobs names that cell)
        given = {c: rec[c] for c in spelled.values()}
        given.update({c: rec[c] for c in native_cols if not _empty(rec[c])})
        key = tuple(sorted((c, repr(v)) for c, v in given.items()))
        if key not in done:
            try:
                knobs, _ = to_knobs(given, space, problem)
            except TilerError as exc:
                raise TilerError(f"{what}: row {rec['row']}: {exc}") from None
            lacking = [k for k in space.names if k not in knobs]
            fill = absent_defaults(model, knobs)
            nodefault = [k for k in lacking if k not in fill]
            if nodefault:
                may = ", ".join(k for k in space.names if k in model.ABSENT_DEFAULTS)
                raise TilerError(
                    f"{what}: missing column {nodefault[0]!r} (measured rows are not completed by the model: "
                    + (
                        f"of the {space.op}/{space.family} knobs only {may} may be left out, taking the default "
                        "of a kernel without them)"
                        if may
                        else f"a {space.op}/{space.family} table needs every knob: {', '.join(space.names)})"
                    )
                )
            done[key] = ({**knobs, **{k: fill[k] for k in lacking}}, lacking)
        rows.append(done[key])
    out = df.copy()
    for k in space.names:
        out[spelled.get(k, k)] = [whole[k] for whole, _ in rows]
    out["defaulted"] = [" ".join(lacking) for _, lacking in rows]
    took: dict[str, list[str]] = {}
    for whole, lacking in rows:
        for k in lacking:
            if str(whole[k]) not in took.setdefault(k, []):
                took[k].append(str(whole[k]))
    return out, took


def defaults_taken(*tables: pd.DataFrame) -> dict[str, list[str]]:
    """knob -> the absent defaults the rows of `tables` (rank_candidates' ranked and rejected) took, read from their
    `defaulted` column and the knob's column; {} where no row took one."""
    took: dict[str, list[str]] = {}
    for t in tables:
        if "defaulted" not in t.columns:
            continue
        for names, idx in t.groupby("defaulted").groups.items():
            for k in str(names).split():
                vals = took.setdefault(k, [])
                vals += [v for v in t.loc[idx, k].astype(str).unique() if v not in vals]
    return took


def defaulted_text(took: dict[str, list[str]]) -> str:
    """`default_rows`' record as text: "ORDER=grouped, SPLIT_K=1" (several values of one knob joined by /)."""
    return ", ".join(f"{k}={'/'.join(v)}" for k, v in took.items())


def _empty(v) -> bool:
    return v is None or (isinstance(v, float) and v != v) or (isinstance(v, str) and not v.strip())


def outside_domain(knob, num: np.ndarray) -> np.ndarray:
    """Per value (float64 codes), whether it lies outside the knob's domain: not a whole number, or neither one of
    its values nor (an open knob) in (0, OPEN_MAX]."""
    whole = num == np.round(num)
    inside = np.isin(num, np.asarray(knob.values, dtype=np.float64)) | (
        knob.open & (num > 0) & (num <= OPEN_MAX)
    )
    return ~(whole & inside)


def domain_reason(knob, shown) -> str:
    """The reason a row is rejected for a value outside `knob`'s domain (`shown`: the value as the user wrote it)."""
    return f"domain: {knob.name} must be one of {knob.allowed()}, got {shown}"


def parse_knobs(
    df: pd.DataFrame, space: Space, what: str = "candidates"
) -> tuple[dict[str, np.ndarray], np.ndarray, list[str]]:
    """Knob columns of `df` (which has a `row` column) as int64 candidate columns.

    Missing column or a value that is not a number (or a label of a categorical knob): TilerError naming the
    column (and the row); `what` names the table (a flag) in a missing column's message. A number outside a closed
    domain, or not an integer, is not an error of the file: the row is returned as rejected with the reason (mask
    False, reason text).
    """
    df = df.rename(columns={n: k for k, n in space.spelled(df.columns).items() if n != k})
    for k in space.names:
        if k not in df.columns:
            raise SpaceError(
                f"{what}: missing column {k!r}; a {space.op}/{space.family} tiling needs "
                f"{', '.join(space.names)}"
            )
    n = len(df)
    ok = np.ones(n, dtype=bool)
    why = np.array([""] * n, dtype=object)
    cols: dict[str, np.ndarray] = {}
    rows = df["row"].to_numpy()
    for k, knob in space.knobs.items():
        raw = df[k]
        text = None  # the cells as text: read for labels and for the rejected rows' reasons, else not made
        num = numeric(raw)
        if knob.labels:  # a categorical knob may be given by label
            text = _text(raw)
            for code, label in zip(knob.codes or knob.values, knob.labels, strict=True):
                num = np.where(text == label, float(code), num)
        bad = ~np.isfinite(num)
        if bad.any():
            i = int(np.nonzero(bad)[0][0])
            got = raw.iloc[i]
            shown = (
                "an empty cell" if _empty(got) else repr(got.item() if isinstance(got, np.generic) else got)
            )
            raise TilerError(
                f"candidates: row {rows[i]}: column {k!r} must be a number"
                + (f" or one of {', '.join(knob.labels)}" if knob.labels else "")
                + f", got {shown}"
            )
        out = outside_domain(knob, num)
        first = out & ok
        if first.any():
            text = _text(raw) if text is None else text
            why[first] = [domain_reason(knob, t) for t in text[first]]
        ok &= ~out
        # a rejected row holds a valid stand-in (the knob's first value), so the models never see 0 or garbage
        cols[k] = np.where(out, knob.values[0], num).astype(np.int64)
    why = list(why)
    return cols, ok, why


def _text(raw: pd.Series) -> np.ndarray:
    """A column's cells as the stripped text a label or a rejection reason is read from."""
    return raw.astype(str).str.strip().to_numpy()


@dataclass(frozen=True)
class Scored:
    """What the model says of a set of candidate columns: per row whether it is feasible (`ok`), else the rule and
    its text that reject it; for the feasible rows, in their given order, the estimate's columns, the rank (1 =
    predicted fastest, ties share it) and `order`, their positions best first (rank, then the model's tie
    preference, then the order given)."""

    ok: np.ndarray
    rule: np.ndarray
    reason: np.ndarray
    estimate: dict
    rank: np.ndarray
    order: np.ndarray


def score_columns(problem: Problem, chip, model, cands: dict[str, np.ndarray], ok, why) -> Scored:
    """The ranking of candidate columns, on numpy columns alone: the rows `ok` marks (those `why` does not already
    reject, with the domain's reason) through the operator's capacity rules, then one vectorised estimate of the
    feasible ones. What rank_candidates runs on a table, and what tiler.triton's pruner runs on a launch's configs
    (no table: a prune is on the launch's critical path)."""
    ok = np.array(ok, dtype=bool)
    rule = np.array(["domain" if w else "" for w in why], dtype=object)
    reason = np.array(why, dtype=object)
    if ok.size:
        for r, m in model.masks(problem, chip, cands).items():
            new = ok & ~m
            rule[new] = r
            reason[new] = model.RULE_TEXT.get(r, r)
            ok &= m
    good = {k: v[ok] for k, v in cands.items()}
    n = int(ok.sum())
    if not n:
        empty = np.zeros(0, dtype=np.int64)
        return Scored(ok, rule, reason, {"time_us": np.zeros(0)}, empty, empty)
    est = model.estimate(problem, chip, good)
    t = np.asarray(est["time_us"], dtype=np.float64)
    rank = np.searchsorted(np.sort(t), t, side="left").astype(np.int64) + 1  # pandas' rank(method="min")
    # exact ties: the order the model prefers first (search.top_distinct), then the order given
    prefer = tie_preference(model, problem, chip, good)
    tie = np.zeros(n, dtype=np.int8) if prefer is None else np.asarray(prefer)
    order = np.lexsort((np.arange(n), tie, rank))
    return Scored(ok, rule, reason, est, rank, order)


def rank_candidates(
    problem: Problem, chip, df: pd.DataFrame, space: Space | None = None
) -> tuple[pd.DataFrame, pd.DataFrame]:
    """Score the candidate tilings in `df` for `problem` on `chip`.

    Returns (ranked, rejected): `ranked` holds the feasible rows, best first, with the model's estimate
    (`predicted_us`, `bound`, ...) and `rank` (1 = predicted fastest; ties share a rank); `rejected` holds the rows
    a capacity or domain rule rejects, with `rule` and `reason`. Both keep the input columns and `row`. Missing knob
    columns are completed by the model (`completed` names them) or, in a table with measured times, take the
    absent defaults (`defaulted`; module docstring). `ranked`'s knob columns are integers, or a categorical knob's
    labels where the table wrote labels (a float column such as 128.0, read so because other rows left it empty,
    comes back as 128).
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

    if time_column(sel) is not None:  # measured rows: a missing knob is what the kernel without it runs
        sel, _ = default_rows(problem, space, sel, "--candidates")
    else:  # partial rows, or rows in a target's names: completed with the model's best choice
        sel = complete_rows(problem, chip, space, sel)
    cands, ok, why = parse_knobs(sel, space, "--candidates")
    scored = score_columns(problem, chip, model, cands, ok, why)
    ok = scored.ok
    rejected = sel[~ok].assign(rule=scored.rule[~ok], reason=scored.reason[~ok])
    good = sel[ok].copy()
    # knob columns as integers (read as floats when other rows, cuBLAS, left them empty), labels kept as labels
    for k, col in space.spelled(sel.columns).items():
        if not len(good):
            break
        knob = space.knobs[k]
        if knob.labels and sel[col].astype(str).str.strip().isin(knob.labels).any():
            good[col] = [knob.label(v) for v in cands[k][ok]]
        else:
            good[col] = cands[k][ok]
    if len(good):
        est = scored.estimate
        good["predicted_us"] = est["time_us"]
        for k in ("bound", "waves", "cores_used", "l2_hit_rate"):
            if k in est:
                good[k] = est[k]
        good["rank"] = scored.rank
        good = good.iloc[scored.order]
    else:
        good["predicted_us"] = pd.Series(dtype=float)
        good["rank"] = pd.Series(dtype=np.int64)
    return good.reset_index(drop=True), rejected.reset_index(drop=True)


def measured_agreement(ranked: pd.DataFrame):
    """(measured column, tiler.agreement.Agreement) of rank_candidates' `ranked` rows against their measured times
    (the table's first TIME_COLUMNS column, converted to microseconds), in the model's order (the ranked order:
    rank, then the model's tie preference); None when the table has no measured time. Rows without a positive
    measured time are left out of the figures."""
    from .agreement import agreement

    found = time_column(ranked)
    if found is None:
        return None
    col, scale = found
    measured_us = numeric(ranked[col]) * (scale * 1e6)
    return col, agreement(ranked["predicted_us"].to_numpy(dtype=np.float64), measured_us)


# a vendor library's time beside each row (a runner's `--vendor` timing flattened into the table) -> seconds per unit
VENDOR_COLUMNS = {"vendor_us": 1e-6, "vendor_ms": 1e-3}


@dataclass(frozen=True)
class Vendor:
    """The vendor library's measured time for the problem of a measured table, and the model's pick against it.

    name: the implementation (the `impl` cell of its rows: torch, cublas, torch_sdpa, ...; or the `vendor` cell
    beside a `vendor_us`/`vendor_ms` column). us: its median measured time in microseconds (the fastest vendor
    when the table holds several); samples: the measured times it is the median of. pick_speedup: the vendor's time over the measured time of the model's pick
    (above 1: the pick is faster than the vendor); best_speedup: the same for the best measured row."""

    name: str
    us: float
    samples: int
    pick_speedup: float
    best_speedup: float

    def as_dict(self) -> dict:
        return {k: getattr(self, k) for k in ("name", "us", "samples", "pick_speedup", "best_speedup")}

    def line(self) -> str:
        return (
            f"vendor ({self.name}, {self.samples} measured row{'s' if self.samples != 1 else ''}): {self.us:.3f} us; "
            f"the model's pick runs at {self.pick_speedup:.3f}x its speed, the best measured row at "
            f"{self.best_speedup:.3f}x (above 1: faster than the vendor)"
        )


def vendor_of(
    problem: Problem, df: pd.DataFrame, ranked: pd.DataFrame, impls: tuple[str, ...]
) -> Vendor | None:
    """The vendor's time in a measured table (`df`, as read) for `problem`, against the model's `ranked` rows: rows
    whose `impl` names another implementation than the kernel's `impls` (what select_rows skips: the vendor call
    timed in the same run, as the runners record it), else a `vendor_us`/`vendor_ms` column beside the kernel's
    rows. None when the table has neither, or the ranked rows have no measured time."""
    found = time_column(ranked)
    if found is None or not len(ranked):
        return None
    col, scale = found
    meas = numeric(ranked[col]) * (scale * 1e6)
    ok = np.isfinite(meas) & (meas > 0)
    if not ok.any() or not ok[0]:  # the model's pick (the first ranked row) has no measured time
        return None
    pick_us, best_us = float(meas[0]), float(meas[ok].min())
    times: dict[str, list[float]] = {}
    rows = select_rows(problem, df)
    if "impl" in rows.columns and impls and col in rows.columns:
        impl = rows["impl"].astype(str).str.strip()
        other = rows[~impl.str.lower().isin(impls) & ~impl.str.lower().isin(("", "nan", "none"))]
        us = numeric(other[col]) * (scale * 1e6)
        for name, t in zip(other["impl"].astype(str).str.strip(), us, strict=True):
            if np.isfinite(t) and t > 0:
                times.setdefault(name, []).append(float(t))
    if not times:
        vcol = next((c for c in VENDOR_COLUMNS if c in ranked.columns), None)
        if vcol is not None:
            us = numeric(ranked[vcol]) * (VENDOR_COLUMNS[vcol] * 1e6)
            names = (
                ranked["vendor"].astype(str)
                if "vendor" in ranked.columns
                else pd.Series(["vendor"] * len(us))
            )
            for name, t in zip(names, us, strict=True):
                if np.isfinite(t) and t > 0:
                    times.setdefault(name, []).append(float(t))
    if not times:
        return None
    med = {name: float(np.median(v)) for name, v in times.items()}
    name = min(med, key=med.get)
    return Vendor(name, med[name], len(times[name]), med[name] / pick_us, med[name] / best_us)


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
