"""Reading a RESULT for the report: a sweep table (CSV or Parquet) or a tiling document, into rows."""

from __future__ import annotations

import json
import math
import re
from functools import lru_cache
from pathlib import Path

from ..errors import TilerError
from .rows import GAP_TIE, Report, Row, TargetTime, _blank, group_rows, name_family, shape_family


def _problem(op: str, key: str):
    """The problem of a result key `op:F=V,...:dtype` (the sweep's `key` column)."""
    from ..problem import parse_problem

    parts = str(key).split(":")
    if len(parts) != 3 or parts[0] != op:
        raise TilerError(f"key {key!r}: not an {op} problem key (op:FIELD=VALUE,...:dtype)")
    fields = dict(f.split("=", 1) for f in parts[1].split(",") if "=" in f)
    return parse_problem(op, fields, parts[2])


def _chip(chip_id: str, chips: dict, notes: list[str], hardware_dir=None):
    from ..hardware import load_chip
    from ..operator import check_constants

    if chip_id not in chips:
        try:
            chips[chip_id] = check_constants(load_chip(chip_id, hardware_dir))
        except TilerError as exc:
            chips[chip_id] = None
            notes.append(f"chip {chip_id}: no profile ({exc}); its roofline is not drawn")
    return chips[chip_id]


def _num(v) -> float:
    try:
        f = float(v)
    except (TypeError, ValueError):
        return math.nan
    return f


def _finite(v) -> float | None:
    f = _num(v)
    return f if math.isfinite(f) else None


@lru_cache(maxsize=32)
def _knobs(op: str, family: str | None) -> tuple[str, ...]:
    """The knob columns of a sweep row: its family's space, in the space's order; without a family (the chip's
    profile could not be loaded), those of every family of the op."""
    from ..operator import known_ops
    from ..space import load_space

    fams = [family] if family else [f for o, f in known_ops() if o == op]
    names: list[str] = []
    for fam in fams:
        try:
            names += [k for k in load_space(op, fam).names if k not in names]
        except TilerError:
            continue
    return tuple(names)


def _target_columns(columns) -> list[str]:
    """The targets with `<T>_time_us` and `<T>_gap` columns, in column order."""
    cols = set(columns)
    return [
        m.group(1)
        for c in columns
        if (m := re.fullmatch(r"(.+)_time_us", str(c))) and f"{m.group(1)}_gap" in cols
    ]


def _sweep_targets(rec: dict, has_runnable: bool, target_cols: list[str]) -> dict[str, TargetTime] | None:
    """A sweep row's targets: `runnable` (names, comma-separated) and each target's `<T>_time_us`/`<T>_gap`;
    None when the table has neither."""
    if not has_runnable and not target_cols:
        return None
    raw = rec.get("runnable")
    names = [] if _blank(raw) else [n.strip() for n in str(raw).split(",") if n.strip()]
    out: dict[str, TargetTime] = {}
    for t in [*names, *(t for t in target_cols if t not in names)]:
        time_us, gap = _finite(rec.get(f"{t}_time_us")), _finite(rec.get(f"{t}_gap"))
        runs = t in names if has_runnable else time_us is not None
        out[t] = TargetTime(runs, time_us if runs else None, gap if runs else None)
    return out


def _custom(targets: dict[str, TargetTime] | None, explicit=None) -> bool | None:
    """Whether the row's best needs a custom kernel: the result says so, or no target can run the row, or
    every target's best is slower than the unconstrained best (a target that could run that best would match
    it).
    None when the result does not tell."""
    if not _blank(explicit):
        if isinstance(explicit, str):
            return explicit.strip().lower() in ("true", "1", "yes")
        return bool(explicit)
    if targets is None:
        return None
    runs = [tt for tt in targets.values() if tt.runs]
    if not runs:
        return True
    gaps = [tt.gap for tt in runs]
    if any(g is not None and g <= GAP_TIE for g in gaps) or any(tt.same_as_best for tt in runs):
        return False
    return True if all(g is not None for g in gaps) else None


