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

import hashlib
import json
import math
import os
import signal
import sqlite3
import sys
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from types import MappingProxyType
from typing import Any

from .errors import InfeasibleError, TilerError, closest
from .model.common import record, record_columns
from .space import parse_fixes

# the estimate columns are the estimate record's, one column per field, with the pipes of the chips' families
# (model/common.py record(): msprof's names on Ascend, tensor/load/store... on a GPU; both with chips of both)
SEARCH_COLUMNS = ("strategy", "seed", "evaluated", "proven_optimal")
STATUS_COLUMNS = ("chip", "status", "error", "key", "input_row")  # input_row: 1-based data row of the input
COUNT_MAX = 2**31 - 1
JOURNAL_SUFFIX = ".journal.db"
MAX_CHUNK = 4  # searches per pool task: a few seconds of work at most, so a kill loses little


# --------------------------------------------------------------------------------------------------- config


@dataclass(frozen=True)
class SweepConfig:
    """What decides a search's result besides the problem and the chip (part of every journal key)."""

    op: str
    strategy: str = "exhaustive"
    seed: int = 0
    trials: int | None = None
    fix: tuple[tuple[str, str], ...] = ()
    target: str = "any"  # the export target every search is restricted to (tiler.target)

    def fix_text(self, space=None) -> str:
        """The pins as text; with a space, only those it has (a pin of another chip family's knob is not used)."""
        return ";".join(f"{k}={v}" for k, v in self.fix if space is None or k in space.knobs)


@dataclass(frozen=True)
class _Context:
    """Everything a worker needs besides its chunk: shipped once per pool task or scattered once to Dask."""

    cfg: SweepConfig
    chips: dict  # chip id -> _chip_state(chip)
    spaces: dict  # chip id -> pinned Space


def _chip_state(chip) -> tuple:
    """A picklable copy of a Chip (its mappings are read-only proxies, which do not pickle)."""
    return (
        chip.id,
        chip.family,
        chip.name,
        dict(chip.values),
        dict(chip.sources),
        dict(chip.tags),
        chip.path,
        chip.profile_hash,
    )


_CHIPS: dict[tuple, Any] = {}


def _chip_from_state(state: tuple):
    key = (state[0], state[7])
    if key not in _CHIPS:
        from .hardware import Chip

        cid, fam, name, vals, srcs, tags, path, phash = state
        _CHIPS[key] = Chip(
            cid,
            fam,
            name,
            MappingProxyType(vals),
            MappingProxyType(srcs),
            MappingProxyType(tags),
            path,
            phash,
        )
    return _CHIPS[key]


def space_hash(space) -> str:
    """A short fingerprint of the (pinned) knob domains: a changed search space never reuses old results."""
    text = repr(sorted((k, kn.values, kn.labels, kn.open) for k, kn in space.knobs.items()))
    return hashlib.sha256(text.encode()).hexdigest()[:12]


def journal_key(chip, problem, cfg: SweepConfig, space) -> str:
    """The resume key of one search: chip id, op, problem key, strategy, seed, trials, pins, space, profile."""
    trials = cfg.trials if cfg.strategy in ("tpe", "random") else None
    return "|".join(
        [
            chip.id,
            cfg.op,
            problem.key(),
            cfg.strategy,
            f"seed={cfg.seed}",
            f"trials={trials}",
            f"fix={cfg.fix_text(space)}",
            *([f"target={cfg.target}"] if cfg.target != "any" else []),
            f"space={space_hash(space)}",
            f"profile={chip.profile_hash}",
        ]
    )


# --------------------------------------------------------------------------------------------------- solving


def _py(v):
    return v.item() if hasattr(v, "item") else v


def solve(problem, chip, space, cfg: SweepConfig) -> dict:
    """One search, never raising: {'status': 'ok', tiling, row, search} or {'status': 'error', kind, error}.

    `kind` is 'input' for a problem no tiling fits or a rejected setting (deterministic: a resume keeps it) and
    'internal' for anything else (a bug or a crash: a resume retries it).
    """
    from .search import search

    t0 = time.perf_counter()
    # tpe/random: an in-memory optuna study per search; the sweep's journal is what persists and resumes (a
    # shared SQLite study file would serialise the workers and make a rerun silently replay old studies)
    # (and no per-search progress bar: the sweep draws its own)
    kw = {"storage": "memory", "progress": False} if cfg.strategy in ("tpe", "random") else {}
    try:
        res = search(
            problem, chip, space, strategy=cfg.strategy, top=1, seed=cfg.seed, trials=cfg.trials, **kw
        )
        tiling = {k: _py(v) for k, v in res.tiling(0).items()}
        row = {k: _py(v) for k, v in res.row(0).items()}
        runnable = _runnable(problem, chip, space, res, cfg)
    except InfeasibleError as exc:
        return {"status": "error", "kind": "input", "error": f"shape: {exc}"}
    except TilerError as exc:
        return {"status": "error", "kind": "input", "error": str(exc)}
    except Exception as exc:  # noqa: BLE001 -- one broken search must not stop the sweep
        return {"status": "error", "kind": "internal", "error": f"internal: {type(exc).__name__}: {exc}"}
    info = {
        "strategy": res.strategy,
        "evaluated": int(res.evaluated),
        "bounded": int(res.bounded),
        "space_size": int(res.space_size),
        "feasible": int(res.feasible),
        "seed": None if res.seed is None else int(res.seed),
        "proven_optimal": bool(res.proven_optimal),
        "elapsed_s": round(time.perf_counter() - t0, 4),
    }
    return {"status": "ok", "tiling": tiling, "row": row, "search": info, "runnable": runnable.to_json()}


