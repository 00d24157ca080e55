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
    return NAME in cols or TYPE in cols or any("duration" in c.lower() for c in cols)


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


def _number(cell: str, row: int, column: str) -> float:
    try:
        v = float(cell)
    except (TypeError, ValueError):
        raise TilerError(f"op_summary: row {row}: column {column!r} must be a number, got {cell!r}") from None
    if not math.isfinite(v) or v < 0:
        raise TilerError(
            f"op_summary: row {row}: column {column!r} must be a finite number >= 0, got {cell!r}"
        )
    return v


def ingest(df: pd.DataFrame, op: str, manifest: pd.DataFrame | None = None) -> Ingested:
    """The measurement table of an op_summary for `op` (see the module docstring)."""
    from .operator import problem_class
    from .problem import parse_problem

    if not len(df):
        raise TilerError("op_summary: no rows")
    if NAME not in df.columns:
        raise TilerError(f"op_summary: missing column {NAME!r} (an msprof op_summary or kernel_details CSV)")
    duration = next((c for c in DURATION if c in df.columns), None)
    if duration is None:
        raise TilerError(f"op_summary: missing column {DURATION[0]!r} (or torch_npu's {DURATION[1]!r})")
    if manifest is None and "tiling" not in df.columns:
        raise TilerError(
            "op_summary: no manifest (--manifest) and no 'tiling' column: rows cannot be matched to tilings"
        )
    cls = problem_class(op)
    pipe_cols = [c for c in PIPE_COLUMNS if c in df.columns]
    by_name = {}
    if manifest is not None:
        by_name = {str(r["op_name"]): r for _, r in manifest.iterrows()}
    out, unmatched = [], []
    for i, r in df.iterrows():
        row = int(i) + 2  # the file's line number (header is line 1)
        seconds = _number(r[duration], row, duration)
        name = str(r[NAME]).strip()
        if by_name:
            m = by_name.get(name)
            if m is None:
                unmatched.append((row, f"Op Name not in the manifest (e.g. {name!r})"))
                continue
            if str(m["op"]) != op:
                unmatched.append((row, f"manifest op is {m['op']!r}, not {op!r}"))
                continue
            fields = {k: m[k] for k in (*cls.FIELDS, *cls.OPTIONAL) if k in m.index and str(m[k]) != ""}
            dtype, tiling_text = str(m["dtype"]), str(m["tiling"])
        else:
            tiling_text = str(r.get("tiling", "")).strip()
            if not tiling_text:
                unmatched.append((row, "no tiling (another operator's kernel, or not run from an export)"))
                continue
            found = cls.from_profiler(
                str(r.get("Input Shapes", "")),
                str(r.get("Input Data Types", "")),
                str(r.get("Input Formats", "")),
            )
            if found is None:
                unmatched.append(
                    (row, f"Input Shapes {str(r.get('Input Shapes', ''))!r} are not a {op} problem")
                )
                continue
            fields, dtype = found
        try:
            tiling = json.loads(tiling_text)
        except json.JSONDecodeError:
            raise TilerError(f"op_summary: row {row}: the tiling is not JSON: {tiling_text[:60]!r}") from None
        if not isinstance(tiling, dict):
            raise TilerError(f"op_summary: row {row}: the tiling must be a JSON object of knob -> value")
        try:
            problem = parse_problem(op, fields, dtype, strict=False)
        except TilerError as exc:
            raise TilerError(f"op_summary: row {row}: {exc}") from None
        rec = {**problem.shape(), "dtype": problem.dtype, **tiling}
        rec["time_us"] = seconds
        for col in pipe_cols:
            if str(r[col]).strip() != "":
                pipe = PIPE_COLUMNS[col]
                rec[f"{pipe}_us"] = max(rec.get(f"{pipe}_us", 0.0), _number(r[col], row, col))
        out.append(rec)
    if not out:
        reasons = sorted({why for _, why in unmatched})
        raise TilerError(f"op_summary: no row is a {op} kernel tiler knows: {'; '.join(reasons)}")
    return Ingested(pd.DataFrame(out), unmatched)
