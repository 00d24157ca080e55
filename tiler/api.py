"""The Python API for notebooks and scripts: the CLI's commands as functions that return objects, not text.

    import tiler
    res = tiler.search(op="matmul", chip="h200", shape={"M": 4096, "N": 4096, "K": 4096}, top=5)
    res.tiling(0)       # the best tiling (knob -> value, labels for categorical knobs)
    res.row(0)          # its estimate (time_us, bound, per-pipe times, ...)
    res.document()      # the tiler.tiling/v1 dict that `tiler search --export` writes
    tiler.explain(op="matmul", chip="h200", shape="M=4096,N=4096,K=4096", tiling=res.tiling(0))
    tiler.rank(op="matmul", chip="h200", shape="M=4096,N=4096,K=4096", candidates="tilings.csv")
    tiler.sweep("shapes.csv", op="matmul", chips="h200,ascend910b3", out="results/s.csv")

Arguments take what the command line takes (a chip id or a profile .toml; a shape as `K=V,...` text or a dict;
`fix` as a dict, `KNOB=VALUE` strings or one comma-separated string) and the same defaults. Bad input raises
`tiler.errors.TilerError` with the message the CLI prints (without the `--` of flags: `fix: ...`, `export: ...`).
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field, fields
from pathlib import Path
from typing import Any, NamedTuple

from . import lookup as _fast_lookup
from .search.result import SearchResult

__all__ = [
    "Explanation",
    "Ranking",
    "Result",
    "calibrate",
    "check",
    "emit",
    "explain",
    "lookup",
    "lookup_slowdown",
    "rank",
    "rank_table",
    "report",
    "search",
    "shapes",
    "sweep",
]


class _InFile:
    """Errors about a file's contents raised by code that sees what was read from it, not the file (a table's
    rows and columns labelled `measurements:` or `candidates:`, a study labelled `storage:`), re-raised naming
    the flag and the file: `--candidates: m.csv: row 6: column 'BLOCK_N' must be a number`. Errors with another
    label, or that name the file already, pass unchanged."""

    LABELS = ("measurements", "--measurements", "candidates", "--candidates")

    def __init__(self, flag: str, path, labels: tuple[str, ...] = LABELS):
        self.flag, self.path, self.labels = flag, path, labels

    def __enter__(self):
        return self

    def __exit__(self, kind, exc, tb) -> bool:
        from .errors import TilerError

        if self.path is None or not isinstance(exc, TilerError):
            return False
        label, _, rest = str(exc).partition(": ")
        if label not in self.labels or str(self.path) in rest:
            return False
        exc.args = (
            f"{self.flag}: {self.path}: {rest}",
        )  # the same error (its type kept), now naming the file
        return False


def _chip(chip, hardware_dir=None):
    """A chip id or profile path loaded, its operators' constants checked (a loaded Chip passes through)."""
    from .hardware import load_chip
    from .operator import check_constants

    if hasattr(chip, "family") and hasattr(chip, "cores"):  # a loaded Chip
        return chip
    return check_constants(load_chip(str(chip), hardware_dir))


def _setup(op: str, chip, shape, dtype, hardware_dir, fix=None, target: str = "any"):
    from .operator import get_operator
    from .problem import parse_problem, parse_shape_text
    from .space import load_space, parse_fixes

    chip = _chip(chip, hardware_dir)
    fields_ = parse_shape_text(shape) if isinstance(shape, str) else dict(shape)
    problem = parse_problem(op, fields_, dtype)
    space = load_space(op, chip.family).pin(parse_fixes(fix)).for_target(target)
    get_operator(op, chip.family, target).admit(problem, chip)
    return chip, problem, space


