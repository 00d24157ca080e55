"""The CSV the GPU tools write: one row a measurement, every column any row has, floats to 6 significant digits,
written whole to a temporary file and moved into place (a run cut off mid-write leaves the previous table)."""

from __future__ import annotations

import csv
import os
from pathlib import Path


def write_rows(path: Path, rows: list[dict]) -> None:
    """Write `rows` to `path` (columns in first-seen order); no rows, no file."""
    if not rows:
        return
    cols: list[str] = []
    for r in rows:
        cols += [k for k in r if k not in cols]
    tmp = Path(path).with_suffix(".tmp")
    with open(tmp, "w", newline="") as f:
        w = csv.DictWriter(f, fieldnames=cols)
        w.writeheader()
        w.writerows({k: (f"{v:.6g}" if isinstance(v, float) else v) for k, v in r.items()} for r in rows)
    os.replace(tmp, path)