def _shared(same: dict, tiling: dict) -> dict:
    """One dict per distinct tiling (a sweep's rows share a few hundred tilings of a discrete space: 100,000 rows
    held 20 MiB of equal dicts); the rows never change their tiling."""
    return same.setdefault(("tiling", *tiling.items()), tiling)


def _sweep_table(path: Path):
    """The sweep output's table (CSV or Parquet); a TilerError naming RESULT when it cannot be read or lacks a
    column every sweep output has."""
    if path.suffix.lower() == ".parquet":
        import io

        import pandas as pd

        from ..io import read_limited

        try:
            df = pd.read_parquet(io.BytesIO(read_limited(path)))  # at most tiler.io.FILE_BYTES_MAX bytes
        except Exception as exc:  # noqa: BLE001 -- pyarrow missing, not a Parquet file: one line
            raise TilerError(
                f"RESULT: {path}: cannot read Parquet: {str(exc).splitlines()[0][:200]}"
            ) from None
    else:
        from ..rank import read_candidates

        df = read_candidates(path, "RESULT")
    need = [c for c in ("key", "chip", "time_us", "bound") if c not in df.columns]
    if need:
        raise TilerError(
            f"RESULT: {path}: not a sweep output (no {', '.join(need)} column); give a `tiler sweep` table "
            "or a `tiler search/explain --format json` document"
        )
    return df


def read_sweep(path: Path, hardware_dir=None) -> Report:
    from ..model.common import pipes as family_pipes
    from ..model.common import pipes_of_row

    df = _sweep_table(path)
    has_runnable = "runnable" in df.columns
    target_cols = _target_columns(list(df.columns))
    chips: dict = {}
    notes: list[str] = []
    rows: list[Row] = []
    skipped: list[str] = []
    chip_order: dict[str, int] = {}
    op = ""
    cols = [str(c) for c in df.columns]
    same: dict = {}  # one object per distinct text (chip, bound, family, knob words): not one per row
    # one row's dict at a time (a list of 100,000 dicts would hold every cell twice)
    for i, cells in enumerate(df.itertuples(index=False, name=None)):
        rec = {
            c: same.setdefault(v, v) if isinstance(v, str) else v for c, v in zip(cols, cells, strict=True)
        }
        where = f"line {i + 2}"
        name = rec.get("name")
        name = "" if _blank(name) else str(name)
        status = str(rec.get("status", "ok"))
        what = f"{where} ({name or rec.get('key')} on {rec.get('chip')})"
        if status != "ok":
            skipped.append(f"{what}: {status}: {rec.get('error', '')}")
            continue
        key, chip_id = str(rec["key"]), str(rec["chip"])
        op = op or key.split(":")[0]
        t = _num(rec["time_us"])
        if not math.isfinite(t) or t <= 0:
            skipped.append(f"{what}: no predicted time")
            continue
        try:
            problem = _problem(op, key)
        except TilerError as exc:
            skipped.append(f"{what}: {exc}")
            continue
        chip = _chip(chip_id, chips, notes, hardware_dir)
        present = {k: v for k, v in rec.items() if k.endswith("_us") and math.isfinite(_num(v))}
        try:
            names = family_pipes(chip.family) if chip is not None else tuple(pipes_of_row(present))
        except ValueError:
            names = ()
        pipes = {p: _num(rec[f"{p}_us"]) for p in names if math.isfinite(_num(rec.get(f"{p}_us")))}
        measured = _num(rec.get("measured_us"))
        fam, token = shape_family(problem)
        fam = name_family(name) or fam
        fam = same.setdefault(fam, fam)
        targets = _sweep_targets(rec, has_runnable, target_cols)
        rows.append(
            Row(
                "",
                key,
                chip_id,
                problem.dtype,
                t,
                str(rec["bound"]),
                pipes,
                float(problem.flops),
                float(problem.compulsory_bytes),
                measured if math.isfinite(measured) else None,
                title=f"{name or key} @ {chip_id}",
                name=name,
                family=fam,
                tiling=_shared(
                    same,
                    {
                        k: rec[k]
                        for k in _knobs(op, chip.family if chip is not None else None)
                        if k in rec and not _blank(rec[k])
                    },
                ),
                targets=targets,
                custom_kernel=_custom(targets, rec.get("custom_kernel")),
                order=(chip_order.setdefault(chip_id, len(chip_order)), token, i),
            )
        )
    rows = group_rows(rows)
    return Report(str(path), "sweep", op, rows, skipped, {k: v for k, v in chips.items() if v}, notes)


