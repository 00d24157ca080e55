"""One search per task, never raising, in whichever process runs it: the workers' entry point and their memory
bound."""

from __future__ import annotations

import os
import signal
import sys
import time
from collections.abc import Sequence
from typing import Any

from ..errors import InfeasibleError, TilerError
from .config import SweepConfig, _chip_from_state, _Context, _pinned_space


def _py(v):
    return v.item() if hasattr(v, "item") else v


def solve(problem, chip, space, cfg: SweepConfig) -> dict:
    """One search, never raising: {'status': 'ok', tiling, row, search} or {'status': 'error', kind, error}.

    `kind` is 'input' for a problem no tiling fits or a rejected setting (deterministic: a resume keeps it) and
    'internal' for anything else (a bug or a crash: a resume retries it).
    """
    from ..search import search

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
    from ..search.runnable import per_target

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
    from ..model.schedule import clear_caches

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