@dataclass
class Result(SearchResult):
    """A `SearchResult` (`.tiling(i)`, `.row(i)`, `.cands`, `.est`, ...) that also knows its export target."""

    target: str = "any"
    # the best tiling of each target that can run the problem (tiler.search.runnable.Runnable); None: not computed
    runnable: Any = None
    # a measured search with vendor=True: the vendor call timed for the problem ({"name", "us"}); None: not asked
    vendor: dict | None = None

    def info(self) -> dict:
        """The document's `search` section (strategy, counts, proof, time)."""
        return {
            "strategy": self.strategy,
            "evaluated": int(self.evaluated),
            "bounded": int(self.bounded),
            "space_size": int(self.space_size),
            "feasible": int(self.feasible),
            "seed": self.seed,
            "proven_optimal": bool(self.proven_optimal),
            "elapsed_s": round(self.elapsed_s, 3),
        }

    def document(self, i: int = 0) -> dict:
        """The `tiler.tiling/v1` document of the i-th best tiling (i = 0: what `tiler search --export` writes)."""
        from .export import tiling_document
        from .space import take

        return tiling_document(
            self.problem,
            self.chip,
            self.tiling(i),
            self.row(i),
            self.info(),
            self.target,
            take(self.cands, slice(i, i + 1)),
            self.runnable if i == 0 else None,
        )

    def advice(self) -> list[str]:
        """The optimisation checklist items that apply to the best tiling (tiler.advice), one line each."""
        from .advice import advice
        from .space import take

        one = slice(0, 1)
        return advice(self.problem, self.chip, self.space, take(self.cands, one), take(self.est, one))

    def write(self, path: str | os.PathLike, i: int = 0) -> None:
        """Validate and write `document(i)` atomically (tiler.io: missing folders are created)."""
        from .export import write_json

        write_json(self.document(i), path, "export")


def search(
    op: str,
    chip,
    shape,
    dtype: str | None = None,
    fix=None,
    target: str = "any",
    top: int = 5,
    strategy: str = "exhaustive",
    trials: int | None = None,
    seed: int = 0,
    hardware_dir: str | os.PathLike | None = None,
    runnable: bool = True,
    space=None,
    vendor: bool = False,
    **kw: Any,
) -> Result:
    """`tiler search`: the `top` best tilings of one problem on one chip, best first.

    `kw` goes to the strategy as the CLI's options do (storage, study_name, measure, measure_timeout,
    warm_start, guided, diverse).

    runnable (default True): also find the best tiling of each export target that can run the problem on the chip
    (tiler.search.runnable), so the document carries a runnable view per target beside the unconstrained best;
    with `target` set, that target's tiling is the answer and the unconstrained best is searched for its gap.

    space: a user's Triton kernel space (a TOML path, a dict or a tiler.triton.UserSpace; docs/triton.md): search
    exactly that space instead: every config that satisfies its restrictions ranked by the model
    (tiler.triton.search_space; `diverse` in `kw` orders the top). The answer is a tiler.triton.UserResult: a Result
    in the model's names whose `configs[i]` is row i in the user's names. `fix`, a `target`, another strategy and
    the strategies' options do not apply to a given space and are refused.

    vendor: with a measured search through a runner (`measure="triton"`), also time the vendor library's call for
    the problem on the same machine (`Operator.vendor`: cuBLAS, cuDNN's conv, the fastest SDPA backend), once,
    after the search: `Result.vendor` = {"name", "us"}. A vendor timing that fails leaves None and a note."""
    from .errors import TilerError
    from .search import search as run_search

    if space is not None and vendor:
        raise TilerError(
            "vendor: not with space (the user space is ranked by the model, nothing is measured)"
        )
    if space is not None:
        return _search_space(
            op, chip, shape, dtype, fix, target, top, strategy, trials, hardware_dir, space, kw
        )
    chip, problem, space = _setup(op, chip, shape, dtype, hardware_dir, fix, target)
    if not isinstance(top, int) or top < 1:
        raise TilerError(f"top: must be an integer >= 1, got {top!r}")
    timer = _vendor_timer(problem, chip, kw.get("measure")) if vendor else None
    storage = kw.get("storage")
    with _InFile("--storage", storage if storage not in (None, "memory") else None, ("storage", "--storage")):
        res = run_search(problem, chip, space, strategy=strategy, top=top, seed=seed, trials=trials, **kw)
    out = Result(**{f.name: getattr(res, f.name) for f in fields(res)}, target=target)
    if runnable:
        out.runnable = _runnable(problem, chip, space, res, fix)
    if timer is not None:
        try:
            out.vendor = timer(out.document(0))
        except Exception as exc:  # noqa: BLE001 - the search's answer stands; the vendor's failure is a note
            first = (str(exc).strip().splitlines() or [type(exc).__name__])[0]
            out.notes.append(f"vendor: not timed ({type(exc).__name__}: {first[:160]})")
    return out