def _document_targets(doc: dict, time_us: float, bound: str, tiling: dict) -> dict[str, TargetTime]:
    """A document's targets: `runnable` (each target's best tiling, time, gap) when present; else every view
    in `targets` is of the document's own tiling (its time, gap 1); `no_view`: targets that cannot run it."""
    out: dict[str, TargetTime] = {}
    runnable = doc.get("runnable")
    if isinstance(runnable, dict):
        for t, r in runnable.items():
            r = r if isinstance(r, dict) else {}
            same = r.get("same_as_best")
            out[str(t)] = TargetTime(
                True,
                _finite(r.get("time_us")),
                _finite(r.get("gap")),
                str(r.get("bound", "")),
                r.get("tiling") if isinstance(r.get("tiling"), dict) else None,
                same if isinstance(same, bool) else None,
            )
    else:
        for t in _names_in(doc.get("targets")):
            out[str(t)] = TargetTime(True, time_us, 1.0, bound, tiling, True)
    for t in _names_in(doc.get("no_view")):
        out.setdefault(str(t), TargetTime(False))
    return out


def _names_in(value) -> list:
    """The target names a document's `targets` (an object) or `no_view` (a list) holds; none when the field is
    something else (damaged: the page draws the row without those targets, as with a damaged `runnable`)."""
    return list(value) if isinstance(value, dict | list) else []


def _alternatives(doc: dict, best: Row, problem, chip, notes: list[str]) -> tuple[list[Row], list[str]]:
    """A document's alternatives as rows of the best's family (scored again by the model for their pipes when the
    chip's profile loaded), and those without a time or bound, as skipped lines."""
    rows: list[Row] = []
    skipped: list[str] = []
    op, chip_id = str(doc["op"]), best.chip_id
    alts = doc.get("alternatives") or []
    space = None
    if alts and chip is not None:
        from ..space import load_space

        try:
            space = load_space(op, chip.family)
        except TilerError as exc:
            notes.append(f"alternatives: not scored again ({exc}); their pipes are not shown")
    for i, alt in enumerate(alts if isinstance(alts, list) else [], start=1):
        try:
            t, bound, pipes = float(alt["time_us"]), str(alt["bound"]), {}
        except (KeyError, TypeError, ValueError):
            skipped.append(f"alternative {i}: no time_us/bound")
            continue
        if space is not None:
            from ..model.common import pipes as family_pipes
            from ..search import evaluate

            try:
                _, e, _ = evaluate(problem, chip, space, alt["tiling"])
                pipes = {p: float(e[f"{p}_us"][0]) for p in family_pipes(chip.family)}
            except (TilerError, KeyError, TypeError, ValueError):
                pass
        alt_tiling = alt.get("tiling") if isinstance(alt.get("tiling"), dict) else {}
        rows.append(
            Row(
                "",
                problem.key(),
                chip_id,
                problem.dtype,
                t,
                bound,
                pipes,
                best.flops,
                best.bytes,
                title=f"alternative {i}",
                name=f"alternative {i}",
                family=best.family,
                tiling=dict(alt_tiling),
            )
        )
    return rows, skipped


