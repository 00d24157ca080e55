"""Read what Ascend's profiler writes (msprof's `op_summary_*.csv`) as a measurement table for `tiler calibrate`.

Every row of an op_summary is one kernel launch: its name (`Op Name`), type, `Task Duration(us)` and, with the
default PipeUtilization metrics, the busy time of each pipe (`aic_mac_time(us)`, `aic_mte2_time(us)`, ... on
separated chips; `mac_time(us)`, ... on coupled ones). A row becomes a measurement when tiler knows its problem and
tiling, from either

- a manifest (`tiler search ... --manifest FILE` appends one line per exported tiling: the name to launch it under,
  the problem and the tiling), matched on `Op Name`; or
- a `tiling` column holding the tiling as JSON (an export's `tiling` object), with the problem read from `Input
  Shapes` and `Input Data Types` by the operator's problem class (`Problem.from_profiler`).

Rows that match neither (other operators' kernels: a real profile holds every kernel of a model) are reported, never
guessed. The table has the problem fields, `dtype`, the knobs, `time_us` and `<pipe>_us` per measured pipe, which
`tiler.calibrate` fits against the model's pipes of the same name.
"""

from __future__ import annotations

import hashlib
import json
import math
from dataclasses import dataclass
from pathlib import Path

import pandas as pd

from .errors import TilerError

NAME = "Op Name"
TYPE = "OP Type"
# the kernel's duration: op_summary's column, and torch_npu's kernel_details.csv spelling
DURATION = ("Task Duration(us)", "Duration(us)")
# msprof pipe columns -> the model's pipe names (tiler.model.common.pipes("ascend")); separated chips (910B/910_93)
# prefix the cube core's pipes with aic_ and the vector core's with aiv_; coupled chips (910A/310P) do not
PIPE_COLUMNS = {
    "aic_mac_time(us)": "mac",
    "aic_scalar_time(us)": "scalar",
    "aic_mte1_time(us)": "mte1",
    "aic_mte2_time(us)": "mte2",
    "aic_fixpipe_time(us)": "fixpipe",
    "aiv_vec_time(us)": "vec",
    "aiv_mte3_time(us)": "mte3",
    "mac_time(us)": "mac",
    "scalar_time(us)": "scalar",
    "mte1_time(us)": "mte1",
    "mte2_time(us)": "mte2",
    "vec_time(us)": "vec",
    "mte3_time(us)": "mte3",
    "fixpipe_time(us)": "fixpipe",
}
MANIFEST_COLUMNS = ("op_name", "op", "chip", "dtype", "tiling")


@dataclass
class Ingested:
    """A measurement table and the profiler rows that did not become measurements (row number, reason)."""

    table: pd.DataFrame
    unmatched: list[tuple[int, str]]

    def report(self) -> str:
        """One line about the unmatched rows (empty when every row matched)."""
        if not self.unmatched:
            return ""
        shown = ", ".join(str(r) for r, _ in self.unmatched[:8]) + (" ..." if len(self.unmatched) > 8 else "")
        reasons = sorted({why for _, why in self.unmatched})
        return f"op_summary: {len(self.unmatched)} row(s) not used ({shown}): {'; '.join(reasons)}"


def is_op_summary(df: pd.DataFrame) -> bool:
    """Whether a table is a profiler export (an Op Name, OP Type or duration column) rather than tiler's own
    format; ingest() then names what it lacks."""
    cols = [str(c) for c in df.columns]
    # a header in another script (a localised profiler's): not tiler's format, so ingest names what it lacks
    return NAME in cols or TYPE in cols or any("duration" in c.lower() or not c.isascii() for c in cols)


def read_table(path: str | Path) -> pd.DataFrame:
    """A CSV as text cells (numbers are checked where they are read), with one-line errors for unreadable files."""
    from .rank import read_candidates  # UTF-8 only, a duplicated column refused, one-line errors

    df = read_candidates(path, None, dtype=str, keep_default_na=False)
    df.columns = [str(c).strip() for c in df.columns]
    return df