def _vendor_timer(problem, chip, measure):
    """The operator's vendor call for `measure` (a runner name), refused before the search when it cannot be."""
    from .errors import TilerError
    from .operator import get_operator

    if not measure:
        raise TilerError(
            "vendor: needs a measured search (measure=<runner>, --measure triton): it is timed beside"
        )
    if "{" in str(measure):
        raise TilerError(
            "vendor: needs a runner (--measure triton), not a command: the vendor call is timed by the runner"
        )
    return get_operator(problem.OP, chip.family).vendor(str(measure).strip())


def _search_space(op, chip, shape, dtype, fix, target, top, strategy, trials, hardware_dir, space, kw):
    """`search(..., space=...)`: the user space ranked (tiler.triton.search_space), after refusing the arguments
    that belong to a search of the model's own space (each refusal one line naming the argument)."""
    from .errors import TilerError
    from .space import parse_fixes
    from .triton import TARGET, search_space

    why = "the space's configs are ranked as given"
    if parse_fixes(fix):
        raise TilerError(f"fix: not with space ({why}: cut the params' values or add a restriction)")
    if target not in ("any", TARGET):
        raise TilerError(
            f"target: a user space is a Triton kernel's; must be any or {TARGET}, got {target!r}"
        )
    if strategy not in ("exhaustive", "auto"):
        raise TilerError(f"strategy: not {strategy!r} with space ({why}: every config is scored)")
    if trials is not None:
        raise TilerError(f"trials: not with space ({why}: every config is scored)")
    diverse = kw.pop("diverse", None)
    extra = sorted(k for k, v in kw.items() if v and k != "measure_timeout")
    if extra:
        raise TilerError(f"{extra[0]}: not with space ({why}, by the model)")
    return search_space(
        op, chip, shape, space, dtype, top=top, diverse=bool(diverse), hardware_dir=hardware_dir
    )


def _runnable(problem, chip, space, res, fix):
    """The per-target answers of a search result (tiler.search.runnable.per_target)."""
    from .search import exhaustive
    from .search.runnable import per_target
    from .space import load_space, parse_fixes

    if space.target == "any":
        return per_target(problem, chip, space, res)
    free = load_space(problem.OP, chip.family).pin(parse_fixes(fix))
    best = exhaustive(problem, chip, free, top=1)
    return per_target(problem, chip, free, best, only=space.target, known={space.target: res})


@dataclass
class Explanation:
    """`tiler explain`: one tiling's estimate (`row`), the advice lines, and its document; `completed`: the knobs
    the model chose because the given tiling did not set them (empty for a whole tiling), `native`: the target
    names read (target -> names)."""

    problem: Any
    chip: Any
    space: Any
    tiling: dict
    row: dict
    advice: list[str]
    target: str = "any"
    cand: dict = field(default_factory=dict, repr=False)
    completed: list[str] = field(default_factory=list)
    native: dict = field(default_factory=dict)

    def document(self) -> dict:
        """The tiling as a `tiler.tiling/v1` document (search section: `given`, with the completed knobs)."""
        from .export import tiling_document

        search = {"strategy": "given", "evaluated": 1, "seed": None, "proven_optimal": False}
        if self.completed:
            search["completed"] = list(self.completed)
        doc = tiling_document(
            self.problem, self.chip, self.tiling, self.row, search, target=self.target, cand=self.cand
        )
        doc["advice"] = list(self.advice)
        return doc


