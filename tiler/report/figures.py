"""The report's three plotly charts: the roofline, the predicted times by family, one row's pipes."""

from __future__ import annotations

import html
import math

from . import rows as _rows  # the page-size limits are read at call time (a test lowers them)
from .rows import (
    TRACE_ROOFLINE,
    TRACE_TARGET,
    Report,
    Row,
    _gap,
    _plotly,
    _us,
    families,
    tiling_text,
)


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
    large = len(rep.entries) > _rows.LARGE_ROWS
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
    if len(rep.entries) > _rows.LARGE_ROWS:
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
