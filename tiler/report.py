"""`tiler report RESULT`: one self-contained HTML page of pictures for a sweep table or a search/explain document.

RESULT is a sweep output (CSV or Parquet: one row per problem and chip) or a `tiler.tiling/v1` JSON document
(`tiler search --format json` or `--export`, `tiler explain --format json`: the best tiling and its
alternatives). The page holds three plotly charts:

* Roofline: every row placed by arithmetic intensity (the problem's FLOPs / its compulsory bytes: each input read
  once, the output written once) and predicted throughput (FLOPs / predicted time), under each chip's roofline
  (peak `chip.peak_tflops(dtype)`, HBM bandwidth `hbm_gbps`), coloured by bound.
* Predicted time per row on a log axis, a bar per row coloured by the bound the model names, rows grouped by
  shape family (shaded bands, the family named beside them); where the result says which targets can run a
  row, a marker per target at that target's best predicted time.
* The per-pipe breakdown of one row (the slowest by default, `--row N` for row #N as numbered in the page).

Under the charts, the choices: a table per shape family with each row's tiling (`knob=value`) and the targets
that can run it (predicted time, gap to the unconstrained best, "custom kernel" when none runs the best), then
details: for a document, the code of each view in `targets` (`tiler.export.emit_code`; the view's JSON for a
target without an emitter); for a sweep, the selected row and the slowest rows with their targets.

Shape families: a sweep's `name` column when the row has one, with layer indices and numbers stripped
(`layers.0.qkv_proj` -> `layers.qkv_proj`); otherwise the problem with its first field (the token dimension: M
of a matmul) left free, so matmul rows of one N, K, layout and dtype form one family over M. Rows are numbered
in the page's order: by family (first seen first), then chip, then that first field.

plotly is optional (`pip install 'tiler[report]'`); the page embeds plotly.js, so it opens offline and loads
nothing from the network. Rows a sweep could not solve (status error) are listed under the charts, not drawn.
"""

from __future__ import annotations

import html
import json
import math
import re
from dataclasses import dataclass, field
from functools import lru_cache
from pathlib import Path

from .errors import TilerError

INSTALL = "pip install 'tiler[report]'"
TRACE_ROOFLINE = "roofline"  # roofline line traces are named "roofline <chip> <dtype>"
TRACE_TARGET = "target"  # the time chart's per-target markers are named "target <name>"
DIV_IDS = ("tiler-roofline", "tiler-times", "tiler-pipes")
SLOWEST = 5  # the sweep rows detailed under the table: the selected one and this many of the slowest
OPEN_ROWS = 200  # a table of more rows than this starts with every family folded
# A page of more rows than this aggregates: the time chart draws each shape family's distribution (min, quartiles,
# max) instead of a bar per row, the roofline draws points without per-point text, and the table lists each
# family's summary and the TABLE_ROWS slowest rows (every row stays in the sweep's own table). 100,000 rows then
# make a page of a few MB that a browser opens, not 53 MB of table (python -m bench.memory_scale report measures it).
LARGE_ROWS = 2000
TABLE_ROWS = 500
GAP_TIE = 1 + 1e-9  # a target whose best is within this of the unconstrained best reaches it


@dataclass(slots=True)  # slots: a 100,000-row page holds one of these per row and target
class TargetTime:
    """One target's answer for a row: its best predicted time there, that time over the row's unconstrained
    best (`gap`), its bound and tiling where the result gives them; `runs` False: the target cannot run it."""

    runs: bool = True
    time_us: float | None = None
    gap: float | None = None
    bound: str = ""
    tiling: dict | None = None
    same_as_best: bool | None = None


@dataclass(slots=True)  # slots: 100,000 rows without an attribute dict each
class Row:
    """One charted row: what it is, its predicted time and bound, its pipes and its place on the roofline, its
    tiling, shape family and the targets that can run it (None: the result does not say)."""

    label: str
    key: str
    chip_id: str
    dtype: str
    time_us: float
    bound: str
    pipes: dict[str, float] = field(default_factory=dict)
    flops: float = math.nan
    bytes: float = math.nan
    measured_us: float | None = None
    vendor: tuple[str, float] | None = None  # a measured document's vendor call: (name, us)
    title: str = ""  # the label without its number (name or key @ chip; best / alternative i)
    name: str = ""  # the sweep's `name` cell; a document's best / given / alternative i
    family: str = ""
    tiling: dict = field(default_factory=dict)
    targets: dict[str, TargetTime] | None = None
    custom_kernel: bool | None = None
    order: tuple = ()  # the sort key inside the family (chip, token dimension, input order)

    @property
    def intensity(self) -> float:
        return self.flops / self.bytes if self.bytes > 0 else math.nan

    @property
    def tflops(self) -> float:
        return self.flops / (self.time_us * 1e-6) / 1e12 if self.time_us > 0 else math.nan

    @property
    def tiling_text(self) -> str:
        return tiling_text(self.tiling)

    @property
    def runnable(self) -> list[str]:
        """The targets that can run the row (the result's order)."""
        return [t for t, tt in (self.targets or {}).items() if tt.runs]