def explain(
    op: str,
    chip,
    shape,
    tiling: dict,
    dtype: str | None = None,
    target: str = "any",
    hardware_dir: str | os.PathLike | None = None,
) -> Explanation:
    """`tiler explain`: break down one tiling: a dict of knob -> value (labels and aliases allowed), of a target's
    own names (CATLASS template arguments, TCubeTiling fields, ...: tiler.search.complete), or only part of one
    (the rest is completed with the model's best choice, and `completed` names those knobs); an exported document
    works, and its dtype is the problem's unless `dtype` is given (then they must agree). An infeasible tiling
    raises TilerError naming the rules it breaks."""
    from .advice import advice
    from .errors import TilerError
    from .operator import get_operator
    from .search import evaluate
    from .search.complete import complete

    if isinstance(tiling, dict) and isinstance(tiling.get("tiling"), dict):  # a whole exported document
        doc_dtype = (tiling.get("problem") or {}).get("dtype")
        if dtype is not None and doc_dtype is not None and str(dtype).strip().lower() != doc_dtype:
            raise TilerError(f"dtype: the tiling document is for {doc_dtype}, got {dtype!r}")
        dtype = dtype if dtype is not None else doc_dtype
        tiling = tiling["tiling"]
    chip, problem, space = _setup(op, chip, shape, dtype, hardware_dir, target=target)
    whole = complete(problem, chip, space, tiling)
    cand, est, rules = evaluate(problem, chip, space, whole.tiling)
    broken = [r for r, ok in rules.items() if not ok]
    if broken:
        text = get_operator(space.op, space.family, space.target).RULE_TEXT
        raise TilerError(
            f"tiling: infeasible on {chip.id}: " + "; ".join(f"{r} ({text.get(r, r)})" for r in broken)
        )
    row = {k: (v[0].item() if hasattr(v[0], "item") else v[0]) for k, v in est.items()}
    lines = advice(problem, chip, space, cand, est)
    return Explanation(
        problem, chip, space, space.decode(cand, 0), row, lines, target, cand, whole.completed, whole.native
    )


class Ranking(NamedTuple):
    """`tiler rank`: the feasible rows scored and ranked (predicted_us, rank), and the rejected rows (reason)."""

    ranked: Any
    rejected: Any


def rank(
    op: str,
    chip,
    shape,
    candidates,
    dtype: str | None = None,
    target: str = "any",
    hardware_dir: str | os.PathLike | None = None,
) -> Ranking:
    """`tiler rank`: score a table of tilings (a pandas DataFrame, or a CSV path) for one problem."""
    table = rank_table(op, chip, shape, candidates, dtype, target, hardware_dir)
    return Ranking(table.ranked, table.rejected)


@dataclass
class RankTable:
    """What `tiler rank` shows: the ranked rows (after `diverse` and `top`), the rejected ones, how many rows were
    for another problem, the agreement with measured times and the vendor comparison (None without measured times),
    and the knobs whose defaults measured rows took."""

    problem: Any
    chip: Any
    ranked: Any
    rejected: Any
    given: int  # the rows read
    skipped: int  # rows for another problem or kernel (select_rows)
    agreed: Any  # (measured column, tiler.agreement.Agreement) or None
    vendor: Any
    defaulted: Any  # tiler.rank.defaults_taken


