"""The report's HTML page: the charts, the rows' table by family, the details, written atomically."""

from __future__ import annotations

import html
import json
from pathlib import Path

from ..errors import TilerError
from . import rows as _rows  # the page-size limits are read at call time (a test lowers them)
from .figures import _colours, pipes_figure, roofline_figure, times_figure
from .read import read_result
from .rows import (
    DIV_IDS,
    OPEN_ROWS,
    SLOWEST,
    Report,
    Row,
    _gap,
    _plotly,
    _us,
    families,
    tiling_text,
)


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
    from ..export import emit_code
    from ..operator import get_operator

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
    if len(rep.entries) > _rows.LARGE_ROWS:  # a summary per family, then the slowest rows only
        out.append(
            f"<p>{len(rep.entries)} rows: a summary per family, then the {_rows.TABLE_ROWS} slowest rows "
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
        slow = sorted(rep.entries, key=lambda r: -r.time_us)[: _rows.TABLE_ROWS]
        groups = [(f"the {_rows.TABLE_ROWS} slowest rows", slow)]
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
    from .. import __version__

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
    from ..io import check_writable, write_text

    _plotly()  # before any work: without plotly, one line naming the extra
    out = Path(out) if out is not None else Path(result).with_suffix(".html")
    if out.resolve() == Path(result).resolve():
        raise TilerError(f"--out: {out} is RESULT itself; give another file")
    check_writable(out, "--out")
    page = render(read_result(result, hardware_dir), row)
    return write_text(out, page, "--out")
