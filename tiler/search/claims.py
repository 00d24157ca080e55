"""Claims on a shared optuna study: several processes on one SQLite study evaluate each tiling once and spend one
budget between them.

optuna's storage has no atomic "take this tiling" operation, and reading every trial to find out what the others
did costs a query per trial that grows with the study. So the processes of a study share two small files beside
its database:

- `<db>.lock`, an exclusive `flock` held while a process claims a tiling, asks optuna for a trial or tells one
  (two processes never pop the same enqueued trial, a cause of "Cannot tell a COMPLETE trial");
- `<db>.claims`, a SQLite table of (study, tiling key, trial, time, done): a process evaluates a tiling only after
  inserting its claim; a claim that is done means the tiling is in the study (answered as a repeat), a live one
  that another process is evaluating it (this trial is pruned, free), and the number of done or live claims is the
  study's spent budget.

A claim that is not done after `expiry` seconds belongs to a process that died mid-trial and may be taken over. A
server storage (PostgreSQL, MySQL) has no file beside it: `for_storage` returns None and the study runs as before
(docs/search.md says what is then not guaranteed).
"""

from __future__ import annotations

import contextlib
import sqlite3
import time
from pathlib import Path

DONE, RUNNING, BUDGET = "done", "running", "budget"


def sqlite_file(url: str) -> Path | None:
    """The database file of a SQLite storage URL, whose processes share `<db>.lock`; None for any other storage, an
    in-memory one, or where there is no flock (not POSIX)."""
    if not url.startswith("sqlite:///") or url == "sqlite:///:memory:":
        return None
    try:
        import fcntl  # noqa: F401 -- POSIX only
    except ImportError:
        return None
    return Path(url[len("sqlite:///") :])


def setup_lock(url: str):
    """The study's `<db>.lock`, for a process to hold while optuna creates a new SQLite storage's tables, so that
    processes starting on a new database take turns instead of racing on its version table (the loser's whole
    storage set-up, alembic's scripts loaded three times, was thrown away and redone after a sleep). A no-op for
    a database that has content already (no lock file left beside a file that turns out not to be a study), for
    other storages and where the lock file cannot be made (optuna's own error then stands)."""
    db = sqlite_file(url)
    if db is None or (db.is_file() and db.stat().st_size > 0):
        return contextlib.nullcontext()
    lock = _FileLock(Path(f"{db}.lock"))
    try:
        open(lock.path, "a+b").close()  # noqa: SIM115 -- only checks that the lock can be taken
    except OSError:
        return contextlib.nullcontext()
    return lock


class _FileLock:
    """An exclusive flock on a file, re-entrant within one process."""

    def __init__(self, path: Path):
        self.path, self.fd, self.depth = path, None, 0

    def __enter__(self):
        import fcntl

        if self.depth == 0:
            self.fd = open(self.path, "a+b")  # noqa: SIM115 -- held across __enter__/__exit__
            fcntl.flock(self.fd, fcntl.LOCK_EX)
        self.depth += 1
        return self

    def __exit__(self, *exc) -> None:
        import fcntl

        self.depth -= 1
        if self.depth == 0:
            fcntl.flock(self.fd, fcntl.LOCK_UN)
            self.fd.close()
            self.fd = None


class Claims:
    """The claims of one study (see the module docstring)."""

    def __init__(self, db: Path, study: str, expiry: float):
        self.study, self.expiry = study, expiry
        self.lock = _FileLock(Path(f"{db}.lock"))
        self.conn = sqlite3.connect(f"{db}.claims", timeout=60, isolation_level=None)
        with self.lock:
            # a claim is worth a trial: no wait for the disk on each commit (a power cut may lose the last claims,
            # which only lets a tiling be evaluated once more)
            self.conn.execute("PRAGMA journal_mode=WAL")
            self.conn.execute("PRAGMA synchronous=NORMAL")
            self.conn.execute(
                "CREATE TABLE IF NOT EXISTS claims (study TEXT, key TEXT, trial INTEGER, at REAL, done INTEGER, "
                "PRIMARY KEY (study, key))"
            )

    @classmethod
    def for_storage(cls, store, study: str, expiry: float) -> Claims | None:
        """Claims beside a SQLite study database; None for any other storage (or without flock)."""
        db = sqlite_file(str(getattr(store, "url", "")))
        return None if db is None else cls(db, study, expiry)

    def adopt(self, done: dict[str, int]) -> None:
        """Record evaluations the study already holds (key -> trial; a study run before claims existed)."""
        with self.lock:
            self.conn.executemany(
                "INSERT OR IGNORE INTO claims VALUES (?, ?, ?, ?, 1)",
                [(self.study, k, n, time.time()) for k, n in done.items()],
            )

    def claim(self, key: str, trial: int, budget: int) -> tuple[str, int] | None:
        """None: `trial` holds the claim on `key` now. (DONE, n): trial n evaluated it; (RUNNING, n): trial n of
        a live process is evaluating it; (BUDGET, spent): the done and live claims reach `budget`."""
        now = time.time()
        with self.lock:
            row = self.conn.execute(
                "SELECT trial, at, done FROM claims WHERE study = ? AND key = ?", (self.study, key)
            ).fetchone()
            if row is not None and row[2]:
                return DONE, int(row[0])
            if row is not None and now - row[1] < self.expiry:
                return RUNNING, int(row[0])
            (spent,) = self.conn.execute(
                "SELECT COUNT(*) FROM claims WHERE study = ? AND (done = 1 OR at > ?) AND key != ?",
                (self.study, now - self.expiry, key),
            ).fetchone()
            if spent >= budget:
                return BUDGET, int(spent)
            self.conn.execute(
                "INSERT OR REPLACE INTO claims VALUES (?, ?, ?, ?, 0)", (self.study, key, trial, now)
            )
        return None

    def finish(self, key: str, trial: int, done: bool) -> None:
        """After `trial` was told: its claim is done (the tiling is in the study), or released for another trial
        (pruned, interrupted)."""
        with self.lock:
            if done:
                self.conn.execute(
                    "UPDATE claims SET done = 1 WHERE study = ? AND key = ? AND trial = ?",
                    (self.study, key, trial),
                )
            else:
                self.conn.execute(
                    "DELETE FROM claims WHERE study = ? AND key = ? AND trial = ? AND done = 0",
                    (self.study, key, trial),
                )

    def close(self) -> None:
        with contextlib.suppress(sqlite3.Error):
            self.conn.close()


__all__ = ["BUDGET", "DONE", "RUNNING", "Claims", "setup_lock", "sqlite_file"]
