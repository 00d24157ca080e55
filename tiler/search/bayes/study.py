"""The optuna study: its storage, name and tag, the refusal of another search's study, sharing it."""

from __future__ import annotations

import contextlib
import hashlib
import json
import time
import warnings
from pathlib import Path

from ...errors import TilerError
from ...space import Space
from ..claims import setup_lock
from .objective import Objective

DEFAULT_STORAGE = Path("results") / "studies.db"


# ------------------------------------------------------------------ storage and study


def open_storage(storage=None):
    """An optuna storage: None -> SQLite results/studies.db, "memory", a storage object, a URL or a .db path."""
    import optuna

    if storage is None or storage == "":
        DEFAULT_STORAGE.parent.mkdir(parents=True, exist_ok=True)
        url = f"sqlite:///{DEFAULT_STORAGE}"
    elif isinstance(storage, optuna.storages.BaseStorage):
        return storage
    elif storage == "memory":
        return optuna.storages.InMemoryStorage()
    elif (
        isinstance(storage, str | Path)
        and "://" not in str(storage)
        and Path(storage).suffix in (".db", ".sqlite", ".sqlite3")
    ):
        url = f"sqlite:///{storage}"
    else:
        url = str(storage)
    if "://" not in url:
        raise TilerError(
            f"storage: not a storage URL: {url!r} (e.g. sqlite:///results/studies.db, "
            "postgresql://user@host/db, memory)"
        )
    engine_kwargs = _sqlite_kwargs(url)
    for attempt in range(3):
        try:
            with warnings.catch_warnings(), setup_lock(url):
                warnings.simplefilter("ignore")  # heartbeat is experimental in some optuna versions
                rdb = optuna.storages.RDBStorage(
                    url, engine_kwargs=engine_kwargs, heartbeat_interval=60, grace_period=180
                )
            return _check_tables(rdb, url)
        except TilerError:
            raise
        except Exception as exc:  # sqlalchemy/driver errors: bad scheme, missing folder, no server, no driver
            # two processes creating the same new database race on its version table: the loser retries (on a
            # new SQLite file they take turns: setup_lock)
            racing = ("UNIQUE constraint failed", "already exists", "database is locked")
            if any(r in str(exc) for r in racing) and attempt < 2:
                time.sleep(0.2 * (attempt + 1))
                continue
            first = (str(exc).strip().splitlines() or [type(exc).__name__])[0]
            _raise_storage(url, first[:200])


def _check_tables(rdb, url: str):
    """`rdb` when every table of optuna's names in it has optuna's columns; a database of another program's (or a
    damaged) `studies` or `trials` table fails later, inside optuna's trials, so it is refused here in one line."""
    try:
        from optuna.storages._rdb.models import BaseModel
        from sqlalchemy import inspect
    except ImportError:  # another optuna layout: its own errors stand
        return rdb
    have = inspect(rdb.engine)
    names = set(have.get_table_names())
    for table in BaseModel.metadata.sorted_tables:
        if table.name in names:
            cols = {c["name"] for c in have.get_columns(table.name)}
            missing = [c.name for c in table.columns if c.name not in cols]
            if missing:
                _raise_storage(
                    url, f"table {table.name!r} has no column {', '.join(missing)}: not an optuna storage"
                )
    return rdb


def _sqlite_kwargs(url: str) -> dict:
    """SQLite files: write-ahead log and synchronous=NORMAL, so a commit does not wait for the disk (about 3 ms
    each, ~25 per trial). A killed process loses nothing that was committed; only a power cut could."""
    if not url.startswith("sqlite:///"):
        return {}
    from sqlalchemy.engine import make_url

    db = make_url(url).database
    if not db or db == ":memory:":
        return {}
    Path(db).parent.exists() or _raise_storage(url, f"folder {str(Path(db).parent)!r} does not exist")

    def connect():
        import sqlite3

        con = sqlite3.connect(db, check_same_thread=False, timeout=30)
        con.execute("PRAGMA journal_mode=WAL")
        con.execute("PRAGMA synchronous=NORMAL")
        return con

    return {"creator": connect}


def _raise_storage(url: str, why: str):
    raise TilerError(f"storage: cannot open {url!r}: {why}")


