"""The sweep's shape table: read as text, each row parsed into a problem (a bad row keeps its error)."""

from __future__ import annotations

import math
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ..errors import TilerError, closest
from .config import COUNT_MAX


def read_shapes(source) -> Any:
    """The shape table as text (no type guessing: '0010' and '' pass through unchanged)."""
    import pandas as pd

    if isinstance(source, pd.DataFrame):
        return source.astype(str).reset_index(drop=True)
    import io

    from ..io import read_limited

    path = Path(source)
    if not path.is_file():
        raise TilerError(f"SHAPES: no such file: {path}")
    try:
        data = read_limited(path)  # at most tiler.io.FILE_BYTES_MAX bytes
        if path.suffix == ".parquet":
            df = pd.read_parquet(io.BytesIO(data)).astype(str)
        else:
            df = pd.read_csv(io.BytesIO(data), dtype=str, keep_default_na=False, skipinitialspace=True)
    except ImportError as exc:
        raise TilerError(f"SHAPES: reading Parquet needs pyarrow: pip install pyarrow ({exc})") from None
    except (pd.errors.EmptyDataError, pd.errors.ParserError, UnicodeDecodeError, ValueError, OSError) as exc:
        raise TilerError(f"SHAPES: cannot read {path}: {str(exc).strip()}") from None
    header = list(df.columns)
    if path.suffix != ".parquet":
        # pandas renames a repeated column (M, M -> M, M.1): check the header as written
        try:
            raw = pd.read_csv(
                io.BytesIO(data),
                dtype=str,
                header=None,
                nrows=1,
                keep_default_na=False,
                skipinitialspace=True,
            )
            if raw.shape[1] == len(header):
                header = list(raw.iloc[0])
        except Exception:  # noqa: BLE001 -- the full read above succeeded; keep its header
            pass
    header = [str(c).strip() for c in header]
    df.columns = [str(c).strip() for c in df.columns]
    where = f"{path} (its columns)" if path.suffix == ".parquet" else f"{path} line 1 (the header)"
    dup = sorted({c for c in header if header.count(c) > 1})
    if dup:
        raise TilerError(f"SHAPES: {where}: column(s) {', '.join(dup)} appear more than once")
    df.attrs["where"] = where  # the header as the user sees it, for parse_rows' messages
    return df


def _parse_count(text: str) -> int:
    text = str(text).strip()
    if text == "":
        return 1
    try:
        f = float(text)
    except ValueError:
        raise TilerError(f"count: must be an integer >= 0, got {text!r}") from None
    if not math.isfinite(f) or f != int(f) or f < 0:
        raise TilerError(f"count: must be an integer >= 0, got {text!r}")
    if f > COUNT_MAX:
        raise TilerError(f"count: must be an integer <= {COUNT_MAX}, got {text!r}")
    return int(f)


@dataclass
class _Row:
    index: int  # 0-based data row
    values: dict  # the input row as text
    problem: Any = None
    count: int = 1
    error: str | None = None
    key: str | None = None  # the problem key, when the shape parsed (also on a row whose count is bad)


def parse_rows(df, op: str, dtype: str | None = None) -> list[_Row]:
    """Parse every row; a bad row keeps its error (naming the field) instead of stopping the sweep."""
    from ..operator import problem_class
    from ..problem import parse_problem

    cls = problem_class(op)
    names = list(cls.FIELDS) + list(cls.OPTIONAL) + ["dtype"]
    missing = [f for f in cls.FIELDS if f not in df.columns]
    if missing:
        hint = closest(missing[0], list(df.columns)) if len(df.columns) else "the file has no columns"
        raise TilerError(
            f"SHAPES: {df.attrs.get('where', 'the table')}: column {missing[0]!r} is missing; {op} rows need "
            f"{', '.join(cls.FIELDS)} (optional: {', '.join(list(cls.OPTIONAL) + ['dtype', 'name', 'count'])}); "
            f"columns found: {hint}"
        )
    rows = []
    for i, rec in enumerate(df.to_dict("records")):
        r = _Row(i, {k: ("" if v is None else str(v)) for k, v in rec.items()})
        fields_ = {k: r.values[k].strip() for k in names if k in r.values}
        if not fields_.get("dtype") and dtype:
            fields_["dtype"] = dtype
        try:
            r.problem = parse_problem(op, fields_, strict=False)
            r.key = r.problem.key()
            r.count = _parse_count(r.values.get("count", ""))
        except TilerError as exc:
            r.problem, r.error = None, str(exc)
        except (
            ArithmeticError,
            ValueError,
            TypeError,
            RecursionError,
        ) as exc:  # a checker gap: still bad input
            bad = [k for k, v in fields_.items() if not v.lstrip("-").isdigit()]
            r.problem = None
            r.error = f"{bad[0] if bad else 'row'}: bad value ({type(exc).__name__}: {str(exc)[:120]})"
        rows.append(r)
    return rows
