"""`run_sweep`: checks the options, plans one task per distinct search, runs them and writes the outputs."""

from __future__ import annotations

import os
import time
from pathlib import Path

from ..errors import TilerError
from ..model.common import record
from ..space import parse_fixes
from .config import SweepConfig, _chip_state, _Context, _pinned_space, journal_key
from .executors import (
    _check_scheduler_address,
    _chunks,
    _import_distributed,
    _run_dask,
    _run_local,
    _run_pool,
    _Task,
)
from .journal import DAMAGED, Journal, _Results, journal_path
from .output import (
    SweepReport,
    _check_writable_format,
    _intact,
    build_frame,
    default_out,
    write_libraries,
    write_table,
)
from .rows import parse_rows, read_shapes


def _split_chips(chips) -> list[str]:
    if isinstance(chips, str):
        chips = chips.split(",")
    ids = [c.strip() for c in chips if c and c.strip()]
    if not ids:
        raise TilerError("--chip: give at least one chip id (tiler chips lists them)")
    if len(set(ids)) != len(ids):
        raise TilerError(f"--chip: a chip is listed twice: {','.join(ids)}")
    return ids


def _reusable(
    journal: Journal, tasks: dict, spaces: dict, cfg: SweepConfig, free, results, notes
) -> list[str]:
    """--resume: add to `results` the journaled results this sweep can reuse; return the keys to search again
    (stale or damaged), with a note on stderr counting those whose checksum failed."""
    stale, why = [], {"changed": 0, "unchecked": 0}
    for k, v in journal.scan():
        # a result journaled before the record changed (a GPU's pipes under msprof's names) is searched
        # again, and so is one journaled before searches kept each target's best tiling (runnable)
        if k not in tasks:
            continue
        if v["status"] == DAMAGED:
            why[v["why"]] += 1
            stale.append(k)
        elif v["status"] != "ok" or (
            set(record(tasks[k].chip.family)) <= set(v["row"])
            and isinstance(v.get("runnable"), dict)
            and _intact(v, tasks[k], spaces, cfg, free)
        ):
            results.keys.add(k)
        else:
            stale.append(k)
    if why["changed"] or why["unchecked"]:
        notes.append(
            f"note: --resume: {why['changed'] + why['unchecked']} journaled result(s) failed the journal's "
            f"checksum and were searched again ({why['changed']} changed after they were written, "
            f"{why['unchecked']} written without a checksum by an older tiler)"
        )
    return stale


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
    from ..hardware import load_chip
    from ..operator import check_constants, problem_class
    from ..problem import DTYPES
    from ..progress import Progress
    from ..search import STRATEGIES, check_seed
    from ..space import load_space

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
    from ..operator import get_operator

    for c in chip_objs:
        get_operator(
            op, c.family, target
        )  # no model or target for this family -> SpaceError now, not per row
    from ..io import check_writable

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
        results = _Results(journal)
        free = {c.id: _pinned_space(op, c.family, cfg.fix) for c in chip_objs} if library else None
        if resume:
            stale = _reusable(journal, tasks_by_key, spaces, cfg, free, results, notes)
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