def default_study_name(problem, chip, space: Space, strategy: str, seed: int, signature: dict) -> str:
    """chip-op-problem-strategy-seed plus a short hash of what else changes the objective (pins, measure, ...)."""
    text = json.dumps(signature, sort_keys=True, default=str)
    h = hashlib.sha1(text.encode()).hexdigest()[:8]
    return f"{chip.id}-{problem.key()}-{strategy}-seed{seed}-{h}"


def study_descriptor(problem, chip, space: Space) -> dict:
    """What a study's trials are about, stored as its user attribute "tiler": a study of another op, family,
    chip, problem or search space is refused instead of mixing (or crashing on) foreign trials."""
    domains = json.dumps(space.domains(), sort_keys=True, default=str)
    return {
        "op": space.op,
        "family": chip.family,
        "chip": chip.id,
        "problem": problem.key(),
        "knobs": list(space.names),
        "space": hashlib.sha1(domains.encode()).hexdigest()[:12],
    }


def _check_study(study, name: str, desc: dict, trials) -> None:
    """Raise TilerError if `study` was made for something else (see study_descriptor); tag it as ours if new."""
    have = study.user_attrs.get("tiler")
    why = ""
    if isinstance(have, dict):
        for k in ("op", "family", "chip", "problem", "space"):
            if have.get(k) != desc[k]:
                why = f"its {k} is {have.get(k)!r}, this search's is {desc[k]!r}"
                break
    elif have is not None:
        why = "its 'tiler' attribute is not tiler's"
    else:  # a study made before the tag, or by someone else: its tilings must be over this space's knobs
        knobs = set(desc["knobs"])
        for t in trials:
            tiling = t.user_attrs.get("tiling")
            params = {p.split("|")[0] for p in t.params}
            if (
                tiling is not None and (not isinstance(tiling, dict) or set(tiling) != knobs)
            ) or not params <= knobs:
                got = sorted(tiling) if isinstance(tiling, dict) else sorted(params)
                why = f"its trials tile {', '.join(map(str, got))[:100] or 'nothing'}, not {desc['op']} on {desc['family']}"
                break
    if why:
        raise TilerError(
            f"study {name!r}: made for another search ({why}); give another --study-name or --storage"
        )
    if have is None:
        study.set_user_attr("tiler", desc)


def _open_study(optuna, store, name: str, obj: Objective, problem, chip, space: Space):
    """Create or resume the study `name` in `store`, check that it is this search's and load its trials into `obj`:
    (study, its trials before this run)."""
    try:
        study = optuna.create_study(
            storage=store,
            study_name=name,
            direction="minimize",
            sampler=obj.sampler,
            load_if_exists=True,
        )
        old = study.get_trials(deepcopy=False)
    except (optuna.exceptions.StorageInternalError, KeyError) as exc:  # tables of optuna's names, not its own
        why = (str(exc.__cause__ or exc).strip().splitlines() or [type(exc).__name__])[0][:160]
        raise TilerError(
            f"storage: cannot create or load study {name!r}: not an optuna storage or damaged: {why}"
        ) from None
    _check_study(study, name, study_descriptor(problem, chip, space), old)
    metric = "measured_us" if obj.measure_fn is not None else "predicted_us"
    if study.metric_names != [metric]:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # experimental in some optuna versions
            study.set_metric_names([metric])
    obj.load(old)
    return study, old


def _share_study(optuna, store, study, name: str, obj: Objective, trials: int, measure_timeout: float):
    """Set `obj` up for a study other processes may share; returns the lock each trial's evaluation holds.

    On SQLite each tiling is claimed before it is evaluated and the budget is the study's (tiler.search.claims); on
    a server, a measured study re-reads the storage's finished trials before each measurement and after each trial
    (a model search skips the cost). An in-memory study is this process's alone: no lock."""
    lock = contextlib.nullcontext()
    if isinstance(store, optuna.storages.InMemoryStorage):
        return lock
    from optuna.trial import TrialState

    from ..claims import Claims

    def refresh() -> None:
        obj.load(study.get_trials(deepcopy=False, states=(TrialState.COMPLETE, TrialState.FAIL)))

    measured = obj.measure_fn is not None
    expiry = (measure_timeout + 60.0) if measured else 60.0  # a live trial ends well within this
    obj.claims = Claims.for_storage(store, name, expiry)
    if obj.claims is not None:
        obj.refresh, obj.budget, lock = refresh, trials, obj.claims.lock
        obj.claims.adopt({json.dumps(list(k)): n for k, (n, _, _) in obj.cache.items()})
    elif measured:
        obj.refresh = refresh
    return lock