@dataclass
class Report:
    source: str
    kind: str  # "sweep" or "document"
    op: str
    entries: list[Row]
    skipped: list[str]  # rows not charted and why
    chips: dict  # chip id -> Chip (those that could be loaded)
    notes: list[str] = field(default_factory=list)
    document: dict | None = None  # the tiler.tiling/v1 document (kind "document"): its views become code


def _plotly():
    try:
        import plotly.graph_objects as go
    except ImportError:
        raise TilerError(f"report: needs plotly, which is not installed: {INSTALL}") from None
    return go


# ------------------------------------------------------------------ text


def _value(v) -> str:
    """A knob value as text: integral floats (a CSV column with empty cells reads as floats) as integers."""
    if hasattr(v, "item"):
        v = v.item()
    if isinstance(v, float) and math.isfinite(v) and v == int(v):
        return str(int(v))
    return str(v)


def tiling_text(tiling: dict) -> str:
    """`base_m=128 base_n=256 ...`: the text of a study's `tiling_label`."""
    return " ".join(f"{k}={_value(v)}" for k, v in tiling.items())


def _us(t: float | None) -> str:
    if t is None or not math.isfinite(t):
        return "-"
    if t < 10:
        return f"{t:.3f} us"
    if t < 1000:
        return f"{t:.2f} us"
    return f"{t:,.1f} us"


def _gap(g: float | None) -> str:
    return "-" if g is None or not math.isfinite(g) else f"{g:.3f}x the best"


def _blank(v) -> bool:
    return v is None or (isinstance(v, float) and math.isnan(v)) or (isinstance(v, str) and not v.strip())


# ------------------------------------------------------------------ shape families


def name_family(name: str) -> str:
    """A layer's name without its layer index and numbers: `layers.0.qkv_proj` and `model.layers.31.qkv_proj`
    -> `layers.qkv_proj`, `model.layers.qkv_proj`; `blk3.attn_q` -> `blk.attn_q`. Words that are all digits go
    (with the separator before them); a word's trailing digits go unless it is the last word (`mlp.fc1` and
    `mlp.fc2` stay two families: they are two shapes). Empty when nothing but numbers is left."""
    pieces = re.split(r"([._/:\-\s]+)", str(name).strip())
    words, seps = pieces[0::2], pieces[1::2]
    last = max((i for i, w in enumerate(words) if w), default=-1)
    kept: list[tuple[str, str]] = []
    for i, w in enumerate(words):
        if not w or w.isdigit():
            continue
        if i < last:
            w = re.sub(r"(?<=[A-Za-z])\d+$", "", w)
        kept.append((seps[i - 1] if i > 0 else "", w))
    return "".join((s if j else "") + w for j, (s, w) in enumerate(kept))


def shape_family(problem) -> tuple[str, object]:
    """(the family label, the token value) of a problem: every field but the first (the token dimension: M of
    a matmul, rows of a softmax) and the dtype, e.g. `N=4096,K=4096,batch=1 bf16 (M varies)`."""
    shape = problem.shape()
    token = problem.FIELDS[0] if problem.FIELDS else next(iter(shape), "")
    rest = [f"{k}={v}" for k, v in shape.items() if k != token and not problem._default_choice(k, v)]
    return f"{','.join(rest)} {problem.dtype} ({token} varies)", shape.get(token, 0)


def group_rows(rows: list[Row]) -> list[Row]:
    """The rows in the page's order: families in order of first appearance, inside one by `Row.order`; labels
    renumbered `#i` in that order."""
    first: dict[str, int] = {}
    for r in rows:
        first.setdefault(r.family, len(first))
    out = sorted(rows, key=lambda r: (first[r.family], r.order))
    for i, r in enumerate(out):
        r.label = f"#{i} {r.title}"
    return out


def families(rows: list[Row]) -> list[tuple[str, list[Row]]]:
    """Consecutive runs of one family (the rows are grouped already)."""
    out: list[tuple[str, list[Row]]] = []
    for r in rows:
        if out and out[-1][0] == r.family:
            out[-1][1].append(r)
        else:
            out.append((r.family, [r]))
    return out


# ------------------------------------------------------------------ reading


def _problem(op: str, key: str):
    """The problem of a result key `op:F=V,...:dtype` (the sweep's `key` column)."""
    from .problem import parse_problem

    parts = str(key).split(":")
    if len(parts) != 3 or parts[0] != op:
        raise TilerError(f"key {key!r}: not an {op} problem key (op:FIELD=VALUE,...:dtype)")
    fields = dict(f.split("=", 1) for f in parts[1].split(",") if "=" in f)
    return parse_problem(op, fields, parts[2])


def _chip(chip_id: str, chips: dict, notes: list[str], hardware_dir=None):
    from .hardware import load_chip
    from .operator import check_constants

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
    from .operator import known_ops
    from .space import load_space

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


