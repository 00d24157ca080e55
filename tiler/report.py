"""`tiler report RESULT`: one self-contained HTML page of pictures for a sweep table or a search/explain document.

RESULT is a sweep output (CSV or Parquet: one row per problem and chip) or a `tiler.tiling/v1` JSON document
(`tiler search --format json` or `--export`, `tiler explain --format json`: the best tiling and its
alternatives). The page holds three plotly charts:

* Roofline: every row placed by arithmetic intensity (the problem's FLOPs / its compulsory bytes: each input read
  once, the output written once) and predicted throughput (FLOPs / predicted time), under each chip's roofline
  (peak `chip.peak_tflops(dtype)`, HBM bandwidth `hbm_gbps`), coloured by bound.
* Predicted time per row, a bar per row coloured by the bound the model names.
* The per-pipe breakdown of one row (the slowest by default, `--row N` for row #N as numbered in the page).

plotly is optional (`pip install 'tiler[report]'`); the page embeds plotly.js, so it opens offline and loads
nothing from the network. Rows a sweep could not solve (status error) are listed under the charts, not drawn.
"""

from __future__ import annotations

import html
import json
import math
from dataclasses import dataclass, field
from pathlib import Path

import click

from .errors import TilerError

INSTALL = "pip install 'tiler[report]'"
TRACE_ROOFLINE = "roofline"  # roofline line traces are named "roofline <chip> <dtype>"
DIV_IDS = ("tiler-roofline", "tiler-times", "tiler-pipes")


@dataclass
class Row:
    """One charted row: what it is, its predicted time and bound, its pipes and its place on the roofline."""

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

    @property
    def intensity(self) -> float:
        return self.flops / self.bytes if self.bytes > 0 else math.nan

    @property
    def tflops(self) -> float:
        return self.flops / (self.time_us * 1e-6) / 1e12 if self.time_us > 0 else math.nan


@dataclass
class Report:
    source: str
    kind: str  # "sweep" or "document"
    op: str
    entries: list[Row]
    skipped: list[str]  # rows not charted and why
    chips: dict  # chip id -> Chip (those that could be loaded)
    notes: list[str] = field(default_factory=list)


def _plotly():
    try:
        import plotly.graph_objects as go
    except ImportError:
        raise TilerError(f"report: needs plotly, which is not installed: {INSTALL}") from None
    return go


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

    if chip_id not in chips:
        try:
            chips[chip_id] = load_chip(chip_id, hardware_dir)
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


def read_sweep(path: Path, hardware_dir=None) -> Report:
    from .model.common import pipes as family_pipes
    from .model.common import pipes_of_row

    if path.suffix.lower() == ".parquet":
        import pandas as pd

        try:
            df = pd.read_parquet(path)
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
    chips: dict = {}
    notes: list[str] = []
    rows: list[Row] = []
    skipped: list[str] = []
    op = ""
    for i, rec in enumerate(df.to_dict("records")):
        where = f"line {i + 2}"
        name = rec.get("name")
        name = "" if name is None or (isinstance(name, float) and math.isnan(name)) else str(name)
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
        label = f"#{len(rows)} {name or key} @ {chip_id}"
        rows.append(
            Row(
                label,
                key,
                chip_id,
                problem.dtype,
                t,
                str(rec["bound"]),
                pipes,
                float(problem.flops),
                float(problem.compulsory_bytes),
                measured if math.isfinite(measured) else None,
            )
        )
    return Report(str(path), "sweep", op, rows, skipped, {k: v for k, v in chips.items() if v}, notes)


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
        best = Row(
            f"#0 {doc.get('search', {}).get('strategy') == 'given' and 'given' or 'best'}",
            problem.key(),
            chip_id,
            problem.dtype,
            float(est["time_us"]),
            str(est["bound"]),
            {str(p): float(v) for p, v in (est.get("pipes_us") or {}).items()},
            float(problem.flops),
            float(problem.compulsory_bytes),
        )
    except TilerError as exc:
        raise TilerError(f"RESULT: {path}: {exc}") from None
    except (KeyError, TypeError, ValueError, AttributeError) as exc:
        raise TilerError(
            f"RESULT: {path}: not a tiler.tiling/v1 document ({type(exc).__name__}: {exc})"
        ) from None
    meas = doc.get("measurement")
    if isinstance(meas, dict) and math.isfinite(_num(meas.get("measured_us"))):
        best.measured_us = _num(meas["measured_us"])
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
        label = f"#{i} alternative {i}"
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
        rows.append(
            Row(label, problem.key(), chip_id, problem.dtype, t, bound, pipes, best.flops, best.bytes)
        )
    return Report(str(path), "document", op, rows, skipped, {k: v for k, v in chips.items() if v}, notes)


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


def _hover(r: Row) -> str:
    text = f"{r.label}<br>{r.key} on {r.chip_id}<br>{r.time_us:.3f} us, bound {r.bound}"
    if r.measured_us is not None:
        text += f"<br>measured {r.measured_us:.3f} us"
    return text


def roofline_figure(rep: Report, colours: dict[str, str]):
    go = _plotly()
    fig = go.Figure()
    placed = [
        r for r in rep.entries if math.isfinite(r.intensity) and math.isfinite(r.tflops) and r.tflops > 0
    ]
    for bound, colour in colours.items():
        rs = [r for r in placed if r.bound == bound]
        if not rs:
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


def times_figure(rep: Report, colours: dict[str, str]):
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
    order = [r.label for r in rep.entries]
    fig.update_yaxes(categoryorder="array", categoryarray=order[::-1], title="")
    fig.update_xaxes(title="predicted time (us)")
    fig.update_layout(
        title="Predicted time per row, coloured by bound",
        height=max(320, 60 + 24 * len(rep.entries)),
        barmode="overlay",
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


def render(rep: Report, row: int | None = None) -> str:
    """The page: the three charts (plotly.js embedded once, in the first), the rows left out, the notes."""
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
    from . import __version__

    return "\n".join(
        [
            "<!DOCTYPE html>",
            '<html lang="en"><head><meta charset="utf-8">',
            f"<title>{html.escape(title)}</title>",
            "<style>body{font-family:system-ui,sans-serif;margin:1.5em;max-width:1200px}"
            "h1{font-size:1.3em}.meta{color:#555}</style>",
            "</head><body>",
            f"<h1>{html.escape(title)}</h1>",
            f'<p class="meta">{html.escape(rep.op)}: {len(rep.entries)} rows on {html.escape(chips)} '
            f"(from a {rep.kind}); per-pipe breakdown of {html.escape(chosen.label)}; tiler {__version__}</p>",
            *divs,
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


@click.command("report")
@click.argument("result", type=click.Path(dir_okay=True))
@click.option(
    "--out",
    "out_path",
    type=click.Path(dir_okay=False),
    default=None,
    help="The HTML file to write (folders are created); default: RESULT with the suffix .html.",
)
@click.option(
    "--row",
    type=int,
    default=None,
    help="The row whose per-pipe breakdown is drawn, as numbered in the page (#N); default: the slowest.",
)
@click.pass_context
def report_command(ctx, result, out_path, row):
    """Draw a sweep table or a search/explain JSON document as one self-contained HTML page: a roofline, the
    predicted time of every row coloured by bound, and one row's per-pipe breakdown (needs tiler[report])."""
    hw = (ctx.obj or {}).get("hardware_dir")
    path = write_report(result, out_path, row, hw)
    click.echo(f"wrote {path}", err=True)


__all__ = ["Report", "Row", "read_result", "render", "report_command", "write_report"]