def read_manifest(path: str | Path) -> pd.DataFrame:
    df = read_table(path)
    missing = [c for c in MANIFEST_COLUMNS if c not in df.columns]
    if missing:
        raise TilerError(f"--manifest: {path}: missing column(s) {', '.join(missing)}")
    if df["op_name"].duplicated().any():
        dup = df["op_name"][df["op_name"].duplicated()].iloc[0]
        raise TilerError(f"--manifest: {path}: op_name {dup!r} appears twice")
    return df


def manifest_row(op: str, chip_id: str, problem, tiling: dict) -> dict:
    """One manifest line for an exported tiling: a stable launch name from the problem key and the tiling."""
    text = json.dumps(
        {k: (v if isinstance(v, str | int) else int(v)) for k, v in tiling.items()}, sort_keys=True
    )
    digest = hashlib.sha1(f"{problem.key()}|{chip_id}|{text}".encode()).hexdigest()[:10]
    return {
        "op_name": f"tiler_{op}_{digest}",
        "op": op,
        "chip": chip_id,
        **problem.shape(),
        "dtype": problem.dtype,
        "tiling": text,
    }


def append_manifest(path: str | Path, row: dict) -> None:
    """Add a line to a manifest (created with its header when absent); an existing op_name is not repeated."""
    from .io import check_writable, write_text

    check_writable(path, "--manifest")  # a folder or a trailing '/': refused before reading anything
    path = Path(path)
    new = pd.DataFrame([row])
    if path.is_file() and path.stat().st_size:
        old = read_manifest(path)
        if (old["op_name"] == row["op_name"]).any():
            return
        new = pd.concat([old, new.astype(str)], ignore_index=True)
    write_text(path, new.to_csv(index=False), "--manifest")  # atomic; missing folders are created (tiler.io)


TILING_CHARS_MAX = 10_000  # a tiling cell is a few hundred characters; a longer one is not a tiling
# keys a tiling may not hold: the problem comes from `Input Shapes` (or the manifest), the rest are columns ingest sets
RESERVED = ("dtype", "row", "line", "time_us", "defaulted", "impl")


def _where(source: str, line: int, column: str) -> str:
    return f"{source}: line {line}: column {column!r}"


def _number(cell: str, where: str) -> float:
    """A time cell in microseconds: a positive finite number of at most an hour (tiler.calibrate.TIME_MAX_S)."""
    from .calibrate import TIME_MAX_S

    text = str(cell).strip()
    try:
        v = float(text) if len(text) <= 64 else float("nan")
    except (TypeError, ValueError):
        v = float("nan")
    if not math.isfinite(v) or v < 0 or v > TIME_MAX_S * 1e6:
        shown = text if len(text) <= 24 else text[:20] + f"... ({len(text)} characters)"
        raise TilerError(
            f"{where}: must be a number of microseconds in 0..{TIME_MAX_S * 1e6:g}, got {shown!r}"
        )
    return v


def parse_tiling(text: str, where: str, reserved) -> dict:
    """A `tiling` cell (an export's tiling object as JSON): knob -> integer or label. Not JSON, nested, too long,
    a value that is not an integer (of at most 18 digits) or a short label, or a key naming a problem field or a
    column tiler sets (`reserved`): a TilerError naming `where` (the file, line and column)."""
    if len(text) > TILING_CHARS_MAX:
        raise TilerError(f"{where}: the tiling is {len(text)} characters; at most {TILING_CHARS_MAX}")
    try:
        tiling = json.loads(text)
    except RecursionError:
        raise TilerError(f"{where}: the tiling is not JSON (nested too deep)") from None
    except ValueError as exc:  # JSONDecodeError; an integer of more than 4300 digits
        raise TilerError(f"{where}: the tiling is not JSON ({str(exc).splitlines()[0][:80]})") from None
    if not isinstance(tiling, dict):
        raise TilerError(
            f"{where}: the tiling must be a JSON object of knob -> value, got {type(tiling).__name__}"
        )
    for k, v in tiling.items():
        if k in reserved:
            raise TilerError(
                f"{where}: the tiling sets {k!r}, which is not a knob (the problem comes from the profiler's "
                "shapes or the manifest)"
            )
        ok_int = isinstance(v, int) and not isinstance(v, bool) and abs(v) < 10**18
        ok_label = isinstance(v, str) and 0 < len(v) <= 64
        if not (ok_int or ok_label):
            shown = repr(v) if len(repr(v)) <= 24 else repr(v)[:20] + "..."
            raise TilerError(f"{where}: knob {k!r} must be an integer or a label, got {shown}")
    return tiling


