"""Where a sweep's searches run: this process, a local process pool or a Dask cluster."""

from __future__ import annotations

import os
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from ..errors import TilerError
from .config import MAX_CHUNK, _Context
from .solve import _solve_chunk, _worker_init


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
    """Cancel what has not started and end the workers this sweep started (their pids, not by name).

    The workers are taken before shutdown(), which forgets them (it sets `_processes` to None): ended after it,
    none was, and the interpreter's exit then waited for each worker to finish the search it was running (whose
    result is thrown away) before a Ctrl-C'd sweep could exit. A worker still alive 5 s after SIGTERM is killed
    (a suite run once saw a spawned worker outlive its SIGTERM)."""
    procs = list((getattr(pool, "_processes", None) or {}).values())
    stop = getattr(pool, "terminate_workers", None)  # Python >= 3.14: takes them before its own shutdown()
    if stop is not None:
        stop()
        return
    pool.shutdown(wait=False, cancel_futures=True)
    for proc in procs:
        if proc.is_alive():
            proc.terminate()
    for proc in procs:
        proc.join(timeout=5)
    for proc in procs:  # one that outlived SIGTERM (it ignored or had not yet met it) is killed
        if proc.is_alive():
            proc.kill()
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
