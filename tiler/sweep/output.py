"""A sweep's outputs: the table in input order (CSV or Parquet), the tiling library per chip, the report."""

from __future__ import annotations

import os
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ..errors import TilerError
from ..model.common import record, record_columns
from .config import SEARCH_COLUMNS, STATUS_COLUMNS, SweepConfig, _pinned_space
from .executors import _Task
from .rows import _Row


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

    from ..io import write_bytes, write_text

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
    from ..operator import get_operator

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
    from ..export import tiling_document, validate
    from ..search.runnable import Runnable

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
    from ..export import library_document, write_json

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