def read_document(path: Path, doc: dict, hardware_dir=None) -> Report:
    """A tiler.tiling/v1 document: its tiling (the best, or the one explained) and its alternatives (scored
    again by the model for their pipes, when the chip's profile can be loaded)."""
    from ..operator import problem_class
    from ..problem import parse_problem

    if not isinstance(doc.get("estimate"), dict) or not isinstance(doc.get("problem"), dict):
        raise TilerError(
            f"RESULT: {path}: not a tiler.tiling/v1 document with an estimate (its 'estimate' and 'problem' must "
            "be objects); give a `tiler search/explain "
            "--format json` document or a `tiler sweep` table"
        )
    at = "op"  # the field being read, named in the error when it is not what a document holds
    try:
        op = str(doc["op"])
        problem_class(op)  # an unknown operator: ProblemError "op: ..."
        at = "chip.id"
        chip_id = str(doc["chip"]["id"])
        prob = doc["problem"]
        at = "problem.shape"
        problem = parse_problem(op, dict(prob.get("shape") or {}), prob.get("dtype"))
        at = "estimate"
        est = doc["estimate"]
        tiling = doc.get("tiling") if isinstance(doc.get("tiling"), dict) else {}
        given = (doc.get("search") if isinstance(doc.get("search"), dict) else {}).get("strategy") == "given"
        family, _ = shape_family(problem)
        best = Row(
            "",
            problem.key(),
            chip_id,
            problem.dtype,
            float(est["time_us"]),
            str(est["bound"]),
            {str(p): float(v) for p, v in (est.get("pipes_us") or {}).items()},
            float(problem.flops),
            float(problem.compulsory_bytes),
            title="given" if given else "best",
            name="given" if given else "best",
            family=family,
            tiling=dict(tiling),
        )
        best.targets = _document_targets(doc, best.time_us, best.bound, best.tiling)
        views, custom = doc.get("targets"), doc.get("custom_kernel")
        if isinstance(custom, bool):
            best.custom_kernel = custom
        elif isinstance(views, dict):  # before `custom_kernel`: the views were all of the document's tiling
            best.custom_kernel = not views
    except TilerError as exc:
        said = str(exc)
        raise TilerError(
            f"RESULT: {path}: {said if said.startswith(at + ':') else f'{at}: {said}'}"
        ) from None
    except (KeyError, TypeError, ValueError, AttributeError) as exc:
        raise TilerError(
            f"RESULT: {path}: {at}: not as a tiler.tiling/v1 document has it ({type(exc).__name__}: {exc})"
        ) from None
    meas = doc.get("measurement")
    if isinstance(meas, dict) and math.isfinite(_num(meas.get("measured_us"))):
        best.measured_us = _num(meas["measured_us"])
        ven = meas.get("vendor")
        if isinstance(ven, dict) and _num(ven.get("us")) > 0:
            best.vendor = (str(ven.get("name", "vendor"))[:80], _num(ven["us"]))
    notes: list[str] = []
    chips: dict = {}
    chip = _chip(chip_id, chips, notes, hardware_dir)
    alternatives, skipped = _alternatives(doc, best, problem, chip, notes)
    rows = [best, *alternatives]
    for i, r in enumerate(rows):  # one family; the document's order (best first)
        r.order = (i,)
    rows = group_rows(rows)
    chips = {k: v for k, v in chips.items() if v}
    return Report(str(path), "document", op, rows, skipped, chips, notes, document=doc)


def read_result(path, hardware_dir=None) -> Report:
    """A sweep table (.csv, .parquet) or a tiling document (.json, or any file starting with `{`)."""
    from ..space import read_text_file

    path = Path(path)
    if path.suffix.lower() == ".parquet":
        return read_sweep(path, hardware_dir)
    try:
        text = read_text_file(path, "RESULT")
    except TilerError as exc:
        raise TilerError(f"RESULT: {exc}") from None
    if path.suffix.lower() == ".json" or text.lstrip().startswith("{"):
        try:
            doc = json.loads(text)
        except json.JSONDecodeError as exc:
            raise TilerError(f"RESULT: {path}: not valid JSON ({exc.msg} at line {exc.lineno})") from None
        except (RecursionError, ValueError):
            raise TilerError(
                f"RESULT: {path}: not valid JSON (nested too deep or a number too long)"
            ) from None
        if not isinstance(doc, dict):
            raise TilerError(f"RESULT: {path}: a JSON document must be an object (tiler.tiling/v1)")
        return read_document(path, doc, hardware_dir)
    return read_sweep(path, hardware_dir)