def ingest(
    df: pd.DataFrame,
    op: str,
    manifest: pd.DataFrame | None = None,
    family: str | None = None,
    source: str = "op_summary",
    manifest_source: str = "--manifest",
) -> Ingested:
    """The measurement table of an op_summary for `op` (see the module docstring), with a `line` column: the file
    line of each row (the header is line 1), which tiler.calibrate's messages name. Malformed cells are a TilerError
    naming `source`, the line and the column as the file spells it; rows that are not usable measurements of `op`
    are returned in `unmatched` with the reason. `family`: the chip family, whose knob names a tiling must all give
    (default: not checked here, tiler.calibrate does)."""
    from .operator import problem_class
    from .problem import parse_problem

    duration = _duration_column(df, source, manifest)
    cls = problem_class(op)
    reserved = {*cls.FIELDS, *cls.OPTIONAL, *RESERVED}
    pipe_cols = [c for c in PIPE_COLUMNS if c in df.columns]
    reserved |= {f"{pp}_us" for pp in PIPE_COLUMNS.values()}
    by_name = {}
    if manifest is not None:
        by_name = {str(r["op_name"]): (int(i) + 2, r) for i, r in manifest.iterrows()}
    knobs, native, words = _knob_names(op, family)
    out, unmatched = [], []
    for i, r in df.iterrows():
        line = int(i) + 2  # the file's line number (header is line 1)
        seconds = _number(r[duration], _where(source, line, duration))
        name = str(r[NAME]).strip()
        if by_name:
            found = by_name.get(name)
            if found is None:
                unmatched.append((line, f"Op Name not in the manifest (e.g. {name[:40]!r})"))
                continue
            mline, m = found
            if str(m["op"]) != op:
                unmatched.append((line, f"manifest op is {str(m['op'])[:20]!r}, not {op!r}"))
                continue
            fields = {k: m[k] for k in (*cls.FIELDS, *cls.OPTIONAL) if k in m.index and str(m[k]) != ""}
            dtype, tiling_text = str(m["dtype"]), str(m["tiling"]).strip()
            where_tiling = _where(manifest_source, mline, "tiling")
            where_problem = f"{manifest_source}: line {mline}"
        else:
            tiling_text = str(r.get("tiling", "")).strip()
            if not tiling_text:
                unmatched.append((line, "no tiling (another operator's kernel, or not run from an export)"))
                continue
            shapes = str(r.get("Input Shapes", ""))
            try:
                found = cls.from_profiler(
                    shapes, str(r.get("Input Data Types", "")), str(r.get("Input Formats", ""))
                )
            except TilerError as exc:
                raise TilerError(f"{_where(source, line, 'Input Shapes')}: {exc}") from None
            if found is None:
                unmatched.append((line, f"Input Shapes {shapes[:40]!r} are not a {op} problem"))
                continue
            if isinstance(found, str):
                unmatched.append((line, found))
                continue
            fields, dtype = found
            where_tiling = _where(source, line, "tiling")
            where_problem = _where(source, line, "Input Shapes")
        tiling = parse_tiling(tiling_text, where_tiling, reserved)
        _check_knob_names(tiling, knobs, native, words, where_tiling)
        try:
            problem = parse_problem(op, fields, dtype, strict=False)
        except TilerError as exc:
            raise TilerError(f"{where_problem}: {exc}") from None
        rec = {**problem.shape(), "dtype": problem.dtype, **tiling}
        rec["time_us"] = seconds
        for col in pipe_cols:
            if str(r[col]).strip() != "":
                pipe = PIPE_COLUMNS[col]
                rec[f"{pipe}_us"] = max(
                    rec.get(f"{pipe}_us", 0.0), _number(r[col], _where(source, line, col))
                )
        rec["line"] = line
        out.append(rec)
    if not out:
        reasons = sorted({why for _, why in unmatched})
        raise TilerError(f"{source}: no row is a {op} kernel tiler knows: {'; '.join(reasons)}")
    table = pd.DataFrame(out)
    _check_every_row_gives(table, knobs, source)
    return Ingested(table, unmatched)


