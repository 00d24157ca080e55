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

from .page import render, write_report
from .read import read_result
from .rows import Report, Row, TargetTime, name_family, shape_family

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