def _runnable(problem, chip, space, res, cfg: SweepConfig):
    """The best tiling of each target that can run the problem (tiler.search.runnable): of every target when the
    sweep is unconstrained; with --target T, T's own result (its gap to the unconstrained best is not searched:
    null)."""
    from .search.runnable import per_target

    if space.target == "any":
        return per_target(problem, chip, space, res)
    free = _pinned_space(cfg.op, space.family, cfg.fix)
    return per_target(problem, chip, free, None, only=space.target, known={space.target: res})


CACHE_BYTES = 32 << 20  # model-cache growth a sweep process allows itself before it clears the caches
CACHE_SEARCHES = 16  # without /proc (not Linux): clear the caches every this many searches instead
_CACHE_STATE = {"base": None, "searches": 0}


def _rss_bytes() -> int | None:
    """This process's resident bytes (Linux /proc/self/statm), or None where that cannot be read."""
    try:
        with open("/proc/self/statm") as f:
            return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")
    except (OSError, ValueError, IndexError, AttributeError):
        return None


def _trim() -> None:
    """Hand freed heap pages back to the system (glibc malloc_trim), so that the resident size says what is held."""
    if sys.platform.startswith("linux"):
        try:
            import ctypes

            ctypes.CDLL(None).malloc_trim(0)
        except (OSError, AttributeError):
            pass


def _bound_caches() -> None:
    """Keep the model's caches (tiler.model.schedule: walks, per-core work, hits) from growing with the sweep.

    They serve the candidates of one search (the same grid at several K steps); across the rows of a sweep they
    hardly hit, yet grow by up to ~4 MB per Ascend search (500 MB after 100 random Ascend rows). So a sweep
    process clears them once its resident memory is CACHE_BYTES over where it was after its first search (or
    every CACHE_SEARCHES searches where the memory cannot be read); the answers are the same (the caches are
    pure), and over random shapes a sweep that clears them is no slower (docs/sweep.md, "Memory")."""
    from .model.schedule import clear_caches

    st = _CACHE_STATE
    st["searches"] += 1
    rss = _rss_bytes()
    if rss is None:
        if st["searches"] % CACHE_SEARCHES == 0:
            clear_caches()
        return
    if st["base"] is None:
        st["base"] = rss
    elif rss > st["base"] + CACHE_BYTES:
        clear_caches()
        _trim()
        after = _rss_bytes() or rss
        if after > st["base"] + CACHE_BYTES // 2:
            # what stays after a clear is not the caches' (results the caller holds, with --jobs 1): measure
            # from here, so that the caches are not cleared after every search
            st["base"] = after


def _solve_chunk(chunk: Sequence[tuple[str, str, Any]], ctx: _Context) -> list[tuple[str, dict]]:
    """Worker entry point (process pool or Dask): [(journal key, chip id, problem)] -> [(key, result)]."""
    out = []
    for key, chip_id, problem in chunk:
        out.append((key, solve(problem, _chip_from_state(ctx.chips[chip_id]), ctx.spaces[chip_id], ctx.cfg)))
        _bound_caches()
    return out