def read_sweep(path: Path, hardware_dir=None) -> Report:
    from .model.common import pipes as family_pipes
    from .model.common import pipes_of_row

    if path.suffix.lower() == ".parquet":
        import io

        import pandas as pd

        from .io import read_limited

        try:
            df = pd.read_parquet(io.BytesIO(read_limited(path)))  # at most tiler.io.FILE_BYTES_MAX bytes
        except Exception as exc:  # noqa: BLE001 -- pyarrow missing, not a Parquet file: one line
            raise TilerError(
                f"RESULT: {path}: cannot read Parquet: {str(exc).splitlines()[0][:200]}"
            ) from None
    else:
        from .rank import read_candidates

        df = read_candidates(path, "RESULT")
    need = [c for c in ("key", "chip", "time_us", "bound") if c not in df.columns]
    if need:
        raise TilerError(
            f"RESULT: {path}: not a sweep output (no {', '.join(need)} column); give a `tiler sweep` table "
            "or a `tiler search/explain --format json` document"
        )
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
                tiling={
                    k: rec[k]
                    for k in _knobs(op, chip.family if chip is not None else None)
                    if k in rec and not _blank(rec[k])
                },
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
        for t in doc.get("targets") or {}:
            out[str(t)] = TargetTime(True, time_us, 1.0, bound, tiling, True)
    for t in doc.get("no_view") or {}:
        out.setdefault(str(t), TargetTime(False))
    return out


def read_document(path: Path, doc: dict, hardware_dir=None) -> Report:
    """A tiler.tiling/v1 document: its tiling (the best, or the one explained) and its alternatives (scored
    again by the model for their pipes, when the chip's profile can be loaded)."""
    from .problem import parse_problem

    if not isinstance(doc.get("estimate"), dict) or not isinstance(doc.get("problem"), dict):
        raise TilerError(
            f"RESULT: {path}: not a tiler.tiling/v1 document with an estimate; give a `tiler search/explain "
            "--format json` document or a `tiler sweep` table"
        )
    try:
        op = str(doc["op"])
        chip_id = str(doc["chip"]["id"])
        prob = doc["problem"]
        problem = parse_problem(op, dict(prob.get("shape") or {}), prob.get("dtype"))
        est = doc["estimate"]
        tiling = doc.get("tiling") if isinstance(doc.get("tiling"), dict) else {}
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
            title="given" if (doc.get("search") or {}).get("strategy") == "given" else "best",
            name="given" if (doc.get("search") or {}).get("strategy") == "given" else "best",
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
        raise TilerError(f"RESULT: {path}: {exc}") from None
    except (KeyError, TypeError, ValueError, AttributeError) as exc:
        raise TilerError(
            f"RESULT: {path}: not a tiler.tiling/v1 document ({type(exc).__name__}: {exc})"
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
    rows, skipped = [best], []
    alts = doc.get("alternatives") or []
    space = None
    if alts and chip is not None:
        from .space import load_space

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
            from .model.common import pipes as family_pipes
            from .search import evaluate

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
                family=family,
                tiling=dict(alt_tiling),
            )
        )
    for i, r in enumerate(rows):  # one family; the document's order (best first)
        r.order = (i,)
    rows = group_rows(rows)
    chips = {k: v for k, v in chips.items() if v}
    return Report(str(path), "document", op, rows, skipped, chips, notes, document=doc)


def read_result(path, hardware_dir=None) -> Report:
    """A sweep table (.csv, .parquet) or a tiling document (.json, or any file starting with `{`)."""
    from .space import read_text_file

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


# ------------------------------------------------------------------ charts


def _colours(rows: list[Row]) -> dict[str, str]:
    from plotly.colors import qualitative

    palette = qualitative.Plotly + qualitative.D3
    bounds = sorted({r.bound for r in rows})
    return {b: palette[i % len(palette)] for i, b in enumerate(bounds)}


def _wrap(text: str, width: int = 90) -> str:
    """Hover text: long tiling text broken into lines at spaces."""
    lines, cur = [], ""
    for word in text.split(" "):
        if cur and len(cur) + 1 + len(word) > width:
            lines.append(cur)
            cur = word
        else:
            cur = f"{cur} {word}" if cur else word
    return "<br>".join([*lines, cur] if cur else lines)


def _hover(r: Row) -> str:
    text = f"{r.label}<br>{r.key} on {r.chip_id}<br>{r.time_us:.3f} us, bound {r.bound}"
    if r.measured_us is not None:
        text += f"<br>measured {r.measured_us:.3f} us"
        if r.vendor is not None:
            text += f"<br>vendor {html.escape(r.vendor[0])} {r.vendor[1]:.3f} us: {r.vendor[1] / r.measured_us:.2f}x"
    text += f"<br>family {r.family}"
    if r.tiling:
        text += "<br>" + _wrap(r.tiling_text)
    if r.custom_kernel:
        text += "<br>custom kernel (no target runs this tiling)"
    if r.targets:
        runs = [f"{t} {_us(tt.time_us)} ({_gap(tt.gap)})" for t, tt in r.targets.items() if tt.runs]
        text += "<br>runnable: " + ("; ".join(runs) if runs else "none")
    return text