def _duration_column(df: pd.DataFrame, source: str, manifest: pd.DataFrame | None) -> str:
    """The op_summary's duration column; a TilerError naming `source` for an empty table, a missing column, or a
    table with neither a manifest nor a tiling column to match rows to tilings."""
    if not len(df):
        raise TilerError(f"{source}: no rows")
    if NAME not in df.columns:
        foreign = [str(c) for c in df.columns if not str(c).isascii()]
        hint = (
            f"; its header has {', '.join(repr(c) for c in foreign[:4])}: tiler reads msprof's English column names"
            if foreign
            else " (an msprof op_summary or kernel_details CSV)"
        )
        raise TilerError(f"{source}: missing column {NAME!r}{hint}")
    duration = next((c for c in DURATION if c in df.columns), None)
    if duration is None:
        raise TilerError(f"{source}: missing column {DURATION[0]!r} (or torch_npu's {DURATION[1]!r})")
    if manifest is None and "tiling" not in df.columns:
        raise TilerError(
            f"{source}: no manifest (--manifest) and no 'tiling' column: rows cannot be matched to tilings"
        )
    return duration


def _check_knob_names(tiling: dict, knobs, native, words, where_tiling: str) -> None:
    """A tiling in the operator's own names (not a target's, which to_knobs reads) gives every knob, under its name
    or an alias, and a label among the knob's labels; else a TilerError naming the line."""
    if knobs is None or any(k in native for k in tiling):  # a target's names: read by to_knobs
        return
    lacking = [k for k in knobs if not any(n in tiling for n in knobs[k])]
    if lacking:
        raise TilerError(f"{where_tiling}: the tiling has no {', '.join(map(repr, lacking))}")
    for k, labels in words.items():
        v = next((tiling[n] for n in (k, *knobs.get(k, ())) if n in tiling), None)
        if isinstance(v, str) and v not in labels:
            allowed = f"one of {', '.join(labels)}" if labels else "an integer"
            raise TilerError(f"{where_tiling}: knob {k!r} must be {allowed}, got {v[:24]!r}")


def _check_every_row_gives(table: pd.DataFrame, knobs, source: str) -> None:
    """A knob some rows give and others do not: a TilerError naming the first row without it."""
    given = [c for c in table.columns if knobs is not None and any(c in names for names in knobs.values())]
    for c in given:
        if table[c].isna().any():
            line = int(table["line"][table[c].isna()].iloc[0])
            where = _where(source, line, "tiling")
            raise TilerError(f"{where}: the tiling has no {c!r}, which other rows give")


def _knob_names(op: str, family: str | None):
    """(knob -> the names a tiling may give it under, its own and its aliases, for the knobs without an absent
    default (Operator.ABSENT_DEFAULTS); the names of the targets' code generators; knob -> its labels, () for a
    knob that takes integers only); (None, set(), {}) without a family."""
    if family is None:
        return None, set(), {}
    from .operator import get_operator
    from .space import load_space

    space = load_space(op, family)
    model = get_operator(op, family, space.target)
    targets = [model.target] if model.target is not None else list(model.TARGETS.values())
    native = {n for t in targets for n in t.native_names} - {
        n for k, kn in space.knobs.items() for n in (k, *kn.aliases)
    }
    knobs = {k: (k, *kn.aliases) for k, kn in space.knobs.items() if k not in model.ABSENT_DEFAULTS}
    words = {k: tuple(kn.labels or ()) for k, kn in space.knobs.items()}
    return knobs, native, words
