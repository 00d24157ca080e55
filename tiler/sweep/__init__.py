"""Batch sweeps over shape CSVs: every (row, chip) searched, in parallel, resumable, one ordered output table.

    tiler sweep SHAPES.csv --op matmul --chip ascend910b3[,h200] [--out PATH] [--library FILE] [--jobs N]
                [--resume] [--strategy S] [--seed N] [--trials N] [--fix K=V]... [--scheduler ADDR] [--quiet]

How a sweep runs (docs/sweep.md has the user's view):

1. The CSV is read as text. Each row is parsed with `tiler.problem.parse_problem` (the same checker as
   `--shape`); a bad row (missing, non-numeric or negative field, unknown dtype, bad `count`) becomes an
   output row with status=error and the checker's message, which names the field. Other columns pass through.
2. Rows with the same problem on the same chip are searched once (a model has many identical layers).
3. Each search's result is committed to a SQLite journal (`<out>.journal.db`) as soon as it arrives, keyed by
   (chip id, op, problem key, strategy, seed, trials, pinned knobs/space, profile hash) -- not by row number --
   so `--resume` skips what is done even after the CSV is re-ordered or extended, a SIGKILL loses only the
   searches in flight, and no key is ever written twice (it is the table's primary key).
4. Work runs in this process (`--jobs 1`), in a local process pool (`--jobs N`, chunks of searches), or on a
   Dask distributed cluster (`--scheduler ADDRESS`); all three give the same rows because the output is
   rebuilt from the journal in input order at the end, never in completion order.
5. The output (CSV, or Parquet for a `.parquet` path) is written once, atomically, after the last search; then
   the optional tiling library (`tiler.library/v1`, one file per chip), then a summary on stderr.

Exit codes of the command: 0 every row ok; 1 at least one row has status=error (the file is still complete);
2 bad input (missing file, unknown chip or op, bad option); 130 interrupted (Ctrl-C; rerun with --resume); 143
terminated by SIGTERM (handled as Ctrl-C: the journal is closed and checkpointed, the resume command printed).
"""

from __future__ import annotations

from .config import COUNT_MAX, JOURNAL_SUFFIX, SweepConfig, journal_key, space_hash
from .executors import WorkerDied
from .journal import Journal, journal_path
from .output import (
    SweepReport,
    build_frame,
    default_out,
    library_paths,
    target_names,
    write_libraries,
    write_table,
)
from .rows import parse_rows, read_shapes
from .run import _split_chips, run_sweep
from .solve import solve

__all__ = [
    "COUNT_MAX",
    "JOURNAL_SUFFIX",
    "Journal",
    "SweepConfig",
    "SweepReport",
    "WorkerDied",
    "_split_chips",
    "build_frame",
    "default_out",
    "journal_key",
    "journal_path",
    "library_paths",
    "parse_rows",
    "read_shapes",
    "run_sweep",
    "solve",
    "space_hash",
    "target_names",
    "write_libraries",
    "write_table",
]