def roofline_figure(rep: Report, colours: dict[str, str]):
    go = _plotly()
    fig = go.Figure()
    placed = [
        r for r in rep.entries if math.isfinite(r.intensity) and math.isfinite(r.tflops) and r.tflops > 0
    ]
    large = len(rep.entries) > LARGE_ROWS
    for bound, colour in colours.items():
        rs = [r for r in placed if r.bound == bound]
        if not rs:
            continue
        if large:  # WebGL points, no per-point text: the page stays a few MB at 100,000 rows
            fig.add_trace(
                go.Scattergl(
                    x=[round(r.intensity, 4) for r in rs],
                    y=[round(r.tflops, 4) for r in rs],
                    mode="markers",
                    name=f"bound: {bound} ({len(rs)})",
                    marker=dict(color=colour, size=4),
                    hovertemplate=f"bound {bound}<br>%{{x:.3g}} FLOP/byte, %{{y:.3g}} TFLOP/s<extra></extra>",
                )
            )
            continue
        fig.add_trace(
            go.Scatter(
                x=[r.intensity for r in rs],
                y=[r.tflops for r in rs],
                mode="markers",
                name=f"bound: {bound}",
                marker=dict(color=colour, size=10, line=dict(width=1, color="#333")),
                text=[_hover(r) for r in rs],
                customdata=[r.key for r in rs],
                hovertemplate="%{text}<br>%{x:.3g} FLOP/byte, %{y:.3g} TFLOP/s<extra></extra>",
            )
        )
    xs = [r.intensity for r in placed] or [1.0]
    lo, hi = min(xs) / 4, max(xs) * 4
    for chip_id, dtype in sorted({(r.chip_id, r.dtype) for r in placed}):
        chip = rep.chips.get(chip_id)
        if chip is None:
            continue
        try:
            peak = float(chip.peak_tflops(dtype))
            bw = float(chip["hbm_gbps"]) * 1e9 / 1e12  # TB/s: TFLOP/s per FLOP/byte
        except (KeyError, TypeError, ValueError):
            continue
        ridge = peak / bw if bw > 0 else hi
        x = [lo] + ([ridge] if lo < ridge < hi else []) + [max(hi, ridge * 2)]
        fig.add_trace(
            go.Scatter(
                x=x,
                y=[min(peak, bw * v) for v in x],
                mode="lines",
                name=f"{TRACE_ROOFLINE} {chip_id} {dtype}",
                line=dict(dash="dash"),
                hovertemplate=f"{chip_id} {dtype}: peak {peak:.1f} TFLOP/s, HBM {chip['hbm_gbps']} GB/s"
                "<extra></extra>",
            )
        )
    fig.update_xaxes(type="log", title="arithmetic intensity (FLOP / compulsory byte)")
    fig.update_yaxes(type="log", title="predicted throughput (TFLOP/s)")
    fig.update_layout(
        title="Roofline: every row by arithmetic intensity and predicted throughput", height=520
    )
    return fig


def family_times_figure(rep: Report):
    """A large page's time chart: per shape family, the distribution of its rows' predicted times (min, quartiles,
    median, max; log axis), from numbers computed here (the page does not carry every row)."""
    import numpy as np

    go = _plotly()
    groups = families(rep.entries)
    names, q = [], []
    for fam, rs in groups:
        t = np.array([r.time_us for r in rs])
        names.append(f"{fam} ({len(rs)})")
        q.append(np.quantile(t, [0.0, 0.25, 0.5, 0.75, 1.0]))
    q = np.array(q).T
    fig = go.Figure(
        go.Box(
            y=names,
            lowerfence=q[0].tolist(),
            q1=q[1].tolist(),
            median=q[2].tolist(),
            q3=q[3].tolist(),
            upperfence=q[4].tolist(),
            orientation="h",
            name="predicted time",
            hoverinfo="y+x",
        )
    )
    fig.update_yaxes(categoryorder="array", categoryarray=names[::-1], automargin=True)
    fig.update_xaxes(type="log", title="predicted time (us, log scale)")
    fig.update_layout(
        title=f"Predicted time by shape family ({len(groups)}; {len(rep.entries)} rows: min, quartiles, max)",
        height=max(360, 140 + 22 * len(groups)),
        showlegend=False,
    )
    return fig