def rank_table(
    op: str,
    chip,
    shape,
    candidates,
    dtype: str | None = None,
    target: str = "any",
    hardware_dir: str | os.PathLike | None = None,
    top: int | None = None,
    diverse: bool = False,
) -> RankTable:
    """`tiler rank` in full: `rank` plus the agreement of the model's order with measured times (over every ranked
    row, before `diverse` and `top`), the vendor comparison, the knobs measured rows left at a default, and the rows
    ordered as the diverse top-k (`diverse`) and cut to `top`."""
    import pandas as pd

    from .operator import get_operator
    from .rank import (
        defaults_taken,
        diverse_rows,
        measured_agreement,
        rank_candidates,
        read_candidates,
        vendor_of,
    )

    chip, problem, space = _setup(op, chip, shape, dtype, hardware_dir, target=target)
    df = candidates if isinstance(candidates, pd.DataFrame) else read_candidates(candidates, "candidates")
    with _InFile("--candidates", None if isinstance(candidates, pd.DataFrame) else candidates):
        ranked, rejected = rank_candidates(problem, chip, df, space)
    skipped = len(df) - len(ranked) - len(rejected)  # select_rows: rows for another problem or kernel
    agreed = measured_agreement(ranked)  # before top and diverse: every ranked row, in the model's order
    model = get_operator(problem.OP, chip.family, space.target)
    vendor = vendor_of(problem, df, ranked, model.IMPLS) if agreed is not None else None
    took = defaults_taken(ranked, rejected)
    if diverse:
        ranked = diverse_rows(ranked, model.SHAPE_KNOBS, model.DEPTH_KNOB)
    if top is not None:
        ranked = ranked.head(top)
    return RankTable(problem, chip, ranked, rejected, len(df), skipped, agreed, vendor, took)


def sweep(shapes, op: str, chips, out: str | os.PathLike | None = None, **kw: Any):
    """`tiler sweep`: `tiler.sweep.run_sweep` (shapes: a CSV/Parquet path or a DataFrame; chips: ids, a list or
    a comma-separated string); returns its SweepReport (`.frame`: the table, also written to `out`)."""
    from .sweep import run_sweep

    return run_sweep(shapes, op, chips, out, **kw)


def report(result, out: str | os.PathLike | None = None, row: int | None = None, hardware_dir=None) -> Path:
    """`tiler report`: draw a sweep table or a search/explain document as one HTML page (tiler.report, needs
    tiler[report]); returns the path written (default: RESULT with the suffix .html)."""
    from .report import write_report  # plotly is imported only here

    return write_report(result, out, row, hardware_dir)


def check(path: str | os.PathLike, target: str | None = None, hardware_dir=None) -> tuple[int, list]:
    """`tiler check` of one exported file (tiling or library JSON): (views checked, the rules broken, each a
    tiler.check.Finding). A file that cannot be read, is not JSON or not a tiler document, or names an unknown chip,
    operator or target raises TilerError naming the file."""
    import json

    from .check import check_document
    from .errors import TilerError
    from .space import read_text_file

    name = str(path)
    text = read_text_file(name, "file")  # PATH: cannot read file: WHY (binary, UTF-16, a folder, ...)
    try:
        doc = json.loads(text)
    except (RecursionError, ValueError) as exc:  # JSONDecodeError; too deep; an int of > 4300 digits
        where = f" at line {exc.lineno} column {exc.colno}" if isinstance(exc, json.JSONDecodeError) else ""
        why = " (nested too deep)" if isinstance(exc, RecursionError) else ""
        raise TilerError(f"{name}: not JSON{where}{why}") from None
    try:
        return check_document(doc, hardware_dir, target)
    except TilerError as exc:
        raise TilerError(f"{name}: {exc}") from None


def lookup(
    library,
    op: str | None = None,
    chip=None,
    shape=None,
    dtype: str | None = None,
    slowdown: bool = False,
    hardware_dir: str | os.PathLike | None = None,
) -> dict:
    """`tiler lookup`: the tiling of `shape` from a sweep's library (a path, loaded once and kept, or a
    `tiler.lookup.Library`): the exact entry or the nearest (`exact`, `key`, `distance`, `work_ratio`,
    `scaled_time_us`); `slowdown=True` adds the model's slowdown of reusing it. `tiler.lookup(...)` is the same
    call without importing this module (tiler.lookup's docstring)."""
    from .lookup import lookup as _lookup

    return _lookup(library, op, chip, shape, dtype, slowdown=slowdown, hardware_dir=hardware_dir)