def _worker_init(parent_pid: int | None = None) -> None:
    """Pool workers ignore Ctrl-C (the parent decides what to stop, and no worker prints a traceback) and die
    with their parent: a SIGKILLed sweep must not leave workers holding its pipes (`| tee`, CI would hang)."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    _die_with_parent(parent_pid)


def _die_with_parent(parent_pid: int | None = None, interval_s: float = 0.5) -> None:
    """Exit this process as soon as its parent is gone: prctl(PR_SET_PDEATHSIG, SIGKILL) on Linux (immediate),
    and everywhere a daemon thread that polls os.getppid() (a dead parent re-parents us) as a fallback."""
    import threading

    ppid = os.getppid()
    if sys.platform.startswith("linux"):
        try:
            import ctypes

            libc = ctypes.CDLL(None, use_errno=True)
            libc.prctl(1, signal.SIGKILL, 0, 0, 0)  # PR_SET_PDEATHSIG = 1
        except (OSError, AttributeError):
            pass
    if os.getppid() != ppid or (parent_pid is not None and ppid == 1 and parent_pid != 1):
        os._exit(1)  # the parent died before the signal was armed

    def watch() -> None:
        while True:
            time.sleep(interval_s)
            if os.getppid() != ppid:
                os._exit(1)

    threading.Thread(target=watch, name="tiler-parent-watch", daemon=True).start()


# --------------------------------------------------------------------------------------------------- journal


def journal_path(out: str | os.PathLike) -> Path:
    """The journal of an output file: next to it, `<out>.journal.db`."""
    out = Path(out)
    return out.with_name(out.name + JOURNAL_SUFFIX)


_JOURNAL_COLUMNS = (
    "key",
    "chip",
    "op",
    "problem",
    "strategy",
    "seed",
    "profile_hash",
    "status",
    "kind",
    "error",
    "result",
    "written_at",
)


class Journal:
    """SQLite table of finished searches, one committed row each; the key is the primary key.

    WAL mode with one writer (the sweep's parent process): a reader (a test, a second terminal) can watch it
    while the sweep runs, and a process killed at any instant leaves every committed row intact. The connection
    is opened lazily: `release()` closes it while worker processes are forked, so no worker inherits it.

    A file that is not a journal of this schema (another program's database, another tiler version's table) or
    whose rows do not parse is never deleted on --resume: it raises TilerError naming the file and how to start
    afresh (run without --resume, which replaces it, or --out elsewhere).
    """

    def __init__(self, path: str | os.PathLike, fresh: bool, fresh_hint: str = ""):
        self.path = Path(path)
        self.fresh_hint = fresh_hint or (
            "run the same command without --resume (it replaces the journal), or give --out elsewhere"
        )
        self.db: sqlite3.Connection | None = None
        try:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            if fresh:
                for p in (self.path, Path(str(self.path) + "-wal"), Path(str(self.path) + "-shm")):
                    if p.is_file() or p.is_symlink():
                        p.unlink()
        except OSError as exc:
            raise TilerError(f"journal: cannot prepare {self.path}: {exc.strerror or exc}") from None
        if self.path.exists() and not self.path.is_file():
            raise TilerError(f"journal: {self.path} is not a file; give --out elsewhere")
        self._connect(check=not fresh)

    def _bad(self, why: str) -> TilerError:
        return TilerError(
            f"journal: {self.path} is not a tiler sweep journal or is damaged ({why}); it was left untouched: "
            f"to start fresh, {self.fresh_hint}"
        )

    def _connect(self, check: bool = False) -> sqlite3.Connection:
        if self.db is not None:
            return self.db
        try:
            db = sqlite3.connect(str(self.path), timeout=30)
            if check:
                tables = {r[0] for r in db.execute("SELECT name FROM sqlite_master WHERE type = 'table'")}
                if tables and "results" not in tables:
                    db.close()
                    raise self._bad(f"tables {', '.join(sorted(tables))[:120]}, no 'results'")
                if "results" in tables:
                    cols = [r[1] for r in db.execute("PRAGMA table_info(results)")]
                    if set(cols) != set(_JOURNAL_COLUMNS):
                        db.close()
                        raise self._bad(f"table 'results' has columns {', '.join(cols)[:160]}")
            db.execute("PRAGMA journal_mode=WAL")
            db.execute("PRAGMA synchronous=NORMAL")
            db.execute(
                "CREATE TABLE IF NOT EXISTS results (key TEXT PRIMARY KEY, chip TEXT NOT NULL, op TEXT NOT NULL, "
                "problem TEXT NOT NULL, strategy TEXT NOT NULL, seed INTEGER, profile_hash TEXT NOT NULL, "
                "status TEXT NOT NULL, kind TEXT, error TEXT, result TEXT, written_at REAL NOT NULL)"
            )
            db.commit()
        except sqlite3.Error as exc:
            raise self._bad(f"{type(exc).__name__}: {exc}") from None
        self.db = db
        return db

    def release(self) -> None:
        """Close the connection (reopened by the next call): done before worker processes are forked."""
        if self.db is not None:
            self.db.close()
            self.db = None

    @staticmethod
    def _valid_ok(res) -> bool:
        return (
            isinstance(res, dict)
            and res.get("status") == "ok"
            and isinstance(res.get("tiling"), dict)
            and isinstance(res.get("row"), dict)
            and isinstance(res.get("search"), dict)
            and all(k in res["search"] for k in ("strategy", "evaluated", "proven_optimal"))
        )

    def load(self) -> dict[str, dict]:
        """Finished results to reuse. Internal errors are dropped here so that a resume retries them.

        Raises TilerError (the journal is left as it is) when a row does not parse: bad JSON, a null or
        malformed result, an unknown status."""
        return dict(self.scan())

    def scan(self):
        """load() one row at a time: yields (key, result) of every reusable row once all of them parsed (a
        damaged journal raises TilerError before anything is yielded or deleted), then drops the internal
        errors. A sweep keeps only the keys (reading each result back with get()), not 10,000 parsed dicts."""
        db = self._connect(check=True)
        try:
            for _ in self._rows(db):  # a first pass only validates: nothing is held
                pass
            yield from self._rows(db)
        except sqlite3.Error as exc:
            raise self._bad(f"{type(exc).__name__}: {exc}") from None
        # only now that every row parsed: a damaged journal is never written to
        try:
            db.execute("DELETE FROM results WHERE status = 'error' AND kind = 'internal'")
            db.commit()
        except sqlite3.Error as exc:
            raise self._bad(f"{type(exc).__name__}: {exc}") from None

    def _rows(self, db):
        # "order by" in lower case: ORDER is a knob name, which generic code does not spell (test_style)
        cur = db.execute("SELECT key, status, kind, error, result FROM results order by rowid")
        for key, status, kind, error, result in cur:
            if not isinstance(key, str):
                raise self._bad(f"a row has key {key!r}")
            res = self._result(key, status, kind, error, result)
            if res is not None:
                yield key, res

    def _result(self, key, status, kind, error, result) -> dict | None:
        """A row's result (None for an internal error, which a resume retries); TilerError when damaged."""
        if status == "ok":
            try:
                res = json.loads(result) if isinstance(result, str | bytes) else None
            except (ValueError, RecursionError) as exc:
                raise self._bad(f"the result of {key[:80]!r} is not JSON: {str(exc)[:80]}") from None
            if not self._valid_ok(res):
                raise self._bad(f"the result of {key[:80]!r} is {str(result)[:60]!r}, not a search result")
            return res
        if status == "error" and kind == "input" and isinstance(error, str):
            return {"status": status, "kind": kind, "error": error}
        if status == "error" and kind == "internal":
            return None
        raise self._bad(f"the row {key[:80]!r} has status {status!r}, kind {kind!r}")

    def get(self, key: str) -> dict | None:
        """One journaled result (an internal error too, as the search returned it), None when absent."""
        try:
            row = (
                self._connect()
                .execute("SELECT status, kind, error, result FROM results WHERE key = ?", (key,))
                .fetchone()
            )
        except sqlite3.Error as exc:
            raise self._bad(f"{type(exc).__name__}: {exc}") from None
        if row is None:
            return None
        status, kind, error, result = row
        if status == "error" and kind == "internal":
            return {"status": status, "kind": kind, "error": error}
        return self._result(key, status, kind, error, result)

    def put(self, key: str, chip, op: str, problem, cfg: SweepConfig, result: dict) -> bool:
        """Commit one result; returns False (and writes nothing) if the key is already there."""
        cur = self._connect().execute(
            "INSERT OR IGNORE INTO results (key, chip, op, problem, strategy, seed, profile_hash, status, kind, "
            "error, result, written_at) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
            (
                key,
                chip.id,
                op,
                problem.key(),
                cfg.strategy,
                cfg.seed,
                chip.profile_hash,
                result["status"],
                result.get("kind"),
                result.get("error"),
                json.dumps(result) if result["status"] == "ok" else None,
                time.time(),
            ),
        )
        self.db.commit()
        return cur.rowcount == 1

    def drop(self, keys) -> None:
        """Delete these keys' rows (results of an older record, searched again)."""
        if keys:
            self._connect().executemany("DELETE FROM results WHERE key = ?", [(k,) for k in keys])
            self.db.commit()

    def count(self) -> int:
        return self._connect().execute("SELECT COUNT(*) FROM results").fetchone()[0]

    def close(self) -> None:
        self.release()


class _Results:
    """The sweep's finished results as the output reads them (`get(key)`): the keys in memory, each result
    read back from the journal when its rows are built, so the parent never holds every search's record."""

    def __init__(self, journal: Journal):
        self.journal = journal
        self.keys: set[str] = set()

    def __contains__(self, key) -> bool:
        return key in self.keys

    def get(self, key, default=None):
        return self.journal.get(key) if key in self.keys else default


# --------------------------------------------------------------------------------------------------- input


def read_shapes(source) -> Any:
    """The shape table as text (no type guessing: '0010' and '' pass through unchanged)."""
    import pandas as pd

    if isinstance(source, pd.DataFrame):
        return source.astype(str).reset_index(drop=True)
    import io

    from .io import read_limited

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
    dup = sorted({c for c in header if header.count(c) > 1})
    if dup:
        raise TilerError(f"SHAPES: column(s) {', '.join(dup)} appear more than once in {path}")
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
    from .operator import problem_class
    from .problem import parse_problem

    cls = problem_class(op)
    names = list(cls.FIELDS) + list(cls.OPTIONAL) + ["dtype"]
    missing = [f for f in cls.FIELDS if f not in df.columns]
    if missing:
        hint = closest(missing[0], list(df.columns)) if len(df.columns) else "the file has no columns"
        raise TilerError(
            f"SHAPES: column {missing[0]!r} is missing; {op} rows need {', '.join(cls.FIELDS)} "
            f"(optional: {', '.join(list(cls.OPTIONAL) + ['dtype', 'name', 'count'])}); "
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


# --------------------------------------------------------------------------------------------------- running


@dataclass
class _Task:
    key: str
    chip: Any
    problem: Any
    slots: list[tuple[int, int]] = field(default_factory=list)  # (row index, chip index) it fills


def _chunks(tasks: list[_Task], jobs: int) -> list[list[_Task]]:
    size = max(1, min(MAX_CHUNK, len(tasks) // max(1, jobs * 16)))
    return [tasks[i : i + size] for i in range(0, len(tasks), size)]


def _payload(chunk: list[_Task]) -> list[tuple[str, str, Any]]:
    return [(t.key, t.chip.id, t.problem) for t in chunk]


def _run_local(chunks, ctx: _Context, on_result: Callable[[str, dict], None]) -> None:
    for chunk in chunks:
        for key, res in _solve_chunk(_payload(chunk), ctx):
            on_result(key, res)


def _stop_pool(pool) -> None:
    """Cancel what has not started and end the workers this sweep started (their pids, not by name)."""
    pool.shutdown(wait=False, cancel_futures=True)
    stop = getattr(pool, "terminate_workers", None)  # Python >= 3.14
    if stop is not None:
        stop()
        return
    for proc in list((getattr(pool, "_processes", None) or {}).values()):
        if proc.is_alive():
            proc.terminate()
    for proc in list((getattr(pool, "_processes", None) or {}).values()):
        proc.join(timeout=5)


class WorkerDied(RuntimeError):
    """A pool worker vanished (OOM killer, kill -9): not bad input, and the journal keeps what finished."""


def _run_pool(chunks, ctx: _Context, jobs: int, on_result) -> None:
    from concurrent.futures import ProcessPoolExecutor, as_completed
    from concurrent.futures.process import BrokenProcessPool
    from multiprocessing import get_context

    # spawned, not forked: a worker imports only what a search needs (no pandas, ~45 MB) instead of sharing a
    # copy of the parent (pandas, the input table, the rows: each forked worker's memory started at the parent's)
    pool = ProcessPoolExecutor(
        max_workers=min(jobs, len(chunks)),
        mp_context=get_context("spawn"),
        initializer=_worker_init,
        initargs=(os.getpid(),),
    )
    try:
        futures = [pool.submit(_solve_chunk, _payload(c), ctx) for c in chunks]
        for fut in as_completed(futures):
            for key, res in fut.result():
                on_result(key, res)
    except BrokenProcessPool:
        _stop_pool(pool)
        raise WorkerDied(
            "a worker process died (killed, or out of memory); the finished searches are in the "
            "journal: rerun the same command with --resume"
        ) from None
    except BaseException:
        _stop_pool(pool)
        raise
    pool.shutdown(wait=True)


def _import_distributed():
    try:
        import dask.distributed
    except ImportError:
        raise TilerError(
            "--scheduler: needs dask.distributed, which is not installed: pip install 'tiler[dask]' "
            "(or pip install 'dask[distributed]')"
        ) from None
    return dask.distributed


def _check_scheduler_address(address) -> None:
    """A malformed address is refused here, before a Client exists (a failed Client's __del__ would hang 20 s
    at exit and print a traceback)."""
    from distributed.comm.addressing import get_address_host_port, parse_address

    text = str(address).strip()
    try:
        proto, loc = parse_address(text)
        if proto in ("tcp", "tls", "ws", "wss", "ucx"):
            _, port = get_address_host_port(text)
            if not 0 < int(port) < 65536:
                raise ValueError(f"port {port} is not in 1..65535")
    except (ValueError, TypeError, KeyError) as exc:
        raise TilerError(
            f"--scheduler: not a Dask scheduler address: {text!r} ({str(exc).strip()[:120]}); "
            "expected e.g. tcp://host:8786"
        ) from None


def _run_dask(address: str, chunks, ctx: _Context, on_result) -> None:
    distributed = _import_distributed()
    Client, as_completed = distributed.Client, distributed.as_completed
    try:
        client = Client(address, timeout="10s", set_as_default=False)
    except Exception as exc:  # noqa: BLE001 -- any failure to connect is one line, not a traceback
        why = (str(exc).strip().splitlines() or [type(exc).__name__])[0][:200]
        raise TilerError(f"--scheduler: cannot reach the Dask scheduler at {address!r}: {why}") from None
    futures = []
    try:
        shared = client.scatter(ctx, broadcast=True)
        futures = client.map(_solve_chunk, [_payload(c) for c in chunks], ctx=shared, pure=False)
        for fut in as_completed(futures, loop=client.loop):
            for key, res in fut.result():
                on_result(key, res)
    except BaseException:
        if futures:
            client.cancel(futures)
        raise
    finally:
        client.close()


# --------------------------------------------------------------------------------------------------- output


def default_out(op: str, chip_ids: Sequence[str]) -> Path:
    return Path("results") / f"sweep_{op}_{'_'.join(chip_ids)}.csv"


def _check_writable_format(path: Path) -> None:
    if path.suffix == ".parquet":
        try:
            import pyarrow  # noqa: F401
        except ImportError:
            raise TilerError(
                f"--out: writing Parquet ({path.name}) needs pyarrow, which is not installed: "
                "pip install pyarrow (or use a .csv path)"
            ) from None


def write_table(frame, path: str | os.PathLike) -> None:
    """CSV, or Parquet when the path ends in .parquet; written to a temporary file, then renamed (atomic)."""
    from io import BytesIO

    from .io import write_bytes, write_text

    if Path(path).suffix == ".parquet":
        _check_writable_format(Path(path))
        buf = BytesIO()
        frame.to_parquet(buf, index=False)
        write_bytes(path, buf.getvalue(), "--out")
    else:
        write_text(path, frame.to_csv(index=False, na_rep=""), "--out")


@dataclass
class SweepReport:
    """What a sweep produced: the output rows (input order), where they went, and counts."""

    frame: Any  # pandas DataFrame, one row per (input row, chip)
    out: Path
    journal: Path
    chips: list
    op: str
    libraries: list[Path]
    ok: int
    failed: int
    computed: int  # searches run by this invocation
    reused: int  # searches taken from the journal (--resume)
    elapsed_s: float
    notes: list[str] = field(default_factory=list)

    @property
    def exit_code(self) -> int:
        return 1 if self.failed else 0

    def summary(self, slowest: int = 5) -> list[str]:
        """Lines for stderr: ok/failed, count-weighted predicted time per chip, the slowest rows and bounds."""
        df = self.frame
        lines = [
            f"sweep {self.op}: {len(df)} rows ({self.ok} ok, {self.failed} failed) on "
            f"{', '.join(c.id for c in self.chips)}; {self.computed} searched, {self.reused} reused from "
            f"the journal, {self.elapsed_s:.1f} s -> {self.out}"
        ]
        if self.failed:
            bad = df[df["status"] == "error"]
            for _, r in bad.head(5).iterrows():
                lines.append(f"  failed: row {r['_row'] + 1} on {r['chip']}: {r['error']}")
            if len(bad) > 5:
                lines.append(f"  ... and {len(bad) - 5} more (status=error in the output)")
        for chip in self.chips:
            ok = df[(df["status"] == "ok") & (df["chip"] == chip.id)]
            if not len(ok):
                continue
            weighted = ok["time_us"].astype(float) * ok["_count"].astype(float)
            lines.append(
                f"{chip.id}: predicted total {weighted.sum():,.1f} us over {len(ok)} ok rows "
                f"(time_us x count, {int(ok['_count'].sum())} occurrences)"
            )
            top = weighted.sort_values(ascending=False, kind="stable").head(slowest)
            lines.append(f"  slowest {len(top)} (time_us x count):")
            for idx, total in top.items():
                r = ok.loc[idx]
                label = r.get("name") or f"row {r['_row'] + 1}"
                lines.append(
                    f"    {str(label)[:28]:28} {r['key']:34} {float(r['time_us']):11.2f} us x "
                    f"{int(r['_count']):<4} = {total:12,.1f} us  {r['bound']}"
                )
        return lines + self.notes

    def table(self):
        """The output table without the helper columns."""
        return self.frame.drop(columns=[c for c in self.frame.columns if c.startswith("_")])


def target_names(op: str, families, target: str = "any") -> list[str]:
    """The export targets of `op` on these chip families, in the operators' order (`target` alone when set)."""
    from .operator import get_operator

    if target != "any":
        return [target]
    names: list[str] = []
    for fam in dict.fromkeys(families):
        names += [t for t in get_operator(op, fam).TARGETS if t not in names]
    return names


def _knob_columns(spaces: dict) -> list[str]:
    cols: list[str] = []
    for space in spaces.values():
        cols += [k for k in space.names if k not in cols]
    return cols


def build_frame(
    df_in,
    rows: list[_Row],
    chips: list,
    tasks: dict[tuple[int, int], _Task],
    results: dict[str, dict],
    spaces: dict,
    cfg: SweepConfig,
):
    """The output, one row per (input row, chip) in input order, built only from journaled results."""
    import pandas as pd

    knobs = _knob_columns(spaces)
    estimate_cols = list(record_columns(c.family for c in chips))
    names = target_names(cfg.op, [c.family for c in chips], cfg.target)
    target_cols = ["runnable"] + [f"{t}_{x}" for t in names for x in ("time_us", "gap")]
    produced = list(STATUS_COLUMNS) + knobs + estimate_cols + target_cols + list(SEARCH_COLUMNS)
    passthrough = [c for c in df_in.columns if c not in produced]
    records = []
    for r in rows:
        for ci, chip in enumerate(chips):
            rec: dict[str, Any] = {c: r.values.get(c, "") for c in passthrough}
            rec.update({"chip": chip.id, "_row": r.index, "_count": r.count})
            rec["key"] = r.key
            rec["input_row"] = r.index + 1
            task = tasks.get((r.index, ci))
            res = results.get(task.key) if task else None
            if r.error is not None:
                rec.update(status="error", error=r.error)
            elif res is None:
                rec.update(status="error", error="internal: no result (the sweep was interrupted)")
            elif res["status"] != "ok":
                rec.update(status="error", error=res["error"])
            else:
                rec.update(status="ok", error=None, **_ok_cells(res, chip, spaces[chip.id], cfg))
            records.append(rec)
    cols = passthrough + produced + ["_row", "_count"]
    # object columns keep each value's own type: ints stay ints next to the empty cells of failed rows
    return pd.DataFrame(
        {c: pd.Series([rec.get(c) for rec in records], dtype=object) for c in cols}, columns=cols
    )


def _ok_cells(res: dict, chip, space, cfg: SweepConfig) -> dict:
    """The output cells of one ok result: its tiling, estimate record, runnable targets and search."""
    cells = {k: res["tiling"].get(k) for k in space.names}
    cells.update({k: res["row"].get(k) for k in record(chip.family)})
    choices = res["runnable"]["choices"]
    cells["runnable"] = ",".join(choices)
    for t, c in choices.items():
        cells[f"{t}_time_us"] = c["row"]["time_us"]
        cells[f"{t}_gap"] = c["gap"]
    search = res["search"]
    cells.update(
        strategy=search["strategy"],
        seed=cfg.seed,
        evaluated=search["evaluated"],
        proven_optimal=search["proven_optimal"],
    )
    return cells


def _library_doc(task, res: dict, free, cfg: SweepConfig) -> dict:
    """One ok result as a validated tiling document (a library entry's source)."""
    from .export import tiling_document, validate
    from .search.runnable import Runnable

    info = {k: res["search"][k] for k in ("strategy", "evaluated", "seed", "proven_optimal")}
    runnable = Runnable.from_json(res["runnable"], free)
    doc = tiling_document(
        task.problem, task.chip, res["tiling"], res["row"], info, cfg.target, runnable=runnable
    )
    validate(doc)
    return doc


def _intact(res: dict, task, spaces: dict, cfg: SweepConfig, free: dict | None) -> bool:
    """Whether a journaled ok result holds what the output (and, with --library, the library) reads from it. A
    result damaged inside (edited by hand or another program) is searched again on --resume instead of failing
    the table: the journal is a cache of searches, and a search gives the result back. `free`: chip id -> the
    unconstrained space of its runnable tilings, with --library (None without)."""
    try:
        _ok_cells(res, task.chip, spaces[task.chip.id], cfg)
        if free is not None:
            _library_doc(task, res, free[task.chip.id], cfg)
    except (KeyError, TypeError, AttributeError, ValueError, TilerError):
        return False
    return True


def library_paths(path: str | os.PathLike, chip_ids: Sequence[str]) -> list[Path]:
    """One library per chip: with several chips the chip id goes before the extension (lib.h200.json)."""
    path = Path(path)
    if len(chip_ids) == 1:
        return [path]
    return [path.with_name(f"{path.stem}.{cid}{path.suffix or '.json'}") for cid in chip_ids]


def write_libraries(
    path, rows: list[_Row], chips: list, tasks: dict, results: dict, spaces: dict, cfg: SweepConfig
) -> list[Path]:
    """`tiler.library/v1` per chip: the ok rows, one entry per problem key (first in input order wins)."""
    from .export import library_document, write_json

    written = []
    for ci, (chip, lib_path) in enumerate(
        zip(chips, library_paths(path, [c.id for c in chips]), strict=True)
    ):
        entries, seen = [], set()
        free = _pinned_space(
            cfg.op, chip.family, cfg.fix
        )  # the runnable tilings are of the unconstrained space
        for r in rows:
            task = tasks.get((r.index, ci))
            res = results.get(task.key) if task else None
            if res is None or res["status"] != "ok" or task.problem.key() in seen:
                continue
            seen.add(task.problem.key())
            doc = _library_doc(task, res, free, cfg)
            keep = (
                "problem",
                "tiling",
                "estimate",
                "launch",
                "search",
                "targets",
                "custom_kernel",
                "runnable",
            )
            entries.append(
                {"key": task.problem.key(), **{k: doc[k] for k in keep}, "no_view": doc["no_view"]}
            )
        write_json(library_document(chip, cfg.op, entries), lib_path, "--library")  # atomic, makes folders
        written.append(lib_path)
    return written


# --------------------------------------------------------------------------------------------------- entry


def _split_chips(chips) -> list[str]:
    if isinstance(chips, str):
        chips = chips.split(",")
    ids = [c.strip() for c in chips if c and c.strip()]
    if not ids:
        raise TilerError("--chip: give at least one chip id (tiler chips lists them)")
    if len(set(ids)) != len(ids):
        raise TilerError(f"--chip: a chip is listed twice: {','.join(ids)}")
    return ids


def _pinned_space(op: str, family: str, fix: tuple[tuple[str, str], ...], target: str = "any"):
    """The family's space with the pins it knows (with chips of two families, each takes its own knobs), cut to
    what the export target can express."""
    from .space import load_space

    space = load_space(op, family)
    return space.pin({k: v for k, v in fix if k in space.knobs}).for_target(target)


def run_sweep(
    shapes,
    op: str,
    chips,
    out=None,
    *,
    library=None,
    jobs: int = 1,
    resume: bool = False,
    strategy: str = "exhaustive",
    seed: int = 0,
    trials: int | None = None,
    fix=None,
    dtype: str | None = None,
    scheduler: str | None = None,
    quiet: bool = True,
    hardware_dir=None,
    progress_stream=None,
    target: str = "any",
) -> SweepReport:
    """Run a sweep and write its output (and library); returns the report. See the module docstring.

    Args:
        shapes: a CSV path (or .parquet), or a pandas DataFrame of the same columns.
        chips: one chip id, a comma-separated string, or a list of ids (profile .toml paths work too).
        out: output path; default results/sweep_<op>_<chips>.csv. The journal is `<out>.journal.db`.
        jobs: local worker processes (1: in this process; 0: one per CPU).
        resume: reuse the journal's finished searches; without it the journal is started afresh.
        fix: knobs pinned for every search ({knob: value} or ["knob=value", ...]), as `tiler search --fix`.
        dtype: the dtype of rows that give none (default fp16).
        scheduler: a Dask distributed scheduler address; the searches run on its workers.
        quiet: no progress line (it is drawn only on a TTY anyway).
        target: restrict every search to what this export target can express (each chip's family must have it);
            the library's entries then carry that target's view only.
    Raises TilerError for bad input (nothing has run then) and KeyboardInterrupt when interrupted (the journal
    keeps every finished search).
    """
    from .hardware import load_chip
    from .operator import check_constants, problem_class
    from .problem import DTYPES
    from .progress import Progress
    from .search import STRATEGIES, check_seed
    from .space import load_space

    t0 = time.perf_counter()
    problem_class(op)  # unknown op -> ProblemError naming the known ones
    if strategy not in STRATEGIES:
        raise TilerError(f"--strategy: must be one of {', '.join(STRATEGIES)}, got {strategy!r}")
    if jobs is None or jobs < 0:
        raise TilerError(f"--jobs: must be >= 0 (0: one per CPU), got {jobs}")
    jobs = jobs or os.cpu_count() or 1
    if trials is not None and trials < 1:
        raise TilerError(f"--trials: must be >= 1, got {trials}")
    if dtype is not None and dtype not in DTYPES:
        raise TilerError(f"--dtype: must be one of {', '.join(DTYPES)}, got {dtype!r}")
    seed = check_seed(seed, "--seed", coerce=True)  # once, up front: bad input, not an error on every row
    cfg = SweepConfig(op, strategy, seed, trials, tuple(parse_fixes(fix).items()), target)
    chip_ids = _split_chips(chips)
    chip_objs = [check_constants(load_chip(c, hardware_dir)) for c in chip_ids]
    spaces = {c.id: _pinned_space(op, c.family, cfg.fix, target) for c in chip_objs}
    unknown = [k for k, _ in cfg.fix if not any(k in sp.knobs for sp in spaces.values())]
    if unknown:  # pinning it on the first chip's space raises the SpaceError that names the known knobs
        load_space(op, chip_objs[0].family).pin({unknown[0]: "0"})
    from .operator import get_operator

    for c in chip_objs:
        get_operator(
            op, c.family, target
        )  # no model or target for this family -> SpaceError now, not per row
    from .io import check_writable

    # a folder, a trailing '/', a parent that is a file or cannot be made: refused before anything runs
    out = out or default_out(op, [c.id for c in chip_objs])
    check_writable(out, "--out", make_parent=True)
    out = Path(out)
    if out.exists() and not out.is_file():  # /dev/full, a pipe: the journal could not sit next to it
        raise TilerError(f"--out: {out}: not a regular file (the sweep keeps <out>.journal.db next to it)")
    if library:
        check_writable(library, "--library")
    _check_writable_format(out)
    if scheduler:
        _import_distributed()  # a missing extra is bad input: say so before anything runs
        _check_scheduler_address(scheduler)
    df_in = read_shapes(shapes)
    rows = parse_rows(df_in, op, dtype)

    # one task per distinct (chip, problem), in input order
    tasks_by_key: dict[str, _Task] = {}
    slot_task: dict[tuple[int, int], _Task] = {}
    for r in rows:
        if r.problem is None:
            continue
        for ci, chip in enumerate(chip_objs):
            key = journal_key(chip, r.problem, cfg, spaces[chip.id])
            task = tasks_by_key.setdefault(key, _Task(key, chip, r.problem))
            task.slots.append((r.index, ci))
            slot_task[(r.index, ci)] = task

    jpath = journal_path(out)
    notes = []
    if resume and not jpath.exists():
        notes.append(f"note: --resume: no journal at {jpath}; started from the beginning")
    journal = Journal(jpath, fresh=not resume)
    try:
        results, stale = _Results(journal), []
        free = {c.id: _pinned_space(op, c.family, cfg.fix) for c in chip_objs} if library else None
        for k, v in journal.scan() if resume else ():
            # a result journaled before the record changed (a GPU's pipes under msprof's names) is searched
            # again, and so is one journaled before searches kept each target's best tiling (runnable)
            if k not in tasks_by_key:
                continue
            if v["status"] != "ok" or (
                set(record(tasks_by_key[k].chip.family)) <= set(v["row"])
                and isinstance(v.get("runnable"), dict)
                and _intact(v, tasks_by_key[k], spaces, cfg, free)
            ):
                results.keys.add(k)
            else:
                stale.append(k)
        journal.drop(stale)  # their new results take their place
        todo = [t for t in tasks_by_key.values() if t.key not in results]
        reused = len(tasks_by_key) - len(todo)
        total = len(rows) * len(chip_objs)
        done = total - sum(len(t.slots) for t in todo)
        bar = Progress(total, label=f"sweep {op}", done=done, quiet=quiet, stream=progress_stream, unit="row")

        def on_result(key: str, res: dict) -> None:
            task = tasks_by_key[key]
            journal.put(key, task.chip, op, task.problem, cfg, res)
            results.keys.add(key)  # the result itself stays in the journal (read back by the output)
            bar.update(len(task.slots))

        if todo:
            journal.release()  # reopened by the first put: forked workers never inherit the connection
            ctx = _Context(cfg, {c.id: _chip_state(c) for c in chip_objs}, spaces)
            chunks = _chunks(todo, 1 if scheduler else jobs)
            try:
                if scheduler:
                    _run_dask(scheduler, chunks, ctx, on_result)
                elif jobs == 1 or len(chunks) == 1:
                    _run_local(chunks, ctx, on_result)
                else:
                    _run_pool(chunks, ctx, jobs, on_result)
            finally:
                bar.close()
        frame = build_frame(df_in, rows, chip_objs, slot_task, results, spaces, cfg)
        report = SweepReport(
            frame,
            out,
            jpath,
            chip_objs,
            op,
            [],
            int((frame["status"] == "ok").sum()),
            int((frame["status"] != "ok").sum()),
            len(todo),
            reused,
            0.0,
            notes,
        )
        write_table(report.table(), out)
        if library:
            report.libraries = write_libraries(library, rows, chip_objs, slot_task, results, spaces, cfg)
            report.notes.append("library: " + ", ".join(map(str, report.libraries)))
        report.elapsed_s = time.perf_counter() - t0
        return report
    finally:
        journal.close()


if __name__ == "__main__":
    # `python -m tiler.sweep ...`: the CLI's sweep command on its own; it runs the importable tiler.sweep (pickled
    # work for the pool or Dask refers to tiler.sweep, not __main__)
    from tiler.cli import sweep_main as _main

    sys.exit(_main())