def times_figure(rep: Report, colours: dict[str, str]):
    """A bar per row on a log time axis, coloured by bound, in the page's order: shape families as alternating
    shaded bands named on the right; a marker per target at its best predicted time for the row. A page of more
    than LARGE_ROWS rows draws each family's distribution instead (family_times_figure)."""
    if len(rep.entries) > LARGE_ROWS:
        return family_times_figure(rep)
    go = _plotly()
    fig = go.Figure()
    for bound, colour in colours.items():
        rs = [r for r in rep.entries if r.bound == bound]
        if rs:
            fig.add_trace(
                go.Bar(
                    x=[r.time_us for r in rs],
                    y=[r.label for r in rs],
                    orientation="h",
                    name=f"bound: {bound}",
                    marker_color=colour,
                    text=[_hover(r) for r in rs],
                    customdata=[r.key for r in rs],
                    textposition="none",
                    hovertemplate="%{text}<extra></extra>",
                )
            )
    names = list(dict.fromkeys(t for r in rep.entries for t in (r.targets or {})))
    symbols = ("diamond", "x", "triangle-up", "star", "square", "cross")
    for j, t in enumerate(names):
        rs = [r for r in rep.entries if r.targets and r.targets.get(t) and r.targets[t].runs]
        rs = [r for r in rs if r.targets[t].time_us is not None and r.targets[t].time_us > 0]
        if not rs:
            continue
        tts = [r.targets[t] for r in rs]
        fig.add_trace(
            go.Scatter(
                x=[tt.time_us for tt in tts],
                y=[r.label for r in rs],
                mode="markers",
                name=f"{TRACE_TARGET} {t}",
                marker=dict(symbol=symbols[j % len(symbols)], size=9, color="#222", line=dict(width=1)),
                text=[
                    f"{r.label}: {t} can run it<br>{_us(tt.time_us)}, {_gap(tt.gap)}"
                    + (f", bound {tt.bound}" if tt.bound else "")
                    + (f"<br>{_wrap(tiling_text(tt.tiling))}" if tt.tiling else "")
                    for r, tt in zip(rs, tts, strict=True)
                ],
                customdata=[r.key for r in rs],
                hovertemplate="%{text}<extra></extra>",
            )
        )
    n = len(rep.entries)
    order = [r.label for r in rep.entries]
    fig.update_yaxes(
        categoryorder="array", categoryarray=order[::-1], range=[-0.5, n - 0.5], title="", automargin=True
    )
    times = [r.time_us for r in rep.entries] + [
        tt.time_us for r in rep.entries for tt in (r.targets or {}).values() if tt.time_us and tt.time_us > 0
    ]
    # bars start at the left edge of a log axis: half the fastest time there, so every bar shows
    span = [math.log10(min(times) / 2), math.log10(max(times) * 1.5)]
    fig.update_xaxes(type="log", range=span, title="predicted time (us, log scale)")
    groups = families(rep.entries)
    start = 0
    for g, (fam, rs) in enumerate(groups):
        top, bottom = n - 1 - start + 0.5, n - len(rs) - start - 0.5  # category i sits at n-1-i (reversed)
        start += len(rs)
        if g % 2 == 0:
            fig.add_shape(
                type="rect",
                xref="paper",
                x0=0,
                x1=1,
                yref="y",
                y0=bottom,
                y1=top,
                fillcolor="rgba(120,120,160,0.10)",
                line_width=0,
                layer="below",
            )
        fig.add_annotation(
            xref="paper",
            x=1.0,
            xanchor="left",
            yref="y",
            y=top - 0.5,  # beside the family's first row: seen where the band starts on a tall chart
            text=html.escape(fam),
            showarrow=False,
            align="left",
            font=dict(size=11),
        )
    longest = max((len(f) for f, _ in groups), default=10)
    per_row = 24 if n <= 50 else 16 if n <= 200 else 11
    fig.update_layout(
        title=f"Predicted time per row (log axis), by shape family ({len(groups)}), coloured by bound",
        height=max(360, 140 + per_row * n),
        barmode="overlay",
        legend=dict(orientation="h", x=0, y=1.0, yanchor="bottom"),
        margin=dict(r=min(360, 30 + 7 * longest), t=110),
    )
    return fig


def pipes_figure(rep: Report, row: Row):
    go = _plotly()
    fig = go.Figure()
    names = list(row.pipes)
    fig.add_trace(
        go.Bar(
            x=names,
            y=[row.pipes[p] for p in names],
            name="pipe busy time (us)",
            hovertemplate="%{x}: %{y:.3f} us<extra></extra>",
        )
    )
    fig.add_hline(
        y=row.time_us, line_dash="dash", annotation_text=f"predicted {row.time_us:.3f} us ({row.bound})"
    )
    if row.measured_us is not None:
        fig.add_hline(
            y=row.measured_us, line_dash="dot", annotation_text=f"measured {row.measured_us:.3f} us"
        )
    if row.measured_us is not None and row.vendor is not None:
        name, us = row.vendor
        fig.add_hline(
            y=us,
            line_dash="dashdot",
            annotation_text=f"vendor {html.escape(name)} {us:.3f} us (the measured best at {us / row.measured_us:.2f}x)",
        )
    fig.update_yaxes(title="us")
    fig.update_layout(
        title=f"Per-pipe breakdown of {html.escape(row.label)} ({html.escape(row.key)})", height=420
    )
    return fig