def lookup_slowdown(lib, out: dict, hardware_dir=None) -> None:
    """The model's slowdown of reusing the nearest entry `out` of the fast library `lib` (tiler.lookup.Library):
    best_time_us (an exhaustive search of the query shape for the entry's target), reused_time_us (the entry's
    tiling explained on the query shape) and slowdown = reused / best; a tiling the query shape does not admit
    gets slowdown None and reuse_error. `Library.lookup(slowdown=True)` calls this (installed below)."""
    from .errors import TilerError
    from .space import load_space

    shape, dtype, _ = lib.parse(out["query"].split(":")[1], out["query"].rsplit(":", 1)[1])
    target = out.get("search", {}).get("target", "any")
    chip = lib.chip.get("id", "")
    best = search(lib.op, chip, shape, dtype, target=target, top=1, hardware_dir=hardware_dir)
    out["best_time_us"] = float(best.row(0)["time_us"])
    from .hardware import load_chip

    family = lib.chip.get("family") or load_chip(chip, hardware_dir).family
    names = set(load_space(lib.op, family).names)
    tiling = {k: v for k, v in out["tiling"].items() if k in names}
    try:
        reused = explain(lib.op, chip, shape, tiling, dtype, target=target, hardware_dir=hardware_dir)
    except TilerError as exc:
        out.update(reused_time_us=None, slowdown=None, reuse_error=str(exc))
        return
    out["reused_time_us"] = float(reused.row["time_us"])
    out["slowdown"] = out["reused_time_us"] / out["best_time_us"]


def emit(
    library,
    target: str,
    out: str | os.PathLike | None = None,
    op: str | None = None,
    chip: str | None = None,
):
    """`tiler emit`: a sweep's library (a path or a parsed document) as a dispatch unit for one target
    (tiler.dispatch: a C++ header for CATLASS/AscendC, a Python module for Triton). `op` and `chip`, when given,
    must be the library's. With `out` (a folder) the unit is written there; returns the tiler.dispatch.Unit
    (`.name`, `.text`, `.skipped`: the entries without a view of the target, left out). Nothing is written on an
    error."""
    from .dispatch import build_unit, write_unit
    from .export import validate
    from .library import load
    from .lookup import check_library, from_document

    if isinstance(library, dict):
        validate(library)
        doc, source = library, "the library"
    else:
        lib = load(library)
        doc = {"op": lib.op, "chip": lib.chip, "entries": lib.entries}
        source = str(library)
    check_library(from_document({"schema": "tiler.library/v1", **doc}), op, chip)
    if out is not None:
        from .io import check_writable

        check_writable(Path(out) / "x", "out")  # a file where the folder goes: refused before anything
    unit = build_unit(doc, target, source)
    if out is not None:
        write_unit(unit, out)
    return unit


def shapes(
    config,
    op: str,
    tokens="1,128,2048",
    context: int = 4096,
    batch: int = 1,
    tp: int = 1,
    dtype: str | None = None,
    out: str | os.PathLike | None = None,
):
    """`tiler shapes`: the operator shapes of a transformer from its Hugging Face config.json (tiler.shapes:
    every linear as a layout=nt matmul, attention for prefill and decode, with a `count` column) as a DataFrame;
    with `out`, also written there as the CSV `tiler sweep` reads."""
    from .shapes import model_shapes, write_shapes

    frame = model_shapes(config, op, tokens=tokens, context=context, batch=batch, tp=tp, dtype=dtype)
    if out is not None:
        write_shapes(frame, out)
    return frame