def select_row(rep: Report, row: int | None) -> Row:
    if row is None:
        return max(rep.entries, key=lambda r: r.time_us)
    if not 0 <= row < len(rep.entries):
        raise TilerError(
            f"row: must be a row number 0..{len(rep.entries) - 1} (as numbered in the page), got {row}"
        )
    return rep.entries[row]


def _code(doc: dict, target: str) -> tuple[str, str]:
    """(the code of one view of a document, a note): `tiler.export.emit_code` for a target with an emitter;
    the view's JSON (and why) for one without, or when the document cannot be emitted."""
    from .export import emit_code
    from .operator import get_operator

    view = json.dumps((doc.get("targets") or {}).get(target), indent=2)
    try:
        tg = get_operator(str(doc["op"]), str(doc["chip"]["family"])).TARGETS.get(target)
    except (TilerError, KeyError, TypeError):
        tg = None
    if tg is not None and tg.emit is None:
        return view, f"the {target} target has no code emitter: its view as JSON"
    try:
        return emit_code(doc, target), ""
    except (TilerError, KeyError, TypeError, ValueError) as exc:
        return view, f"no code emitted ({exc}): the view as JSON"


def _esc(s) -> str:
    return html.escape(str(s))


CUSTOM = '<span class="custom" title="{why}">custom kernel</span>'
CUSTOM_DOC = "no target's code generator can run this tiling as exported"
CUSTOM_SWEEP = "no target reaches the best predicted time: none can run the best tiling as exported"


def _targets_cell(r: Row) -> str:
    if r.targets is None:
        return ""
    parts = []
    for t, tt in r.targets.items():
        if tt.runs:
            gap = f", {tt.gap:.3f}x" if tt.gap is not None else ""
            parts.append(f"<b>{_esc(t)}</b> {_us(tt.time_us)}{gap}")
    return "<br>".join(parts) if parts else '<span class="no">none</span>'


def rows_table(rep: Report) -> str:
    """A table per shape family (a collapsible section each): number, row, problem, chip, predicted time,
    bound, the tiling as `knob=value` text (and "custom kernel" where no target runs it), the targets that can
    run it."""
    show_targets = any(r.targets is not None for r in rep.entries)
    why = CUSTOM_DOC if rep.kind == "document" else CUSTOM_SWEEP
    head = "<tr><th>#</th><th>row</th><th>problem</th><th>chip</th><th>predicted</th><th>bound</th>"
    head += "<th>tiling</th>"
    head += "<th>targets (best predicted time, x the best)</th></tr>" if show_targets else "</tr>"
    groups = families(rep.entries)
    out = [
        f'<h2 id="tiler-rows">Rows and their tilings ({len(rep.entries)} rows, {len(groups)} '
        f"famil{'ies' if len(groups) != 1 else 'y'})</h2>"
    ]
    opened = " open" if len(rep.entries) <= OPEN_ROWS else ""
    if len(rep.entries) > LARGE_ROWS:  # a summary per family, then the slowest rows only
        out.append(
            f"<p>{len(rep.entries)} rows: a summary per family, then the {TABLE_ROWS} slowest rows "
            f"(every row is in {_esc(Path(rep.source).name)} itself).</p>"
        )
        out.append(
            '<table class="families"><thead><tr><th>family</th><th>rows</th><th>fastest</th><th>median</th>'
            "<th>slowest</th><th>bounds</th></tr></thead><tbody>"
        )
        for fam, rs in groups:
            ts = sorted(r.time_us for r in rs)
            bounds: dict[str, int] = {}
            for r in rs:
                bounds[r.bound] = bounds.get(r.bound, 0) + 1
            mix = ", ".join(f"{b} {n}" for b, n in sorted(bounds.items(), key=lambda kv: -kv[1]))
            out.append(
                f'<tr data-family="{_esc(fam)}"><td>{_esc(fam)}</td><td>{len(rs)}</td><td>{_us(ts[0])}</td>'
                f"<td>{_us(ts[len(ts) // 2])}</td><td>{_us(ts[-1])}</td><td>{_esc(mix)}</td></tr>"
            )
        out.append("</tbody></table>")
        slow = sorted(rep.entries, key=lambda r: -r.time_us)[:TABLE_ROWS]
        groups = [(f"the {TABLE_ROWS} slowest rows", slow)]
        opened = " open"
    elif not opened:
        out.append(f"<p>{len(rep.entries)} rows: each family is folded; open one by its name.</p>")
    for fam, rs in groups:
        lo, hi = min(r.time_us for r in rs), max(r.time_us for r in rs)
        span = _us(lo) if lo == hi else f"{_us(lo)} .. {_us(hi)}"
        out.append(
            f'<details class="family"{opened} data-family="{_esc(fam)}"><summary><b>{_esc(fam)}</b>: '
            f"{len(rs)} row{'s' * (len(rs) != 1)}, {span}</summary>"
            f'<table class="rows"><thead>{head}</thead><tbody>'
        )
        for r in rs:
            num = r.label.split(" ", 1)[0]
            badge = " " + CUSTOM.format(why=_esc(why)) if r.custom_kernel else ""
            tiling = f"<code>{_esc(r.tiling_text)}</code>" if r.tiling else '<span class="no">-</span>'
            measured = f"<br>measured {_us(r.measured_us)}" if r.measured_us is not None else ""
            out.append(
                f'<tr data-row="{num[1:]}" data-family="{_esc(fam)}">'
                f"<td>{_esc(num)}</td><td>{_esc(r.name)}</td>"
                f"<td>{_esc(_shape_arg(r.key))} {_esc(r.dtype)}</td><td>{_esc(r.chip_id)}</td>"
                f'<td class="t">{_us(r.time_us)}{measured}</td><td>{_esc(r.bound)}</td>'
                f'<td class="tiling">{tiling}{badge}</td>'
                + (f"<td>{_targets_cell(r)}</td>" if show_targets else "")
                + "</tr>"
            )
        out.append("</tbody></table></details>")
    return "\n".join(out)


def document_details(rep: Report) -> str:
    """The document's choices: its own tiling (custom kernel or the targets that run it as exported), then per
    target its tiling, predicted time, gap and the code of its view (`emit_code`; JSON without an emitter)."""
    doc = rep.document or {}
    best = rep.entries[0]
    views = doc.get("targets") if isinstance(doc.get("targets"), dict) else {}
    no_view = doc.get("no_view") if isinstance(doc.get("no_view"), dict) else {}
    out = ['<h2 id="tiler-code">The choices and their code</h2>']
    tiling = f"<code>{_esc(best.tiling_text)}</code>" if best.tiling else "-"
    if best.custom_kernel:
        state = (
            f"{CUSTOM.format(why=_esc(CUSTOM_DOC))}: no target's code generator can run this tiling as "
            "exported; the code below is of each target's own best tiling."
        )
    elif best.custom_kernel is False:
        same = [t for t, tt in (best.targets or {}).items() if tt.runs and tt.same_as_best]
        state = "runs as exported" + (f" on {_esc(', '.join(same))}" if same else "") + "."
    else:
        state = ""
    out.append(
        f'<p class="choice">{_esc(best.label)} tiling, {_us(best.time_us)} ({_esc(best.bound)}): '
        f"{tiling} {state}</p>"
    )
    names = list(dict.fromkeys([*views, *(best.targets or {}), *no_view]))
    if not names:
        out.append("<p>No target has a view of this tiling.</p>")
    for t in names:
        tt = (best.targets or {}).get(t)
        runs = tt is not None and tt.runs
        if t not in views and not runs:
            why = no_view.get(t) or "no view in the document"
            out.append(
                f'<p class="no" data-target="{_esc(t)}"><b>{_esc(t)}</b>: cannot run it ({_esc(why)})</p>'
            )
            continue
        head = f"<b>{_esc(t)}</b>"
        if runs:
            head += f" {_us(tt.time_us)}, {_gap(tt.gap)}" + (f", bound {_esc(tt.bound)}" if tt.bound else "")
            if tt.same_as_best:
                head += f", the {_esc(best.name)} tiling itself"
        body = ""
        if runs and tt.tiling and not tt.same_as_best:
            body += f"<p>its tiling: <code>{_esc(tiling_text(tt.tiling))}</code></p>"
        if t in views:
            code, note = _code(doc, t)
            body += f'<p class="no">{_esc(note)}</p>' if note else ""
            body += f'<pre class="code"><code>{_esc(code)}</code></pre>'
        else:
            body += '<p class="no">no view of its tiling in the document: no code to show</p>'
        out.append(
            f'<details class="target" open data-target="{_esc(t)}"><summary>{head}</summary>{body}</details>'
        )
    return "\n".join(out)


def _shape_arg(key: str) -> str:
    parts = key.split(":")
    return parts[1] if len(parts) == 3 else key


def sweep_details(rep: Report, chosen: Row) -> str:
    """The selected row and the slowest rows: tiling, the targets that can run each (best predicted time, gap)
    and the command that prints a target's code."""
    slow = sorted(rep.entries, key=lambda r: -r.time_us)
    picked = [chosen, *[r for r in slow if r is not chosen][:SLOWEST]]
    out = [f'<h2 id="tiler-details">The selected row and the {SLOWEST} slowest</h2>']
    for r in picked:
        badge = " " + CUSTOM.format(why=_esc(CUSTOM_SWEEP)) if r.custom_kernel else ""
        which = "selected" if r is chosen else "slow"
        body = [
            f"<p>{_esc(r.key)} on {_esc(r.chip_id)}, family {_esc(r.family)}</p>",
            f"<p>tiling: <code>{_esc(r.tiling_text)}</code>{badge}</p>" if r.tiling else "",
        ]
        if r.targets:
            trs = []
            for t, tt in r.targets.items():
                cmd = (
                    f"tiler search --op {rep.op} --chip {r.chip_id} --shape {_shape_arg(r.key)}"
                    f" --dtype {r.dtype} --target {t} --emit {t}"
                )
                trs.append(
                    f"<tr><td>{_esc(t)}</td><td>{'yes' if tt.runs else 'no'}</td><td>{_us(tt.time_us)}</td>"
                    f"<td>{_gap(tt.gap)}</td><td>{f'<code>{_esc(cmd)}</code>' if tt.runs else ''}</td></tr>"
                )
            body.append(
                "<table><thead><tr><th>target</th><th>can run</th><th>its best predicted time</th>"
                "<th>gap</th>"
                "<th>its code (add the sweep's --fix pins)</th></tr></thead><tbody>"
                + "".join(trs)
                + "</tbody></table>"
            )
        elif r.targets is not None:
            body.append('<p class="no">no target can run this row</p>')
        out.append(
            f'<details class="row" data-row="{r.label.split(" ", 1)[0][1:]}" data-which="{which}"'
            f"{' open' if r is chosen else ''}><summary><b>{_esc(r.label)}</b> ({which}): {_us(r.time_us)}, "
            f"{_esc(r.bound)}</summary>{''.join(body)}</details>"
        )
    return "\n".join(out)