def _read_measurements(op: str, chip, measurements, manifest) -> tuple[Any, list, list[str]]:
    """calibrate's rows (as given, or read from a CSV path: tiler's table or an msprof op_summary), the rows the
    reader set aside (file line, why) and the notes on them. An op_summary without a manifest or a tiling column
    is read as totals (every row's problem from its Input Shapes, an empty tiling each)."""
    from . import msprof
    from .calibrate import unused_line
    from .errors import TilerError
    from .rank import read_candidates

    notes: list[str] = []
    unused: list = []  # op_summary rows that are not measurements of `op`: (file line, why)
    if isinstance(measurements, str | os.PathLike):
        raw = msprof.read_table(measurements)
        if msprof.is_op_summary(raw):
            totals = manifest is None and "tiling" not in raw.columns and "Input Shapes" in raw.columns
            if (
                totals
            ):  # every row's problem from its Input Shapes by msprof's own reader (an empty tiling each)
                raw = raw.assign(tiling="{}")
            got = msprof.ingest(
                raw,
                op,
                msprof.read_manifest(manifest) if manifest else None,
                family=None if totals else chip.family,
                source=str(measurements),
                manifest_source=f"--manifest {manifest}",
            )
            data, unused = got.table.drop(columns="line") if totals else got.table, got.unmatched
            notes += [f"{measurements}: {unused_line(unused, 'line')}"] if totals and unused else []
        elif manifest:
            raise TilerError(
                "--manifest: only an msprof op_summary (with 'Op Name', 'Task Duration(us)') uses it"
            )
        else:
            data = read_candidates(measurements, "--measurements")
    else:
        data = measurements
    return data, unused, notes


def calibrate(
    op: str,
    chip,
    measurements,
    folds: int = 4,
    seed: int = 0,
    fit_shapes: list[str] | None = None,
    params: list[str] | None = None,
    manifest: str | os.PathLike | None = None,
    rounds: int | None = None,
    starts: list[dict] | None = None,
    note: str = "",
    data_name: str | None = None,
    hardware_dir: str | os.PathLike | None = None,
):
    """`tiler calibrate` without writing the profile (tiler.calibrate.write_profile writes `.chip`).

    measurements: a DataFrame or a CSV path: tiler's table, or an msprof op_summary (with `manifest`, or a
    `tiling` column). Rows that give their tilings are fitted at them (tiler.calibrate.calibrate: a
    CalibrationResult). Rows that give only a problem and a total time (a library's kernels: a table with no knob
    column, an op_summary with neither manifest nor tiling column) are fitted from totals
    (tiler.calibrate_totals: the model's best tiling stands in for the library's, `rounds` of search <-> fit; a
    TotalsResult; `starts`: its starting points, tiler.calibrate_totals). Either result's `.summary()` says what was fitted and its held-out error; `.notes` lists the
    profiler rows that were not used."""
    from .calibrate import calibrate as fit
    from .calibrate_totals import ROUNDS, calibrate_totals, has_tilings
    from .errors import TilerError

    chip = _chip(chip, hardware_dir)
    name = data_name or (
        Path(measurements).name if isinstance(measurements, str | os.PathLike) else "measurements"
    )
    data, unused, notes = _read_measurements(op, chip, measurements, manifest)
    source = measurements if isinstance(measurements, str | os.PathLike) else None
    with _InFile("--measurements", source):  # a row's or column's error names the file
        if not has_tilings(op, chip.family, data):
            if fit_shapes is not None:
                raise TilerError(
                    "fit-shapes: not with totals (rows without tilings); give the rows to fit instead"
                )
            result = calibrate_totals(
                chip,
                op,
                data,
                folds=folds,
                seed=seed,
                params=params,
                rounds=ROUNDS if rounds is None else rounds,
                starts=starts,
                data_name=name,
                note=note,
            )
        else:
            if rounds is not None:
                raise TilerError(
                    "rounds: only a fit from totals (rows without tilings) searches and fits in rounds"
                )
            result = fit(
                chip,
                op,
                data,
                folds=folds,
                seed=seed,
                fit_shapes=fit_shapes,
                params=params,
                data_name=name,
                note=note,
                unused=unused,
            )
            if result.dropped:
                notes.append(
                    f"{measurements if isinstance(measurements, str | os.PathLike) else name}: {result.unused_text()}"
                )
    result.notes = notes
    return result


_fast_lookup.install_slowdown(
    lookup_slowdown
)  # Library.lookup(slowdown=True) runs the model through this layer