STYLE = (
    "<style>body{font-family:system-ui,sans-serif;margin:1.5em;max-width:1200px}"
    "h1{font-size:1.3em}.meta{color:#555}table{border-collapse:collapse;margin:.3em 0 1em}"
    "th,td{border-bottom:1px solid #ddd;padding:.2em .5em;text-align:left;vertical-align:top;font-size:.9em}"
    "td.t{white-space:nowrap}td.tiling{min-width:22em}"
    "td.tiling code{white-space:normal;word-break:break-word}"
    "details.family{margin:.4em 0}summary{cursor:pointer}"
    "pre.code{overflow:auto;background:#f6f6f6;padding:.6em;font-size:.85em}"
    ".custom{background:#fde2e1;color:#8a1c12;padding:0 .4em;border-radius:3px;font-weight:600;"
    "white-space:nowrap}"
    ".no{color:#888}</style>"
)


def render(rep: Report, row: int | None = None) -> str:
    """The page: the three charts (plotly.js embedded once, in the first), the rows by family with their
    tilings and targets, the details (a document's code; a sweep's selected and slowest rows), the rows left
    out, the notes."""
    _plotly()
    if not rep.entries:
        why = f" ({rep.skipped[0]})" if rep.skipped else ""
        raise TilerError(f"RESULT: {rep.source}: no row with a predicted time to draw{why}")
    chosen = select_row(rep, row)
    colours = _colours(rep.entries)
    figs = [roofline_figure(rep, colours), times_figure(rep, colours), pipes_figure(rep, chosen)]
    config = {"displaylogo": False, "responsive": True}
    divs = [
        fig.to_html(full_html=False, include_plotlyjs=(i == 0), div_id=DIV_IDS[i], config=config)
        for i, fig in enumerate(figs)
    ]
    title = f"tiler report: {Path(rep.source).name}"
    items = "".join(f"<li>{html.escape(s)}</li>" for s in rep.skipped)
    notes = "".join(f"<li>{html.escape(s)}</li>" for s in rep.notes)
    chips = ", ".join(sorted({r.chip_id for r in rep.entries}))
    details = document_details(rep) if rep.kind == "document" else sweep_details(rep, chosen)
    from . import __version__

    return "\n".join(
        [
            "<!DOCTYPE html>",
            '<html lang="en"><head><meta charset="utf-8">',
            f"<title>{html.escape(title)}</title>",
            STYLE,
            "</head><body>",
            f"<h1>{html.escape(title)}</h1>",
            f'<p class="meta">{html.escape(rep.op)}: {len(rep.entries)} rows on {html.escape(chips)} '
            f"(from a {rep.kind}); per-pipe breakdown of {html.escape(chosen.label)}; tiler {__version__}. "
            '<a href="#tiler-rows">Rows and their tilings</a>, '
            f'<a href="#{"tiler-code" if rep.kind == "document" else "tiler-details"}">details</a>.</p>',
            *divs,
            rows_table(rep),
            details,
            f"<h2>Rows not drawn ({len(rep.skipped)})</h2><ul>{items}</ul>" if rep.skipped else "",
            f"<h2>Notes</h2><ul>{notes}</ul>" if rep.notes else "",
            "</body></html>",
            "",
        ]
    )


def write_report(result, out=None, row: int | None = None, hardware_dir=None) -> Path:
    """Read RESULT, draw the page and write it to `out` (default: RESULT with the suffix .html)."""
    from .io import check_writable, write_text

    _plotly()  # before any work: without plotly, one line naming the extra
    out = Path(out) if out is not None else Path(result).with_suffix(".html")
    if out.resolve() == Path(result).resolve():
        raise TilerError(f"--out: {out} is RESULT itself; give another file")
    check_writable(out, "--out")
    page = render(read_result(result, hardware_dir), row)
    return write_text(out, page, "--out")


__all__ = [
    "Report",
    "Row",
    "TargetTime",
    "name_family",
    "read_result",
    "render",
    "shape_family",
    "write_report",
]
